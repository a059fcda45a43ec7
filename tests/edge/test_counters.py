"""The shared counters file: exact across threads and processes, and never stuck on a dead holder.

Processes are forked and each opens the file itself, as server workers do. A holder that
dies inside the lock (killed, or a machine that crashed with the lock taken) must never
block the others: each such case runs its increments in a thread with a deadline.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from edge.stores import counters
from edge.stores.counters import MappedCounter

FAR = 2**40
shared_mutex = pytest.mark.skipif(counters._PTHREAD is None, reason="no robust process-shared mutex here")


def _within(seconds: float, fn):  # type: ignore[no-untyped-def]
    """fn() in a thread; fails (instead of hanging the suite) when the lock never comes free."""
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert out, f"still waiting for the counters' lock after {seconds} s"
    return out[0]


def test_the_lock_in_use_is_the_shared_mutex_on_linux(tmp_path: Path):
    c = MappedCounter(tmp_path / "c.map", slots=64)
    assert c._lock.shared == (counters._PTHREAD is not None)


@pytest.fixture(params=["shared mutex", "flock"])
def lock_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both locks on this machine: the portable one is what runs where the mutex is missing."""
    if request.param == "flock":
        monkeypatch.setattr(counters, "_PTHREAD", None)
    elif counters._PTHREAD is None:
        pytest.skip("no robust process-shared mutex here")
    return str(request.param)


def test_exact_across_threads(tmp_path: Path, lock_kind: str):
    c = MappedCounter(tmp_path / "c.map", slots=64)
    assert c._lock.shared == (lock_kind == "shared mutex")
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: c.incr_pair("m", FAR, 10**9, "M", FAR), range(800)))
    assert sorted(n for n, _ in got) == list(range(1, 801))
    assert sorted(m for _, m in got if m is not None) == list(range(1, 801))


def _hammer(path: str, n: int, out: multiprocessing.Queue) -> None:
    c = MappedCounter(path)  # opened after the fork, as each server worker does
    out.put([c.incr_pair("m", FAR, 1000, "M", FAR) for _ in range(n)])


def test_exact_across_processes_and_the_pair_stops_at_the_first_limit(tmp_path: Path, lock_kind: str):
    path = str(tmp_path / "c.map")
    MappedCounter(path).close()
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(path, 400, q)) for _ in range(4)]
    for p in procs:
        p.start()
    got = [v for _ in procs for v in q.get(timeout=60)]
    for p in procs:
        p.join(timeout=30)
    assert sorted(n for n, _ in got) == list(range(1, 1601))
    # the second counter moved only for the first 1000 (within the first's limit), each exactly once
    assert sorted(m for n, m in got if n <= 1000) == list(range(1, 1001))
    assert all(m is None for n, m in got if n > 1000)
    assert MappedCounter(path).value("M") == 1000


def _die_holding_the_lock(path: str, ready: multiprocessing.Event) -> None:
    c = MappedCounter(path)
    c.incr("x", FAR)
    c._lock.acquire()
    ready.set()
    os.kill(os.getpid(), signal.SIGKILL)


@shared_mutex
def test_a_worker_killed_inside_the_lock_does_not_block_the_others(tmp_path: Path):
    path = str(tmp_path / "c.map")
    c = MappedCounter(path)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=_die_holding_the_lock, args=(path, ready))
    p.start()
    assert ready.wait(30)
    p.join(30)
    assert p.exitcode == -signal.SIGKILL
    assert _within(10, lambda: c.incr("x", FAR)) == 2  # its increment stands, the lock is usable
    assert _within(10, lambda: c.incr("x", FAR)) == 3


def _hold_forever(path: str, ready: multiprocessing.Event) -> None:
    c = MappedCounter(path)
    c.incr("x", FAR)
    c._lock.acquire()
    ready.set()
    threading.Event().wait()


@shared_mutex
def test_a_lock_left_taken_in_the_file_is_reset_by_the_next_start(tmp_path: Path):
    """A machine that crashed with the lock taken leaves it taken on disk, with no owner to
    notice: the first process to open the file alone starts from a fresh lock."""
    path = tmp_path / "c.map"
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=_hold_forever, args=(str(path), ready))
    p.start()
    assert ready.wait(30)
    fd = os.open(path, os.O_RDWR)
    try:
        taken = os.pread(fd, 64, 0)  # the header as the crash left it on disk: the lock taken
        p.kill()
        p.join(30)
        os.pwrite(fd, taken, 0)
    finally:
        os.close(fd)
    c = _within(10, lambda: MappedCounter(path))
    assert _within(10, lambda: c.incr("x", FAR)) == 2


def test_a_file_of_the_previous_version_is_upgraded_with_its_counts(tmp_path: Path):
    path = tmp_path / "c.map"
    c = MappedCounter(path, slots=64)
    for _ in range(3):
        c.incr("x", FAR)
    c.close()
    fd = os.open(path, os.O_RDWR)
    os.pwrite(fd, b"MRCOUNT1", 0)
    os.pwrite(fd, bytes(48), 16)  # version 1 left the rest of the header zero
    os.close(fd)
    c = MappedCounter(path)
    assert c.value("x") == 3 and c.incr("x", FAR) == 4
    assert path.read_bytes()[:8] == b"MRCOUNT2"


@shared_mutex
def test_a_previous_version_file_in_use_is_refused_not_shared(tmp_path: Path):
    path = tmp_path / "c.map"
    first = MappedCounter(path, slots=64)
    fd = os.open(path, os.O_RDWR)
    os.pwrite(fd, b"MRCOUNT1", 0)
    os.close(fd)
    with pytest.raises(ValueError, match="earlier version"):
        MappedCounter(path)
    first.close()
