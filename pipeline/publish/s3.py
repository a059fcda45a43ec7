"""Publishing a rendered release to S3 (or any S3-compatible store) with boto3.

The bucket layout makes a half-published release invisible to clients::

    <prefix>/releases/<release_id>/<key>            immutable, cached for a year
    <prefix>/releases/<release_id>/manifest.json    written after every file it lists
    <prefix>/current.json                           the one mutable object: which release is live

The edge resolves every request under the release id that `current.json` names, and
that pointer is switched only after every object of the new release has been
uploaded AND verified (size, SHA-256 metadata, content type, encoding, cache policy).
A publish that dies halfway leaves the pointer on the previous release, which is
untouched because release prefixes are never written in place once complete.

Everything here is a plain function over a boto3 client so tests can drive it
against a real S3 server; `pipeline.publish.cli` adds the operator's commands.
File reading is confined to the local-release helpers at the top (the release tree
is this module's input, as `pipeline/sources/*` is the pipeline's).
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from edge.routes import PUBLIC_PREFIX
from pipeline.release.manifest import MANIFEST_NAME, Manifest, sha256_hex, verify_release_dir

CACHE_IMMUTABLE = "public, max-age=31536000, immutable"
# Short enough that a switch (or a rollback) reaches every client within seconds,
# long enough that a CDN does not ask the bucket for the pointer on every request.
CACHE_POINTER = "public, max-age=10, must-revalidate"
POINTER_NAME = "current.json"
POINTER_FORMAT = 1
SHA_META = "sha256"  # sent as x-amz-meta-sha256
JSON = "application/json"
RELEASE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DEFAULT_WORKERS = 16
_TRANSIENT_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError",
     "ServiceUnavailable", "RequestLimitExceeded", "TooManyRequests"}
)  # fmt: skip


class PublishError(Exception):
    """An operator-facing failure: one line that says what went wrong and where.

    The CLI prints it instead of a traceback; `problems` holds the full list when
    there are many (e.g. every object that failed verification).
    """

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or []


class PointerConflict(PublishError):
    """current.json changed between our read and our conditional write: another
    publisher (or a rollback) got there first, and we refuse to overwrite it blindly."""


# --- bucket layout ---------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A bucket and key prefix; every key this module writes is built here."""

    bucket: str
    prefix: str = ""

    @classmethod
    def of(cls, bucket: str, prefix: str | None = None) -> Target:
        clean = "/".join(part for part in (prefix or "").split("/") if part)
        if any(part in (".", "..") for part in clean.split("/")):
            raise PublishError(f"prefix {prefix!r} may not contain '.' or '..' segments")
        return cls(bucket, clean)

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    @property
    def releases_prefix(self) -> str:
        return self.key("releases/")

    def release_prefix(self, release_id: str) -> str:
        return self.key(f"releases/{release_id}/")

    def object_key(self, release_id: str, rel: str) -> str:
        return self.release_prefix(release_id) + rel

    @property
    def pointer_key(self) -> str:
        return self.key(POINTER_NAME)

    def url(self, key: str = "") -> str:
        return f"s3://{self.bucket}/{key}"


def check_release_id(release_id: str) -> str:
    """Release ids become one key segment; anything else could escape the layout."""
    if not RELEASE_ID_RE.match(release_id):
        raise PublishError(
            f"release id {release_id!r} is not a safe key segment ([A-Za-z0-9._-], no '/')"
        )
    return release_id


# --- the S3 client and its errors -------------------------------------------------


