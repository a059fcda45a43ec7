"""A consistent national survey trend: one test per series (docs/survey.md, "National trend").

The survey table has national figures for 2010 (test not named by its source), 2018 (RDT
only) and 2021 (both tests), and zone figures of both tests for 2010, 2015 and 2018. Mixing
them in one series would show part of a change of test as a decline, so:

* each national series holds one test: microscopy (the one the risk model uses) and RDT;
* a round without a national figure of that test, but with that test for every zone, gets
  the population-weighted mean of its zones, marked `derived` (the weights are today's
  population: no zone population per survey year is loaded);
* a national figure whose source does not name its test is assigned the test whose
  population-weighted zone mean of the same round it matches, when exactly one does
  within ASSUMED_TEST_TOLERANCE; the entry keeps `test_assumed: true` and says why.

Pure polars: frames in, frames out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

TESTS = ("microscopy", "RDT")
# A national figure of unnamed test matches a test when it lies within this of that test's
# population-weighted zone mean (shares; 0.03 = 3 percentage points: about the difference a
# weighting by today's rather than the survey year's population can make).
ASSUMED_TEST_TOLERANCE = 0.03
DECIMALS = 4


def zone_means(rows: pl.DataFrame, zone_population: Mapping[str, float]) -> pl.DataFrame:
    """survey_year, test, positivity, zones, sources: the population-weighted mean of the
    zone figures of each round and test, only where every zone has one."""
    zones = sorted(zone_population)
    z = rows.filter(pl.col("level") == "zone", pl.col("area").is_in(zones)).unique(
        subset=["survey_year", "area", "test"], keep="first", maintain_order=True
    )
    if z.height == 0:
        return pl.DataFrame(schema={"survey_year": pl.Int64, "test": pl.Utf8, "positivity": pl.Float64,
                                    "zones": pl.UInt32, "sources": pl.List(pl.Utf8)})
    w = pl.col("area").replace_strict(dict(zone_population), return_dtype=pl.Float64)
    return (
        z.with_columns(w.alias("_w"))
        .group_by("survey_year", "test")
        .agg(
            ((pl.col("positivity") * pl.col("_w")).sum() / pl.col("_w").sum()).alias("positivity"),
            pl.col("area").n_unique().alias("zones"),
            pl.col("source").unique().sort().alias("sources"),
        )
        .filter(pl.col("zones") == len(zones))
        .sort("survey_year", "test")
    )


def assign_test(value: float, by_test: Mapping[str, float], tolerance: float = ASSUMED_TEST_TOLERANCE) -> str | None:
    """The one test whose zone mean lies within `tolerance` of `value`; None if none or both do."""
    near = [t for t, v in by_test.items() if abs(v - value) <= tolerance]
    return near[0] if len(near) == 1 else None


def consistent_rows(survey: pl.DataFrame, zone_population: Mapping[str, float]) -> pl.DataFrame:
    """National and residence rows with the assumed tests checked, plus the derived national
    rows; columns of `survey` plus `derived` (bool), `derived_from` and `test_note` (str or null)."""
    zm = zone_means(survey, zone_population)
    by_year: dict[int, dict[str, float]] = {}
    for y, t, p in zm.select("survey_year", "test", "positivity").iter_rows():
        by_year.setdefault(int(y), {})[t] = float(p)
    nat = survey.filter(pl.col("level").is_in(["national", "residence"])).with_columns(
        pl.lit(False).alias("derived"), pl.lit(None, dtype=pl.Utf8).alias("derived_from"),
        pl.lit(None, dtype=pl.Utf8).alias("test_note"),
    )
    fixes: dict[int, tuple[str, str]] = {}
    for r in nat.filter(pl.col("level") == "national", pl.col("test_assumed")).iter_rows(named=True):
        zones = by_year.get(int(r["survey_year"]), {})
        test = assign_test(float(r["positivity"]), zones)
        means = ", ".join(f"{t} {zones[t]:.3f}" for t in TESTS if t in zones)
        if test is None:
            note = (f"The source does not name the test; the same survey's population-weighted zone means "
                    f"({means or 'none'}) do not settle it, so the label is the source's assumption.")
            test = r["test"]
        else:
            note = (f"The source does not name the test. The same survey's population-weighted zone means are "
                    f"{means}: the national figure ({r['positivity']:.3f}) matches {test}, so it is labelled "
                    f"{test}.")
        fixes[int(r["survey_year"])] = (test, note)
    if fixes:
        year_test = pl.col("survey_year").replace_strict({y: t for y, (t, _) in fixes.items()}, default=None)
        year_note = pl.col("survey_year").replace_strict({y: n for y, (_, n) in fixes.items()}, default=None)
        hit = pl.col("test_assumed") & year_test.is_not_null()
        nat = nat.with_columns(
            pl.when(hit).then(year_test).otherwise(pl.col("test")).alias("test"),
            pl.when(hit).then(year_note).otherwise(pl.col("test_note")).alias("test_note"),
        )
    have = {(int(y), t) for y, t in nat.filter(pl.col("level") == "national").select("survey_year", "test").iter_rows()}
    survey_of = dict(survey.select("survey_year", "survey").unique(subset=["survey_year"]).iter_rows())
    derived = []
    for r in zm.iter_rows(named=True):
        if (int(r["survey_year"]), r["test"]) in have:
            continue
        derived.append({
            "survey_year": int(r["survey_year"]), "survey": survey_of.get(r["survey_year"]), "level": "national",
            "area": "Nigeria", "state_code": None, "test": r["test"], "test_assumed": False,
            "positivity": round(float(r["positivity"]), DECIMALS), "low": None, "high": None, "clusters": None,
            "children_tested": None,
            "source": "derived: population-weighted mean of the " + str(r["zones"]) + " zone figures ("
                      + "; ".join(r["sources"]) + ")",
            "derived": True,
            "derived_from": f"{r['zones']} geopolitical zones, {r['test']}, weighted by population",
            "test_note": None,
        })
    if derived:
        nat = pl.concat([nat, pl.DataFrame(derived, schema=nat.schema)], how="vertical")
    return nat.sort("survey_year", "level", "test")


def series(rows: pl.DataFrame, test: str) -> pl.DataFrame:
    """One test's national rows (one per round)."""
    return rows.filter(pl.col("level") == "national", pl.col("test") == test).sort("survey_year")


