"""What a client controls is bounded on the default front, over real HTTP on loopback.

Memory is measured on a real `malaria-risk serve` process (default front, one worker):
its resident set before and after each attack. Deadlines are measured on the same front
run in a thread with short deadlines patched in (the rule is the same, the wait is not).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge.local import direct
from edge.local.app import App
from edge.local.settings import DEFAULT_FRONT
from tests.conftest import LiveServer, free_port, wait_until_up

MB = 1024 * 1024


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class Served:
    def __init__(self, proc: subprocess.Popen[bytes], port: int):
        self.proc = proc
        self.port = port

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=5)

    def get(self, target: str = "/v1/periods", extra: str = "") -> bytes:
        with self.connect() as s:
            s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n".encode())
            return read_all(s)


def read_all(s: socket.socket) -> bytes:
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data


@pytest.fixture
def served(release_root: Path, tmp_path: Path) -> Iterator[Served]:
    """`malaria-risk serve` as an operator starts it: default front, one worker."""
    assert DEFAULT_FRONT == "direct"
    port = free_port()
    exe = Path(sys.executable).with_name("malaria-risk")
    proc = subprocess.Popen([str(exe), "serve", "--root", str(release_root), "--port", str(port),
                             "--keys", str(tmp_path / "var" / "keys.sqlite")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/docs/", proc, "malaria-risk serve")
        yield Served(proc, port)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def warm(served: Served) -> int:
    for _ in range(50):
        served.get()
    return rss(served.proc.pid)


def test_oversized_head_is_refused_without_reading_it(served: Served):
    before = warm(served)
    for _ in range(4):
        with served.connect() as s:
            s.sendall(b"GET /v1/periods HTTP/1.1\r\nHost: x\r\nX-Pad: ")
            sent = 0
            try:  # try to push 64 MB; the server answers 431 and closes after 64 KiB
                while sent < 64 * MB:
                    s.sendall(b"a" * MB)
                    sent += MB
            except OSError:
                pass
            answer = read_all(s) if sent < 64 * MB else b""
        assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
        assert sent < 16 * MB
    assert rss(served.proc.pid) - before < 8 * MB
    assert served.get().startswith(b"HTTP/1.1 401")  # still serving


def test_too_many_header_lines_is_431(served: Served):
    answer = served.get(extra="".join(f"X-H{i}: 1\r\n" for i in range(101)))
    assert answer.startswith(b"HTTP/1.1 431") and b"Too many header lines" in answer
    assert served.get(extra="".join(f"X-H{i}: 1\r\n" for i in range(90))).startswith(b"HTTP/1.1 401")


def test_unread_pipelining_stops_being_read_and_memory_stays_flat(served: Served):
    """Four connections each try to send 14 MB of pipelined requests and never read."""
    before = warm(served)
    request = b"GET /v1/periods HTTP/1.1\r\nHost: x\r\n\r\n"
    block = request * (MB // len(request))
    attackers = []
    accepted = 0
    for _ in range(4):
        s = served.connect()
        s.setblocking(False)
        attackers.append(s)
    deadline = time.monotonic() + 4
    pending = {id(s): 14 * MB for s in attackers}
    while time.monotonic() < deadline and any(pending.values()):
        for s in attackers:
            if pending[id(s)] <= 0:
                continue
            try:
                n = s.send(block[: min(len(block), pending[id(s)])])
            except BlockingIOError:
                continue
            pending[id(s)] -= n
            accepted += n
        time.sleep(0.01)
    grown = rss(served.proc.pid) - before
    # the server stopped reading: most of the 56 MB never left the clients
    assert accepted < 32 * MB, accepted  # what the kernel buffers on loopback
    assert grown < 16 * MB, grown / MB
    # and it still answers everyone else promptly
    t0 = time.monotonic()
    assert served.get().startswith(b"HTTP/1.1 401")
    assert time.monotonic() - t0 < 1
    for s in attackers:
        s.close()
    time.sleep(0.5)
    assert rss(served.proc.pid) - before < 16 * MB


@pytest.fixture
def quick(release_root: Path, store, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    """The default front with its deadlines shortened to seconds."""
    monkeypatch.setattr(direct, "REQUEST_TIMEOUT", 2.0)
    monkeypatch.setattr(direct, "IDLE_TIMEOUT", 1.0)
    with LiveServer(App(release_root, store)) as server:
        yield server


def trickle(s: socket.socket, rest: bytes, every: float) -> bytes:
    """Send `rest` one byte every `every` seconds until the server answers or closes; what it said."""
    s.settimeout(every)
    answer = b""
    for ch in rest:
        try:
            s.sendall(bytes([ch]))
            answer += s.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            break
        if answer:
            break
    return answer


def test_trickled_head_gets_408_at_the_deadline(quick: LiveServer):
    with socket.create_connection(("127.0.0.1", quick.port), timeout=10) as s:
        t0 = time.monotonic()
        s.sendall(b"GET /v1/periods HTTP/1.1\r\n")
        answer = trickle(s, b"Host: example.org\r\nX-Slow: " + b"z" * 100, 0.3)
        s.settimeout(5)
        with contextlib.suppress(OSError):
            answer += read_all(s)
        waited = time.monotonic() - t0
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
    assert 2.0 <= waited < 4.5, waited  # the deadline plus at most one sweep


def test_silent_connection_is_closed(quick: LiveServer):
    with socket.create_connection(("127.0.0.1", quick.port), timeout=10) as s:
        t0 = time.monotonic()
        assert s.recv(1) == b""  # closed by the server, nothing sent
        assert 1.0 <= time.monotonic() - t0 < 3.5


def test_idle_keep_alive_is_closed_after_an_answer(quick: LiveServer, all_scopes_key: str):
    with socket.create_connection(("127.0.0.1", quick.port), timeout=10) as s:
        s.sendall(f"GET /v1/periods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {all_scopes_key}\r\n\r\n".encode())
        t0 = time.monotonic()
        data = read_all(s)  # the answer, then the close
        assert data.startswith(b"HTTP/1.1 200")
        assert 1.0 <= time.monotonic() - t0 < 3.5


def test_a_request_body_over_the_bound_is_413(quick: LiveServer):
    with socket.create_connection(("127.0.0.1", quick.port), timeout=10) as s:
        s.sendall(b"GET /v1/periods HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" + b"b" * 70_000)
        assert read_all(s).startswith(b"HTTP/1.1 413")


def test_pipelined_answers_survive_a_client_that_reads_late(quick: LiveServer, all_scopes_key: str):
    """Bounded is not lossy: a client that pipelines 6,000 requests (several MB of answers, far
    past the write buffer and the pipeline bound, so reading is paused and resumed many
    times) and reads only when the server stops taking its requests gets every answer, in order."""
    req = f"GET /v1/periods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {all_scopes_key}\r\n\r\n".encode()
    last = b"GET /v1/nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    payload = req * 6000 + last
    data = b""
    with socket.create_connection(("127.0.0.1", quick.port), timeout=10) as s:
        s.setblocking(False)
        sent = 0
        while sent < len(payload):  # send as fast as the server reads; read only when it will not take more
            try:
                sent += s.send(payload[sent:sent + 65536])
            except BlockingIOError:
                time.sleep(0.01)
                with contextlib.suppress(BlockingIOError):
                    data += s.recv(1 << 20)
        s.setblocking(True)
        s.settimeout(10)
        data += read_all(s)
    assert data.count(b"HTTP/1.1 200 OK\r\n") == 6000
    assert data.rstrip().endswith(b"}") and data.rfind(b"HTTP/1.1 404") > data.rfind(b"HTTP/1.1 200")


if os.environ.get("CI_NO_PROC") and not Path("/proc/self/status").exists():  # pragma: no cover
    pytest.skip("needs /proc", allow_module_level=True)