def make_client(
    endpoint_url: str | None = None,
    *,
    workers: int = DEFAULT_WORKERS,
    max_attempts: int = 8,
    retry_mode: str = "standard",
    connect_timeout: float = 10,
    read_timeout: float = 60,
    session: Any = None,
) -> Any:
    """A thread-safe S3 client whose connection pool fits the upload pool.

    botocore's "standard" retry mode already backs off exponentially (with jitter) on
    throttling (SlowDown, 503) and 5xx; "adaptive" adds client-side rate limiting.
    Path-style addressing works with every S3-compatible server, including on AWS.
    """
    import boto3
    from botocore.config import Config

    session = session or boto3.session.Session()
    if session.get_credentials() is None:
        raise PublishError(
            "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
        )
    config = Config(
        signature_version="s3v4",
        s3={"addressing_style": "path"},
        retries={"mode": retry_mode, "max_attempts": max_attempts},
        max_pool_connections=max(workers, 10),
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        # We send Content-MD5 and check bodies ourselves (ETag, SHA-256); botocore's
        # default CRC32 trailer would only add work on every request.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    region = session.region_name or "us-east-1"
    return session.client("s3", endpoint_url=endpoint_url, region_name=region, config=config)


def _endpoint(client: Any) -> str:
    return getattr(getattr(client, "meta", None), "endpoint_url", None) or "S3"


def describe_error(exc: Exception, *, endpoint: str, bucket: str, action: str) -> str:
    """Turn a botocore failure into one line an operator can act on."""
    if isinstance(exc, NoCredentialsError):
        return "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
    if isinstance(exc, EndpointConnectionError | ConnectionClosedError | ReadTimeoutError):
        return f"cannot reach S3 endpoint {endpoint} while trying to {action}: {exc}"
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "SignatureDoesNotMatch":
            return (
                f"S3 at {endpoint} rejected the request signature while trying to {action}: "
                "the secret access key is wrong for this access key id (SignatureDoesNotMatch)"
            )
        if code == "InvalidAccessKeyId":
            return f"S3 at {endpoint} does not know the access key id in use (InvalidAccessKeyId)"
        if code in ("NoSuchBucket",) or (
            code in ("404", "NotFound") and action.startswith("reach bucket")
        ):
            return f"bucket {bucket!r} does not exist at {endpoint}"
        if code == "RequestTimeTooSkewed":
            return f"S3 at {endpoint} refused the request: this machine's clock is wrong (RequestTimeTooSkewed)"
        if code in ("AccessDenied", "403", "Forbidden") or status == 403:
            return (
                f"access denied by S3 at {endpoint} while trying to {action} in bucket {bucket!r}: "
                "the credentials lack a permission listed in docs/operations.md"
            )
        message = err.get("Message") or ""
        return f"S3 at {endpoint} failed to {action}: {code or status} {message}".rstrip()
    if isinstance(exc, BotoCoreError):
        return f"S3 at {endpoint}: {action} failed: {exc}"
    return f"{action} failed: {exc}"


@contextmanager
def s3_errors(client: Any, bucket: str, action: str) -> Iterator[None]:
    """Re-raise botocore failures as PublishError with a one-line explanation."""
    try:
        yield
    except (BotoCoreError, ClientError) as exc:
        raise PublishError(
            describe_error(exc, endpoint=_endpoint(client), bucket=bucket, action=action)
        ) from exc


def _is_missing(exc: ClientError) -> bool:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    return code in ("404", "NoSuchKey", "NotFound")


def _is_transient(exc: Exception) -> bool:
    if isinstance(exc, EndpointConnectionError | ConnectionClosedError | ReadTimeoutError):
        return True
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return code in _TRANSIENT_CODES or status >= 500 or status == 429
    return False


def retrying(
    fn: Callable[[], Any],
    *,
    attempts: int = 4,
    base_delay: float = 0.2,
    retry_missing: bool = False,
) -> Any:
    """Our own backoff on top of botocore's, for verification.

    botocore gives up after its attempts; a verification failure would then block
    the pointer switch over a blip. Optionally a 404 is retried too: some
    S3-compatible stores are not read-after-write consistent for a just-written key.
    """
    for attempt in range(attempts):
        try:
            return fn()
        except ClientError as exc:
            retry = _is_transient(exc) or (retry_missing and _is_missing(exc))
            if not retry or attempt == attempts - 1:
                raise
        except (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError):
            if attempt == attempts - 1:
                raise
        time.sleep(base_delay * (2**attempt))
    raise AssertionError("unreachable")


def preflight(client: Any, target: Target) -> None:
    """Fail fast, with a clear message, on a wrong key, a missing bucket or a dead endpoint.

    A ListObjectsV2 (a GET) rather than HeadBucket: a HEAD answer has no body, so a
    wrong secret key and a missing permission would both read as a bare 403.
    """
    with s3_errors(client, target.bucket, f"reach bucket {target.bucket!r}"):
        client.list_objects_v2(Bucket=target.bucket, Prefix=target.key(""), MaxKeys=1)


# --- listing and HEAD --------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    size: int
    etag: str
    last_modified: datetime


def list_objects(client: Any, target: Target, prefix: str) -> dict[str, Listed]:
    """Every object under `prefix` (full keys) with its size, ETag and time."""
    out: dict[str, Listed] = {}
    with s3_errors(client, target.bucket, f"list {target.url(prefix)}"):
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=target.bucket, Prefix=prefix
        ):
            for obj in page.get("Contents", []):
                out[obj["Key"]] = Listed(obj["Size"], obj.get("ETag", ""), obj["LastModified"])
    return out


def head_object(
    client: Any, bucket: str, key: str, *, retry_missing: bool = False
) -> dict[str, Any] | None:
    """The object's headers, or None when it does not exist."""
    try:
        return retrying(
            lambda: client.head_object(Bucket=bucket, Key=key), retry_missing=retry_missing
        )
    except ClientError as exc:
        if _is_missing(exc):
            return None
        raise


