"""The default HTTP/1.1 front: httptools on uvloop straight into `App.respond`.

Why this front and not uvicorn: on this 2-core machine uvicorn's per-request ASGI machinery
capped even a do-nothing app at about 18k req/s, while the same parser driven directly
serves about 58k; and uvicorn's httptools protocol reads a request head of any size and
queues pipelined requests without bound (docs/limits.md#http-front). The gate, the key
store, the limits and the file cache are the very same objects under either front
(`App.respond`); only the HTTP framing differs.

HTTP/1.1 keep-alive and pipelining (answers in request order), HTTP/1.0 with or without
keep-alive, a `date` header, no `server` header, TCP_NODELAY. Everything a client controls
is bounded (the numbers below; docs/limits.md#http-front):

* request head: 64 KiB (counted as it arrives, in 8 KiB slices) and 100 header lines,
  else 431; a request body (the API is GET
  only) 64 KiB, else 413;
* time to receive a request, from its first byte to its end: 10 s, else 408 and close;
* a connection that sends nothing: closed after 5 s (new or idle between requests);
* open connections per client (an IPv4 address, an IPv6 /64: `edge.clients.client_group`):
  `MAX_CONNECTIONS_PER_CLIENT` per worker; one more is answered 429 and closed at once, with
  a `connection_refused` line in the access log, so one client cannot use up the process's
  file descriptors;
* pipelining: at most 32 requests wait for their answer, and only one write buffer
  (64 KiB high-water mark) of answers is held for a client that does not read: past
  either, the connection stops being read (its bytes stay in the kernel's socket buffer,
  not in this process);
* writing an answer: progress is what counts, not when the last write call happened. A
  client that keeps reading is served however long the body takes; one whose answer
  drains (moves from this process into the kernel's socket buffer) by fewer than
  `MIN_RATE` bytes a second over a `STALL_WINDOW` (512 B/s over 60 s: 30 KiB a minute)
  is dropped, so a client that reads nothing holds its connection for about a minute.

Framing errors (400, 408, 413, 431, 500) are plain text, because they happen before
there is a request for the gate to judge.
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

import httptools

from ..accesslog import event_line
from ..clients import ConnectionCap, client_group
from .app import App, create_app

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
MAX_BODY_BYTES = 64 * 1024
MAX_PENDING = 32  # pipelined requests parsed but not yet answered
FEED_SLICE = 8 * 1024  # bytes handed to the parser at once, so a pause takes effect within a slice
REQUEST_TIMEOUT = 10.0  # first byte of a request to its last
IDLE_TIMEOUT = 5.0  # a connection with nothing in flight (uvicorn's keep-alive default)
STALL_WINDOW = 60.0  # an answer being written must drain at least MIN_RATE bytes/s over each such window
MIN_RATE = 512  # bytes per second: slower than the slowest mobile link this service expects (docs/limits.md)
SHUTDOWN_GRACE = 5.0
MAX_CONNECTIONS_PER_CLIENT = 64  # an office behind one address, every browser with its 6, and room (docs/limits.md)


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


class _Refused(Exception):
    """Raised inside a parser callback to stop reading a request that broke a bound."""

    def __init__(self, status: int, message: bytes):
        super().__init__(status)
        self.status = status
        self.message = message


_HEAD_TOO_LARGE = (431, b"Request head too large.")
_TOO_MANY_HEADERS = (431, b"Too many header lines.")
_BODY_TOO_LARGE = (413, b"Request body too large; the API is read-only.")


def _status_lines() -> dict[int, bytes]:
    from http import HTTPStatus

    return {s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n".encode() for s in HTTPStatus}


_Pending = tuple[str, bytes, dict[str, str], bool, str]


class _Worker:
    """Per-process state shared by connections: the app, the open connections, the cached Date."""

    def __init__(self, app: App, send_buffer: int | None = None, per_client: int = MAX_CONNECTIONS_PER_CLIENT):
        self.app = app
        self.send_buffer = send_buffer
        self.connections: set[_Connection] = set()
        self.cap = ConnectionCap(per_client)
        self.status_lines = _status_lines()
        self.targets: dict[bytes, tuple[str, str]] = {}  # request target -> (raw path, raw query)
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
    """One HTTP/1.1 connection. A request is answered as soon as it is parsed, in order.

    Answers are written synchronously (the gate and the file cache do no awaiting), so
    a request costs one parse callback series, one `App.respond` and one `write`. Only
    when the client stops reading (the transport pauses writing) or the pipeline is full
    do requests wait in `pending`, and unparsed bytes in `stash` (one read at most, as
    reading is paused at that moment).
    """

    def __init__(self, worker: _Worker):
        self.worker = worker
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.headers: dict[str, str] = {}
        self.head_bytes = 0
        self.header_lines = 0
        self.body_bytes = 0
        self.in_head = False
        self.head_fed = 0
        self.pending: deque[_Pending] = deque()
        self.stash = b""
        self.paused = False
        self.reading = True
        self.closing = False
        self.completed = 0
        self.last_active = time.monotonic()
        self.request_started: float | None = None
        self.sent = 0  # bytes handed to the transport; minus its buffer, what has drained to the socket
        self.window_start: float | None = None  # while an answer is being written: the current stall window
        self.window_drained = 0
        self.window_buffered = 0
        self.group: str | None = None  # the client's group, while it counts against its cap

    # -- transport events ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is not a subclass
        self.worker.connections.add(self)
        peer = transport.get_extra_info("peername")
        group = client_group(str(peer[0])) if isinstance(peer, tuple) and peer else "unknown"
        if not self.worker.cap.admit(group):
            log = self.worker.app.access_log
            if log is not None:
                log.sink(event_line("connection_refused", runtime="local", front="direct", client=group,
                                    open=self.worker.cap.per_client, status=429))
            self._write_plain(429, b"Too many open connections from your network.")
            return
        self.group = group
        if self.worker.send_buffer is not None:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.worker.send_buffer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.pending.clear()
        self.stash = b""
        self.worker.connections.discard(self)
        if self.group is not None:
            self.worker.cap.release(self.group)
            self.group = None

    def pause_writing(self) -> None:
        self.paused = True
        self._stop_reading()

    def resume_writing(self) -> None:
        self.paused = False
        self.last_active = time.monotonic()
        if self.closing:
            return
        self._drain()
        if self.stash and not self.paused and len(self.pending) < MAX_PENDING:
            data, self.stash = self.stash, b""
            self._feed(data)
        if not self.stash and not self.paused and len(self.pending) < MAX_PENDING:
            self._start_reading()

    def _stop_reading(self) -> None:
        if self.reading and not self.closing and self.transport is not None:
            self.reading = False
            self.transport.pause_reading()

    def _start_reading(self) -> None:
        if not self.reading and not self.closing and self.transport is not None:
            self.reading = True
            self.transport.resume_reading()

    def _blocked(self) -> bool:
        return self.paused or len(self.pending) >= MAX_PENDING

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        if self.closing:
            return
        if self._blocked() or self.stash:
            self.stash += data
            self._stop_reading()
            return
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        """Parse `data` a slice at a time; what arrives once the client is blocked waits unparsed."""
        failure: tuple[int, bytes] | None = None
        completed_before = self.completed
        view = memoryview(data)
        pos = 0
        try:
            while pos < len(data):
                if self._blocked():
                    self.stash = bytes(view[pos:]) + self.stash
                    self._stop_reading()
                    break
                piece = view[pos:pos + FEED_SLICE]
                self.parser.feed_data(piece)
                pos += FEED_SLICE
                if self.closing:
                    return
                if self.in_head:
                    # httptools holds a partial header line itself and calls `on_header` only once
                    # it is complete, so the head is also bounded by the bytes fed since it began
                    # (an overcount of at most one slice)
                    self.head_fed += len(piece)
                    if self.head_fed > MAX_HEAD_BYTES + FEED_SLICE:
                        failure = _HEAD_TOO_LARGE
                        break
        except httptools.HttpParserUpgrade:
            # no upgrades are served: answer what was parsed, then close (what follows is not HTTP/1.1)
            if self.pending:
                method, url, headers, _, version = self.pending.pop()
                self.pending.append((method, url, headers, False, version))
            elif self.completed > completed_before:
                self._close_after_flush()
            else:
                failure = (400, b"Protocol upgrades are not supported.")
        except httptools.HttpParserCallbackError as e:
            refused = e.__context__ if isinstance(e.__context__, _Refused) else e.__cause__
            failure = ((refused.status, refused.message) if isinstance(refused, _Refused)
                       else (400, b"Invalid HTTP request."))
        except httptools.HttpParserError:
            failure = (400, b"Invalid HTTP request.")
        self._drain()
        if failure is not None and not self.closing:
            self._write_plain(*failure)

    # -- parser callbacks -----------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.in_head = True
        self.head_fed = 0
        self.url = b""
        self.headers = {}
        self.head_bytes = 0
        self.header_lines = 0
        self.body_bytes = 0
        self.request_started = time.monotonic()

    def on_url(self, url: bytes) -> None:
        self.url += url
        self.head_bytes += len(url)
        if self.head_bytes > MAX_HEAD_BYTES:
            raise _Refused(*_HEAD_TOO_LARGE)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_bytes += len(name) + len(value) + 4
        self.header_lines += 1
        if self.head_bytes > MAX_HEAD_BYTES:
            raise _Refused(*_HEAD_TOO_LARGE)
        if self.header_lines > MAX_HEADERS:
            raise _Refused(*_TOO_MANY_HEADERS)
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        self.in_head = False

    def on_body(self, body: bytes) -> None:
        self.body_bytes += len(body)
        if self.body_bytes > MAX_BODY_BYTES:
            raise _Refused(*_BODY_TOO_LARGE)

    def on_message_complete(self) -> None:
        self.request_started = None
        self.completed += 1
        if self.closing:
            return
        p = self.parser
        item = (p.get_method().decode("latin-1"), self.url, self.headers, p.should_keep_alive(),
                p.get_http_version())
        if self.pending or self.paused:
            self.pending.append(item)
            if len(self.pending) >= MAX_PENDING:
                self._stop_reading()
        else:
            self._answer(*item)

    # -- answering ------------------------------------------------------------------------
    def _drain(self) -> None:
        """Answer queued requests until none is left or the client stops reading."""
        while self.pending and not self.paused and not self.closing:
            self._answer(*self.pending.popleft())

    def _answer(self, method: str, url: bytes, headers: dict[str, str], keep_alive: bool, version: str) -> None:
        targets = self.worker.targets
        target = targets.get(url)
        if target is None:
            try:
                parsed = httptools.parse_url(url)
            except httptools.HttpParserInvalidURLError:
                self._write_plain(400, b"Invalid request target.")
                return
            query = parsed.query
            target = (parsed.path.decode("latin-1"), query.decode("latin-1") if query else "")
            if len(targets) >= 1024:  # clients repeat a few URLs; a stream of distinct ones costs a parse each
                targets.clear()
            targets[url] = target
        try:
            resp, body = self.worker.app.respond(method, target[0], target[1], headers)
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
            self.sent += len(out) + len(body)
        else:
            transport.write(out)
            self.sent += len(out)
        self.last_active = time.monotonic()
        if not keep_alive:
            self._close_after_flush()

    def _close_after_flush(self) -> None:
        assert self.transport is not None
        self.closing = True
        self.pending.clear()
        self.stash = b""
        self.transport.close()

    def _write_plain(self, status: int, message: bytes) -> None:
        """A framing-level error (not a gate decision): plain text, then close."""
        assert self.transport is not None
        start = self.worker.status_lines.get(status, f"HTTP/1.1 {status} \r\n".encode())
        out = (start + self.worker.date() + b"content-type: text/plain; charset=utf-8\r\n"
               + f"content-length: {len(message)}\r\nconnection: close\r\n\r\n".encode() + message)
        self.transport.write(out)
        self.sent += len(out)
        self._close_after_flush()

    def expire(self, now: float, stall_window: float, min_rate: float) -> None:
        """Enforce the deadlines: a request received too slowly, an idle or a stalled connection."""
        transport = self.transport
        if transport is None:
            return
        if self._stalled(transport, now, stall_window, min_rate):
            self.closing = True
            transport.abort()
        elif self.closing or self.window_start is not None:
            return  # a close waits for its answer to drain; an answer being written is not idle
        elif self.request_started is not None and now - self.request_started > REQUEST_TIMEOUT:
            self._write_plain(408, b"Request not received in time.")
        elif self.request_started is None and not self.pending and now - self.last_active > IDLE_TIMEOUT:
            self.closing = True
            transport.close()

    def _stalled(self, transport: asyncio.Transport, now: float, stall_window: float, min_rate: float) -> bool:
        """Whether an answer being written drained too little over the last stall window.

        Drained bytes are those handed to the transport minus what it still buffers: the
        bytes the kernel took, which it takes only as fast as the client reads. Each window
        must drain `min_rate` bytes a second, or everything that was buffered when it began.
        """
        buffered = transport.get_write_buffer_size()
        if not buffered and not self.paused:
            self.window_start = None
            return False
        drained = self.sent - buffered
        self.last_active = now
        if self.window_start is None:
            self.window_start, self.window_drained, self.window_buffered = now, drained, buffered
            return False
        if now - self.window_start < stall_window:
            return False
        if drained - self.window_drained < min(min_rate * stall_window, self.window_buffered):
            return True
        self.window_start, self.window_drained, self.window_buffered = now, drained, buffered
        return False


async def serve_socket(app: App, sock: socket.socket, stop: asyncio.Future[None], ready: Callable[[], None] | None = None,
                       stall_window: float = STALL_WINDOW, min_rate: float = MIN_RATE,
                       send_buffer: int | None = None, per_client: int = MAX_CONNECTIONS_PER_CLIENT) -> None:
    """Serve `app` on an already listening socket until `stop` completes.

    Takes the stop signal as a future so a test can run a server in a thread (where
    signal handlers cannot be installed) and stop it from outside. Tests also shorten the
    stall window rather than wait a minute, and shrink the kernel's send buffer
    (`send_buffer`, SO_SNDBUF): on loopback it grows to megabytes and would swallow a
    whole test file, where a real slow link fills it after its first few hundred KB.
    """
    loop = asyncio.get_running_loop()
    worker = _Worker(app, send_buffer, per_client)
    server = await loop.create_server(lambda: _Connection(worker), sock=sock, backlog=2048)
    if ready is not None:
        ready()

    every = min(1.0, stall_window / 4)

    def sweep() -> None:
        now = time.monotonic()
        for conn in list(worker.connections):
            conn.expire(now, stall_window, min_rate)
        handle[0] = loop.call_later(every, sweep)

    handle = [loop.call_later(every, sweep)]
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
        stop: asyncio.Future[None] = loop.create_future()

        def on_signal() -> None:
            if not stop.done():
                stop.set_result(None)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        await serve_socket(app, sock, stop)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def _supervise(sock: socket.socket, workers: int) -> int:
    """Fork `workers` processes on the shared socket; restart one that dies, stop all on a signal.

    Forked, not spawned: nothing but the socket is shared — each child builds its own app
    (SQLite connections, caches) after the fork. A worker that dies within 2 s of starting
    stops the whole server instead of being restarted in a loop.
    """
    children: dict[int, float] = {}
    stopping = False
    failed = False

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
            failed = True
            stop(signal.SIGTERM, None)
            continue
        print(f"worker {pid} died (status {status}); starting another", file=sys.stderr)
        spawn()
    sock.close()
    return 1 if failed else 0


def serve_direct(host: str, port: int, workers: int = 1) -> None:
    """Bind once, then serve in this process (one worker) or in forked workers."""
    sock = listening_socket(host, port)
    print(f"serving http://{host}:{port}/ with {workers} direct worker(s)  (Ctrl-C to stop)", file=sys.stderr)
    if workers == 1:
        _run_worker(sock)
    elif _supervise(sock, workers):
        sys.exit(1)  # workers could not start: a non-zero exit, so a restart-on-failure policy acts
