"""The local key store: private files, never inside a build root, revocation seen at once."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from edge.keys import hash_key
from edge.stores import open_store, store_inside_build_root
from edge.stores.counters import SQLiteCounter
from edge.stores.sqlite import ChangeAwareKeyCache, SQLiteKeyStore
from pipeline.cli import main
from tests.paths import REPO_ROOT


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_key_store_and_side_files_are_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import os

    old = os.umask(0o022)
    try:
        store, counter = open_store(f"sqlite:{tmp_path / 'var' / 'keys.sqlite'}")
        _, key = store.create("k", ["risk_scores"], "live")
        cache = ChangeAwareKeyCache(store, store.path)
        assert cache.lookup(hash_key(key)) is not None  # -wal and -shm exist while connections are open
        SQLiteCounter(tmp_path / "var" / "keys.counters.sqlite").incr("x", 2**40)
    finally:
        os.umask(old)
    files = sorted((tmp_path / "var").iterdir())
    names = {p.name for p in files}
    assert {"keys.sqlite", "keys.sqlite-wal", "keys.sqlite-shm", "keys.counters.map",
            "keys.counters.sqlite", "keys.counters.sqlite.lock"} <= names
    assert {p.name: oct(mode(p)) for p in files} == {p.name: "0o600" for p in files}
    assert mode(tmp_path / "var") == 0o700


def test_an_existing_world_readable_store_is_narrowed(tmp_path: Path):
    path = tmp_path / "keys.sqlite"
    SQLiteKeyStore(path)
    path.chmod(0o644)
    SQLiteKeyStore(path)
    assert mode(path) == 0o600


def test_a_key_store_inside_the_build_root_is_refused(tmp_path: Path, release_root: Path):
    inside = release_root / "keys.sqlite"
    assert store_inside_build_root(f"sqlite:{inside}", release_root)
    assert store_inside_build_root(str(inside), None)  # found by shape: releases/ beside it
    assert store_inside_build_root(f"sqlite:{tmp_path / 'var' / 'k.sqlite'}", release_root) is None
    assert store_inside_build_root("dynamodb:svc-", release_root) is None
    r = CliRunner().invoke(main, ["serve", "--root", str(release_root), "--keys", str(inside)])
    assert r.exit_code == 1 and "inside the build root" in r.output and not inside.exists()
    r = CliRunner().invoke(main, ["keys", "create", "--name", "x", "--scope", "risk_scores", "--keys", str(inside)])
    assert r.exit_code == 1 and "build root" in r.output and not inside.exists()


def test_revocation_in_another_process_is_seen_by_the_very_next_lookup(tmp_path: Path):
    """The WAL-index pre-check never hides a commit: each revocation is seen at once, whether
    made by another process or by another connection in quick succession."""
    store = SQLiteKeyStore(tmp_path / "keys.sqlite")
    cache = ChangeAwareKeyCache(store, store.path)
    other = SQLiteKeyStore(tmp_path / "keys.sqlite")
    keys = [store.create(f"k{i}", ["risk_scores"], "live") for i in range(43)]
    cache.lookup(hash_key(keys[0][1]))
    assert cache._state().shm is not None  # the pre-check is in use, not only the pragma
    for kid, key in keys[3:]:
        assert not cache.lookup(hash_key(key)).revoked
        other.revoke(kid)
        assert cache.lookup(hash_key(key)).revoked
    for kid, key in keys[:3]:
        assert not cache.lookup(hash_key(key)).revoked  # cached now
        assert not cache.lookup(hash_key(key)).revoked
        subprocess.run([sys.executable, "-c", "import sys; from edge.stores.sqlite import SQLiteKeyStore; "
                        f"SQLiteKeyStore(sys.argv[1]).revoke({kid!r})", str(store.path)],
                       check=True, cwd=REPO_ROOT)
        assert cache.lookup(hash_key(key)).revoked


def test_key_administration_never_opens_the_limit_counters(tmp_path: Path):
    """`keys …` works whatever state the counters file is in: here it cannot even be opened."""
    keys = tmp_path / "var" / "keys.sqlite"
    counters_path = tmp_path / "var" / "keys.counters.map"
    counters_path.mkdir(parents=True)  # opening it for writing fails, as a read-only file would for a non-root user
    r = CliRunner().invoke(main, ["keys", "create", "--name", "k", "--scope", "risk_scores", "--keys", str(keys)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["keys", "list", "--keys", str(keys)])
    assert r.exit_code == 0 and "k" in r.output, r.output
    counters_path.rmdir()
    r = CliRunner().invoke(main, ["keys", "list", "--keys", str(keys)])
    assert r.exit_code == 0 and not counters_path.exists()


def _serve(root: Path, keys: Path, workers: int, log: Path):  # type: ignore[no-untyped-def]
    from tests.conftest import free_port, wait_until_up

    port = free_port()
    with log.open("wb") as err:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("malaria-risk")), "serve", "--root", str(root),
                                 "--port", str(port), "--keys", str(keys), "--workers", str(workers)],
                                stdout=subprocess.DEVNULL, stderr=err)
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url + "/docs/", proc, "malaria-risk serve")
    return proc, url


@pytest.mark.parametrize("workers", [1, 2])
def test_a_restored_backup_is_read_on_the_very_next_request(release_root: Path, tmp_path: Path, workers: int):
    """`mv backup keys.sqlite` while the server runs: a key revoked in the backup answers 401 at once,
    from every worker, although the live file's WAL still holds newer pages of the old file."""
    import sqlite3

    import httpx

    keys = tmp_path / "var" / "keys.sqlite"
    live = SQLiteKeyStore(keys)
    kid, key = live.create("k", ["risk_scores"], "live")
    proc, url = _serve(release_root, keys, workers, tmp_path / "server.log")
    try:
        auth = {"Authorization": f"Bearer {key}", "Connection": "close"}
        for _ in range(6):  # every worker has the key cached
            assert httpx.get(url + "/v1/periods", headers=auth).status_code == 200
        backup = tmp_path / "backup.sqlite"
        with sqlite3.connect(keys) as src, sqlite3.connect(backup) as dst:
            src.backup(dst)
        restored = SQLiteKeyStore(backup)
        restored.revoke(kid)
        restored.reconnect()  # closed: its last connection writes the WAL back into the file
        for i in range(20):  # the live store moves on: its WAL holds pages the backup lacks
            live.create(f"later-{i}", ["risk_scores"], "test")
        os.replace(backup, keys)
        codes = [httpx.get(url + "/v1/periods", headers=auth) for _ in range(8)]
        assert [r.status_code for r in codes] == [401] * 8
        assert {r.json()["code"] for r in codes} == {"API_KEY_REVOKED"}
        # the restored store is the live one from now on: a key made in it works, a revocation is seen at once
        kid2, key2 = SQLiteKeyStore(keys).create("after", ["risk_scores"], "test")
        auth2 = {"Authorization": f"Bearer {key2}", "Connection": "close"}
        assert [httpx.get(url + "/v1/periods", headers=auth2).status_code for _ in range(4)] == [200] * 4
        SQLiteKeyStore(keys).revoke(kid2)
        assert [httpx.get(url + "/v1/periods", headers=auth2).status_code for _ in range(4)] == [401] * 4
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "was replaced" in (tmp_path / "server.log").read_text()


