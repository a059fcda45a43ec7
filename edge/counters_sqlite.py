"""Limit counters in SQLite, exact across threads and worker processes on one machine.

Each increment is one statement, `INSERT … ON CONFLICT DO UPDATE SET n = n + 1
RETURNING n`, inside a `BEGIN IMMEDIATE` transaction: the write lock is taken before
the row is read, so two processes can never both read 4 and both write 5. The value
returned is the caller's own sequence number in the window; the limiter accepts iff it
is within the limit, which makes the accepted count exact.

By default the counters live in their own file next to the key store (see
`counters_path_for`) rather than inside it: the key store's cache check uses
`PRAGMA data_version`, which changes on every commit by another connection, and
counter commits on every request would defeat it. Passing the key store's own path
works too (the brief allows one file) at the cost of that cache.

Writers first queue on an `flock` of a side file, then take SQLite's lock uncontended.
SQLite's own busy handler polls with sleeps of 1, 2, 5, 10… ms, which under two busy
workers put whole milliseconds into p99; a blocking flock wakes the next waiter as
soon as the lock is released. SQLite's locking still guarantees correctness on its own
(the flock is only a queue), so a process that skipped it could not corrupt a count.

`synchronous=NORMAL` in WAL mode: a power cut may lose the last few increments (a
client gets a handful of extra requests after a crash), never corrupt the file. An fsync
per API request would cost more than the request.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    n INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
"""

INCR = (
    "INSERT INTO counters (name, n, expires_at) VALUES (?, 1, ?)"
    " ON CONFLICT(name) DO UPDATE SET n = n + 1 RETURNING n"
)


def counters_path_for(keys_path: Path | str) -> Path:
    """`var/keys.sqlite` → `var/keys.counters.sqlite`: beside the keys, never under build/."""
    p = Path(keys_path)
    return p.with_name(p.stem + ".counters" + (p.suffix or ".sqlite"))


class SQLiteCounter:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conn().executescript(SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        """One connection (and one lock descriptor) per thread: neither may cross threads."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=True)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
            # a descriptor of our own: flock locks belong to the open file description,
            # so threads sharing one descriptor would not exclude each other
            self._local.lock_fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        return conn

    def incr(self, name: str, expires_at: int) -> int:
        conn = self._conn()
        fd = self._local.lock_fd
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                (n,) = conn.execute(INCR, (name, expires_at)).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        return int(n)

    def sweep(self, before: int) -> None:
        """Drop windows that expired before `before` (the limiter's clock, not the wall clock,
        so an injected clock in tests never sweeps a window it is still counting)."""
        self._conn().execute("DELETE FROM counters WHERE expires_at < ?", (before,))

    def value(self, name: str) -> int:
        """The current count (0 if none); for tests and operators, not the hot path."""
        row = self._conn().execute("SELECT n FROM counters WHERE name = ?", (name,)).fetchone()
        return int(row[0]) if row else 0
