"""Every field explains itself: in the OpenAPI schemas and in the bundle's datapackage.json each field
has a description; a number names its unit or the population it counts; a range end names its level
(the score's range is 80 %); the score says what it measures, in whom, and that it is modelled."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import polars as pl

from pipeline.datasets import downloads as d
from pipeline.site.openapi import openapi_document

# a unit, or the population counted: what makes a number readable
UNIT = re.compile(r"\b(share|people|children|months?|minutes|km²|mm|bytes|years?|degrees|HTTP status|LGAs|"
                  r"states|series|profiles|folds|clusters|locations|correlation|version|r)\b|%", re.I)
LEVEL = re.compile(r"\b\d+ ?%")
RANGE_END = re.compile(r"(^|_)(low|high)(_\d+)?$")


def properties(schema: dict[str, Any], path: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name, prop in (schema.get("properties") or {}).items():
        yield f"{path}.{name}", name, prop
        if isinstance(prop, dict):
            yield from properties(prop, f"{path}.{name}")
            if isinstance(prop.get("items"), dict):
                yield from properties(prop["items"], f"{path}.{name}[]")


def kinds(prop: dict[str, Any]) -> set[str]:
    t = prop.get("type")
    return set(t) if isinstance(t, list) else {t} if t else set()


def check_field(where: str, name: str, description: str, numeric: bool) -> list[str]:
    wrong = []
    if not description.strip():
        return [f"{where}: no description"]
    if numeric and not UNIT.search(description):
        wrong.append(f"{where}: a number without a unit or population: {description!r}")
    if RANGE_END.search(name) and not LEVEL.search(description):
        wrong.append(f"{where}: a range end without its level: {description!r}")
    if name in ("score_low", "score_high") and "80 %" not in description:
        wrong.append(f"{where}: the score's range is 80 %: {description!r}")
    if name == "score" and not all(w in description for w in ("modelled", "microscopy", "6–59 months")):
        wrong.append(f"{where}: the score must say it is modelled microscopy positivity, children 6–59 months")
    return wrong


def test_every_openapi_field_explains_itself():
    schemas = openapi_document()["components"]["schemas"]
    wrong = []
    for schema_name, schema in schemas.items():
        for where, name, prop in properties(schema, schema_name):
            wrong += check_field(where, name, str(prop.get("description", "")),
                                 bool(kinds(prop) & {"number", "integer"}))
    assert wrong == [], "\n".join(wrong)


def test_every_datapackage_field_explains_itself():
    """A bundle of every table's agreed columns and the fields the API schemas describe."""
    names: set[str] = set()
    for schema in openapi_document()["components"]["schemas"].values():
        names.update(n for _, n, p in properties(schema, "") if isinstance(p, dict) and kinds(p) & {"number"})
    frames = {stem: pl.DataFrame({c: [1.5] if c in names or c in d.UNITS else ["x"] for c in cols})
              for stem, cols in d.LEAD.items()}
    frames["context_lga"] = frames["context_lga"].with_columns(
        pl.lit(0.5).alias(c) for c in ("itn_use", "itn_use_low_90", "itn_use_high_90", "itn_use_2024",
                                       "itn_use_2024_low_90", "itn_use_2024_high_90", "irs_coverage",
                                       "effective_treatment", "response_index", "travel_minutes_to_care"))
    files = d.table_files(frames) + [d.BundleFile(f"{stem}.{ext}", "application/json", b"{}", stem)
                                     for stem in ("lga_outlines", "state_outlines") for ext in ("geojson", "parquet")]
    from pipeline.datasets.context import source_block

    notes = d._field_notes([d.Produced("context", {"/v1/context/states": {(): {"source": source_block()}}})])
    pkg = d.datapackage("r1", "m-1", "2026-11-22T10:00:00Z", frames, files, notes)
    wrong = []
    for res in pkg["resources"]:
        for f in res.get("schema", {}).get("fields", []):
            numeric = f["type"] in ("number", "integer")
            where = f"{res['name']}.{f['name']}"
            wrong += check_field(where, f["name"], f.get("description", ""), numeric)
            if numeric and not f.get("unit"):
                wrong.append(f"{where}: a number without `unit`")
    assert wrong == [], "\n".join(wrong)
