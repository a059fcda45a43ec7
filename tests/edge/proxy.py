"""A TCP proxy on 127.0.0.1 that can stall or slow a real dependency.

Used by the edge tests and bench/edge_cold.py to put a silent or distant S3/DynamoDB
between the function and the local server: `stall = True` swallows requests (the
connection stays open, no answer ever comes), `delay` adds seconds before each chunk
the client sends is passed on (one chunk per request on keep-alive connections).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit


class Proxy:
    def __init__(self, target_url: str):
        parts = urlsplit(target_url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.stall = False
        self.delay = 0.0
        self.chunks = 0  # client → server chunks forwarded (≈ requests)
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def start(self) -> Proxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=2)
        with self._lock:
            for c in self._conns:
                with contextlib.suppress(OSError):
                    c.close()

    def _accept(self) -> None:
        self._sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except OSError:
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._conns += [client, upstream]
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([client, upstream], [], [], 0.1)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client:
                        if self.stall:
                            continue  # swallowed: the caller waits for an answer that never comes
                        if self.delay:
                            time.sleep(self.delay)
                        self.chunks += 1
                        upstream.sendall(data)
                    else:
                        client.sendall(data)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()


@contextlib.contextmanager
def proxy(target_url: str) -> Iterator[Proxy]:
    p = Proxy(target_url).start()
    try:
        yield p
    finally:
        p.close()
