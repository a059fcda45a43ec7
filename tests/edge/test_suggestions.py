"""Unknown states and LGAs given by name: the gate suggests the codes, in `detail` and in the
problem's additive `suggestions` member, on the local gate and at the CDN edge; the code and
status stay the SPEC's (UNKNOWN_STATE and UNKNOWN_LGA, 404)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from edge.files import NAMES_KEY
from edge.names import Names
from edge.release import LocalReleases
from pipeline.release.render import render_release
from tests.conftest import NOW, synthetic_produced
from tests.edge.test_gate import get

INDEX: dict[str, Any] = {
    "states": [["BE", "Benue"], ["FC", "Federal Capital Territory"], ["KN", "Kano"], ["KT", "Katsina"],
               ["LA", "Lagos"], ["NA", "Nasarawa"], ["AK", "Akwa Ibom"]],
    "variants": {"fct": "FC", "abuja": "FC", "nassarawa": "NA"},
    "lgas": [["NG007014", "Obi", "BE"], ["NG020001", "Ajingi", "KN"], ["NG020006", "Bunkure", "KN"],
             ["NG026001", "Akwanga", "NA"], ["NG026011", "Obi", "NA"]],
}


def release_with(tmp_path: Path, names: bytes | None) -> Any:
    produced = synthetic_produced()
    if names is not None:
        produced = [dataclasses.replace(p, files={**p.files, NAMES_KEY: ("application/json", names)})
                    if p.dataset == "geography" else p for p in produced]
    root = tmp_path / "build"
    render_release(root, produced, "2026-11-22T10:00:00Z")
    return LocalReleases(root).current()


def problem(resp: Any) -> dict[str, Any]:
    doc = json.loads(resp.body)
    assert doc["status"] == resp.status
    return dict(doc)


@pytest.fixture
def named(tmp_path: Path) -> Any:
    return release_with(tmp_path, orjson.dumps(INDEX))


@pytest.mark.parametrize(("query", "codes"), [
    ("state=Kano", ["KN"]), ("state=kano", ["KN"]), ("state=KANO%20STATE", ["KN"]), ("state=Katsna", ["KT"]),
    ("state=Nassarawa", ["NA"]), ("state=Akwa-Ibom", ["AK"]), ("state=Abuja", ["FC"]), ("state=FCT", ["FC"]),
    ("state=NG-KN", ["KN"]),
    # three or four letters that begin a name
    ("state=KAN", ["KN"]), ("state=kat", ["KT"]), ("state=AKW", ["AK"]), ("state=NASS", ["NA"]), ("state=BEN", ["BE"]),
])
def test_a_state_name_suggests_its_code(named: Any, store: Any, all_scopes_key: str, query: str, codes: list[str]):
    resp = get(named, store, "/v1/history/states", query, all_scopes_key)
    doc = problem(resp)
    assert resp.status == 404 and doc["code"] == "UNKNOWN_STATE" and doc["parameter"] == "state"
    assert [s["state_code"] for s in doc["suggestions"]] == codes
    assert all(f"`{c}`" in doc["detail"] for c in codes)
    assert "ISO 3166-2:NG" in doc["detail"]  # the rest of the detail is kept


def test_a_code_in_lower_case_keeps_its_hint_and_gains_the_member(named: Any, store: Any, all_scopes_key: str):
    doc = problem(get(named, store, "/v1/history/states", "state=kn", all_scopes_key))
    assert doc["suggestions"] == [{"state_code": "KN", "state": "Kano"}]
    assert doc["detail"].count("`KN`") == 1  # said once, by the case hint


@pytest.mark.parametrize(("query", "codes"), [
    ("lga=Bunkure", ["NG020006"]), ("lga=BUNKURE", ["NG020006"]), ("lga=Bunkre", ["NG020006"]),
    ("lga=Obi", ["NG007014", "NG026011"]), ("lga=ng020006", ["NG020006"]),
])
def test_an_lga_name_suggests_its_codes_with_their_state(named: Any, store: Any, all_scopes_key: str, query: str,
                                                         codes: list[str]):
    resp = get(named, store, "/v1/history/lgas", query, all_scopes_key)
    doc = problem(resp)
    assert resp.status == 404 and doc["code"] == "UNKNOWN_LGA"
    assert [s["lga_code"] for s in doc["suggestions"]] == codes
    for s in doc["suggestions"]:
        assert set(s) == {"lga_code", "lga", "state_code", "state"}
        assert s["lga_code"] in doc["detail"] and s["state"] in doc["detail"]


def test_three_letters_of_bauchi_suggest_ba(tmp_path: Path, store: Any, all_scopes_key: str):
    """`BAU` is no code (Bauchi is `BA`) and too short for a close spelling: it begins Bauchi's name."""
    index = {**INDEX, "states": [*INDEX["states"], ["BA", "Bauchi"], ["BY", "Bayelsa"]]}
    release = release_with(tmp_path, orjson.dumps(index))
    doc = problem(get(release, store, "/v1/history/states", "state=BAU", all_scopes_key))
    assert doc["code"] == "UNKNOWN_STATE" and doc["suggestions"] == [{"state_code": "BA", "state": "Bauchi"}]
    assert "Did you mean `BA` (Bauchi)?" in doc["detail"]
    # "BA" alone is a code already; "BAY" begins Bayelsa only
    assert problem(get(release, store, "/v1/history/states", "state=BAY", all_scopes_key))["suggestions"] == [
        {"state_code": "BY", "state": "Bayelsa"}]


