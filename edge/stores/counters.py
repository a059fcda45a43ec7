"""Limit counters for the local server, exact across threads and worker processes on one machine.

Two implementations of `edge.limits.Counter`: `MappedCounter` (a shared memory-mapped
file; the default, see its docstring and docs/limits.md#throughput for why) and
`SQLiteCounter` (below; `MALARIA_RISK_COUNTERS=PATH.sqlite`).

Each increment is one statement, `INSERT … ON CONFLICT DO UPDATE SET n = n + 1
RETURNING n`, inside a `BEGIN IMMEDIATE` transaction: the write lock is taken before
the row is read, so two processes can never both read 4 and both write 5. The value
returned is the caller's own sequence number in the window; the limiter accepts iff it
is within the limit, which makes the accepted count exact.

By default the counters live in their own file next to the key store (see
`counters_path_for`) rather than inside it: the key store's cache check uses
`PRAGMA data_version`, which changes on every commit by another connection, and
counter commits on every request would defeat it. Passing the key store's own path
works too (one file for both) at the cost of that cache.

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

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import logging
import mmap
import os
import sqlite3
import struct
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from .sqlite import SQLiteFile, connect

log = logging.getLogger("malaria_risk.counters")

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


class SQLiteCounter(SQLiteFile):
    timeout = 30

    def __init__(self, path: Path | str):
        super().__init__(path)
        self._conn().executescript(SCHEMA)

    def _open(self) -> sqlite3.Connection:
        """One connection (and one lock descriptor) per thread: neither may cross threads."""
        conn = connect(self.path, self.timeout, synchronous="NORMAL")
        # a descriptor of our own: flock locks belong to the open file description,
        # so threads sharing one descriptor would not exclude each other
        self._local.lock_fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        return conn

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """An IMMEDIATE transaction behind a file lock: workers queue on the lock (fair,
        no polling) instead of on SQLite's busy-wait, and every increment sees the last."""
        conn = self._conn()
        fd = self._local.lock_fd
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def incr(self, name: str, expires_at: int) -> int:
        with self._transaction() as conn:
            (n,) = conn.execute(INCR, (name, expires_at)).fetchone()
        return int(n)

    def incr_pair(self, first: str, first_expires: int, first_limit: int, second: str,
                  second_expires: int) -> tuple[int, int | None]:
        """`first` += 1, then `second` += 1 only if `first` stayed within `first_limit`.

        The limiter's minute-then-month step in one lock and one transaction instead of two
        (half the commits); each counter still returns distinct consecutive values.
        """
        m = None
        with self._transaction() as conn:
            (n,) = conn.execute(INCR, (first, first_expires)).fetchone()
            if n <= first_limit:
                (m,) = conn.execute(INCR, (second, second_expires)).fetchone()
        return int(n), (None if m is None else int(m))

    def sweep(self, before: int) -> None:
        """Drop windows that expired before `before` (the limiter's clock, not the wall clock,
        so an injected clock in tests never sweeps a window it is still counting)."""
        self._conn().execute("DELETE FROM counters WHERE expires_at < ?", (before,))

    def value(self, name: str) -> int:
        """The current count (0 if none); for tests and operators, not the hot path."""
        row = self._conn().execute("SELECT n FROM counters WHERE name = ?", (name,)).fetchone()
        return int(row[0]) if row else 0


# --- shared-memory counters: the local server's default --------------------------------------


def mapped_counters_path_for(keys_path: Path | str) -> Path:
    """`var/keys.sqlite` → `var/keys.counters.map`: beside the keys, never under build/."""
    p = Path(keys_path)
    return p.with_name(p.stem + ".counters.map")


class CountersUnavailable(RuntimeError):
    """The counters file is damaged or was just rebuilt: requests cannot be counted exactly now.

    The server answers 503 TEMPORARILY_UNAVAILABLE with `retry_after`; never raised for a
    sound file."""

    def __init__(self, reason: str, retry_after: int):
        super().__init__(reason)
        self.retry_after = retry_after


class _Damaged(Exception):
    """Found damage in the counters file (the message says what); handled by `MappedCounter._recover`."""


