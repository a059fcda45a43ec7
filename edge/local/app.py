"""The local server's one app: a plain ASGI callable over the gate, serving files from `build/current`.

No framework: the gate decides, this module only translates ASGI to `Request` and
a `Response` (or a file key) back to ASGI messages. Files are read from the release
directory named by the manifest, never from a path built out of request text.
"""

from __future__ import annotations

import hashlib
import logging
import re
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
from ..stores.counters import CountersUnavailable
from ..stores.sqlite import KeyStoreUnavailable
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
        """`root` is the build root; `current` under it is followed (edge/release.py)."""
        self.releases = LocalReleases(root)
        self.keys = keys
        self.limiter = limiter
        self.clock = clock
        self.files = FileCache()
        self.access_log = access_log

    def respond(self, method: str, raw_path: str, query: str, headers: dict[str, str]) -> tuple[Response, bytes]:
        started = time.perf_counter()
        resp, body = self._respond(method, raw_path, query, headers)
        if self.access_log is not None:
            self.access_log.record(method, raw_path, resp, self._decided_against(resp), started)
        return resp, body

    def _decided_against(self, resp: Response) -> str | None:
        """The release an answer was decided against: its own header, else the release being served."""
        for name, value in resp.headers:
            if name == "X-Release-Id":
                return value
        try:
            return self.releases.current().release_id
        except ReleaseUnavailable:
            return None

    def _respond(self, method: str, raw_path: str, query: str, headers: dict[str, str]) -> tuple[Response, bytes]:
        req = Request(method, raw_path, query, headers)
        try:
            release = self.releases.current()
        except ReleaseUnavailable:
            # the reason (with paths) was logged by LocalReleases; the client learns no path
            resp = error("RELEASE_INCOMPLETE", "No release can be served at the moment; the operator has "
                         "been told.", raw_path)
            return resp, resp.body or b""
        try:
            resp = handle(req, self.clock(), self.keys, release, self.limiter, self.releases)
        except (CountersUnavailable, KeyStoreUnavailable) as e:  # logged where found (edge/stores/)
            what = "counted against limits" if isinstance(e, CountersUnavailable) else "checked against the key store"
            resp = error("TEMPORARILY_UNAVAILABLE", f"Requests cannot be {what} at the moment; "
                         f"retry in {e.retry_after} s.", raw_path, [("Retry-After", str(e.retry_after))])
            return resp, resp.body or b""
        if resp.file_key is not None:
            if resp.release_id is None:
                try:
                    body = self.files.get(release, resp.file_key)
                except DamagedFile as e:
                    log.error("not serving %s from release %s: %s; `malaria-risk verify` lists every damaged file, "
                              "the next build writes fresh copies", resp.file_key, release.release_id, e)
                    # the release may have lost files (pruned, removed): the follower checks again and
                    # moves to a whole release, and back once the file is there (no restart)
                    self.releases.lost_file()
                    bad = error("RELEASE_INCOMPLETE", f"Release {release.release_id} holds a damaged copy of this "
                                "response, so it is not served; it is repaired by the next build.", raw_path)
                    bad.key_id = resp.key_id
                    return bad, bad.body or b""
            else:
                pinned = self._pinned_file(resp, raw_path)
                if isinstance(pinned, Response):
                    return pinned, pinned.body or b""
                body = pinned
            if resp.status == 200:
                return ranged(resp, body, method, headers, raw_path)
        else:
            body = resp.body or b""
        return resp, body

    def _pinned_file(self, resp: Response, raw_path: str) -> bytes | Response:
        """A kept release's file; a problem when it was pruned meanwhile (404) or is damaged (500, logged)."""
        assert resp.release_id is not None and resp.file_key is not None
        source = self.releases.pinned(resp.release_id)
        if source is not None:
            try:
                return self.files.get(source, resp.file_key)
            except DamagedFile as e:
                if self.releases.pinned(resp.release_id) is not None:  # still kept: damaged, not pruned
                    log.error("not serving %s from kept release %s: %s; `malaria-risk verify` lists every damaged "
                              "file", resp.file_key, resp.release_id, e)
                    bad = error("RELEASE_INCOMPLETE", f"Release {resp.release_id} holds a damaged copy of this "
                                "file, so it is not served; the operator has been told.", raw_path)
                    bad.key_id = resp.key_id
                    return bad
        gone = error("UNKNOWN_RELEASE", f"Release {resp.release_id} is no longer kept here.", raw_path)
        gone.key_id = resp.key_id
        return gone

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


