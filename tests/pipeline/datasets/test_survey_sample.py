"""Survey sample information: lower bounds go to the additive `*_lower_bound` fields, never to the exact
SPEC fields; small_sample only where certain. Unit tests on hand-made bounds, then the
real data (slow)."""

from __future__ import annotations

import csv
from typing import Any

import jsonschema
import polars as pl
import pytest

from pipeline.datasets import context, survey_sample, transmission
from pipeline.datasets.base import BuildContext
from pipeline.geography import load_geography
from pipeline.site.openapi import resource_schemas
from pipeline.sources import hbhi_microscopy, ndhs_clusters, urban_clusters
from tests.conftest import fits_of
from tests.paths import DATA_DIR

STATES = pl.DataFrame({"state_code": ["KN", "LA", "FC"], "state": ["Kano", "Lagos", "Federal Capital Territory"]})


def entry(year: int, test: str = "microscopy", n: int | None = None, clusters: int | None = None) -> dict[str, Any]:
    return {"survey_year": year, "positivity": 0.2, "low": None, "high": None, "clusters": clusters,
            "children_tested": n, "small_sample": None if n is None else n < 100, "test": test}


def bounds(*rows: tuple[int, str | None, str, int, str]) -> pl.DataFrame:
    return pl.DataFrame(
        [{"survey_year": y, "state_code": s, "quantity": q, "value": v, "key": k, "covers": "c"} for y, s, q, v, k in rows],
        schema=survey_sample.BOUNDS_SCHEMA,
    )


def test_bound_of_100_or_more_settles_small_sample_only() -> None:
    b = bounds((2018, "KN", "children_tested", 150, "hbhi_pfpr_lga_2018"), (2015, "KN", "children_tested", 99, "numalaria_urban_clusters"),
               (2018, "KN", "clusters", 40, "ndhs2018_clusters"))
    nat, st = survey_sample.attach([], {"KN": [entry(2015), entry(2018)]}, b)
    e15, e18 = st["KN"]
    assert (e15["children_tested"], e15["small_sample"], e15["children_tested_lower_bound"]) == (None, None, 99)
    assert (e18["children_tested"], e18["clusters"], e18["small_sample"]) == (None, None, False)
    assert (e18["children_tested_lower_bound"], e18["children_tested_lower_bound_covers"]) == (150, "c")
    assert "Apache-2.0" in e18["children_tested_lower_bound_source"]
    assert e18["clusters_lower_bound"] == 40 and nat == []
    assert list(e18)[-7:] == ["test", *survey_sample.FIELDS]


def test_exact_count_wins_and_children_bounds_only_for_microscopy() -> None:
    b = bounds((2018, "KN", "children_tested", 150, "hbhi_pfpr_lga_2018"), (2018, "KN", "clusters", 40, "ndhs2018_clusters"),
               (2018, "LA", "children_tested", 300, "hbhi_pfpr_lga_2018"))
    _, st = survey_sample.attach([], {"KN": [entry(2018, n=85, clusters=41)], "LA": [entry(2018, test="RDT")]}, b)
    kn, la = st["KN"][0], st["LA"][0]
    assert (kn["children_tested"], kn["small_sample"]) == (85, True)
    assert all(kn[f] is None for f in survey_sample.FIELDS)
    assert la["children_tested_lower_bound"] is None and la["small_sample"] is None


def test_largest_bound_wins_and_national_is_the_sum() -> None:
    hb = survey_sample.hbhi_bounds(pl.DataFrame({"lga": ["a", "b", "c"], "state": ["Kano", "Kano", "Lagos"],
                                                 "children": [60, 50, 20], "row": [2, 3, 4]}), STATES)
    ur = survey_sample.urban_bounds(pl.DataFrame({"survey_year": [2018, 2018, 2018], "cluster": [1, 2, 3],
                                                  "state": ["lagos", "lagos", "kano"], "children": [30, 0, 5],
                                                  "row": [2, 3, 4]}), STATES)
    best = survey_sample.largest(pl.concat([hb, ur]))
    got = {(r["state_code"], r["quantity"]): (r["value"], r["key"]) for r in best.iter_rows(named=True)}
    assert got[("KN", "children_tested")] == (110, "hbhi_pfpr_lga_2018")
    assert got[("LA", "children_tested")] == (30, "numalaria_urban_clusters")  # 30 > 20
    assert got[("LA", "clusters")] == (1, "numalaria_urban_clusters")  # the cluster with no child tested does not count
    assert got[(None, "children_tested")] == (130, "hbhi_pfpr_lga_2018")


def test_unknown_state_stops() -> None:
    from pipeline.errors import InputError

    with pytest.raises(InputError) as e:
        survey_sample.hbhi_bounds(pl.DataFrame({"lga": ["a"], "state": ["Narnia"], "children": [3], "row": [2]}), STATES, "f.csv")
    assert "Narnia" in e.value.reason


# --- real data --------------------------------------------------------------------------

needs_data = pytest.mark.skipif(not (DATA_DIR / hbhi_microscopy.LGA_CSV).is_file(), reason="real data not present")


@pytest.fixture(scope="module")
def real(real_build, tmp_path_factory):
    with fits_of(real_build, tmp_path_factory.mktemp("fits")):
        geo = load_geography(DATA_DIR)
        ctx = BuildContext(DATA_DIR, "t", geography=geo)
        return geo, transmission.produce(ctx), context.produce(ctx)


