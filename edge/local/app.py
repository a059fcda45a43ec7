"""The local server's one app: a plain ASGI callable over the gate, serving files from `build/current`.

No framework: the gate decides, this module only translates ASGI to `Request` and
a `Response` (or a file key) back to ASGI messages. Files are read from the release
directory named by the manifest, never from a path built out of request text.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..accesslog import AccessLog
from ..gate import Limiter, Request, Response, error, handle
from ..keys import KeyStore
from ..release import LocalReleases, ManifestRelease, ReleaseUnavailable
from .settings import ServerSettings

Clock = Callable[[], datetime]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
log = logging.getLogger("malaria_risk.server")


class DamagedFile(Exception):
    """A release file is unreadable or its bytes do not match the manifest's checksum."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class FileCache:
    """Bytes of recently served files, bounded by total size.

    A file's bytes are checked against the manifest's SHA-256 when they are first loaded,
    so the server never sends bytes under an ETag they do not match: a release is
    immutable by construction (copies, never shared inodes), but a disk or a hand can
    still change a file. Cached bytes are never re-read.
    """

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
        path = release.root / key
        try:
            data = path.read_bytes()
        except OSError as e:
            raise DamagedFile(f"{path}: unreadable ({e.strerror})") from e
        if hashlib.sha256(data).hexdigest() != release.digests.get(key):
            raise DamagedFile(f"{path}: bytes do not match the manifest's sha256 (damaged after the build)")
        self._items[ck] = data
        self._size += len(data)
        while self._size > self.max_bytes and self._items:
            _, old = self._items.popitem(last=False)
            self._size -= len(old)
        return data


class App:
    def __init__(self, root: Path, keys: KeyStore, limiter: Limiter | None = None, clock: Clock = utc_now,
                 access_log: AccessLog | None = None):
        """`root` is the build root; `current` under it is followed (edge/release.py). `access_log`
        receives one line per decision (edge/accesslog.py); None writes none."""
        self.releases = LocalReleases(root)
        self.keys = keys
        self.limiter = limiter
        self.clock = clock
        self.files = FileCache()
        self.access_log = access_log

    def respond(self, method: str, raw_path: str, query: str, headers: dict[str, str]) -> tuple[Response, bytes]:
        started = time.perf_counter()
        resp, body, release_id = self._respond(method, raw_path, query, headers)
        if self.access_log is not None:
            self.access_log.record(method, raw_path, resp, release_id, started)
        return resp, body

    def _respond(self, method: str, raw_path: str, query: str,
                 headers: dict[str, str]) -> tuple[Response, bytes, str | None]:
        """(answer, body, id of the release it was decided against)."""
        req = Request(method, raw_path, query, headers)
        try:
            release = self.releases.current()
        except ReleaseUnavailable:
            # the reason (with paths) was logged by LocalReleases; the client learns no path
            resp = error("RELEASE_INCOMPLETE", "No release can be served at the moment; the operator has "
                         "been told.", raw_path)
            return resp, resp.body or b"", None
        resp = handle(req, self.clock(), self.keys, release, self.limiter, self.releases)
        if resp.file_key is not None:
            if resp.release_id is None:
                try:
                    body = self.files.get(release, resp.file_key)
                except DamagedFile as e:
                    log.error("not serving %s from release %s: %s; `malaria-risk verify` lists every damaged file, "
                              "the next build writes fresh copies", resp.file_key, release.release_id, e)
                    bad = error("RELEASE_INCOMPLETE", f"Release {release.release_id} holds a damaged copy of this "
                                "response, so it is not served; it is repaired by the next build.", raw_path)
                    bad.key_id = resp.key_id
                    return bad, bad.body or b"", release.release_id
            else:
                pinned = self._pinned_file(resp.release_id, resp.file_key)
                if pinned is None:  # pruned (or damaged) between the lookup and the read
                    resp = error("UNKNOWN_RELEASE", f"Release {resp.release_id} is no longer kept here.", raw_path)
                body = pinned if pinned is not None else resp.body or b""
        else:
            body = resp.body or b""
        return resp, body, release.release_id

    def _pinned_file(self, release_id: str, key: str) -> bytes | None:
        source = self.releases.pinned(release_id)
        if source is None:
            return None
        try:
            return self.files.get(source, key)
        except (FileNotFoundError, DamagedFile):
            return None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
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


def create_app(settings: ServerSettings | None = None) -> App:
    """The app factory each worker process calls; settings come from the environment by default."""
    from ..limits import Limiter as FixedWindowLimiter
    from ..stores import open_store
    from ..stores.sqlite import ChangeAwareKeyCache, SQLiteKeyStore

    s = settings or ServerSettings.from_env()
    store, counter = open_store(s.store, counters=s.counters)
    keys: Any = store
    if isinstance(store, SQLiteKeyStore):  # a local file: revocations seen through PRAGMA data_version
        keys = ChangeAwareKeyCache(store, store.path)
    limiter = FixedWindowLimiter(counter, s.per_minute, s.monthly) if s.limits else None
    clock: Clock = utc_now
    if s.fixed_now is not None:
        frozen = s.fixed_now

        def clock() -> datetime:
            return frozen

    access_log = None
    if s.access_log:
        from .loglines import BackgroundLines

        access_log = AccessLog(BackgroundLines(sys.stderr.fileno()), s.log_ok_every)
    return App(s.root, keys, limiter, clock, access_log)
