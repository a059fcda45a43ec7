"""The gate at the CDN edge: a Lambda@Edge viewer-request function over `edge.gate.handle`.

CloudFront calls `handler(event, context)` for every viewer request before its cache.
The adapter turns the event into the gate's `Request`, asks the same pure gate the
local server uses, and then either

- **rewrites** `request["uri"]` to `/<prefix>/releases/<release_id>/<file key>` (the
  gate authorised it): CloudFront then serves that immutable object from its cache or
  the S3 origin, so bytes never pass through the function; or
- **returns a generated response** (401, 403, 4xx, 429, 503, preflight, a 304 the gate
  can decide itself), at most 40 KB as CloudFront requires for viewer-request answers.

Conditional requests: the gate answers 304 itself when If-None-Match carries the
manifest ETag of the file (the tag the local server hands out). Any other tag is left
to CloudFront: after the rewrite it compares If-None-Match with the cached object's
own ETag (S3's) and answers 304 without the origin. Either way the request counted
against the key's limits first, as on the local server.

Headers the gate sets on an authorised answer (RateLimit, RateLimit-Policy,
X-Release-Id) cannot be attached to a response from a viewer-request function; they
ride on the rewritten request as `x-mr-*` headers and `viewer_response_handler` copies
them onto the response. Cache-Control and CORS for those answers come from the
behaviour's response headers policy (see deploy/).

Release facts come from the published pointer `current.json` (written by
`malaria-risk publish`, see pipeline/publish/s3.py), re-read at most every
`pointer_ttl` seconds; the manifest of a release is immutable, so it is fetched once
per release id. Keys are cached per function instance for at most `key_ttl` seconds
(default 2): a revocation reaches every edge location within 2 s of its write to
DynamoDB (reads are strongly consistent).

Lambda@Edge has no environment variables: the deploy script writes `edge_config.json`
into the bundle next to this package. Standard library only, plus boto3 (provided by
the Lambda runtime) inside `handler` when it runs for real.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .gate import Headers, Limiter, Request, Response, error, handle
from .keys import KeyRecord, KeyStore
from .release import ManifestRelease
from .routes import DOWNLOAD_FILE, RELEASE_ID_RE

MAX_GENERATED_BODY = 40 * 1024  # CloudFront's limit for a viewer-request generated response
FORWARDED = {"ratelimit": "x-mr-ratelimit", "ratelimit-policy": "x-mr-ratelimit-policy",
             "x-release-id": "x-mr-release-id"}
STATUS_TEXT = {200: "OK", 204: "No Content", 304: "Not Modified", 400: "Bad Request", 401: "Unauthorized",
               403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 429: "Too Many Requests",
               500: "Internal Server Error", 503: "Service Unavailable"}

Fetch = Callable[[str], bytes]  # S3 key → object bytes (raises on absence)
PINNED_TTL = 300.0  # seconds an earlier release's bundle list is trusted before the bucket is asked again


def utc_now() -> datetime:
    return datetime.now(UTC)


# --- release facts from the published pointer ---------------------------------------------


class PointerReleases:
    """The live release as `current.json` names it, re-read at most every `ttl` seconds.

    A failed refresh keeps serving the release already known (a publish or an S3 blip
    must not take the API down); with none known yet, the error propagates.
    """

    def __init__(self, fetch: Fetch, prefix: str = "", ttl: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self.fetch = fetch
        self.prefix = prefix.strip("/")
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._current: ManifestRelease | None = None
        self._checked = float("-inf")
        self._manifests: dict[str, ManifestRelease] = {}
        self._pinned: dict[str, tuple[float, ManifestRelease | None]] = {}

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def current(self) -> ManifestRelease:
        now = self.clock()
        if self._current is not None and now - self._checked < self.ttl:
            return self._current
        with self._lock:
            if self._current is not None and now - self._checked < self.ttl:
                return self._current
            try:
                pointer = json.loads(self.fetch(self.key("current.json")))
                release_id = pointer["release_id"]
                release = self._manifests.get(release_id)
                if release is None:
                    manifest = json.loads(self.fetch(self.key(pointer.get("manifest")
                                                              or f"releases/{release_id}/manifest.json")))
                    if manifest.get("release_id") != release_id:
                        raise ValueError(f"manifest of {release_id} names {manifest.get('release_id')}")
                    release = ManifestRelease.from_manifest(manifest)
                    self._manifests = {release_id: release}  # one release at a time; memory is 128 MB
                self._current = release
            except Exception:
                if self._current is None:
                    raise
            self._checked = now
            return self._current

    def pinned(self, release_id: str) -> ManifestRelease | None:
        """An earlier release still in the bucket, for its bundle files (`/v1/downloads/<id>/…`).

        Its manifest's bundle entries are kept for `PINNED_TTL` seconds (so a pruned release
        stops being served within that time); an id the bucket lacks is remembered as absent
        for `ttl` seconds, so made-up ids cost one read each.
        """
        if not RELEASE_ID_RE.fullmatch(release_id):
            return None
        now = self.clock()
        hit = self._pinned.get(release_id)
        if hit is not None and now - hit[0] < (PINNED_TTL if hit[1] is not None else self.ttl):
            return hit[1]
        try:
            doc = json.loads(self.fetch(self.key(f"releases/{release_id}/manifest.json")))
            found: ManifestRelease | None = None
            if doc.get("release_id") == release_id:
                found = ManifestRelease.from_manifest(doc, only_prefix=DOWNLOAD_FILE.key_prefix)
        except Exception:  # absent (pruned or never published) or unreadable: not served
            found = None
        if len(self._pinned) >= 32:
            self._pinned.clear()
        self._pinned[release_id] = (now, found)
        return found


# --- a short-lived key cache --------------------------------------------------------------


class TTLKeyCache:
    """Key records kept for at most `ttl` seconds per function instance.

    The bound is the revocation delay at the edge: a key revoked (or an org suspended)
    at time T is refused by every instance from T + ttl on. Unknown keys are cached for
    the same time so a flood of made-up keys cannot hammer DynamoDB.
    """

    def __init__(self, inner: KeyStore, ttl: float = 2.0, clock: Callable[[], float] = time.monotonic,
                 max_items: int = 5000):
        self.inner = inner
        self.ttl = ttl
        self.clock = clock
        self.max_items = max_items
        self._items: dict[str, tuple[float, KeyRecord | None]] = {}

    def lookup(self, key_hash: str) -> KeyRecord | None:
        now = self.clock()
        hit = self._items.get(key_hash)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        record = self.inner.lookup(key_hash)
        if len(self._items) >= self.max_items:
            self._items.clear()
        self._items[key_hash] = (now, record)
        return record


# --- event ⇄ gate -------------------------------------------------------------------------


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


def rewrite(cf_request: dict[str, Any], resp: Response, release_id: str, prefix: str) -> dict[str, Any]:
    """Point the request at the immutable release object and carry the gate's headers along."""
    assert resp.file_key is not None
    base = f"/{prefix.strip('/')}" if prefix.strip("/") else ""
    cf_request["uri"] = f"{base}/releases/{release_id}/{resp.file_key}"
    cf_request["querystring"] = ""  # the object is fully named by its key
    headers = cf_request.setdefault("headers", {})
    for secret in ("authorization", "x-api-key"):  # keys never travel to the origin or its logs
        headers.pop(secret, None)
    for k, v in resp.headers:
        fwd = FORWARDED.get(k.lower())
        if fwd is not None:
            headers[fwd] = [{"key": fwd, "value": v}]
    return cf_request