def test_a_parameter_another_route_takes_points_there(named: Any, store: Any, all_scopes_key: str):
    """`lga` on /v1/risk/lgas: still UNKNOWN_PARAMETER (400), and the detail names the route that takes it,
    with the LGA's code for a name that means one LGA."""
    doc = problem(get(named, store, "/v1/risk/lgas", "state=KN&lga=Bunkure", all_scopes_key))
    assert doc["status"] == 400 and doc["code"] == "UNKNOWN_PARAMETER" and doc["parameter"] == "lga"
    assert "`/v1/history/lgas?lga=NG020006`" in doc["detail"], doc["detail"]
    assert doc["detail"].startswith("`lga` is not a parameter of /v1/risk/lgas")
    # a name of two LGAs stays as given; a parameter no route takes gets no pointer
    assert "`/v1/history/lgas?lga=Obi`" in problem(get(named, store, "/v1/risk/lgas", "state=KN&lga=Obi",
                                                       all_scopes_key))["detail"]
    assert "try" not in problem(get(named, store, "/v1/risk/lgas", "state=KN&foo=1", all_scopes_key))["detail"]
    # `state` on the national route: the routes that take it
    detail = problem(get(named, store, "/v1/risk/states", "state=KN", all_scopes_key))["detail"]
    assert "`/v1/risk/lgas`" in detail and "try `" in detail


def test_nothing_close_answers_as_before(named: Any, store: Any, all_scopes_key: str):
    for path, query in (("/v1/history/states", "state=ZZ"), ("/v1/history/lgas", "lga=NG999999"),
                        ("/v1/history/lgas", "lga=Xylophone"), ("/v1/history/states", "state=" + "Kano" * 40)):
        doc = problem(get(named, store, path, query, all_scopes_key))
        assert doc["status"] == 404 and "suggestions" not in doc and "Did you mean" not in doc["detail"]


def test_a_release_without_the_index_answers_without_suggestions(tmp_path: Path, store: Any, all_scopes_key: str):
    release = release_with(tmp_path, None)
    doc = problem(get(release, store, "/v1/history/states", "state=Kano", all_scopes_key))
    assert doc["code"] == "UNKNOWN_STATE" and "suggestions" not in doc


def test_an_unknown_state_is_still_refused_before_the_key_is_needed_nowhere(named: Any, store: Any):
    """Without a key the answer is the 401 it always was: suggestions are for callers with a key."""
    assert problem(get(named, store, "/v1/history/states", "state=Kano"))["code"] == "API_KEY_MISSING"


def test_the_index_reads_back(named: Any):
    names = named.names()
    assert isinstance(names, Names) and names.states["KN"] == "Kano" and names.lgas["NG020006"] == ("Bunkure", "KN")
    assert named.names() is names  # read once


def test_the_problem_schema_documents_suggestions():
    from pipeline.site.openapi import openapi_document

    doc = openapi_document()
    problem_schema = doc["components"]["schemas"]["Problem"]
    s = problem_schema["properties"]["suggestions"]
    assert s["type"] == "array" and "suggestions" not in problem_schema.get("required", [])
    item = s["items"]
    assert {"state_code", "state", "lga_code", "lga"} <= set(item["properties"])
    assert "description" in s and "UNKNOWN_STATE" in s["description"] and "UNKNOWN_LGA" in s["description"]


# -- at the CDN edge: the index is read from the bucket, once, on the first unknown name ------------------


def test_the_cdn_edge_suggests_from_the_release_in_the_bucket(endpoint: str, release_root: Path):
    from tests.edge.test_cloudfront import event_for, make_edge

    for edge in make_edge(endpoint, release_root):
        _, key = edge.store.create("cf", ["risk_scores"], "live", now=NOW)
        rid = edge.release_id
        # before the index is in the bucket: the same 404, no suggestions, and the failed read is not repeated
        out = edge.gate(event_for("/v1/history/states", "state=Kano", x_api_key=key))
        doc = json.loads(out["body"])
        assert out["status"] == "404" and doc["code"] == "UNKNOWN_STATE" and "suggestions" not in doc
        s3_before = edge.calls()[0]
        edge.gate(event_for("/v1/history/states", "state=Kaduna", x_api_key=key))
        assert edge.calls()[0] == s3_before

    for edge in make_edge(endpoint, release_root):
        _, key = edge.store.create("cf", ["risk_scores"], "live", now=NOW)
        rid = edge.release_id
        edge.s3.put_object(Bucket=edge.bucket, Key=f"api/releases/{rid}/{NAMES_KEY}", Body=orjson.dumps(INDEX))
        out = edge.gate(event_for("/v1/history/lgas", "lga=Obi", x_api_key=key))
        doc = json.loads(out["body"])
        assert out["status"] == "404" and doc["code"] == "UNKNOWN_LGA"
        assert [s["lga_code"] for s in doc["suggestions"]] == ["NG007014", "NG026011"]
        s3_before = edge.calls()[0]
        out = edge.gate(event_for("/v1/history/states", "state=Abuja", x_api_key=key))
        assert json.loads(out["body"])["suggestions"] == [{"state_code": "FC", "state": "Federal Capital Territory"}]
        assert edge.calls()[0] == s3_before  # the index was read once
        # a good request is untouched: rewritten to the release's file
        assert "uri" in edge.gate(event_for("/v1/history/states", "state=KN", x_api_key=key))
