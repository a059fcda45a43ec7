"""The Lambda@Edge adapter on recorded CloudFront event shapes (tests/cloudfront_events/).

S3 is replaced by a dict of objects laid out exactly as `malaria-risk publish` writes
them (pointer from `pipeline.publish.s3.pointer_document`, manifest, files); keys come
from the real SQLite store (same interface as DynamoDB, which tests/test_dynamodb.py
covers on a loopback endpoint).
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge.cloudfront import (
    MAX_GENERATED_BODY,
    PINNED_TTL,
    EdgeGate,
    PointerReleases,
    TTLKeyCache,
    request_from_event,
    viewer_response,
)
from edge.keys import hash_key
from edge.limits import Limiter, MemoryCounter
from edge.stores.sqlite import SQLiteKeyStore
from pipeline.publish.s3 import pointer_document
from pipeline.release.manifest import Manifest, sha256_hex
from pipeline.release.render import render_release
from tests.conftest import ESTIMATED, NOW, synthetic_produced
from tests.edge.structured_fields import parse_sf_list

EVENTS = Path(__file__).parent / "cloudfront_events"


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / f"{name}.json").read_text())


def event_for(path: str, query: str = "", method: str = "GET", base: str = "viewer-request",
              **headers: str) -> dict[str, Any]:
    """A recorded viewer-request event with its uri, query, method and headers replaced."""
    ev = copy.deepcopy(load_event(base))
    req = ev["Records"][0]["cf"]["request"]
    req.update(uri=path, querystring=query, method=method)
    for name, value in headers.items():
        h = name.replace("_", "-").lower()
        req["headers"][h] = [{"key": h.title(), "value": value}]
    return ev


def pointer_for(release_dir: Path) -> tuple[dict, bytes]:
    raw = (release_dir / "manifest.json").read_bytes()
    manifest = Manifest.from_bytes(raw)
    doc = pointer_document(manifest, sha256_hex(raw), None, datetime(2026, 11, 22, 11, tzinfo=UTC))
    return doc, raw


class FakeBucket:
    """`fetch(key)` over objects laid out as the publisher writes them, with a call log."""

    def __init__(self, prefix: str = ""):
        self.objects: dict[str, bytes] = {}
        self.prefix = prefix
        self.calls: list[str] = []
        self.down = False

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def publish(self, release_dir: Path) -> dict:
        pointer, raw = pointer_for(release_dir)
        self.objects[self.key(pointer["manifest"])] = raw
        self.objects[self.key("current.json")] = json.dumps(pointer).encode()
        return pointer

    def fetch(self, key: str) -> bytes:
        self.calls.append(key)
        if self.down:
            raise ConnectionError("S3 unreachable")
        return self.objects[key]


@pytest.fixture
def bucket(release_root: Path) -> FakeBucket:
    b = FakeBucket("api")
    b.publish((release_root / "current").resolve())
    return b


@pytest.fixture
def gate(bucket: FakeBucket, store: SQLiteKeyStore) -> EdgeGate:
    return EdgeGate(store, PointerReleases(bucket.fetch, "api"), Limiter(MemoryCounter()), clock=lambda: NOW)


def release_id(bucket: FakeBucket) -> str:
    return json.loads(bucket.objects["api/current.json"])["release_id"]


def code(resp: dict) -> str:
    return json.loads(resp["body"])["code"]


# --- the recorded shapes themselves ---------------------------------------------------------


def test_recorded_shapes_parse_into_gate_requests():
    req = request_from_event(load_event("viewer-request-bearer")["Records"][0]["cf"]["request"])
    assert req.method == "GET" and req.path == "/v1/risk/lgas" and req.query == "state=KN"
    assert req.headers["authorization"].startswith("Bearer svc_test_")
    assert req.headers["accept-encoding"] == "gzip, deflate, br"
    multi = event_for("/v1/periods")
    multi["Records"][0]["cf"]["request"]["headers"]["accept"].append({"key": "Accept", "value": "text/plain"})
    assert request_from_event(multi["Records"][0]["cf"]["request"]).headers["accept"] == "*/*, text/plain"


# --- authorised: the URI is rewritten ---------------------------------------------------------


def test_authorised_request_is_rewritten_to_the_release_object(gate, bucket, store, release_root):
    _, key = store.create("cf", ["risk_scores"], "live", now=NOW)
    ev = load_event("viewer-request-bearer")
    ev["Records"][0]["cf"]["request"]["headers"]["authorization"][0]["value"] = f"Bearer {key}"
    out = gate(ev)
    rid = release_id(bucket)
    # accept-encoding gzip → the precompressed object; the default period is the latest estimated month
    assert out["uri"] == f"/api/releases/{rid}/v1/risk/lgas/KN/{ESTIMATED[-1]}.json.gz"
    assert out["querystring"] == ""
    assert "authorization" not in out["headers"] and "x-api-key" not in out["headers"]
    assert out["headers"]["host"][0]["value"] == "api.example.org"
    assert parse_sf_list(out["headers"]["x-mr-ratelimit"][0]["value"])["minute"]["r"] == 59
    assert out["headers"]["x-mr-release-id"][0]["value"] == rid
    # the object named is one the release really holds
    key_in_release = out["uri"].split(f"/releases/{rid}/", 1)[1]
    assert (release_root / "releases" / rid / key_in_release).is_file()


def test_identity_encoding_and_docs_rewrite(gate, bucket, store):
    _, key = store.create("cf", ["risk_scores"], "test", now=NOW)
    out = gate(event_for("/v1/context/lgas", "state=LA", x_api_key=key))
    assert out["uri"].endswith("/v1/context/lgas/LA.json")
    docs = gate(event_for("/docs/"))
    assert docs["uri"] == f"/api/releases/{release_id(bucket)}/docs/index.html"


# --- errors are generated responses ---------------------------------------------------------


def test_each_error_is_a_generated_problem_response(gate, store):
    kid, key = store.create("cf", ["risk_scores", "forecasts"], "live", per_minute=1000, now=NOW)
    revoked_id, revoked = store.create("rv", ["risk_scores"], "live", now=NOW)
    store.revoke(revoked_id)
    bearer = f"Bearer {key}"
    cases = [
        (event_for("/v1/periods"), "401", "API_KEY_MISSING"),
        (event_for("/v1/periods", authorization="Bearer svc_live_" + "x" * 32), "401", "API_KEY_INVALID"),
        (event_for("/v1/periods", authorization=f"Bearer {revoked}"), "401", "API_KEY_REVOKED"),
        (event_for("/v1/boundaries/lgas", "state=KN", authorization=bearer), "403", "SCOPE_REQUIRED"),
        (event_for("/v1/risk/lgas", "state=ZZ", authorization=bearer), "404", "UNKNOWN_STATE"),
        (event_for("/v1/risk/states", "period=2024-13", authorization=bearer), "400", "INVALID_PERIOD"),
        (event_for("/v1/risk/states", "period=2024-03", authorization=bearer), "400", "FORECAST_PERIOD"),
        (event_for("/v1/forecasts/states", "months=9", authorization=bearer), "400", "INVALID_MONTHS"),
        (event_for("/v1/periods", "x=1", authorization=bearer), "400", "UNKNOWN_PARAMETER"),
        (event_for("/v1/%2e%2e/manifest.json", authorization=bearer), "404", "NOT_FOUND"),
        (event_for("/v1/periods", method="POST", authorization=bearer), "405", "METHOD_NOT_ALLOWED"),
    ]
    for ev, status, expected in cases:
        out = gate(ev)
        assert out["status"] == status, (expected, out)
        assert "uri" not in out  # a response, not a request
        assert out["headers"]["content-type"] == [{"key": "Content-Type", "value": "application/problem+json"}]
        assert out["headers"]["access-control-allow-origin"][0]["value"] == "*"
        assert out["bodyEncoding"] == "text" and len(out["body"].encode()) <= MAX_GENERATED_BODY
        assert code(out) == expected
        if status != "401":
            assert "ratelimit" in out["headers"] or expected in ("NOT_FOUND", "METHOD_NOT_ALLOWED")


def test_both_429s_at_the_edge(bucket, store):
    gate = EdgeGate(store, PointerReleases(bucket.fetch, "api"), Limiter(MemoryCounter()), clock=lambda: NOW)
    _, key = store.create("m", ["risk_scores"], "live", per_minute=2, monthly=3, now=NOW)

    def ev() -> dict:  # the adapter rewrites the event's request in place, so a fresh one each time
        return event_for("/v1/periods", authorization=f"Bearer {key}")

    gate(ev()), gate(ev())
    minute = gate(ev())
    assert minute["status"] == "429" and code(minute) == "RATE_LIMITED"
    assert minute["headers"]["retry-after"][0]["value"] == "60"
    later = EdgeGate(store, gate.releases, gate.limiter, clock=lambda: NOW.replace(minute=1))
    assert "uri" in later(ev())
    month = later(ev())
    assert code(month) == "MONTHLY_ALLOWANCE_EXHAUSTED" and month["headers"]["retry-after"]


def test_preflight_needs_no_key(gate):
    out = gate(load_event("viewer-request-preflight"))
    assert out["status"] == "204" and "body" not in out
    assert "x-api-key" in out["headers"]["access-control-allow-headers"][0]["value"].lower()


def test_head_errors_have_no_body(gate):
    out = gate(event_for("/v1/periods", method="HEAD"))
    assert out["status"] == "401" and "body" not in out


# --- conditional requests ----------------------------------------------------------------------


def test_304_when_the_manifest_etag_matches_else_cloudfront_decides(gate, store, release_root):
    _, key = store.create("c", ["risk_scores"], "test", now=NOW)
    ev = load_event("viewer-request-conditional")
    req = ev["Records"][0]["cf"]["request"]
    req["headers"]["x-api-key"][0]["value"] = key
    # a tag we never issued: rewrite and leave If-None-Match for CloudFront to compare with its copy
    out = gate(copy.deepcopy(ev))
    assert out["uri"].endswith("/v1/context/lgas/LA.json") and "if-none-match" in out["headers"]
    # the manifest's own tag (what the local server hands out): the function answers 304 itself
    data = (release_root / "current" / "v1/context/lgas/LA.json").read_bytes()
    req["headers"]["if-none-match"][0]["value"] = f'"{sha256_hex(data)[:32]}"'
    out = gate(ev)
    assert out["status"] == "304" and "body" not in out
    assert out["headers"]["etag"][0]["value"] == f'"{sha256_hex(data)[:32]}"'
    assert "ratelimit" in out["headers"]  # it counted


def test_viewer_response_copies_the_carried_headers():
    out = viewer_response(load_event("viewer-response"))
    assert out["status"] == "200"
    assert out["headers"]["ratelimit"] == [{"key": "RateLimit", "value": '"minute";r=59;t=30'}]
    assert out["headers"]["ratelimit-policy"][0]["value"] == '"minute";q=60;w=60'
    assert out["headers"]["x-release-id"][0]["value"] == "20261122T100000Z-abc"
    assert out["headers"]["etag"][0]["value"].startswith('"')


# --- pointer and key caches ----------------------------------------------------------------


def test_pointer_is_reread_after_its_ttl_and_survives_an_outage(bucket, store, release_root):
    t = {"now": 0.0}
    releases = PointerReleases(bucket.fetch, "api", ttl=5, clock=lambda: t["now"])
    first = releases.current().release_id
    render_release(release_root, synthetic_produced(), "2026-11-23T10:00:00Z")
    bucket.publish((release_root / "current").resolve())
    t["now"] = 4.9
    assert releases.current().release_id == first
    t["now"] = 5.0
    second = releases.current().release_id
    assert second != first and second.startswith("20261123")
    manifests_read = sum(1 for c in bucket.calls if c.endswith("manifest.json"))
    bucket.down = True
    t["now"] = 20
    assert releases.current().release_id == second  # stale beats down
    assert sum(1 for c in bucket.calls if c.endswith("manifest.json")) == manifests_read


def test_no_pointer_at_all_is_a_generated_500(store):
    empty = FakeBucket()
    gate = EdgeGate(store, PointerReleases(empty.fetch), None, clock=lambda: NOW)
    out = gate(event_for("/v1/periods"))
    assert out["status"] == "500" and code(out) == "RELEASE_INCOMPLETE"


def test_key_cache_bounds_revocation_delay(store):
    t = {"now": 100.0}
    kid, key = store.create("k", ["risk_scores"], "live", now=NOW)
    cache = TTLKeyCache(store, ttl=2.0, clock=lambda: t["now"])
    assert not cache.lookup(hash_key(key)).revoked
    store.revoke(kid)
    t["now"] = 101.9
    assert not cache.lookup(hash_key(key)).revoked  # inside the documented bound
    t["now"] = 102.0
    assert cache.lookup(hash_key(key)).revoked  # never later than ttl


# --- whatever arrives, the answer is a bounded response or a rewrite inside the release ------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["/v1/periods", "/v1/risk/lgas", "/v1/boundaries/lgas", "/docs/", "/x", "/v1/../x"]),
       query=st.text(st.characters(codec="ascii"), max_size=40),
       method=st.sampled_from(["GET", "HEAD", "OPTIONS", "DELETE"]))
def test_any_request_gives_a_small_response_or_a_release_uri(gate, bucket, store, path, query, method):
    if not hasattr(gate, "_key"):
        gate._key = store.create("p", ["risk_scores", "lga_boundaries"], "test", per_minute=10**6, now=NOW)[1]
    out = gate(event_for(path, query, method=method, authorization=f"Bearer {gate._key}"))
    if "uri" in out:
        rel = out["uri"].split(f"/api/releases/{release_id(bucket)}/", 1)[1]
        assert ".." not in rel.split("/")
        manifest = json.loads(bucket.objects[next(k for k in bucket.objects if k.endswith("manifest.json"))])
        assert rel in manifest["files"]
    else:
        assert int(out["status"]) in (204, 304, 400, 401, 403, 404, 405, 429, 503)
        assert len(out.get("body", "").encode()) <= MAX_GENERATED_BODY


# --- the bundle ----------------------------------------------------------------------------


def test_bundle_is_small_self_contained_and_importable(tmp_path: Path):
    import subprocess
    import sys
    import zipfile

    from deploy.build_bundle import MAX_BYTES, build_bundle

    out = tmp_path / "edge.zip"
    size = build_bundle(out, {"bucket": "b", "table_prefix": "mr-", "prefix": "api"})
    assert 0 < size <= MAX_BYTES
    names = zipfile.ZipFile(out).namelist()
    assert "edge/cloudfront.py" in names and "edge_config.json" in names and "edge/local/app.py" not in names
    # import the handler from the zip alone, with site-packages hidden: standard library only
    probe = ("import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p]; "
             f"sys.path.insert(0, {str(out)!r}); import edge.cloudfront as c; "
             "print(c.CONFIG_FILE.name, callable(c.handler), callable(c.viewer_response_handler))")
    res = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["edge_config.json", "True", "True"]
    with pytest.raises(ValueError):
        build_bundle(tmp_path / "x.zip", {"bucket": "b"})


def test_pinned_download_is_rewritten_to_its_own_release(gate, bucket, store, release_root):
    _, key = store.create("cf", ["forecasts"], "test", now=NOW)  # any scope will do
    first = release_id(bucket)
    produced = synthetic_produced()
    produced[2].documents["/v1/periods"][()] = {"changed": True}
    second = render_release(release_root, produced, "2026-11-22T11:00:00Z").release_id
    bucket.publish(release_root / "releases" / second)
    gate.releases.ttl = 0  # see the new pointer at once
    auth = {"authorization": f"Bearer {key}", "accept_encoding": "gzip"}
    out = gate(event_for(f"/v1/downloads/{first}/gazetteer.csv", **auth))
    assert out["uri"] == f"/api/releases/{first}/downloads/gazetteer.csv.gz"
    assert out["headers"]["x-mr-release-id"][0]["value"] == first
    assert (release_root / "releases" / first / "downloads/gazetteer.csv.gz").is_file()
    out = gate(event_for(f"/v1/downloads/{second}/malaria_risk_nigeria.zip", **auth))
    assert out["uri"] == f"/api/releases/{second}/downloads/malaria_risk_nigeria.zip"  # no gzip sibling
    calls = len(bucket.calls)
    gate(event_for(f"/v1/downloads/{first}/README.md", **auth))
    assert not [c for c in bucket.calls[calls:] if first in c]  # the pinned manifest is fetched once
    # an id the bucket lacks, a name the release lacks: generated 404 problems
    unknown = "20200101T000000Z-00000000"
    miss = gate(event_for(f"/v1/downloads/{unknown}/gazetteer.csv", **auth))
    assert miss["status"] == "404" and code(miss) == "UNKNOWN_RELEASE"
    assert code(gate(event_for(f"/v1/downloads/{first}/manifest.json", **auth))) == "UNKNOWN_FILE"
    assert code(gate(event_for(f"/v1/downloads/{first}/../manifest.json", **auth))) == "UNKNOWN_FILE"
    # once pruned from the bucket, the earlier release stops being rewritten after PINNED_TTL
    clock = [0.0]
    releases = PointerReleases(bucket.fetch, "api", ttl=0, clock=lambda: clock[0])
    pruned_gate = EdgeGate(store, releases, None, clock=lambda: NOW)
    assert "uri" in pruned_gate(event_for(f"/v1/downloads/{first}/README.md", **auth))
    del bucket.objects[f"api/releases/{first}/manifest.json"]
    assert "uri" in pruned_gate(event_for(f"/v1/downloads/{first}/README.md", **auth))  # still trusted
    clock[0] = PINNED_TTL + 1
    assert code(pruned_gate(event_for(f"/v1/downloads/{first}/README.md", **auth))) == "UNKNOWN_RELEASE"
