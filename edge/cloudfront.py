"""The gate at the CDN edge: a Lambda@Edge viewer-request function over `edge.gate.handle`.

CloudFront calls `handler(event, context)` for every viewer request before its cache.
The adapter turns the event into the gate's `Request`, asks the same pure gate the
local server uses, and then either

- **rewrites** `request["uri"]` to the immutable object that holds the file (the gate
  authorised it): `/<prefix>/objects/<sha256><suffix>` for a release of the index layout,
  found in the release's index shard for the file's route family (read on first need and
  kept per release), or `/<prefix>/releases/<release_id>/<file key>` for a release of the
  copy layout. CloudFront then serves that object from its cache or the S3 origin, so
  bytes never pass through the function; or
- **returns a generated response** (401, 403, 4xx, 429, 503, preflight), at most 40 KB
  as CloudFront requires for viewer-request answers, with its own Cache-Control.

What one request costs (docs/deploy.md has the measurements):

- the release: `current.json` from the bucket, re-read at most every `pointer_ttl`
  seconds with If-None-Match; it carries the release facts, and the file key comes
  from the route table, so there is no manifest at the edge. A refresh that fails
  keeps the release already known;
- the key: one conditional DynamoDB UpdateItem that checks the key and counts both
  windows (edge/stores/dynamodb.py);
- every call bounded (edge/aws.py): when a dependency is down or silent the answer is a
  503 TEMPORARILY_UNAVAILABLE with Retry-After within the request's deadline.

Conditional requests: the edge has no content hashes, so CloudFront compares
If-None-Match with its cached object's ETag (S3's) after the rewrite and answers 304
without the origin; the request counted against the key's limits first.

Headers the gate sets on an authorised answer (RateLimit, RateLimit-Policy,
X-Release-Id, Cache-Control) cannot be attached to a response from a viewer-request
function; they ride on the rewritten request as `x-mr-*` headers and the
viewer-response function (edge/viewer_response.py) copies them onto the response.

Set-up (settings, credentials, clients) happens at module load, in Lambda's init
phase; standard library only.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from .accesslog import AccessLog, event_line
from .aws import AWSError, Credentials, Unavailable
from .files import (
    INDEX_ROOT,
    LAYOUT_INDEX,
    NAMES_KEY,
    FileEntry,
    ReleaseList,
    index_family,
    index_shard,
)
from .gate import Headers, Limiter, Request, Response, error, handle
from .keys import KeyStore
from .routes import (
    BUNDLE_ZIP,
    BY_PATH,
    DOWNLOAD_FILE,
    GEOJSON,
    JSON,
    PRECOMPRESSED_SUFFIXES,
    PUBLIC_PREFIX,
    PUBLISHED_RELEASE_ID_RE,
    RELEASE_LIST_NAME,
    Facts,
)
from .settings import EdgeSettings
from .viewer_response import FILE_KEY_HEADER, FORWARDED

MAX_GENERATED_BODY = 40 * 1024  # CloudFront's limit for a viewer-request generated response
STATUS_TEXT = {200: "OK", 204: "No Content", 301: "Moved Permanently", 304: "Not Modified", 400: "Bad Request", 401: "Unauthorized",
               403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 429: "Too Many Requests",
               500: "Internal Server Error", 503: "Service Unavailable"}
DOCS_KEY_RE = re.compile(r"^docs/[a-z0-9][a-z0-9._-]{0,100}$")  # the flat docs site, for pointers without a list
CONTENT_TYPES = {".json": JSON, ".geojson": GEOJSON, ".html": "text/html; charset=utf-8",
                 ".css": "text/css; charset=utf-8"}
INDEX_KEY = BY_PATH["/v1/downloads"].file_key  # a release's `/v1/downloads` document: names and scopes
PINNED_TTL = 300.0  # seconds an earlier release's bundle list is trusted before the bucket is asked again
REFRESH_BUDGET = 0.6  # seconds a pointer *refresh* may take: a known release is kept rather than waited for
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
SUFFIX_RE = re.compile(r"^(?:\.[a-z0-9-]{1,40}){0,3}$")  # `.json`, `.json.gz`: never a `/` or `..`


class IndexUnavailable(Unavailable):
    """An index shard could not be read or is not a shard of this release: the answer is a 503, never a
    guess at the object."""


class ObjectIndex:
    """A release of the index layout: file key -> its stored object, one shard read when first needed.

    `shards` (route family -> how many) comes from the pointer (or the release's `index.json`); a
    family it lacks holds no file. A shard is checked to be the one asked for, of this release, with
    well-formed entries, before any of it is trusted; one that is not is not kept, so it is read again
    on the next request."""

    def __init__(self, release_id: str, shards: Mapping[str, int], fetch: Callable[[str, float], bytes]):
        self.release_id = release_id
        self.shards = shards
        self._fetch = fetch  # (key inside the release, deadline) -> bytes; raises AWSError, Unavailable
        self._loaded: dict[str, dict[str, Any]] = {}

    def object_name(self, key: str, deadline: float) -> str | None:
        """`<sha256><suffix>` of the object holding `key`, or None when the release has no such file."""
        family = index_family(key)
        count = self.shards.get(family)
        if not count:
            return None
        name = index_shard(key, family, count)
        files = self._loaded.get(name)
        if files is None:
            try:
                doc = json.loads(self._fetch(name, deadline))
            except (AWSError, Unavailable, ValueError) as e:
                raise IndexUnavailable(f"{self.release_id}/{name}: {e!r}") from e
            files = doc.get("files") if isinstance(doc, dict) else None
            if not isinstance(files, dict) or doc.get("release_id") != self.release_id or doc.get("shard") != name:
                raise IndexUnavailable(f"{self.release_id}/{name} is not that shard of the release")
            self._loaded[name] = files
        entry = files.get(key)
        if entry is None:
            return None
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                and SHA256_RE.match(entry[0]) and isinstance(entry[2], str) and SUFFIX_RE.match(entry[2])):
            raise IndexUnavailable(f"{self.release_id}: malformed index entry for {key}")
        return entry[0] + entry[2]


def shards_of(raw: Any) -> dict[str, int] | None:
    """The pointer's (or index root's) `shards`, or None when malformed."""
    if not isinstance(raw, Mapping) or not all(isinstance(v, int) and 0 < v < 1 << 16 for v in raw.values()):
        return None
    return {str(k): v for k, v in raw.items()}


def utc_now() -> datetime:
    return datetime.now(UTC)


# --- the release, from the pointer alone ----------------------------------------------------


class PointerRelease:
    """A release as `current.json` describes it: id, facts and the docs pages it holds.

    Every route file exists (the renderer writes every combination the facts call for, and the
    publisher switches the pointer only after verifying every object), so `entry` needs no file
    list for route keys; the index layout's index says where each is. A copy-layout release also
    has each file's `.gz` sibling, which `entry` offers; an index-layout release has none
    (CloudFront compresses). ETags are left empty: viewers see S3's (weak, `W/"…"`, on an answer
    CloudFront compressed), compared by CloudFront, which accepts either form in If-None-Match.
    """

    def __init__(self, release_id: str, facts: Facts, public: frozenset[str] | None,
                 downloads: frozenset[str] | None = None,
                 download_scopes: Mapping[str, tuple[str, ...]] | None = None,
                 shards: Mapping[str, int] | None = None):
        self.release_id = release_id
        # route family -> index shards: a release of the index layout; None: the copy layout
        self.shards = dict(shards) if shards is not None else None
        self.index: ObjectIndex | None = None  # set by PointerReleases for the index layout
        self.facts = facts
        self.public = public  # docs keys; None when the pointer predates the list
        self.downloads = downloads  # bundle file names; None when the pointer predates the list
        # the names index (edge/names.py), fetched from the bucket on the first unknown state or LGA
        self.fetch_names: Callable[[], bytes | None] | None = None
        self._names: Any = None
        # bundle file name -> the scopes it needs, as the release records them; a name without
        # one (a release published before scopes were recorded) needs every scope
        self.download_scopes = dict(download_scopes or {})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PointerRelease) and (
            self.release_id, self.facts, self.public, self.downloads, self.download_scopes, self.shards) == (
            other.release_id, other.facts, other.public, other.downloads, other.download_scopes, other.shards)

    __hash__ = None  # type: ignore[assignment]

    def names(self) -> Any:
        """The names index, read once per release; None when it cannot be had (no suggestions then:
        a failed read is not retried for this release object, so an error answer never waits twice)."""
        if self._names is None:
            from .names import Names

            self._names = False
            body = self.fetch_names() if self.fetch_names is not None else None
            if body is not None:
                try:
                    self._names = Names.from_bytes(body)
                except (ValueError, TypeError) as e:
                    log("names index unreadable:", self.release_id, repr(e))
        return self._names or None

    def entry(self, key: str) -> FileEntry | None:
        if key.startswith(DOWNLOAD_FILE.key_prefix):
            # a bundle file: only the names the release lists (an unknown name is a 404 problem,
            # never a request for an object that is not there); Parquet and zip have no .gz copy
            name = key[len(DOWNLOAD_FILE.key_prefix):]
            if self.downloads is None or name not in self.downloads:
                return None
            gz = None if key.endswith(PRECOMPRESSED_SUFFIXES) or self.shards is not None else key + ".gz"
            return FileEntry(key, "", "application/octet-stream", gz, None, self.download_scopes.get(name))
        if key.startswith(PUBLIC_PREFIX):
            known = key in self.public if self.public is not None else DOCS_KEY_RE.fullmatch(key) is not None
            if not known:
                return None
        dot = key.rfind(".")
        ctype = CONTENT_TYPES.get(key[dot:] if dot >= 0 else "", "application/octet-stream")
        # the index layout stores no gzip twins: CloudFront compresses the identity object itself
        return FileEntry(key, "", ctype, None if self.shards is not None else key + ".gz", None)

    @classmethod
    def from_pointer(cls, doc: Mapping[str, Any]) -> PointerRelease:
        release_id = doc.get("release_id")
        if not isinstance(release_id, str) or not PUBLISHED_RELEASE_ID_RE.fullmatch(release_id):
            raise ValueError(f"current.json names no valid release id: {release_id!r}")
        facts = doc.get("facts")
        if not isinstance(facts, Mapping):
            raise ValueError(f"current.json of {release_id} carries no facts")
        public = doc.get("public")
        downloads = doc.get("downloads")
        shards = None
        if doc.get("layout") == LAYOUT_INDEX:
            shards = shards_of(doc.get("shards"))
            if shards is None:
                raise ValueError(f"current.json of {release_id} names the index layout without its shards")
        return cls(release_id, Facts.from_json(facts),
                   frozenset(str(k) for k in public) if isinstance(public, list) else None,
                   frozenset(str(k) for k in downloads) if isinstance(downloads, list) else None,
                   scopes_by_name(doc.get("download_scopes")), shards)


def scopes_by_name(raw: Any) -> dict[str, tuple[str, ...]]:
    """`{name: [scope, ...]}` as the publisher writes it; anything malformed is left out (that file
    then needs every scope: fail closed)."""
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): tuple(v) for k, v in raw.items()
            if isinstance(v, list) and all(isinstance(s, str) for s in v)}


class PointerSource(Protocol):
    def get(self, key: str, deadline: float, if_none_match: str | None = None, attempts: int | None = None) -> Any:
        """An object with `.status`, `.headers` (lower-case) and `.body`; 304 when the tag still matches."""


class PointerReleases:
    """The live release as `current.json` names it, re-read at most every `ttl` seconds.

    A re-read sends If-None-Match, so an unchanged pointer costs a 304. A failed refresh
    keeps serving the release already known (a publish or an S3 blip must not take the
    API down) and is not retried for another `ttl`; with none known yet, it raises.
    """

    def __init__(self, source: PointerSource, prefix: str = "", ttl: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self.source = source
        self.prefix = prefix.strip("/")
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._current: PointerRelease | None = None
        self._etag: str | None = None
        self._checked = float("-inf")
        self.failures = 0  # refreshes that kept the old release, for logs and tests
        self._pinned: dict[str, tuple[float, PointerRelease | None]] = {}
        self._list: ReleaseList | None = None
        self._list_etag: str | None = None
        self._list_checked = float("-inf")

    def release_list(self) -> ReleaseList | None:
        """`releases.json` beside the pointer (the publisher rewrites it), re-read at most every `ttl`
        seconds with If-None-Match; a failed read keeps the list already known."""
        now = self.clock()
        if now - self._list_checked < self.ttl:
            return self._list
        self._list_checked = now
        key = f"{self.prefix}/{RELEASE_LIST_NAME}" if self.prefix else RELEASE_LIST_NAME
        try:
            reply = self.source.get(key, time.monotonic() + REFRESH_BUDGET, self._list_etag, 1)
        except AWSError as e:
            if e.status in (403, 404):  # no list published (yet)
                self._list, self._list_etag = None, None
            else:
                log("release list refresh failed:", repr(e))
            return self._list
        except Unavailable as e:
            log("release list refresh failed:", repr(e))
            return self._list
        if reply.status == 304 and self._list is not None:
            return self._list
        if reply.status == 200:
            etag = reply.headers.get("etag")
            self._list_etag = etag
            self._list = ReleaseList(bytes(reply.body), etag or '"' + str(len(reply.body)) + '"')
        return self._list

    @property
    def pointer_key(self) -> str:
        return f"{self.prefix}/current.json" if self.prefix else "current.json"

    def current(self, deadline: float) -> PointerRelease:
        now = self.clock()
        if self._current is not None and now - self._checked < self.ttl:
            return self._current
        with self._lock:
            if self._current is not None and now - self._checked < self.ttl:
                return self._current
            if self._current is None:
                release = self._read(deadline, None)
            else:
                try:  # a refresh: one short attempt; the known release is good enough meanwhile
                    release = self._read(min(deadline, time.monotonic() + REFRESH_BUDGET), 1)
                except (Unavailable, AWSError, ValueError) as e:
                    self.failures += 1
                    log("pointer refresh failed, keeping the known release", self._current.release_id, repr(e))
                    release = self._current
            self._current = release
            self._checked = now
            return release

    def _read(self, deadline: float, attempts: int | None) -> PointerRelease:
        reply = self.source.get(self.pointer_key, deadline, self._etag if self._current else None, attempts)
        if reply.status == 304 and self._current is not None:
            return self._current
        release = PointerRelease.from_pointer(json.loads(reply.body))
        self._etag = reply.headers.get("etag")
        if self._current is not None and release == self._current:
            return self._current  # same object: the gate's per-release memo stays warm
        self._attach_index(release)
        release.fetch_names = lambda: self._release_file(release, NAMES_KEY)
        return release

    def _base(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""

    def _attach_index(self, release: PointerRelease) -> None:
        if release.shards is not None:
            rid, base = release.release_id, self._base()
            release.index = ObjectIndex(rid, release.shards, lambda name, deadline: bytes(
                self.source.get(f"{base}releases/{rid}/{name}", deadline, None, 1).body))

    def object_path(self, release: PointerRelease, key: str, deadline: float) -> str | None:
        """Where in the bucket the file `key` of `release` is (without the prefix): its stored object
        (index layout) or its copy (copy layout); None when the index has no such file. Raises
        IndexUnavailable when the index cannot be read within `deadline`."""
        if release.index is None:
            return f"releases/{release.release_id}/{key}"
        name = release.index.object_name(key, deadline)
        return None if name is None else f"objects/{name}"

    def release_for(self, release_id: str) -> PointerRelease | None:
        """The release object already known for an id (the current one, or a pinned one), for its index."""
        if self._current is not None and self._current.release_id == release_id:
            return self._current
        hit = self._pinned.get(release_id)
        return hit[1] if hit is not None else None

    def _release_file(self, release: PointerRelease, key: str) -> bytes | None:
        """One file of a release from the bucket (through its index in the index layout), short attempts;
        None when it cannot be read."""
        deadline = time.monotonic() + REFRESH_BUDGET
        try:
            path = self.object_path(release, key, deadline)
            if path is None:
                return None
            reply = self.source.get(self._base() + path, deadline, None, 1)
        except (AWSError, Unavailable, IndexUnavailable) as e:
            log("release file unreadable:", release.release_id, key, repr(e))
            return None
        return bytes(reply.body) if reply.status == 200 else None

    def pinned(self, release_id: str) -> PointerRelease | None:
        """An earlier release still in the bucket, for its bundle files (`/v1/downloads/<id>/…`).

        Its file list comes from the release's own `downloads/SHA256SUMS` (a few hundred bytes,
        not the manifest): kept for `PINNED_TTL` seconds, so a pruned release stops being served
        within that time; an id the bucket lacks is remembered as absent for `ttl` seconds, so
        made-up ids cost one read each. S3 being down raises (the caller answers 503), so an
        outage is never reported as an unknown release.
        """
        now = self.clock()
        hit = self._pinned.get(release_id)
        if hit is not None and now - hit[0] < (PINNED_TTL if hit[1] is not None else self.ttl):
            return hit[1]
        base = self._base()
        # a release of the index layout has its index root; one of the copy layout a key per file
        root = self._optional(f"{base}releases/{release_id}/{INDEX_ROOT}")
        index: ObjectIndex | None = None
        if root is not None:
            try:
                doc = json.loads(root)
            except ValueError:
                doc = None
            shards = shards_of(doc.get("shards")) if isinstance(doc, dict) and doc.get("release_id") == release_id \
                else None
            if shards is None:
                raise IndexUnavailable(f"{release_id}/{INDEX_ROOT} is not the release's index root")
            shell = PointerRelease(release_id, Facts(), frozenset(), shards=shards)
            self._attach_index(shell)
            index = shell.index

        def file_of(key: str) -> bytes | None:
            if index is None:
                return self._optional(f"{base}releases/{release_id}/{key}")
            name = index.object_name(key, time.monotonic() + REFRESH_BUDGET)
            return None if name is None else self._optional(f"{base}objects/{name}")

        found = self._pinned_index(file_of(INDEX_KEY), release_id)
        sums = file_of(f"{DOWNLOAD_FILE.key_prefix}SHA256SUMS") if found is None else None
        if sums is not None:  # an index without scopes: names only (fail closed)
            names = {line.split(maxsplit=1)[1].strip().lstrip("*")
                     for line in sums.decode("utf-8").splitlines() if len(line.split(maxsplit=1)) == 2}
            found = PointerRelease(release_id, Facts(), frozenset(), frozenset(names | {"SHA256SUMS", BUNDLE_ZIP}))
        if found is not None and index is not None:
            found.shards, found.index = dict(index.shards), index
        if len(self._pinned) >= 32:
            self._pinned.clear()
        self._pinned[release_id] = (now, found)
        return found

    def _optional(self, key: str) -> bytes | None:
        """An object's bytes, one short attempt; None when it is absent (S3 answers 403 for an absent
        object without ListBucket). S3 being down raises."""
        try:
            reply = self.source.get(key, time.monotonic() + REFRESH_BUDGET, None, 1)
        except AWSError as e:
            if e.status not in (403, 404):
                raise
            return None
        return bytes(reply.body) if reply.status == 200 else None

    @staticmethod
    def _pinned_index(body: bytes | None, release_id: str) -> PointerRelease | None:
        """The release's own `/v1/downloads` document: its files' names and the scopes each needs
        (a few KB). None when it is absent or records no scopes (a release published before they
        were recorded): the caller then reads the names from SHA256SUMS, and every file needs
        every scope."""
        if body is None:
            return None
        try:
            files = json.loads(body).get("files")
        except (ValueError, AttributeError):
            return None
        if not isinstance(files, list) or not all(isinstance(f, dict) and isinstance(f.get("scopes"), list)
                                                  and isinstance(f.get("name"), str) for f in files):
            return None
        scopes = scopes_by_name({f["name"]: f["scopes"] for f in files})
        return PointerRelease(release_id, Facts(), frozenset(), frozenset(scopes), scopes)


# --- keys and limits per request ------------------------------------------------------------


class Accounts(Protocol):
    """Per request, the gate's key store and limiter (edge.stores.dynamodb.EdgeAccounts: one object
    for both, so the limiter reads the counts the key lookup's single call returned)."""

    def for_request(self, now: datetime, deadline: float) -> tuple[KeyStore, Limiter | None]: ...


