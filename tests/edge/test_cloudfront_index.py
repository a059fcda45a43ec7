"""The Lambda@Edge adapter on releases of the index layout (docs/operations.md#what-is-in-the-bucket).

Each release here is put in the bucket by the real publisher (`pipeline.publish.s3.publish_release`)
into moto's S3 on 127.0.0.1, under the prefix the function reads, so the pointer, the index shards and
the stored objects are exactly what a publish writes. The function is built as in the bundle
(tests/edge/test_cloudfront.py's `make_edge`), its S3 calls through a proxy that can stall.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from edge.viewer_response import viewer_response
from pipeline.publish import s3 as publisher
from pipeline.release.manifest import Manifest
from pipeline.release.render import render_release
from tests.conftest import ESTIMATED, NOW, synthetic_produced

from .test_cloudfront import Edge, code, event_for, load_event, make_edge


def publish(edge: Edge, rid: str | None = None) -> publisher.PublishResult:
    """The release under edge.release_root (its current one, or `rid`) published as the job does."""
    import boto3

    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                    region_name="us-east-1")
    client = publisher.make_client(edge.s3.meta.endpoint_url, session=session, max_attempts=2)
    target = publisher.Target.of(edge.bucket, "api")
    return publisher.publish_release(client, target, publisher.open_local_release(edge.release_root, rid), workers=4)


@pytest.fixture
def edge(endpoint: str, release_root: Path) -> Iterator[Edge]:
    for e in make_edge(endpoint, release_root):
        e.s3.delete_object(Bucket=e.bucket, Key="api/current.json")  # make_edge's copy-layout pointer
        publish(e)
        e.gate.releases.ttl = 0  # read the publisher's pointer on the next request
        yield e


def body_of(edge: Edge, uri: str) -> bytes:
    return bytes(edge.s3.get_object(Bucket=edge.bucket, Key=uri.lstrip("/"))["Body"].read())


def test_a_file_is_rewritten_to_its_stored_object_with_one_shard_read(edge: Edge):
    _, key = edge.store.create("cf", ["risk_scores"], "live", now=NOW)
    rid = edge.release_id
    pointer = json.loads(edge.s3.get_object(Bucket=edge.bucket, Key="api/current.json")["Body"].read())
    assert pointer["layout"] == 2 and "v1/risk" in pointer["shards"]
    assert not [k for k in (o["Key"] for o in edge.s3.list_objects_v2(Bucket=edge.bucket, Prefix=f"api/releases/{rid}/v1/")
                                                                 .get("Contents", []))]  # no key per path

    ev = load_event("viewer-request-bearer")
    ev["Records"][0]["cf"]["request"]["headers"]["authorization"][0]["value"] = f"Bearer {key}"
    before = edge.calls()[0]
    out = edge.gate(copy.deepcopy(ev))
    # accept-encoding gzip, yet the identity object: the index layout stores no twins, CloudFront compresses
    assert out["uri"].startswith("/api/objects/") and out["uri"].endswith(".json")
    # the object named holds exactly the release file's bytes, with the headers CloudFront serves
    rel = f"v1/risk/lgas/KN/{ESTIMATED[-1]}.json"
    assert body_of(edge, out["uri"]) == (edge.release_root / "releases" / rid / rel).read_bytes()
    head = edge.s3.head_object(Bucket=edge.bucket, Key=out["uri"].lstrip("/"))
    assert head.get("ContentEncoding") is None and head["ContentType"] == "application/json"
    assert head["CacheControl"] == "public, max-age=31536000, immutable"
    assert (edge.release_root / "releases" / rid / (rel + ".gz")).is_file()  # the twin stays local
    assert out["headers"]["x-mr-file-key"][0]["value"] == rel and out["headers"]["x-mr-release-id"][0]["value"] == rid
    assert edge.calls()[0] - before == 2  # the pointer, and the one index shard of the route family
    again = edge.gate(copy.deepcopy(ev))
    assert again["uri"] == out["uri"]
    edge.gate.releases.ttl = 3600.0
    identity = edge.gate(event_for("/v1/risk/lgas", "state=KN", x_api_key=key))
    assert identity["uri"] == out["uri"]  # one object for either encoding: CloudFront caches both forms
    assert edge.calls()[0] - before == 3  # the shard is kept for the release: only the pointer re-read once more

    # the docs pages too, and the viewer-response function still gives them the docs' headers
    docs = edge.gate(event_for("/docs/"))
    assert docs["uri"].startswith("/api/objects/") and body_of(edge, docs["uri"]) == (
        edge.release_root / "releases" / rid / "docs/index.html").read_bytes()
    response = load_event("viewer-response")
    response["Records"][0]["cf"]["request"] = docs
    served = viewer_response(response)
    api = copy.deepcopy(load_event("viewer-response"))
    api["Records"][0]["cf"]["request"] = identity
    assert served["headers"]["content-security-policy"] != viewer_response(api)["headers"]["content-security-policy"]


def test_a_key_the_index_lacks_is_a_404_and_an_unreadable_shard_a_503(edge: Edge):
    _, key = edge.store.create("cf", ["risk_scores", "forecasts"], "live", now=NOW)
    rid = edge.release_id
    shard_key = f"api/releases/{rid}/index/v1/context/0.json"
    shard = orjson.loads(edge.s3.get_object(Bucket=edge.bucket, Key=shard_key)["Body"].read())
    assert "v1/context/lgas/KN.json" in shard["files"]
    del shard["files"]["v1/context/lgas/KN.json"]
    edge.s3.put_object(Bucket=edge.bucket, Key=shard_key, Body=orjson.dumps(shard))
    lacking = edge.gate(event_for("/v1/context/lgas", "state=KN", x_api_key=key))
    assert lacking["status"] == "404" and code(lacking) == "NOT_FOUND"
    assert edge.gate(event_for("/v1/context/lgas", "state=LA", x_api_key=key))["uri"].startswith("/api/objects/")

    # damaged, missing, or another release's shard: a 503, never another file
    edge.gate.releases.ttl = 3600.0
    families = json.loads(edge.s3.get_object(Bucket=edge.bucket, Key="api/current.json")["Body"].read())["shards"]
    assert "v1/forecasts" in families and "v1/periods" not in families  # /v1/periods is a file at v1/
    forecast = f"api/releases/{rid}/index/v1/forecasts/0.json"
    good = edge.s3.get_object(Bucket=edge.bucket, Key=forecast)["Body"].read()
    edge.s3.put_object(Bucket=edge.bucket, Key=forecast, Body=good[: len(good) // 2])
    torn = edge.gate(event_for("/v1/forecasts/lgas", "state=KN", x_api_key=key))
    assert torn["status"] == "503" and code(torn) == "TEMPORARILY_UNAVAILABLE"
    other = {**orjson.loads(good), "release_id": "20200101T000000Z-00000000"}
    edge.s3.put_object(Bucket=edge.bucket, Key=forecast, Body=orjson.dumps(other))
    assert code(edge.gate(event_for("/v1/forecasts/lgas", "state=KN", x_api_key=key))) == "TEMPORARILY_UNAVAILABLE"
    edge.s3.delete_object(Bucket=edge.bucket, Key=forecast)
    assert code(edge.gate(event_for("/v1/forecasts/lgas", "state=KN", x_api_key=key))) == "TEMPORARILY_UNAVAILABLE"
    # a shard that does not answer in time: a 503 within the request's deadline
    edge.s3.put_object(Bucket=edge.bucket, Key=forecast, Body=good)
    edge.s3_proxy.stall = True
    started = time.monotonic()
    stalled = edge.gate(event_for("/v1/forecasts/lgas", "state=KN", x_api_key=key))
    assert code(stalled) == "TEMPORARILY_UNAVAILABLE" and time.monotonic() - started < edge.gate.deadline + 0.5
    edge.s3_proxy.stall = False
    healed = edge.gate(event_for("/v1/forecasts/lgas", "state=KN", x_api_key=key))  # a failure is not kept
    rel = healed["headers"]["x-mr-file-key"][0]["value"]
    assert rel.startswith("v1/forecasts/lgas/KN") and body_of(edge, healed["uri"]) == (
        edge.release_root / "releases" / rid / rel).read_bytes()


def test_a_copy_layout_release_still_resolves_after_an_index_one(edge: Edge):
    """Rolling back to a release published before the index layout: its pointer has no `layout`, its
    files are keys of their own, and the same function serves them."""
    from .test_cloudfront import pointer_for

    _, key = edge.store.create("cf", ["risk_scores"], "live", now=NOW)
    rid = edge.release_id
    assert edge.gate(event_for("/v1/context/lgas", "state=KN", x_api_key=key))["uri"].startswith("/api/objects/")
    edge.publish((edge.release_root / "current").resolve())  # the copy layout's pointer (make_edge's)
    assert pointer_for((edge.release_root / "current").resolve())[0]["layout"] == 1
    out = edge.gate(event_for("/v1/context/lgas", "state=KN", x_api_key=key))
    assert out["uri"] == f"/api/releases/{rid}/v1/context/lgas/KN.json"


def test_pinned_downloads_of_an_index_release(edge: Edge):
    """A bundle file of an earlier release of the index layout resolves through that release's own
    index (found by its index.json), with the scopes its /v1/downloads document records."""
    _, key = edge.store.create("cf", ["risk_scores", "forecasts", "lga_boundaries"], "test", now=NOW)
    _, forecasts_only = edge.store.create("fc", ["forecasts"], "test", now=NOW)
    first = edge.release_id
    produced = synthetic_produced()
    produced[2].documents["/v1/periods"][()] = {"changed": True}
    second = render_release(edge.release_root, produced, "2026-11-22T11:00:00Z").release_id
    assert publish(edge, second).pointer_switched and edge.release_id == second
    edge.gate.releases.ttl = 3600.0
    auth = {"x_api_key": key, "accept_encoding": "gzip"}
    before = edge.calls()[0]
    out = edge.gate(event_for(f"/v1/downloads/{first}/gazetteer.csv", **auth))
    assert out["uri"].startswith("/api/objects/") and out["headers"]["x-mr-release-id"][0]["value"] == first
    assert out["uri"].endswith(".csv") and body_of(edge, out["uri"]) == (
        edge.release_root / "releases" / first / "downloads/gazetteer.csv").read_bytes()
    zipped = edge.gate(event_for(f"/v1/downloads/{first}/malaria_risk_nigeria.zip", **auth))
    assert body_of(edge, zipped["uri"]) == (
        edge.release_root / "releases" / first / "downloads/malaria_risk_nigeria.zip").read_bytes()
    calls = edge.calls()[0]
    edge.gate(event_for(f"/v1/downloads/{first}/README.md", **auth))
    assert edge.calls()[0] == calls and calls - before <= 6  # pointer, root, shards and downloads.json, once
    refused = edge.gate(event_for(f"/v1/downloads/{first}/gazetteer.csv", x_api_key=forecasts_only))
    assert refused["status"] == "403" and code(refused) == "SCOPE_REQUIRED"
    assert code(edge.gate(event_for("/v1/downloads/20200101T000000Z-00000000/gazetteer.csv", **auth))) == \
        "UNKNOWN_RELEASE"


def test_the_publisher_index_matches_the_manifest(edge: Edge) -> None:
    """Every file of the manifest but the gzip twins is in the shard the edge computes for it, naming its
    own bytes."""
    from edge.files import index_family, index_shard

    rid = edge.release_id
    manifest = Manifest.load(edge.release_root / "releases" / rid)
    shards = json.loads(edge.s3.get_object(Bucket=edge.bucket, Key="api/current.json")["Body"].read())["shards"]
    cache: dict[str, Any] = {}
    published = {e.rel for e in publisher.published_files(manifest)}
    assert published and len(published) < len(manifest.files)
    for rel, e in manifest.files.items():
        if rel not in published:
            continue
        fam = index_family(rel)
        name = index_shard(rel, fam, shards[fam])
        if name not in cache:
            cache[name] = orjson.loads(edge.s3.get_object(Bucket=edge.bucket, Key=f"api/releases/{rid}/{name}")
                                       ["Body"].read())["files"]
        assert cache[name][rel][:2] == [e["sha256"], e["size"]]
    assert sum(len(f) for f in cache.values()) == len(published)


def test_conditional_requests_with_cloudfronts_weak_etag_are_left_to_cloudfront(edge: Edge):
    """A compressed answer carries CloudFront's weak ETag (`W/"…"`); a revalidation sending it is
    authorised, counted, and rewritten with the validator intact, for CloudFront to answer 304."""
    _, key = edge.store.create("c", ["risk_scores"], "test", now=NOW)
    rid = edge.release_id
    etag = edge.s3.head_object(Bucket=edge.bucket, Key=edge.gate(event_for("/v1/context/lgas", "state=KN",
                                                                           x_api_key=key))["uri"].lstrip("/"))["ETag"]
    out = edge.gate(event_for("/v1/context/lgas", "state=KN", x_api_key=key, accept_encoding="gzip",
                              if_none_match=f"W/{etag}"))
    assert out["uri"].startswith("/api/objects/") and out["headers"]["if-none-match"][0]["value"] == f"W/{etag}"
    assert "x-mr-ratelimit" in out["headers"] and out["headers"]["x-mr-release-id"][0]["value"] == rid
