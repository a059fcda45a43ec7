"""Limits: exact fixed windows, what counts, headers, both 429 codes, month roll-over, workers.

Every boundary is crossed by passing instants to the gate (an injected clock), never by
sleeping. Concurrency is tested three ways: threads on one SQLite counter, several
processes on one SQLite counter, and real HTTP against `malaria-risk serve --workers 2`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
from collections import Counter as Tally
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.gate import EXPOSE_HEADERS, Request, handle
from edge.keys import KeyRecord
from edge.limits import (
    DEFAULT_MONTHLY,
    DEFAULT_PER_MINUTE,
    Limiter,
    MemoryCounter,
    format_policy,
    minute_window,
    month_window,
)
from edge.local.app import App
from edge.release import LocalReleases
from edge.stores.counters import SQLiteCounter, counters_path_for
from edge.stores.sqlite import SQLiteKeyStore
from tests.conftest import NOW, LiveServer, free_port, wait_until_up
from tests.edge.structured_fields import parse_sf_list
from tests.paths import REPO_ROOT

ROOT = REPO_ROOT
LIVE = KeyRecord("key_live", "l", "live", ("risk_scores",))
TEST = KeyRecord("key_test", "t", "test", ("risk_scores",))


def at(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=UTC)


def hdr(headers, name: str) -> str | None:
    for k, v in headers:
        if k.lower() == name.lower():
            return v
    return None


# --- windows and header syntax ---------------------------------------------------------------


def test_minute_window_is_the_utc_calendar_minute():
    w = minute_window(at("2026-11-22T12:00:45"))
    assert w.length == 60 and w.reset == 15
    assert w.bucket == minute_window(at("2026-11-22T12:00:00")).bucket
    assert w.bucket != minute_window(at("2026-11-22T12:01:00")).bucket
    # the last instant of a minute still has a full second to wait, never 0
    assert minute_window(at("2026-11-22T12:00:59.5")).reset == 1


def test_month_window_has_the_real_month_length():
    feb = month_window(at("2028-02-10T00:00:00"))  # leap year
    assert feb.bucket == "2028-02" and feb.length == 29 * 86_400
    assert feb.reset == 20 * 86_400
    dec = month_window(at("2026-12-31T23:59:59"))
    assert dec.bucket == "2026-12" and dec.reset == 1
    assert month_window(at("2027-01-01T00:00:00")).bucket == "2027-01"


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31)))
def test_windows_end_exactly_where_the_next_begins(naive: datetime):
    now = naive.replace(tzinfo=UTC)
    for window_of in (minute_window, month_window):
        w = window_of(now)
        assert 1 <= w.reset <= w.length
        after = datetime.fromtimestamp(w.ends_at, UTC)
        assert window_of(after).bucket != w.bucket
        assert window_of(after - timedelta(microseconds=1)).bucket == w.bucket
        assert w.ends_at - now.timestamp() <= w.reset < w.ends_at - now.timestamp() + 1


def test_header_syntax_follows_the_draft():
    # RateLimit-Policy: a List of quoted policy names with integer q and w parameters
    assert format_policy([("minute", 60, 60), ("month", 10000, 2592000)]) == \
        '"minute";q=60;w=60, "month";q=10000;w=2592000'
    assert parse_sf_list('"minute";r=0;t=15, "month";r=7;t=9') == {
        "minute": {"r": 0, "t": 15}, "month": {"r": 7, "t": 9}}


# --- the limiter over a counter ------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(limit=st.integers(1, 30), n=st.integers(0, 60))
def test_exactly_the_limit_is_accepted_and_remaining_counts_down(limit: int, n: int):
    lim = Limiter(MemoryCounter(), per_minute=limit)
    rec = KeyRecord("k", "k", "test", ())
    decisions = [lim.hit(rec, NOW) for _ in range(n)]
    accepted = [d for d in decisions if d.allowed]
    assert len(accepted) == min(n, limit)
    remaining = [parse_sf_list(hdr(d.headers, "RateLimit"))["minute"]["r"] for d in decisions]
    assert remaining == [max(0, limit - i - 1) for i in range(n)]
    assert all(d.code == "RATE_LIMITED" and d.retry_after == 60 for d in decisions[limit:])


def test_minute_rolls_over_with_the_clock():
    lim = Limiter(MemoryCounter(), per_minute=2)
    t0 = at("2026-11-22T12:00:58")
    assert [lim.hit(TEST, t0).allowed for _ in range(3)] == [True, True, False]
    refused = lim.hit(TEST, t0 + timedelta(seconds=1))
    assert not refused.allowed and refused.retry_after == 1
    assert lim.hit(TEST, at("2026-11-22T12:01:00")).allowed


def test_month_allowance_and_roll_over_for_live_keys():
    lim = Limiter(MemoryCounter(), per_minute=1000, monthly=3)
    end_of_jan = at("2027-01-31T23:59:30")
    got = [lim.hit(LIVE, end_of_jan) for _ in range(4)]
    assert [d.allowed for d in got] == [True, True, True, False]
    last = got[-1]
    assert last.code == "MONTHLY_ALLOWANCE_EXHAUSTED" and last.retry_after == 30
    assert parse_sf_list(hdr(last.headers, "RateLimit"))["month"] == {"r": 0, "t": 30}
    policy = parse_sf_list(hdr(last.headers, "RateLimit-Policy"))
    assert policy == {"minute": {"q": 1000, "w": 60}, "month": {"q": 3, "w": 31 * 86_400}}
    feb = lim.hit(LIVE, at("2027-02-01T00:00:00"))
    assert feb.allowed
    assert parse_sf_list(hdr(feb.headers, "RateLimit"))["month"]["r"] == 2


def test_test_keys_never_touch_the_allowance():
    counter = MemoryCounter()
    lim = Limiter(counter, per_minute=1000, monthly=2)
    for i in range(10):
        d = lim.hit(TEST, NOW + timedelta(minutes=i))
        assert d.allowed
        assert "month" not in parse_sf_list(hdr(d.headers, "RateLimit-Policy"))
    assert not any(name.startswith("M:") for name in counter._n)


def test_throttled_requests_do_not_eat_the_month():
    counter = MemoryCounter()
    lim = Limiter(counter, per_minute=2, monthly=100)
    for _ in range(5):
        lim.hit(LIVE, NOW)
    assert counter._n[f"M:{LIVE.id}:2026-11"] == 2


def test_per_key_overrides_beat_the_defaults():
    lim = Limiter(MemoryCounter())
    own = KeyRecord("o", "o", "live", (), per_minute=2, monthly=5)
    d = lim.hit(own, NOW)
    assert parse_sf_list(hdr(d.headers, "RateLimit-Policy")) == {
        "minute": {"q": 2, "w": 60}, "month": {"q": 5, "w": 30 * 86_400}}
    default = lim.hit(LIVE, NOW)
    pol = parse_sf_list(hdr(default.headers, "RateLimit-Policy"))
    assert pol["minute"]["q"] == DEFAULT_PER_MINUTE and pol["month"]["q"] == DEFAULT_MONTHLY


# --- what counts, through the gate ---------------------------------------------------------


@pytest.fixture
def release(release_root: Path):
    return LocalReleases(release_root).current()


def test_what_counts(release, store: SQLiteKeyStore, tmp_path: Path):
    counter = SQLiteCounter(tmp_path / "c.sqlite")
    lim = Limiter(counter, per_minute=100)
    kid, key = store.create("c", ["risk_scores"], "live", now=NOW)
    auth = {"authorization": f"Bearer {key}"}
    name = f"m:{kid}:{minute_window(NOW).bucket}"

    def go(path: str, query: str = "", **h: str):
        return handle(Request("GET", path, query, {**auth, **h}), NOW, store, release, lim)

    ok = go("/v1/context/lgas", "state=KN")
    assert ok.status == 200 and counter.value(name) == 1
    assert go("/v1/context/lgas", "state=KN", **{"if-none-match": hdr(ok.headers, "ETag")}).status == 304
    assert counter.value(name) == 2  # 304 counts
    assert go("/v1/context/lgas", "state=ZZ").status == 404  # parameter errors count
    assert go("/v1/context/lgas", "bogus=1").status == 400
    assert go("/v1/boundaries/lgas", "state=KN").status == 403  # scope errors count
    assert counter.value(name) == 5
    # 401s never count: a wrong key cannot burn someone's allowance
    bad = handle(Request("GET", "/v1/periods", "", {"authorization": "Bearer svc_live_" + "x" * 32}),
                 NOW, store, release, lim)
    assert bad.status == 401 and hdr(bad.headers, "RateLimit") is None
    assert handle(Request("GET", "/v1/periods", "", {}), NOW, store, release, lim).status == 401
    # preflight and unknown paths are decided before the key, so they do not count either
    assert handle(Request("OPTIONS", "/v1/periods", "", {}), NOW, store, release, lim).status == 204
    assert counter.value(name) == 5
    assert counter.value(f"M:{kid}:2026-11") == 5


def test_headers_on_every_authenticated_answer_and_429_bodies(release, store: SQLiteKeyStore, tmp_path: Path):
    lim = Limiter(SQLiteCounter(tmp_path / "c.sqlite"))
    _, key = store.create("h", ["risk_scores"], "live", per_minute=3, monthly=4, now=NOW)
    auth = {"authorization": f"Bearer {key}"}
    t = at("2026-11-22T12:00:20")
    answers = [
        handle(Request("GET", "/v1/periods", "", auth), t, store, release, lim),
        handle(Request("GET", "/v1/context/lgas", "state=zz", auth), t, store, release, lim),
        handle(Request("GET", "/v1/boundaries/lgas", "state=KN", auth), t, store, release, lim),
    ]
    assert [a.status for a in answers] == [200, 404, 403]
    for a in answers:
        assert hdr(a.headers, "RateLimit-Policy") and hdr(a.headers, "RateLimit")
        assert hdr(a.headers, "Retry-After") is None
    minute_429 = handle(Request("GET", "/v1/periods", "", auth), t, store, release, lim)
    assert minute_429.status == 429
    doc = json.loads(minute_429.body)
    assert doc["code"] == "RATE_LIMITED" and doc["status"] == 429
    assert hdr(minute_429.headers, "Content-Type") == "application/problem+json"
    assert hdr(minute_429.headers, "Retry-After") == "40"
    assert parse_sf_list(hdr(minute_429.headers, "RateLimit"))["minute"] == {"r": 0, "t": 40}
    # next minute: one more request fits the month (3 used of 4), then the month is gone
    t2 = at("2026-11-22T12:01:00")
    assert handle(Request("GET", "/v1/periods", "", auth), t2, store, release, lim).status == 200
    month_429 = handle(Request("GET", "/v1/periods", "", auth), t2, store, release, lim)
    assert json.loads(month_429.body)["code"] == "MONTHLY_ALLOWANCE_EXHAUSTED"
    seconds_to_december = int((at("2026-12-01T00:00:00") - t2).total_seconds())
    assert hdr(month_429.headers, "Retry-After") == str(seconds_to_december)
    # and the browser may read all of them
    exposed = {h.strip().lower() for h in EXPOSE_HEADERS.split(",")}
    assert {"ratelimit", "ratelimit-policy", "retry-after"} <= exposed


# --- exactness under concurrency -------------------------------------------------------------


def test_sqlite_counter_is_exact_across_threads(tmp_path: Path):
    counter = SQLiteCounter(tmp_path / "c.sqlite")
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: counter.incr("x", 2**40), range(400)))
    assert sorted(got) == list(range(1, 401))


def _hammer(path: str, n: int, out: multiprocessing.Queue) -> None:
    c = SQLiteCounter(path)
    out.put([c.incr("x", 2**40) for _ in range(n)])


def test_sqlite_counter_is_exact_across_processes(tmp_path: Path):
    path = str(tmp_path / "c.sqlite")
    SQLiteCounter(path)
    ctx = multiprocessing.get_context("fork")  # spawn would re-import this module and polars
    q = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(path, 150, q)) for _ in range(4)]
    for p in procs:
        p.start()
    got = [v for _ in procs for v in q.get(timeout=60)]
    for p in procs:
        p.join(timeout=30)
    assert sorted(got) == list(range(1, 601))


def _burst(url: str, key: str, clients: int, each: int, path: str = "/v1/periods") -> Tally:
    def one(_: int) -> list[int]:
        with httpx.Client(base_url=url, timeout=20) as c:
            return [c.get(path, headers={"Authorization": f"Bearer {key}"}).status_code for _ in range(each)]

    with ThreadPoolExecutor(clients) as pool:
        return Tally(s for statuses in pool.map(one, range(clients)) for s in statuses)


def test_exact_limit_over_http_with_threads(release_root: Path, store: SQLiteKeyStore, tmp_path: Path):
    _, key = store.create("burst", ["risk_scores"], "test", per_minute=37, now=NOW)
    lim = Limiter(SQLiteCounter(tmp_path / "c.sqlite"))
    with LiveServer(App(release_root, store, lim, clock=lambda: NOW)) as live:
        tally = _burst(live.url, key, clients=8, each=15)
    assert tally == Tally({200: 37, 429: 120 - 37})


@pytest.fixture(params=["uvicorn", "direct"])
def two_workers(release_root: Path, tmp_path: Path,
                request: pytest.FixtureRequest) -> Iterator[tuple[str, SQLiteKeyStore, subprocess.Popen]]:
    keys_path = tmp_path / "var" / "keys.sqlite"
    store = SQLiteKeyStore(keys_path)
    port = free_port()
    env = {**os.environ, "MALARIA_RISK_FIXED_NOW": "2026-11-22T12:00:10Z"}
    exe = Path(sys.executable).with_name("malaria-risk")
    proc = subprocess.Popen(
        [str(exe), "serve", "--root", str(release_root), "--host", "127.0.0.1", "--port", str(port),
         "--keys", str(keys_path), "--workers", "2", "--http", request.param],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url + "/v1/periods", proc, "malaria-risk serve")
    try:
        yield url, store, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def test_exact_limit_over_http_with_two_workers(two_workers):
    url, store, proc = two_workers
    # uvicorn's supervisor holds the port and has two worker processes under it
    assert len(_children(proc.pid)) >= 2
    _, key = store.create("w", ["risk_scores"], "live", per_minute=53, monthly=70, now=NOW)
    tally = _burst(url, key, clients=10, each=12)
    assert tally == Tally({200: 53, 429: 120 - 53})
    # a second key is counted apart; its allowance (live) runs out across the workers too
    _, other = store.create("w2", ["risk_scores"], "live", per_minute=1000, monthly=25, now=NOW)
    assert _burst(url, other, clients=6, each=10) == Tally({200: 25, 429: 35})
    r = httpx.get(url + "/v1/periods", headers={"Authorization": f"Bearer {other}"})
    assert r.json()["code"] == "MONTHLY_ALLOWANCE_EXHAUSTED"
    assert r.headers["retry-after"] == str(int((at("2026-12-01T00:00:00") - at("2026-11-22T12:00:10"))
                                              .total_seconds()))
    assert "ratelimit" in r.headers["access-control-expose-headers"].lower()


def test_revocation_is_immediate_through_the_key_cache(two_workers):
    url, store, _ = two_workers
    kid, key = store.create("rv", ["risk_scores"], "test", per_minute=1000, now=NOW)
    h = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url) as c:
        assert all(c.get("/v1/periods", headers=h).status_code == 200 for _ in range(6))  # warm both workers
        store.revoke(kid)
        assert [c.get("/v1/periods", headers=h).json()["code"] for _ in range(6)] == ["API_KEY_REVOKED"] * 6


def test_counters_file_sits_beside_the_keys():
    assert counters_path_for("var/keys.sqlite") == Path("var/keys.counters.sqlite")


def test_threads_share_one_limiter_without_losing_counts(tmp_path: Path):
    """The once-a-minute sweep must never drop the window being counted."""
    lim = Limiter(SQLiteCounter(tmp_path / "c.sqlite"), per_minute=50)
    results: list[bool] = []
    lock = threading.Lock()

    def run() -> None:
        for s in range(0, 120, 7):
            d = lim.hit(TEST, NOW + timedelta(seconds=s))
            with lock:
                results.append(d.allowed)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 18 instants over two minutes (9 in each), 6 threads → 54 per minute, 50 accepted each
    assert results.count(True) == 100
