"""The validation report: Spearman and deviance on constructed data, the leave-one-LGA-out
bookkeeping, the time-held-out split (only earlier rounds are used), and on the real data
the report's figures against the targets the release is held to."""

from __future__ import annotations

import numpy as np
import orjson
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.datasets import risk, validation
from pipeline.datasets.base import BuildContext
from pipeline.datasets.validation import binomial_deviance, held_out, spearman
from pipeline.model.risk import MODEL_VERSION, MODEL_VERSION_WITH_MONTH_TERM
from pipeline.site.figures import validation_figures
from tests.paths import DATA_DIR, needs_data
from tests.pipeline.datasets.test_risk_documents import write_data_dir
from tests.small_geography import small_geo


@given(st.lists(st.integers(-1000, 1000), min_size=3, max_size=30, unique=True))
def test_spearman_is_one_for_monotone_and_minus_one_for_reversed(xs):
    x = np.array(xs, dtype=float)
    assert spearman(x, x**3 + 7) == pytest.approx(1.0)
    assert spearman(x, -x) == pytest.approx(-1.0)


def test_binomial_deviance_is_zero_at_the_observation_and_grows_away_from_it():
    p = np.array([0.1, 0.5, 0.0, 1.0])
    n = np.array([10.0, 20.0, 5.0, 3.0])
    assert binomial_deviance(p, np.clip(p, 1e-4, 1 - 1e-4), n) == pytest.approx(0.0, abs=1e-2)
    near = binomial_deviance(p, np.clip(p + 0.05, 0, 1), n)
    far = binomial_deviance(p, np.clip(p + 0.2, 0, 1), n)
    assert 0 < near < far
    # weighted by children: the same error on a bigger sample counts more
    assert binomial_deviance(p, p * 0 + 0.3, n * np.array([10, 1, 1, 1])) != binomial_deviance(p, p * 0 + 0.3, n)


def test_held_out_uses_only_earlier_rounds(tmp_path):
    """Changing the 2021 values cannot change the prediction of 2018 from <= 2015."""
    geo = small_geo()
    a = risk.load_model_data(write_data_dir(tmp_path / "a"), geo)
    b = risk.load_model_data(write_data_dir(tmp_path / "b", with_2021=False), geo)
    ha, hb = held_out(a, 2015, 2018), held_out(b, 2015, 2018)
    assert ha["spearman"] == hb["spearman"] and ha["rmse"] == hb["rmse"]
    assert ha["share_inside_80_range"] == hb["share_inside_80_range"]
    assert held_out(b, 2018, 2021)["states"] == 0


def test_report_is_shipped_and_quoted(tmp_path):
    p = validation.produce(BuildContext(data_dir=write_data_dir(tmp_path), updated_at="t", geography=small_geo()))
    figures = validation_figures({k: v for k, (_, v) in p.files.items()})
    report = orjson.loads(p.files[validation.VALIDATION_FILE][1])
    assert figures["validation.held_out_2018.spearman"] == report["held_out_rounds"][0]["spearman"]
    assert report["score_range_level"] == 0.8
    # no LGA observations, no incidence table in the fixture: said, not invented
    assert report["lga_comparison"]["lgas"] == 0
    assert figures["validation.lga.deviance_state_value"] == "(not in this release)"


