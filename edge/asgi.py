"""The local server: a plain ASGI app over the gate, serving files from `build/current`.

No framework: the gate decides, this module only translates ASGI to `Request` and
a `Response` (or a file key) back to ASGI messages. Files are read from the release
directory named by the manifest, never from a path built out of request text.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn  # the local server's only third-party dependency; not in the edge bundle

from .gate import Limiter, Request, Response, error, handle
from .keys import KeyRecord, KeyStore
from .release import LocalReleases, ManifestRelease

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class FileCache:
    """Bytes of recently served files, bounded by total size; a release never changes in place."""

    def __init__(self, max_bytes: int = 256 * 1024 * 1024):
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._size = 0

    def get(self, release: ManifestRelease, key: str) -> bytes:
        ck = (release.release_id, key)
        data = self._items.get(ck)
        if data is not None:
            self._items.move_to_end(ck)
            return data
        assert release.root is not None
        data = (release.root / key).read_bytes()
        self._items[ck] = data
        self._size += len(data)
        while self._size > self.max_bytes and self._items:
            _, old = self._items.popitem(last=False)
            self._size -= len(old)
        return data


class ChangeAwareKeyCache:
    """Key records cached in-process, dropped the moment the SQLite key file changes.

    `PRAGMA data_version` changes whenever another connection (any thread or process)
    commits to the file, so a revocation, suspension or removal made by `malaria-risk
    keys …` empties the cache before the next request is decided: revocation stays
    immediate (bound: zero requests), while an unchanged file costs one cheap pragma
    instead of a three-table join. Expiry needs no invalidation: the gate evaluates
    `record.status(now)` on every request. Counters must live in another file, or their
    commits would empty the cache on every request (see edge/counters_sqlite.py).
    """

    def __init__(self, inner: Any, path: Path | str, max_items: int = 10_000):
        self.inner = inner
        self.path = Path(path)
        self.max_items = max_items
        self._local = threading.local()

    def _state(self) -> tuple[sqlite3.Connection, dict[str, KeyRecord | None], list[int]]:
        st = getattr(self._local, "st", None)
        if st is None:
            conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            st = (conn, {}, [-1])
            self._local.st = st
        return st

    def lookup(self, key_hash: str) -> KeyRecord | None:
        conn, cache, version = self._state()
        v = conn.execute("PRAGMA data_version").fetchone()[0]
        if v != version[0]:
            cache.clear()
            version[0] = v
        try:
            return cache[key_hash]
        except KeyError:
            pass
        record = self.inner.lookup(key_hash)
        if len(cache) >= self.max_items:
            cache.clear()
        # only known keys are cached: a flood of random keys must not evict real ones
        if record is not None:
            cache[key_hash] = record
        return record

    def __getattr__(self, name: str) -> Any:  # admin methods pass straight through
        return getattr(self.inner, name)


class App:
    def __init__(self, root: Path, keys: KeyStore, limiter: Limiter | None = None, clock: Clock = utc_now):
        self.releases = LocalReleases(root)
        self.keys = keys
        self.limiter = limiter
        self.clock = clock
        self.files = FileCache()

    def respond(self, method: str, raw_path: str, query: str, headers: dict[str, str]) -> tuple[Response, bytes]:
        req = Request(method, raw_path, query, headers)
        try:
            release = self.releases.current()
        except FileNotFoundError as e:
            resp = error("RELEASE_INCOMPLETE", str(e), raw_path)
            return resp, resp.body or b""
        resp = handle(req, self.clock(), self.keys, release, self.limiter)
        if resp.file_key is not None:
            body = self.files.get(release, resp.file_key)
        else:
            body = resp.body or b""
        return resp, body

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        raw_path = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else scope["path"]
        path = path.split("?", 1)[0]
        query = scope.get("query_string", b"").decode("latin-1")
        headers: dict[str, str] = {}
        for k, v in scope.get("headers", []):
            name = k.decode("latin-1").lower()
            value = v.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        resp, body = self.respond(scope["method"], path, query, headers)
        out_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers]
        if resp.status != 304:
            out_headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": resp.status, "headers": out_headers})
        send_body = b"" if scope["method"] == "HEAD" or resp.status in (204, 304) else body
        await send({"type": "http.response.body", "body": send_body})


# --- configuration from the environment (so uvicorn can start several workers) ------------

ENV_ROOT = "MALARIA_RISK_ROOT"
ENV_STORE = "MALARIA_RISK_STORE"  # sqlite:PATH (default sqlite:var/keys.sqlite) or dynamodb:PREFIX
ENV_COUNTERS = "MALARIA_RISK_COUNTERS"  # counters file; default <keys>.counters.map beside the keys;
# a path ending in .sqlite selects the SQLite counters (slower, see docs/limits.md#throughput)
ENV_LIMITS = "MALARIA_RISK_LIMITS"  # "on" (default) or "off"
ENV_PER_MINUTE = "MALARIA_RISK_PER_MINUTE"
ENV_MONTHLY = "MALARIA_RISK_MONTHLY"
ENV_FIXED_NOW = "MALARIA_RISK_FIXED_NOW"  # tests and benchmarks only: freeze the gate's clock


def open_store(spec: str) -> tuple[Any, Any]:
    """`sqlite:PATH` or `dynamodb:TABLE_PREFIX` → (key store with admin methods, limit counter).

    A bare path means `sqlite:PATH`, so `--keys var/keys.sqlite` keeps working.
    """
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in ("sqlite", "dynamodb"):
        kind, rest = "sqlite", spec
    if kind == "dynamodb":
        from .store_dynamodb import DynamoDBCounter, DynamoDBKeyStore

        store = DynamoDBKeyStore.from_env(rest)
        return store, DynamoDBCounter(store.counters_table)
    from .counters_sqlite import MappedCounter, SQLiteCounter, mapped_counters_path_for
    from .store_sqlite import SQLiteKeyStore

    counters = os.environ.get(ENV_COUNTERS)
    if counters and counters.endswith(".sqlite"):
        return SQLiteKeyStore(rest), SQLiteCounter(counters)
    return SQLiteKeyStore(rest), MappedCounter(counters or mapped_counters_path_for(rest))


def create_app() -> App:
    """The app factory uvicorn calls in each worker process; all settings come from the environment."""
    from .limits import DEFAULT_MONTHLY, DEFAULT_PER_MINUTE
    from .limits import Limiter as FixedWindowLimiter

    root = Path(os.environ.get(ENV_ROOT, "build"))
    spec = os.environ.get(ENV_STORE, "sqlite:var/keys.sqlite")
    store, counter = open_store(spec)
    keys: Any = store
    if spec.startswith("sqlite:") or ":" not in spec:
        keys = ChangeAwareKeyCache(store, store.path)
    limiter = None
    if os.environ.get(ENV_LIMITS, "on") != "off":
        limiter = FixedWindowLimiter(
            counter,
            int(os.environ.get(ENV_PER_MINUTE, DEFAULT_PER_MINUTE)),
            int(os.environ.get(ENV_MONTHLY, DEFAULT_MONTHLY)),
        )
    clock: Clock = utc_now
    fixed = os.environ.get(ENV_FIXED_NOW)
    if fixed:
        frozen = datetime.fromisoformat(fixed.replace("Z", "+00:00")).astimezone(UTC)

        def clock() -> datetime:
            return frozen

    return App(root, keys, limiter, clock)


ENV_HTTP = "MALARIA_RISK_HTTP"  # "uvicorn" (default) or "direct" (edge/http_direct.py)
FRONTS = ("uvicorn", "direct")


def serve_workers(host: str, port: int, workers: int = 1, log_level: str = "warning",
                  http: str | None = None) -> None:
    """Run `create_app` in `workers` processes sharing one listening socket.

    The default front is this module's ASGI app on uvicorn. `direct` drives the same
    `App.respond` from httptools on uvloop without the ASGI layer (edge/http_direct.py):
    several times the throughput on this machine, at the price of a smaller HTTP
    implementation of our own (docs/limits.md#throughput). Either way settings travel in
    the environment and each worker builds its own app; limits stay exact across workers
    because the counters are shared on disk, not in process memory.
    """
    front = http or os.environ.get(ENV_HTTP, "uvicorn")
    if front not in FRONTS:
        raise ValueError(f"unknown HTTP front {front!r}; choose one of {', '.join(FRONTS)}")
    if front == "direct":
        from .http_direct import serve_direct

        serve_direct(host, port, workers)
        return
    _serve_uvicorn(host, port, workers, log_level)


def _serve_uvicorn(host: str, port: int, workers: int, log_level: str) -> None:
    from uvicorn.supervisors import Multiprocess

    print(f"serving http://{host}:{port}/ with {workers} uvicorn worker(s)  (Ctrl-C to stop)", file=sys.stderr)
    config = _NoDelayConfig("edge.asgi:create_app", factory=True, host=host, port=port, workers=workers,
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