# --- event ⇄ gate ---------------------------------------------------------------------------


def request_from_event(cf_request: Mapping[str, Any]) -> Request:
    """CloudFront's request object → the gate's Request (lower-case names, values joined)."""
    headers: dict[str, str] = {}
    for name, values in (cf_request.get("headers") or {}).items():
        joined = ", ".join(v.get("value", "") for v in values)
        headers[name.lower()] = joined
    return Request(cf_request.get("method", "GET"), cf_request.get("uri", "/"),
                   cf_request.get("querystring", "") or "", headers)


def _cf_headers(headers: Headers) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for k, v in headers:
        if v == "":  # e.g. the edge's empty ETag: say nothing rather than something false
            continue
        out.setdefault(k.lower(), []).append({"key": k, "value": v})
    return out


def generated_response(resp: Response, method: str) -> dict[str, Any]:
    """A gate answer as a CloudFront generated response, body ≤ 40 KB."""
    body = b"" if method.upper() == "HEAD" or resp.status in (204, 304) else (resp.body or b"")
    if len(body) > MAX_GENERATED_BODY:  # never expected: problem documents are well under 1 KB
        resp = error("RELEASE_INCOMPLETE", "The edge produced an oversized answer.", "")
        body = resp.body or b""
    out: dict[str, Any] = {
        "status": str(resp.status),
        "statusDescription": STATUS_TEXT.get(resp.status, ""),
        "headers": _cf_headers(resp.headers),
    }
    if body:
        try:
            out["body"] = body.decode("utf-8")
            out["bodyEncoding"] = "text"
        except UnicodeDecodeError:
            out["body"] = base64.b64encode(body).decode("ascii")
            out["bodyEncoding"] = "base64"
    return out