@needs_data("malaria")
def test_real_validation_report(real_fits):
    from pipeline.geography import load_geography

    geo = load_geography(DATA_DIR)
    md = risk.load_model_data(DATA_DIR, geo)
    res = risk.run_model(md)
    from pipeline.datasets.validation import validation_report

    r = validation_report(DATA_DIR, geo, md, res)
    held = {h["predicted_round"]: h for h in r["held_out_rounds"]}
    assert held[2021]["states"] == 37 and held[2018]["states"] >= 33
    assert held[2021]["spearman"] >= 0.6
    for h in held.values():  # an 80 % range, within ten points either way
        assert 0.7 <= h["share_inside_80_range"] <= 0.95
    years = {y["year"]: y["spearman"] for y in r["map_agreement"]["years"]}
    assert set(years) == {2018, 2019} and min(years.values()) >= 0.8
    lga = r["lga_comparison"]
    assert lga["lgas"] > 600 and lga["deviance_state_value"] < lga["deviance_national_value"]
    assert md.rounds.filter(pl.col("survey_year") == 2018)["children"].null_count() == 0
    if (DATA_DIR / "malaria/dhis2_lga_monthly_2020_2023").exists():
        tests = r["months"]["tests"]
        from pipeline.sources.dated_cases import read_raw_dated

        raw = read_raw_dated(DATA_DIR)
        assert raw is not None
        dated_states = set(raw["state_code"].unique())
        # every pre-registered term is scored in the six held-out states, and the decision follows the rule
        from pipeline.model.month_tests import TERMS

        for term in TERMS:
            t = tests[term]
            assert t["states"] == len(dated_states)
            assert t["adopted"] == (t["meets_minimum_effect"] and t["plausible"])
            assert t["meets_minimum_effect"] == (t["states_gaining_at_least_0_03"] >= 5
                                                 and t["pooled_gain_month_to_month_interval"][0] > 0
                                                 and t["pooled_gain_anomaly_interval"][0] > 0)
        assert set(tests["adopted"]) <= {k for k in TERMS if tests[k]["adopted"]}
        assert r["model_version"] == (MODEL_VERSION_WITH_MONTH_TERM if tests["adopted"] else MODEL_VERSION)
        assert {s["state_code"] for s in r["seasons"]["profiles"]["states"]} == dated_states
        assert len(r["months"]["score_against_cases"]) == len(dated_states)


def _lga_md(p_obs: list[float]):
    """Two states; state 0 has one urban LGA (index 0) among three; state 1 two rural LGAs."""
    from types import SimpleNamespace

    codes = ["A1", "A2", "A3", "B1", "B2"]
    return SimpleNamespace(
        lga_positivity=pl.DataFrame({"lga_code": codes, "positivity": p_obs, "children": [50, 50, 50, 40, 40]}),
        lga_codes=codes, state_codes=["AA", "BB"], state_idx=np.array([0, 0, 0, 1, 1]),
        population=np.array([100.0, 100, 100, 100, 100]), is_urban=np.array([True, False, False, False, False]),
        urban_ratio=0.4,
    )


def test_lga_comparison_is_leave_one_out_and_credits_a_true_urban_contrast():
    from pipeline.datasets.validation import lga_comparison

    base = lga_comparison(_lga_md([0.1, 0.3, 0.3, 0.2, 0.2]))
    assert base["lgas"] == 5 and base["children"] == 230
    # the urban LGA really is lower: the split predicts it better than the state value
    assert base["urban_split_beats_state_value"] is True
    assert base["deviance_urban_split"] < base["deviance_state_value"]
    # an LGA's own observation never enters its prediction: only its own term changes
    moved = lga_comparison(_lga_md([0.1, 0.3, 0.3, 0.9, 0.2]))
    assert moved["deviance_state_value"] > base["deviance_state_value"]


def test_committed_report_is_rendered_from_the_committed_figures():
    """reports/validation.md cannot drift from reports/validation.json: it is their rendering."""
    from pipeline.reports.validation import render
    from tests.paths import REPO_ROOT

    body = (REPO_ROOT / "reports/validation.json").read_bytes()
    assert (REPO_ROOT / "reports/validation.md").read_text() == render(body)


def test_the_validation_producer_does_not_import_the_report():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(validation))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and m.startswith("pipeline.reports") for m in imported)


def test_report_without_the_2021_round_and_without_dated_series(tmp_path):
    """No 2021 round, no dated series: the targets needing them are listed but not judged, nothing is
    invented, the Markdown and every plot still render."""
    from pipeline.reports.validation import render

    p = validation.produce(BuildContext(data_dir=write_data_dir(tmp_path, with_2021=False), updated_at="t",
                                        geography=small_geo()))
    body = p.files[validation.VALIDATION_FILE][1]
    report = orjson.loads(body)
    rows = {r["key"]: r for r in report["targets"]["rows"]}
    assert rows["var_z_2021"]["model_4"] is None and rows["var_z_2021"]["met"] is None
    assert rows["state_shape_r"]["met"] is None and rows["lga_month_to_month_r"]["met"] is None
    assert report["targets"]["judged"] == sum(r["met"] is not None for r in rows.values())
    assert report["model_version"] == MODEL_VERSION
    md = render(body)
    assert f"Targets: {report['targets']['met']} of {report['targets']['judged']} met" in md
    assert {f"docs/figures/{n}" for n in ("season_states.svg", "season_lgas.svg", "score_vs_cases.svg")} <= set(p.files)
