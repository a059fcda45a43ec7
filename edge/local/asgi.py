"""The default local front: the shared app (`edge.local.app`) on uvicorn, in one or more workers."""

from __future__ import annotations

import socket
import sys

import uvicorn  # the local server's only third-party dependency; never in the edge bundle

from .app import App
from .settings import FRONTS, ServerSettings


def serve_workers(host: str, port: int, workers: int = 1, log_level: str = "warning",
                  http: str | None = None) -> None:
    """Run `create_app` in `workers` processes sharing one listening socket.

    The default front is this module's ASGI app on uvicorn. `direct` drives the same
    `App.respond` from httptools on uvloop without the ASGI layer (edge/local/direct.py):
    several times the throughput on this machine, at the price of a smaller HTTP
    implementation of our own (docs/limits.md#throughput). Either way settings travel in
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


def _serve_uvicorn(host: str, port: int, workers: int, log_level: str) -> None:
    from uvicorn.supervisors import Multiprocess

    print(f"serving http://{host}:{port}/ with {workers} uvicorn worker(s)  (Ctrl-C to stop)", file=sys.stderr)
    config = _NoDelayConfig("edge.local.app:create_app", factory=True, host=host, port=port, workers=workers,
                            log_level=log_level, access_log=False, proxy_headers=False, server_header=False,
                            date_header=True)
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
                proxy_headers=False, server_header=False, date_header=True)