def rewrite(cf_request: dict[str, Any], resp: Response, path: str, prefix: str) -> dict[str, Any]:
    """Point the request at the immutable object (`path` in the bucket, below the prefix) and carry the
    gate's headers along, with the file key (the viewer-response function's choice of security headers)."""
    assert resp.file_key is not None
    base = f"/{prefix.strip('/')}" if prefix.strip("/") else ""
    cf_request["uri"] = f"{base}/{path}"
    cf_request["querystring"] = ""  # the object is fully named by its key
    headers = cf_request.setdefault("headers", {})
    headers[FILE_KEY_HEADER] = [{"key": FILE_KEY_HEADER, "value": resp.file_key}]
    for secret in ("authorization", "x-api-key"):  # keys never travel to the origin or its logs
        headers.pop(secret, None)
    for k, v in resp.headers:
        fwd = FORWARDED.get(k.lower())
        if fwd is not None:
            headers[fwd] = [{"key": fwd, "value": v}]
    return cf_request


def unavailable_response(path: str, what: str, retry_after: int) -> Response:
    return error("TEMPORARILY_UNAVAILABLE", f"{what} did not answer in time; retry in {retry_after} s.", path,
                 [("Retry-After", str(retry_after))])


def unavailable(path: str, method: str, what: str, retry_after: int) -> dict[str, Any]:
    return generated_response(unavailable_response(path, what, retry_after), method)


