"""Publishing to S3, against a real SeaweedFS on 127.0.0.1 (tests/s3server.py).

Each test uses its own key prefix in the session's bucket, builds its own small
releases in tmp_path with the manifest helpers, and checks the bucket through a
plain boto3 client — never through the code under test alone.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from botocore.exceptions import ClientError
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.errors import PublishError
from pipeline.publish import s3
from pipeline.publish.s3 import client as s3_client
from pipeline.publish.s3.upload import _put
from pipeline.release.manifest import MANIFEST_NAME, Manifest, file_entry
from tests import s3server
from tests.s3server import S3Server

# the session's SeaweedFS and a fresh key prefix per test (fixtures of tests/s3server.py)
s3_server = s3server.s3_server
s3_prefix = s3server.s3_prefix

JSON = "application/json"
GEOJSON = "application/geo+json"


# --- a tiny release, in the renderer's format ------------------------------------


def make_release(
    root: Path, release_id: str, n: int = 4, seed: str = "", current: bool = True
) -> Path:
    """n identity JSON documents + their gzip copies + one GeoJSON + manifest.json."""
    rdir = root / "releases" / release_id
    files: dict[str, dict[str, Any]] = {}

    def write(key: str, data: bytes, ctype: str, enc: str | None = None) -> None:
        path = rdir / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        files[key] = file_entry(data, ctype, enc)

    for i in range(n):
        body = orjson.dumps({"release": release_id, "i": i, "seed": seed, "pad": "x" * (i * 37)})
        write(f"v1/risk/{i:03d}.json", body, JSON)
        write(f"v1/risk/{i:03d}.json.gz", gzip.compress(body, mtime=0), JSON, "gzip")
    write(
        "v1/boundaries/KN.geojson",
        orjson.dumps({"type": "FeatureCollection", "features": []}),
        GEOJSON,
    )
    manifest = Manifest(
        release_id, f"2024-05-01T00:00:00Z{seed}", "model-1", {"states": ["KN"]}, files
    )
    (rdir / MANIFEST_NAME).write_bytes(manifest.to_bytes())
    if current:
        link = root / "current"
        if link.is_symlink():
            link.unlink()
        link.symlink_to(Path("releases") / release_id)
    return rdir


def n_objects(n: int = 4) -> int:
    """What such a release is in the bucket: an object per JSON document (not its gzip twin: CloudFront
    compresses) and the GeoJSON, two index shards (families v1/risk and v1/boundaries) and the index
    root, the manifest."""
    return n + 1 + 3 + 1


def n_release_keys() -> int:
    return 3 + 1  # under releases/<id>/: the index files and the manifest


def object_names(manifest: Manifest) -> dict[str, s3.Expected]:
    """object name (`<sha256><suffix>`) -> the object, for every file of the release but the gzip twins."""
    return s3.stored_objects(s3.published_files(manifest))


def object_of(target: s3.Target, manifest: Manifest, rel: str) -> str:
    """The stored object a file of the release is served from."""
    e = manifest.files[rel]
    return target.stored_key(s3.object_name(s3.Expected(rel, e["size"], e["sha256"], e["content_type"],
                                                         e.get("content_encoding"))))


def count_requests(client: Any, operation: str) -> list[str]:
    """Keys of every `operation` request the client sends from now on."""
    keys: list[str] = []
    client.meta.events.register(f"before-parameter-build.s3.{operation}", lambda params, **_: keys.append(params["Key"]))
    return keys


@pytest.fixture
def target(s3_server: S3Server, s3_prefix: str) -> s3.Target:
    return s3.Target.of(s3_server.bucket, s3_prefix)


@pytest.fixture
def client(s3_server: S3Server) -> Any:
    return s3.make_client(
        s3_server.endpoint_url,
        session=_session(s3_server.access_key, s3_server.secret_key),
        max_attempts=3,
    )


def _session(access: str, secret: str) -> Any:
    import boto3

    return boto3.session.Session(
        aws_access_key_id=access, aws_secret_access_key=secret, region_name="us-east-1",
        botocore_session=s3_client.botocore_session(),
    )


def raw_client(server: S3Server) -> Any:
    return server.client()


def pointer_doc(server: S3Server, target: s3.Target) -> dict[str, Any]:
    return orjson.loads(
        raw_client(server).get_object(Bucket=target.bucket, Key=target.pointer_key)["Body"].read()
    )


def keys_under(server: S3Server, target: s3.Target, prefix: str) -> set[str]:
    c = raw_client(server)
    out: set[str] = set()
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=target.bucket, Prefix=prefix):
        out |= {o["Key"] for o in page.get("Contents", [])}
    return out


def publish(client: Any, target: s3.Target, root: Path, rid: str, **kw: Any) -> s3.PublishResult:
    return s3.publish_release(client, target, s3.open_local_release(root, rid), workers=4, **kw)


class Boom(Exception):
    pass


def dies_after(k: int, index: bool = False):
    """An on_uploaded hook that kills the upload after k objects went up (or, with `index`, after
    k index files of the release were written)."""
    count = 0
    lock = threading.Lock()

    def hook(key: str) -> None:
        nonlocal count
        if index and key.startswith("objects/"):
            return
        with lock:
            count += 1
            if count >= k:
                raise Boom(f"killed after {count} uploads")

    return hook


# --- publish ---------------------------------------------------------------------


def test_full_publish_uploads_every_object_with_headers_and_switches_pointer(
    s3_server: S3Server,
    client: Any,
    target: s3.Target,
    tmp_path: Path,
) -> None:
    rdir = make_release(tmp_path, "r1")
    result = publish(client, target, tmp_path, None)
    assert result.release_id == "r1"
    assert result.uploaded == n_objects() and result.already_present == 0
    assert result.pointer_switched and result.previous is None

    manifest = Manifest.load(rdir)
    keys = keys_under(s3_server, target, target.release_prefix("r1"))
    # no key per path: the release prefix holds its index and its manifest, the bytes are stored objects
    assert keys == {target.object_key("r1", k) for k in [*s3.index_documents(manifest), MANIFEST_NAME]}
    assert keys_under(s3_server, target, target.objects_prefix) == {
        target.stored_key(name) for name in object_names(manifest)}

    raw = raw_client(s3_server)
    published = {e.rel for e in s3.published_files(manifest)}
    assert published == {k for k in manifest.files if not k.endswith(".gz")}  # the gzip twins stay local
    for key, entry in manifest.files.items():
        if key not in published:
            continue
        head = raw.head_object(Bucket=target.bucket, Key=object_of(target, manifest, key))
        assert head["ContentLength"] == entry["size"]
        assert head["Metadata"]["sha256"] == entry["sha256"]
        assert head["ContentType"] == entry["content_type"]
        assert head.get("ContentEncoding") == entry["content_encoding"]
        assert head["CacheControl"] == "public, max-age=31536000, immutable"
    # the identity object holds the document's bytes; its gzip twin is not in the bucket
    body = raw.get_object(Bucket=target.bucket, Key=object_of(target, manifest, "v1/risk/001.json"))["Body"].read()
    assert body == (rdir / "v1/risk/001.json").read_bytes()
    assert object_of(target, manifest, "v1/risk/001.json.gz") not in keys_under(s3_server, target, target.key(""))
    # the index the edge resolves paths with maps each file key to that object, and knows no twin
    shard = orjson.loads(raw.get_object(Bucket=target.bucket, Key=target.object_key("r1", "index/v1/risk/0.json"))[
        "Body"].read())
    sha, size, suffix = shard["files"]["v1/risk/001.json"]
    assert target.stored_key(sha + suffix) == object_of(target, manifest, "v1/risk/001.json")
    assert (sha, size, suffix) == (manifest.files["v1/risk/001.json"]["sha256"],
                                   manifest.files["v1/risk/001.json"]["size"], ".json")
    assert set(shard["files"]) == {f"v1/risk/{i:03d}.json" for i in range(4)}

    doc = pointer_doc(s3_server, target)
    assert doc["release_id"] == "r1" and doc["previous"] is None
    assert doc["facts"] == {"states": ["KN"]} and doc["model_version"] == "model-1"
    assert doc["files"] == len(manifest.files)
    assert doc["layout"] == 2 and doc["shards"] == {"v1/boundaries": 1, "v1/risk": 1}
    assert doc["manifest_sha256"] == hashlib.sha256((rdir / MANIFEST_NAME).read_bytes()).hexdigest()
    head = raw.head_object(Bucket=target.bucket, Key=target.pointer_key)
    assert "max-age=10" in head["CacheControl"] and "immutable" not in head["CacheControl"]

    pointer = s3.read_pointer(client, target)
    assert s3.verify_remote_release(client, target, "r1", pointer=pointer) == []
    assert s3.verify_remote_release(client, target, "r1", deep=True, pointer=pointer) == []


def test_republish_uploads_nothing_and_leaves_pointer(
    s3_server: S3Server,
    client: Any,
    target: s3.Target,
    tmp_path: Path,
) -> None:
    make_release(tmp_path, "r1")
    publish(client, target, tmp_path, "r1")
    before = raw_client(s3_server).head_object(Bucket=target.bucket, Key=target.pointer_key)["ETag"]
    again = publish(client, target, tmp_path, "r1")
    assert again.uploaded == 0 and again.bytes_uploaded == 0
    assert again.already_present == n_objects()
    assert not again.pointer_switched
    assert (
        raw_client(s3_server).head_object(Bucket=target.bucket, Key=target.pointer_key)["ETag"]
        == before
    )


def test_the_same_release_built_again_elsewhere_publishes_nothing(
    s3_server: S3Server, client: Any, target: s3.Target, tmp_path: Path
) -> None:
    """Releases are reproducible: a build root that was not kept (the scheduled job's) builds the live
    release again with only its build time different, and its publish changes nothing in the bucket."""
    import dataclasses

    def stamped(root: Path, built_at: str) -> Path:
        rdir = make_release(root, "r1")
        m = dataclasses.replace(Manifest.load(rdir), built_at=built_at)
        (rdir / MANIFEST_NAME).write_bytes(m.to_bytes())
        return rdir

    stamped(tmp_path / "a", "2026-12-01T05:00:00Z")
    publish(client, target, tmp_path / "a", "r1")
    pointer = pointer_doc(s3_server, target)
    rdir = stamped(tmp_path / "b", "2026-12-02T05:00:00Z")
    again = publish(client, target, tmp_path / "b", "r1")
    assert (again.uploaded, again.index_files, again.pointer_switched) == (0, 0, False)
    assert again.local is not None and again.local.manifest.built_at == "2026-12-01T05:00:00Z"
    assert pointer_doc(s3_server, target) == pointer
    # anything else different is still refused: release ids are immutable
    m = Manifest.load(rdir)
    (rdir / MANIFEST_NAME).write_bytes(dataclasses.replace(m, model_version="model-2").to_bytes())
    with pytest.raises(PublishError, match="different manifest"):
        publish(client, target, tmp_path / "b", "r1")


def test_second_release_records_previous(
    s3_server: S3Server, client: Any, target: s3.Target, tmp_path: Path
) -> None:
    make_release(tmp_path, "r1")
    publish(client, target, tmp_path, "r1")
    make_release(tmp_path, "r2", seed="b")
    result = publish(client, target, tmp_path, "r2")
    assert result.pointer_switched and result.previous == "r1"
    doc = pointer_doc(s3_server, target)
    assert (doc["release_id"], doc["previous"]) == ("r2", "r1")
    # r1 is untouched by r2's upload
    assert s3.verify_remote_release(client, target, "r1", deep=True) == []


def test_interrupted_upload_keeps_previous_live_and_rerun_completes(
    s3_server: S3Server,
    client: Any,
    target: s3.Target,
    tmp_path: Path,
) -> None:
    make_release(tmp_path, "r1")
    publish(client, target, tmp_path, "r1")
    make_release(tmp_path, "r2", n=12, seed="b")

    with pytest.raises(Boom):
        publish(client, target, tmp_path, "r2", on_uploaded=dies_after(3))

    assert pointer_doc(s3_server, target)["release_id"] == "r1"
    assert s3.verify_remote_release(client, target, "r1", deep=True) == []
    stored = keys_under(s3_server, target, target.objects_prefix)
    partial = keys_under(s3_server, target, target.release_prefix("r2"))
    assert not partial  # killed while uploading objects: no release key yet
    r2 = Manifest.load(tmp_path / "releases" / "r2")
    r2_objects = {target.stored_key(name) for name in object_names(r2)}
    uploaded_before = r2_objects & stored
    assert len(uploaded_before) >= 3

    # killed again, now while writing the index: some index files exist, the manifest does not
    with pytest.raises(Boom):
        publish(client, target, tmp_path, "r2", on_uploaded=dies_after(2, index=True))
    partial = keys_under(s3_server, target, target.release_prefix("r2"))
    index_files = len(s3.index_documents(r2))
    assert 2 <= len(partial) < index_files
    assert target.object_key("r2", MANIFEST_NAME) not in partial  # the manifest goes last
    assert target.object_key("r2", "index.json") not in partial  # the index root after its shards
    problems = s3.verify_remote_release(client, target, "r2")
    assert problems and "incomplete" in problems[0]

    rerun = publish(client, target, tmp_path, "r2")
    assert rerun.already_present == len(r2_objects) + len(partial)
    # the rest of the index and the manifest: every object went up before, once
    assert rerun.uploaded == index_files - len(partial) + 1
    assert rerun.index_files == index_files - len(partial)
    assert rerun.pointer_switched and rerun.previous == "r1"
    assert s3.verify_remote_release(client, target, "r2", deep=True) == []


def test_a_new_release_uploads_only_the_bytes_the_bucket_lacks(
    s3_server: S3Server, client: Any, target: s3.Target, tmp_path: Path
) -> None:
    """Files unchanged since the live release are served from the objects already stored; only new bytes
    go up, then the release's index and manifest: no request per path, no CopyObject."""
    make_release(tmp_path, "r1", n=10)
    first = publish(client, target, tmp_path, "r1")
    assert first.uploaded == n_objects(10)
    rdir = make_release(tmp_path, "r2", n=12)  # the first 10 documents as before, 2 new ones
    m = Manifest.load(rdir)
    old = set(object_names(Manifest.load(tmp_path / "releases" / "r1")))
    new_names = set(object_names(m)) - old
    assert len(new_names) < len(m.files)
    puts = count_requests(client, "PutObject")
    copies = count_requests(client, "CopyObject")
    second = publish(client, target, tmp_path, "r2")
    index = s3.index_documents(m)
    assert second.uploaded == len(new_names) + len(index) + 1  # the new objects, the index and the manifest
    # besides the pointer and the list of kept releases, the two mutable documents
    assert sorted(puts) == sorted([*(target.stored_key(n) for n in new_names),
                                   *(target.object_key("r2", rel) for rel in index),
                                   target.object_key("r2", MANIFEST_NAME), target.pointer_key,
                                   target.key("releases.json")])
    assert copies == []  # no file of the release is a copy
    new_keys = {target.stored_key(n) for n in new_names}
    assert second.reused == sum(object_of(target, m, e.rel) not in new_keys
                                for e in s3.published_files(m)) >= 1  # the GeoJSON
    assert s3.verify_remote_release(client, target, "r2", deep=True) == []
    assert s3.verify_remote_release(client, target, "r1", deep=True) == []
    # the stored objects carry the file's headers (CloudFront serves them as they are), fixed by their key
    raw = raw_client(s3_server)
    key = object_of(target, m, "v1/risk/000.json")
    head = raw.head_object(Bucket=target.bucket, Key=key)
    assert key.endswith(".json") and head.get("ContentEncoding") is None and head["ContentType"] == JSON
    assert head["CacheControl"] == "public, max-age=31536000, immutable"
    geo = raw.head_object(Bucket=target.bucket, Key=object_of(target, m, "v1/boundaries/KN.geojson"))
    assert geo["ContentType"] == GEOJSON and geo["CacheControl"] == "public, max-age=31536000, immutable"


def test_corrupted_objects_found_by_verify_and_repaired_by_republish(
    s3_server: S3Server,
    client: Any,
    target: s3.Target,
    tmp_path: Path,
) -> None:
    rdir = make_release(tmp_path, "r1")
    publish(client, target, tmp_path, "r1")
    manifest = Manifest.load(rdir)
    raw = raw_client(s3_server)

    # 1. a body replaced behind intact headers and metadata, same size: only hashing sees it
    sneaky = "v1/risk/002.json"
    body = (rdir / sneaky).read_bytes()
    flipped = body[:-2] + (b"0" if body[-2:-1] != b"0" else b"1") + body[-1:]
    assert len(flipped) == len(body) and flipped != body
    e = manifest.files[sneaky]
    raw.put_object(
        Bucket=target.bucket, Key=object_of(target, manifest, sneaky), Body=flipped, ContentType=e["content_type"],
        CacheControl=s3.CACHE_IMMUTABLE, Metadata={"sha256": e["sha256"]},
    )  # fmt: skip
    # 2. a plain overwrite, as a careless `aws s3 cp` would do it
    careless = "v1/risk/000.json"
    raw.put_object(Bucket=target.bucket, Key=object_of(target, manifest, careless), Body=b"oops")
    # 3. an object the manifest does not list
    raw.put_object(Bucket=target.bucket, Key=target.object_key("r1", "v1/extra.json"), Body=b"{}")

    shallow = s3.verify_remote_release(client, target, "r1")
    assert not any(sneaky in p for p in shallow)
    careless_problems = [p for p in shallow if careless in p]
    kinds = {p.split(":")[0] for p in careless_problems}
    assert {
        "size differs",
        "no sha256 metadata",
        "content type differs",
        "cache control differs",
    } <= kinds
    assert "not in manifest: v1/extra.json" in shallow

    deep = s3.verify_remote_release(client, target, "r1", deep=True)
    assert f"body checksum differs: {sneaky}" in deep
    assert all(p in deep for p in shallow)

    # the CLI reports every difference and exits non-zero
    runner = CliRunner(env=s3_server.env())
    out = runner.invoke(main, ["release", "verify", "--bucket", target.bucket, "--prefix", target.prefix,
                               "--endpoint-url", s3_server.endpoint_url, "--deep"])  # fmt: skip
    assert out.exit_code == 1
    for p in deep:
        assert p in out.output

    # republishing repairs exactly the damage (the ETag exposes the sneaky body)
    fixed = publish(client, target, tmp_path, "r1")
    # the two damaged objects written anew, the stray deleted, the index untouched
    assert fixed.uploaded == 2 and fixed.index_files == 0 and fixed.strays_deleted == 1
    assert s3.verify_remote_release(client, target, "r1", deep=True) == []


def test_metadata_only_damage_needs_thorough_publish(
    s3_server: S3Server,
    client: Any,
    target: s3.Target,
    tmp_path: Path,
) -> None:
    """The quick plan trusts a listed ETag equal to the body's MD5; a header changed in
    place (same body, same ETag) is only seen by a HEAD: `verify` and `thorough`."""
    rdir = make_release(tmp_path, "r1")
    publish(client, target, tmp_path, "r1")
    key = object_of(target, Manifest.load(rdir), "v1/risk/003.json")
    raw_client(s3_server).copy_object(
        Bucket=target.bucket, Key=key, CopySource={"Bucket": target.bucket, "Key": key},
        MetadataDirective="REPLACE", ContentType="text/plain", Metadata={"sha256": "0" * 64},
    )  # fmt: skip
    quick = publish(client, target, tmp_path, "r1")
    assert quick.uploaded == 0
    # ... and says so: every object was trusted on the listing, headers unread
    assert quick.headers_unchecked == quick.already_present - 1 == n_objects() - 1
    problems = s3.verify_remote_release(client, target, "r1")
    # REPLACE drops every header not given again, Cache-Control included (S3 semantics)
    assert sorted(p.split(":")[0] for p in problems) == [
        "cache control differs", "content type differs", "sha256 metadata differs",
    ]  # fmt: skip
    thorough = publish(client, target, tmp_path, "r1", thorough=True)
    assert thorough.uploaded == 1 and thorough.index_files == 0 and thorough.headers_unchecked == 0
    assert s3.verify_remote_release(client, target, "r1") == []


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)),
       st.sampled_from(["iso-z", "iso-ms-z", "iso-offset", "http", "epoch", "naive"]))
