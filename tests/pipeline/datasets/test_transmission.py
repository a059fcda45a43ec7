"""Transmission producer: SPEC 2.6-2.8 shapes and orders, survey trends, the check, 503 path.

Fixtures are tiny data directories in exactly the real files' formats; expected
values are worked out by hand from the fixture numbers.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.datasets.base import BuildContext
from pipeline.datasets.transmission import (
    DEFAULT_PARAMS,
    one_row_per_round,
    produce,
    survey_trends,
)
from pipeline.errors import DatasetUnavailable
from pipeline.geography import Geography
from pipeline.model.seasons import (
    season_centre,
    season_from_index,
)
from tests.paths import DATA_DIR, REPO_ROOT, needs_data

ROOT = REPO_ROOT

KANO = [0.2, 0.5, 3, 12, 50, 110, 210, 287, 150, 30, 1, 0.1]
LAGOS = [25, 50, 100, 150, 200, 329, 150, 84, 228, 150, 50, 20]
AGEGE_SHAPE = [10, 10, 10, 10, 10, 10, 10, 10, 10, 100, 50, 10]

SURVEY_HEADER = [
    "survey", "year", "level", "area", "zone", "test", "positivity_pct", "ci_low_pct", "ci_high_pct",
    "n_clusters", "n_tested", "n_tested_kind", "source", "note",
]
SURVEY_ROWS = [
    ["2010 NMIS", "2010", "national", "Nigeria", "", "RDT (assumed)", "42", "", "", "", "", "", "page: news", ""],
    ["2010 NMIS", "2010", "zone", "North West", "North West", "microscopy", "48.2", "", "", "", "", "", "dhs.csv", ""],
    ["2015 NMIS", "2015", "state", "Kano", "North West", "RDT", "30", "", "", "", "", "", "dhs.csv", ""],
    ["2015 NMIS", "2015", "state", "Lagos", "South West", "microscopy", "10.5", "8.0", "13.1", "", "85", "unweighted", "dhs.csv", ""],
    ["2018 NDHS", "2018", "state", "Kano", "North West", "microscopy", "40.1", "", "", "", "", "", "dhs.csv", ""],
    ["2018 NDHS", "2018", "state", "Kano", "North West", "microscopy", "40.1", "35.0", "45.3", "", "", "", "paper", ""],
    ["2018 NDHS", "2018", "state", "Kano", "North West", "RDT", "55", "", "", "", "", "", "dhs.csv", ""],
    # a round with state rows covers every state (the reader refuses a cut file otherwise)
    ["2018 NDHS", "2018", "state", "Lagos", "South West", "microscopy", "1.8", "", "", "", "", "", "dhs.csv", ""],
    ["2021 NMIS", "2021", "state", "Kano", "North West", "microscopy", "30.2", "", "", "", "", "", "xlsx", ""],
    ["2021 NMIS", "2021", "state", "Lagos", "South West", "microscopy", "2.6", "", "", "", "", "", "xlsx", ""],
    ["2021 NMIS", "2021", "national", "Nigeria", "", "microscopy", "22.3", "", "", "", "", "", "xlsx", ""],
    ["2021 NMIS", "2021", "residence", "urban", "", "microscopy", "10.5", "", "", "", "", "", "xlsx", ""],
    ["2021 NMIS", "2021", "residence", "rural", "", "microscopy", "26.7", "", "", "", "", "", "xlsx", ""],
    ["2021 NMIS", "2021", "residence", "urban", "", "RDT", "20", "", "", "", "", "", "xlsx", ""],
]


def small_geography() -> Geography:
    """Two states, two LGAs each; LGA code order differs from alphabetical order."""
    states = pl.DataFrame(
        {
            "state_code": ["KN", "LA"],
            "state": ["Kano", "Lagos"],
            "zone": ["North West", "South West"],
            "ocha_pcode": ["NG020", "NG025"],
            "lgas": [2, 2],
            "population": [3000, 1000],
            "area_km2": [40.0, 20.0],
        }
    )
    lgas = pl.DataFrame(
        {
            "lga_code": ["NG020001", "NG020002", "NG025001", "NG025002"],
            "lga": ["Tarauni", "Dala", "Ikeja", "Agege"],
            "state_code": ["KN", "KN", "LA", "LA"],
            "eha_code": ["1", "2", "3", "4"],
            "population": [1000, 2000, 500, 500],
            "area_km2": [10.0, 30.0, 10.0, 10.0],
            "density_per_km2": [100.0, 66.7, 50.0, 50.0],
            "is_urban": [False, False, False, False],
            "rep_lon": [8.5, 8.5, 3.3, 3.3],
            "rep_lat": [12.0, 12.0, 6.6, 6.6],
        }
    )
    crosswalk = pl.DataFrame(
        {"lga_code": lgas["lga_code"], "eha_code": lgas["eha_code"], "method": ["test"] * 4, "note": [""] * 4}
    )
    return Geography(states=states, lgas=lgas, outlines={}, crosswalk=crosswalk)


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def make_data_dir(root: Path, survey: bool = True, cases: bool = True) -> Path:
    """A data directory holding the transmission inputs in the real files' formats."""
    rows = []
    for pcode, name, prof in (("NG020", "Kano", KANO), ("NG025", "Lagos", LAGOS)):
        rows += [[pcode, name, m + 1, v, v] for m, v in enumerate(prof)]
    _write_csv(
        root / "rainfall/nga_state_chirps_climatology_monthly.csv",
        ["pcode", "state_name", "mo", "mean_1991_2020_mm", "wfp_lta_mm"], rows,
    )
    lga_rows = []
    for state, lga, shape in (
        ("Kano", "Tarauni", [2 * v for v in KANO]),
        ("Kano", "Dala", KANO),
        ("Lagos", "Ikeja", LAGOS),
        ("Lagos", "Agege", AGEGE_SHAPE),
    ):
        lga_rows.append([state, lga, 10.0, 8.0, "2001-2016", *shape, sum(shape)])
    _write_csv(
        root / "rainfall/nga_lga_idm_gsod_climatology_2001_2016.csv",
        ["state", "lga", "lat", "lon", "years_used", *[f"m{m:02d}_mm" for m in range(1, 13)], "annual_mm"],
        lga_rows,
    )
    if survey:
        _write_csv(root / "malaria/survey_positivity_u5.csv", SURVEY_HEADER, SURVEY_ROWS)
    if cases:
        recorded = np.roll(KANO, 1)  # exactly the predicted Kano shape
        rows = [[i, "Dala", m + 1, v, 1000, v] for i, (m, v) in enumerate(enumerate(recorded))]
        rows += [[12 + m, "Ikeja", m + 1, 50.0 + m, 1000, 50.0 + m] for m in range(12)]
        _write_csv(
            root / "malaria/cases/numalariamodeling_hbhi_nigeria_archetype_seasonality/archetype_incidence_NGA_RIA_v3.csv",
            ["", "seasonality", "month", "cases", "population", "incidence"], rows,
        )
        _write_csv(
            root / "malaria/numalariamodeling_hbhi_nigeria/LGA_and_respective_archetype.csv",
            ["", "LGA", "archetype"],
            [[1, "Tarauni", "Dala"], [2, "Dala", "Dala"], [3, "Ikeja", "Ikeja"], [4, "Agege", "Ikeja"]],
        )
    return root