@dataclass(frozen=True)
class Expected:
    """What one object must look like in the bucket, from the manifest."""

    rel: str  # key inside the release
    size: int
    sha256: str
    content_type: str
    content_encoding: str | None
    cache_control: str = CACHE_IMMUTABLE


def check_head(
    head: dict[str, Any] | None, expected: Expected, md5: str | None = None
) -> list[str]:
    """Every way an object's headers differ from what the manifest promises.

    `md5`, when known (publishing, with the local bytes at hand), is compared with a
    plain single-part ETag, which catches a body replaced by one of the same size
    with the old metadata. It is skipped when the ETag is not an MD5 of the body
    (multipart uploads, SSE-KMS or SSE-C encryption).
    """
    rel = expected.rel
    if head is None:
        return [f"missing: {rel}"]
    problems: list[str] = []
    size = head.get("ContentLength")
    if size != expected.size:
        problems.append(f"size differs: {rel} ({size} in bucket, {expected.size} in manifest)")
    meta = {k.lower(): v for k, v in (head.get("Metadata") or {}).items()}
    sha = meta.get(SHA_META)
    if sha is None:
        problems.append(f"no sha256 metadata: {rel}")
    elif sha != expected.sha256:
        problems.append(f"sha256 metadata differs: {rel}")
    if head.get("ContentType") != expected.content_type:
        problems.append(
            f"content type differs: {rel} ({head.get('ContentType')!r}, manifest {expected.content_type!r})"
        )
    if (head.get("ContentEncoding") or None) != expected.content_encoding:
        problems.append(
            f"content encoding differs: {rel} ({head.get('ContentEncoding')!r}, manifest {expected.content_encoding!r})"
        )
    if head.get("CacheControl") != expected.cache_control:
        problems.append(f"cache control differs: {rel} ({head.get('CacheControl')!r})")
    if md5 is not None and _etag_is_md5(head) and head.get("ETag", "").strip('"') != md5:
        problems.append(f"body differs (ETag is not the MD5 of the local file): {rel}")
    return problems


def _etag_is_md5(head: dict[str, Any]) -> bool:
    etag = str(head.get("ETag", "")).strip('"')
    encrypted = head.get("ServerSideEncryption") == "aws:kms" or head.get("SSECustomerAlgorithm")
    return bool(re.fullmatch(r"[0-9a-f]{32}", etag)) and not encrypted


# --- the local release -----------------------------------------------------------


@dataclass(frozen=True)
class LocalRelease:
    release_id: str
    path: Path
    manifest: Manifest
    manifest_bytes: bytes

    @property
    def manifest_sha256(self) -> str:
        return sha256_hex(self.manifest_bytes)


def resolve_release_dir(root: Path, release_id: str | None = None) -> Path:
    """`root/releases/<id>`, or where `root/current` points when no id is given."""
    if release_id is not None:
        return root / "releases" / check_release_id(release_id)
    current = root / "current"
    if not current.exists():
        raise PublishError(
            f"no release given and {current} does not exist: run the build first or pass --release"
        )
    return current.resolve()


def check_release_tree(release_dir: Path, manifest: Manifest) -> list[str]:
    """Reasons a tree must not be published: checksum failures, files the manifest does
    not list (a stray key store, an editor backup), keys or symlinks that escape it."""
    problems = verify_release_dir(release_dir, manifest)
    root = release_dir.resolve()
    for rel in manifest.files:
        parts = rel.split("/")
        if rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or rel == MANIFEST_NAME:
            problems.append(f"unsafe key in manifest: {rel!r}")
            continue
        path = release_dir / rel
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            problems.append(f"symlink leads outside the release: {rel}")
    return problems


def open_local_release(root: Path, release_id: str | None = None) -> LocalRelease:
    """Load and check a release tree; refuse anything that is not exactly its manifest."""
    path = resolve_release_dir(root, release_id)
    manifest_path = path / MANIFEST_NAME
    if not manifest_path.is_file():
        raise PublishError(f"{manifest_path} does not exist: not a rendered release")
    raw = manifest_path.read_bytes()
    try:
        manifest = Manifest.from_bytes(raw)
    except (ValueError, KeyError) as exc:
        raise PublishError(f"{manifest_path} is not a valid manifest: {exc}") from exc
    check_release_id(manifest.release_id)
    if manifest.release_id != path.name:
        raise PublishError(
            f"{manifest_path} names release {manifest.release_id!r} but sits in {path.name!r}"
        )
    problems = check_release_tree(path, manifest)
    if problems:
        raise PublishError(
            f"refusing to publish {path}: {len(problems)} problem(s), first: {problems[0]}",
            problems,
        )
    return LocalRelease(manifest.release_id, path, manifest, raw)