def test_a_listing_time_is_what_botocore_would_have_parsed(when: datetime, form: str) -> None:
    """`listing_time` (the standard library's ISO parser, botocore's for the rest) gives the instant and
    the zone botocore's default parser gives, in every form S3 and its headers write a time."""
    from botocore.utils import parse_timestamp

    value: Any = {
        "iso-z": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "iso-ms-z": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
        "iso-offset": when.replace(tzinfo=UTC).isoformat(),
        "http": when.strftime("%a, %d %b %Y %H:%M:%S GMT"),
        "epoch": int(when.replace(tzinfo=UTC).timestamp()),
        "naive": when.strftime("%Y-%m-%dT%H:%M:%S"),
    }[form]
    ours, theirs = s3_client.listing_time(value), parse_timestamp(value)
    assert ours == theirs and (ours.tzinfo is None) == (theirs.tzinfo is None)
    assert ours.utcoffset() == theirs.utcoffset()


def test_the_publishers_listing_reads_the_times_a_stock_client_reads(client: Any, s3_server: S3Server,
                                                                    target: s3.Target) -> None:
    """The publisher's clients list with the fast time parser (it is wired in, not only defined), and
    every key's LastModified is the instant a stock boto3 client reads."""
    import boto3

    for n in range(3):
        client.put_object(Bucket=target.bucket, Key=f"{target.prefix}/times/{n}", Body=b"x")
    stock = boto3.session.Session().client(
        "s3", endpoint_url=s3_server.endpoint_url, aws_access_key_id=s3_server.access_key,
        aws_secret_access_key=s3_server.secret_key, region_name="us-east-1")
    ours, theirs = ({o["Key"]: o["LastModified"] for o in c.list_objects_v2(
        Bucket=target.bucket, Prefix=f"{target.prefix}/times/")["Contents"]} for c in (client, stock))
    assert len(ours) == 3 and ours == theirs
    # the stock parser answers in dateutil's zones, ours in the standard library's UTC
    assert all(t.tzinfo is UTC for t in ours.values()) and not any(t.tzinfo is UTC for t in theirs.values())


