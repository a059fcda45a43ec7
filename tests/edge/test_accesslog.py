"""One JSON line per edge decision (edge/accesslog.py), through the real local server on loopback.

The CloudFront adapter writes its lines with the same class: tests/edge/test_cloudfront.py
reads the line the built bundle prints for a recorded event.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.accesslog import METHODS, AccessLog, route_label
from edge.gate import Response, error
from edge.local.app import App
from edge.local.settings import ServerSettings
from edge.stores.sqlite import SQLiteKeyStore
from tests.conftest import NOW, LiveServer

FIELDS = ["event", "time", "runtime", "method", "route", "status", "problem", "key_id", "release", "latency_ms",
          "sample"]


def test_every_decision_is_one_line_with_key_id_never_the_key(release_root: Path, store: SQLiteKeyStore,
                                                               front: str):
    kid, key = store.create("logged", ["risk_scores"], "live", now=NOW)
    lines: list[str] = []
    app = App(release_root, store, clock=lambda: NOW, access_log=AccessLog(lines.append))
    release_id = (release_root / "current").resolve().name
    with LiveServer(app, front) as live, httpx.Client(base_url=live.url, timeout=10) as c:
        auth = {"Authorization": f"Bearer {key}"}
        assert c.get("/v1/risk/states", params={"period": "2024-01"}, headers=auth).status_code == 200
        assert c.get("/v1/risk/states", params={"period": "1999-01"}, headers=auth).status_code == 404
        assert c.get("/v1/boundaries/lgas", params={"state": "KN"}, headers=auth).status_code == 403
        assert c.get("/v1/periods", headers={"Authorization": "Bearer svc_live_" + "x" * 32}).status_code == 401
        assert c.get("/etc/passwd?secret=1").status_code == 404
    docs = [json.loads(line) for line in lines]
    assert [list(d) for d in docs] == [FIELDS] * 5
    got = [(d["route"], d["status"], d["problem"], d["key_id"]) for d in docs]
    assert got == [
        ("/v1/risk/states", 200, None, kid),
        ("/v1/risk/states", 404, "PERIOD_NOT_AVAILABLE", kid),
        ("/v1/boundaries/lgas", 403, "SCOPE_REQUIRED", kid),
        ("/v1/periods", 401, "API_KEY_INVALID", None),
        ("other", 404, "NOT_FOUND", None),
    ]
    assert all(d["release"] == release_id and d["runtime"] == "local" and d["latency_ms"] >= 0 for d in docs)
    text = "\n".join(lines)
    assert key not in text and "passwd" not in text and "secret" not in text and "1999" not in text


def test_successes_are_sampled_problems_never(release_root: Path, store: SQLiteKeyStore):
    _, key = store.create("sampled", ["risk_scores"], "test", now=NOW)
    lines: list[str] = []
    app = App(release_root, store, clock=lambda: NOW, access_log=AccessLog(lines.append, ok_every=3))
    auth = {"authorization": f"Bearer {key}"}
    for _ in range(7):
        assert app.respond("GET", "/v1/periods", "", auth)[0].status == 200
        assert app.respond("GET", "/v1/periods", "", {})[0].status == 401
    docs = [json.loads(line) for line in lines]
    assert [(d["status"], d["sample"]) for d in docs if d["status"] == 200] == [(200, 3)] * 3  # 1st, 4th, 7th
    assert sum(d["status"] == 401 for d in docs) == 7

    lines.clear()
    quiet = App(release_root, store, clock=lambda: NOW, access_log=AccessLog(lines.append, ok_every=0))
    quiet.respond("GET", "/v1/periods", "", auth)
    quiet.respond("GET", "/v1/periods", "", {})
    assert [json.loads(line)["status"] for line in lines] == [401]


def test_no_release_is_logged_with_no_release_id(tmp_path: Path, store: SQLiteKeyStore):
    lines: list[str] = []
    app = App(tmp_path / "empty", store, access_log=AccessLog(lines.append))
    assert app.respond("GET", "/v1/periods", "", {})[0].status == 500
    (doc,) = [json.loads(line) for line in lines]
    assert (doc["problem"], doc["release"]) == ("RELEASE_INCOMPLETE", None)


def test_labels_are_route_table_paths_or_fixed_words():
    assert route_label("/v1/risk/lgas") == "/v1/risk/lgas"
    assert route_label("/v1/downloads/2026-01-01T000000Z-abc/x.csv") == "/v1/downloads/{release_id}/{name}"
    assert route_label("/docs/api.html") == "/docs/" and route_label("/") == "/docs/"
    assert route_label("/v1/risk/lgas/../../x") == "other"
    resp = error("RATE_LIMITED", "slow down", "/v1/periods")
    line = json.loads(AccessLog(lambda _t: None).line("BREW", "/v1/periods", resp, "r1", 1.23456))
    assert (line["method"], line["problem"], line["status"], line["latency_ms"]) == ("other", "RATE_LIMITED", 429,
                                                                                      1.235)
    assert json.loads(AccessLog(print).line("GET", "/", Response(301, []), None, 0))["problem"] is None


def test_server_settings_carry_the_log_settings_to_workers():
    s = ServerSettings(access_log=False, log_ok_every=50)
    back = ServerSettings.from_env(s.to_env())
    assert (back.access_log, back.log_ok_every) == (False, 50)
    with pytest.raises(ValueError):
        ServerSettings(log_ok_every=-1)


def test_a_stalled_log_reader_never_blocks_serving():
    """Lines go to a pipe nobody reads: recording returns at once; the oldest lines are dropped and
    counted; what is written is whole lines, and the drop is reported when the reader catches up."""
    import os
    import threading

    from edge.local.loglines import BackgroundLines

    r, w = os.pipe()
    try:
        out = BackgroundLines(w, max_lines=100, interval=0.01)
        done = threading.Event()

        def record() -> None:
            for i in range(20_000):  # ~1.4 MB: far more than the pipe holds
                out(json.dumps({"event": "edge_decision", "i": i, "pad": "x" * 40}))
            done.set()

        threading.Thread(target=record, daemon=True).start()
        assert done.wait(timeout=30)  # a blocking sink would hang here once the pipe is full
        assert out.dropped > 0
        received = b""
        os.set_blocking(r, False)
        def settled() -> bool:
            """The writer has caught up: its last whole line is the drop report or the last record."""
            lines = received.decode().splitlines()
            last = json.loads(lines[-1]) if lines and received.endswith(b"\n") else {}
            return last.get("event") == "access_log_dropped" or last.get("i") == 19_999

        for _ in range(1000):  # bounded: 20 s at most on a loaded machine
            try:
                received += os.read(r, 1 << 16)
            except BlockingIOError:
                if b"access_log_dropped" in received and settled():
                    break
                threading.Event().wait(0.02)
        docs = [json.loads(line) for line in received.decode().splitlines()]  # whole lines only
        dropped = [d for d in docs if d["event"] == "access_log_dropped"]
        assert dropped and sum(d["lines"] for d in dropped) <= out.dropped
        assert docs[-1]["event"] == "access_log_dropped" or docs[-1]["i"] == 19_999
        out.stop()
        assert out._thread is not None and not out._thread.is_alive()  # nothing writes to the fd any more
    finally:
        os.close(r)
        os.close(w)


@settings(max_examples=200)
@given(key_id=st.none() | st.text(max_size=20), release=st.none() | st.text(max_size=30),
       status=st.integers(100, 599), sample=st.integers(1, 10_000), latency=st.floats(0, 1e6),
       method=st.text(max_size=8), path=st.text(max_size=40))
def test_the_hand_formatted_line_is_the_json_it_claims(key_id: str | None, release: str | None, status: int,
                                                       sample: int, latency: float, method: str, path: str):
    """Whatever a store or a client put into the fields, the line parses and says exactly that."""
    resp = Response(status, [], key_id=key_id)
    resp.extra["problem"] = "RATE_LIMITED" if status == 429 else None
    doc = json.loads(AccessLog(lambda _t: None, runtime='cloud"front').line(method, path, resp, release, latency,
                                                                            sample))
    assert list(doc) == FIELDS
    assert (doc["key_id"], doc["release"], doc["status"], doc["sample"]) == (key_id, release, status, sample)
    assert doc["runtime"] == 'cloud"front' and doc["route"] == route_label(path)
    assert doc["method"] == (method.upper() if method.upper() in METHODS else "other")
    assert doc["problem"] == resp.extra["problem"] and abs(doc["latency_ms"] - latency) <= 0.0005