def log(what: str, *parts: object) -> None:
    """One JSON line to the function's log (CloudWatch, in the region that ran it): `what` happened."""
    print(event_line("edge_problem", what=what, detail=" ".join(str(p) for p in parts)), file=sys.stderr)


def stdout_line(text: str) -> None:
    """Decision lines go to stdout (CloudWatch Logs, like stderr); problems of the function itself to stderr."""
    print(text)


class EdgeGate:
    """Everything a viewer-request decision needs; built once per function instance."""

    def __init__(self, accounts: Accounts, releases: PointerReleases, clock: Callable[[], datetime] = utc_now,
                 deadline: float = 3.0, retry_after: int = 5, access_log: AccessLog | None = None):
        self.accounts = accounts
        self.releases = releases
        self.clock = clock
        self.deadline = deadline  # seconds for all dependency calls of one request
        self.retry_after = retry_after
        self.access_log = access_log  # one line per decision (edge/accesslog.py); None: none

    def __call__(self, event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
        started = time.perf_counter()
        cf_request = event["Records"][0]["cf"]["request"]
        req = request_from_event(cf_request)
        deadline = time.monotonic() + self.deadline
        resp, release_id = self._decide(req, deadline)
        path: str | None = None
        if resp.file_key is not None and resp.status == 200:  # a pinned download names its own release
            assert release_id is not None
            path, resp = self._locate(req, resp, resp.release_id or release_id, deadline)
        if self.access_log is not None:
            self.access_log.record(req.method, req.path, resp, release_id, started)
        if path is not None:
            return rewrite(cf_request, resp, path, self.releases.prefix)
        return generated_response(resp, req.method)

    def _locate(self, req: Request, resp: Response, release_id: str, deadline: float) -> tuple[str | None, Response]:
        """The bucket path of an authorised file, or an answer instead: 404 when the release's index
        has no such file, 503 when its index cannot be read in time (never another file)."""
        assert resp.file_key is not None
        release = self.releases.release_for(release_id)
        if release is None:  # a copy-layout path, as the gate's release was not kept (never expected)
            return f"releases/{release_id}/{resp.file_key}", resp
        try:
            path = self.releases.object_path(release, resp.file_key, deadline)
        except IndexUnavailable as e:
            log("release index unavailable", repr(e))
            return None, unavailable_response(req.path, "The release index", self.retry_after)
        if path is None:
            return None, error("NOT_FOUND", "The release holds no such file.", req.path)
        return path, resp

    def _decide(self, req: Request, deadline: float) -> tuple[Response, str | None]:
        """The gate's answer and the id of the release it was decided against (None: no release known)."""
        try:
            release = self.releases.current(deadline)
        except AWSError as e:
            if e.status != 404:
                log("pointer unreadable", repr(e))
                return unavailable_response(req.path, "The release pointer", self.retry_after), None
            return error("RELEASE_INCOMPLETE", "No release is published yet.", req.path), None
        except (Unavailable, ValueError) as e:
            log("pointer unavailable", repr(e))
            return unavailable_response(req.path, "The release pointer", self.retry_after), None
        now = self.clock()
        keys, limiter = self.accounts.for_request(now, deadline)
        try:
            return handle(req, now, keys, release, limiter, self.releases), release.release_id
        except (Unavailable, AWSError, ValueError) as e:  # ValueError: an answer the store cannot explain
            log("key store unavailable", repr(e))
            return unavailable_response(req.path, "The key store", self.retry_after), release.release_id


# --- the Lambda entry point ---------------------------------------------------------------

CONFIG_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "edge_config.json")