class CounterTableFull(RuntimeError):
    """More live windows than slots. The capacity (`MappedCounter(path, slots)`) is fixed
    when the file is created; a fresh file gets DEFAULT_SLOTS."""


_MAGIC = b"MRCOUNT2"  # version 2: the shared mutex in the header
_MAGIC_V1 = b"MRCOUNT1"
_RETIRED = b"MRRETIRE"  # written over the magic of a damaged file that was replaced
_MONTH_PREFIX = b"M:"  # the limiter's month windows (edge/limits.py), kept in the snapshot
_HEADER = struct.Struct("<8sII")  # magic, slots, slot size
_HEADER_SIZE = 64
_SLOT = 64
_NAME_MAX = 46
# a slot: n (int64), expires_at (int64), name length (uint8), name (≤ 46 bytes), pad
_COUNT = struct.Struct("<q")
_SLOT_HEAD = struct.Struct("<qqB")
_EMPTY, _USED, _GONE = 0, 1, 2
_STATES = bytes((_EMPTY, _USED, _GONE))
DEFAULT_SLOTS = 1 << 16
# an entry is never placed further than this from its home slot, so a lookup never scans
# more; with linear probing a run this long only happens in a table close to full
_MAX_PROBES = 1024
_WHERE_MAX = 4096  # remembered slots per process; a window's names change each minute


class _FileLock:
    """The portable lock: an exclusive `flock` of the counters file, plus a `threading.Lock`
    (flock locks belong to the open file, which a process's threads share). Two syscalls
    per critical section; used where `_SharedMutex` is not available."""

    shared = False

    def __init__(self, fd: int):
        self._fd = fd
        self._tlock = threading.Lock()

    def acquire(self) -> None:
        self._tlock.acquire()
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._tlock.release()
            raise

    def release(self) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._tlock.release()


class _SharedMutex:
    """A robust, process-shared pthread mutex stored inside the mapped file (via ctypes).

    Uncontended, locking and unlocking are each one atomic instruction in user space (a
    futex): no syscall, unlike `flock`. It excludes threads as well as processes. Robust:
    when its holder dies, the kernel marks it and the next locker gets EOWNERDEAD, marks
    it consistent and carries on — the same recovery as the kernel releasing a dead
    process's flock (the data it guards is written so a torn increment is never visible).

    It is (re)initialised only by a process that holds the file alone (see
    `MappedCounter.__init__`), so a mutex left locked in the file by a machine crash
    never blocks the next start.
    """

    shared = True

    def __init__(self, mm: mmap.mmap, offset: int):
        self._cell = ctypes.c_char.from_buffer(mm, offset)  # keeps the mapping's memory pinned
        self._addr = ctypes.addressof(self._cell)
        assert _PTHREAD is not None
        self._lock = _PTHREAD.pthread_mutex_lock
        self._unlock = _PTHREAD.pthread_mutex_unlock
        self._consistent = _PTHREAD.pthread_mutex_consistent

    def initialise(self) -> None:
        assert _PTHREAD is not None
        buf = ctypes.create_string_buffer(64)  # pthread_mutexattr_t is 4 bytes on Linux; room to spare
        attr = ctypes.addressof(buf)
        for rc in (_PTHREAD.pthread_mutexattr_init(attr),
                   _PTHREAD.pthread_mutexattr_setpshared(attr, _PTHREAD_PROCESS_SHARED),
                   _PTHREAD.pthread_mutexattr_setrobust(attr, _PTHREAD_MUTEX_ROBUST),
                   _PTHREAD.pthread_mutex_init(self._addr, attr),
                   _PTHREAD.pthread_mutexattr_destroy(attr)):
            if rc:
                raise OSError(rc, f"cannot set up the counters' shared lock: {os.strerror(rc)}")

    def acquire(self) -> None:
        rc = self._lock(self._addr)
        if rc == 0:
            return
        if rc == errno.EOWNERDEAD:  # its holder died inside the lock; what it guarded stays usable
            rc = self._consistent(self._addr)
            if rc == 0:
                return
            self._unlock(self._addr)
        raise OSError(rc, f"the counters' shared lock failed: {os.strerror(rc)}")

    def release(self) -> None:
        self._unlock(self._addr)


