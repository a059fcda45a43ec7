"""The Lambda@Edge adapter on recorded CloudFront event shapes (tests/edge/cloudfront_events/),
against local S3 and DynamoDB endpoints (moto's server on 127.0.0.1).

The function is built exactly as in the bundle (`build_gate(EdgeSettings(...))`) with its
endpoints pointed through a loopback proxy (tests/edge/proxy.py) that can stall, so a
silent dependency is a real socket that never answers. The pointer is the publisher's
document (`pipeline.publish.s3.pointer_document`); keys are created with the admin store.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge.cloudfront import MAX_GENERATED_BODY, PINNED_TTL, EdgeGate, build_gate, request_from_event
from edge.keys import hash_key
from edge.settings import EdgeSettings
from edge.stores.dynamodb import DynamoDBKeyStore
from edge.viewer_response import viewer_response
from pipeline.publish.s3 import pointer_document
from pipeline.release.manifest import Manifest, sha256_hex
from pipeline.release.render import render_release
from tests.conftest import ESTIMATED, NOW, synthetic_produced
from tests.edge.structured_fields import parse_sf_list

from .conftest import CREDS, boto_client
from .proxy import Proxy, proxy

EVENTS = Path(__file__).parent / "cloudfront_events"
_n = iter(range(100_000))


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


def pointer_for(release_dir: Path) -> tuple[dict[str, Any], bytes]:
    raw = (release_dir / "manifest.json").read_bytes()
    manifest = Manifest.from_bytes(raw)
    doc = pointer_document(manifest, sha256_hex(raw), None, datetime(2026, 11, 22, 11, tzinfo=UTC))
    return doc, raw


@dataclass
class Edge:
    gate: EdgeGate
    store: DynamoDBKeyStore
    s3: Any
    bucket: str
    release_root: Path
    s3_proxy: Proxy
    ddb_proxy: Proxy

    def publish(self, release_dir: Path, **changes: Any) -> dict[str, Any]:
        pointer, _ = pointer_for(release_dir)
        pointer.update(changes)
        self.s3.put_object(Bucket=self.bucket, Key="api/current.json", Body=orjson.dumps(pointer))
        return pointer

    @property
    def release_id(self) -> str:
        doc = json.loads(self.s3.get_object(Bucket=self.bucket, Key="api/current.json")["Body"].read())
        return str(doc["release_id"])

    def calls(self) -> tuple[int, int]:
        """(S3, DynamoDB) attempts the function has sent so far."""
        return (self.gate.releases.source.endpoint.calls,  # type: ignore[attr-defined]
                self.gate.accounts.call.endpoint.calls)  # type: ignore[attr-defined]


def make_edge(endpoint: str, release_root: Path, **overrides: Any) -> Iterator[Edge]:
    n = next(_n)
    s3 = boto_client(endpoint, "s3")
    bucket = f"edge-{n}"
    s3.create_bucket(Bucket=bucket)
    store = DynamoDBKeyStore(boto_client(endpoint), f"e{n}-")
    store.create_tables()
    with proxy(endpoint) as s3p, proxy(endpoint) as ddbp:
        settings_ = EdgeSettings(bucket=bucket, table_prefix=f"e{n}-", prefix="api", region="us-east-1",
                                 s3_endpoint_url=s3p.url,
                                 dynamodb_endpoint_url=ddbp.url, **overrides)
        gate = build_gate(settings_, env=CREDS)
        gate.clock = lambda: NOW
        edge = Edge(gate, store, s3, bucket, release_root, s3p, ddbp)
        edge.publish((release_root / "current").resolve())
        yield edge


@pytest.fixture
def edge(endpoint: str, release_root: Path) -> Iterator[Edge]:
    yield from make_edge(endpoint, release_root)


def code(resp: dict[str, Any]) -> str:
    return str(json.loads(resp["body"])["code"])


# --- the recorded shapes themselves ---------------------------------------------------------


def test_recorded_shapes_parse_into_gate_requests():
    req = request_from_event(load_event("viewer-request-bearer")["Records"][0]["cf"]["request"])
    assert req.method == "GET" and req.path == "/v1/risk/lgas" and req.query == "state=KN"
    assert req.headers["authorization"].startswith("Bearer svc_test_")
    assert req.headers["accept-encoding"] == "gzip, deflate, br"
    multi = event_for("/v1/periods")
    multi["Records"][0]["cf"]["request"]["headers"]["accept"].append({"key": "Accept", "value": "text/plain"})
    assert request_from_event(multi["Records"][0]["cf"]["request"]).headers["accept"] == "*/*, text/plain"


# --- authorised: the URI is rewritten, one DynamoDB call -------------------------------------


def test_authorised_request_is_rewritten_with_one_call(edge: Edge):
    _, key = edge.store.create("cf", ["risk_scores"], "live", now=NOW)
    ev = load_event("viewer-request-bearer")
    ev["Records"][0]["cf"]["request"]["headers"]["authorization"][0]["value"] = f"Bearer {key}"
    out = edge.gate(copy.deepcopy(ev))
    rid = edge.release_id
    # accept-encoding gzip → the precompressed object; the default period is the latest estimated month
    assert out["uri"] == f"/api/releases/{rid}/v1/risk/lgas/KN/{ESTIMATED[-1]}.json.gz"
    assert out["querystring"] == ""
    assert "authorization" not in out["headers"] and "x-api-key" not in out["headers"]
    assert out["headers"]["host"][0]["value"] == "api.example.org"
    assert parse_sf_list(out["headers"]["x-mr-ratelimit"][0]["value"])["minute"]["r"] == 59
    assert parse_sf_list(out["headers"]["x-mr-ratelimit"][0]["value"])["month"]["r"] == 9_999
    assert out["headers"]["x-mr-release-id"][0]["value"] == rid
    assert out["headers"]["x-mr-cache-control"][0]["value"] == "private, max-age=300, must-revalidate"
    # the object named is one the release really holds
    key_in_release = out["uri"].split(f"/releases/{rid}/", 1)[1]
    assert (edge.release_root / "releases" / rid / key_in_release).is_file()
    assert edge.calls() == (1, 1)  # cold: the pointer and one UpdateItem
    edge.gate(copy.deepcopy(ev))
    assert edge.calls() == (1, 2)  # warm: one UpdateItem, nothing else


def test_identity_encoding_and_docs(edge: Edge):
    _, key = edge.store.create("cf", ["risk_scores"], "test", now=NOW)
    out = edge.gate(event_for("/v1/context/lgas", "state=LA", x_api_key=key))
    assert out["uri"].endswith("/v1/context/lgas/LA.json")
    docs = edge.gate(event_for("/docs/"))
    assert docs["uri"] == f"/api/releases/{edge.release_id}/docs/index.html"
    assert docs["headers"]["x-mr-cache-control"][0]["value"] == "public, max-age=300"
    missing = edge.gate(event_for("/docs/nope.html"))  # the pointer lists the docs pages
    assert missing["status"] == "404" and code(missing) == "NOT_FOUND"
    assert edge.calls()[1] == 1  # docs need no key: only the API request called DynamoDB


def test_pinned_downloads_name_their_own_release(edge: Edge):
    """A bundle file of an earlier release still in the bucket is rewritten to that release's
    object; its file list and their scopes come from its /v1/downloads document (else its
    SHA256SUMS), not its manifest, read once per PINNED_TTL."""
    _, key = edge.store.create("cf", ["risk_scores", "forecasts", "lga_boundaries"], "test", now=NOW)
    _, forecasts_only = edge.store.create("fc", ["forecasts"], "test", now=NOW)
    first = edge.release_id
    first_sums = (edge.release_root / "releases" / first / "downloads" / "SHA256SUMS").read_bytes()
    produced = synthetic_produced()
    produced[2].documents["/v1/periods"][()] = {"changed": True}
    second = render_release(edge.release_root, produced, "2026-11-22T11:00:00Z").release_id
    edge.publish(edge.release_root / "releases" / second)
    edge.s3.put_object(Bucket=edge.bucket, Key=f"api/releases/{first}/downloads/SHA256SUMS", Body=first_sums)
    first_index = (edge.release_root / "releases" / first / "v1" / "downloads.json").read_bytes()
    edge.s3.put_object(Bucket=edge.bucket, Key=f"api/releases/{first}/v1/downloads.json", Body=first_index)
    edge.gate.releases.ttl = 0  # see the new pointer at once
    t = [0.0]
    edge.gate.releases.clock = lambda: t[0]
    auth = {"x_api_key": key, "accept_encoding": "gzip"}

    current = edge.gate(event_for(f"/v1/downloads/{second}/gazetteer.csv", **auth))
    assert current["uri"] == f"/api/releases/{second}/downloads/gazetteer.csv.gz"
    edge.gate.releases.ttl = 3600.0  # from here on the pointer is not re-read: S3 calls are the pinned list's
    out = edge.gate(event_for(f"/v1/downloads/{first}/gazetteer.csv", **auth))
    assert out["uri"] == f"/api/releases/{first}/downloads/gazetteer.csv.gz"
    assert out["headers"]["x-mr-release-id"][0]["value"] == first
    assert (edge.release_root / "releases" / first / "downloads/gazetteer.csv.gz").is_file()
    zipped = edge.gate(event_for(f"/v1/downloads/{first}/malaria_risk_nigeria.zip", **auth))
    assert zipped["uri"] == f"/api/releases/{first}/downloads/malaria_risk_nigeria.zip"  # no gzip sibling
    s3_calls = edge.calls()[0]
    edge.gate(event_for(f"/v1/downloads/{first}/README.md", **auth))
    assert edge.calls()[0] == s3_calls  # the pinned list is read once, not per request
    # the earlier release's own record of scopes: the gazetteer needs risk_scores, its README none
    refused = edge.gate(event_for(f"/v1/downloads/{first}/gazetteer.csv", x_api_key=forecasts_only))
    assert refused["status"] == "403" and code(refused) == "SCOPE_REQUIRED"
    assert "uri" in edge.gate(event_for(f"/v1/downloads/{first}/README.md", x_api_key=forecasts_only))
    # an id the bucket lacks, a name a release lacks: generated 404 problems, for pinned and current alike
    missing = edge.gate(event_for("/v1/downloads/20200101T000000Z-00000000/gazetteer.csv", **auth))
    assert missing["status"] == "404" and code(missing) == "UNKNOWN_RELEASE"
    assert code(edge.gate(event_for(f"/v1/downloads/{first}/manifest.json", **auth))) == "UNKNOWN_FILE"
    assert code(edge.gate(event_for(f"/v1/downloads/{second}/nothing.csv", **auth))) == "UNKNOWN_FILE"
    # pruned from the bucket: still trusted until PINNED_TTL, then an unknown release
    edge.s3.delete_object(Bucket=edge.bucket, Key=f"api/releases/{first}/downloads/SHA256SUMS")
    edge.s3.delete_object(Bucket=edge.bucket, Key=f"api/releases/{first}/v1/downloads.json")
    assert "uri" in edge.gate(event_for(f"/v1/downloads/{first}/README.md", **auth))
    t[0] = PINNED_TTL + 1
    assert code(edge.gate(event_for(f"/v1/downloads/{first}/README.md", **auth))) == "UNKNOWN_RELEASE"
    # an earlier release whose index records no scopes (published before they were recorded): its
    # names from SHA256SUMS, and every file needs every scope
    edge.s3.put_object(Bucket=edge.bucket, Key=f"api/releases/{first}/downloads/SHA256SUMS", Body=first_sums)
    t[0] += edge.gate.releases.ttl + 1  # past the time an absent id is remembered
    assert "uri" in edge.gate(event_for(f"/v1/downloads/{first}/README.md", **auth))
    bare = edge.gate(event_for(f"/v1/downloads/{first}/README.md", x_api_key=forecasts_only))
    assert code(bare) == "SCOPE_REQUIRED" and json.loads(bare["body"])["missing_scopes"] == [
        "risk_scores", "lga_boundaries"]


def test_a_pointer_without_the_docs_list_still_serves_the_flat_site(edge: Edge):
    edge.publish((edge.release_root / "current").resolve(), public=None)
    gate = build_gate(settings_of(edge), env=CREDS)
    assert gate(event_for("/docs/api.html"))["uri"].endswith("/docs/api.html")
    assert gate(event_for("/docs/a/b.html"))["status"] == "404"


def settings_of(edge: Edge) -> EdgeSettings:
    return EdgeSettings(bucket=edge.bucket, table_prefix=edge.store.prefix, prefix="api", region="us-east-1",
                        s3_endpoint_url=edge.s3_proxy.url, dynamodb_endpoint_url=edge.ddb_proxy.url)


# --- errors are generated responses ---------------------------------------------------------


def test_each_error_is_a_generated_problem_response(edge: Edge):
    store = edge.store
    _, key = store.create("cf", ["risk_scores", "forecasts"], "live", per_minute=1000, now=NOW)
    revoked_id, revoked = store.create("rv", ["risk_scores"], "live", now=NOW)
    store.revoke(revoked_id)
    _, expiring = store.create("ex", ["risk_scores"], "live", expires_on="2026-11-23", now=NOW)
    _, owned = store.create("ow", ["risk_scores"], "live", owner="ann", now=NOW)
    store.remove_account("ann")
    _, member = store.create("org", ["risk_scores"], "live", org="ngo", now=NOW)
    store.set_org_suspended("ngo", True)
    bearer = f"Bearer {key}"
    cases = [
        (event_for("/v1/periods"), "401", "API_KEY_MISSING"),
        (event_for("/v1/periods", authorization="Bearer svc_live_" + "x" * 32), "401", "API_KEY_INVALID"),
        (event_for("/v1/periods", authorization=f"Bearer {revoked}"), "401", "API_KEY_REVOKED"),
        (event_for("/v1/periods", authorization=f"Bearer {owned}"), "401", "ACCOUNT_REMOVED"),
        (event_for("/v1/periods", authorization=f"Bearer {member}"), "401", "ORGANISATION_SUSPENDED"),
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
        out = edge.gate(ev)
        assert out["status"] == status, (expected, out)
        assert "uri" not in out  # a response, not a request
        assert out["headers"]["content-type"] == [{"key": "Content-Type", "value": "application/problem+json"}]
        assert out["headers"]["cache-control"] == [{"key": "Cache-Control", "value": "no-store"}]
        assert out["headers"]["access-control-allow-origin"][0]["value"] == "*"
        assert out["bodyEncoding"] == "text" and len(out["body"].encode()) <= MAX_GENERATED_BODY
        assert code(out) == expected
        if status != "401":
            assert "ratelimit" in out["headers"] or expected in ("NOT_FOUND", "METHOD_NOT_ALLOWED")
    expired = edge.gate(event_for("/v1/periods", authorization=f"Bearer {expiring}"))
    assert "uri" in expired  # still valid on the 22nd
    later = EdgeGate(edge.gate.accounts, edge.gate.releases, clock=lambda: datetime(2026, 11, 23, tzinfo=UTC))
    assert code(later(event_for("/v1/periods", authorization=f"Bearer {expiring}"))) == "API_KEY_EXPIRED"


def test_401s_count_nothing_and_revocation_is_immediate(edge: Edge):
    kid, key = edge.store.create("r", ["risk_scores"], "live", now=NOW)
    assert "uri" in edge.gate(event_for("/v1/periods", authorization=f"Bearer {key}"))
    edge.store.revoke(kid)
    out = edge.gate(event_for("/v1/periods", authorization=f"Bearer {key}"))  # no wait: the next request
    assert code(out) == "API_KEY_REVOKED"
    item = edge.store.client.get_item(TableName=edge.store.keys_table, Key={"pk": {"S": f"key#{hash_key(key)}"}})
    counters = {k: v["N"] for k, v in item["Item"].items() if k.startswith(("cm_", "cM_"))}
    assert sorted(counters.values()) == ["1", "1"]  # the refused request counted nothing
    calls = edge.calls()[1]
    edge.gate(event_for("/v1/periods", authorization=f"Bearer {key}"))
    edge.gate(event_for("/v1/periods", authorization="Bearer svc_live_" + "y" * 32))
    edge.gate(event_for("/v1/periods", authorization="Bearer svc_live_" + "y" * 32))
    assert edge.calls()[1] == calls + 1  # refusals are remembered for 2 s; the unknown key asked once


def test_both_429s_at_the_edge(edge: Edge):
    _, key = edge.store.create("m", ["risk_scores"], "live", per_minute=2, monthly=3, now=NOW)

    def ev() -> dict[str, Any]:  # the adapter rewrites the event's request in place, so a fresh one each time
        return event_for("/v1/periods", authorization=f"Bearer {key}")

    edge.gate(ev()), edge.gate(ev())
    minute = edge.gate(ev())
    assert minute["status"] == "429" and code(minute) == "RATE_LIMITED"
    assert minute["headers"]["retry-after"][0]["value"] == "60"
    assert parse_sf_list(minute["headers"]["ratelimit"][0]["value"]) == {"minute": {"r": 0, "t": 60}}
    later = EdgeGate(edge.gate.accounts, edge.gate.releases, clock=lambda: NOW.replace(minute=1))
    assert "uri" in later(ev())  # the throttled request did not eat the month: 3rd of 3
    month = later(ev())
    assert code(month) == "MONTHLY_ALLOWANCE_EXHAUSTED" and month["headers"]["retry-after"]
    assert parse_sf_list(month["headers"]["ratelimit"][0]["value"])["month"]["r"] == 0


def test_old_windows_are_removed_from_the_key_item(edge: Edge):
    _, key = edge.store.create("w", ["risk_scores"], "live", per_minute=100, now=NOW)
    for minute in (0, 5, 6, 7):
        gate = EdgeGate(edge.gate.accounts, edge.gate.releases, clock=lambda m=minute: NOW.replace(minute=m))
        assert "uri" in gate(event_for("/v1/periods", authorization=f"Bearer {key}"))
    item = edge.store.client.get_item(TableName=edge.store.keys_table,
                                      Key={"pk": {"S": f"key#{hash_key(key)}"}})["Item"]
    minutes = sorted(int(k[3:]) - int(NOW.timestamp() // 60) for k in item if k.startswith("cm_"))
    assert minutes == [6, 7]  # the current and the previous minute; 0 and 5 are gone
    assert item[f"cM_{NOW:%Y-%m}"]["N"] == "4"


def test_preflight_and_head(edge: Edge):
    out = edge.gate(load_event("viewer-request-preflight"))
    assert out["status"] == "204" and "body" not in out
    assert "x-api-key" in out["headers"]["access-control-allow-headers"][0]["value"].lower()
    head = edge.gate(event_for("/v1/periods", method="HEAD"))
    assert head["status"] == "401" and "body" not in head


def test_conditional_requests_are_left_to_cloudfront(edge: Edge):
    _, key = edge.store.create("c", ["risk_scores"], "test", now=NOW)
    ev = load_event("viewer-request-conditional")
    ev["Records"][0]["cf"]["request"]["headers"]["x-api-key"][0]["value"] = key
    out = edge.gate(copy.deepcopy(ev))
    assert out["uri"].endswith("/v1/context/lgas/LA.json") and "if-none-match" in out["headers"]
    ev["Records"][0]["cf"]["request"]["headers"]["if-none-match"][0]["value"] = "*"
    star = edge.gate(ev)
    assert star["status"] == "304" and "body" not in star and "etag" not in star["headers"]
    assert "ratelimit" in star["headers"]  # it counted


def test_viewer_response_copies_the_carried_headers_and_sets_cache_control():
    out = viewer_response(load_event("viewer-response"))
    assert out["status"] == "200"
    assert out["headers"]["ratelimit"] == [{"key": "RateLimit", "value": '"minute";r=59;t=30'}]
    assert out["headers"]["ratelimit-policy"][0]["value"] == '"minute";q=60;w=60'
    assert out["headers"]["x-release-id"][0]["value"] == "20261122T100000Z-abc"
    assert out["headers"]["cache-control"][0]["value"] == "private, max-age=300, must-revalidate"
    assert out["headers"]["etag"][0]["value"].startswith('"')
    carried = load_event("viewer-response")
    carried["Records"][0]["cf"]["request"]["headers"]["x-mr-cache-control"] = [
        {"key": "x-mr-cache-control", "value": "public, max-age=300"}]
    assert viewer_response(carried)["headers"]["cache-control"][0]["value"] == "public, max-age=300"
    failed = load_event("viewer-response")
    failed["Records"][0]["cf"]["response"]["status"] = "403"
    assert viewer_response(failed)["headers"]["cache-control"][0]["value"] == "no-store"
    untouched = load_event("viewer-response")
    del untouched["Records"][0]["cf"]["request"]["headers"]["x-mr-release-id"]
    assert "ratelimit" not in viewer_response(untouched)["headers"]


# --- the pointer, and dependencies that stop answering ------------------------------------------


def test_pointer_is_reread_after_its_ttl_and_survives_a_stall(edge: Edge):
    releases = edge.gate.releases
    t = {"now": 0.0}
    releases.clock = lambda: t["now"]
    first = releases.current(time.monotonic() + 3).release_id
    render_release(edge.release_root, synthetic_produced(), "2026-11-23T10:00:00Z")
    t["now"] = 4.9
    unchanged = releases.current(time.monotonic() + 3)
    t["now"] = 5.0
    assert releases.current(time.monotonic() + 3) is unchanged  # a 304: the same object
    edge.publish((edge.release_root / "current").resolve())
    t["now"] = 10.0
    second = releases.current(time.monotonic() + 3).release_id
    assert second != first and second.startswith("20261123")
    edge.s3_proxy.stall = True
    t["now"] = 20.0
    started = time.monotonic()
    assert releases.current(time.monotonic() + 3).release_id == second  # stale beats down
    assert time.monotonic() - started < 0.8 and releases.failures == 1
    t["now"] = 21.0
    started = time.monotonic()
    assert releases.current(time.monotonic() + 3).release_id == second
    assert time.monotonic() - started < 0.01  # not retried before another ttl


def test_stalled_dynamodb_is_a_503_within_the_deadline(edge: Edge):
    _, key = edge.store.create("s", ["risk_scores"], "live", now=NOW)
    edge.gate(event_for("/v1/periods", authorization=f"Bearer {key}"))
    edge.ddb_proxy.stall = True
    started = time.monotonic()
    out = edge.gate(event_for("/v1/periods", authorization=f"Bearer {key}"))
    took = time.monotonic() - started
    assert out["status"] == "503" and code(out) == "TEMPORARILY_UNAVAILABLE"
    assert out["headers"]["retry-after"][0]["value"] == "5"
    assert out["headers"]["cache-control"][0]["value"] == "no-store"
    assert 1.0 < took < edge.gate.deadline + 0.3  # two bounded attempts, never a hang
    assert "uri" not in edge.gate(event_for("/v1/periods"))  # keyless answers need no DynamoDB: still 401
    edge.ddb_proxy.stall = False
    assert "uri" in edge.gate(event_for("/v1/periods", authorization=f"Bearer {key}"))  # recovers by itself


def test_stalled_s3_on_a_cold_start_is_a_503_and_no_pointer_is_a_500(endpoint: str, release_root: Path):
    for edge in make_edge(endpoint, release_root, deadline=1.5):
        edge.s3_proxy.stall = True
        started = time.monotonic()
        out = edge.gate(event_for("/v1/periods"))
        assert code(out) == "TEMPORARILY_UNAVAILABLE" and time.monotonic() - started < 1.8
        edge.s3_proxy.stall = False
        edge.s3.delete_object(Bucket=edge.bucket, Key="api/current.json")
        out = edge.gate(event_for("/v1/periods"))
        assert out["status"] == "500" and code(out) == "RELEASE_INCOMPLETE"


# --- whatever arrives, the answer is a bounded response or a rewrite inside the release ------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["/v1/periods", "/v1/risk/lgas", "/v1/boundaries/lgas", "/docs/", "/x", "/v1/../x"]),
       query=st.text(st.characters(codec="ascii"), max_size=40),
       method=st.sampled_from(["GET", "HEAD", "OPTIONS", "DELETE"]))
def test_any_request_gives_a_small_response_or_a_release_uri(edge: Edge, path: str, query: str, method: str):
    if not hasattr(edge, "key"):
        edge.key = edge.store.create("p", ["risk_scores", "lga_boundaries"], "test",  # type: ignore[attr-defined]
                                     per_minute=10**6, now=NOW)[1]
    out = edge.gate(event_for(path, query, method=method, authorization=f"Bearer {edge.key}"))  # type: ignore
    if "uri" in out:
        rid = edge.release_id
        rel = out["uri"].split(f"/api/releases/{rid}/", 1)[1]
        assert ".." not in rel.split("/")
        manifest = json.loads((edge.release_root / "releases" / rid / "manifest.json").read_bytes())
        assert rel in manifest["files"]
    else:
        assert int(out["status"]) in (204, 304, 400, 401, 403, 404, 405, 429, 503)
        assert len(out.get("body", "").encode()) <= MAX_GENERATED_BODY


# --- the bundle ----------------------------------------------------------------------------


# What the function's cold start must not import (docs/deploy.md#measurements): the local
# server's modules, and standard-library modules that cost milliseconds of a 128 MB instance's
# CPU share for nothing the edge needs.
NOT_ON_THE_COLD_PATH = {"edge.release", "edge.stores.sqlite", "edge.stores.counters", "sqlite3", "dataclasses",
                        "inspect", "logging", "pathlib", "urllib.parse", "ipaddress", "secrets", "random",
                        "http.client", "email"}


def test_bundle_is_small_compiled_and_runs_from_its_folder(tmp_path: Path, endpoint: str, release_root: Path):
    """Built as deployed, unpacked as Lambda does, run with site-packages hidden on a recorded event."""
    from deploy.build_bundle import MAX_BYTES, build_bundle

    for edge in make_edge(endpoint, release_root):
        _, key = edge.store.create("b", ["risk_scores"], "live", now=NOW)
        out = tmp_path / "edge.zip"
        size = build_bundle(out, {"bucket": edge.bucket, "table_prefix": edge.store.prefix, "prefix": "api",
                                  "region": "us-east-1",
                                  "s3_endpoint_url": endpoint, "dynamodb_endpoint_url": endpoint})
        assert 0 < size <= MAX_BYTES
        names = zipfile.ZipFile(out).namelist()
        tag = sys.implementation.cache_tag
        assert "edge/cloudfront.py" in names and f"edge/__pycache__/cloudfront.{tag}.pyc" in names
        assert "edge_config.json" in names and not any(n.startswith("edge/local/") for n in names)
        task = tmp_path / "task"
        zipfile.ZipFile(out).extractall(task)
        ev = event_for("/v1/context/lgas", "state=KN", authorization=f"Bearer {key}")
        probe = ("import sys, json; sys.path[:] = [p for p in sys.path if 'site-packages' not in p]; "
                 "sys.dont_write_bytecode = True; "
                 f"sys.path.insert(0, {str(task)!r}); import edge.cloudfront as c; "
                 f"print(json.dumps(c.handler(json.loads({json.dumps(json.dumps(ev))}), None))); "
                 "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'pipeline'))); "
                 f"print(sorted(m for m in sys.modules if m in {sorted(NOT_ON_THE_COLD_PATH)!r}))")
        res = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                             env=CREDS, timeout=60)
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        logged = [json.loads(line) for line in lines if line.startswith('{"event":"edge_decision"')]
        answer, modules, costly = [line for line in lines if not line.startswith('{"event"')]
        assert [(d["route"], d["status"], d["runtime"], d["key_id"]) for d in logged] == [
            ("/v1/context/lgas", 200, "cloudfront", edge.store.list(NOW)[0]["id"])]
        assert key not in res.stdout + res.stderr
        assert json.loads(answer)["uri"] == f"/api/releases/{edge.release_id}/v1/context/lgas/KN.json"
        assert modules == "[]"
        assert costly == "[]"
        with pytest.raises(ValueError):
            build_bundle(tmp_path / "x.zip", {"bucket": "bucket-b"})


def test_release_list_is_read_from_beside_the_pointer(edge: Edge):
    _, key = edge.store.create("cf", ["risk_scores"], "test", now=NOW)
    releases = edge.gate.releases
    t = {"now": 0.0}
    releases.clock = lambda: t["now"]
    absent = edge.gate(event_for("/v1/releases", x_api_key=key))
    assert absent["status"] == "503" and code(absent) == "TEMPORARILY_UNAVAILABLE"
    listing = (edge.release_root / "releases.json").read_bytes()  # the renderer's, as a publisher would write it
    edge.s3.put_object(Bucket=edge.bucket, Key="api/releases.json", Body=listing)
    t["now"] = 5.0  # the absent list is remembered for one ttl, then read again
    out = edge.gate(event_for("/v1/releases", x_api_key=key))
    assert out["status"] == "200" and json.loads(out["body"]) == json.loads(listing)
    assert out["headers"]["cache-control"][0]["value"].startswith("private, max-age=60")
    etag = out["headers"]["etag"][0]["value"]
    assert edge.gate(event_for("/v1/releases", x_api_key=key, if_none_match=etag))["status"] == "304"
    edge.s3_proxy.stall = True
    t["now"] = 10.0
    kept = edge.gate(event_for("/v1/releases", x_api_key=key))  # S3 stalls: the list already known
    edge.s3_proxy.stall = False
    assert kept["status"] == "200" and kept["body"] == out["body"]
