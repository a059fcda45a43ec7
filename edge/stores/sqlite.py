"""SQLite key store: the embedded default for one machine.

Lives at `var/keys.sqlite`, never under `build/` (which is what gets published).
The gate reads through `lookup` on every request, uncached, so a revocation, a
suspension or a removed account takes effect on the very next request.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import mmap
import os
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..keys import (
    PREFIXES,
    AdminError,
    KeyRecord,
    KeyStore,
    hash_key,
    key_id_of,
    new_key,
    validate_new_key,
)
from ..routes import SCOPES

__all__ = ["AdminError", "ChangeAwareKeyCache", "KeyStoreUnavailable", "SQLiteFile", "SQLiteKeyStore", "connect"]  # AdminError: for the CLI
log = logging.getLogger("malaria_risk.keys")

SCHEMA = """
CREATE TABLE IF NOT EXISTS orgs (
    org TEXT PRIMARY KEY,
    suspended_at TEXT
);
CREATE TABLE IF NOT EXISTS accounts (
    account TEXT PRIMARY KEY,
    removed_at TEXT
);
CREATE TABLE IF NOT EXISTS keys (
    id TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    last4 TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('live', 'test')),
    scopes TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_on TEXT,
    revoked_at TEXT,
    owner TEXT,
    org TEXT,
    per_minute INTEGER,
    monthly INTEGER,
    created_by TEXT
);
"""

# added after the first release of the schema: existing files gain them on open
LATER_COLUMNS = {"created_by": "TEXT"}
INDEXES = """
CREATE INDEX IF NOT EXISTS keys_by_org ON keys (org, created_at) WHERE org IS NOT NULL;
CREATE INDEX IF NOT EXISTS keys_by_owner ON keys (owner, created_at) WHERE owner IS NOT NULL;
"""

ROW_COLUMNS = ("id", "name", "kind", "scopes", "owner", "org", "expires_on", "prefix", "last4", "created_at",
               "created_by", "revoked_at", "key_hash")

LOOKUP = """
SELECT k.id, k.name, k.kind, k.scopes, k.revoked_at, k.expires_on, k.owner, k.org,
       a.removed_at, o.suspended_at, k.per_minute, k.monthly
FROM keys k
LEFT JOIN accounts a ON a.account = k.owner
LEFT JOIN orgs o ON o.org = k.org
WHERE k.key_hash = ?
"""


def create_private(path: Path) -> None:
    """Create `path` (and a missing parent) readable by its owner only, and narrow an existing
    file that others can read. SQLite creates its -wal and -shm side files with the main
    file's permissions, so they follow.

    An existing file is never opened here: closing any descriptor of a database file drops
    every POSIX lock this process holds on it, including the shared lock by which its open
    connections keep another process from deleting the WAL under them.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + "-journal"):
        with contextlib.suppress(FileNotFoundError):
            side = path.with_name(name)
            if side.stat().st_mode & 0o077:
                side.chmod(0o600)


def connect(path: Path, timeout: float = 10, synchronous: str | None = None) -> sqlite3.Connection:
    """A connection in WAL mode that waits `timeout` seconds for a lock (autocommit: callers
    open their own transactions)."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    if synchronous is not None:
        conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    return conn


class SQLiteFile:
    """A private SQLite file with one connection per thread (sqlite3 connections must not cross
    threads): the base of the key store, the limit counters and the dashboard's store."""

    timeout: float = 10

    def __init__(self, path: Path | str):
        self.path = Path(path)
        create_private(self.path)
        self._local = threading.local()

    def _open(self) -> sqlite3.Connection:
        return connect(self.path, self.timeout)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
        return conn