@pytest.fixture()
def produced(tmp_path: Path):
    ctx = BuildContext(data_dir=make_data_dir(tmp_path), updated_at="2026-01-01T00:00:00Z", geography=small_geography())
    return produce(ctx)


SEASON_KEYS = ["peak_month", "season_start_month", "season_end_month", "season_months", "high_months", "seasonal_index"]
EXTRA_SEASON_KEYS = ["season_centre_month", "peak_window", "lag_months", "seasonal_floor",
                     "high_season_share_of_peak", "fitted_without_own_series", "peak_month_null_reason",
                     "season_class", "season_trough_to_peak", "peak_window_probability", "peak_window_calibrated",
                     "season_start_error_months", "season_end_error_months", "best_4_months_start_month",
                     "best_4_months_share", "best_4_months_start_error_months", "best_4_months_share_error",
                     "season_level", "season_class_trough_to_peak"]
TREND_KEYS = ["survey_year", "positivity", "low", "high", "clusters", "children_tested", "small_sample"]
CHECK_KEYS = ["series", "states", "median_correlation", "mean_months_off", "mean_months_peak_is_off"]


def test_states_document_shape_and_order(produced) -> None:
    assert produced.dataset == "transmission"
    doc = produced.documents["/v1/transmission/states"][()]
    assert list(doc)[:3] == ["method", "national", "states"]
    m = doc["method"]
    assert list(m)[:4] == ["cases_follow_rain_by_months", "high_season_share_of_peak", "description", "check"]
    # the published share is the national season's: where its rain-driven part reaches half its peak
    nat = doc["national"]["season"]
    assert m["high_season_share_of_peak"] == nat["high_season_share_of_peak"]
    assert nat["high_season_share_of_peak"] == round(nat["seasonal_floor"] + (1 - nat["seasonal_floor"]) / 2, 3)
    assert m["parameters_fitted_to_series"] == 2
    assert list(m["check"])[:5] == CHECK_KEYS
    assert list(doc["national"]) == ["season", "survey_trend", "survey_trend_rdt"]  # the RDT series is additive
    assert list(doc["national"]["season"]) == SEASON_KEYS + EXTRA_SEASON_KEYS
    assert [s["state_code"] for s in doc["states"]] == ["KN", "LA"]
    for s in doc["states"]:
        assert list(s) == ["state_code", "state", "zone", "season", "survey_trend"]
        assert list(s["season"]) == SEASON_KEYS + EXTRA_SEASON_KEYS
        assert len(s["season"]["seasonal_index"]) == 12
    assert doc["states"][0]["state"] == "Kano" and doc["states"][0]["zone"] == "North West"
    assert "CHIRPS" in doc["source"]["rainfall"]


