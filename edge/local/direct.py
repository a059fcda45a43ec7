"""The direct HTTP/1.1 front: httptools on uvloop straight into `App.respond`.

Opt-in (`malaria-risk serve --http direct`); uvicorn stays the default front. Why it
exists: on this 2-core machine uvicorn's per-request ASGI machinery (scope and message
dicts, a task per request cycle) capped even a do-nothing app at about 18k req/s, while
the same parser driven directly serves about 58k (docs/limits.md#throughput). The gate,
the key store, the limits and the file cache are the very same objects as under uvicorn;
only the HTTP framing differs.

What it keeps from uvicorn's behaviour: HTTP/1.1 keep-alive and pipelining (answers in
request order), HTTP/1.0 with or without keep-alive, a `date` header, no `server` header,
a 5 s keep-alive idle timeout, TCP_NODELAY. What it adds: the request head is capped
(431), and a client that stops reading stops being read (pipelined requests wait in a
queue, never as rendered bodies in memory). Framing errors (400, 431, 500) are plain
text, because they happen before there is a request for the gate to judge.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Callable
from email.utils import formatdate

from .app import App, create_app

MAX_HEAD_BYTES = 64 * 1024
IDLE_TIMEOUT = 5.0  # uvicorn's keep-alive default
STALLED_TIMEOUT = 60.0  # a client that reads nothing of a response for this long is dropped
SHUTDOWN_GRACE = 5.0


def listening_socket(host: str, port: int) -> socket.socket:
    """Bound once by the supervisor and shared by the workers (Linux copies TCP_NODELAY to accepted sockets)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class _HeadTooLarge(Exception):
    pass


