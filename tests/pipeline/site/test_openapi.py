"""The OpenAPI document is generated from the route table and the problem catalogue.

These tests check it against those two sources (not against its own output), check
it is structurally valid OpenAPI 3.1, and that it tells the truth about the gate:
every error a route lists can really be produced by the gate for that route.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge.problems import BY_CODE, CATALOGUE, PROBLEM_JSON, TYPE_BASE
from edge.routes import DOWNLOAD_FILE, ROUTES, SCOPES, STATE_RE, Facts, ParamError
from pipeline.site.openapi import (
    PATH_LEVEL_CODES,
    RESPONSE_SCHEMA,
    codes_for_route,
    openapi_document,
    param_schema,
    resource_schemas,
)

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return openapi_document()


def _refs(node: Any) -> list[str]:
    out: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out.append(v)
            else:
                out.extend(_refs(v))
    elif isinstance(node, list):
        for v in node:
            out.extend(_refs(v))
    return out


def test_required_top_level_members(doc: dict) -> None:
    assert re.fullmatch(r"3\.1\.\d+", doc["openapi"])
    assert doc["info"]["title"] and doc["info"]["version"]
    assert isinstance(doc["paths"], dict)
    for path, item in doc["paths"].items():
        assert path.startswith("/")
        assert set(item) <= HTTP_METHODS
        for op in item.values():
            assert op["responses"], path
            for status, resp in op["responses"].items():
                assert re.fullmatch(r"[1-5]\d\d", status)
                assert "description" in resp
            for p in op["parameters"]:
                assert {"name", "in"} <= p.keys() and p["in"] == ("path" if "{" in path else "query")
                assert "schema" in p


def test_every_ref_resolves(doc: dict) -> None:
    for ref in _refs(doc):
        assert ref.startswith("#/"), ref
        node: Any = doc
        for part in ref[2:].split("/"):
            assert part in node, ref
            node = node[part]


def test_json_serialisable_and_stable() -> None:
    a = orjson.dumps(openapi_document())
    b = orjson.dumps(openapi_document())
    assert a == b  # the site is hashed into the release id: the bytes must not vary


def test_every_route_is_a_path_with_its_scope_and_parameters(doc: dict) -> None:
    csv_twins = [r.path + ".csv" for r in ROUTES if r.param("format") is not None]
    assert list(doc["paths"]) == [r.path for r in ROUTES] + csv_twins + [DOWNLOAD_FILE.path]
    for r in ROUTES:
        op = doc["paths"][r.path]["get"]
        names = [p["name"] for p in op["parameters"]]
        assert names == [p.name for p in r.params]
        for p, spec in zip(r.params, op["parameters"], strict=True):
            assert spec["required"] is p.required
        wanted = [r.scope] if r.scope else []
        assert all(list(req.values()) == [wanted] for req in op["security"])
        assert op["x-required-scope"] == r.scope
        assert r.content_type in op["responses"]["200"]["content"]
        if r.scope is None:
            assert "403" not in op["responses"]
        else:
            assert "SCOPE_REQUIRED" in op["responses"]["403"]["content"][PROBLEM_JSON]["examples"]


def test_each_csv_answer_is_an_operation_of_its_own(doc: dict) -> None:
    """Generators type one media type per response: the `.csv` twin answers text/csv only."""
    twins = [r for r in ROUTES if r.param("format") is not None]
    assert {"/v1/risk/lgas/all", "/v1/history/lgas", "/v1/history/states", "/v1/transmission/lgas"} <= \
        {r.path for r in twins}
    ids = [op["get"]["operationId"] for op in doc["paths"].values()]
    assert len(ids) == len(set(ids))
    for r in twins:
        json_op, csv_op = doc["paths"][r.path]["get"], doc["paths"][r.path + ".csv"]["get"]
        assert csv_op["operationId"] == json_op["operationId"] + "Csv"
        assert list(csv_op["responses"]["200"]["content"]) == ["text/csv; charset=utf-8"]
        assert [p["name"] for p in csv_op["parameters"]] == [p.name for p in r.params if p.name != "format"]
        assert csv_op["security"] == json_op["security"]
        codes = [c for resp in csv_op["responses"].values() for c in
                 resp.get("content", {}).get(PROBLEM_JSON, {}).get("x-problem-codes", [])]
        assert "INVALID_FORMAT" not in codes and "REPEATED_PARAMETER" in codes
        assert csv_op["x-file-key"] == r.file_key.replace("{format}", "csv")


def test_security_schemes_cover_both_headers(doc: dict) -> None:
    schemes = doc["components"]["securitySchemes"].values()
    assert any(s["type"] == "http" and s["scheme"] == "bearer" for s in schemes)
    assert any(s["type"] == "apiKey" and s["in"] == "header" and s["name"] == "x-api-key" for s in schemes)
    for scope in SCOPES:
        assert scope in orjson.dumps(doc).decode()


def test_every_problem_code_appears(doc: dict) -> None:
    enum = doc["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]
    assert sorted(enum) == sorted(p.code for p in CATALOGUE)
    in_operations = set()
    for item in doc["paths"].values():
        for status, resp in item["get"]["responses"].items():
            for code in resp.get("content", {}).get(PROBLEM_JSON, {}).get("examples", {}):
                assert BY_CODE[code].status == int(status)  # grouped under its own status
                in_operations.add(code)
    # every code that is not about the path/method itself is reachable on some operation
    assert in_operations == {p.code for p in CATALOGUE} - set(PATH_LEVEL_CODES)


def test_route_specific_errors_follow_the_route_table() -> None:
    for r in ROUTES:
        codes = {p.code for p in codes_for_route(r)}
        assert set(r.errors) <= codes
        others = {c for o in ROUTES for c in o.errors} - set(r.errors)
        assert not (codes & others), (r.path, codes & others)
        assert ("SCOPE_REQUIRED" in codes) == (r.scope is not None)
        # authentication, limits and query shape apply to every route (gate steps 4, 5, 7)
        assert {"API_KEY_MISSING", "RATE_LIMITED", "UNKNOWN_PARAMETER", "REPEATED_PARAMETER"} <= codes


def test_problem_examples_match_the_catalogue(doc: dict) -> None:
    op = doc["paths"]["/v1/risk/lgas"]["get"]
    ex = op["responses"]["404"]["content"][PROBLEM_JSON]["examples"]["UNKNOWN_STATE"]["value"]
    assert ex["type"] == TYPE_BASE + "UNKNOWN_STATE" and ex["status"] == 404


def test_every_route_has_a_response_schema() -> None:
    schemas = resource_schemas()
    assert set(RESPONSE_SCHEMA) == {r.path for r in ROUTES}
    assert all(name in schemas for name in RESPONSE_SCHEMA.values())


def test_spec_resource_fields_present() -> None:
    """Field lists copied by hand from SPEC sections 2.1–2.9 (the source the schemas must match)."""
    s = resource_schemas()
    spec = {
        "PeriodIndex": {"last_estimated", "last_forecast", "months", "updated_at", "model_version"},
        "StateRisk": {"state_code", "state", "zone", "score", "score_low", "score_high", "level", "lgas",
                      "population"},
        "LgaRisk": {"lga_code", "lga", "score", "score_low", "score_high", "level", "is_urban", "population"},
        "StateContext": {"state_code", "state", "zone", "lgas", "population", "area_km2", "itn_use",
                         "itn_access", "irs_coverage", "effective_treatment", "travel_minutes_to_care",
                         "response_index"},
        "LgaContext": {"lga_code", "lga", "is_urban", "population", "area_km2", "itn_use", "itn_access",
                       "irs_coverage", "effective_treatment", "travel_minutes_to_care", "response_index"},
        "ContextSource": {"name", "coverage_year", "note"},
        "Season": {"peak_month", "season_start_month", "season_end_month", "season_months", "high_months",
                   "seasonal_index"},
        "SurveyTrendEntry": {"survey_year", "positivity", "low", "high", "clusters", "children_tested",
                             "small_sample"},
        "LgaTransmission": {"lga_code", "lga", "peak_month", "season_start_month", "season_end_month",
                            "season_months", "high_months", "seasonal_index", "typical_rainfall_mm"},
        "TransmissionCheck": {"series", "states", "median_correlation", "mean_months_off",
                              "mean_months_peak_is_off"},
    }
    for name, fields in spec.items():
        assert set(s[name]["properties"]) >= fields, (name, fields - set(s[name]["properties"]))
    assert set(s["NationalSurveyTrendEntry"]["properties"]) >= spec["SurveyTrendEntry"] | {"urban", "rural"}
    assert set(s["BoundaryFeature"]["properties"]["properties"]["properties"]) == {"lgaCode", "lga", "state"}
    # SPEC: "any of the share/number figures may be null" in context records
    for f in ("itn_use", "itn_access", "irs_coverage", "effective_treatment", "travel_minutes_to_care",
              "response_index"):
        assert "null" in s["LgaContext"]["properties"][f]["type"]
    assert s["StateRisk"]["properties"]["level"]["enum"] == ["very_low", "low", "moderate", "high", "very_high"]


def test_validates_with_openapi_spec_validator(doc: dict) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(doc)


# --- the documented parameter formats agree with the gate's validators -----------------


FACTS = Facts(states=("KN", "LA"), estimated=("2024-01",), forecast=("2024-02",), available=())


def _accepts(kind_param, raw: str) -> bool:
    try:
        kind_param.validate(raw, FACTS)
        return True
    except ParamError:
        return False


@given(st.text(max_size=8))
def test_state_pattern_matches_validator(raw: str) -> None:
    state = next(p for r in ROUTES for p in r.params if p.kind == "state")
    pattern = re.compile(param_schema(state)["pattern"])
    # anything the gate accepts matches the documented pattern
    if _accepts(state, raw):
        assert pattern.fullmatch(raw)
    assert param_schema(state)["pattern"] == STATE_RE.pattern


@given(st.one_of(st.integers(-3, 8).map(str), st.text(max_size=4)))
def test_months_enum_matches_validator(raw: str) -> None:
    months = next(p for r in ROUTES for p in r.params if p.kind == "months")
    enum = param_schema(months)["enum"]
    assert _accepts(months, raw) == (raw in {str(v) for v in enum})


@given(st.from_regex(r"\d{4}-\d{2}", fullmatch=True) | st.text(max_size=9))
def test_period_pattern_matches_validator_format(raw: str) -> None:
    period = next(p for r in ROUTES for p in r.params if p.kind == "period")
    pattern = re.compile(param_schema(period)["pattern"])
    try:
        period.validate(raw, FACTS)
        code = None
    except ParamError as e:
        code = e.code
    # INVALID_PERIOD exactly when the documented pattern does not match
    assert (code == "INVALID_PERIOD") == (pattern.search(raw) is None)


# --- what code generators need ----------------------------------------------------------


def test_generator_friendly_shapes() -> None:
    states = ("KN", "LA", "FC")
    doc = openapi_document(states=states)
    pytest.importorskip("openapi_spec_validator").validate(doc)
    schemas = doc["components"]["schemas"]
    # the state parameter is one shared enum of exactly the release's codes
    assert schemas["StateCode"]["enum"] == sorted(states)
    for r in ROUTES:
        for p in doc["paths"][r.path]["get"]["parameters"]:
            if p["name"] == "state":
                assert p["schema"] == {"$ref": "#/components/schemas/StateCode"}
    assert "StateCode" not in openapi_document()["components"]["schemas"]  # no facts, no enum
    # an absolute server URL (variables with defaults), not a relative "/"
    server = doc["servers"][0]
    url = server["url"].format(**{k: v["default"] for k, v in server["variables"].items()})
    assert re.fullmatch(r"https?://[^/]+", url)
    # error bodies are the Problem model itself, which generators keep
    for item in doc["paths"].values():
        for status, resp in item["get"]["responses"].items():
            if status.startswith(("4", "5")):
                body = resp["content"][PROBLEM_JSON]
                assert body["schema"] == {"$ref": "#/components/schemas/Problem"}
                assert body["x-problem-codes"] == list(body["examples"])
    # rate-limit headers on answers, Retry-After on 429
    op = doc["paths"]["/v1/risk/lgas"]["get"]
    assert {"RateLimit", "RateLimit-Policy"} <= set(op["responses"]["200"]["headers"])
    assert {"Retry-After", "RateLimit", "RateLimit-Policy"} <= set(op["responses"]["429"]["headers"])
    # GeoJSON coordinates have items all the way down to a position of two numbers
    coords = schemas["BoundaryFeature"]["properties"]["geometry"]["properties"]["coordinates"]
    assert {r["$ref"].rsplit("/", 1)[1] for r in coords["anyOf"]} == {"PolygonCoordinates", "MultiPolygonCoordinates"}
    assert schemas["Position"]["items"] == {"type": "number"} and schemas["Position"]["maxItems"] == 2
    # months say whether their rainfall is provisional
    assert schemas["Month"]["properties"]["provisional"]["type"] == "boolean"


def test_generated_coordinates_schema_accepts_real_shapes() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = openapi_document(states=("KN",))
    schema = {**doc["components"]["schemas"]["BoundaryFeature"], "$defs": doc["components"]["schemas"]}
    text = orjson.dumps(schema).decode().replace("#/components/schemas/", "#/$defs/")
    validator = jsonschema.Draft202012Validator(orjson.loads(text))
    ring = [[8.5, 12.0], [8.6, 12.0], [8.6, 12.1], [8.5, 12.0]]
    feature = {"type": "Feature", "properties": {"lgaCode": "NG020001", "lga": "Ajingi", "state": "KN"},
               "geometry": {"type": "Polygon", "coordinates": [ring]}}
    validator.validate(feature)
    validator.validate({**feature, "geometry": {"type": "MultiPolygon", "coordinates": [[ring], [ring]]}})
    assert not validator.is_valid({**feature, "geometry": {"type": "Polygon", "coordinates": [[[8.5]]]}})