def _aggregate(indices: list[list[float]], pop: list[float]) -> np.ndarray:
    """A group's season from its LGAs' published indices: each scaled to mean 1, population-weighted."""
    m = np.array(indices, dtype=float)
    m = m / m.mean(axis=1, keepdims=True)
    prof = np.asarray(pop, dtype=float) @ m / sum(pop)
    return np.round(prof / prof.max(), 3)


def _lga_seasons(produced) -> dict[str, tuple[dict, float]]:
    pop = dict(zip(small_geography().lgas["lga_code"], small_geography().lgas["population"], strict=True))
    return {r["lga_code"]: (r, float(pop[r["lga_code"]])) for d in produced.documents["/v1/transmission/lgas"].values()
            for r in d["lgas"]}


def test_state_seasons_follow_the_published_rule(produced) -> None:
    """Model 4: a state's index is the population-weighted mean of its LGAs' (a client can recompute it),
    its floor the quietest month, its high share halfway, its lag the centre's delay after the state's rain."""
    doc = produced.documents["/v1/transmission/states"][()]
    assert doc["method"]["season_rule"] == "model_4"
    lgas = _lga_seasons(produced)
    for s, rain in zip(doc["states"], (KANO, LAGOS), strict=True):
        season = s["season"]
        mine = [(r, p) for r, p in lgas.values() if r["lga_code"] in {x["lga_code"] for x in
                produced.documents["/v1/transmission/lgas"][(s["state_code"],)]["lgas"]}]
        index = _aggregate([r["seasonal_index"] for r, _ in mine], [p for _, p in mine])
        assert season["seasonal_index"] == list(index)
        floor = float(index.min())
        assert season["seasonal_floor"] == round(floor, 3)
        share = season["high_season_share_of_peak"]
        assert share == round(floor + (1 - floor) / 2, 3)
        # a client recomputes the high months from the index and the season's own share
        assert season["high_months"] == [m + 1 for m in range(12) if index[m] >= share]
        assert season["season_centre_month"] == round(float(season_centre(index)[0]), 1)
        delay = (season_centre(index)[0] - season_centre(np.array([rain], dtype=float))[0]) % 12
        assert season["lag_months"] == round(float(delay - 12 if delay >= 6 else delay), 1)
        assert max(season["seasonal_index"]) == 1.0


