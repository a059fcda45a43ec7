"""Publishing one release: plan → upload → verify → seal → switch.

Each phase is a function over a boto3 client; `publish_release` runs them in
order and times each. The pointer moves only in `switch`, after every object of
the release has been uploaded and verified and the manifest written last (`seal`),
so a publish that dies anywhere leaves the previous release live and untouched.

Bytes are uploaded once: `upload` PUTs to `objects/<sha256>` only what one listing of
`objects/` does not show, then makes each file of the release a server-side copy of its
object (CopyObject, no bytes sent) carrying the file's headers. A month whose files are
mostly unchanged uploads only the new ones.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from pipeline.errors import PublishError
from pipeline.publish.s3.client import (
    DEFAULT_WORKERS,
    Progress,
    S3Client,
    preflight,
    run_pool,
    s3_errors,
)
from pipeline.publish.s3.layout import CACHE_OBJECT, CONTENT_OBJECT, JSON, SHA_META, Target
from pipeline.publish.s3.local import LocalRelease, expected_objects
from pipeline.publish.s3.objects import (
    Expected,
    Head,
    Listed,
    check_head,
    delete_keys,
    head_object,
    list_objects,
    metadata,
)
from pipeline.publish.s3.pointer import Pointer, pointer_document, read_pointer, write_pointer
from pipeline.publish.s3.release_list import after_switch
from pipeline.publish.s3.remote import read_remote_manifest
from pipeline.release.manifest import MANIFEST_NAME, sha256_hex
from pipeline.window import check_window


@dataclass
class PublishResult:
    release_id: str
    objects: int  # including the manifest
    uploaded: int = 0  # PUTs with a body: new objects under objects/, and the manifest
    bytes_uploaded: int = 0
    copied: int = 0  # release files made by a server-side copy of their object (no bytes sent)
    already_present: int = 0
    # Of those already present: objects trusted on the listing alone (size and body MD5
    # match), whose headers and SHA-256 metadata were NOT read. A header changed in place
    # (same body) is invisible here; `thorough` or `verify_remote_release` reads them.
    headers_unchecked: int = 0
    strays_deleted: int = 0
    pointer_switched: bool = False
    previous: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    local: LocalRelease | None = None  # what was published (the bucket's manifest, for a release built again)


@dataclass
class Plan:
    """What is in the bucket already and what is left to do, for one release."""

    local: LocalRelease
    pointer: Pointer | None
    remote_manifest: Head | None  # HEAD of the release's manifest, if one is there
    todo: list[Expected]  # objects to upload
    already_present: int  # objects in place (listing or HEAD agrees with the manifest)
    headers_unchecked: int  # of those, trusted on the listing alone
    strays: list[str]  # keys under the release prefix that the manifest does not list
    md5s: dict[str, str] = field(default_factory=dict)  # rel -> MD5 hex of the local bytes
    damaged: list[str] = field(default_factory=list)  # keys of `todo` present with other bytes or headers
    stored: dict[str, Listed] = field(default_factory=dict)  # sha256 -> the object under objects/, as listed

    @property
    def release_id(self) -> str:
        return self.local.release_id


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def plan(
    client: S3Client,
    target: Target,
    local: LocalRelease,
    *,
    workers: int = DEFAULT_WORKERS,
    progress: Progress | None = None,
    thorough: bool = False,
    times: dict[str, float] | None = None,
    allow_shrink: bool = False,
) -> Plan:
    """Compare the bucket with the local release; refuse to touch a complete release
    whose manifest differs (release ids are immutable).

    An object the listing shows with the right size and an ETag equal to the MD5 of
    the local bytes holds exactly those bytes, and was written by a PUT that set all
    its headers at once: it is not HEADed (counted in `headers_unchecked`). Others
    that are present (a different ETag, or one that is not an MD5: multipart, SSE-KMS)
    get a HEAD and the full header check; `thorough` HEADs every present object.
    """
    progress = progress or Progress()
    times = times if times is not None else {}
    rid = local.release_id
    t0 = time.perf_counter()
    preflight(client, target)
    pointer = read_pointer(client, target)
    if pointer is not None:  # the recorded window must not move backwards (pipeline.window)
        check_window(pointer.doc.get("facts", {}).get("estimated", []), local.manifest.facts.get("estimated", []),
                     f"{target.url(target.pointer_key)} ({pointer.release_id})", allow_shrink)

    manifest_key = target.object_key(rid, MANIFEST_NAME)
    with s3_errors(client, target.bucket, f"read {target.url(manifest_key)}"):
        remote_manifest = head_object(client, target.bucket, manifest_key)
    if remote_manifest is not None and metadata(remote_manifest).get(SHA_META) != local.manifest_sha256:
        adopted = _same_release_built_again(client, target, local)
        if adopted is None:
            raise PublishError(
                f"release {rid} is already published at {target.url(target.release_prefix(rid))} with a "
                "different manifest; release ids are immutable: build a new release id"
            )
        local = adopted
        with s3_errors(client, target.bucket, f"read {target.url(manifest_key)}"):
            remote_manifest = head_object(client, target.bucket, manifest_key)

    listed = list_objects(client, target, target.release_prefix(rid))
    wanted = expected_objects(local.manifest)
    wanted_keys = {target.object_key(rid, e.rel) for e in wanted} | {manifest_key}
    strays = sorted(set(listed) - wanted_keys)
    times["list"] = time.perf_counter() - t0

    t = time.perf_counter()
    md5s: dict[str, str] = {}
    doubtful: list[Expected] = []
    good: set[str] = set()
    for exp in wanted:
        obj = listed.get(target.object_key(rid, exp.rel))
        if obj is None:
            continue
        md5s[exp.rel] = local.md5(exp)
        if not thorough and obj.size == exp.size and obj.etag.strip('"') == md5s[exp.rel]:
            good.add(exp.rel)
        else:
            doubtful.append(exp)
    by_listing = len(good)

    def check_existing(exp: Expected) -> bool:
        key = target.object_key(rid, exp.rel)
        with s3_errors(client, target.bucket, f"check {target.url(key)}"):
            head = head_object(client, target.bucket, key)
        return not check_head(head, exp, md5s[exp.rel])

    progress.start("checking", len(doubtful))
    ok = run_pool(doubtful, check_existing, workers, progress)
    progress.finish()
    good |= {e.rel for e, fine in zip(doubtful, ok, strict=True) if fine}
    times["check"] = time.perf_counter() - t
    stored: dict[str, Listed] = {}
    if len(good) < len(wanted):  # one listing of the shared objects: what needs no upload
        t = time.perf_counter()
        base = target.objects_prefix
        stored = {k[len(base):]: o for k, o in list_objects(client, target, base).items()}
        times["list objects"] = time.perf_counter() - t
    return Plan(
        stored=stored,
        local=local,
        pointer=pointer,
        remote_manifest=remote_manifest,
        todo=[e for e in wanted if e.rel not in good],
        already_present=len(good),
        headers_unchecked=by_listing,
        strays=strays,
        md5s=md5s,
        damaged=[target.object_key(rid, e.rel) for e in doubtful if e.rel not in good],
    )


def _create(client: S3Client, target: Target, key: str, exp: Expected, md5_hex: str, what: str,
            write: Callable[..., Any]) -> None:
    """Create `key` with `write(**condition)`, create-only.

    `If-None-Match: *` makes the write create-only: S3 refuses (412) to replace an object
    that exists, so nothing — a second publisher, a rerun, a mistake — overwrites an
    object of a release. A 412 for an object that holds exactly our bytes is our own
    earlier attempt (botocore retried after a lost answer) and counts as done. A server
    without conditional writes (501) gets HEAD-then-write: a second writer between the
    two calls can still be overwritten (docs/operations.md#create-only-release-objects).
    """
    url = target.url(key)
    with s3_errors(client, target.bucket, f"{what} {url}"):
        try:
            write(IfNoneMatch="*")
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                head = head_object(client, target.bucket, key)
                if head is None or check_head(head, exp, md5_hex):
                    raise PublishError(
                        f"{url} already exists with other bytes: release objects are create-only and "
                        "never overwritten (another publisher at work? `release verify` lists damage, "
                        "republishing repairs it)"
                    ) from None
            elif code == "NotImplemented" or status == 501:  # no conditional writes: HEAD, then write
                if head_object(client, target.bucket, key) is not None:
                    raise PublishError(f"{url} already exists: release objects are never overwritten") from None
                write()
            else:
                raise


def _same_release_built_again(client: S3Client, target: Target, local: LocalRelease) -> LocalRelease | None:
    """The published release when `local` is the same release built again (releases are reproducible:
    only `built_at` differs), so a build root that was not kept (the scheduled job's) republishes
    nothing; None when the two differ in anything else."""
    got = read_remote_manifest(client, target, local.release_id)
    if got is None:
        return None
    remote, sha, _ = got
    raw = remote.to_bytes()  # the renderer's own serialisation: the published bytes, checked below
    if sha256_hex(raw) != sha or \
            dataclasses.replace(remote, built_at=None) != dataclasses.replace(local.manifest, built_at=None):
        return None
    return LocalRelease(local.release_id, local.path, remote, raw, local.md5s)


def _put(client: S3Client, target: Target, key: str, exp: Expected, body: bytes) -> str:
    """PUT one object with all its headers, create-only (`_create`); returns the MD5 hex of the body.

    Content-MD5 makes the server reject a body damaged in transit (BadDigest), which
    botocore then retries; it also costs less than botocore's default CRC trailer.
    """
    digest = hashlib.md5(body, usedforsecurity=False).digest()
    extra: dict[str, Any] = {"ContentMD5": base64.b64encode(digest).decode()}
    if exp.content_encoding:
        extra["ContentEncoding"] = exp.content_encoding

    def put(**cond: str) -> None:
        client.put_object(Bucket=target.bucket, Key=key, Body=body, ContentType=exp.content_type,
                          CacheControl=exp.cache_control, Metadata={SHA_META: exp.sha256}, **extra, **cond)

    _create(client, target, key, exp, digest.hex(), "upload", put)
    return digest.hex()


def object_expected(exp: Expected) -> Expected:
    """What the shared object of a file's bytes looks like: the bytes and their SHA-256, no file headers."""
    return Expected(f"objects/{exp.sha256}", exp.size, exp.sha256, CONTENT_OBJECT, None, CACHE_OBJECT)


def _copy(client: S3Client, target: Target, release_id: str, exp: Expected, md5_hex: str) -> None:
    """The release file as a server-side copy of its object, with the file's own headers (create-only)."""
    extra: dict[str, Any] = {"ContentEncoding": exp.content_encoding} if exp.content_encoding else {}

    def copy(**cond: str) -> None:
        client.copy_object(Bucket=target.bucket, Key=target.object_key(release_id, exp.rel),
                           CopySource={"Bucket": target.bucket, "Key": target.content_key(exp.sha256)},
                           MetadataDirective="REPLACE", ContentType=exp.content_type,
                           CacheControl=exp.cache_control, Metadata={SHA_META: exp.sha256}, **extra, **cond)

    _create(client, target, target.object_key(release_id, exp.rel), exp, md5_hex, "copy", copy)


def upload(
    client: S3Client,
    target: Target,
    plan: Plan,
    result: PublishResult,
    *,
    workers: int = DEFAULT_WORKERS,
    progress: Progress | None = None,
    on_uploaded: Callable[[str], None] | None = None,
    log: Callable[[str], None] = lambda _msg: None,
) -> None:
    """Delete strays, PUT the objects `plan.todo` needs that the bucket lacks, then copy each file of
    `plan.todo` from its object (not the manifest).

    Objects under the release prefix that the manifest does not list are not part of
    the release (left by an earlier, different build of an unfinished release).
    `on_uploaded(key)` runs in the worker after each PUT (`objects/<sha256>`) and each copy
    (the key in the release); tests use it to kill the upload midway.
    """
    progress = progress or Progress()
    if plan.strays:
        log(
            f"deleting {len(plan.strays)} object(s) under the release prefix that the manifest does not list"
        )
        delete_keys(client, target, plan.strays)
        result.strays_deleted = len(plan.strays)
    if plan.damaged:
        # puts are create-only: a damaged copy is deleted first (versioning keeps it) and written anew
        log(f"replacing {len(plan.damaged)} object(s) that differ from the manifest")
        delete_keys(client, target, plan.damaged)

    lock = threading.Lock()
    new: dict[str, Expected] = {}
    damaged: list[str] = []
    for exp in plan.todo:  # each missing object once, however many files hold its bytes
        obj = plan.stored.get(exp.sha256)
        if obj is not None and obj.size == exp.size and (not re.fullmatch(r"[0-9a-f]{32}", obj.etag.strip('"'))
                                                         or obj.etag.strip('"') == plan.local.md5(exp)):
            continue
        if obj is not None and exp.sha256 not in new:
            damaged.append(target.content_key(exp.sha256))
        new.setdefault(exp.sha256, exp)
    if damaged:  # an object whose bytes are not its name's: replaced (puts are create-only)
        log(f"replacing {len(damaged)} stored object(s) whose bytes differ from their name")
        delete_keys(client, target, damaged)

    def put_one(exp: Expected) -> None:
        data = plan.local.read(exp)
        _put(client, target, target.content_key(exp.sha256), object_expected(exp), data)
        with lock:
            result.uploaded += 1
            result.bytes_uploaded += len(data)
        if on_uploaded is not None:
            on_uploaded(f"objects/{exp.sha256}")

    def copy_one(exp: Expected) -> None:
        md5 = plan.local.md5(exp)
        _copy(client, target, plan.release_id, exp, md5)
        with lock:
            plan.md5s[exp.rel] = md5
            result.copied += 1
        if on_uploaded is not None:
            on_uploaded(exp.rel)

    progress.start("uploading", len(new))
    try:
        run_pool(list(new.values()), put_one, workers, progress)
    finally:
        progress.finish()
    progress.start("copying", len(plan.todo))
    try:
        run_pool(plan.todo, copy_one, workers, progress)
    finally:
        progress.finish()


def verify(
    client: S3Client,
    target: Target,
    plan: Plan,
    *,
    workers: int = DEFAULT_WORKERS,
    progress: Progress | None = None,
    thorough: bool = False,
) -> None:
    """Prove every uploaded object is what the manifest says; raise if any is not.

    What the plan kept was checked there. One listing gives every object's size and
    the ETag S3 computed over the bytes it stored: where that ETag is a plain MD5 equal
    to the local bytes', body and size are proven without a request per object (the
    headers were set by our own PUT, in the same request). The rest (multipart/KMS
    ETags, absent from the listing) and, with `thorough`, everything gets a HEAD
    checking size, SHA-256 metadata and headers.
    """
    progress = progress or Progress()
    rid = plan.release_id

    def verify_one(exp: Expected) -> list[str]:
        key = target.object_key(rid, exp.rel)
        with s3_errors(client, target.bucket, f"verify {target.url(key)}"):
            head = head_object(client, target.bucket, key, retry_missing=True)
        return check_head(head, exp, plan.md5s[exp.rel])

    to_head = plan.todo
    if not thorough and plan.todo:
        relisted = list_objects(client, target, target.release_prefix(rid))

        def proven_by_listing(exp: Expected) -> bool:
            obj = relisted.get(target.object_key(rid, exp.rel))
            return (
                obj is not None and obj.size == exp.size and obj.etag.strip('"') == plan.md5s[exp.rel]
            )

        to_head = [exp for exp in plan.todo if not proven_by_listing(exp)]

    progress.start("verifying", len(to_head))
    problems = [p for ps in run_pool(to_head, verify_one, workers, progress) for p in ps]
    progress.finish()
    if problems:
        raise PublishError(
            f"{len(problems)} object(s) of release {rid} failed verification after upload; "
            f"the pointer was not switched; first: {problems[0]}",
            problems,
        )


def seal(client: S3Client, target: Target, plan: Plan, result: PublishResult) -> None:
    """Write the manifest last, and check it: its presence marks the release complete."""
    local = plan.local
    manifest_exp = Expected(
        MANIFEST_NAME, len(local.manifest_bytes), local.manifest_sha256, JSON, None
    )
    if plan.remote_manifest is not None and not check_head(plan.remote_manifest, manifest_exp):
        result.already_present += 1
        return
    if plan.remote_manifest is not None:  # same manifest, headers damaged: replaced (puts are create-only)
        delete_keys(client, target, [target.object_key(plan.release_id, MANIFEST_NAME)])
    _put(client, target, target.object_key(plan.release_id, MANIFEST_NAME), manifest_exp, local.manifest_bytes)
    result.uploaded += 1
    result.bytes_uploaded += len(local.manifest_bytes)
    key = target.object_key(plan.release_id, MANIFEST_NAME)
    with s3_errors(client, target.bucket, f"verify {target.url(key)}"):
        head = head_object(client, target.bucket, key, retry_missing=True)
    problems = check_head(head, manifest_exp, _md5(local.manifest_bytes))
    if problems:
        raise PublishError(
            f"the manifest of {plan.release_id} failed verification: {problems[0]}", problems
        )


def switch(
    client: S3Client,
    target: Target,
    plan: Plan,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> tuple[bool, str | None]:
    """Point current.json at the release unless it already names this very manifest.

    Returns (switched, previous release id). Republishing the live release keeps its
    `previous`, so a rollback target survives a repeated publish.
    """
    pointer, local, rid = plan.pointer, plan.local, plan.release_id
    if pointer and pointer.release_id == rid and pointer.manifest_sha256 == local.manifest_sha256:
        return False, pointer.release_id
    if pointer and pointer.release_id != rid:
        previous = pointer.release_id
    else:
        previous = pointer.previous if pointer else None
    doc = pointer_document(local.manifest, local.manifest_sha256, previous, clock())
    write_pointer(client, target, doc, pointer)
    after_switch(client, target, pointer, doc)  # the list of kept releases (GET /v1/releases)
    return True, previous


# `publish_release` takes a `switch` flag, which hides the phase of the same name.
_switch = switch


def publish_release(
    client: S3Client,
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
    allow_shrink: bool = False,
) -> PublishResult:
    """Upload what is missing or wrong, verify all of it, then switch the pointer.

    Idempotent and resumable: an object already in the bucket with the right size
    and body is not uploaded again, so a rerun after an interruption finishes the
    job and a second publish of the same release uploads nothing and leaves the
    pointer alone. Without `thorough`, objects the listing proves are not HEADed,
    so their headers and metadata go unchecked (`result.headers_unchecked` says how
    many); `verify_remote_release` or `thorough` reads them.
    """
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    planned = plan(
        client, target, local, workers=workers, progress=progress, thorough=thorough, times=times,
        allow_shrink=allow_shrink,
    )
    result = PublishResult(
        local.release_id,
        len(local.manifest.files) + 1,
        already_present=planned.already_present,
        headers_unchecked=planned.headers_unchecked,
        local=planned.local,
    )

    t = time.perf_counter()
    upload(
        client, target, planned, result,
        workers=workers, progress=progress, on_uploaded=on_uploaded, log=log,
    )  # fmt: skip
    times["upload"] = time.perf_counter() - t

    t = time.perf_counter()
    verify(client, target, planned, workers=workers, progress=progress, thorough=thorough)
    times["verify"] = time.perf_counter() - t

    seal(client, target, planned, result)

    t = time.perf_counter()
    result.previous = planned.pointer.release_id if planned.pointer else None
    if switch:
        result.pointer_switched, previous = _switch(client, target, planned, clock=clock)
        if result.pointer_switched:
            result.previous = previous
    times["pointer"] = time.perf_counter() - t
    times["total"] = time.perf_counter() - t0
    result.seconds = times
    return result