def test_only_large_uploads_wait_for_100_continue(client: Any, s3_server: S3Server, target: s3.Target) -> None:
    """The publisher's PUTs of small bodies go without `Expect: 100-continue` (one round trip each, not
    two), a large one keeps it, and both arrive whole; a stock client sends the header for any body."""
    sent: dict[str, bytes | None] = {}

    def record(request: Any, **_: Any) -> None:
        sent[request.url.rsplit("/", 1)[1]] = request.headers.get("Expect")

    stock = s3_server.client()
    for c in (client, stock):
        c.meta.events.register("before-send.s3.PutObject", record)
    small, large = b"s" * (s3_client.EXPECT_CONTINUE_FROM - 1), b"l" * s3_client.EXPECT_CONTINUE_FROM
    client.put_object(Bucket=target.bucket, Key=f"{target.prefix}/small", Body=small)
    client.put_object(Bucket=target.bucket, Key=f"{target.prefix}/large", Body=large)
    stock.put_object(Bucket=target.bucket, Key=f"{target.prefix}/stock", Body=b"x")
    assert sent == {"small": None, "large": b"100-continue", "stock": b"100-continue"}
    for key, body in (("small", small), ("large", large)):
        assert stock.get_object(Bucket=target.bucket, Key=f"{target.prefix}/{key}")["Body"].read() == body


