"""A damaged counters file: found before it is touched, refused (503) rather than trusted, rebuilt.

Each case runs in a forked child: a mapping touched past the end of a truncated file
kills its process with SIGBUS, which must show as this test failing, not as the test
run dying. The child's clock is a variable, so "until the minute ends" is tested
without waiting for a minute.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from edge.stores import counters
from edge.stores.counters import CountersUnavailable, MappedCounter

FAR = 2**40
MINUTE, MONTH = "m:key_0123456789:30000000", "M:key_0123456789:2027-01"  # the limiter's window names
SLOTS = 64
SIZE = 64 + SLOTS + SLOTS * 64


def _child(fn: Callable[[Path], object], path: Path, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        out.put(("ok", fn(path)))
    except BaseException as e:  # reported to the parent, which fails the test with it
        out.put(("error", repr(e)))


def run_in_child(fn: Callable[[Path], object], path: Path) -> object:
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(fn, path, q))
    p.start()
    p.join(60)
    assert p.exitcode == 0, f"the child died with exit code {p.exitcode} (-7 is SIGBUS)"
    kind, value = q.get(timeout=5)
    assert kind == "ok", value
    return value


class Clock:
    """Wall-clock seconds for the counters module of this (child) process."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0 + 10  # ten seconds into a minute

    def install(self) -> None:
        counters.time = types.SimpleNamespace(time=lambda: self.now, strftime=time.strftime,  # type: ignore[assignment]
                                              gmtime=time.gmtime)


def truncate(path: Path) -> None:
    os.truncate(path, 0)


def zero(path: Path) -> None:
    path.write_bytes(bytes(SIZE))  # same size, same inode: the live mapping sees zeros


def randomise(path: Path) -> None:
    with path.open("r+b") as f:
        f.write(os.urandom(SIZE))


def randomise_states(path: Path) -> None:
    """The header intact, the slot states overwritten."""
    with path.open("r+b") as f:
        f.seek(64)
        f.write(bytes(3 + b % 253 for b in os.urandom(SLOTS)))  # never a valid state, so always found


def remove(path: Path) -> None:
    path.unlink()


DAMAGE = {"truncated": truncate, "zeroed": zero, "random bytes": randomise, "random slot states": randomise_states,
          "removed": remove}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damage_under_a_live_mapping_is_refused_then_counting_restarts_in_a_fresh_file(tmp_path: Path, damage: str):
    def scenario(path: Path) -> dict[str, object]:
        clock = Clock()
        clock.install()
        c = MappedCounter(path, slots=SLOTS)
        assert [c.incr_pair(MINUTE, FAR, 5, MONTH, FAR) for _ in range(3)][-1] == (3, 3)
        c.sweep(0)  # the minute's sweep: it also snapshots the month counts beside the file
        c.incr_pair(MINUTE, FAR, 5, MONTH, FAR)  # one more since the snapshot: it may be lost
        DAMAGE[damage](path)
        refused = []
        for _ in range(4):  # refused, never counted against a silently reset window
            try:
                c.incr_pair(MINUTE, FAR, 5, MONTH, FAR)
            except CountersUnavailable as e:
                refused.append(e.retry_after)
        clock.now += 50  # the next minute: a fresh file counts the minute from zero, the month from the snapshot
        after = c.incr_pair(MINUTE, FAR, 5, MONTH, FAR)
        aside = sorted(p.name for p in path.parent.iterdir() if ".damaged-" in p.name)
        return {"refused": refused, "after": after, "aside": aside,
                "sound": MappedCounter(path, SLOTS).value(MONTH)}

    got = run_in_child(scenario, tmp_path / "c.map")
    assert got["refused"] == [50, 50, 50, 50]  # seconds until the minute ends
    assert got["after"] == (1, 4) and got["sound"] == 4  # the month goes on from the snapshot's 3
    assert len(got["aside"]) == (0 if damage == "removed" else 1)  # the damaged file is kept for the operator


def test_an_unusable_month_snapshot_is_ignored_with_a_log_line(tmp_path: Path):
    def scenario(path: Path) -> object:
        clock = Clock()
        clock.install()
        c = MappedCounter(path, slots=SLOTS)
        c.incr_pair(MINUTE, FAR, 5, MONTH, FAR)
        c.sweep(0)
        snapshot = path.with_name(path.name + ".months")
        snapshot.write_bytes(snapshot.read_bytes().replace(b"[[", b"[[\"M:other\",99],["))  # edited by hand
        truncate(path)
        with pytest.raises(CountersUnavailable):
            c.incr(MONTH, FAR)
        clock.now += 50
        return c.incr(MONTH, FAR)

    assert run_in_child(scenario, tmp_path / "c.map") == 1  # checksum differs: months restart (logged)


