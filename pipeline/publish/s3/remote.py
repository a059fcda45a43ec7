"""Published releases: read, verify, list, roll back to, prune."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from edge.files import INDEX_ROOT, LAYOUT_COPIES
from pipeline.errors import PointerConflict, PublishError
from pipeline.publish.s3.client import (
    DEFAULT_WORKERS,
    Progress,
    S3Client,
    is_missing,
    preflight,
    retrying,
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
from pipeline.publish.s3.layout import (
    POINTER_NAME,
    RELEASE_ID_RE,
    SHA_META,
    Target,
    check_release_id,
)
from pipeline.publish.s3.local import expected_objects
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
from pipeline.publish.s3.release_list import after_prune, after_switch, read_list
from pipeline.release.manifest import MANIFEST_NAME, Manifest, sha256_hex


def read_remote_manifest(
    client: S3Client, target: Target, release_id: str
) -> tuple[Manifest, str, Head] | None:
    """(manifest, sha256 of its bytes, its GET headers), or None if the release has none."""
    key = target.object_key(check_release_id(release_id), MANIFEST_NAME)
    with s3_errors(client, target.bucket, f"read {target.url(key)}"):
        try:
            got: Head = retrying(lambda: client.get_object(Bucket=target.bucket, Key=key))
        except ClientError as exc:
            if is_missing(exc):
                return None
            raise
        raw = got["Body"].read()
    try:
        manifest = Manifest.from_bytes(raw)
    except (ValueError, KeyError) as exc:
        raise PublishError(f"{target.url(key)} is not a valid manifest: {exc}") from exc
    return manifest, sha256_hex(raw), got


def verify_remote_release(
    client: S3Client,
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
    if metadata(manifest_head).get(SHA_META) != manifest_sha:
        problems.append(f"sha256 metadata differs: {MANIFEST_NAME}")
    if (
        pointer is not None
        and pointer.release_id == release_id
        and pointer.manifest_sha256 != manifest_sha
    ):
        problems.append(
            f"{POINTER_NAME} names a different manifest checksum than the published {MANIFEST_NAME}"
        )

    prefix = target.release_prefix(release_id)
    listed = list_objects(client, target, prefix)
    if release_layout(listed, prefix) == LAYOUT_COPIES:
        return problems + _verify_copies(client, target, manifest, prefix, listed, deep, workers, progress)
    return problems + _verify_index(client, target, manifest, prefix, listed, deep, workers, progress)


def _check_object(client: S3Client, target: Target, key: str, exp: Expected, deep: bool) -> list[str]:
    """One object against what its manifest entry promises (HEAD; with `deep` its body hashed)."""
    with s3_errors(client, target.bucket, f"verify {target.url(key)}"):
        found = check_head(head_object(client, target.bucket, key), exp)
        if deep and not any(p.startswith("missing") for p in found):
            got: Head = retrying(lambda: client.get_object(Bucket=target.bucket, Key=key))
            body = got["Body"].read()
            if len(body) != exp.size:
                found.append(f"body size differs: {exp.rel} ({len(body)} downloaded, {exp.size} in manifest)")
            elif sha256_hex(body) != exp.sha256:
                found.append(f"body checksum differs: {exp.rel}")
    return found


def _verify_copies(client: S3Client, target: Target, manifest: Manifest, prefix: str, listed: dict[str, Listed],
                   deep: bool, workers: int, progress: Progress) -> list[str]:
    """The copy layout (1): every file a key of its own under the release prefix, with its headers."""
    wanted = expected_objects(manifest)
    extra = sorted(set(listed) - {prefix + e.rel for e in wanted} - {prefix + MANIFEST_NAME})
    problems = [f"not in manifest: {k[len(prefix) :]}" for k in extra]

    def check(exp: Expected) -> list[str]:
        if prefix + exp.rel not in listed:
            return [f"missing: {exp.rel}"]
        return _check_object(client, target, prefix + exp.rel, exp, deep)

    return problems + _checked(wanted, check, workers, progress)


def _checked(items: list[Any], check: Callable[[Any], list[str]], workers: int, progress: Progress) -> list[str]:
    """Every item's problems, checked in the pool with the "verifying" progress line (both layouts)."""
    progress.start("verifying", len(items))
    try:
        return [p for ps in run_pool(items, check, workers, progress) for p in ps]
    finally:
        progress.finish()


def _verify_index(client: S3Client, target: Target, manifest: Manifest, prefix: str, listed: dict[str, Listed],
                  deep: bool, workers: int, progress: Progress) -> list[str]:
    """The index layout (2): the index files byte for byte as the manifest makes them, nothing else under
    the release prefix, and every file's object with its headers (a problem names each file it serves)."""
    docs = index_documents(manifest)
    extra = sorted(set(listed) - {prefix + rel for rel in docs} - {prefix + MANIFEST_NAME})
    problems = [f"not in manifest: {k[len(prefix) :]}" for k in extra]
    files = published_files(manifest)
    by_object: dict[str, list[Expected]] = {}
    for exp in files:
        by_object.setdefault(object_name(exp), []).append(exp)
    items: list[tuple[str, Expected, bytes | None, list[Expected]]] = [
        (prefix + e.rel, e, body, []) for e, body in index_expected(docs)]
    items += [(target.stored_key(name), exps[0], None, exps) for name, exps in sorted(by_object.items())]

    def check(item: tuple[str, Expected, bytes | None, list[Expected]]) -> list[str]:
        key, exp, body, served = item
        if body is not None:  # an index file: its bytes are known, so it is always read whole
            if key not in listed:
                return [f"missing: {exp.rel}"]
            with s3_errors(client, target.bucket, f"verify {target.url(key)}"):
                found = check_head(head_object(client, target.bucket, key), exp)
                got = retrying(lambda: client.get_object(Bucket=target.bucket, Key=key))["Body"].read()
            return found + ([] if got == body else [f"index differs from the manifest: {exp.rel}"])
        first = _check_object(client, target, key, served[0], deep)  # one request per object, however many
        return first + [p.replace(served[0].rel, one.rel, 1) for one in served[1:] for p in first]  # files

    return problems + _checked(items, check, workers, progress)


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


