"""current.json: the one mutable object, switched by compare-and-swap."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from botocore.exceptions import ClientError

from edge.files import LAYOUT_COPIES, LAYOUT_INDEX
from edge.routes import DOWNLOAD_FILE, PUBLIC_PREFIX
from pipeline.errors import PointerConflict, PublishError
from pipeline.publish.s3.client import S3Client, is_missing, retrying, s3_errors
from pipeline.publish.s3.layout import CACHE_POINTER, JSON, POINTER_FORMAT, SHA_META, Target
from pipeline.release.manifest import MANIFEST_NAME, Manifest, sha256_hex


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

    @property
    def manifest_sha256(self) -> str | None:
        return self.doc.get("manifest_sha256")


def read_pointer(client: S3Client, target: Target) -> Pointer | None:
    """current.json and its ETag (for the conditional write), or None before the first publish."""
    with s3_errors(client, target.bucket, f"read {target.url(target.pointer_key)}"):
        try:
            got = retrying(lambda: client.get_object(Bucket=target.bucket, Key=target.pointer_key))
        except ClientError as exc:
            if is_missing(exc):
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
    manifest: Manifest, manifest_sha256: str, previous: str | None, published_at: datetime,
    shards: dict[str, int] | None = None,
) -> dict[str, Any]:
    """What the edge reads to know which release is live, and what it may answer.

    Carries the manifest's facts so the edge validates periods and states without
    fetching the (large) manifest, and the docs pages (`public`) and bundle files
    (`downloads`) so the edge answers 404 for a page or file the release lacks; `manifest_sha256` chains trust to the manifest.
    `shards` (route family -> index shards) marks a release of the index layout: the edge resolves each
    path through `releases/<id>/index/...` (edge/files.py); without it, the copy layout (a key per path).
    """
    layout: dict[str, Any] = ({"layout": LAYOUT_INDEX, "shards": dict(sorted(shards.items()))}
                              if shards is not None else {"layout": LAYOUT_COPIES})
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
        # the bundle's file names, so the edge answers UNKNOWN_FILE itself (not a missing object)
        "downloads": sorted(k[len(DOWNLOAD_FILE.key_prefix):] for k, e in manifest.files.items()
                            if k.startswith(DOWNLOAD_FILE.key_prefix) and not e.get("content_encoding")),
        # what a key needs to download each of them, as the manifest records it (the edge refuses
        # a file without a record to every key that lacks any scope)
        "download_scopes": {k[len(DOWNLOAD_FILE.key_prefix):]: e["scopes"] for k, e in sorted(manifest.files.items())
                            if k.startswith(DOWNLOAD_FILE.key_prefix) and not e.get("content_encoding")
                            and isinstance(e.get("scopes"), list)},
        **layout,
        "previous": previous,
        "published_at": published_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


class _Conflict(Exception):
    pass


def write_pointer(
    client: S3Client, target: Target, doc: dict[str, Any], expected: Pointer | None
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
            "another publish or rollback won the race; nothing was switched — check `release list` and rerun"
        ) from None
    after = read_pointer(client, target)
    if (
        after is None
        or after.release_id != doc["release_id"]
        or after.doc.get("published_at") != doc["published_at"]
    ):
        raise PointerConflict(
            f"{url} was overwritten by someone else right after our write; check `release list`"
        )
    etag: str = put["ETag"]
    return etag