def test_a_removed_store_fails_closed_and_recovers_when_restored(release_root: Path, tmp_path: Path):
    import shutil

    import httpx

    keys = tmp_path / "var" / "keys.sqlite"
    _, key = SQLiteKeyStore(keys).create("k", ["risk_scores"], "live")
    proc, url = _serve(release_root, keys, 2, tmp_path / "server.log")
    try:
        auth = {"Authorization": f"Bearer {key}", "Connection": "close"}
        assert httpx.get(url + "/v1/periods", headers=auth).status_code == 200
        saved = tmp_path / "saved"
        saved.mkdir()
        with __import__("sqlite3").connect(keys) as src, __import__("sqlite3").connect(saved / "k.sqlite") as dst:
            src.backup(dst)
        for p in keys.parent.glob("keys.sqlite*"):
            p.unlink()
        for _ in range(6):
            r = httpx.get(url + "/v1/periods", headers=auth)
            assert r.status_code == 503 and r.json()["code"] == "TEMPORARILY_UNAVAILABLE", r.text
            assert int(r.headers["retry-after"]) >= 1
            assert httpx.get(url + "/docs/index.html", headers={"Connection": "close"}).status_code == 200
        assert not keys.exists()  # no empty store was created in its place
        shutil.copy(saved / "k.sqlite", keys)
        assert [httpx.get(url + "/v1/periods", headers=auth).status_code for _ in range(6)] == [200] * 6
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "is missing" in (tmp_path / "server.log").read_text()


def restore_a_backup_that_revoked(keys: Path, live: SQLiteKeyStore, kid: str) -> None:
    """`mv backup keys.sqlite`: a backup in which `kid` is revoked replaces the store, while the old
    file's WAL still holds pages the backup lacks."""
    import sqlite3

    backup = keys.with_name("backup.sqlite")
    with sqlite3.connect(keys) as src, sqlite3.connect(backup) as dst:
        src.backup(dst)
    restored = SQLiteKeyStore(backup)
    restored.revoke(kid)
    restored.reconnect()
    for i in range(20):
        live.create(f"later-{i}", ["risk_scores"], "test")
    assert Path(str(keys) + "-wal").stat().st_size > 0
    os.replace(backup, keys)


def test_a_thread_that_first_reads_after_a_restore_reads_the_restored_file(tmp_path: Path):
    """A worker thread whose first lookup comes after `mv backup keys.sqlite` must not open the
    new file beside the old file's WAL (SQLite would replay the old pages onto it: a revoked key
    would live again). Another thread of the same process read the old file first."""
    import threading

    keys = tmp_path / "keys.sqlite"
    live = SQLiteKeyStore(keys)
    kid, key = live.create("k", ["risk_scores"], "live")
    cache = ChangeAwareKeyCache(SQLiteKeyStore(keys), keys)
    assert not cache.lookup(hash_key(key)).revoked  # this thread knows the old file
    restore_a_backup_that_revoked(keys, live, kid)
    seen: list[bool] = []
    worker = threading.Thread(target=lambda: seen.append(cache.lookup(hash_key(key)).revoked))
    worker.start()
    worker.join(timeout=30)
    assert seen == [True]
    assert cache.lookup(hash_key(key)).revoked  # and the first thread moves over too


def test_a_worker_whose_first_lookup_comes_after_a_restore_reads_the_restored_file(tmp_path: Path):
    """A server worker that has answered no keyed request yet when `mv backup keys.sqlite` happens
    (with two workers, the other may have had every request): its first lookup must not open the
    new file beside the old file's WAL. Its cache was made before the restore, so it knows the file
    it started with."""
    keys = tmp_path / "keys.sqlite"
    live = SQLiteKeyStore(keys)
    kid, key = live.create("k", ["risk_scores"], "live")
    cache = ChangeAwareKeyCache(SQLiteKeyStore(keys), keys)  # the worker starts; no lookup yet
    restore_a_backup_that_revoked(keys, live, kid)
    assert cache.lookup(hash_key(key)).revoked
