"""Every response file of a real build against its schema in the OpenAPI document.

The document is the one the release ships (`docs/openapi.json`), and each object
schema is closed for this check (`additionalProperties: false` wherever it lists
properties): a field added to a response without being added to the schema in
pipeline/site/openapi.py fails here. The published document itself stays open,
since the API promises additive fields.

Every file is validated with jsonschema-rs (JSON Schema 2020-12, the dialect of OpenAPI 3.1),
which checks the thousands of documents of a real build in under a second where the pure-Python
OpenAPI validator needed a minute; the first document of each route and a damaged copy of it are
also checked with the OpenAPI validator, and the two must agree.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema_rs
import orjson
import pytest
from openapi_schema_validator import OAS31Validator

from edge.files import NAMES_KEY
from edge.routes import DOWNLOAD_FILE, GEOJSON, JSON, ROUTES, Facts, route_values
from pipeline.release.manifest import MANIFEST_NAME
from pipeline.site.openapi import RESPONSE_SCHEMA
from tests.paths import data_marks

pytestmark = data_marks()


def closed(node: Any) -> Any:
    """The schema with every object that lists properties closed to others."""
    if isinstance(node, dict):
        out = {k: closed(v) for k, v in node.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [closed(v) for v in node]
    return node


def fast(schema: Any) -> Any:
    return jsonschema_rs.Draft202012Validator(schema)


def damaged(body: Any) -> Any:
    """The document with a field no schema declares, at its top level or in its first item."""
    if isinstance(body, dict):
        return {**body, "undeclared_field": 1}
    if isinstance(body, list) and body:
        return [damaged(body[0]), *body[1:]]
    return {"not": "this type"}


@pytest.mark.parametrize("validate", [OAS31Validator, fast])
def test_closing_a_schema_rejects_an_undeclared_field(validate: Any) -> None:
    schema = closed({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert validate(schema).is_valid({"a": 1})
    assert not validate(schema).is_valid({"a": 1, "b": 2})
    assert not validate(schema).is_valid({"a": "1"})


@pytest.mark.heavy
def test_every_rendered_response_matches_its_schema(real_build: Path) -> None:
    release = (real_build / "current").resolve()
    manifest = orjson.loads((release / MANIFEST_NAME).read_bytes())
    document = orjson.loads((release / "docs" / "openapi.json").read_bytes())
    components = closed(document["components"])
    facts = Facts.from_json(manifest["facts"])

    checked: set[str] = set()
    failures: Counter[tuple[str, str]] = Counter()
    example: dict[tuple[str, str], str] = {}
    disagree: list[str] = []

    def where(err: Any) -> str:
        return f"{'/'.join(map(str, err.instance_path))}: {err.message[:160]}"

    def cross_check(path: str, key: str, body: Any, schema: Any) -> None:
        """The OpenAPI validator must judge the document and a damaged copy as the fast one does."""
        for doc in (body, damaged(body)):
            if OAS31Validator(schema).is_valid(doc) != fast(schema).is_valid(doc):
                disagree.append(f"{path} ({key}{'' if doc is body else ', damaged'})")

    for route in ROUTES:
        name = RESPONSE_SCHEMA[route.path]
        schema = {"$ref": f"#/components/schemas/{name}", "components": components}
        validator = fast(schema)
        if route.beside_pointer:  # the release list: beside `current`, not in the release
            listing = orjson.loads((real_build / route.file_key).read_bytes())
            assert listing["current"] == manifest["release_id"]
            cross_check(route.path, route.file_key, listing, schema)
            for err in validator.iter_errors(listing):
                failures[(route.path, where(err))] += 1
                example.setdefault((route.path, where(err)), route.file_key)
            continue
        if route.dataset not in facts.available:
            continue
        first = True
        for values in route_values(route, facts):
            if route.media_type(values) not in (JSON, GEOJSON):
                continue  # format=csv: the same document as text, checked against the JSON in the tabular tests
            key = route.key(values)
            checked.add(key)
            body = orjson.loads((release / key).read_bytes())
            if first:
                cross_check(route.path, key, body, schema)
                first = False
            for err in validator.iter_errors(body):
                failures[(route.path, where(err))] += 1
                example.setdefault((route.path, where(err)), key)

    # every response file of the release was checked: JSON and GeoJSON outside the docs site and the
    # bundle files (those are data files with their own datapackage.json schemas, not API responses)
    responses = {k for k in manifest["files"] if k.endswith((".json", ".geojson"))
                 and not k.startswith(("docs/", DOWNLOAD_FILE.key_prefix)) and k != NAMES_KEY}  # the edge's own index
    assert checked == responses
    assert len(checked) > 1000  # a real build: every month x state, not a handful
    assert not disagree, "the two validators disagree on: " + ", ".join(disagree)

    report = [f"{n} x {path} {what} (e.g. {example[(path, what)]})" for (path, what), n in failures.most_common(20)]
    assert not failures, "responses that do not match their OpenAPI schema:\n" + "\n".join(report)