def ranged(resp: Response, body: bytes, method: str, headers: dict[str, str], raw_path: str) -> tuple[Response, bytes]:
    """A 200 file answer, narrowed to one byte range when the client asked for one (RFC 9110 §14).

    `Accept-Ranges: bytes` on every file answer. A `Range` is honoured on GET only, and only
    when `If-Range` (if sent) is the answer's own strong ETag: otherwise the whole file is
    sent, as the RFC asks, so a client resuming a file that changed gets the new file whole.
    The gate never picks the gzip copy for a `Range` request, so offsets are of the identity
    bytes, whose size and SHA-256 the manifest and the downloads index give. A single range
    is served; a list of ranges, or a header that is not a bytes range, is ignored (200).
    """
    resp.headers.append(("Accept-Ranges", "bytes"))
    spec = headers.get("range")
    if spec is None or method.upper() != "GET":
        return resp, body
    if_range = headers.get("if-range")
    if if_range is not None and (if_range.strip().startswith("W/") or if_range.strip() != _header(resp, "ETag")):
        return resp, body
    size = len(body)
    wanted = byte_range(spec, size)
    if wanted is None:
        return resp, body
    if wanted == UNSATISFIABLE:
        bad = error("RANGE_NOT_SATISFIABLE", f"This file has {size} bytes; the range `{spec[:40]}` asks for none "
                    "of them.", raw_path, [("Content-Range", f"bytes */{size}"), ("Accept-Ranges", "bytes")])
        bad.key_id = resp.key_id
        bad.headers.extend(h for h in resp.headers if h[0] in ("RateLimit", "RateLimit-Policy", "X-Release-Id"))
        return bad, bad.body or b""
    first, last = wanted
    resp.status = 206
    resp.headers.append(("Content-Range", f"bytes {first}-{last}/{size}"))
    return resp, body[first:last + 1]


UNSATISFIABLE = (-1, -1)
_RANGE_RE = re.compile(r"\s*bytes\s*=\s*([0-9]*)-([0-9]*)\s*", re.ASCII | re.IGNORECASE)


BEYOND_ANY_FILE = 10**18  # what a position of more digits than this has counts as: past the end of every file


def _position(digits: str) -> int:
    """A byte position, bounded: `int()` refuses text of over 4,300 digits (and is slow well before),
    and no file has 10^18 bytes, so a longer number is simply past the end."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else BEYOND_ANY_FILE


def byte_range(spec: str, size: int) -> tuple[int, int] | None:
    """`bytes=a-b`, `bytes=a-` or `bytes=-n` → (first, last) inclusive, clipped to the file;
    `UNSATISFIABLE` when it lies wholly past the end (or asks for a zero-length suffix);
    None when the header is not one valid bytes range (it is then ignored). Numbers of any length
    are read in bounded time (`_position`)."""
    m = _RANGE_RE.fullmatch(spec)
    if m is None:
        return None
    start, end = m.group(1), m.group(2)
    if start == end == "":
        return None
    if start == "":  # the last n bytes
        n = _position(end)
        if n == 0 or size == 0:
            return UNSATISFIABLE
        return max(0, size - n), size - 1
    first = _position(start)
    if end != "" and _position(end) < first:
        return None
    if first >= size:
        return UNSATISFIABLE
    return first, min(size - 1, _position(end)) if end != "" else size - 1


def _header(resp: Response, name: str) -> str | None:
    return next((v for k, v in resp.headers if k == name), None)


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
