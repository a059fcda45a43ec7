"""Model properties on small synthetic arrays (hypothesis): monotonicity, bounds,
range ordering, aggregation, determinism, forecast widening."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pipeline.model import risk as model

rain_mm = st.floats(0, 800, allow_nan=False)
share = st.floats(0, 1, allow_nan=False)


@given(b=share, r=st.lists(rain_mm, min_size=3, max_size=3), k=st.integers(0, 2), extra=st.floats(0.01, 300))
def test_score_monotone_in_each_lagged_rain_month(b, r, k, extra):
    base = model.score_from(np.array(b), model.effective_rain(*map(np.array, r)))
    r2 = list(r)
    r2[k] += extra
    more = model.score_from(np.array(b), model.effective_rain(*map(np.array, r2)))
    assert more >= base
    if b > 0.01 and sum(r) < 300:  # strictly, where the response is not saturated
        assert more > base


@given(b1=share, b2=share, e=rain_mm)
def test_score_monotone_in_baseline_and_bounded(b1, b2, e):
    lo, hi = sorted((b1, b2))
    s_lo, s_hi = model.score_from(np.array(lo), np.array(e)), model.score_from(np.array(hi), np.array(e))
    assert 0 <= s_lo <= s_hi <= 1


def test_lag_weights_peak_one_month_after_rain():
    # cases follow rain by one to two months: last month's rain weighs most, then two months ago
    w0, w1, w2 = model.LAG_WEIGHTS
    assert w1 > w2 > 0 and w1 > w0 and sum(model.LAG_WEIGHTS) == pytest.approx(1.0)


def test_levels_use_fixed_thresholds():
    s = np.array([0.0, 0.0999, 0.10, 0.1999, 0.2, 0.3499, 0.35, 0.4999, 0.5, 1.0])
    assert model.levels(s).tolist() == [
        "very_low", "very_low", "low", "low", "moderate", "moderate", "high", "high", "very_high", "very_high",
    ]


@settings(max_examples=50, deadline=None)
@given(
    rain=arrays(np.float64, (4, 9), elements=rain_mm),
    prov=arrays(np.bool_, 9),
    b=arrays(np.float64, (4, 1), elements=st.floats(0, 0.7)),
)
def test_estimate_range_ordering_and_determinism(rain, prov, b):
    base = np.repeat(b, 9, axis=1)
    hw = model.survey_halfwidth(base)
    args = (rain, prov, base, np.clip(base - hw, 0, 1), np.clip(base + hw, 0, 1), 2)
    s = model.estimate(*args)
    assert s.score.shape == (4, 7)
    assert (s.low <= s.score + 1e-12).all() and (s.score <= s.high + 1e-12).all()
    assert (s.low >= 0).all() and (s.high <= 1).all()
    again = model.estimate(*args)
    assert np.array_equal(s.score, again.score) and np.array_equal(s.high, again.high)


@settings(max_examples=30, deadline=None)
@given(pop=arrays(np.float64, 6, elements=st.floats(1, 1e6)), vals=arrays(np.float64, (6, 3), elements=share))
def test_state_aggregate_is_population_weighted_mean(pop, vals):
    idx = np.array([0, 0, 1, 1, 1, 2])
    got = model.aggregate(vals, idx, pop, 3)
    for g in range(3):
        m = idx == g
        assert np.allclose(got[g], (vals[m] * pop[m, None]).sum(0) / pop[m].sum())
    # a mean lies between its parts, so the state range stays ordered when the LGA ranges are
    assert (got.min(axis=1) >= vals.min() - 1e-12).all()


@settings(max_examples=30, deadline=None)
@given(
    state_b=arrays(np.float64, 2, elements=st.floats(0.01, 0.6)),
    pop=arrays(np.float64, 5, elements=st.floats(1, 1e6)),
    urban=arrays(np.bool_, 5),
    ratio=st.floats(0.2, 1.0),
)
def test_urban_split_preserves_state_population_mean(state_b, pop, urban, ratio):
    idx = np.array([0, 0, 0, 1, 1])
    lga = model.urban_split(state_b, pop, urban, idx, ratio)
    back = model.aggregate(lga, idx, pop, 2)
    assert np.allclose(back, state_b)
    for g in range(2):  # urban LGAs never riskier than rural ones of the same state
        m = idx == g
        if urban[m].any() and (~urban[m]).any():
            assert lga[m][urban[m]].max() <= lga[m][~urban[m]].min() + 1e-12


def synthetic_rain(n: int, years: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    months = np.tile(np.arange(1, 13), years)
    season = 150 * np.clip(np.sin((months - 3) / 12 * 2 * np.pi), 0, None)
    rain = season[None, :] * rng.gamma(4, 0.25, size=(n, months.size))
    return rain, months


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), issue_offset=st.integers(0, 11), b=st.floats(0.05, 0.6))
def test_forecast_ranges_widen_with_horizon_and_contain_score(seed, issue_offset, b):
    rain, months = synthetic_rain(3, 6, seed)
    issue = 48 + issue_offset
    clim = model.climatology(rain, months, issue + 1)
    base = np.full((3, model.HORIZONS), b)
    hw = model.survey_halfwidth(base)
    fc = model.forecast(rain, np.zeros(months.size, bool), months, issue, base, base - hw, base + hw, clim)
    # the distance from score to each end never shrinks with horizon, unless that end sits on 0 or 1
    lo_gap, hi_gap = fc.score - fc.low, fc.high - fc.score
    assert ((np.diff(lo_gap, axis=1) >= -1e-12) | (fc.low[:, 1:] <= 0)).all()
    assert ((np.diff(hi_gap, axis=1) >= -1e-12) | (fc.high[:, 1:] >= 1)).all()
    assert (fc.low <= fc.score + 1e-12).all() and (fc.score <= fc.high + 1e-12).all()
    # only data up to the issue month is used: changing later rain changes nothing
    rain2 = rain.copy()
    rain2[:, issue + 1 :] *= 3
    fc2 = model.forecast(rain2, np.zeros(months.size, bool), months, issue, base, base - hw, base + hw,
                         model.climatology(rain2, months, issue + 1))
    assert np.array_equal(fc.score, fc2.score)


def test_forecast_responds_to_recorded_rain():
    rain, months = synthetic_rain(2, 6, 1)
    issue = 60 + 6  # a July issue: the next months' scores depend on June/July rain
    clim = model.climatology(rain, months, issue + 1)
    base = np.full((2, model.HORIZONS), 0.3)
    wet = rain.copy()
    wet[:, issue] += 200
    a = model.forecast(rain, np.zeros(months.size, bool), months, issue, base, base, base, clim)
    w = model.forecast(wet, np.zeros(months.size, bool), months, issue, base, base, base, clim)
    assert (w.score[:, 0] > a.score[:, 0]).all() and (w.score[:, 1] > a.score[:, 1]).all()


def _survey(rows):
    return pl.DataFrame(
        rows,
        schema={"survey_year": pl.Int64, "level": pl.Utf8, "area": pl.Utf8, "state_code": pl.Utf8, "test": pl.Utf8,
                "positivity": pl.Float64, "source": pl.Utf8},
        orient="row",
    )


def test_state_rounds_prefers_microscopy_and_table_over_page():
    s = _survey([
        (2018, "state", "Kano", "KN", "microscopy", 0.30, "file.csv"),
        (2018, "state", "Kano", "KN", "RDT", 0.50, "file.csv"),
        (2018, "state", "Kano", "KN", "RDT", 0.55, "page: paper"),
        (2015, "state", "Kano", "KN", "RDT", 0.40, "file.csv"),  # no microscopy: scaled by round median ratio
        (2015, "state", "Lagos", "LA", "microscopy", 0.10, "file.csv"),
        (2015, "state", "Lagos", "LA", "RDT", 0.20, "file.csv"),
    ])
    r = model.state_rounds(s, ["KN", "LA"])
    kn = dict(zip(r.filter(pl.col("state_code") == "KN")["survey_year"], r.filter(pl.col("state_code") == "KN")["positivity"], strict=True))
    assert kn[2018] == pytest.approx(0.30)
    assert kn[2015] == pytest.approx(0.40 * 0.5)
    b = model.state_baseline(r, ["KN", "LA"], np.array([2014.0, 2017.0, 2020.0]))
    assert b[0].tolist() == pytest.approx([0.2, 0.2 + (0.3 - 0.2) * (1.5 / 3), 0.3])  # linear between mid-years, flat outside
    with pytest.raises(ValueError):
        model.state_baseline(r, ["KN", "ZZ"], np.array([2019.0]))


def test_urban_rural_ratio_from_latest_round():
    s = _survey([
        (2010, "residence", "urban", None, "RDT", 0.23, "p"),
        (2010, "residence", "rural", None, "RDT", 0.48, "p"),
        (2021, "residence", "urban", None, "microscopy", 0.105, "f"),
        (2021, "residence", "rural", None, "microscopy", 0.267, "f"),
    ])
    ratio, year = model.urban_rural_ratio(s)
    assert year == 2021 and ratio == pytest.approx(0.105 / 0.267)