def expected_objects(manifest: Manifest) -> list[Expected]:
    return [
        Expected(rel, int(e["size"]), e["sha256"], e["content_type"], e.get("content_encoding"))
        for rel, e in sorted(manifest.files.items())
    ]


# --- the pointer -----------------------------------------------------------------


@dataclass(frozen=True)
class Pointer:
    doc: dict[str, Any]
    etag: str

    @property
    def release_id(self) -> str | None:
        return self.doc.get("release_id")

    @property
    def previous(self) -> str | None:
        return self.doc.get("previous")


def read_pointer(client: Any, target: Target) -> Pointer | None:
    """current.json and its ETag (for the conditional write), or None before the first publish."""
    with s3_errors(client, target.bucket, f"read {target.url(target.pointer_key)}"):
        try:
            got = retrying(lambda: client.get_object(Bucket=target.bucket, Key=target.pointer_key))
        except ClientError as exc:
            if _is_missing(exc):
                return None
            raise
        body = got["Body"].read()
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise PublishError(
            f"{target.url(target.pointer_key)} is not JSON; fix or delete it by hand"
        ) from exc
    return Pointer(doc, got["ETag"])


def pointer_document(
    manifest: Manifest, manifest_sha256: str, previous: str | None, published_at: datetime
) -> dict[str, Any]:
    """What the edge reads to know which release is live, and what it may answer.

    Carries the manifest's facts so the edge validates periods and states without
    fetching the (large) manifest, and the docs pages (`public`) so the edge answers 404
    for a page the release lacks; `manifest_sha256` chains trust to the manifest.
    """
    return {
        "format": POINTER_FORMAT,
        "release_id": manifest.release_id,
        "manifest": f"releases/{manifest.release_id}/{MANIFEST_NAME}",
        "manifest_sha256": manifest_sha256,
        "updated_at": manifest.updated_at,
        "model_version": manifest.model_version,
        "facts": manifest.facts,
        "files": len(manifest.files),
        "public": sorted(k for k, e in manifest.files.items()
                         if k.startswith(PUBLIC_PREFIX) and not e.get("content_encoding")),
        "previous": previous,
        "published_at": published_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def write_pointer(
    client: Any, target: Target, doc: dict[str, Any], expected: Pointer | None
) -> str:
    """Switch current.json, refusing if it changed since `expected` was read.

    If-Match on the ETag we read (If-None-Match: * when there was none) makes the
    switch a compare-and-swap: of two publishers, the second gets 412 and stops. On a
    server that ignores those headers we still read the pointer back and fail loudly
    if it is not ours, so a lost race is reported rather than silent.
    """
    body = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    cond = {"IfMatch": expected.etag} if expected else {"IfNoneMatch": "*"}
    url = target.url(target.pointer_key)
    try:
        with s3_errors(client, target.bucket, f"write {url}"):
            try:
                put = client.put_object(
                    Bucket=target.bucket,
                    Key=target.pointer_key,
                    Body=body,
                    ContentType=JSON,
                    CacheControl=CACHE_POINTER,
                    Metadata={SHA_META: sha256_hex(body)},
                    **cond,
                )
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (
                    409,
                    412,
                ):
                    raise _Conflict from exc
                if code == "NotImplemented" or status == 501:  # server without conditional writes
                    put = client.put_object(
                        Bucket=target.bucket, Key=target.pointer_key, Body=body, ContentType=JSON,
                        CacheControl=CACHE_POINTER, Metadata={SHA_META: sha256_hex(body)},
                    )  # fmt: skip
                else:
                    raise
    except _Conflict:
        now = read_pointer(client, target)
        raise PointerConflict(
            f"{url} changed while we worked (it now names {now.release_id if now else None!r}); "
            "another publish or rollback won the race; nothing was switched — check `releases list` and rerun"
        ) from None
    after = read_pointer(client, target)
    if (
        after is None
        or after.release_id != doc["release_id"]
        or after.doc.get("published_at") != doc["published_at"]
    ):
        raise PointerConflict(
            f"{url} was overwritten by someone else right after our write; check `releases list`"
        )
    return put["ETag"]


class _Conflict(Exception):
    pass


# --- uploading -------------------------------------------------------------------


class Progress:
    """Progress reporting hook; the CLI draws a bar, tests and library use stay silent."""

    def start(self, phase: str, total: int) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def finish(self) -> None:
        pass


@dataclass
class PublishResult:
    release_id: str
    objects: int  # including the manifest
    uploaded: int = 0
    bytes_uploaded: int = 0
    already_present: int = 0
    strays_deleted: int = 0
    pointer_switched: bool = False
    previous: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def _run_pool(
    items: Iterable[Any], fn: Callable[[Any], Any], workers: int, progress: Progress
) -> list[Any]:
    """Run fn over items on a bounded pool; on the first failure cancel what has not
    started and re-raise it (in-flight calls finish: each is one whole object)."""
    items = list(items)
    results: list[Any] = [None] * len(items)
    if not items:
        return results
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures: dict[Future, int] = {pool.submit(fn, item): i for i, item in enumerate(items)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for fut in done:
                exc = fut.exception()
                if exc is not None:
                    for other in pending:
                        other.cancel()
                    raise exc
                results[futures[fut]] = fut.result()
                progress.advance()
    return results


def _put(client: Any, target: Target, release_id: str, exp: Expected, body: bytes) -> str:
    """PUT one object with all its headers; returns the MD5 hex of the body.

    Content-MD5 makes the server reject a body damaged in transit (BadDigest), which
    botocore then retries; it also costs less than botocore's default CRC trailer.
    """
    digest = hashlib.md5(body, usedforsecurity=False).digest()
    extra: dict[str, Any] = {"ContentMD5": base64.b64encode(digest).decode()}
    if exp.content_encoding:
        extra["ContentEncoding"] = exp.content_encoding
    key = target.object_key(release_id, exp.rel)
    with s3_errors(client, target.bucket, f"upload {target.url(key)}"):
        client.put_object(
            Bucket=target.bucket,
            Key=key,
            Body=body,
            ContentType=exp.content_type,
            CacheControl=exp.cache_control,
            Metadata={SHA_META: exp.sha256},
            **extra,
        )
    return digest.hex()


def _read_local(local: LocalRelease, exp: Expected) -> bytes:
    """The bytes to upload, re-checked: the tree may have changed since it was verified."""
    data = local.manifest_bytes if exp.rel == MANIFEST_NAME else (local.path / exp.rel).read_bytes()
    if len(data) != exp.size or sha256_hex(data) != exp.sha256:
        raise PublishError(
            f"{local.path / exp.rel} changed after it was checked; rebuild and publish again"
        )
    return data


def publish_release(
    client: Any,
    target: Target,
    local: LocalRelease,
    *,
    workers: int = DEFAULT_WORKERS,
    progress: Progress | None = None,
    on_uploaded: Callable[[str], None] | None = None,
    switch: bool = True,
    thorough: bool = False,
    log: Callable[[str], None] = lambda _msg: None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> PublishResult:
    """Upload what is missing or wrong, verify all of it, then switch the pointer.

    Idempotent and resumable: an object already in the bucket with the right size
    and body (listed ETag = MD5 of the local bytes; else a HEAD checking size,
    SHA-256 metadata, headers) is not uploaded again, so a rerun after an
    interruption finishes the job and a second publish of the same release uploads
    nothing and leaves the pointer alone. `on_uploaded(key)` runs in the worker after
    each PUT (tests use it to kill the upload midway).
    """
    progress = progress or Progress()
    rid = local.release_id
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    preflight(client, target)
    pointer = read_pointer(client, target)
    result = PublishResult(rid, len(local.manifest.files) + 1)

    # A complete release is immutable: never overwrite it with different content.
    manifest_key = target.object_key(rid, MANIFEST_NAME)
    with s3_errors(client, target.bucket, f"read {target.url(manifest_key)}"):
        remote_manifest = head_object(client, target.bucket, manifest_key)
    if remote_manifest is not None:
        remote_sha = {k.lower(): v for k, v in (remote_manifest.get("Metadata") or {}).items()}.get(
            SHA_META
        )
        if remote_sha != local.manifest_sha256:
            raise PublishError(
                f"release {rid} is already published at {target.url(target.release_prefix(rid))} with a "
                "different manifest; release ids are immutable: build a new release id"
            )

    listed = list_objects(client, target, target.release_prefix(rid))
    wanted = expected_objects(local.manifest)
    wanted_keys = {target.object_key(rid, e.rel) for e in wanted} | {manifest_key}
    strays = sorted(set(listed) - wanted_keys)
    times["list"] = time.perf_counter() - t0

    # Plan. An object the listing shows with the right size and an ETag equal to the
    # MD5 of the local bytes holds exactly those bytes, and was written by a PUT that
    # set all its headers at once: no need to HEAD it. Others that are present (a
    # different ETag, or one that is not an MD5: multipart, SSE-KMS) get a HEAD and
    # the full header check; `thorough` HEADs every present object.
    t = time.perf_counter()
    md5s: dict[str, str] = {}
    present: list[Expected] = []
    good: set[str] = set()
    for exp in wanted:
        obj = listed.get(target.object_key(rid, exp.rel))
        if obj is None:
            continue
        md5s[exp.rel] = hashlib.md5(_read_local(local, exp), usedforsecurity=False).hexdigest()
        if not thorough and obj.size == exp.size and obj.etag.strip('"') == md5s[exp.rel]:
            good.add(exp.rel)
        else:
            present.append(exp)

    def check_existing(exp: Expected) -> bool:
        key = target.object_key(rid, exp.rel)
        with s3_errors(client, target.bucket, f"check {target.url(key)}"):
            head = head_object(client, target.bucket, key)
        return not check_head(head, exp, md5s[exp.rel])

    progress.start("checking", len(present))
    ok = _run_pool(present, check_existing, workers, progress)
    progress.finish()
    good |= {e.rel for e, fine in zip(present, ok, strict=True) if fine}
    todo = [e for e in wanted if e.rel not in good]
    result.already_present = len(good)
    times["check"] = time.perf_counter() - t

    # Objects under the release prefix that the manifest does not list are not part
    # of the release (left by an earlier, different build of an unfinished release).
    if strays:
        log(
            f"deleting {len(strays)} object(s) under the release prefix that the manifest does not list"
        )
        _delete_keys(client, target, strays)
        result.strays_deleted = len(strays)

    t = time.perf_counter()
    lock = threading.Lock()

    def upload(exp: Expected) -> None:
        data = _read_local(local, exp)
        md5s[exp.rel] = _put(client, target, rid, exp, data)
        with lock:
            result.uploaded += 1
            result.bytes_uploaded += len(data)
        if on_uploaded is not None:
            on_uploaded(exp.rel)

    progress.start("uploading", len(todo))
    try:
        _run_pool(todo, upload, workers, progress)
    finally:
        progress.finish()
    times["upload"] = time.perf_counter() - t

    # Verify what we uploaded (what we skipped was verified by the plan). One listing
    # gives every object's size and the ETag S3 computed over the bytes it stored: where
    # that ETag is a plain MD5 equal to the local bytes', body and size are proven without
    # a request per object. The rest (multipart/KMS ETags, absent from the listing) and,
    # with `thorough`, everything gets a HEAD checking size, SHA-256 metadata and headers.
    t = time.perf_counter()

    def verify_one(exp: Expected) -> list[str]:
        key = target.object_key(rid, exp.rel)
        with s3_errors(client, target.bucket, f"verify {target.url(key)}"):
            head = head_object(client, target.bucket, key, retry_missing=True)
        return check_head(head, exp, md5s[exp.rel])

    to_head = todo
    if not thorough and todo:
        relisted = list_objects(client, target, target.release_prefix(rid))

        def proven_by_listing(exp: Expected) -> bool:
            obj = relisted.get(target.object_key(rid, exp.rel))
            return obj is not None and obj.size == exp.size and obj.etag.strip('"') == md5s[exp.rel]

        to_head = [exp for exp in todo if not proven_by_listing(exp)]

    progress.start("verifying", len(to_head))
    problems = [p for ps in _run_pool(to_head, verify_one, workers, progress) for p in ps]
    progress.finish()
    if problems:
        raise PublishError(
            f"{len(problems)} object(s) of release {rid} failed verification after upload; "
            f"the pointer was not switched; first: {problems[0]}",
            problems,
        )
    times["verify"] = time.perf_counter() - t

    # The manifest goes last: its presence marks the release complete.
    manifest_exp = Expected(
        MANIFEST_NAME, len(local.manifest_bytes), local.manifest_sha256, JSON, None
    )
    if remote_manifest is None or check_head(remote_manifest, manifest_exp):
        _put(client, target, rid, manifest_exp, local.manifest_bytes)
        result.uploaded += 1
        result.bytes_uploaded += len(local.manifest_bytes)
        with s3_errors(client, target.bucket, f"verify {target.url(manifest_key)}"):
            head = head_object(client, target.bucket, manifest_key, retry_missing=True)
        md5 = hashlib.md5(local.manifest_bytes, usedforsecurity=False).hexdigest()
        problems = check_head(head, manifest_exp, md5)
        if problems:
            raise PublishError(
                f"the manifest of {rid} failed verification: {problems[0]}", problems
            )
    else:
        result.already_present += 1

    t = time.perf_counter()
    result.previous = pointer.release_id if pointer else None
    if switch and not (
        pointer
        and pointer.release_id == rid
        and pointer.doc.get("manifest_sha256") == local.manifest_sha256
    ):
        previous = (
            pointer.release_id
            if pointer and pointer.release_id != rid
            else (pointer.previous if pointer else None)
        )
        doc = pointer_document(local.manifest, local.manifest_sha256, previous, clock())
        write_pointer(client, target, doc, pointer)
        result.pointer_switched = True
        result.previous = previous
    times["pointer"] = time.perf_counter() - t
    times["total"] = time.perf_counter() - t0
    result.seconds = times
    return result


# --- reading published releases ----------------------------------------------------


def read_remote_manifest(
    client: Any, target: Target, release_id: str
) -> tuple[Manifest, str, dict[str, Any]] | None:
    """(manifest, sha256 of its bytes, its GET headers), or None if the release has none."""
    key = target.object_key(check_release_id(release_id), MANIFEST_NAME)
    with s3_errors(client, target.bucket, f"read {target.url(key)}"):
        try:
            got = retrying(lambda: client.get_object(Bucket=target.bucket, Key=key))
        except ClientError as exc:
            if _is_missing(exc):
                return None
            raise
        raw = got["Body"].read()
    try:
        manifest = Manifest.from_bytes(raw)
    except (ValueError, KeyError) as exc:
        raise PublishError(f"{target.url(key)} is not a valid manifest: {exc}") from exc
    return manifest, sha256_hex(raw), got


def verify_remote_release(
    client: Any,
    target: Target,
    release_id: str,
    *,
    deep: bool = False,
    pointer: Pointer | None = None,
    workers: int = DEFAULT_WORKERS,
    progress: Progress | None = None,
) -> list[str]:
    """Every difference between a published release and its manifest; empty means sound.

    Checks presence, size, SHA-256 metadata, content type and encoding and cache
    policy of every object (HEAD), objects the manifest does not list, the manifest's
    own checksum, and — when `pointer` names this release — that the pointer's
    manifest checksum matches. `deep` downloads every body and hashes it, which
    catches a body overwritten behind intact metadata.
    """
    progress = progress or Progress()
    got = read_remote_manifest(client, target, release_id)
    if got is None:
        return [f"missing: {MANIFEST_NAME} (release {release_id} is incomplete or does not exist)"]
    manifest, manifest_sha, manifest_head = got
    problems: list[str] = []
    if manifest.release_id != release_id:
        problems.append(f"manifest names release {manifest.release_id!r}, not {release_id!r}")
    meta = {k.lower(): v for k, v in (manifest_head.get("Metadata") or {}).items()}
    if meta.get(SHA_META) != manifest_sha:
        problems.append(f"sha256 metadata differs: {MANIFEST_NAME}")
    if (
        pointer is not None
        and pointer.release_id == release_id
        and pointer.doc.get("manifest_sha256") != manifest_sha
    ):
        problems.append(
            f"{POINTER_NAME} names a different manifest checksum than the published {MANIFEST_NAME}"
        )

    prefix = target.release_prefix(release_id)
    listed = list_objects(client, target, prefix)
    wanted = expected_objects(manifest)
    extra = sorted(set(listed) - {prefix + e.rel for e in wanted} - {prefix + MANIFEST_NAME})
    problems += [f"not in manifest: {k[len(prefix) :]}" for k in extra]

    def check(exp: Expected) -> list[str]:
        key = prefix + exp.rel
        if key not in listed:
            return [f"missing: {exp.rel}"]
        with s3_errors(client, target.bucket, f"verify {target.url(key)}"):
            found = check_head(head_object(client, target.bucket, key), exp)
            if deep and not any(p.startswith("missing") for p in found):
                body = retrying(lambda: client.get_object(Bucket=target.bucket, Key=key))[
                    "Body"
                ].read()
                if len(body) != exp.size:
                    found.append(
                        f"body size differs: {exp.rel} ({len(body)} downloaded, {exp.size} in manifest)"
                    )
                elif sha256_hex(body) != exp.sha256:
                    found.append(f"body checksum differs: {exp.rel}")
        return found

    progress.start("verifying", len(wanted))
    try:
        problems += [p for ps in _run_pool(wanted, check, workers, progress) for p in ps]
    finally:
        progress.finish()
    return problems


@dataclass(frozen=True)
class ReleaseInfo:
    release_id: str
    objects: int  # objects found under the release prefix, manifest included
    expected: int | None  # files + manifest, from the manifest; None when it is missing
    updated_at: str | None
    last_modified: datetime
    current: bool
    previous: bool

    @property
    def complete(self) -> bool:
        return self.expected is not None and self.objects == self.expected


def list_releases(client: Any, target: Target, pointer: Pointer | None = None) -> list[ReleaseInfo]:
    """Every release prefix in the bucket, newest first (by its manifest's upload time,
    else its newest object), with object counts and the pointer's marks."""
    pointer = pointer if pointer is not None else read_pointer(client, target)
    root = target.releases_prefix
    groups: dict[str, dict[str, Listed]] = {}
    for key, obj in list_objects(client, target, root).items():
        rid, _, rest = key[len(root) :].partition("/")
        if rest:
            groups.setdefault(rid, {})[rest] = obj
    infos: list[ReleaseInfo] = []
    for rid, objs in groups.items():
        expected = updated_at = None
        if MANIFEST_NAME in objs and RELEASE_ID_RE.match(rid):
            got = read_remote_manifest(client, target, rid)
            if got is not None:
                expected, updated_at = len(got[0].files) + 1, got[0].updated_at
        stamp = (
            objs[MANIFEST_NAME].last_modified
            if MANIFEST_NAME in objs
            else max(o.last_modified for o in objs.values())
        )
        infos.append(
            ReleaseInfo(
                rid,
                len(objs),
                expected,
                updated_at,
                stamp,
                current=bool(pointer and pointer.release_id == rid),
                previous=bool(pointer and pointer.previous == rid),
            )  # fmt: skip
        )
    infos.sort(key=lambda r: (r.last_modified, r.release_id), reverse=True)
    return infos


def rollback(
    client: Any,
    target: Target,
    release_id: str,
    *,
    deep: bool = False,
    workers: int = DEFAULT_WORKERS,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> tuple[Pointer | None, dict[str, Any] | None]:
    """Point current.json at an earlier release after checking it is complete.

    Deletes nothing. Returns (pointer before, new pointer document), the latter None
    when the release was already current.
    """
    check_release_id(release_id)
    preflight(client, target)
    pointer = read_pointer(client, target)
    if pointer is not None and pointer.release_id == release_id:
        return pointer, None
    problems = verify_remote_release(client, target, release_id, deep=deep, workers=workers)
    if problems:
        raise PublishError(
            f"refusing to roll back to {release_id}: {len(problems)} problem(s), first: {problems[0]}",
            problems,
        )
    got = read_remote_manifest(client, target, release_id)
    assert got is not None  # verified just above
    manifest, sha, _ = got
    doc = pointer_document(manifest, sha, pointer.release_id if pointer else None, clock())
    write_pointer(client, target, doc, pointer)
    return pointer, doc


def _delete_keys(client: Any, target: Target, keys: list[str]) -> None:
    for i in range(0, len(keys), 1000):
        batch = keys[i : i + 1000]
        with s3_errors(
            client, target.bucket, f"delete objects under {target.url(target.releases_prefix)}"
        ):
            out = client.delete_objects(
                Bucket=target.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
            )
        errors = out.get("Errors") or []
        if errors:
            first = errors[0]
            raise PublishError(
                f"S3 at {_endpoint(client)} refused to delete {len(errors)} object(s), first "
                f"{first.get('Key')}: {first.get('Code')} {first.get('Message', '')}".rstrip()
            )


def prune_plan(releases: list[ReleaseInfo], keep: int) -> list[str]:
    """Release ids to delete: all but the `keep` newest, never the current or previous."""
    if keep < 0:
        raise PublishError("--keep must be 0 or more")
    return [r.release_id for r in releases[keep:] if not (r.current or r.previous)]


def prune(
    client: Any,
    target: Target,
    keep: int,
    *,
    dry_run: bool = False,
    log: Callable[[str], None] = lambda _m: None,
) -> list[str]:
    """Delete old releases, keeping the `keep` newest plus the current and previous.

    Each release loses its manifest first, so one interrupted mid-delete reads as
    incomplete and `rollback` refuses it. The pointer is re-read just before deleting:
    if a publish or rollback moved it meanwhile, nothing is deleted.
    """
    preflight(client, target)
    pointer = read_pointer(client, target)
    doomed = prune_plan(list_releases(client, target, pointer), keep)
    if dry_run or not doomed:
        return doomed
    again = read_pointer(client, target)
    if (again.etag if again else None) != (pointer.etag if pointer else None):
        raise PointerConflict(
            f"{target.url(target.pointer_key)} changed while pruning was planned; nothing deleted, rerun"
        )
    for rid in doomed:
        keys = sorted(list_objects(client, target, target.release_prefix(rid)))
        count = len(keys)
        manifest_key = target.object_key(rid, MANIFEST_NAME)
        if manifest_key in keys:
            _delete_keys(client, target, [manifest_key])
            keys.remove(manifest_key)
        _delete_keys(client, target, keys)
        log(f"deleted release {rid} ({count} objects)")
    return doomed