def test_national_season_is_population_weighted(produced) -> None:
    doc = produced.documents["/v1/transmission/states"][()]
    lgas = list(_lga_seasons(produced).values())
    nat = doc["national"]["season"]
    assert nat["seasonal_index"] == list(_aggregate([r["seasonal_index"] for r, _ in lgas], [p for _, p in lgas]))
    unweighted = _aggregate([r["seasonal_index"] for r, _ in lgas], [1.0] * len(lgas))
    assert nat["seasonal_index"] != list(unweighted)
    assert nat["seasonal_floor"] == min(nat["seasonal_index"])


def test_lga_documents_alphabetical_with_downscaled_rain(produced) -> None:
    docs = produced.documents["/v1/transmission/lgas"]
    assert set(docs) == {("KN",), ("LA",)}
    kn = docs[("KN",)]
    assert (kn["state_code"], kn["state"]) == ("KN", "Kano")
    assert [r["lga"] for r in kn["lgas"]] == ["Dala", "Tarauni"]
    for r in kn["lgas"]:
        assert list(r) == ["lga_code", "lga", *SEASON_KEYS, *EXTRA_SEASON_KEYS, "typical_rainfall_mm"]
    by = {r["lga"]: r for r in kn["lgas"]}
    # GSOD: Tarauni = 2 x Dala everywhere; areas 10 and 30 -> area-weighted state mean
    # = 1.25 x Dala, so Tarauni gets 1.6 and Dala 0.8 of the state's CHIRPS value
    assert by["Tarauni"]["typical_rainfall_mm"][7] == round(1.6 * 287, 1)
    assert by["Dala"]["typical_rainfall_mm"][7] == round(0.8 * 287, 1)
    la = {r["lga"]: r for r in docs[("LA",)]["lgas"]}
    assert [r["lga"] for r in docs[("LA",)]["lgas"]] == ["Agege", "Ikeja"]
    mean = (np.array(la["Agege"]["typical_rainfall_mm"]) + np.array(la["Ikeja"]["typical_rainfall_mm"])) / 2
    assert np.allclose(mean, LAGOS, atol=0.1)
    for r in [*kn["lgas"], *la.values()]:
        assert max(r["seasonal_index"]) == 1.0 and min(r["seasonal_index"]) > 0
        assert r["seasonal_floor"] == min(r["seasonal_index"])
        assert r["peak_month"] == season_from_index(r["seasonal_index"], r["high_season_share_of_peak"]).peak_month


