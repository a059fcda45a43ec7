"""The national survey trend (pipeline.model.national_trend): one test per series, derived
rounds labelled, unnamed tests checked against the same survey's zones."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.datasets.transmission import national_survey_trends
from pipeline.model import national_trend

ZONES = {"North": 3.0, "South": 1.0}
SCHEMA = {
    "survey_year": pl.Int64, "survey": pl.Utf8, "level": pl.Utf8, "area": pl.Utf8, "state_code": pl.Utf8,
    "test": pl.Utf8, "test_assumed": pl.Boolean, "positivity": pl.Float64, "low": pl.Float64, "high": pl.Float64,
    "clusters": pl.Int64, "children_tested": pl.Int64, "source": pl.Utf8,
}


def _row(year: int, level: str, area: str, test: str, p: float, assumed: bool = False, source: str = "table") -> dict:
    return {"survey_year": year, "survey": f"{year} S", "level": level, "area": area, "state_code": None,
            "test": test, "test_assumed": assumed, "positivity": p, "low": None, "high": None, "clusters": None,
            "children_tested": None, "source": source}


def _survey(national_2010: float = 0.42) -> pl.DataFrame:
    rows = [
        _row(2010, "national", "Nigeria", "RDT", national_2010, assumed=True, source="page: news"),
        _row(2010, "residence", "urban", "RDT", 0.23, assumed=True, source="page: news"),
        _row(2010, "zone", "North", "microscopy", 0.46), _row(2010, "zone", "South", "microscopy", 0.30),
        _row(2010, "zone", "North", "RDT", 0.55), _row(2010, "zone", "South", "RDT", 0.40),
        _row(2015, "zone", "North", "microscopy", 0.32), _row(2015, "zone", "South", "microscopy", 0.16),
        _row(2018, "national", "Nigeria", "RDT", 0.355),
        _row(2018, "zone", "North", "microscopy", 0.26),  # one zone only: no derived 2018 microscopy
        _row(2021, "national", "Nigeria", "microscopy", 0.22),
        _row(2021, "national", "Nigeria", "RDT", 0.40),
    ]
    return pl.DataFrame(rows, schema=SCHEMA)


def test_each_series_holds_one_test_and_derived_rounds_are_labelled():
    series = national_survey_trends(_survey(), ZONES)
    micro, rdt = series["microscopy"], series["RDT"]
    assert {e["test"] for e in micro} == {"microscopy"} and {e["test"] for e in rdt} == {"RDT"}
    assert [e["survey_year"] for e in micro] == [2010, 2015, 2021]
    assert [e["survey_year"] for e in rdt] == [2010, 2018, 2021]
    by = {e["survey_year"]: e for e in micro}
    # 2015: population-weighted zone mean (3 x 0.32 + 1 x 0.16) / 4
    assert by[2015]["positivity"] == pytest.approx(0.28) and by[2015]["derived"] is True
    assert "2 geopolitical zones" in by[2015]["derived_from"]
    assert by[2021]["derived"] is False and by[2021]["derived_from"] is None
    # the RDT 2010 entry is the zones' RDT mean, derived, not the relabelled national figure
    r10 = {e["survey_year"]: e for e in rdt}[2010]
    assert r10["positivity"] == pytest.approx((3 * 0.55 + 0.40) / 4) and r10["derived"] is True


def test_an_unnamed_test_is_settled_by_the_same_surveys_zones():
    micro = national_survey_trends(_survey(0.42), ZONES)["microscopy"]
    e10 = micro[0]
    # zone microscopy mean 0.42, RDT 0.5125: the figure is microscopy, still marked assumed
    assert (e10["survey_year"], e10["test"], e10["test_assumed"], e10["derived"]) == (2010, "microscopy", True, False)
    assert "matches microscopy" in e10["test_note"]
    # its urban figure comes from the same source, so it moves with it
    assert e10["urban"] == 0.23


def test_an_unnamed_test_the_zones_cannot_settle_keeps_the_source_label():
    # halfway between the zone means of the two tests: neither within the tolerance
    series = national_survey_trends(_survey(0.466), ZONES)
    assert 2010 not in [e["survey_year"] for e in series["microscopy"] if not e["derived"]]
    r10 = [e for e in series["RDT"] if e["survey_year"] == 2010]
    assert len(r10) == 1 and r10[0]["test_assumed"] is True and "do not settle it" in r10[0]["test_note"]
    assert national_trend.assign_test(0.466, {"microscopy": 0.42, "RDT": 0.5125}) is None
    assert national_trend.assign_test(0.47, {"microscopy": 0.46, "RDT": 0.48}) is None  # both near


def test_validation_figures_compare_the_method_with_published_national_values():
    figs = national_trend.validation_figures(_survey(), ZONES, {})
    pub = {(c["survey_year"], c["test"]): c for c in figs["published_vs_population_weighted"]}
    assert pub[(2018, "RDT")]["from_zones"] is None  # the 2018 zones have no RDT here
    assert pub[(2021, "microscopy")]["published"] == 0.22
    assert [a["survey_year"] for a in figs["assumed_tests"]] == [2010]
    assert {(d["survey_year"], d["test"]) for d in figs["derived_entries"]} == {(2010, "RDT"), (2015, "microscopy")}