def _status_lines() -> dict[int, bytes]:
    from http import HTTPStatus

    return {s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n".encode() for s in HTTPStatus}


class _Worker:
    """Per-process state shared by connections: the app, the open connections, the cached Date."""

    def __init__(self, app: App):
        self.app = app
        self.connections: set[_Connection] = set()
        self.status_lines = _status_lines()
        self._date_second = -1
        self._date = b""

    def date(self) -> bytes:
        """Formatted once per second rather than once per request."""
        now = int(time.time())
        if now != self._date_second:
            self._date = b"date: " + formatdate(now, usegmt=True).encode() + b"\r\n"
            self._date_second = now
        return self._date


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection. Requests are queued as parsed and answered in order.

    Answers are written synchronously (the gate and the file cache do no awaiting), so
    a request costs one parse callback series, one `App.respond` and one `write`.
    """

    def __init__(self, worker: _Worker):
        import httptools

        self.worker = worker
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.headers: dict[str, str] = {}
        self.head_bytes = 0
        self.pending: deque[tuple[str, bytes, dict[str, str], bool, str]] = deque()
        self.paused = False
        self.closing = False
        self.last_active = time.monotonic()

    # -- transport events ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.worker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.pending.clear()
        self.worker.connections.discard(self)

    def pause_writing(self) -> None:
        self.paused = True
        if not self.closing and self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        self.last_active = time.monotonic()
        if not self.closing and self.transport is not None:
            self.transport.resume_reading()
            self._drain()

    def data_received(self, data: bytes) -> None:
        import httptools

        self.last_active = time.monotonic()
        failure: tuple[int, bytes] | None = None
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # no upgrades are served: answer what was parsed, then close (what follows is not HTTP/1.1)
            if self.pending:
                method, url, headers, _, version = self.pending.pop()
                self.pending.append((method, url, headers, False, version))
            else:
                failure = (400, b"Protocol upgrades are not supported.")
        except httptools.HttpParserCallbackError as e:
            too_large = isinstance(e.__context__, _HeadTooLarge) or isinstance(e.__cause__, _HeadTooLarge)
            failure = (431, b"Request head too large.") if too_large else (400, b"Invalid HTTP request.")
        except httptools.HttpParserError:
            failure = (400, b"Invalid HTTP request.")
        self._drain()
        if failure is not None and not self.closing:
            self._write_plain(*failure)

    # -- parser callbacks -----------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.url = b""
        self.headers = {}
        self.head_bytes = 0

    def on_url(self, url: bytes) -> None:
        self.url += url
        self.head_bytes += len(url)
        if self.head_bytes > MAX_HEAD_BYTES:
            raise _HeadTooLarge

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_bytes += len(name) + len(value)
        if self.head_bytes > MAX_HEAD_BYTES:
            raise _HeadTooLarge
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_message_complete(self) -> None:
        p = self.parser
        self.pending.append((p.get_method().decode("latin-1"), self.url, self.headers, p.should_keep_alive(),
                             p.get_http_version()))

    # -- answering ------------------------------------------------------------------------
    def _drain(self) -> None:
        """Answer queued requests until none is left or the client stops reading."""
        while self.pending and not self.paused and not self.closing:
            self._answer(*self.pending.popleft())

    def _answer(self, method: str, url: bytes, headers: dict[str, str], keep_alive: bool, version: str) -> None:
        import httptools

        try:
            parsed = httptools.parse_url(url)
        except httptools.HttpParserInvalidURLError:
            self._write_plain(400, b"Invalid request target.")
            return
        query = parsed.query
        try:
            resp, body = self.worker.app.respond(method, parsed.path.decode("latin-1"),
                                                 query.decode("latin-1") if query else "", headers)
        except Exception:
            import traceback

            traceback.print_exc()
            self._write_plain(500, b"Internal server error.")
            return
        w = self.worker
        status = resp.status
        head = "".join([f"{k}: {v}\r\n" for k, v in resp.headers])
        if status != 304 and status != 204:
            head += f"content-length: {len(body)}\r\n"
        if not keep_alive:
            head += "connection: close\r\n"
        elif version == "1.0":
            head += "connection: keep-alive\r\n"
        start = w.status_lines.get(status) or f"HTTP/1.1 {status} \r\n".encode()
        out = start + w.date() + head.encode("latin-1") + b"\r\n"
        transport = self.transport
        assert transport is not None
        if method != "HEAD" and status != 304 and status != 204 and body:
            if len(body) <= 65536:
                transport.write(out + body)
            else:
                transport.writelines([out, body])
        else:
            transport.write(out)
        self.last_active = time.monotonic()
        if not keep_alive:
            self.closing = True
            transport.close()

    def _write_plain(self, status: int, message: bytes) -> None:
        """A framing-level error (not a gate decision): plain text, then close."""
        assert self.transport is not None
        start = self.worker.status_lines.get(status, f"HTTP/1.1 {status} \r\n".encode())
        self.transport.write(start + self.worker.date() + b"content-type: text/plain; charset=utf-8\r\n"
                             + f"content-length: {len(message)}\r\nconnection: close\r\n\r\n".encode() + message)
        self.closing = True
        self.pending.clear()
        self.transport.close()

    def expire(self, now: float) -> None:
        """Close an idle keep-alive connection (5 s) or a client that stopped reading (60 s)."""
        limit = STALLED_TIMEOUT if (self.paused or self.pending) else IDLE_TIMEOUT
        if now - self.last_active > limit and self.transport is not None and not self.closing:
            self.closing = True
            self.transport.close()


async def serve_socket(app: App, sock: socket.socket, stop: asyncio.Future, ready: Callable[[], None] | None = None) -> None:
    """Serve `app` on an already listening socket until `stop` completes.

    Takes the stop signal as a future so a test can run a server in a thread (where
    signal handlers cannot be installed) and stop it from outside.
    """
    loop = asyncio.get_running_loop()
    worker = _Worker(app)
    server = await loop.create_server(lambda: _Connection(worker), sock=sock, backlog=2048)
    if ready is not None:
        ready()

    def sweep() -> None:
        now = time.monotonic()
        for conn in list(worker.connections):
            conn.expire(now)
        handle[0] = loop.call_later(1.0, sweep)

    handle = [loop.call_later(1.0, sweep)]
    await stop
    handle[0].cancel()
    server.close()
    deadline = time.monotonic() + SHUTDOWN_GRACE
    while worker.connections and time.monotonic() < deadline:
        for conn in list(worker.connections):
            if not conn.pending and not conn.paused and conn.transport is not None:
                conn.closing = True
                conn.transport.close()
        await asyncio.sleep(0.05)


def _run_worker(sock: socket.socket) -> None:
    import uvloop

    app = create_app()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
        await serve_socket(app, sock, stop)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def _supervise(sock: socket.socket, workers: int) -> None:
    """Fork `workers` processes on the shared socket; restart one that dies, stop all on a signal.

    Forked, not spawned: nothing but the socket is shared — each child builds its own app
    (SQLite connections, caches) after the fork. A worker that dies within 2 s of starting
    stops the whole server instead of being restarted in a loop.
    """
    children: dict[int, float] = {}
    stopping = False

    def spawn() -> None:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _run_worker(sock)
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        children[pid] = time.monotonic()

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for _ in range(workers):
        spawn()
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        started = children.pop(pid, None)
        if stopping or started is None:
            continue
        if time.monotonic() - started < 2.0:
            print(f"worker {pid} exited at start-up (status {status}); stopping", file=sys.stderr)
            stop(signal.SIGTERM, None)
            continue
        print(f"worker {pid} died (status {status}); starting another", file=sys.stderr)
        spawn()
    sock.close()


def serve_direct(host: str, port: int, workers: int = 1) -> None:
    """Bind once, then serve in this process (one worker) or in forked workers."""
    sock = listening_socket(host, port)
    print(f"serving http://{host}:{port}/ with {workers} direct worker(s)  (Ctrl-C to stop)", file=sys.stderr)
    if workers == 1:
        _run_worker(sock)
    else:
        _supervise(sock, workers)
