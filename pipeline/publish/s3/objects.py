"""Objects in the bucket: listing, HEAD, deleting, and the check of one object's
headers against what the manifest promises."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from pipeline.errors import PublishError
from pipeline.publish.s3.client import S3Client, endpoint_of, is_missing, retrying, s3_errors
from pipeline.publish.s3.layout import CACHE_IMMUTABLE, SHA_META, Target

Head = dict[str, Any]  # a HeadObject/GetObject answer: headers plus "Metadata"


@dataclass(frozen=True)
class Listed:
    size: int
    etag: str
    last_modified: datetime


def list_objects(client: S3Client, target: Target, prefix: str) -> dict[str, Listed]:
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
    client: S3Client, bucket: str, key: str, *, retry_missing: bool = False
) -> Head | None:
    """The object's headers, or None when it does not exist."""
    try:
        head: Head = retrying(
            lambda: client.head_object(Bucket=bucket, Key=key), retry_missing=retry_missing
        )
        return head
    except ClientError as exc:
        if is_missing(exc):
            return None
        raise


def metadata(head: Head) -> dict[str, str]:
    """User metadata with lower-cased names (servers differ in the case they return)."""
    return {k.lower(): v for k, v in (head.get("Metadata") or {}).items()}


def delete_keys(client: S3Client, target: Target, keys: list[str]) -> None:
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
                f"S3 at {endpoint_of(client)} refused to delete {len(errors)} object(s), first "
                f"{first.get('Key')}: {first.get('Code')} {first.get('Message', '')}".rstrip()
            )


@dataclass(frozen=True)
class Expected:
    """What one object must look like in the bucket, from the manifest."""

    rel: str  # key inside the release
    size: int
    sha256: str
    content_type: str
    content_encoding: str | None
    cache_control: str = CACHE_IMMUTABLE


def check_head(head: Head | None, expected: Expected, md5: str | None = None) -> list[str]:
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
    sha = metadata(head).get(SHA_META)
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
    if md5 is not None and etag_is_md5(head) and head.get("ETag", "").strip('"') != md5:
        problems.append(f"body differs (ETag is not the MD5 of the local file): {rel}")
    return problems


def etag_is_md5(head: Head) -> bool:
    etag = str(head.get("ETag", "")).strip('"')
    encrypted = head.get("ServerSideEncryption") == "aws:kms" or head.get("SSECustomerAlgorithm")
    return bool(re.fullmatch(r"[0-9a-f]{32}", etag)) and not encrypted