def test_two_processes_switch_to_the_one_rebuilt_file(tmp_path: Path):
    """The first process to meet the damage rebuilds; the other switches to that file on its next
    request (its mapping of the old file is marked retired), so both count in one file again."""
    path = tmp_path / "c.map"

    def scenario(path: Path) -> list[object]:
        clock = Clock()
        clock.install()
        a = MappedCounter(path, slots=SLOTS)
        b = MappedCounter(path, slots=SLOTS)  # a second opener, as a second worker process would be
        a.incr(MINUTE, FAR)
        b.incr(MINUTE, FAR)
        randomise_states(path)
        seen: list[object] = []
        for who in (a, b):
            try:
                who.sweep(0)
            except CountersUnavailable:
                seen.append("refused")
        clock.now += 50
        seen += [a.incr(MINUTE, FAR), b.incr(MINUTE, FAR), a.incr(MINUTE, FAR)]
        return seen

    assert run_in_child(scenario, path) == ["refused", "refused", 1, 2, 3]


def test_a_damaged_file_found_at_start_is_moved_aside_and_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    path = tmp_path / "c.map"
    MappedCounter(path, slots=SLOTS).close()
    path.write_bytes(os.urandom(SIZE))
    with caplog.at_level("ERROR", "malaria_risk.counters"):
        c = MappedCounter(path, slots=SLOTS)
    assert any("no valid counters header" in m for m in caplog.messages)
    assert [p.name for p in tmp_path.iterdir() if ".damaged-" in p.name]
    with pytest.raises(CountersUnavailable):  # counts of this minute are unknown: refused until it ends
        c.incr("m", FAR)
    c._closed_until = 1.0  # the minute has ended
    assert c.incr("m", FAR) == 1


# --- the server, as a client and an operator see it --------------------------------------------

SERVER_DAMAGE = {"truncated": truncate, "zeroed": lambda p: p.write_bytes(bytes(p.stat().st_size)),
                 "random bytes": lambda p: p.open("r+b").write(os.urandom(p.stat().st_size))}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("damage", SERVER_DAMAGE)
def test_the_server_keeps_answering_over_a_damaged_counters_file(release_root: Path, tmp_path: Path, damage: str,
                                                                 workers: int):
    """`/docs` stays 200; keyed requests are a 503 problem (logged) or counted within the limit."""
    import subprocess
    import sys

    import httpx

    from edge.stores.sqlite import SQLiteKeyStore
    from tests.conftest import free_port, wait_until_up

    keys = tmp_path / "var" / "keys.sqlite"
    _, key = SQLiteKeyStore(keys).create("k", ["risk_scores"], "live", per_minute=5)
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("malaria-risk")), "serve", "--root",
                                 str(release_root), "--port", str(port), "--keys", str(keys), "--workers",
                                 str(workers)], stdout=subprocess.DEVNULL, stderr=err)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url + "/docs/", proc, "malaria-risk serve")
        auth = {"Authorization": f"Bearer {key}", "Connection": "close"}  # a new connection each: any worker
        assert httpx.get(url + "/v1/periods", headers=auth).status_code == 200
        SERVER_DAMAGE[damage](keys.with_name("keys.counters.map"))
        accepted: dict[int, int] = {}
        for _ in range(16):
            minute = int(time.time()) // 60
            r = httpx.get(url + "/v1/periods", headers=auth)
            assert r.status_code in (200, 429, 503), r.text
            if r.status_code == 503:
                assert r.json()["code"] == "TEMPORARILY_UNAVAILABLE" and int(r.headers["retry-after"]) >= 1
            accepted[minute] = accepted.get(minute, 0) + (r.status_code == 200)
            assert httpx.get(url + "/docs/index.html", headers={"Connection": "close"}).status_code == 200
        assert proc.poll() is None, "the server exited"
        assert all(n <= 5 for n in accepted.values()), accepted  # never more than the limit in a minute
        assert sum(accepted.values()) < 16
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "counters file" in log.read_text()  # the operator is told