class SQLiteKeyStore(SQLiteFile):
    def __init__(self, path: Path | str):
        super().__init__(path)
        with self._conn() as c:
            c.executescript(SCHEMA)
            have = {row[1] for row in c.execute("PRAGMA table_info(keys)")}
            for column, kind in LATER_COLUMNS.items():
                if column not in have:
                    c.execute(f"ALTER TABLE keys ADD COLUMN {column} {kind}")
            c.executescript(INDEXES)

    def reconnect(self) -> None:
        """Close this thread's connection; the next call opens the file now at the path."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- read side (the gate) -----------------------------------------------------
    def lookup(self, key_hash: str) -> KeyRecord | None:
        row = self._conn().execute(LOOKUP, (key_hash,)).fetchone()
        if row is None:
            return None
        (kid, name, kind, scopes, revoked_at, expires_on, owner, org, removed_at, suspended_at,
         per_minute, monthly) = row
        return KeyRecord(
            id=kid, name=name, kind=kind, scopes=tuple(scopes.split()) if scopes else (),
            revoked=revoked_at is not None, expires_on=expires_on, owner=owner, org=org,
            owner_removed=removed_at is not None, org_suspended=suspended_at is not None,
            per_minute=per_minute, monthly=monthly,
        )

    # -- admin side (the dashboard's job, as a CLI) -----------------------------------
    def create(
        self,
        name: str,
        scopes: list[str],
        kind: str = "test",
        expires_on: str | None = None,
        owner: str | None = None,
        org: str | None = None,
        per_minute: int | None = None,
        monthly: int | None = None,
        now: datetime | None = None,
        created_by: str | None = None,
        key: str | None = None,
    ) -> tuple[str, str]:
        """Create a key; returns (key id, the key itself). The key is not stored and never shown again.

        An organisation's key has no `owner` (it belongs to the organisation, so removing the
        account that made it leaves it working); `created_by` records who made it. `key`: one made
        beforehand (`edge.keys.new_key`), so the dashboard can journal the key id before the write.
        """
        now = now or datetime.now(UTC)
        validate_new_key(name, scopes, kind, expires_on, per_minute, monthly, now, SCOPES)
        if owner is not None and self._removed(owner):
            raise AdminError(f"account {owner!r} was removed; it cannot own new keys")
        key = key or new_key(kind)
        kid = key_id_of(key)
        with self._conn() as c:
            c.execute(
                "INSERT INTO keys (id, key_hash, prefix, last4, name, kind, scopes, created_at,"
                " expires_on, owner, org, per_minute, monthly, created_by) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (kid, hash_key(key), PREFIXES[kind], key[-4:], name, kind, " ".join(sorted(set(scopes))),
                 now.isoformat(timespec="seconds"), expires_on, owner, org, per_minute, monthly, created_by),
            )
        return kid, key

    def _removed(self, account: str) -> bool:
        row = self._conn().execute("SELECT removed_at FROM accounts WHERE account=?", (account,)).fetchone()
        return row is not None and row[0] is not None

    def list(self, now: datetime | None = None) -> list[dict[str, Any]]:
        now = now or datetime.now(UTC)
        rows = self._conn().execute(
            "SELECT k.id, k.name, k.kind, k.scopes, k.owner, k.org, k.expires_on, k.prefix, k.last4,"
            " k.key_hash FROM keys k ORDER BY k.created_at, k.id"
        ).fetchall()
        out = []
        for kid, name, kind, scopes, owner, org, expires_on, prefix, last4, key_hash in rows:
            record = self.lookup(key_hash)
            assert record is not None
            out.append({
                "id": kid, "name": name, "kind": kind, "scopes": scopes, "status": record.status(now),
                "owner": owner, "org": org, "expires_on": expires_on, "hint": f"{prefix}…{last4}",
            })
        return out

    def revoke(self, key_id: str, now: datetime | None = None, *, org: str | None = None,
               owner: str | None = None) -> None:
        """Revoke a key. With `org` (or `owner`) only a key of that organisation (or that
        account's own key) is touched: anyone else's id answers as if it did not exist."""
        now = now or datetime.now(UTC)
        where, args = _holder(org, owner)
        with self._conn() as c:
            cur = c.execute(
                f"UPDATE keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?{where}",
                (now.isoformat(timespec="seconds"), key_id, *args),
            )
            if cur.rowcount == 0:
                raise AdminError(f"no key with id {key_id!r} (see `keys list`)")

    def shorten_expiry(self, key_id: str, expires_on: str, *, org: str | None = None,
                       owner: str | None = None) -> None:
        """Bring a key's expiry forward to `expires_on` (a roll's grace period), never later than it was."""
        where, args = _holder(org, owner)
        with self._conn() as c:
            cur = c.execute(
                f"UPDATE keys SET expires_on = ? WHERE id = ? AND revoked_at IS NULL"
                f" AND (expires_on IS NULL OR expires_on >= ?){where}",
                (expires_on, key_id, expires_on, *args),
            )
            if cur.rowcount == 0:
                raise AdminError(f"key {key_id!r} cannot be given an expiry of {expires_on}")

    def get(self, key_id: str, *, org: str | None = None, owner: str | None = None,
            now: datetime | None = None) -> dict[str, Any] | None:
        """One key's row (as `list_for` gives it), or None when it is not the holder's."""
        where, args = _holder(org, owner)
        rows = self._rows(f"WHERE keys.id = ?{where}", (key_id, *args), now)
        return rows[0] if rows else None

    def list_for(self, *, org: str | None = None, owner: str | None = None,
                 now: datetime | None = None) -> builtins.list[dict[str, Any]]:
        """An organisation's keys, or an account's own keys, newest first (indexed, no full read)."""
        if org is None and owner is None:
            raise AdminError("list_for needs an organisation or an owner")
        where, args = _holder(org, owner)
        return self._rows("WHERE 1=1" + where, args, now)

    def _rows(self, where: str, args: tuple[str, ...], now: datetime | None) -> builtins.list[dict[str, Any]]:
        now = now or datetime.now(UTC)
        cols = ", ".join(f"keys.{c}" for c in ROW_COLUMNS)
        found = self._conn().execute(
            f"SELECT {cols}, a.removed_at, o.suspended_at FROM keys LEFT JOIN accounts a ON a.account = keys.owner"
            f" LEFT JOIN orgs o ON o.org = keys.org {where} ORDER BY keys.created_at DESC, keys.id", args).fetchall()
        out = []
        for row in found:
            r = dict(zip(ROW_COLUMNS, row[:len(ROW_COLUMNS)], strict=True))
            removed_at, suspended_at = row[len(ROW_COLUMNS):]
            record = KeyRecord(id=r["id"], name=r["name"], kind=r["kind"], scopes=tuple(r["scopes"].split()),
                               revoked=r["revoked_at"] is not None, expires_on=r["expires_on"],
                               owner=r["owner"], org=r["org"], owner_removed=removed_at is not None,
                               org_suspended=suspended_at is not None)
            r["status"] = record.status(now)
            r["hint"] = f"{r.pop('prefix')}…{r.pop('last4')}"
            del r["key_hash"]
            out.append(r)
        return out

    def set_org_suspended(self, org: str, suspended: bool, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        with self._conn() as c:
            known = c.execute("SELECT 1 FROM keys WHERE org=? UNION SELECT 1 FROM orgs WHERE org=?",
                              (org, org)).fetchone()
            if known is None:
                raise AdminError(f"no organisation {org!r} owns any key")
            c.execute(
                "INSERT INTO orgs (org, suspended_at) VALUES (?, ?)"
                " ON CONFLICT(org) DO UPDATE SET suspended_at = excluded.suspended_at",
                (org, now.isoformat(timespec="seconds") if suspended else None),
            )

    def remove_account(self, account: str, now: datetime | None = None, *, require_keys: bool = True) -> None:
        """Mark an account removed: its own keys answer 401. The dashboard, which knows accounts
        that own no key, passes `require_keys=False`."""
        now = now or datetime.now(UTC)
        with self._conn() as c:
            known = c.execute("SELECT 1 FROM keys WHERE owner=?", (account,)).fetchone()
            if known is None and require_keys:
                raise AdminError(f"no account {account!r} owns any key")
            c.execute(
                "INSERT INTO accounts (account, removed_at) VALUES (?, ?)"
                " ON CONFLICT(account) DO UPDATE SET removed_at = excluded.removed_at",
                (account, now.isoformat(timespec="seconds")),
            )


class KeyStoreUnavailable(RuntimeError):
    """The key store file is missing: no key can be checked, so the server answers 503 (fail closed)."""

    retry_after = 5


def _holder(org: str | None, owner: str | None) -> tuple[str, tuple[str, ...]]:
    """The SQL condition that limits a statement to one holder's keys (none: any key, the operator)."""
    if org is not None:
        return " AND keys.org = ?", (org,)
    if owner is not None:
        return " AND keys.owner = ? AND keys.org IS NULL", (owner,)
    return "", ()


