"""Keys copy whole: the random part is letters and digits only, and keys issued earlier (URL-safe
characters, `-` and `_` among them) still authenticate."""

from __future__ import annotations

import re

import pytest

from edge.keys import KEY_LENGTH, PREFIXES, looks_like_key, new_key
from edge.release import LocalReleases
from edge.stores.sqlite import SQLiteKeyStore
from tests.conftest import NOW
from tests.edge.test_gate import code_of, get


@pytest.fixture
def release(release_root):
    return LocalReleases(release_root).current()


@pytest.mark.parametrize("kind", sorted(PREFIXES))
def test_new_keys_are_letters_and_digits_after_the_prefix(kind: str):
    keys = [new_key(kind) for _ in range(300)]
    for key in keys:
        assert key.startswith(PREFIXES[kind])
        assert re.fullmatch(f"[A-Za-z0-9]{{{KEY_LENGTH}}}", key[len(PREFIXES[kind]):]), key
        assert looks_like_key(key)
    assert len(set(keys)) == len(keys)
    # with 300 keys of 32 characters every one of the 62 characters turns up: the alphabet is the whole of it
    assert set("".join(k[len(PREFIXES[kind]):] for k in keys)) == set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def test_a_key_of_the_earlier_format_still_authenticates(release, tmp_path, monkeypatch):
    """A key issued before the change (its random part holds `-` and `_`) is stored by its hash like
    any other; the gate's pattern and the store's lookup both still take it."""
    old = "svc_live_" + "Ab-_" * 8
    assert len(old) == len("svc_live_") + KEY_LENGTH and looks_like_key(old)
    import edge.stores.sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "new_key", lambda kind: old)
    store = SQLiteKeyStore(tmp_path / "keys.sqlite")
    _, key = store.create("earlier key", ["risk_scores"], kind="live", now=NOW)
    assert key == old
    assert get(release, store, "/v1/periods", "", old).status == 200
    # a near miss of the same key is still refused: the lookup is by the whole key's hash
    near = old[:-1] + "B"
    assert code_of(get(release, store, "/v1/periods", "", near)) == "API_KEY_INVALID"