def list_releases(
    client: S3Client, target: Target, pointer: Pointer | None = None
) -> list[ReleaseInfo]:
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
        expected: int | None = None
        updated_at: str | None = None
        if MANIFEST_NAME in objs and RELEASE_ID_RE.match(rid):
            got = read_remote_manifest(client, target, rid)
            if got is not None:
                # the keys of the release under its prefix: a copy per file, or the index files
                index = INDEX_ROOT in objs or not any(k != MANIFEST_NAME for k in objs)
                expected = (len(index_documents(got[0])) if index else len(got[0].files)) + 1
                updated_at = got[0].updated_at
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
    client: S3Client,
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
    if got is None:  # deleted between the verification and now
        raise PublishError(f"release {release_id} lost its manifest while rolling back; nothing switched")
    manifest, sha, _ = got
    prefix = target.release_prefix(release_id)
    copies = release_layout(list_objects(client, target, prefix), prefix) == LAYOUT_COPIES
    doc = pointer_document(manifest, sha, pointer.release_id if pointer else None, clock(),
                           None if copies else shard_counts(manifest.files))
    write_pointer(client, target, doc, pointer)
    after_switch(client, target, pointer, doc)
    return pointer, doc


def prune_plan(releases: list[ReleaseInfo], keep: int, pinned: frozenset[str] = frozenset()) -> list[str]:
    """Release ids to delete: all but the `keep` newest, never the current, previous or a pinned one."""
    if keep < 0:
        raise PublishError("--keep must be 0 or more")
    return [r.release_id for r in releases[keep:] if not (r.current or r.previous or r.release_id in pinned)]


def pinned_releases(client: S3Client, target: Target) -> frozenset[str]:
    """Releases whose record in the bucket's releases.json is pinned (a publication cites them):
    the retention rule keeps them, as locally (docs/local-releases.md#retention-which-releases-are-kept)."""
    doc = read_list(client, target) or {}
    return frozenset(str(r.get("release_id")) for r in doc.get("releases", [])
                     if isinstance(r, dict) and r.get("pinned") is True)


def prune(
    client: S3Client,
    target: Target,
    keep: int,
    *,
    dry_run: bool = False,
    log: Callable[[str], None] = lambda _m: None,
) -> list[str]:
    """Delete old releases, keeping the `keep` newest plus the current, the previous and pinned ones.

    Each release loses its manifest first, so one interrupted mid-delete reads as
    incomplete and `rollback` refuses it. The pointer is re-read just before deleting:
    if a publish or rollback moved it meanwhile, nothing is deleted.
    """
    preflight(client, target)
    pointer = read_pointer(client, target)
    doomed = prune_plan(list_releases(client, target, pointer), keep, pinned_releases(client, target))
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
            delete_keys(client, target, [manifest_key])
            keys.remove(manifest_key)
        delete_keys(client, target, keys)
        log(f"deleted release {rid} ({count} objects)")
    after_prune(client, target, again, doomed)
    gone = collect_objects(client, target)
    if gone:
        log(f"deleted {len(gone)} stored object(s) no kept release holds")
    return doomed


OBJECT_GRACE = timedelta(days=1)


def collect_objects(client: S3Client, target: Target, grace: timedelta = OBJECT_GRACE,
                    now: datetime | None = None) -> list[str]:
    """Delete the stored objects (`objects/`) that no release left in the bucket holds.

    A release that has no manifest yet (a publish under way, or one that died) holds nothing
    by its manifest, so objects younger than `grace` are kept: a publish uploads its objects
    before it writes its index and seals. One listing of each prefix plus one GET per kept manifest.
    """
    now = now or datetime.now(UTC)
    root = target.releases_prefix
    listed = list_objects(client, target, root)
    rids = {key[len(root):].partition("/")[0] for key in listed}
    held: set[str] = set()
    for rid in rids:
        if not RELEASE_ID_RE.match(rid):
            continue
        got = read_remote_manifest(client, target, rid)
        if got is None:
            continue
        prefix = target.release_prefix(rid)
        mine = {k: o for k, o in listed.items() if k.startswith(prefix)}
        if release_layout(mine, prefix) == LAYOUT_COPIES:  # the header-less sources of its copies
            held |= {e["sha256"] for e in got[0].files.values()}
        else:
            held |= set(stored_objects(published_files(got[0])))
    base = target.objects_prefix
    doomed = [key for key, obj in list_objects(client, target, base).items()
              if key[len(base):] not in held and now - obj.last_modified > grace]
    delete_keys(client, target, doomed)
    return doomed
