"""Memory and connection time of `malaria-risk serve` under the client-controlled attacks.

Run with `make bench-edge-attacks`. Starts the server (one worker) for each HTTP front
(BENCH_FRONTS, default "direct uvicorn") on a small synthetic release, then per attack
prints the worker's resident-set growth (VmRSS) and how long the server kept the
connection open:

* oversized head: 4 connections each try to send a 64 MB header line;
* unread pipelining: 4 connections each try to send 14 MB of pipelined GETs, never reading
  (4 s), then close; growth measured during the attack and 1 s after;
* trickled head: one byte every 0.5 s, up to 20 s;
* silent connection: connect, send nothing, up to 20 s.

BENCH_CHECKOUT names another checkout to run the server from (its own code, this
script's client), which is how figures before a change are taken side by side.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MB = 1024 * 1024


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def oversized(port: int) -> str:
    sent_total = 0
    for _ in range(4):
        with connect(port) as s:
            s.sendall(b"GET /v1/periods HTTP/1.1\r\nHost: x\r\nX-Pad: ")
            sent = 0
            s.settimeout(10)
            try:
                while sent < 64 * MB:
                    s.sendall(b"a" * MB)
                    sent += MB
                s.sendall(b"\r\n\r\n")
                answer = s.recv(100)
            except OSError:
                answer = b"(reset)"
            sent_total += sent
    return f"server took {sent_total / MB:.0f} of 256 MB; answer {answer[:12]!r}"


def pipelined(port: int) -> str:
    request = b"GET /v1/periods HTTP/1.1\r\nHost: x\r\n\r\n"
    block = request * (MB // len(request))
    socks = [connect(port) for _ in range(4)]
    for s in socks:
        s.setblocking(False)
    left = {id(s): 14 * MB for s in socks}
    accepted = 0
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline and any(left.values()):
        for s in socks:
            if left[id(s)] > 0:
                try:
                    n = s.send(block[: min(len(block), left[id(s)])])
                except (BlockingIOError, OSError):
                    continue
                left[id(s)] -= n
                accepted += n
        time.sleep(0.005)
    global _during
    _during = rss(_pid)
    for s in socks:
        s.close()
    time.sleep(1)
    return f"server accepted {accepted / MB:.1f} of 56 MB"


def held_open(port: int, trickle: bool) -> str:
    with connect(port) as s:
        t0 = time.monotonic()
        s.settimeout(0.5)
        if trickle:
            s.sendall(b"GET /v1/periods HTTP/1.1\r\n")
        while time.monotonic() - t0 < 20:
            try:
                if trickle:
                    s.sendall(b"x")
                data = s.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if data == b"" or data:
                return f"closed after {time.monotonic() - t0:.1f} s ({data[:12]!r})"
        return "still open after 20 s"


_pid = 0
_during = 0


def main() -> None:
    global _pid, _during
    from pipeline.release.render import render_release
    from tests.conftest import synthetic_produced

    checkout = Path(os.environ.get("BENCH_CHECKOUT", ROOT)).resolve()
    fronts = os.environ.get("BENCH_FRONTS", "direct uvicorn").split()
    tmp = Path(tempfile.mkdtemp(prefix="bench-attacks-"))
    render_release(tmp / "build", synthetic_produced(), "2026-11-22T10:00:00Z")
    print(f"server code: {checkout}")
    print(f"{'front':<10} {'attack':<20} {'RSS before':>11} {'during':>9} {'after':>9}  outcome")
    for front in fronts:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", "serve", "--root", str(tmp / "build"), "--port", str(port),
             "--keys", str(tmp / f"keys-{front}.sqlite"), "--http", front],
            cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _pid = proc.pid
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    with connect(port) as s:
                        s.sendall(b"GET /v1/periods HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        s.recv(100)
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"{front} front did not start") from None
                    time.sleep(0.1)
            for _ in range(200):
                with connect(port) as s:
                    s.sendall(b"GET /v1/periods HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    while s.recv(65536):
                        pass
            attacks: list[tuple[str, Callable[[int], str]]] = [
                ("oversized head", oversized), ("unread pipelining", pipelined),
                ("trickled head", lambda p: held_open(p, True)), ("silent connection", lambda p: held_open(p, False))]
            for label, attack in attacks:
                before = rss(proc.pid)
                _during = 0
                outcome = attack(port)
                after = rss(proc.pid)
                during = max(_during, after)
                print(f"{front:<10} {label:<20} {before / MB:>9.0f}MB {during / MB:>7.0f}MB {after / MB:>7.0f}MB  "
                      f"{outcome}", flush=True)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