def test_sessions_share_one_loader_of_the_service_descriptions() -> None:
    a, b = s3_client.botocore_session(), s3_client.botocore_session()
    assert a is not b and a.get_component("data_loader") is b.get_component("data_loader")


def test_release_ids_are_immutable(client: Any, target: s3.Target, tmp_path: Path) -> None:
    make_release(tmp_path, "r1")
    publish(client, target, tmp_path, "r1")
    other = tmp_path / "other"
    make_release(other, "r1", seed="different")
    with pytest.raises(s3.PublishError, match="immutable"):
        publish(client, target, other, "r1")
    assert s3.verify_remote_release(client, target, "r1", deep=True) == []


def test_stale_pointer_write_is_refused(
    s3_server: S3Server, client: Any, target: s3.Target, tmp_path: Path
) -> None:
    make_release(tmp_path, "r1")
    make_release(tmp_path, "r2", seed="b")
    publish(client, target, tmp_path, "r1")
    stale = s3.read_pointer(client, target)
    publish(client, target, tmp_path, "r2")  # another publisher wins the race
    local = s3.open_local_release(tmp_path, "r1")
    doc = s3.pointer_document(local.manifest, local.manifest_sha256, "r2", datetime.now(UTC))
    with pytest.raises(s3.PointerConflict, match="r2"):
        s3.write_pointer(client, target, doc, stale)
    assert pointer_doc(s3_server, target)["release_id"] == "r2"
    # a first publish that finds a pointer it did not expect is refused too
    with pytest.raises(s3.PointerConflict):
        s3.write_pointer(client, target, doc, None)


# --- refusing unsound trees (no server needed) ------------------------------------


def test_refuses_tree_with_unlisted_file(tmp_path: Path) -> None:
    rdir = make_release(tmp_path, "r1")
    (rdir / "keys.sqlite").write_bytes(b"SQLite format 3\x00")
    with pytest.raises(s3.PublishError, match="not in manifest: keys.sqlite"):
        s3.open_local_release(tmp_path)


def test_refuses_tree_with_bad_checksum(tmp_path: Path) -> None:
    rdir = make_release(tmp_path, "r1")
    path = rdir / "v1/risk/001.json"
    path.write_bytes(path.read_bytes().replace(b"r1", b"r9"))
    with pytest.raises(s3.PublishError) as info:
        s3.open_local_release(tmp_path, "r1")
    assert info.value.problems == ["checksum differs: v1/risk/001.json"]


def test_refuses_symlink_out_of_tree(tmp_path: Path) -> None:
    rdir = make_release(tmp_path, "r1")
    secret = tmp_path / "var" / "keys.sqlite"
    secret.parent.mkdir()
    secret.write_bytes(b"secret")
    (rdir / "v1/leak.json").symlink_to(secret)
    manifest = Manifest.load(rdir)
    files = {**manifest.files, "v1/leak.json": file_entry(b"secret", JSON)}
    leaky = Manifest(
        manifest.release_id, manifest.updated_at, manifest.model_version, manifest.facts, files
    )
    (rdir / MANIFEST_NAME).write_bytes(leaky.to_bytes())
    with pytest.raises(s3.PublishError, match="a link, not a file: v1/leak.json|outside the release"):
        s3.open_local_release(tmp_path, "r1")


def test_refuses_manifest_in_wrong_directory(tmp_path: Path) -> None:
    rdir = make_release(tmp_path, "r1", current=False)
    rdir.rename(tmp_path / "releases" / "r2")
    with pytest.raises(s3.PublishError, match="names release 'r1'"):
        s3.open_local_release(tmp_path, "r2")


@pytest.mark.parametrize("bad", ["../etc", "a/b", "", ".hidden", "x" * 200])
def test_unsafe_release_ids_rejected(bad: str) -> None:
    with pytest.raises(s3.PublishError):
        s3.check_release_id(bad)


# --- clear errors -----------------------------------------------------------------


def _cli(server: S3Server, *args: str, env: dict[str, str] | None = None) -> Any:
    runner = CliRunner(env={**server.env(), **(env or {})})
    return runner.invoke(main, list(args))


def test_wrong_secret_key_is_one_clear_line(
    s3_server: S3Server, target: s3.Target, tmp_path: Path
) -> None:
    make_release(tmp_path, "r1")
    out = _cli(s3_server, "release", "publish", "--bucket", target.bucket, "--prefix", target.prefix,
               "--endpoint-url", s3_server.endpoint_url, "--root", str(tmp_path),
               env={"AWS_SECRET_ACCESS_KEY": "not-the-secret"})  # fmt: skip
    assert out.exit_code == 1
    lines = out.output.strip().splitlines()
    assert len(lines) == 1, out.output
    assert s3_server.endpoint_url in lines[0] and "secret access key is wrong" in lines[0]
    assert "Traceback" not in out.output
    assert not keys_under(s3_server, target, target.key(""))


