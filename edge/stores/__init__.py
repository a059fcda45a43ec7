"""Key and limit-counter stores, opened from one spec string.

Key administration (`malaria-risk keys …`) and both runtimes open stores here, so
administering keys never imports a server.
"""

from __future__ import annotations

from ..keys import AdminStore
from ..limits import Counter


def open_store(spec: str, counters: str | None = None) -> tuple[AdminStore, Counter]:
    """`sqlite:PATH` or `dynamodb:TABLE_PREFIX` → (key store with admin methods, limit counter).

    A bare path means `sqlite:PATH`, so `--keys var/keys.sqlite` keeps working. `counters`
    chooses the local counter file; a path ending in `.sqlite` selects the SQLite counters.
    """
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in ("sqlite", "dynamodb"):
        kind, rest = "sqlite", spec
    if kind == "dynamodb":
        from .dynamodb import DynamoDBCounter, DynamoDBKeyStore

        store = DynamoDBKeyStore.from_env(rest)
        return store, DynamoDBCounter(store.counters_table)
    from .counters import MappedCounter, SQLiteCounter, mapped_counters_path_for
    from .sqlite import SQLiteKeyStore

    if counters and counters.endswith(".sqlite"):
        return SQLiteKeyStore(rest), SQLiteCounter(counters)
    return SQLiteKeyStore(rest), MappedCounter(counters or mapped_counters_path_for(rest))