def build_gate(settings: EdgeSettings, env: Mapping[str, str] = os.environ) -> EdgeGate:
    """Clients for the pointer (S3) and the key store (DynamoDB), from the bundled settings."""
    from .aws import S3, Budget, DynamoDB
    from .stores.dynamodb import EdgeAccounts

    creds = Credentials.from_env(env)
    ca_file = settings.ca_file
    if ca_file is not None and not os.path.isabs(ca_file):
        ca_file = os.path.join(os.path.dirname(CONFIG_FILE), ca_file)
    budget = Budget(settings.connect_timeout, settings.read_timeout, ca_file=ca_file)
    s3 = S3(settings.bucket, settings.bucket_region or settings.region, lambda: creds, settings.s3_endpoint_url, budget)
    ddb = DynamoDB(settings.region, lambda: creds, settings.dynamodb_endpoint_url, budget)
    accounts = EdgeAccounts(ddb, settings.table_prefix, settings.per_minute, settings.monthly, settings.key_ttl)
    access_log = AccessLog(stdout_line, settings.log_ok_every, "cloudfront")
    return EdgeGate(accounts, PointerReleases(s3, settings.clean_prefix, settings.pointer_ttl),
                    deadline=settings.deadline, retry_after=settings.retry_after, access_log=access_log)


def load_gate(path: str = CONFIG_FILE) -> EdgeGate | None:
    """The bundle's gate, or None outside a bundle (no edge_config.json: tests, the local server)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    return build_gate(EdgeSettings.from_json(raw))


_gate = load_gate()  # at module load: Lambda runs this in the init phase, once per instance


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Lambda@Edge viewer-request entry point."""
    if _gate is None:
        raise RuntimeError(f"{CONFIG_FILE} is missing: build the bundle with deploy/build_bundle.py")
    return _gate(event, context)