def test_missing_bucket_and_dead_endpoint_are_clear(s3_server: S3Server, tmp_path: Path) -> None:
    make_release(tmp_path, "r1")
    out = _cli(s3_server, "release", "publish", "--bucket", "no-such-bucket-here", "--endpoint-url", s3_server.endpoint_url,
               "--root", str(tmp_path))  # fmt: skip
    assert out.exit_code == 1
    assert "bucket 'no-such-bucket-here' does not exist at " + s3_server.endpoint_url in out.output

    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    out = _cli(s3_server, "release", "list", "--bucket", "b-x-y", "--endpoint-url", dead)
    assert out.exit_code == 1
    assert f"cannot reach S3 endpoint {dead}" in out.output and "Traceback" not in out.output


def test_missing_permission_is_clear(
    s3_server: S3Server, target: s3.Target, tmp_path: Path
) -> None:
    make_release(tmp_path, "r1")
    reader = s3.make_client(
        s3_server.endpoint_url,
        session=_session(s3server.READONLY_ACCESS_KEY, s3server.READONLY_SECRET_KEY),
    )
    with pytest.raises(s3.PublishError, match="access denied .* upload"):
        publish(reader, target, tmp_path, "r1")
    assert s3.read_pointer(reader, target) is None


# --- releases list, rollback, prune -----------------------------------------------


def test_rollback_switches_back_and_refuses_incomplete(
    s3_server: S3Server,
    client: Any,
    target: s3.Target,
    tmp_path: Path,
) -> None:
    for rid, seed in (("r1", "a"), ("r2", "b")):
        make_release(tmp_path, rid, seed=seed)
        publish(client, target, tmp_path, rid)
    before = keys_under(s3_server, target, target.releases_prefix)

    out = _cli(s3_server, "release", "rollback", "--to", "r1", "--bucket", target.bucket, "--prefix", target.prefix,
               "--endpoint-url", s3_server.endpoint_url)  # fmt: skip
    assert out.exit_code == 0, out.output
    doc = pointer_doc(s3_server, target)
    assert (doc["release_id"], doc["previous"]) == ("r1", "r2")
    assert (doc["layout"], doc["shards"]) == (2, {"v1/boundaries": 1, "v1/risk": 1})  # r1's index, for the edge
    assert keys_under(s3_server, target, target.releases_prefix) == before  # nothing deleted

    # an interrupted release cannot become current
    make_release(tmp_path, "r3", seed="c")
    with pytest.raises(Boom):
        publish(client, target, tmp_path, "r3", on_uploaded=dies_after(2, index=True))
    with pytest.raises(s3.PublishError, match="refusing to roll back to r3"):
        s3.rollback(client, target, "r3")
    with pytest.raises(s3.PublishError, match="refusing to roll back to nope"):
        s3.rollback(client, target, "nope")
    assert pointer_doc(s3_server, target)["release_id"] == "r1"

    # a damaged release cannot either
    raw_client(s3_server).delete_object(
        Bucket=target.bucket, Key=object_of(target, Manifest.load(tmp_path / "releases" / "r2"), "v1/risk/000.json")
    )
    with pytest.raises(s3.PublishError) as info:
        s3.rollback(client, target, "r2")
    assert info.value.problems == ["missing: v1/risk/000.json"]

    # rolling back to the current release changes nothing
    etag = raw_client(s3_server).head_object(Bucket=target.bucket, Key=target.pointer_key)["ETag"]
    assert s3.rollback(client, target, "r1")[1] is None
    assert (
        raw_client(s3_server).head_object(Bucket=target.bucket, Key=target.pointer_key)["ETag"]
        == etag
    )


def test_releases_list_marks_current_previous_and_counts(
    s3_server: S3Server,
    client: Any,
    target: s3.Target,
    tmp_path: Path,
) -> None:
    make_release(tmp_path, "r1", n=2, seed="a")
    publish(client, target, tmp_path, "r1")
    make_release(tmp_path, "r2", n=3, seed="b")
    publish(client, target, tmp_path, "r2")
    make_release(tmp_path, "r3", n=5, seed="c")
    with pytest.raises(Boom):
        publish(client, target, tmp_path, "r3", on_uploaded=dies_after(2, index=True))

    infos = {r.release_id: r for r in s3.list_releases(client, target)}
    assert set(infos) == {"r1", "r2", "r3"}
    assert infos["r2"].current and not infos["r2"].previous
    assert infos["r1"].previous and not infos["r1"].current
    assert (infos["r1"].objects, infos["r1"].expected, infos["r1"].complete) == (
        n_release_keys(),
    ) * 2 + (True,)
    assert (infos["r2"].objects, infos["r2"].expected) == (n_release_keys(),) * 2
    assert infos["r3"].expected is None and not infos["r3"].complete

    out = _cli(s3_server, "release", "list", "--bucket", target.bucket, "--prefix", target.prefix,
               "--endpoint-url", s3_server.endpoint_url)  # fmt: skip
    assert out.exit_code == 0, out.output
    line = {ln.split()[0]: ln for ln in out.output.splitlines()}
    assert "current" in line["r2"] and f"{n_release_keys()}/{n_release_keys()}" in line["r2"]
    assert "previous" in line["r1"] and "INCOMPLETE" in line["r3"]


def test_prune_keeps_newest_current_and_previous(
    s3_server: S3Server,
    client: Any,
    target: s3.Target,
    tmp_path: Path,
) -> None:
    for i, rid in enumerate(["r1", "r2", "r3", "r4"]):
        make_release(tmp_path, rid, n=2, seed=str(i))
        publish(client, target, tmp_path, rid)
    s3.rollback(client, target, "r2")  # current r2, previous r4
    order = [r.release_id for r in s3.list_releases(client, target)]
    assert order == ["r4", "r3", "r2", "r1"]  # newest first, by manifest upload

    assert s3.prune(client, target, 0, dry_run=True) == ["r3", "r1"]
    # a release pinned in the bucket's list (a publication cites it) is kept by the scheduled prune
    listed = orjson.loads(raw_client(s3_server).get_object(Bucket=target.bucket, Key=target.key("releases.json"))[
        "Body"].read())
    pinned = {**listed, "releases": [{**r, "pinned": r["release_id"] == "r3"} for r in listed["releases"]]}
    raw_client(s3_server).put_object(Bucket=target.bucket, Key=target.key("releases.json"), Body=orjson.dumps(pinned))
    assert s3.prune(client, target, 0, dry_run=True) == ["r1"]
    raw_client(s3_server).put_object(Bucket=target.bucket, Key=target.key("releases.json"), Body=orjson.dumps(listed))
    assert {r.release_id for r in s3.list_releases(client, target)} == {"r1", "r2", "r3", "r4"}

    out = _cli(s3_server, "release", "prune", "--keep", "0", "--bucket", target.bucket, "--prefix", target.prefix,
               "--endpoint-url", s3_server.endpoint_url)  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "r3: bundle no longer downloadable at /v1/downloads/r3/" in out.output
    assert "r1: bundle no longer downloadable at /v1/downloads/r1/" in out.output
    assert "/v1/downloads/r2/" not in out.output and "/v1/downloads/r4/" not in out.output
    assert {r.release_id for r in s3.list_releases(client, target)} == {"r2", "r4"}
    assert not keys_under(s3_server, target, target.release_prefix("r1"))
    assert s3.verify_remote_release(client, target, "r2", deep=True) == []
    assert s3.verify_remote_release(client, target, "r4", deep=True) == []
    assert pointer_doc(s3_server, target)["release_id"] == "r2"
    assert s3.prune(client, target, 0) == []


