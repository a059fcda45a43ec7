"""Every response file of a real build against its schema in the OpenAPI document.

The document is the one the release ships (`docs/openapi.json`), and each object
schema is closed for this check (`additionalProperties: false` wherever it lists
properties): a field added to a response without being added to the schema in
pipeline/site/openapi.py fails here. The published document itself stays open,
since the API promises additive fields.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

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


def test_closing_a_schema_rejects_an_undeclared_field() -> None:
    schema = closed({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert OAS31Validator(schema).is_valid({"a": 1})
    assert not OAS31Validator(schema).is_valid({"a": 1, "b": 2})


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
    for route in ROUTES:
        name = RESPONSE_SCHEMA[route.path]
        validator = OAS31Validator({"$ref": f"#/components/schemas/{name}", "components": components})
        if route.beside_pointer:  # the release list: beside `current`, not in the release
            listing = orjson.loads((real_build / route.file_key).read_bytes())
            assert listing["current"] == manifest["release_id"]
            for err in validator.iter_errors(listing):
                failures[(route.path, f"{'/'.join(map(str, err.absolute_path))}: {err.message[:160]}")] += 1
                example.setdefault((route.path, f"{'/'.join(map(str, err.absolute_path))}: {err.message[:160]}"),
                                   route.file_key)
            continue
        if route.dataset not in facts.available:
            continue
        for values in route_values(route, facts):
            if route.media_type(values) not in (JSON, GEOJSON):
                continue  # format=csv: the same document as text, checked against the JSON in the tabular tests
            key = route.key(values)
            checked.add(key)
            body = orjson.loads((release / key).read_bytes())
            for err in validator.iter_errors(body):
                where = (route.path, f"{'/'.join(map(str, err.absolute_path))}: {err.message[:160]}")
                failures[where] += 1
                example.setdefault(where, key)

    # every response file of the release was checked: JSON and GeoJSON outside the docs site and the
    # bundle files (those are data files with their own datapackage.json schemas, not API responses)
    responses = {k for k in manifest["files"] if k.endswith((".json", ".geojson"))
                 and not k.startswith(("docs/", DOWNLOAD_FILE.key_prefix)) and k != NAMES_KEY}  # the edge's own index
    assert checked == responses
    assert len(checked) > 1000  # a real build: every month x state, not a handful

    report = [f"{n} x {path} {what} (e.g. {example[(path, what)]})" for (path, what), n in failures.most_common(20)]
    assert not failures, "responses that do not match their OpenAPI schema:\n" + "\n".join(report)