class ChangeAwareKeyCache:
    """Key records cached in-process, dropped the moment the SQLite key file changes.

    `PRAGMA data_version` changes whenever another connection (any thread or process)
    commits to the file, so a revocation, suspension or removal made by `malaria-risk
    keys …` empties the cache before the next request is decided: revocation stays
    immediate (bound: zero requests), while an unchanged file costs a cheap check instead
    of a three-table join. Expiry needs no invalidation: the gate evaluates
    `record.status(now)` on every request. Counters must live in another file, or their
    commits would empty the cache on every request (see edge/stores/counters.py).

    The check itself: the pragma costs about 3 µs (a statement run through SQLite). In WAL
    mode every commit rewrites the WAL-index header at the start of the `-shm` file, the
    very bytes SQLite's own readers compare to learn that the database changed. So the
    header's first copy (48 bytes) is read from a read-only mapping of that file, and the
    pragma is run only when it differs from the last one seen (read before the pragma, so
    a commit landing between the two is caught by the next request). Without WAL or a
    `-shm` file, the pragma runs on every lookup, as before.

    A commit is not the only change: the file itself can be replaced (a backup restored
    with `mv`) or removed. Neither shows in `data_version`, since connections keep reading
    the file they opened. So every lookup also stats the path (one system call) and
    compares its identity (inode, device) with the file the connections have open:

    * replaced: the connections are closed and reopened on the new file, the cache
      emptied, before this request is decided. The `-wal` and `-shm` beside it belong to the
      old file while any process still has that open, and SQLite would read the old
      file's pages from them into the new one; so side files older than the replacement
      are set aside first (under a lock, so one process does it), see `_reopen`;
    * removed: `KeyStoreUnavailable` (the server answers 503, logged) until a file is
      back at the path; never an empty store silently created in its place.
    """

    def __init__(self, inner: KeyStore, path: Path | str, max_items: int = 10_000):
        self.inner = inner
        self.path = Path(path)
        self.max_items = max_items
        self._local = threading.local()
        self._missing_logged = False
        # the file this process last read, whichever thread read it: a thread that opens its first
        # connection after a replacement must set the old file's WAL aside too, or SQLite would
        # replay the old file's pages onto the new one. Taken when the cache is made (a worker's
        # start), not at its first lookup: a worker that answered no keyed request before a restore
        # must still see that the file changed under it.
        self._known: tuple[int, int] | None = None
        with contextlib.suppress(OSError):
            found = os.stat(self.path)
            self._known = (found.st_ino, found.st_dev)

    def _state(self) -> _CacheState:
        st: _CacheState | None = getattr(self._local, "st", None)
        if st is None:
            identity = self._identity()
            if self._known is not None and identity != self._known:
                self._set_aside_under_lock()
                reconnect = getattr(self.inner, "reconnect", None)
                if reconnect is not None:  # the store's own connection may still hold the old file
                    reconnect()
            self._known = identity
            conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            st = _CacheState(conn, {}, -1, _map_wal_index(conn, self.path), b"", identity)
            self._local.st = st
        return st

    def _identity(self) -> tuple[int, int]:
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            if not self._missing_logged:
                self._missing_logged = True
                log.error("key store %s is missing: keyed requests answer 503 until it is restored", self.path)
            raise KeyStoreUnavailable(f"{self.path} is missing") from None
        if self._missing_logged:
            self._missing_logged = False
            log.warning("key store %s is back", self.path)
        return found.st_ino, found.st_dev

    def lookup(self, key_hash: str) -> KeyRecord | None:
        st = self._state()
        if self._identity() != st.identity:
            st = self._reopen(st)
        cache = st.cache
        shm = st.shm
        header = shm[:_WAL_HEADER] if shm is not None else None
        if header is None or header != st.header:
            if header is not None:
                st.header = header
            v = st.conn.execute("PRAGMA data_version").fetchone()[0]
            if v != st.version:
                cache.clear()
                st.version = v
        try:
            return cache[key_hash]
        except KeyError:
            pass
        record: KeyRecord | None = self.inner.lookup(key_hash)
        if len(cache) >= self.max_items:
            cache.clear()
        # only known keys are cached: a flood of random keys must not evict real ones
        if record is not None:
            cache[key_hash] = record
        return record

    def _reopen(self, old: _CacheState) -> _CacheState:
        """This thread's connections, moved to the file now at the path (see the class docstring)."""
        import fcntl

        old.conn.close()
        reconnect = getattr(self.inner, "reconnect", None)
        if reconnect is not None:
            reconnect()
        self._local.st = None
        lock_fd = os.open(str(self.path) + "-replaced.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            _set_aside_stale_side_files(self.path)
            self._known = None  # adopted here, under the lock
            st = self._state()
        finally:
            os.close(lock_fd)
        log.warning("key store %s was replaced (a new file at the path); reading keys from the new file", self.path)
        return st

    def _set_aside_under_lock(self) -> None:
        import fcntl

        lock_fd = os.open(str(self.path) + "-replaced.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            _set_aside_stale_side_files(self.path)
        finally:
            os.close(lock_fd)
        log.warning("key store %s was replaced (a new file at the path); reading keys from the new file", self.path)

    def __getattr__(self, name: str) -> Any:  # admin methods pass straight through
        return getattr(self.inner, name)


def _set_aside_stale_side_files(path: Path) -> None:
    """Move a `-wal` written before the file at `path` arrived there (and its `-shm` index) out of the way.

    A rename sets the moved file's ctime, and the old file's WAL was last written before
    it; a WAL the new file uses is created or written after. When the WAL goes, its index
    goes with it (SQLite rebuilds the index from the WAL, or starts both afresh).
    """
    try:
        main = os.stat(path)
    except FileNotFoundError:
        return
    wal = Path(str(path) + "-wal")
    shm = Path(str(path) + "-shm")
    try:
        stale = os.stat(wal).st_mtime_ns <= main.st_ctime_ns
    except FileNotFoundError:
        stale = True
    if not stale:
        return
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    with contextlib.suppress(FileNotFoundError):
        os.rename(wal, wal.with_name(f"{wal.name}.stale-{stamp}"))
        log.warning("set aside %s: it was written by the key store file that was replaced", wal)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(shm)


_WAL_HEADER = 48  # the first copy of the WAL-index header (sqlite.org/walformat.html)


class _CacheState:
    """One thread's connection, cache, last data_version, last WAL-index header and file identity."""

    __slots__ = ("cache", "conn", "header", "identity", "shm", "version")

    def __init__(self, conn: sqlite3.Connection, cache: dict[str, KeyRecord | None], version: int,
                 shm: mmap.mmap | None, header: bytes, identity: tuple[int, int]):
        self.conn = conn
        self.cache = cache
        self.version = version
        self.shm = shm
        self.header = header
        self.identity = identity  # (inode, device) of the file `conn` has open


def _map_wal_index(conn: sqlite3.Connection, path: Path) -> mmap.mmap | None:
    """A read-only mapping of the `-shm` file this connection uses, or None (not WAL, or no such file).

    The connection reads once first, so the file exists and is the one SQLite keeps open and
    mapped for as long as the connection lives. The descriptor opened here is never closed:
    closing any descriptor of a file drops every POSIX lock the process holds on it, and
    SQLite's connections hold such locks on the `-shm` file (by which another process knows
    the WAL index is in use and must not reset it).
    """
    try:
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            return None
        conn.execute("PRAGMA data_version").fetchone()
        fd = os.open(str(path) + "-shm", os.O_RDONLY)
    except (OSError, sqlite3.Error):
        return None
    _KEPT_OPEN.append(fd)
    try:
        if os.fstat(fd).st_size < _WAL_HEADER:
            return None
        return mmap.mmap(fd, _WAL_HEADER, mmap.MAP_SHARED, mmap.PROT_READ)
    except OSError:
        return None


_KEPT_OPEN: list[int] = []  # see _map_wal_index: one descriptor per thread that looks keys up
