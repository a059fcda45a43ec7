"""The proof reports: hindcast bookkeeping on a small fixture, Spearman and agreement on
constructed data, and the headline claim (the model beats naive climatology) on the real data."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.datasets.risk import load_model_data, month_index
from pipeline.model import risk as model
from pipeline.reports.agreement import agreement, spearman
from pipeline.reports.hindcast import hindcast
from tests.paths import DATA_DIR, needs_data
from tests.pipeline.datasets.test_risk_documents import write_data_dir
from tests.small_geography import small_geo


@given(st.lists(st.integers(-1000, 1000), min_size=3, max_size=30, unique=True))
def test_spearman_is_one_for_monotone_and_minus_one_for_reversed(xs):
    x = np.array(xs, dtype=float)
    assert spearman(x, x**3 + 7) == pytest.approx(1.0)
    assert spearman(x, -x) == pytest.approx(-1.0)


def test_agreement_ranks_per_year_and_names_the_largest_differences():
    codes = ["AA", "BB", "CC", "DD"]
    annual = pl.DataFrame({"state_code": codes * 2, "year": [2019] * 4 + [2020] * 4,
                           "score": [0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 0.4]})
    incidence = pl.DataFrame({"state_code": codes * 2, "year": [2019] * 4 + [2020] * 4,
                              "incidence": [1.0, 2.0, 3.0, 4.0, 4.0, 3.0, 2.0, 1.0]})
    r = agreement(annual, incidence)
    by = {y["year"]: y for y in r["years"]}
    assert by[2019]["spearman"] == 1.0 and by[2020]["spearman"] == -1.0
    worst = by[2020]["largest_rank_differences"][0]
    assert worst["state_code"] in ("AA", "DD") and abs(worst["score_rank"] - worst["incidence_rank"]) == 3


def test_hindcast_counts_every_forecast_once(tmp_path):
    data = write_data_dir(tmp_path / "d", first="2015-01", last="2019-06")
    md = load_model_data(data, small_geo())
    r = hindcast(md, first_issue="2018-06")
    issues = month_index("2019-06") - month_index("2018-06")  # issue months 2018-06 … 2019-05
    assert r["issues"] == issues
    n_lgas, n_states = 5, 2
    for level, n in (("lga", n_lgas), ("state", n_states)):
        rows = r["levels"][level]
        assert [row["horizon"] for row in rows] == list(range(1, model.HORIZONS + 1))
        for row in rows:
            h = row["horizon"]
            assert row["n"] == (issues - (h - 1)) * n  # targets past the last month are not scored
            assert row["mae"] >= 0 and 0 <= row["share_inside_range"] <= 1
            assert row["share_inside_rain_only_range"] <= row["share_inside_range"] + 1e-9
        widths = [row["mean_range_width"] for row in rows]
        assert widths == sorted(widths)  # ranges widen with horizon


@needs_data()
def test_real_hindcast_beats_naive_climatology():
    from pipeline.geography import load_geography

    md = load_model_data(DATA_DIR, load_geography(DATA_DIR))
    rows = hindcast(md)["levels"]["lga"]
    for row in rows:
        assert row["mae"] < row["naive_climatology_mae"], row
    assert rows[0]["share_inside_rain_only_range"] >= 0.8
