"""A sparse release (pipeline.release.tree.write_release with the bucket's live release as the previous
one): the scheduled job's new month in a fresh build root records the files made from unchanged inputs
instead of making them, and its publish proves their objects are in the bucket. Against the local S3
server (SeaweedFS), on the synthetic release of tests/pipeline/release/test_reuse.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from edge.release import release_ids, serving
from pipeline import buildkey
from pipeline.errors import PublishError, SparseIncomplete
from pipeline.publish import s3
from pipeline.publish.s3.index import index_documents
from pipeline.refresh import verify_published
from pipeline.release import reuse
from pipeline.release.manifest import Manifest
from pipeline.release.render import render_release
from tests import s3server
from tests.pipeline.publish.test_publish import client as client  # noqa: PLC0414 (the fixture)
from tests.pipeline.publish.test_publish import count_requests, keys_under, pointer_doc
from tests.pipeline.publish.test_publish import target as target  # noqa: PLC0414 (the fixture)
from tests.pipeline.release.test_reuse import T1, T2, _month
from tests.s3server import S3Server

s3_server = s3server.s3_server
s3_prefix = s3server.s3_prefix


def published_month(client: Any, target: s3.Target, root: Path) -> reuse.Reuse:
    """Month 1 built and published as the job's first run does; the live release as a fresh job
    container sees it: the bucket's manifest and the document keys the job saved."""
    stats = render_release(root, _month(1), T1, reuse=reuse.Reuse("code"))
    s3.publish_release(client, target, s3.open_local_release(root, stats.release_id), workers=4)
    got = s3.read_remote_manifest(client, target, stats.release_id)
    assert got is not None
    live = reuse.from_published(got[0], orjson.loads((root / reuse.KEYS_FILE).read_bytes()), "code")
    assert live.previous_id == stats.release_id and live.published
    return live


def test_a_sparse_new_month_publishes_the_release_a_full_build_publishes(
        client: Any, target: s3.Target, s3_server: S3Server, tmp_path: Path) -> None:
    live = published_month(client, target, tmp_path / "month1")
    first = set(keys_under(s3_server, target, target.objects_prefix))
    sparse = render_release(tmp_path / "job", _month(2), T2, reuse=live)
    full = render_release(tmp_path / "full", _month(2), T2)
    assert sparse.release_id == full.release_id and sparse.absent > 0 and sparse.reused > 0
    job = tmp_path / "job"
    # never a release of the root: not served, not `current`, not listed; only the job's publish opens it
    assert not (job / "current").exists() and release_ids(job) == [] and serving(job) == []
    assert buildkey.current_manifest(job) is None and reuse.load(job, "code").previous_id is None
    with pytest.raises(PublishError):
        s3.open_local_release(job, sparse.release_id)
    # its keys are recorded for the state the job saves (the next month builds on this release)
    assert orjson.loads((job / reuse.KEYS_FILE).read_bytes())["release_id"] == sparse.release_id
    local = s3.open_sparse_release(job, sparse.release_id)
    full_manifest = Manifest.load(tmp_path / "full" / "current")
    assert local.manifest.files == full_manifest.files and local.manifest.facts == full_manifest.facts
    assert len(local.absent) == sparse.absent and not any((local.path / k).exists() for k in local.absent)

    puts = count_requests(client, "PutObject")
    result = s3.publish_release(client, target, local, workers=4)
    assert result.pointer_switched and pointer_doc(s3_server, target)["release_id"] == sparse.release_id
    # only the bytes month 1 did not have went up: no object of an absent file was sent
    new = {k for k in puts if k.startswith(target.objects_prefix)}
    assert new == set(keys_under(s3_server, target, target.objects_prefix)) - first and new
    assert verify_published(client, target, local) == []
    assert s3.verify_remote_release(client, target, sparse.release_id) == []
    # the bucket now holds exactly what publishing the full build would: its manifest, its index, and every
    # file's bytes under the object the index names
    remote = s3.read_remote_manifest(client, target, sparse.release_id)
    assert remote is not None and remote[0].files == full_manifest.files
    raw = s3_server.client()
    for rel, body in index_documents(full_manifest).items():
        key = target.object_key(sparse.release_id, rel)
        assert raw.get_object(Bucket=target.bucket, Key=key)["Body"].read() == body
    release = tmp_path / "full" / "current"
    for exp in s3.published_files(full_manifest):
        got = raw.get_object(Bucket=target.bucket, Key=target.stored_key(s3.object_name(exp)))["Body"].read()
        assert got == (release / exp.rel).read_bytes(), exp.rel


def test_an_object_missing_from_the_bucket_stops_the_sparse_publish_before_it_writes(
        client: Any, target: s3.Target, s3_server: S3Server, tmp_path: Path) -> None:
    live = published_month(client, target, tmp_path / "month1")
    before = pointer_doc(s3_server, target)
    sparse = render_release(tmp_path / "job", _month(2), T2, reuse=live)
    local = s3.open_sparse_release(tmp_path / "job", sparse.release_id)
    lost = next(e for e in s3.published_files(local.manifest) if e.rel in local.absent)
    s3_server.client().delete_object(Bucket=target.bucket, Key=target.stored_key(s3.object_name(lost)))
    with pytest.raises(SparseIncomplete, match="does not hold"):
        s3.publish_release(client, target, local, workers=4)
    # nothing of the new release was written; the live one is untouched
    assert keys_under(s3_server, target, target.release_prefix(sparse.release_id)) == set()
    assert pointer_doc(s3_server, target) == before


def test_a_thorough_sparse_publish_heads_each_absent_object_and_refuses_one_that_differs(
        client: Any, target: s3.Target, s3_server: S3Server, tmp_path: Path) -> None:
    """`--thorough`: each object the job does not hold is checked by a HEAD (size, SHA-256 metadata, type),
    not taken from the listing; one of the right size but without its metadata stops the publish."""
    live = published_month(client, target, tmp_path / "month1")
    before = pointer_doc(s3_server, target)
    sparse = render_release(tmp_path / "job", _month(2), T2, reuse=live)
    local = s3.open_sparse_release(tmp_path / "job", sparse.release_id)
    lost = next(e for e in s3.published_files(local.manifest) if e.rel in local.absent)
    key = target.stored_key(s3.object_name(lost))
    raw = s3_server.client()
    body = raw.get_object(Bucket=target.bucket, Key=key)["Body"].read()
    raw.put_object(Bucket=target.bucket, Key=key, Body=body, ContentType=lost.content_type)  # no SHA-256 metadata
    heads = count_requests(client, "HeadObject")
    with pytest.raises(SparseIncomplete, match="differ in the bucket"):
        s3.publish_release(client, target, local, workers=4, thorough=True)
    assert key in heads
    assert keys_under(s3_server, target, target.release_prefix(sparse.release_id)) == set()
    assert pointer_doc(s3_server, target) == before