def validation_figures(survey: pl.DataFrame, zone_population: Mapping[str, float],
                       state_population: Mapping[str, float]) -> dict[str, Any]:
    """How well a population-weighted mean reproduces a published national figure (the method
    used for the derived entries), and the checks of assumed tests."""
    zm = zone_means(survey, zone_population)
    published = survey.filter(pl.col("level") == "national", ~pl.col("test_assumed"))
    st = survey.filter(pl.col("level") == "state", pl.col("state_code").is_in(list(state_population)))
    checks = []
    for r in published.iter_rows(named=True):
        y, t, v = int(r["survey_year"]), r["test"], float(r["positivity"])
        z = zm.filter(pl.col("survey_year") == y, pl.col("test") == t)
        s = st.filter(pl.col("survey_year") == y, pl.col("test") == t).unique(subset=["state_code"], keep="first")
        s_mean = None
        if state_population and s.height == len(state_population):
            w = np.array([state_population[c] for c in s["state_code"]])
            s_mean = float(np.sum(s["positivity"].to_numpy() * w) / w.sum())
        checks.append({
            "survey_year": y, "test": t, "published": round(v, DECIMALS),
            "from_zones": round(float(z["positivity"][0]), DECIMALS) if z.height else None,
            "from_states": None if s_mean is None else round(s_mean, DECIMALS),
        })
    rows = consistent_rows(survey, zone_population)
    assumed = [
        {"survey_year": int(r["survey_year"]), "labelled": r["test"], "note": r["test_note"]}
        for r in rows.filter(pl.col("level") == "national", pl.col("test_note").is_not_null()).iter_rows(named=True)
    ]
    return {
        "weighting": "population (WorldPop/NPC bottom-up, current), not the survey year's",
        "published_vs_population_weighted": checks,
        "assumed_tests": assumed,
        "derived_entries": [
            {"survey_year": int(r["survey_year"]), "test": r["test"], "positivity": r["positivity"]}
            for r in rows.filter(pl.col("derived")).iter_rows(named=True)
        ],
    }
