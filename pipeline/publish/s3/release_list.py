"""`releases.json` beside `current.json`: the bucket's list of kept releases (see pipeline/release/catalogue.py).

Rewritten after every switch, rollback and prune, from the list already there and the
pointer documents (which carry each release's facts and model version), so no manifest of
an earlier release is read. A release is listed only while its manifest is in the bucket.
The pointer stays the one source of which release is live: a list written late only says so
a few seconds late, and the next rewrite repairs a list that a failed write left stale.
"""

from __future__ import annotations

from typing import Any

import orjson
from botocore.exceptions import ClientError

from edge.routes import RELEASE_LIST_NAME
from pipeline.publish.s3.client import S3Client, is_missing, s3_errors
from pipeline.publish.s3.layout import CACHE_POINTER, JSON, Target
from pipeline.publish.s3.objects import head_object
from pipeline.publish.s3.pointer import Pointer
from pipeline.release import catalogue
from pipeline.release.manifest import MANIFEST_NAME


def list_key(target: Target) -> str:
    return target.key(RELEASE_LIST_NAME)


def read_list(client: S3Client, target: Target) -> dict[str, Any] | None:
    with s3_errors(client, target.bucket, f"read {target.url(list_key(target))}"):
        try:
            got = client.get_object(Bucket=target.bucket, Key=list_key(target))
        except ClientError as exc:
            if is_missing(exc):
                return None
            raise
        try:
            doc = orjson.loads(got["Body"].read())
        except orjson.JSONDecodeError:
            return None  # rebuilt from the pointers by this write
    return doc if isinstance(doc, dict) and isinstance(doc.get("releases"), list) else None


def write_list(client: S3Client, target: Target, doc: dict[str, Any]) -> None:
    with s3_errors(client, target.bucket, f"write {target.url(list_key(target))}"):
        client.put_object(Bucket=target.bucket, Key=list_key(target), Body=orjson.dumps(doc), ContentType=JSON,
                          CacheControl=CACHE_POINTER)


def _kept(client: S3Client, target: Target, ids: set[str]) -> list[str]:
    return [rid for rid in sorted(ids)
            if head_object(client, target.bucket, target.object_key(rid, MANIFEST_NAME)) is not None]


def _from_pointer(doc: dict[str, Any], before: dict[str, Any] | None) -> dict[str, Any]:
    return catalogue.record(doc["release_id"], doc.get("updated_at"), doc.get("model_version"),
                            doc.get("facts") or {}, doc.get("published_at"), before)


def after_switch(client: S3Client, target: Target, before: Pointer | None, now: dict[str, Any]) -> dict[str, Any]:
    """The list once `now` (a pointer document just written) is live; `before` was live until then."""
    existing = read_list(client, target) or catalogue.list_document([], None)
    by_id = {r["release_id"]: r for r in existing["releases"]}
    previous: dict[str, Any] | None = None
    if before is not None and before.release_id is not None:
        previous = by_id.get(before.release_id)
        if previous is None:
            previous = _from_pointer(before.doc, None)
            by_id[previous["release_id"]] = previous
    new = _from_pointer(now, previous)
    kept = _kept(client, target, set(by_id) | {now["release_id"]})
    doc = catalogue.updated_list({"releases": list(by_id.values())}, kept, now["release_id"], new)
    write_list(client, target, doc)
    return doc


def after_prune(client: S3Client, target: Target, pointer: Pointer | None, removed: list[str]) -> dict[str, Any]:
    existing = read_list(client, target) or catalogue.list_document([], None)
    ids = {r["release_id"] for r in existing["releases"]} - set(removed)
    current = pointer.release_id if pointer else None
    doc = catalogue.updated_list(existing, _kept(client, target, ids), current)
    write_list(client, target, doc)
    return doc
