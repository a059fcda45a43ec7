"""The risk producer on a small synthetic DATA_DIR (document shapes, orders, facts) and
on the real data (every estimated month: 37 states, 774 LGAs, scores in range)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.datasets import risk, validation
from pipeline.datasets.base import BuildContext
from pipeline.errors import InputError
from pipeline.model import evidence, terms
from pipeline.model import risk as model
from tests.paths import DATA_DIR, needs_data
from tests.small_geography import small_geo

STATE_FIELDS = ["state_code", "state", "zone", "score", "score_low", "score_high", "level", "lgas", "population"]
LGA_FIELDS = ["lga_code", "lga", "score", "score_low", "score_high", "level", "is_urban", "population",
              "evidence", "survey_children_2018_band", "rank", "rank_low", "rank_high",
              "rank_range_withheld"]
LEVELS = {"very_low", "low", "moderate", "high", "very_high"}




def write_data_dir(root: Path, first: str = "2015-01", last: str = "2019-06", with_2021: bool = True) -> Path:
    (root / "rainfall").mkdir(parents=True)
    (root / "malaria").mkdir()
    rows = ["pcode,state_name,month,rainfall_mm,lta_mm,anomaly_pct"]
    rng = np.random.default_rng(7)
    for pcode, name, scale in (("NG020", "Kano", 1.0), ("NG026", "Nasarawa", 1.6)):
        for i in range(risk.month_index(first), risk.month_index(last) + 1):
            m = i % 12 + 1
            mm = scale * 200 * max(0.0, math.sin((m - 3) / 12 * 2 * math.pi)) * rng.gamma(4, 0.25)
            rows.append(f"{pcode},{name},{risk.period_of(i)},{mm:.3f},1,1")
    (root / "rainfall" / "nga_state_chirps_monthly_1981_2026.csv").write_text("\n".join(rows) + "\n")
    head = "state,lga,lat,lon,years_used," + ",".join(f"m{m:02d}_mm" for m in range(1, 13)) + ",annual_mm"
    lines = [head]
    for state, lga, lon, f in (("Kano", "Fagge", 0.5, 1.0), ("Kano", "Nasarawa1", 1.5, 1.2), ("Kano", "Takali", 2.5, 0.8),
                               ("Nasarawa", "Nasarawa2", 10.5, 1.0), ("Nasarawa", "Obi2", 11.5, 1.1)):
        vals = [f * 100 * max(0.0, math.sin((m - 3) / 12 * 2 * math.pi)) for m in range(1, 13)]
        lines.append(f"{state},{lga},0.5,{lon},2001-2016," + ",".join(f"{v:.2f}" for v in vals) + f",{sum(vals):.1f}")
    (root / "rainfall" / "nga_lga_idm_gsod_climatology_2001_2016.csv").write_text("\n".join(lines) + "\n")
    clim = ["pcode,state_name,mo,mean_1991_2020_mm,wfp_lta_mm"]
    for pcode, name, scale in (("NG020", "Kano", 1.0), ("NG026", "Nasarawa", 1.6)):
        for m in range(1, 13):
            mm = scale * 200 * max(0.0, math.sin((m - 3) / 12 * 2 * math.pi))
            clim.append(f"{pcode},{name},{m},{mm:.3f},{mm:.3f}")
    (root / "rainfall" / "nga_state_chirps_climatology_monthly.csv").write_text("\n".join(clim) + "\n")
    survey = [
        "survey,year,level,area,zone,test,positivity_pct,ci_low_pct,ci_high_pct,n_clusters,n_tested,n_tested_kind,source,note",
        "2010 NMIS,2010,residence,urban,,RDT,23,,,,,,page: news,",
        "2010 NMIS,2010,residence,rural,,RDT,48,,,,,,page: news,",
        "2010 NMIS,2010,zone,North West,North West,microscopy,48.2,,,,,,f.csv,",
        "2015 NMIS,2015,zone,North West,North West,microscopy,37.1,,,,,,f.csv,",
        "2015 NMIS,2015,state,Kano,North West,microscopy,28.0,,,,,,f.csv,",
        "2015 NMIS,2015,state,Nasarawa,North Central,microscopy,25.0,,,,,,f.csv,",
        "2018 NDHS,2018,state,Kano,North West,microscopy,32.4,,,,,,f.csv,",
        "2018 NDHS,2018,state,Nasarawa,North Central,microscopy,20.0,,,,,,f.csv,",
        "2021 NMIS,2021,state,Kano,North West,microscopy,25.5,,,,,,f.csv,",
        "2021 NMIS,2021,state,Nasarawa,North Central,microscopy,15.0,,,,,,f.csv,",
        "2021 NMIS,2021,residence,urban,,microscopy,10.5,,,,,,f.csv,",
        "2021 NMIS,2021,residence,rural,,microscopy,26.7,,,,,,f.csv,",
    ]
    if not with_2021:
        survey = [r for r in survey if not r.startswith("2021")]
    (root / "malaria" / "survey_positivity_u5.csv").write_text("\n".join(survey) + "\n")
    return root


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    root = write_data_dir(tmp_path_factory.mktemp("data"))
    ctx = BuildContext(data_dir=root, updated_at="2019-07-02T10:00:00Z", geography=small_geo())
    return risk.produce(ctx)


def test_facts_and_periods(produced):
    est = [risk.period_of(i) for i in range(risk.month_index("2018-01"), risk.month_index("2019-06") + 1)]
    assert produced.dataset == "risk" and produced.model_version == model.MODEL_VERSION
    assert produced.facts == {"estimated": est, "forecast": ["2019-07", "2019-08", "2019-09", "2019-10"]}
    p = dict(produced.documents["/v1/periods"][()])
    # what each kind of month is built from, and whether every month had passed at the load (additive)
    passed = {k: p.pop(k) for k in ("kind_descriptions", "all_passed_at_release")}
    assert list(p) == ["last_estimated", "last_forecast", "months", "updated_at", "model_version", "score_range_level",
                       "score_terms", "basis_descriptions", "drift_after_last_survey", "season_after_survey"]
    # two states a round: too few to fit a drift, which so gains nothing and is not applied (docs/range-protocol.md)
    assert p["drift_after_last_survey"] == {"applied": False, "logit_per_year": 0.0}
    assert p["score_terms"] == [t.key for t in terms.terms()]  # no month term in the synthetic data
    assert p["basis_descriptions"] == {b: terms.basis_words(b) for b in terms.BASES}
    assert p["score_range_level"] == model.RANGE_LEVEL == 0.8
    assert (p["last_estimated"], p["last_forecast"]) == ("2019-06", "2019-10")
    assert p["months"][0] == {"period": "2018-01", "kind": "estimated", "provisional": False, "basis": p["months"][0]["basis"],
                              "month_end": "2018-01-31", "passed_at_release": True}
    # loaded on 2019-07-02: the estimated months had ended, no forecast month had; February's end in a leap year
    assert [m["passed_at_release"] for m in p["months"]] == [m["kind"] == "estimated" for m in p["months"]]
    assert passed["all_passed_at_release"] is False
    assert [m["month_end"] for m in p["months"] if m["period"] in ("2018-02", "2019-10")] == ["2018-02-28", "2019-10-31"]
    assert passed["kind_descriptions"] == terms.kind_descriptions() and set(passed["kind_descriptions"]) == set(terms.KINDS)
    # basis: within the survey rounds first, then (from the month after the newest round's fieldwork) after them
    bases = [m["basis"] for m in p["months"]]
    assert set(bases) <= set(terms.BASES) and bases == sorted(bases, key=terms.BASES.index)
    assert [m["kind"] for m in p["months"]] == ["estimated"] * len(est) + ["forecast"] * 4
    # the CHIRPS CSV has no version column: its last two months are flagged provisional
    assert [m["provisional"] for m in p["months"] if m["kind"] == "estimated"][-3:] == [False, True, True]
    assert p["updated_at"] == "2019-07-02T10:00:00Z"


def test_every_key_present(produced):
    d = produced.documents
    est = produced.facts["estimated"]
    assert set(d["/v1/risk/states"]) == {(p,) for p in est}
    assert set(d["/v1/risk/lgas"]) == {(s, p) for s in ("KN", "NA") for p in est}
    assert set(d["/v1/forecasts/states"]) == {("1",), ("2",), ("3",), ("4",)}
    assert set(d["/v1/forecasts/lgas"]) == {(s, m) for s in ("KN", "NA") for m in "1234"}


def _check_records(records, fields, code_key):
    assert all(list(r) == fields for r in records)
    for r in records:
        assert 0 <= r["score_low"] <= r["score"] <= r["score_high"] <= 1
        assert r["level"] in LEVELS
        assert r["level"] == model.levels(np.array([r["score"]]))[0]
    keys = [(-r["score"], r[code_key]) for r in records]
    assert keys == sorted(keys), "highest risk first, ties by code"
    if "rank" in fields:  # LGA records: the rank is the report's order, inside its 80 % range
        assert [r["rank"] for r in records] == list(range(1, len(records) + 1))
        # a state's ranges are all published or all withheld with the reason (docs/range-protocol.md §2)
        withheld = {r["rank_range_withheld"] for r in records}
        assert withheld in ({None}, {evidence.RANK_RANGE_WITHHELD})
        if withheld == {None}:
            assert all(1 <= r["rank_low"] <= r["rank"] <= r["rank_high"] <= len(records) for r in records)
        else:
            assert all(r["rank_low"] is None and r["rank_high"] is None for r in records)
        assert all(r["evidence"] in ("direct", "some", "borrowed") for r in records)
        # no children of its own (or no LGA file): borrowed
        assert all(r["evidence"] == "borrowed" for r in records if r["survey_children_2018_band"] in ("none", None))
        assert all(r["survey_children_2018_band"] in ("none", "1-9", "10-24", "25-49", "50+", None) for r in records)


def test_state_report_shape_order_and_aggregation(produced):
    doc = produced.documents["/v1/risk/states"][("2018-08",)]
    assert list(doc) == ["period", "kind", "states", "basis"] and doc["kind"] == "estimated"
    _check_records(doc["states"], STATE_FIELDS, "state_code")
    kn = next(s for s in doc["states"] if s["state_code"] == "KN")
    assert (kn["lgas"], kn["population"]) == (3, 600)
    lgas = produced.documents["/v1/risk/lgas"][("KN", "2018-08")]
    assert list(lgas) == ["period", "kind", "state_code", "state", "lgas", "basis"] and lgas["state"] == "Kano"
    _check_records(lgas["lgas"], LGA_FIELDS, "lga_code")
    pw = sum(r["score"] * r["population"] for r in lgas["lgas"]) / sum(r["population"] for r in lgas["lgas"])
    assert kn["score"] == pytest.approx(pw, abs=2e-4)  # both rounded to 4 decimals


def test_urban_lga_below_rural_in_same_month(produced):
    recs = {r["lga_code"]: r for r in produced.documents["/v1/risk/lgas"][("KN", "2019-01")]["lgas"]}
    assert recs["NG020001"]["is_urban"] and recs["NG020001"]["score"] < recs["NG020002"]["score"]


def test_forecast_documents(produced):
    d = produced.documents
    four = d["/v1/forecasts/states"][("4",)]
    assert list(four) == ["forecasts"]
    assert [f["period"] for f in four["forecasts"]] == ["2019-07", "2019-08", "2019-09", "2019-10"]
    for f in four["forecasts"]:
        assert list(f) == ["period", "kind", "states", "basis"] and f["kind"] == "forecast"
        _check_records(f["states"], STATE_FIELDS, "state_code")
    assert d["/v1/forecasts/states"][("2",)]["forecasts"] == four["forecasts"][:2]
    lg = d["/v1/forecasts/lgas"][("NA", "3")]["forecasts"]
    assert [f["period"] for f in lg] == ["2019-07", "2019-08", "2019-09"]
    for f in lg:
        assert list(f) == ["period", "kind", "state_code", "state", "lgas", "basis"] and f["state_code"] == "NA"
        _check_records(f["lgas"], LGA_FIELDS, "lga_code")


def test_deterministic(tmp_path):
    root = write_data_dir(tmp_path)
    a = risk.produce(BuildContext(data_dir=root, updated_at="t", geography=small_geo()))
    b = risk.produce(BuildContext(data_dir=root, updated_at="t", geography=small_geo()))
    assert a.documents == b.documents


def test_new_month_extends_series(tmp_path):
    a = risk.produce(BuildContext(data_dir=write_data_dir(tmp_path / "a"), updated_at="t", geography=small_geo()))
    b = risk.produce(BuildContext(data_dir=write_data_dir(tmp_path / "b", last="2019-07"), updated_at="t", geography=small_geo()))
    assert b.facts["estimated"][-1] == "2019-07" and b.facts["forecast"][0] == "2019-08"
    assert len(b.facts["estimated"]) == len(a.facts["estimated"]) + 1


def test_series_too_short_is_an_input_error(tmp_path):
    root = write_data_dir(tmp_path, first="2018-03")
    with pytest.raises(InputError, match="2018-01"):
        risk.produce(BuildContext(data_dir=root, updated_at="t", geography=small_geo()))


def test_last_estimated_needs_every_state(tmp_path):
    root = write_data_dir(tmp_path)
    f = root / "rainfall" / "nga_state_chirps_monthly_1981_2026.csv"
    f.write_text(f.read_text() + "NG020,Kano,2019-07,50.0,1,1\n")  # only one state has July
    p = risk.produce(BuildContext(data_dir=root, updated_at="t", geography=small_geo()))
    assert p.facts["estimated"][-1] == "2019-06"


def test_forecast_range_widens_with_horizon(produced):
    """The baseline's uncertainty grows after the last round: relative to the score, the range
    widens with every month ahead (the season moves the score, not the width of its logit range)."""
    fc = produced.documents["/v1/forecasts/lgas"][("KN", "4")]["forecasts"]
    by = [{r["lga_code"]: r for r in f["lgas"]} for f in fc]
    for code in by[0]:
        ratios = [by[h][code]["score_high"] / by[h][code]["score_low"] for h in range(4)]
        assert all(b >= a - 1e-3 for a, b in zip(ratios, ratios[1:], strict=False)), ratios
        assert ratios[-1] > ratios[0]


def test_score_is_baseline_times_season(produced):
    """Within a year the state's score moves only with the season: its peak month is the index's."""
    year = [produced.documents["/v1/risk/lgas"][("NA", f"2019-{m:02d}")] for m in range(1, 7)]
    scores = [{r["lga_code"]: r["score"] for r in d["lgas"]} for d in year]
    # Nasarawa's rain (and so its season) rises from March: the score rises with it
    assert scores[5]["NG026001"] > scores[0]["NG026001"]


def test_build_without_the_2021_round(tmp_path):
    """The time-held-out figures are made this way: the whole build runs with the 2021 rows removed."""
    import orjson

    root = write_data_dir(tmp_path, with_2021=False)
    ctx = BuildContext(data_dir=root, updated_at="t", geography=small_geo())
    p = risk.produce(ctx)
    assert p.facts["estimated"][-1] == "2019-06"
    report = orjson.loads(validation.produce(ctx).files[validation.VALIDATION_FILE][1])
    assert report["baseline"]["rounds"] == [2015, 2018]
    held = {h["predicted_round"]: h for h in report["held_out_rounds"]}
    assert held[2021]["states"] == 0 and "absent" in held[2021]["note"]
    assert held[2018]["states"] == 2 and 0 <= held[2018]["share_inside_80_range"] <= 1
    full = validation.produce(BuildContext(data_dir=write_data_dir(tmp_path / "full"), updated_at="t",
                                           geography=small_geo()))
    assert orjson.loads(full.files[validation.VALIDATION_FILE][1])["held_out_rounds"][1]["states"] == 2


@needs_data("rainfall")
def test_real_data_every_month_37_states_774_lgas(real_fits):
    from pipeline.geography import load_geography

    geo = load_geography(DATA_DIR)
    p = risk.produce(BuildContext(data_dir=DATA_DIR, updated_at="2026-07-22T00:00:00Z", geography=geo))
    est = p.facts["estimated"]
    assert est[0] == "2018-01" and est[-1] == "2026-06" and len(p.facts["forecast"]) == 4
    assert len(p.documents["/v1/risk/states"]) == len(est)
    for (period,), doc in p.documents["/v1/risk/states"].items():
        assert len(doc["states"]) == 37
        assert all(0 <= s["score_low"] <= s["score"] <= s["score_high"] <= 1 for s in doc["states"])
        n = sum(len(p.documents["/v1/risk/lgas"][(s["state_code"], period)]["lgas"]) for s in doc["states"])
        assert n == 774
    for doc in p.documents["/v1/risk/lgas"].values():
        assert all(0 <= r["score_low"] <= r["score"] <= r["score_high"] <= 1 for r in doc["lgas"])
    # state records carry the same population as the sum of their LGAs
    sums = geo.lgas.group_by("state_code").agg(pl.col("population").sum(), pl.len().alias("n"))
    joined = geo.states.join(sums, on="state_code", suffix="_lgas")
    assert (joined["population"] == joined["population_lgas"]).all() and (joined["lgas"] == joined["n"]).all()
    months = p.documents["/v1/periods"][()]["months"]
    assert [m["period"] for m in months if m["provisional"]] == ["2026-05", "2026-06"]


@needs_data("malaria")
def test_real_data_without_the_2021_round(tmp_path, real_fits):
    """The real data load with every 2021 row removed builds, and its validation says so."""
    import orjson

    from pipeline.geography import load_geography
    from tests.paths import linked_data

    survey = Path("malaria/survey_positivity_u5.csv")
    data = linked_data(tmp_path / "data", survey)
    lines = (DATA_DIR / survey).read_text().splitlines()
    kept = [lines[0]] + [ln for ln in lines[1:] if not ln.startswith("2021")]
    assert len(kept) < len(lines)
    (data / survey).write_text("\n".join(kept) + "\n")
    geo = load_geography(data)
    ctx = BuildContext(data_dir=data, updated_at="t", geography=geo)
    p = risk.produce(ctx)
    report = orjson.loads(validation.produce(ctx).files[validation.VALIDATION_FILE][1])
    assert report["baseline"]["rounds"] == [2015, 2018]
    assert report["held_out_rounds"][1]["states"] == 0
    assert report["held_out_rounds"][0]["states"] >= 33
    assert len(p.documents["/v1/risk/states"][("2024-01",)]["states"]) == 37


@needs_data()
def test_real_data_range_calibration_out_of_sample(real_fits):
    """The calibrated ranges against the surveys, every constant fitted without the scored state's zone:
    var(z) 0.8-1.25 per predicted round (issue 31 aim), where before calibration the predictions sat above the
    surveys (mean z below -0.2 in both rounds). The drift is part of the calibration only where it passed
    its registered check (docs/range-protocol.md §1): a build without the 2021 round, predicting it."""
    from pipeline.geography import load_geography
    from pipeline.model import ranges

    geo = load_geography(DATA_DIR)
    md = risk.load_model_data(DATA_DIR, geo)
    check = risk.range_check(md)
    assert check is not None and set(check.predicted_round.tolist()) == {2018, 2021}
    dc = check.drift
    assert dc is not None and dc.predicted_round == 2021 and dc.states == 37
    # the check's drift is the one a build without the 2021 round would publish
    without = risk.range_check(md, md.rounds.filter(pl.col("survey_year") < 2021))
    assert without is not None and set(without.predicted_round.tolist()) == {2018}
    train = ranges.fit_calibration(without.error, without.variance, without.years)
    assert dc.drift_per_year == pytest.approx(train.drift_per_year)
    te = check.predicted_round == 2021
    assert dc.mae_held == pytest.approx(float(np.mean(np.abs(check.error[te]))))
    assert dc.mae_drift == pytest.approx(float(np.mean(np.abs(check.error[te] - train.drift_per_year * check.years[te]))))
    assert dc.applied == (dc.mae_held - dc.mae_drift >= ranges.DRIFT_MIN_GAIN)
    zones = np.array(md.zones)[check.state_rows]
    for year in (2018, 2021):
        sel = check.predicted_round == year
        before, after = ranges.calibration(check.z_before[sel]), ranges.calibration(check.z_after[sel])
        assert before["mean_z"] < -0.2
        assert 0.8 <= after["var_z"] <= 1.25, (year, after)
        # out of sample: each state's z uses the constants fitted without its zone, on that round only
        for zone in set(zones[sel]):
            rows = sel & (zones == zone)
            cal = ranges.fit_calibration(check.error[sel & (zones != zone)], check.variance[sel & (zones != zone)],
                                         check.years[sel & (zones != zone)], dc.applied)
            np.testing.assert_allclose(check.z_after[rows], ranges.calibrated_z(
                check.error[rows], check.variance[rows], check.years[rows], cal))
    assert check.published == ranges.fit_calibration(check.error[te], check.variance[te], check.years[te], dc.applied)
    assert (check.published.drift_per_year != 0.0) == dc.applied
