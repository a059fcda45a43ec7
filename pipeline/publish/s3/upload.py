"""Publishing one release: plan → upload → verify → seal → switch.

Each phase is a function over a boto3 client; `publish_release` runs them in
order and times each. The pointer moves only in `switch`, after every object of
the release has been uploaded and verified and the manifest written last (`seal`),
so a publish that dies anywhere leaves the previous release live and untouched.

The index layout (pipeline/publish/s3/index.py): `upload` PUTs to `objects/<sha256><suffix>`, with the
file's headers, only the objects one listing of `objects/` does not show, then the release's index
(its shards, then `index.json`); `seal` writes the manifest. A month whose files are mostly unchanged
writes its new objects, its index and its manifest, and no request per path. A release already sealed
in the copy layout (1) is checked and kept as it is (its pointer says so).
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

from edge.files import INDEX_ROOT, LAYOUT_COPIES, LAYOUT_INDEX
from pipeline.errors import PublishError, SparseIncomplete
from pipeline.publish.s3.client import (
    DEFAULT_WORKERS,
    Progress,
    S3Client,
    preflight,
    run_pool,
    s3_errors,
)
from pipeline.publish.s3.index import (
    index_documents,
    index_expected,
    object_name,
    published_files,
    release_layout,
    shard_counts,
    stored_objects,
)
from pipeline.publish.s3.layout import JSON, SHA_META, Target
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
    objects: int  # what the release is in the bucket: its distinct objects, index files and manifest
    uploaded: int = 0  # PUTs with a body: new objects under objects/, the index files, the manifest
    bytes_uploaded: int = 0
    reused: int = 0  # files of the release whose bytes were already stored (no request for them)
    index_files: int = 0  # index files written
    already_present: int = 0  # of `objects`, those in place before this publish
    # Of those already present: objects trusted on the listing alone (size and body MD5
    # match), whose headers and SHA-256 metadata were NOT read. A header changed in place
    # (same body) is invisible here; `thorough` or `verify_remote_release` reads them.
    headers_unchecked: int = 0
    strays_deleted: int = 0
    layout: int = LAYOUT_INDEX
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
    objects: dict[str, Expected]  # object name (`<sha256><suffix>`) -> the object, every one the release needs
    todo: list[str]  # object names to upload
    index: list[tuple[Expected, bytes]]  # every index file (rel under the release prefix) and its bytes
    index_todo: list[tuple[Expected, bytes]]  # those to write
    already_present: int  # objects and index files in place (listing or HEAD agrees)
    headers_unchecked: int  # of those, trusted on the listing alone
    strays: list[str]  # keys under the release prefix that are not part of the release
    damaged: list[str] = field(default_factory=list)  # keys present with other bytes or headers: replaced
    md5s: dict[str, str] = field(default_factory=dict)  # object name or index rel -> MD5 hex of the bytes
    proven: set[str] = field(default_factory=set)  # written with an answer that proves the stored bytes
    layout: int = LAYOUT_INDEX  # LAYOUT_COPIES: a release sealed in the copy layout, kept as it is

    @property
    def release_id(self) -> str:
        return self.local.release_id

    @property
    def shards(self) -> dict[str, int]:
        return shard_counts(self.local.manifest.files)


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _plain_md5(etag: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-f]{32}", etag.strip('"')))


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
    its headers at once (its key fixes them): it is not HEADed (counted in
    `headers_unchecked`). Others that are present (a different ETag, or one that is not
    an MD5: multipart, SSE-KMS) get a HEAD and the full header check; `thorough` HEADs
    every present object.
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

    prefix = target.release_prefix(rid)
    listed = list_objects(client, target, prefix)
    times["list"] = time.perf_counter() - t0
    if remote_manifest is not None and release_layout(listed, prefix) == LAYOUT_COPIES:
        return _plan_copies(client, target, local, pointer, remote_manifest, listed, workers, progress, thorough)

    index = index_expected(index_documents(local.manifest))
    wanted_keys = {prefix + e.rel for e, _ in index} | {manifest_key}
    strays = sorted(set(listed) - wanted_keys)
    objects = stored_objects(published_files(local.manifest))
    md5s = {e.rel: _md5(body) for e, body in index}

    t = time.perf_counter()
    stored = {k[len(target.objects_prefix):]: o
              for k, o in list_objects(client, target, target.objects_prefix).items()}
    times["list objects"] = time.perf_counter() - t

    t = time.perf_counter()
    good: set[str] = set()
    doubtful: list[tuple[str, Expected, str]] = []  # (name, expected, key)
    for e, _ in index:
        obj = listed.get(prefix + e.rel)
        if obj is None:
            continue
        if not thorough and obj.size == e.size and obj.etag.strip('"') == md5s[e.rel]:
            good.add(e.rel)
        else:
            doubtful.append((e.rel, e, prefix + e.rel))
    absent = absent_objects(local, objects)
    missing = sorted(name for name in absent if (o := stored.get(name)) is None or o.size != objects[name].size)
    if missing:
        raise SparseIncomplete(
            f"the sparse release {rid} names {len(missing)} object(s) that the bucket does not hold "
            f"(first: objects/{missing[0]}); nothing was written", missing)
    for name, exp in objects.items():
        obj = stored.get(name)
        if obj is None:
            continue
        if name in absent:  # named by its SHA-256, listed with its size: the live release's own object
            if thorough:  # a HEAD: size, SHA-256 metadata and headers
                doubtful.append((name, dataclasses.replace(exp, rel=f"objects/{name}"), target.stored_key(name)))
            else:
                good.add(name)
            continue
        md5s[name] = local.md5(exp)
        if not thorough and obj.size == exp.size and obj.etag.strip('"') == md5s[name]:
            good.add(name)
        else:
            doubtful.append((name, dataclasses.replace(exp, rel=f"objects/{name}"), target.stored_key(name)))
    by_listing = len(good)

    def check_existing(item: tuple[str, Expected, str]) -> bool:
        name, exp, key = item
        with s3_errors(client, target.bucket, f"check {target.url(key)}"):
            head = head_object(client, target.bucket, key)
        return not check_head(head, exp, md5s.get(name))

    progress.start("checking", len(doubtful))
    ok = run_pool(doubtful, check_existing, workers, progress)
    progress.finish()
    good |= {name for (name, _, _), fine in zip(doubtful, ok, strict=True) if fine}
    if absent - good:  # a HEAD (`thorough`) found one that differs: it cannot be written from here
        bad = sorted(absent - good)
        raise SparseIncomplete(f"the sparse release {rid} names {len(bad)} object(s) that differ in the bucket "
                               f"(first: objects/{bad[0]}); nothing was written", bad)
    times["check"] = time.perf_counter() - t
    return Plan(
        local=local,
        pointer=pointer,
        remote_manifest=remote_manifest,
        objects=objects,
        todo=[name for name in objects if name not in good],
        index=index,
        index_todo=[(e, body) for e, body in index if e.rel not in good],
        already_present=len(good),
        headers_unchecked=by_listing,
        strays=strays,
        damaged=[key for name, _, key in doubtful if name not in good],
        md5s=md5s,
    )


def absent_objects(local: LocalRelease, objects: dict[str, Expected]) -> set[str]:
    """The objects of a sparse release that no file held locally provides: the bucket must have them."""
    if not local.absent:
        return set()
    held = {object_name(e) for e in published_files(local.manifest) if e.rel not in local.absent}
    return {name for name in objects if name not in held}


def _plan_copies(client: S3Client, target: Target, local: LocalRelease, pointer: Pointer | None,
                 remote_manifest: Head, listed: dict[str, Listed], workers: int, progress: Progress,
                 thorough: bool) -> Plan:
    """A release sealed in the copy layout before the index layout: kept as it is when every copy is
    sound (it stays servable and a rollback target); refused when it is not, since its copies are no
    longer made (publish the build under a new release id)."""
    rid = local.release_id
    prefix = target.release_prefix(rid)
    wanted = expected_objects(local.manifest)
    doubtful = [e for e in wanted if thorough or (o := listed.get(prefix + e.rel)) is None
                or o.size != e.size or o.etag.strip('"') != local.md5(e)]

    def check(exp: Expected) -> list[str]:
        with s3_errors(client, target.bucket, f"check {target.url(prefix + exp.rel)}"):
            return check_head(head_object(client, target.bucket, prefix + exp.rel), exp, local.md5(exp))

    progress.start("checking", len(doubtful))
    problems = [p for ps in run_pool(doubtful, check, workers, progress) for p in ps]
    progress.finish()
    extra = sorted(set(listed) - {prefix + e.rel for e in wanted} - {prefix + MANIFEST_NAME})
    problems += [f"not in manifest: {k[len(prefix):]}" for k in extra]
    if problems:
        raise PublishError(
            f"release {rid} was published in the copy layout and differs from its manifest "
            f"({len(problems)} problem(s), first: {problems[0]}); copies are no longer made: build and publish "
            "a new release id (it is published in the index layout)", problems)
    return Plan(local=local, pointer=pointer, remote_manifest=remote_manifest, objects={}, todo=[], index=[],
                index_todo=[], already_present=len(wanted), headers_unchecked=len(wanted) - len(doubtful),
                strays=[], layout=LAYOUT_COPIES)


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
    return LocalRelease(local.release_id, local.path, remote, raw, local.md5s, local.absent)


def _put(client: S3Client, target: Target, key: str, exp: Expected, body: bytes) -> tuple[str, str | None]:
    """PUT one object with all its headers, create-only (`_create`); returns the MD5 hex of the body and
    the ETag the store answered (None when the object was there already with these bytes).

    Content-MD5 makes the server reject a body damaged in transit (BadDigest), which
    botocore then retries; it also costs less than botocore's default CRC trailer.
    """
    digest = hashlib.md5(body, usedforsecurity=False).digest()
    extra: dict[str, Any] = {"ContentMD5": base64.b64encode(digest).decode()}
    if exp.content_encoding:
        extra["ContentEncoding"] = exp.content_encoding
    answered: list[str] = []

    def put(**cond: str) -> None:
        got = client.put_object(Bucket=target.bucket, Key=key, Body=body, ContentType=exp.content_type,
                                CacheControl=exp.cache_control, Metadata={SHA_META: exp.sha256}, **extra, **cond)
        answered.append(str(got.get("ETag", "")).strip('"'))

    _create(client, target, key, exp, digest.hex(), "upload", put)
    return digest.hex(), (answered[-1] if answered else None)


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
    """Delete strays and damaged keys, PUT the objects `plan.todo` names, then the index files
    (shards first, `index.json` last); the manifest is `seal`'s.

    Keys under the release prefix that are not the release's (left by an earlier, different build
    of an unfinished release, or copies of an unfinished copy-layout publish) are deleted.
    `on_uploaded(key)` runs in the worker after each PUT (`objects/<name>`, then `index/...`);
    tests use it to kill the upload midway.
    """
    progress = progress or Progress()
    if plan.strays:
        log(f"deleting {len(plan.strays)} object(s) under the release prefix that are not the release's")
        delete_keys(client, target, plan.strays)
        result.strays_deleted = len(plan.strays)
    if plan.damaged:
        # puts are create-only: a damaged object is deleted first (versioning keeps it) and written anew
        log(f"replacing {len(plan.damaged)} object(s) that differ from the manifest")
        delete_keys(client, target, plan.damaged)

    lock = threading.Lock()

    def done(name: str, md5: str, etag: str | None, size: int, hook: str) -> None:
        with lock:
            plan.md5s[name] = md5
            if etag == md5 or etag is None:  # the store's own MD5 of what it stored, or a HEAD-checked object
                plan.proven.add(name)
            result.uploaded += 1
            result.bytes_uploaded += size
        if on_uploaded is not None:
            on_uploaded(hook)

    def put_object(name: str) -> None:
        exp = plan.objects[name]
        data = plan.local.read(exp)
        md5, etag = _put(client, target, target.stored_key(name), exp, data)
        done(name, md5, etag, len(data), f"objects/{name}")

    def put_index(item: tuple[Expected, bytes]) -> None:
        exp, body = item
        md5, etag = _put(client, target, target.object_key(plan.release_id, exp.rel), exp, body)
        done(exp.rel, md5, etag, len(body), exp.rel)
        with lock:
            result.index_files += 1

    progress.start("uploading", len(plan.todo))
    try:
        run_pool(plan.todo, put_object, workers, progress)
    finally:
        progress.finish()
    shards = [i for i in plan.index_todo if i[0].rel != INDEX_ROOT]
    progress.start("indexing", len(plan.index_todo))
    try:
        run_pool(shards, put_index, workers, progress)
        run_pool([i for i in plan.index_todo if i[0].rel == INDEX_ROOT], put_index, 1, progress)
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
    """Prove every object and index file written is what the manifest says; raise if any is not.

    What the plan kept was checked there. A PUT whose answer's ETag is the MD5 of the bytes
    sent proves the stored body (the store computed it over what it stored; the headers were
    set by the same request), so it needs no request more. The rest (multipart/KMS ETags) and,
    with `thorough`, everything written gets a HEAD checking size, SHA-256 metadata and headers.
    """
    progress = progress or Progress()
    rid = plan.release_id
    items = [(name, plan.objects[name], target.stored_key(name)) for name in plan.todo]
    items += [(e.rel, e, target.object_key(rid, e.rel)) for e, _ in plan.index_todo]
    to_head = items if thorough else [i for i in items if i[0] not in plan.proven]

    def verify_one(item: tuple[str, Expected, str]) -> list[str]:
        name, exp, key = item
        with s3_errors(client, target.bucket, f"verify {target.url(key)}"):
            head = head_object(client, target.bucket, key, retry_missing=True)
        return check_head(head, exp, plan.md5s.get(name))

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
    if pointer and pointer.release_id != rid:
        previous = pointer.release_id
    else:
        previous = pointer.previous if pointer else None
    shards = plan.shards if plan.layout == LAYOUT_INDEX else None
    doc = pointer_document(local.manifest, local.manifest_sha256, previous, clock(), shards)
    if pointer and pointer.release_id == rid and pointer.manifest_sha256 == local.manifest_sha256 \
            and pointer.doc.get("shards") == doc.get("shards"):
        return False, pointer.release_id
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
    files = len(planned.local.manifest.files) if planned.layout == LAYOUT_COPIES else \
        len(published_files(planned.local.manifest))
    todo = set(planned.todo)  # once: a set made per file was quadratic (2 s for 12,000 new objects)
    result = PublishResult(
        local.release_id,
        (len(planned.objects) + len(planned.index) if planned.layout == LAYOUT_INDEX else files) + 1,
        already_present=planned.already_present,
        headers_unchecked=planned.headers_unchecked,
        reused=files - len({e.rel for e in published_files(planned.local.manifest)
                            if object_name(e) in todo}),
        layout=planned.layout,
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