def test_survey_trends(produced) -> None:
    doc = produced.documents["/v1/transmission/states"][()]
    nat = doc["national"]["survey_trend"]
    rdt = doc["national"]["survey_trend_rdt"]
    # one test per series: the 2010 figure names no test and the fixture's zones (one of two)
    # cannot settle it, so it stays the source's RDT (assumed) and goes to the RDT series
    assert [e["survey_year"] for e in nat] == [2021] and {e["test"] for e in nat} == {"microscopy"}
    assert [e["survey_year"] for e in rdt] == [2010]
    assert (rdt[0]["test"], rdt[0]["test_assumed"], rdt[0]["positivity"], rdt[0]["derived"]) == ("RDT", True, 0.42, False)
    assert "do not settle it" in rdt[0]["test_note"]
    # the fixture has no 2010 urban/rural rows: null rather than a figure of another test
    assert rdt[0]["urban"] is None and rdt[0]["rural"] is None
    # no derived entry: no round has every zone of the fixture
    assert not any(e["derived"] for e in nat + rdt)
    nat21 = nat[0]
    assert list(nat21)[:9] == [*TREND_KEYS, "urban", "rural"]
    assert (nat21["positivity"], nat21["urban"], nat21["rural"]) == (0.223, 0.105, 0.267)
    assert (nat21["test"], nat21["test_assumed"]) == ("microscopy", False)
    assert nat21["low"] is None and nat21["children_tested"] is None and nat21["small_sample"] is None
    kn, la = (s["survey_trend"] for s in doc["states"])
    # no state entry for 2010 (zones only); Kano 2015 has only RDT: kept and labelled
    assert [e["survey_year"] for e in kn] == [2015, 2018, 2021]
    assert [e["survey_year"] for e in la] == [2015, 2018, 2021]
    assert [e["test"] for e in kn] == ["RDT", "microscopy", "microscopy"]
    for e in kn + la:
        assert list(e)[:7] == TREND_KEYS and "urban" not in e
    # the 2018 Kano row with an interval wins over the one without
    assert (kn[1]["positivity"], kn[1]["low"], kn[1]["high"]) == (0.401, 0.35, 0.453)
    assert (la[0]["children_tested"], la[0]["small_sample"]) == (85, True)
    assert la[0]["clusters"] is None
    assert all(e["test"] == "microscopy" for e in la)


def test_check_on_fixture(produced) -> None:
    check = produced.documents["/v1/transmission/states"][()]["method"]["check"]
    assert check["series"] == 2
    assert check["states"] == ["Kano", "Lagos"]
    assert isinstance(check["median_correlation"], float)
    assert "leave one whole state out" in check["cross_validation"]
    assert check["folds"] == 2 and check["dated_lga_series"] == 0
    assert set(check["levels"]["archetype_groups"]) == {"model_2", "constant_floor_both_sources", "model_3", "model_4",
                                                        "by_zone"}
    assert set(check["by_band"]) == {"north", "south"}
    assert check["by_band"]["north"]["series"] == 1


def test_unavailable_without_inputs(tmp_path: Path) -> None:
    geo = small_geography()
    with pytest.raises(DatasetUnavailable):
        produce(BuildContext(data_dir=tmp_path, updated_at="x", geography=geo))
    d = make_data_dir(tmp_path / "nosurvey", survey=False)
    with pytest.raises(DatasetUnavailable, match="survey"):
        produce(BuildContext(data_dir=d, updated_at="x", geography=geo))
    d = make_data_dir(tmp_path / "norain")
    (d / "rainfall/nga_state_chirps_climatology_monthly.csv").unlink()
    with pytest.raises(DatasetUnavailable, match="climatology"):
        produce(BuildContext(data_dir=d, updated_at="x", geography=geo))


def test_check_without_case_records_is_null(tmp_path: Path) -> None:
    d = make_data_dir(tmp_path, cases=False)
    p = produce(BuildContext(data_dir=d, updated_at="x", geography=small_geography()))
    m = p.documents["/v1/transmission/states"][()]["method"]
    check = m["check"]
    assert {k: check[k] for k in CHECK_KEYS} == {"series": 0, "states": [], "median_correlation": None,
                                                 "mean_months_off": None, "mean_months_peak_is_off": None}
    assert check["mean_centre_months_off"] is None and check["by_band"] == {}
    # nothing to fit to: the documented defaults apply, and the document says so
    assert m["parameters_fitted_to_series"] == 0
    assert (m["floor_at_5_dry_months"], m["floor_per_dry_month"], m["lag_at_5_dry_months"], m["lag_per_dry_month"]) == (
        DEFAULT_PARAMS.floor_at_pivot, 0.0, DEFAULT_PARAMS.lag_at_pivot, DEFAULT_PARAMS.lag_per_dry_month)
    assert m["seasonal_floor"] == DEFAULT_PARAMS.floor_at_pivot