def publish_three(client: Any, target: s3.Target, root: Path) -> None:
    """Releases r1, r2 and r3 (two files each, of different bytes), published in turn: r3 current."""
    for i, rid in enumerate(["r1", "r2", "r3"]):
        make_release(root, rid, n=2, seed=str(i))
        publish(client, target, root, rid)


def test_stored_objects_go_only_when_no_kept_release_holds_them(
    s3_server: S3Server, client: Any, target: s3.Target, tmp_path: Path
) -> None:
    from datetime import timedelta

    from pipeline.publish.s3.remote import collect_objects

    publish_three(client, target, tmp_path)
    shas = {rid: set(object_names(Manifest.load(tmp_path / "releases" / rid))) for rid in ("r1", "r2", "r3")}
    before = keys_under(s3_server, target, target.objects_prefix)
    assert before == {target.stored_key(x) for x in shas["r1"] | shas["r2"] | shas["r3"]}
    assert s3.prune(client, target, 0) == ["r1"]  # current r3, previous r2
    # within the grace period nothing goes: a publish under way may rely on any stored object
    assert keys_under(s3_server, target, target.objects_prefix) == before
    later = datetime.now(UTC) + timedelta(days=2)
    gone = collect_objects(client, target, now=later)
    assert set(gone) == {target.stored_key(x) for x in shas["r1"] - shas["r2"] - shas["r3"]} and gone
    assert keys_under(s3_server, target, target.objects_prefix) == before - set(gone)
    assert s3.verify_remote_release(client, target, "r2", deep=True) == []
    make_release(tmp_path, "r4", n=2, seed="0")  # r1's documents again: their bytes go up once more; the shared GeoJSON is kept
    again = publish(client, target, tmp_path, "r4")
    assert again.uploaded == len(shas["r1"] - shas["r2"] - shas["r3"]) + again.index_files + 1
    assert again.index_files == n_release_keys() - 1


def test_cli_publish_end_to_end(s3_server: S3Server, target: s3.Target, tmp_path: Path) -> None:
    make_release(tmp_path, "r1")
    args = [
        "--bucket",
        target.bucket,
        "--prefix",
        target.prefix,
        "--endpoint-url",
        s3_server.endpoint_url,
    ]
    out = _cli(s3_server, "release", "publish", *args, "--root", str(tmp_path))
    assert out.exit_code == 0, out.output
    assert f"{n_objects()} uploaded" in out.output and "now names r1" in out.output
    again = _cli(s3_server, "release", "publish", *args, "--root", str(tmp_path))
    assert again.exit_code == 0 and " 0 uploaded" in again.output and "unchanged" in again.output
    # the quick republish says plainly what it did not check
    assert f"not checked: headers and SHA-256 metadata of the {n_objects() - 1} object(s)" in again.output
    assert "not checked" not in _cli(s3_server, "release", "publish", *args, "--root", str(tmp_path),
                                     "--thorough").output  # fmt: skip
    ok = _cli(s3_server, "release", "verify", *args, "--deep")
    assert ok.exit_code == 0 and "every object matches" in ok.output


def test_release_commands_grouped_with_old_spellings_hidden() -> None:
    runner = CliRunner()
    top = runner.invoke(main, ["--help"]).output
    assert "release" in top and "report" in top
    assert not any(line.split()[:1] in (["publish"], ["releases"], ["rollback"])
                   for line in top.splitlines())  # fmt: skip
    # verify and prune stay listed: with --root they act on a local build root, with --bucket on a bucket
    assert all(any(line.split()[:1] == [verb] for line in top.splitlines()) for verb in ("verify", "prune"))
    grouped = runner.invoke(main, ["release", "--help"]).output
    for verb in ("publish", "list", "verify", "rollback", "prune"):
        assert f"  {verb} " in grouped
        assert "Example:" in runner.invoke(main, ["release", verb, "--help"]).output
    for old in (["publish"], ["releases", "list"], ["verify"], ["rollback"], ["prune"]):
        assert runner.invoke(main, [*old, "--help"]).exit_code == 0


def test_old_spellings_still_work(s3_server: S3Server, target: s3.Target, tmp_path: Path) -> None:
    make_release(tmp_path, "r1")
    args = ["--bucket", target.bucket, "--prefix", target.prefix, "--endpoint-url", s3_server.endpoint_url]
    assert _cli(s3_server, "publish", *args, "--root", str(tmp_path)).exit_code == 0
    listed = _cli(s3_server, "releases", "list", *args)
    assert listed.exit_code == 0 and "r1" in listed.output and "current" in listed.output
    assert "every object matches" in _cli(s3_server, "verify", *args).output
    assert "already current" in _cli(s3_server, "rollback", "--to", "r1", *args).output
    assert "would delete 0" in _cli(s3_server, "prune", "--keep", "1", "--dry-run", *args).output


# --- pure rules, as properties ------------------------------------------------------

entries = st.builds(
    s3.Expected,
    rel=st.builds(
        lambda parts, gz: "v1/" + "/".join(parts) + (".json.gz" if gz else ".json"),
        st.lists(st.text("abcdefghij0123456789", min_size=1, max_size=8), min_size=1, max_size=3),
        st.booleans(),
    ),
    size=st.integers(0, 10**7),
    sha256=st.text("0123456789abcdef", min_size=64, max_size=64),
    content_type=st.sampled_from([JSON, GEOJSON]),
    content_encoding=st.sampled_from([None, "gzip"]),
)


def head_for(e: s3.Expected, md5: str) -> dict[str, Any]:
    head: dict[str, Any] = {
        "ContentLength": e.size,
        "Metadata": {"sha256": e.sha256},
        "ContentType": e.content_type,
        "CacheControl": s3.CACHE_IMMUTABLE,
        "ETag": f'"{md5}"',
    }
    if e.content_encoding:
        head["ContentEncoding"] = e.content_encoding
    return head


MD5 = st.text("0123456789abcdef", min_size=32, max_size=32)


@given(entries, MD5)
def test_matching_head_has_no_problems(e: s3.Expected, md5: str) -> None:
    assert s3.check_head(head_for(e, md5), e, md5) == []


