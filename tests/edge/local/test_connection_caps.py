"""Nobody jams a local front: the dashboard times out a request that trickles in (or never comes),
and both fronts (the API's direct front, the dashboard's uvicorn front) cap the connections one
client holds, answer the one too many with 429 and log it. Real servers on loopback, where
every connection comes from 127.0.0.1, so one client; the caps and deadlines are made small
(the rule is the same, the wait is not)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

import dashboard.serve as dash_serve
from dashboard.app import create_app
from dashboard.settings import DashboardSettings
from edge.accesslog import AccessLog
from edge.local import direct
from edge.local.app import App
from tests.conftest import LiveServer, free_port
from tests.dashboard.conftest import World
from tests.edge.local.test_attacks import trickle

CAP = 4


def read_all(s: socket.socket, timeout: float = 5) -> bytes:
    s.settimeout(timeout)
    out = b""
    with contextlib.suppress(OSError):
        while chunk := s.recv(65536):
            out += chunk
    return out


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


# -- the dashboard's front ----------------------------------------------------------------------------------
@pytest.fixture
def dashboard_port(tmp_path: Path) -> Iterator[int]:
    """`malaria-risk dashboard`'s uvicorn settings, with a cap of CAP and a 1 s deadline (older code,
    which has neither, runs with its own settings, so these tests fail on what they check)."""
    world = World(tmp_path)
    app = create_app(world.service, DashboardSettings(store=f"sqlite:{world.keys_path}"))
    if hasattr(dash_serve, "protocol"):
        opts = {**dash_serve.options(CAP), "http": dash_serve.protocol(CAP, request_seconds=1.0)}
    else:
        opts = dash_serve.options()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                                           **opts))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "dashboard did not start"
        time.sleep(0.02)
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def test_the_dashboard_answers_a_trickled_head_with_408(dashboard_port: int, capfd):
    with connect(dashboard_port) as s:
        t0 = time.monotonic()
        s.sendall(b"GET /sign-in HTTP/1.1\r\n")
        answer = trickle(s, b"Host: 127.0.0.1\r\nX-Slow: " + b"z" * 30, 0.2)  # a byte every 0.2 s: 6 s in all
        answer += read_all(s, 2)
        waited = time.monotonic() - t0
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
    assert waited < 3, waited
    assert any(json.loads(x)["event"] == "dashboard.request_timeout"
               for x in capfd.readouterr().err.splitlines() if x.startswith("{"))


def test_the_dashboard_closes_a_connection_that_sends_nothing(dashboard_port: int):
    with connect(dashboard_port) as s:
        t0 = time.monotonic()
        got = read_all(s, 4)
        assert time.monotonic() - t0 < 3.5 and (got == b"" or got.startswith(b"HTTP/1.1 408"))


def test_the_dashboard_caps_connections_per_client(dashboard_port: int, capfd):
    held = [connect(dashboard_port) for _ in range(CAP)]
    time.sleep(0.2)
    with connect(dashboard_port) as extra:
        answer = read_all(extra, 2)
    assert answer.startswith(b"HTTP/1.1 429") and b"Too many open connections" in answer
    refused = [json.loads(x) for x in capfd.readouterr().err.splitlines() if x.startswith("{")]
    assert any(e["event"] == "dashboard.connection_refused" and e["cap"] == CAP for e in refused)
    held[0].sendall(b"GET /sign-in HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert read_all(held[0]).startswith(b"HTTP/1.1 200")  # the client's own connections still work
    time.sleep(0.2)
    with connect(dashboard_port) as again:  # a closed one frees its place
        again.sendall(b"GET /sign-in HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert read_all(again).startswith(b"HTTP/1.1 200")
    for s in held:
        s.close()


# -- the API's direct front -------------------------------------------------------------------------------------
class CappedServer(LiveServer):
    """The direct front with a cap of CAP connections per client (older code: its own, none)."""

    def _run_direct(self) -> None:
        import uvloop

        sock = direct.listening_socket("127.0.0.1", self.port)
        extra: dict[str, Any] = {"per_client": CAP} if "per_client" in inspect.signature(direct.serve_socket).parameters \
            else {}

        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self.stop = self.loop.create_future()
            await direct.serve_socket(self.app, sock, self.stop, ready=self.started.set, **extra)

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())


def test_the_api_front_caps_connections_per_client_and_logs_it(release_root: Path, store, all_scopes_key: str):
    lines: list[str] = []
    app = App(release_root, store, access_log=AccessLog(lines.append, ok_every=1))
    with CappedServer(app) as live:
        held = [connect(live.port) for _ in range(CAP)]
        time.sleep(0.2)
        with connect(live.port) as extra:
            answer = read_all(extra, 2)
        assert answer.startswith(b"HTTP/1.1 429"), answer[:80]
        held[0].sendall(f"GET /v1/periods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {all_scopes_key}\r\n"
                        "Connection: close\r\n\r\n".encode())
        assert read_all(held[0]).startswith(b"HTTP/1.1 200")
        time.sleep(0.2)
        with connect(live.port) as again:  # the closed one's place is free
            again.sendall(b"GET /v1/periods HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert read_all(again).startswith(b"HTTP/1.1 401")
        for s in held:
            s.close()
    refused = [json.loads(x) for x in lines if '"connection_refused"' in x]
    assert len(refused) == 1 and refused[0]["client"] == "127.0.0.1" and refused[0]["status"] == 429