def test_one_row_per_round_prefers_complete_rows() -> None:
    df = pl.DataFrame(
        {
            "survey_year": [2018, 2018], "survey": ["2018 NDHS"] * 2, "level": ["state"] * 2, "area": ["Kano"] * 2,
            "state_code": ["KN"] * 2, "test": ["microscopy"] * 2, "test_assumed": [False] * 2,
            "positivity": [0.4, 0.41], "low": [None, 0.3], "high": [None, 0.5], "clusters": [None, None],
            "children_tested": [None, 120], "source": ["a", "b"],
        },
        schema_overrides={"clusters": pl.Int64, "children_tested": pl.Int64, "low": pl.Float64, "high": pl.Float64},
    )
    out = one_row_per_round(df)
    assert out.height == 1 and out["source"][0] == "b"
    nat, states = survey_trends(df)
    assert nat == [] and states["KN"][0]["small_sample"] is False


# --- real data ----------------------------------------------------------------------------


@needs_data("rainfall")
def test_real_data_seasons_are_plausible(real_fits: Path) -> None:
    from pipeline.geography import load_geography

    geo = load_geography(DATA_DIR)
    p = produce(BuildContext(data_dir=DATA_DIR, updated_at="x", geography=geo))
    doc = p.documents["/v1/transmission/states"][()]
    assert len(doc["states"]) == 37
    by = {s["state_code"]: s for s in doc["states"]}
    # Kano (7 dry months) cases peak after the August rain; Lagos (2) is flat, never near 0
    assert by["KN"]["season"]["peak_month"] in (9, 10)
    assert by["KN"]["season"]["lag_months"] > by["LA"]["season"]["lag_months"]
    assert min(by["LA"]["season"]["seasonal_index"]) > 0.5
    # the far north has quieter quiet months than the coast, and the index never goes below a season's floor
    assert by["KE"]["season"]["seasonal_floor"] < by["AK"]["season"]["seasonal_floor"]
    for s in doc["states"]:
        assert min(s["season"]["seasonal_index"]) >= s["season"]["seasonal_floor"] - 0.001
    check = doc["method"]["check"]
    if (DATA_DIR / "malaria/dhis2_lga_monthly_2020_2023").exists():
        assert check["series"] == 22 + check["dated_lga_series"] and check["dated_lga_series"] >= 100
        assert len(check["dated_states"]) == 7
        # out of sample, the published seasons are not late: mean signed peak error within half a month
        timing = check["timing"][check["season_rule"]]["states"]
        assert timing["profiles"] == 7 and abs(timing["mean_signed_peak_error"]) <= 0.5
        # model 6 (model 5's nested check under the model-6 rule): the south-west is not extrapolated to an
        # April peak; a flat coast is called weak
        assert check["season_rule"] == "model_7"
        for code in ("LA", "OG"):
            se = by[code]["season"]
            assert se["peak_month"] is None or 6 <= se["peak_month"] <= 10
            assert se["peak_month"] in se["peak_window"] or se["peak_month"] is None
        assert by["BY"]["season"]["season_class"] == "weak" and by["BY"]["season"]["peak_month"] is None
        assert by["BY"]["season"]["peak_month_null_reason"]
        # every published figure is a summary; the published method is what the registered rule picks on all
        # seven states: the simplest admissible candidate within the margin of the least inner loss
        m5, m6 = check["model_5"], check["model_7"]
        assert m5["published_method"] == "selection"
        inner = m6["candidates_on_all_dated_states"]
        # model 7: the borrowed seasons are references, never published
        assert set(m6["publishable"]) == {"rain_kernel", "rain_onset", "model_4"}
        ok = [k for k in m6["candidates_in_order_of_complexity"] if k in m6["publishable"]
              and k in inner and abs(inner[k]["inner_mean_signed_peak_error"]) <= 0.5]
        best = min(inner[k]["inner_loss"] for k in ok)
        assert m6["release_method"] == next(k for k in ok if inner[k]["inner_loss"] <= best + m6["selection_margin"])
        assert m5["release_method"] == m6["release_method"]
        rr = m6["recorded_rain"]
        assert rr["adopted"] == (rr["lga_gain"] >= rr["minimum_gain"])
        assert m6["estimated_months"] in ("typical_season", "recorded_rain")
    lga_total = sum(len(d["lgas"]) for d in p.documents["/v1/transmission/lgas"].values())
    assert lga_total == 774
    # no state has a 2010 entry; Borno 2015 is missing in the source
    assert all(e["survey_year"] != 2010 for s in doc["states"] for e in s["survey_trend"])
    assert 2015 not in [e["survey_year"] for e in by["BO"]["survey_trend"]]


