"""Key and limit-counter stores, opened from one spec string.

Key administration (`malaria-risk keys …`) and both runtimes open stores here, so
administering keys never imports a server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CDN function imports this package (for .dynamodb) and needs neither
    from pathlib import Path

    from ..keys import AdminStore
    from ..limits import Counter


def sqlite_path(spec: str) -> Path | None:
    """The file a store spec names, or None for a store that is not a local file."""
    from pathlib import Path

    kind, sep, rest = spec.partition(":")
    if sep and kind == "dynamodb":
        return None
    return Path(rest if sep and kind == "sqlite" else spec)


def store_inside_build_root(spec: str, root: Path | None) -> str | None:
    """Why a local key store must not live where it names, or None when it may.

    Everything under a build root is what gets served and published, so a key store
    there could leave the machine with a release. With `root`, anything under it is
    refused; without, any directory that looks like a build root (it holds `releases/`
    or `current`).
    """
    from pathlib import Path

    path = sqlite_path(spec)
    if path is None:
        return None
    resolved = path.resolve()
    if root is not None:
        if resolved.is_relative_to(Path(root).resolve()):
            return f"the key store {path} is inside the build root {root}, which is what gets published; keep it outside (default var/keys.sqlite)"
        return None
    for parent in resolved.parents:
        if (parent / "releases").is_dir() or (parent / "current").is_symlink():
            return f"the key store {path} is inside {parent}, a build root (what gets published); keep it outside (default var/keys.sqlite)"
    return None


def open_keys(spec: str) -> AdminStore:
    """The key store alone, for key administration: it never opens the limit counters (so a
    read-only or damaged counters file does not stop `keys list`)."""
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in ("sqlite", "dynamodb"):
        kind, rest = "sqlite", spec
    if kind == "dynamodb":
        from .dynamodb import DynamoDBKeyStore

        return DynamoDBKeyStore.from_env(rest)
    from .sqlite import SQLiteKeyStore

    return SQLiteKeyStore(rest)


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