@given(
    entries,
    MD5,
    st.sampled_from(
        ["ContentLength", "Metadata", "ContentType", "ContentEncoding", "CacheControl", "ETag"]
    ),
)
def test_any_single_difference_is_reported_once_naming_the_key(
    e: s3.Expected, md5: str, field: str
) -> None:
    head = head_for(e, md5)
    changed = {
        "ContentLength": e.size + 1,
        "Metadata": {"sha256": "0" * 64 if e.sha256 != "0" * 64 else "1" * 64},
        "ContentType": "text/plain",
        "ContentEncoding": None if e.content_encoding else "gzip",
        "CacheControl": "no-store",
        "ETag": f'"{"f" * 32 if md5 != "f" * 32 else "e" * 32}"',
    }[field]
    head[field] = changed
    problems = s3.check_head(head, e, md5)
    assert len(problems) == 1 and e.rel in problems[0]


@given(entries)
def test_multipart_or_kms_etag_is_not_taken_for_md5(e: s3.Expected) -> None:
    head = head_for(e, "a" * 32)
    head["ETag"] = '"' + "b" * 32 + '-3"'
    assert s3.check_head(head, e, "a" * 32) == []
    head["ETag"] = '"' + "b" * 32 + '"'
    head["ServerSideEncryption"] = "aws:kms"
    assert s3.check_head(head, e, "a" * 32) == []


def test_missing_object_is_one_problem() -> None:
    e = s3.Expected("v1/a.json", 1, "0" * 64, JSON, None)
    assert s3.check_head(None, e) == ["missing: v1/a.json"]


@given(st.lists(st.sampled_from(["", "a", "b", "/", "//"]), max_size=6).map("".join))
def test_target_keys_are_clean(prefix: str) -> None:
    t = s3.Target.of("bucket", prefix)
    for key in (t.pointer_key, t.object_key("r1", "v1/x.json"), t.releases_prefix):
        assert not key.startswith("/") and "//" not in key
    assert t.pointer_key.endswith("current.json")
    assert t.object_key("r1", "v1/x.json").endswith("releases/r1/v1/x.json")


@given(
    st.integers(2, 8).flatmap(
        lambda n: st.tuples(
            st.just(n), st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, 10)
        )
    )
)
def test_prune_never_touches_current_or_previous(args: tuple[int, int, int, int]) -> None:
    n, cur, prev, keep = args
    epoch = datetime(2024, 1, 1, tzinfo=UTC)
    releases = [
        s3.ReleaseInfo(
            f"r{i}", 3, 3, None, epoch, current=i == cur, previous=i == prev and i != cur
        )
        for i in range(n)
    ]
    doomed = s3.prune_plan(releases, keep)
    assert f"r{cur}" not in doomed and f"r{prev}" not in doomed
    assert not set(doomed) & {r.release_id for r in releases[:keep]}
    expected_deleted = {f"r{i}" for i in range(keep, n)} - {f"r{cur}", f"r{prev}"}
    assert set(doomed) == expected_deleted


# --- the list of kept releases beside the pointer ----------------------------------


def release_list(server: S3Server, target: s3.Target) -> dict[str, Any]:
    return orjson.loads(raw_client(server).get_object(Bucket=target.bucket, Key=target.key("releases.json"))["Body"]
                        .read())


def test_release_list_follows_publish_rollback_and_prune(
    s3_server: S3Server, client: Any, target: s3.Target, tmp_path: Path
) -> None:
    publish_three(client, target, tmp_path)
    doc = release_list(s3_server, target)
    assert doc["current"] == "r3" and [r["release_id"] for r in doc["releases"]] == ["r3", "r2", "r1"]
    assert [r["current"] for r in doc["releases"]] == [True, False, False]
    first = {r["release_id"]: r for r in doc["releases"]}
    assert first["r1"]["changes"] == ["First release in this list."]
    assert first["r3"]["model_version"] == "model-1" and first["r3"]["bundle"] == "/v1/downloads/r3/malaria_risk_nigeria.zip"
    assert first["r3"]["published_at"] == pointer_doc(s3_server, target)["published_at"]

    s3.rollback(client, target, "r1")
    doc = release_list(s3_server, target)
    assert doc["current"] == "r1" and [r["current"] for r in doc["releases"]] == [False, False, True]
    # records are written once: a rollback changes which one is current, not what they say
    assert {r["release_id"]: {**r, "current": None} for r in doc["releases"]} == \
        {k: {**r, "current": None} for k, r in first.items()}

    assert s3.prune(client, target, 0) == ["r2"]  # r1 current, r3 previous
    doc = release_list(s3_server, target)
    assert [r["release_id"] for r in doc["releases"]] == ["r3", "r1"]
    assert {r.release_id for r in s3.list_releases(client, target)} == {"r1", "r3"}


# --- release objects are create-only (If-None-Match: *) --------------------------------
# SeaweedFS honours conditional PUTs, as AWS does since 2024 (and moto too).


def _expected(rel: str, body: bytes) -> s3.Expected:
    return s3.Expected(rel, len(body), hashlib.sha256(body).hexdigest(), "application/json", None)


def test_a_create_only_upload_refuses_to_overwrite(s3_server: S3Server, client: Any,
                                                   target: s3.Target) -> None:
    first, second = b'{"v": 1}', b'{"v": 2}'
    key = target.object_key("r1", "v1/periods.json")
    _put(client, target, key, _expected("v1/periods.json", first), first)
    with pytest.raises(PublishError, match="create-only"):
        _put(client, target, key, _expected("v1/periods.json", second), second)
    assert client.get_object(Bucket=target.bucket, Key=key)["Body"].read() == first
    # the same bytes again (a retry whose first answer was lost) is not an error, and changes nothing
    _put(client, target, key, _expected("v1/periods.json", first), first)
    assert client.get_object(Bucket=target.bucket, Key=key)["Body"].read() == first
    # a stored object is create-only as well: never replaced by other bytes under its name
    exp = _expected("v1/periods.json", second)
    stored = target.stored_key(s3.object_name(exp))
    _put(client, target, stored, exp, second)
    with pytest.raises(PublishError, match="create-only"):
        _put(client, target, stored, exp, first)
    assert client.get_object(Bucket=target.bucket, Key=stored)["Body"].read() == second


