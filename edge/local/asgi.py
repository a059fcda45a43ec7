"""Starting the local server: the direct front (default) or the shared ASGI app on uvicorn.

The uvicorn front is kept as a second, independent HTTP implementation to compare the
direct front against. It runs uvicorn's h11 protocol, not httptools: h11 bounds the
request head (64 KiB) and reads one request at a time (pipelined requests stay in the
kernel's socket buffer), where uvicorn's httptools protocol reads a head of any size and
queues pipelined requests without bound. uvicorn has no deadline for receiving a head;
the direct front does (docs/limits.md#http-front).
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import uvicorn  # the local server's only third-party dependency; never in the edge bundle

from .app import App
from .settings import FRONTS, ServerSettings


def serve_workers(host: str, port: int, workers: int = 1, log_level: str = "warning",
                  http: str | None = None) -> None:
    """Run `create_app` in `workers` processes sharing one listening socket.

    The default front, `direct`, drives `App.respond` from httptools on uvloop without
    the ASGI layer (edge/local/direct.py): it bounds everything a client controls and is
    several times faster than uvicorn here (docs/limits.md#http-front). `uvicorn` runs
    the same `App.respond` behind uvicorn's ASGI server. Either way settings travel in
    the environment and each worker builds its own app; limits stay exact across workers
    because the counters are shared on disk, not in process memory.
    """
    front = http or ServerSettings.from_env().http
    if front not in FRONTS:
        raise ValueError(f"unknown HTTP front {front!r}; choose one of {', '.join(FRONTS)}")
    if front == "direct":
        from .direct import serve_direct

        serve_direct(host, port, workers)
        return
    _serve_uvicorn(host, port, workers, log_level)


HARDENED: dict[str, Any] = {
    "http": "h11",  # bounded head, one request in flight per connection (see the module docstring)
    "h11_max_incomplete_event_size": 64 * 1024,
    "timeout_keep_alive": 5,
}


def _serve_uvicorn(host: str, port: int, workers: int, log_level: str) -> None:
    from uvicorn.supervisors import Multiprocess

    print(f"serving http://{host}:{port}/ with {workers} uvicorn worker(s)  (Ctrl-C to stop)", file=sys.stderr)
    config = _NoDelayConfig("edge.local.app:create_app", factory=True, host=host, port=port, workers=workers,
                            log_level=log_level, access_log=False, proxy_headers=False, server_header=False,
                            date_header=True, **HARDENED)
    if workers > 1:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    else:
        uvicorn.Server(config).run()


class _NoDelayConfig(uvicorn.Config):
    """uvicorn's Config, with TCP_NODELAY on the shared listening socket.

    With several workers uvicorn binds the socket itself with `proto=0`, and asyncio
    only sets TCP_NODELAY on accepted sockets whose proto is IPPROTO_TCP — so every
    worker connection kept Nagle's algorithm, and the body write waited for the
    client's delayed ACK: 40 ms per keep-alive request (22 req/s on one connection).
    Linux copies TCP_NODELAY from the listening socket to the sockets it accepts.
    """

    def bind_socket(self) -> socket.socket:
        sock = super().bind_socket()
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock


def serve(app: App, host: str, port: int, log_level: str = "warning") -> None:
    print(f"serving http://{host}:{port}/  (Ctrl-C to stop)", file=sys.stderr)
    uvicorn.run(app, host=host, port=port, workers=1, log_level=log_level, access_log=False,
                proxy_headers=False, server_header=False, date_header=True, **HARDENED)