def approximate_counts() -> dict[tuple[int, str | None], set[int]]:
    """Every count the sample sources give, per (year, state name key or None), read here
    with the csv module, independently of the readers."""
    out: dict[tuple[int, str | None], set[int]] = {}

    def key(name: str) -> str:
        n = "".join(ch for ch in name.lower() if ch.isalpha())
        return {"fct": "fc", "fctabuja": "fc", "federalcapitalterritory": "fc"}.get(n, n)

    hb: dict[str, int] = {}
    for r in csv.DictReader((DATA_DIR / hbhi_microscopy.LGA_CSV).open()):
        hb[key(r["State"])] = hb.get(key(r["State"]), 0) + int(r["n"])
    for s, n in hb.items():
        out.setdefault((2018, s), set()).add(n)
    out.setdefault((2018, None), set()).add(sum(hb.values()))
    for r in csv.DictReader((DATA_DIR / ndhs_clusters.CLUSTERS_CSV).open()):
        out.setdefault((2018, key(r["admin1"])), set()).update(
            {int(r["clusters_with_child_12_23m"]), int(r["urban_clusters"])})
    ur: dict[tuple[int, str], list[int]] = {}
    for r in csv.DictReader((DATA_DIR / urban_clusters.CLUSTERS_CSV).open()):
        if r["child_6_59_tested_malaria"] not in ("NA", "0"):
            ur.setdefault((int(r["dhs_year"]), key(r["shstate"])), []).append(int(float(r["child_6_59_tested_malaria"])))
    for (y, s), ns in ur.items():
        out.setdefault((y, s), set()).update({len(ns), sum(ns)})
    out.setdefault((2018, None), set()).add(10185)  # the weighted national total of the survey table
    return out


def _state_keys(geo) -> dict[str, str]:
    return {c: "".join(ch for ch in n.lower() if ch.isalpha()) for c, n in geo.states.select("state_code", "state").iter_rows()} | {"FC": "fc"}


def _survey_of(real) -> tuple[dict, dict, dict[str, str]]:
    """The real /v1/transmission/states document, the source's approximate counts and the state keys."""
    geo, produced, _ = real
    return produced.documents["/v1/transmission/states"][()], approximate_counts(), _state_keys(geo)


@needs_data
@pytest.mark.slow
def test_real_no_approximate_count_in_an_exact_field(real) -> None:
    doc, approx, keys = _survey_of(real)
    areas = [(None, doc["national"]["survey_trend"])] + [(keys[s["state_code"]], s["survey_trend"]) for s in doc["states"]]
    checked = 0
    for area, entries in areas:
        for e in entries:
            counts = approx.get((e["survey_year"], area), set())
            for f in ("children_tested", "clusters"):
                assert e[f] is None or e[f] not in counts, (area, e["survey_year"], f, e[f])
                checked += bool(counts)
            # an exact field, when filled, carries no bound beside it
            for q in ("children_tested", "clusters"):
                assert e[q] is None or e[f"{q}_lower_bound"] is None
    assert checked > 100


@needs_data
@pytest.mark.slow
def test_real_2018_state_entries_carry_lower_bounds(real) -> None:
    doc, approx, keys = _survey_of(real)
    settled = 0
    for s in doc["states"]:
        e18 = next(e for e in s["survey_trend"] if e["survey_year"] == 2018)
        assert e18["test"] == "microscopy"
        ch, cl = e18["children_tested_lower_bound"], e18["clusters_lower_bound"]
        assert ch in approx[(2018, keys[s["state_code"]])] and 64 <= ch <= 489
        assert cl in approx[(2018, keys[s["state_code"]])]
        assert e18["children_tested_lower_bound_covers"] and "Licence" in e18["clusters_lower_bound_source"]
        # small_sample: false only where the bound settles it, never true from a bound
        assert e18["small_sample"] is (False if ch >= 100 else None)
        settled += e18["small_sample"] is False
        for e in s["survey_trend"]:
            assert e["small_sample"] is not True or e["children_tested"] is not None
    assert settled == 34  # three states have fewer than 100 children in the LGA-matched subset
    nat18 = next(e for e in doc["national"]["survey_trend"] if e["survey_year"] == 2018)
    assert nat18["children_tested"] is None  # the 10,185 of the source is a weighted total
    assert nat18["clusters_lower_bound"] == 1324
    assert {s["key"] for s in doc["source"]["survey_sample"]["sources"]} == set(survey_sample.SOURCE_KEYS)


@needs_data
@pytest.mark.slow
def test_real_documents_match_the_openapi_schemas(real) -> None:
    _, produced, ctx = real
    schemas = resource_schemas()

    def check(name: str, doc: Any) -> None:
        root = {**schemas[name], "components": {"schemas": schemas}}
        jsonschema.Draft202012Validator(root).validate(doc)

    check("TransmissionStatesResponse", produced.documents["/v1/transmission/states"][()])
    check("StateContextResponse", ctx.documents[context.STATES_ROUTE][()])
    for doc in ctx.documents[context.LGAS_ROUTE].values():
        check("LgaContextResponse", doc)


def test_without_bound_sources_sample_is_null_and_nothing_else_changes(tmp_path) -> None:
    empty = survey_sample.read_bounds(tmp_path, STATES)
    assert empty.height == 0 and dict(empty.schema) == survey_sample.BOUNDS_SCHEMA
    e = entry(2018, n=85)
    nat, st = survey_sample.attach([e], {"KN": [entry(2018)]}, empty)
    assert nat == [{**e, **dict.fromkeys(survey_sample.FIELDS)}]
    assert st["KN"][0]["small_sample"] is None and all(st["KN"][0][f] is None for f in survey_sample.FIELDS)