def test_cross_fitting_publishes_the_held_out_fold_in_dated_states_only() -> None:
    """In a state with dated series every LGA's published index is the fold that held the state out
    (rounded as published); LGAs of other states keep the full fit, whatever the folds hold for them."""
    from types import SimpleNamespace

    from pipeline.datasets.transmission import cross_fitted_index
    from pipeline.model.season_cv import MODEL_4

    rng = np.random.default_rng(5)
    full = np.round(rng.uniform(0.3, 1.0, (5, 12)), 3)
    held = rng.uniform(0.3, 1.0, (5, 12))
    state = np.array(["AA", "AA", "BB", "CC", "CC"])
    sfit = SimpleNamespace(dated=SimpleNamespace(state_codes=["AA", "CC"]),
                           cv=SimpleNamespace(area_index={MODEL_4: held}))
    out, cross = cross_fitted_index(full, sfit, state)  # type: ignore[arg-type]
    assert cross.tolist() == [True, True, False, True, True]
    np.testing.assert_array_equal(out[cross], np.round(held[cross], 3))
    np.testing.assert_array_equal(out[~cross], full[~cross])
    no_dated = SimpleNamespace(dated=None, cv=SimpleNamespace(area_index={MODEL_4: held}))
    out, cross = cross_fitted_index(full, no_dated, state)  # type: ignore[arg-type]
    assert not cross.any() and (out == full).all()


@needs_data("malaria/dhis2_lga_monthly_2020_2023")
def test_held_out_index_is_the_published_cross_fitted_season(real_fits: Path) -> None:
    """The interface for checks built on the season (transmission.held_out_index): leaving a dated state out
    gives exactly what the release publishes for that state's LGAs (its cross-fitted season), and a season
    for every other LGA fitted without that state, which differs from the published one. The season fit
    is the session build's (`real_fits`, keyed by the inputs and code, as a build reuses it): both sides
    are computed here from it, and fitting from nothing is the session build's and the reproducibility
    test's to check."""
    from pipeline.datasets.transmission import held_out_index, season_model
    from pipeline.geography import load_geography

    geo = load_geography(DATA_DIR)
    sm = season_model(DATA_DIR, geo)
    state = np.array(geo.lgas.sort("lga_code")["state_code"].to_list())
    ix = held_out_index(DATA_DIR, geo, ["OY"])
    assert ix is not None and ix.shape == (774, 12) and np.allclose(ix.max(axis=1), 1.0)
    np.testing.assert_allclose(np.round(ix[state == "OY"], 3), sm.lga_index[state == "OY"], atol=1e-9)
    assert not np.allclose(np.round(ix[state == "KN"], 3), sm.lga_index[state == "KN"])