def test_the_server_itself_refuses_the_conditional_put(s3_server: S3Server, client: Any,
                                                       target: s3.Target) -> None:
    """What `_put` rests on, shown without it: the second create-only PUT gets 412."""
    key = target.object_key("r2", "x.json")
    client.put_object(Bucket=target.bucket, Key=key, Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as e:
        client.put_object(Bucket=target.bucket, Key=key, Body=b"2", IfNoneMatch="*")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412


# --- each file is read once per publish -------------------------------------------------------------


def counting_reads(monkeypatch: pytest.MonkeyPatch, under: Path) -> dict[str, int]:
    """Opens for reading of files under `under` (builtins.open and io.open: Path.read_bytes too)."""
    import builtins
    import io

    counts: dict[str, int] = {}
    real = io.open
    root = str(under.resolve())

    def wrapped(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        path = str(Path(file).resolve()) if isinstance(file, str | Path) else ""
        if "r" in mode and path.startswith(root):
            counts[path[len(root) + 1:]] = counts.get(path[len(root) + 1:], 0) + 1
        return real(file, mode, *args, **kwargs)

    monkeypatch.setattr(io, "open", wrapped)
    monkeypatch.setattr(builtins, "open", wrapped)
    return counts


def test_a_publish_reads_each_file_once_and_new_bytes_once_more(
    s3_server: S3Server, client: Any, target: s3.Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.refresh import verify_published

    make_release(tmp_path, "r1", n=6)
    publish(client, target, tmp_path, "r1")
    # r2 shares r1's bytes but for the first two documents (and their gzip copies)
    import shutil

    rdir = tmp_path / "releases" / "r2"
    shutil.copytree(tmp_path / "releases" / "r1", rdir)
    for i in range(2):
        body = orjson.dumps({"release": "r2", "i": i, "new": True})
        (rdir / f"v1/risk/{i:03d}.json").write_bytes(body)
        (rdir / f"v1/risk/{i:03d}.json.gz").write_bytes(gzip.compress(body, mtime=0))
    m = Manifest.load(rdir)
    files = {**m.files}
    for i in range(2):
        for key, enc in ((f"v1/risk/{i:03d}.json", None), (f"v1/risk/{i:03d}.json.gz", "gzip")):
            files[key] = file_entry((rdir / key).read_bytes(), JSON, enc)
    import dataclasses

    (rdir / MANIFEST_NAME).write_bytes(dataclasses.replace(m, files=files, release_id="r2").to_bytes())
    reads = counting_reads(monkeypatch, tmp_path / "releases" / "r2")
    local = s3.open_local_release(tmp_path, "r2")
    result = s3.publish_release(client, target, local, workers=4)
    assert verify_published(client, target, local) == []
    monkeypatch.undo()
    data_files = {k: n for k, n in reads.items() if k != MANIFEST_NAME}
    assert set(data_files) == set(files)  # every file checked ...
    # two new objects (the gzip twins are not published), the index and the manifest; every other
    # published file's bytes were stored already
    published = len(s3.published_files(local.manifest))
    assert result.uploaded == 2 + result.index_files + 1 and result.reused == published - 2
    new = {f"v1/risk/{i:03d}.json" for i in range(2)}
    # ... once; the two files of new bytes once more, to send them (never a read to compare an ETag)
    assert {k: n for k, n in data_files.items() if n != 1} == dict.fromkeys(new, 2)

    # the same release again: one read of each file, nothing sent
    reads = counting_reads(monkeypatch, tmp_path / "releases" / "r2")
    again = publish(client, target, tmp_path, "r2")
    monkeypatch.undo()
    assert again.uploaded == again.index_files == 0
    assert set(reads.values()) == {1}


# --- releases of the copy layout (published before the index layout) ----------------------------------


def put_copy_release(server: S3Server, target: s3.Target, root: Path, rid: str) -> Manifest:
    """A release as the copy layout published it: each file a key of its own under the release prefix with
    its headers, its bytes also header-less at objects/<sha256> (the copies' source), the manifest last."""
    raw = raw_client(server)
    rdir = root / "releases" / rid
    m = Manifest.load(rdir)
    for rel, e in m.files.items():
        body = (rdir / rel).read_bytes()
        extra = {"ContentEncoding": e["content_encoding"]} if e.get("content_encoding") else {}
        raw.put_object(Bucket=target.bucket, Key=target.object_key(rid, rel), Body=body, ContentType=e["content_type"],
                       CacheControl=s3.CACHE_IMMUTABLE, Metadata={"sha256": e["sha256"]}, **extra)
        raw.put_object(Bucket=target.bucket, Key=target.content_key(e["sha256"]), Body=body,
                       ContentType="application/octet-stream", CacheControl="private, no-store",
                       Metadata={"sha256": e["sha256"]})
    body = (rdir / MANIFEST_NAME).read_bytes()
    raw.put_object(Bucket=target.bucket, Key=target.object_key(rid, MANIFEST_NAME), Body=body, ContentType=JSON,
                   CacheControl=s3.CACHE_IMMUTABLE, Metadata={"sha256": hashlib.sha256(body).hexdigest()})
    return m


def test_a_copy_layout_release_stays_verifiable_a_rollback_target_and_prunable(
    s3_server: S3Server, client: Any, target: s3.Target, tmp_path: Path
) -> None:
    from datetime import timedelta

    from pipeline.publish.s3.remote import collect_objects

    make_release(tmp_path, "r0", n=2, seed="old")
    old = put_copy_release(s3_server, target, tmp_path, "r0")
    local = s3.open_local_release(tmp_path, "r0")
    s3.write_pointer(client, target, s3.pointer_document(local.manifest, local.manifest_sha256, None,
                                                         datetime.now(UTC)), None)
    assert pointer_doc(s3_server, target)["layout"] == 1 and "shards" not in pointer_doc(s3_server, target)
    assert s3.verify_remote_release(client, target, "r0", deep=True) == []
    (info,) = s3.list_releases(client, target)
    assert (info.objects, info.expected, info.complete) == (len(old.files) + 1, len(old.files) + 1, True)
    # publishing it again (the job's build of the live release) keeps it as it is: no write at all
    puts = count_requests(client, "PutObject")
    again = publish(client, target, tmp_path, "r0")
    assert (again.uploaded, again.layout, again.pointer_switched, puts) == (0, 1, False, [])
    assert again.already_present == len(old.files) + 1

    make_release(tmp_path, "r1", n=2, seed="new")
    assert publish(client, target, tmp_path, "r1").layout == 2
    assert pointer_doc(s3_server, target)["layout"] == 2
    # back to the copy layout's release: its pointer says so (the edge maps paths to its own keys)
    s3.rollback(client, target, "r0")
    doc = pointer_doc(s3_server, target)
    assert (doc["release_id"], doc["layout"], "shards" in doc) == ("r0", 1, False)
    s3.rollback(client, target, "r1")
    make_release(tmp_path, "r2", n=2, seed="newer")
    publish(client, target, tmp_path, "r2")  # current r2, previous r1

    # a damaged copy is found, and refused rather than patched (copies are no longer made)
    raw_client(s3_server).delete_object(Bucket=target.bucket, Key=target.object_key("r0", "v1/risk/000.json"))
    assert s3.verify_remote_release(client, target, "r0") == ["missing: v1/risk/000.json"]
    with pytest.raises(PublishError, match="copy layout"):
        publish(client, target, tmp_path, "r0")

    # pruned: its keys, then (after the grace) the header-less objects only it held; the index layout's stay
    header_less = {target.content_key(e["sha256"]) for e in old.files.values()}
    kept = {target.stored_key(n) for rid in ("r1", "r2") for n in object_names(Manifest.load(tmp_path / "releases" / rid))}
    assert header_less | kept == keys_under(s3_server, target, target.objects_prefix)
    assert s3.prune(client, target, 0) == ["r0"]
    assert not keys_under(s3_server, target, target.release_prefix("r0"))
    gone = collect_objects(client, target, now=datetime.now(UTC) + timedelta(days=2))
    assert set(gone) == header_less
    assert keys_under(s3_server, target, target.objects_prefix) == kept
    assert s3.verify_remote_release(client, target, "r1", deep=True) == []