@dataclass
class EdgeGate:
    """Everything a viewer-request decision needs; built once per function instance."""

    keys: KeyStore
    releases: PointerReleases
    limiter: Limiter | None
    clock: Callable[[], datetime] = utc_now

    def __call__(self, event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
        cf_request = event["Records"][0]["cf"]["request"]
        req = request_from_event(cf_request)
        try:
            release = self.releases.current()
        except Exception as e:  # no pointer yet, or S3 unreachable on a cold start
            return generated_response(
                error("RELEASE_INCOMPLETE", f"No published release is reachable: {type(e).__name__}.", req.path),
                req.method)
        resp = handle(req, self.clock(), self.keys, release, self.limiter, self.releases)
        if resp.file_key is not None and resp.status == 200:  # a pinned download names its own release
            return rewrite(cf_request, resp, resp.release_id or release.release_id, self.releases.prefix)
        return generated_response(resp, req.method)


def viewer_response(event: Mapping[str, Any]) -> dict[str, Any]:
    """Copy the gate's per-request headers (carried as x-mr-*) onto the response."""
    cf = event["Records"][0]["cf"]
    request_headers = cf.get("request", {}).get("headers", {})
    response = cf["response"]
    headers = response.setdefault("headers", {})
    for public, fwd in FORWARDED.items():
        values = request_headers.get(fwd)
        if values:
            name = {"ratelimit": "RateLimit", "ratelimit-policy": "RateLimit-Policy",
                    "x-release-id": "X-Release-Id"}[public]
            headers[public] = [{"key": name, "value": values[0]["value"]}]
    return response


# --- the Lambda entry points --------------------------------------------------------------

CONFIG_FILE = Path(__file__).resolve().parent.parent / "edge_config.json"
_gate: EdgeGate | None = None
_gate_lock = threading.Lock()


def build_gate(config: Mapping[str, Any]) -> EdgeGate:
    """Wire boto3 clients from the bundled config: S3 for the pointer, DynamoDB for keys and counters."""
    import boto3  # provided by the Lambda runtime; the local server never imports this

    from .limits import DEFAULT_MONTHLY, DEFAULT_PER_MINUTE
    from .limits import Limiter as FixedWindowLimiter
    from .stores.dynamodb import DynamoDBCounter, DynamoDBKeyStore

    region = config.get("region", "us-east-1")
    s3 = boto3.client("s3", region_name=config.get("bucket_region", region))
    bucket = config["bucket"]

    def fetch(key: str) -> bytes:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()

    ddb = boto3.client("dynamodb", region_name=region)
    store = DynamoDBKeyStore(ddb, config["table_prefix"])
    limiter = FixedWindowLimiter(DynamoDBCounter(store.counters_table),
                                 int(config.get("per_minute", DEFAULT_PER_MINUTE)),
                                 int(config.get("monthly", DEFAULT_MONTHLY)))
    return EdgeGate(TTLKeyCache(store, float(config.get("key_ttl", 2.0))),
                    PointerReleases(fetch, config.get("prefix", ""), float(config.get("pointer_ttl", 5.0))),
                    limiter)


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Lambda@Edge viewer-request entry point."""
    global _gate
    if _gate is None:
        with _gate_lock:
            if _gate is None:
                _gate = build_gate(json.loads(CONFIG_FILE.read_text()))
    return _gate(event, context)


def viewer_response_handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Lambda@Edge viewer-response entry point (attached to the same behaviour)."""
    return viewer_response(event)
