"""A loopback HTTP server (stdlib http.server, ephemeral port) that serves a rainfall file and
misbehaves on demand: truncated bodies, 500s, stalls, HTML error pages, 304 on a matching ETag."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Behaviour:
    body: bytes = b""
    # one mode per request, in order; the last repeats: ok, truncate, 500, 404, stall, html, html-no-type
    modes: list[str] = field(default_factory=lambda: ["ok"])
    stall_seconds: float = 3.0
    requests: list[dict[str, str]] = field(default_factory=list)

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'


@contextmanager
def serving(behaviour: Behaviour) -> Iterator[str]:
    """Serve `behaviour` on 127.0.0.1 (a free port); yields the file's URL; stops the server after."""
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            n = len(behaviour.requests)
            behaviour.requests.append(dict(self.headers.items()))
            mode = behaviour.modes[min(n, len(behaviour.modes) - 1)]
            body = behaviour.body
            if mode == "ok" and self.headers.get("If-None-Match") == behaviour.etag:
                self.send_response(304)
                self.send_header("ETag", behaviour.etag)
                self.end_headers()
                return
            if mode in ("500", "404"):
                page = b"<html><body>error</body></html>"
                self.send_response(int(mode))
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
                return
            if mode in ("html", "html-no-type"):
                page = b"<!DOCTYPE html><html><body>Service temporarily unavailable</body></html>"
                self.send_response(200)
                if mode == "html":
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/csv")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", behaviour.etag)
            self.end_headers()
            if mode == "truncate":
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            if mode == "stall":
                self.wfile.write(body[:100])
                self.wfile.flush()
                release.wait(behaviour.stall_seconds)
                self.close_connection = True
                return
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/nga-rainfall-subnat-full.csv"
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