def _load_pthread() -> ctypes.CDLL | None:
    """The C library's pthread functions where a robust process-shared mutex fits the header.

    Linux on 64-bit: `pthread_mutex_t` is 40 bytes (x86-64, glibc and musl) or 48 (arm64),
    within the 48 bytes reserved for it. Elsewhere `_FileLock` is used.
    """
    if not sys.platform.startswith("linux") or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    try:
        lib = ctypes.CDLL(None, use_errno=True)  # the running interpreter's C library
        for name in ("pthread_mutex_lock", "pthread_mutex_unlock", "pthread_mutex_consistent",
                     "pthread_mutex_init", "pthread_mutexattr_init", "pthread_mutexattr_setpshared",
                     "pthread_mutexattr_setrobust", "pthread_mutexattr_destroy"):
            fn = getattr(lib, name)
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    lib.pthread_mutexattr_setpshared.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.pthread_mutexattr_setrobust.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.pthread_mutex_init.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return lib


_PTHREAD_PROCESS_SHARED = 1  # the same value in glibc and musl
_PTHREAD_MUTEX_ROBUST = 1
_PTHREAD = _load_pthread()
_MUTEX_OFFSET = 16  # in the header, after magic, slots and slot size
_MUTEX_SIZE = 48


class MappedCounter:
    """Exact counters in a memory-mapped file shared by every worker process on one machine.

    Why not SQLite on the hot path: a SQLite increment is a transaction — lock, read the
    page, write the WAL, commit — about 45–90 µs, twice per live-key request, which made
    the counter the slowest thing between a request and its file. Here an increment is a
    hash probe into a table every process has mapped, inside one lock: on Linux a robust
    process-shared pthread mutex kept in the file's header (`_SharedMutex`: no syscall
    when uncontended), elsewhere an exclusive `flock` plus a thread lock (`_FileLock`).
    Both of a request's increments cost about 2 µs with the mutex, against 4–6 µs with
    two flock calls. Exactness has the same argument as SQLite's: the read-modify-write
    happens entirely inside the lock, so every increment of a window returns a distinct
    consecutive value across threads and processes. Each process remembers the slot where
    it last found a window and checks, inside the lock, that the slot still holds it.

    Every process using the file holds a shared `flock` of it for life; one that opens it
    and can lock it exclusively is alone, and only then is the mutex (re)initialised — so
    a mutex left locked on disk by a machine crash never blocks the next start.

    Layout: a 64-byte header (magic, slots, slot size, the mutex), then one state byte per slot (empty / used / gone, so a
    sweep can find used slots with `mmap.find` instead of a Python loop over all slots),
    then 64-byte slots holding count, expiry and name. Open addressing with linear probing
    on a CRC-32 of the name (stable across processes, unlike `hash`).

    Durability: the file is a real file mapped shared, so counts survive a worker crash
    or a server restart (the kernel holds the dirty pages); it is flushed to disk once a
    minute at the sweep. A power cut or kernel crash can lose up to a minute of counts:
    a client gets back up to a minute of requests, never an inflated count. A process
    killed mid-increment loses at most that one increment (the slot's state byte is
    written last); its lock is released by the kernel (flock) or handed on marked
    owner-dead (the robust mutex), and the next holder carries on.

    Capacity is fixed when the file is created (`slots`, default 65,536, 4.3 MB): a window
    lives for its length plus a grace (minutes: 3 min; months: the month + 1 day), so that
    is room for tens of thousands of live keys. A full table raises `CounterTableFull`
    rather than guessing.

    Damage (the file truncated, zeroed, overwritten or removed under the processes that map
    it) is looked for before every access (`_guard`: size, links and the header's fixed
    bytes, so a truncated mapping is never touched, which would be SIGBUS) and by the probes
    and the sweep (slot states, negative counts). It is never read as "no count yet": the
    request raises `CountersUnavailable` (the server answers 503) and the file is rebuilt
    (`_heal`).
    """

    _mm: mmap.mmap
    _cells: memoryview
    _lock: _SharedMutex | _FileLock

    def __init__(self, path: Path | str, slots: int = DEFAULT_SLOTS):
        if slots < 8 or slots & (slots - 1):
            raise ValueError("slots must be a power of two ≥ 8")
        self.path = Path(path)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._wanted_slots = slots
        self._switching = threading.Lock()
        self._retired: list[tuple[mmap.mmap, memoryview, object]] = []  # mappings given up: never touched again
        self._closed_until = 0.0  # wall-clock second until which this process refuses to count (after damage)
        self._fd = -1
        try:
            self._open_path(create=True)
        except _Damaged as e:
            self._heal(str(e))

    # -- opening, checking and replacing the file ----------------------------------------------
    def _open_path(self, create: bool) -> None:
        """Open, lock, check and map the file at `self.path`; raises `_Damaged` when it is not sound."""
        fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0), 0o600)
        shared = _PTHREAD is not None
        # With the shared mutex, every process that uses the file holds a shared flock of it
        # for as long as it lives, so one that gets it exclusively knows it is alone and may
        # create, upgrade and (re)initialise the mutex: one left locked by a crash is reset.
        alone = True
        if shared:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fcntl.flock(fd, fcntl.LOCK_SH)
                alone = False
        else:
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            slots = self._check_header(fd, self._wanted_slots, alone)
            mm = mmap.mmap(fd, 0)
        except BaseException:
            os.close(fd)  # drops the flock too
            raise
        self._attach(fd, mm, slots, initialise=alone)

    def _attach(self, fd: int, mm: mmap.mmap, slots: int, initialise: bool) -> None:
        """Make a checked mapping the one in use; the previous one (if any) is retired, not unmapped."""
        if self._fd >= 0:
            self._retired.append((self._mm, self._cells, self._lock))
            with contextlib.suppress(OSError):
                os.close(self._fd)  # the mapping stays; only this process's share of the old file goes
        self.slots = slots
        self._mask = slots - 1
        self._states = _HEADER_SIZE
        self._base = _HEADER_SIZE + slots
        self._size = _HEADER_SIZE + slots + slots * _SLOT
        self._header = bytes(mm[:_HEADER.size])  # never changes while the file is sound
        self._mm = mm
        # the mapping as int64 cells: a slot's count (its first 8 bytes) read and written in one step
        self._cells = memoryview(mm).cast("q")
        # name -> (length-prefixed name, slot) where this process last found it: tried first,
        # and trusted only if that slot is still in use under that very name
        self._where: dict[str, tuple[bytes, int]] = {}
        self._fd = fd
        if _PTHREAD is not None:
            self._lock = _SharedMutex(mm, _MUTEX_OFFSET)
            if initialise:
                self._lock.initialise()
                fcntl.flock(fd, fcntl.LOCK_SH)  # others may join now; held until the process ends
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            self._lock = _FileLock(fd)

    def _check_header(self, fd: int, slots: int, alone: bool) -> int:
        """Create the table in an empty file, upgrade the previous version's header, check it; → slots.

        Raises `_Damaged` for a file that is not a sound counters file (truncated, zeroed,
        overwritten, of another size), and ValueError only for one in use by an older version.
        """
        size = os.fstat(fd).st_size
        if size == 0:
            if not alone:
                raise _Damaged("is empty (truncated) while other processes use it")
            os.ftruncate(fd, _HEADER_SIZE + slots + slots * _SLOT)
            os.pwrite(fd, _HEADER.pack(_MAGIC, slots, _SLOT), 0)
            size = os.fstat(fd).st_size
        if size < _HEADER_SIZE:
            raise _Damaged(f"is {size} bytes long, shorter than its header")
        magic, slots, slot_size = _HEADER.unpack(os.pread(fd, _HEADER.size, 0))
        if magic == _MAGIC_V1 and slot_size == _SLOT:
            # the same table; the header's spare bytes (zero in version 1) now hold the mutex
            if not alone:
                raise ValueError(f"{self.path} is in use by a process of an earlier version; stop it first")
            os.pwrite(fd, _MAGIC, 0)
            magic = _MAGIC
        if magic != _MAGIC or slot_size != _SLOT or slots < 8 or slots & (slots - 1):
            raise _Damaged("has no valid counters header (overwritten or not a counters file of this version)")
        if size != _HEADER_SIZE + slots + slots * _SLOT:
            raise _Damaged(f"is {size} bytes long where its header says {_HEADER_SIZE + slots + slots * _SLOT}")
        if alone:
            states = os.pread(fd, slots, _HEADER_SIZE)
            if states.translate(None, _STATES):
                raise _Damaged("holds slot states that are not empty, used or gone (overwritten)")
        return int(slots)

    def _guard(self) -> None:
        """Before the mapping is touched: the file must still be as it was mapped.

        The size first, from the file (a mapping of a file truncated under it faults with
        SIGBUS when touched past the new end), then the header's fixed bytes, from the
        mapping. Damage found here or inside the lock is handled by `_recover`.
        """
        if self._closed_until:
            if time.time() < self._closed_until:
                raise CountersUnavailable("the counters file was rebuilt this minute", self._retry_after())
            self._closed_until = 0.0
        try:
            st = os.fstat(self._fd)
        except OSError as e:
            self._recover(f"cannot be checked ({e.strerror})")
        size = st.st_size
        if st.st_nlink == 0:
            self._recover("was removed while in use")
        if size != self._size:
            self._recover(f"is {size} bytes long where {self._size} were mapped (truncated or replaced)")
        if self._mm[:_HEADER.size] != self._header:
            self._recover("has a changed header (overwritten, zeroed or retired after damage)")

    def _retry_after(self) -> int:
        left = self._closed_until - time.time()
        return max(1, int(left) + (left > int(left)))

    def _recover(self, reason: str) -> NoReturn:
        """`_heal`, then refuse this request (503)."""
        self._heal(reason)
        raise CountersUnavailable(f"the counters file {reason}", self._retry_after())

    def _heal(self, reason: str) -> None:
        """Fail closed until the end of this minute and put a sound file in place of a damaged one.

        Under a lock file beside it, so one process rebuilds and the others switch to what it
        built: a file of another identity at the path that checks out is taken as it is;
        otherwise the damaged file is moved aside (`<name>.damaged-<UTC time>`, kept for the
        operator), its mapped header marked retired (so every process mapping it notices on
        its next request) and a fresh table renamed into place, holding the month counts of the
        last sweep's snapshot (`<name>.months`, checksummed). Counts in the damaged file are
        not trusted: this process answers 503 until the minute ends, then counts minutes from
        zero and months from the snapshot (docs/operations.md#the-local-server-s-state-files).
        """
        with self._switching:
            now = time.time()
            first = not self._closed_until
            self._closed_until = (int(now) // 60 + 1) * 60
            if first:
                log.error("counters file %s %s: keyed requests answer 503 until the minute ends, then counting "
                          "restarts from a fresh file", self.path, reason)
            try:
                self._replace()
            except (OSError, _Damaged) as e:
                log.error("counters file %s could not be rebuilt (%s); keyed requests keep answering 503", self.path,
                          e)
                self._closed_until = (int(now) // 60 + 1) * 60

    def _replace(self) -> None:
        lock_fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            try:
                st: os.stat_result | None = os.stat(self.path)
            except FileNotFoundError:
                st = None
            mine = os.fstat(self._fd) if self._fd >= 0 else None
            if st is not None and (mine is None or (st.st_ino, st.st_dev) != (mine.st_ino, mine.st_dev)):
                try:
                    self._open_path(create=False)  # another process rebuilt it (or an operator replaced it)
                    return
                except _Damaged:
                    pass
            if st is not None:
                aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
                os.rename(self.path, aside)
                log.error("moved the damaged counters file to %s", aside)
            if self._fd >= 0:
                with contextlib.suppress(OSError, ValueError):
                    if os.fstat(self._fd).st_size >= _HEADER_SIZE:
                        self._mm[:8] = _RETIRED  # every process still mapping it sees the change
            self._create_fresh()
        finally:
            os.close(lock_fd)  # drops the lock

    def _create_fresh(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            slots = self._wanted_slots
            os.ftruncate(fd, _HEADER_SIZE + slots + slots * _SLOT)
            os.pwrite(fd, _HEADER.pack(_MAGIC, slots, _SLOT), 0)
            mm = mmap.mmap(fd, 0)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        self._attach(fd, mm, slots, initialise=True)  # alone with it until the rename below
        restored = self._restore_months()
        os.rename(tmp, self.path)
        if restored:
            log.warning("counters file %s rebuilt with %d monthly counts from %s", self.path, restored,
                        self._months_path())

    # -- the monthly counts' snapshot, so a rebuild does not hand out a new month ------------------
    def _months_path(self) -> Path:
        return self.path.with_name(self.path.name + ".months")

    def _save_months(self, months: list[tuple[str, int, int]]) -> None:
        """Write the month windows' counts beside the file (at each minute's sweep), checksummed."""
        body = json.dumps(months, separators=(",", ":")).encode()
        target = self._months_path()
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
        finally:
            os.close(fd)
        os.replace(tmp, target)

    def _restore_months(self) -> int:
        """Month counts from the last snapshot into the fresh table (which nothing else sees yet)."""
        try:
            digest, _, body = self._months_path().read_bytes().partition(b"\n")
            if hashlib.sha256(body).hexdigest().encode() != digest:
                raise ValueError("checksum differs")
            months = [(str(name), int(n), int(expires)) for name, n, expires in json.loads(body)]
        except FileNotFoundError:
            return 0
        except (OSError, ValueError, TypeError) as e:
            log.error("counters file %s: the monthly snapshot is unusable (%s); monthly counts restart from zero",
                      self.path, e)
            return 0
        now = time.time()
        restored = 0
        for name, n, expires in months:
            b = name.encode()
            if expires < now or n < 1 or len(b) > _NAME_MAX + 1:
                continue
            i, found = self._find(b)
            if found:
                continue
            off = self._base + i * _SLOT
            _SLOT_HEAD.pack_into(self._mm, off, n, expires, len(b))
            self._mm[off + 17 : off + 17 + len(b)] = b
            self._mm[self._states + i] = _USED
            restored += 1
        return restored

    def close(self) -> None:
        """Unmap and close the file (which also gives up this process's share of it)."""
        self._lock = _FileLock(-1)  # drops the mutex's hold on the mapping, which may then close
        self._cells.release()
        self._mm.close()
        os.close(self._fd)
        for mm, cells, _ in self._retired:
            cells.release()
            with contextlib.suppress(BufferError):
                mm.close()
        self._retired.clear()

    @staticmethod
    def _encode(name: str) -> bytes:
        b = name.encode()
        if len(b) > _NAME_MAX:  # long names are stored as a 160-bit digest (no realistic collision)
            b = b"#" + hashlib.blake2b(b, digest_size=20).digest()
        return b

    def _find(self, b: bytes) -> tuple[int, bool]:
        """(slot, found): the slot holding `b`, else the slot where it should be inserted."""
        mm = self._mm
        mask = self._mask
        states = self._states
        base = self._base
        n = len(b)
        i = zlib.crc32(b) & mask
        free = -1
        for _ in range(_MAX_PROBES if self.slots > _MAX_PROBES else self.slots):
            state = mm[states + i]
            if state == _EMPTY:
                return (free if free >= 0 else i), False
            if state == _USED:
                off = base + i * _SLOT + 16
                if mm[off] == n and mm[off + 1 : off + 1 + n] == b:
                    return i, True
            elif state != _GONE:
                raise _Damaged(f"holds an invalid slot state ({state}) at slot {i} (overwritten)")
            elif free < 0:
                free = i
            i = (i + 1) & mask
        if free >= 0:
            return free, False
        raise CounterTableFull(f"no free counter slot near {b!r} in {self.path} ({self.slots} slots)")

    def _bump(self, name: str, expires_at: int) -> int:
        """`name` += 1 (inside the lock): the slot this process found last time is tried first,
        which spares the name's encoding, its hash and the probe on all but a window's first use."""
        mm = self._mm
        hit = self._where.get(name)
        if hit is not None:
            lp, i = hit
            off = self._base + i * _SLOT
            if mm[self._states + i] == _USED and mm[off + 16 : off + 16 + len(lp)] == lp:
                cells = self._cells
                n: int = cells[off >> 3] + 1
                if n <= 0:
                    raise _Damaged(f"holds a negative count at slot {i} (overwritten)")
                cells[off >> 3] = n
                return n
        b = self._encode(name)
        i, found = self._find(b)
        off = self._base + i * _SLOT
        if found:
            n = _COUNT.unpack_from(mm, off)[0] + 1
            if n <= 0:
                raise _Damaged(f"holds a negative count at slot {i} (overwritten)")
            _COUNT.pack_into(mm, off, n)
        else:
            n = 1
            _SLOT_HEAD.pack_into(mm, off, 1, expires_at, len(b))
            mm[off + 17 : off + 17 + len(b)] = b
            mm[self._states + i] = _USED  # last: a half-written slot is never seen as used
        if len(self._where) >= _WHERE_MAX:
            self._where.clear()
        self._where[name] = (bytes((len(b),)) + b, i)
        return n

    def incr(self, name: str, expires_at: int) -> int:
        self._guard()
        lock = self._lock
        try:
            lock.acquire()
            try:
                return self._bump(name, expires_at)
            finally:
                lock.release()
        except _Damaged as e:
            self._recover(str(e))

    def incr_pair(self, first: str, first_expires: int, first_limit: int, second: str,
                  second_expires: int) -> tuple[int, int | None]:
        """`first` += 1, then `second` += 1 only if `first` stayed within `first_limit`, in one lock."""
        self._guard()
        lock = self._lock
        try:
            lock.acquire()
            try:
                n = self._bump(first, first_expires)
                return n, (self._bump(second, second_expires) if n <= first_limit else None)
            finally:
                lock.release()
        except _Damaged as e:
            self._recover(str(e))

    def sweep(self, before: int) -> None:
        """Mark windows that expired before `before` as gone, and flush the file to disk.

        Gone slots are reused by inserts; when more than half the table is gone the live
        entries are re-inserted into a clean table so probes stay short. Every slot state is
        checked on the way (once a minute, a 64 KiB scan): damage the probes have not met yet
        is found here.
        """
        self._guard()
        mm = self._mm
        start, end = self._states, self._states + self.slots
        months: list[tuple[str, int, int]] = []
        try:
            self._lock.acquire()
            try:
                if mm[start:end].translate(None, _STATES):
                    raise _Damaged("holds slot states that are not empty, used or gone (overwritten)")
                i = mm.find(b"\x01", start, end)
                while i != -1:
                    off = self._base + (i - start) * _SLOT
                    n, expires, length = _SLOT_HEAD.unpack_from(mm, off)
                    if expires < before:
                        mm[i] = _GONE
                    elif mm[off + 17 : off + 19] == _MONTH_PREFIX and length <= _NAME_MAX:
                        months.append((mm[off + 17 : off + 17 + length].decode("utf-8", "replace"), n, expires))
                    i = mm.find(b"\x01", i + 1, end)
                if mm[start:end].count(b"\x02") * 2 > self.slots:
                    self._rehash()
            finally:
                self._lock.release()
        except _Damaged as e:
            self._recover(str(e))
        mm.flush()  # outside the lock: writing the pages to disk may take a while
        try:
            self._save_months(months)
        except OSError as e:  # the snapshot only narrows a rebuild's loss; counting goes on without it
            log.warning("counters file %s: cannot write the monthly snapshot (%s)", self.path, e)

    def _rehash(self) -> None:
        mm = self._mm
        start, end = self._states, self._states + self.slots
        live: list[bytes] = []
        i = mm.find(b"\x01", start, end)
        while i != -1:
            off = self._base + (i - start) * _SLOT
            live.append(bytes(mm[off : off + _SLOT]))
            i = mm.find(b"\x01", i + 1, end)
        mm[start:end] = bytes(self.slots)
        for slot in live:
            b = slot[17 : 17 + slot[16]]
            j, _ = self._find(b)
            off = self._base + j * _SLOT
            mm[off : off + _SLOT] = slot
            mm[start + j] = _USED

    def value(self, name: str) -> int:
        """The current count (0 if none); for tests and operators, not the hot path."""
        b = self._encode(name)
        self._guard()
        self._lock.acquire()
        try:
            i, found = self._find(b)
            return int(_COUNT.unpack_from(self._mm, self._base + i * _SLOT)[0]) if found else 0
        except CounterTableFull:
            return 0
        finally:
            self._lock.release()
