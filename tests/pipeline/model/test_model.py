"""Model properties on small synthetic arrays (hypothesis): range ordering, widening with
time since the last survey, the random-walk smoother, fieldwork adjustment, levels,
aggregation and the urban split."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pipeline.model import risk as model

share = st.floats(0, 1, allow_nan=False)
positivity = st.floats(0.01, 0.7, allow_nan=False)


def _rounds(values: dict[int, float], state: str = "KN", children: int | None = 200) -> pl.DataFrame:
    return pl.DataFrame(
        {"state_code": [state] * len(values), "survey_year": list(values), "positivity": list(values.values()),
         "test": ["microscopy"] * len(values), "children": [children] * len(values)},
        schema_overrides={"children": pl.Int64},
    )


FLAT_C = np.ones((1, 12))
T0 = 2010 * 12


@settings(max_examples=40, deadline=None)
@given(
    mean=arrays(np.float64, (3, 5), elements=st.floats(-4, 2)),
    var=arrays(np.float64, (3, 5), elements=st.floats(0, 3)),
    c=arrays(np.float64, (3, 5), elements=st.floats(0.5, 1.6)),
    n=st.floats(20, 500),
)
def test_score_low_le_score_le_score_high_and_bounded(mean, var, c, n):
    base = model.Baseline(mean, var, 0, 0.1, n)
    centre, low, high = model.baseline_range(base, np.arange(5))
    s = model.scores(centre, low, high, c)
    assert (s.low <= s.score + 1e-12).all() and (s.score <= s.high + 1e-12).all()
    assert (s.low >= 0).all() and (s.high <= 1).all()


@settings(max_examples=30, deadline=None)
@given(p15=positivity, p18=positivity, n=st.integers(30, 600), months_after=st.integers(1, 60))
def test_range_widens_with_time_since_the_last_survey(p15, p18, n, months_after):
    rounds = _rounds({2015: p15, 2018: p18}, children=n)
    last = model.round_month(2018)
    obs = model.observations(rounds, ["KN"], FLAT_C, T0, last + 80)
    base = model.smooth(obs, 0.1)
    t = np.array([last + months_after, last + months_after + 1])
    centre, low, high = model.baseline_range(base, t)
    # the mean holds after the last round, the logit-scale range widens every month
    assert centre[0, 0] == pytest.approx(centre[0, 1])
    width = model.logit(high) - model.logit(low)
    assert width[0, 1] > width[0, 0]
    assert base.var[0, last - T0 + months_after] > base.var[0, last - T0]


def test_smoother_passes_near_precise_rounds_and_between_them():
    rounds = _rounds({2015: 0.4, 2018: 0.2}, children=10**7)
    obs = model.observations(rounds, ["KN"], FLAT_C, T0, 2022 * 12)
    base = model.smooth(obs, 0.1)
    a, b = model.round_month(2015) - T0, model.round_month(2018) - T0
    assert model.expit(base.mean[0, a]) == pytest.approx(0.4, abs=1e-3)
    assert model.expit(base.mean[0, b]) == pytest.approx(0.2, abs=1e-3)
    mid = model.expit(base.mean[0, (a + b) // 2])
    assert 0.2 < mid < 0.4
    # before the first round the mean is the first round's, with more uncertainty
    assert base.var[0, 0] > base.var[0, a]


def test_fieldwork_in_the_high_season_lowers_the_annual_baseline():
    c = np.array([[0.8] * 8 + [1.4] * 4])  # September-December high
    c = c / c.mean()
    rounds = _rounds({2018: 0.3}, children=10**7)
    obs = model.observations(rounds, ["KN"], c, T0, 2020 * 12)
    base = model.smooth(obs, 0.05)
    annual = model.expit(base.mean[0, model.round_month(2018) - T0])
    assert annual == pytest.approx(0.3 / model.fieldwork_factor(c[0], 2018), rel=1e-3)
    assert annual < 0.3


def test_random_walk_variance_recovers_the_simulated_variance():
    rng = np.random.default_rng(3)
    q, v = 0.2, 0.05
    d = rng.normal(0, np.sqrt(q * 3 + 2 * v), 20000)
    got = model.random_walk_variance(d, np.full(d.size, 2 * v), np.full(d.size, 3.0))
    assert got == pytest.approx(q, rel=0.05)
    # never below the floor, even when sampling error explains every change
    assert model.random_walk_variance(np.zeros(5), np.ones(5), np.ones(5)) == model.Q_MIN


def test_levels_follow_the_who_strata():
    s = np.array([0.0, 0.0099, 0.01, 0.0999, 0.10, 0.3499, 0.35, 0.4999, 0.5, 1.0])
    assert model.levels(s).tolist() == ["very_low", "very_low", "low", "low", "moderate", "moderate", "high",
                                        "high", "very_high", "very_high"]


@settings(max_examples=30, deadline=None)
@given(index=arrays(np.float64, 12, elements=st.floats(0.3, 1.0)))
def test_season_factor_has_mean_one_and_keeps_the_shape(index):
    c = model.season_factor(index)
    assert c.mean() == pytest.approx(1.0)
    assert np.allclose(c * index.mean(), index)  # a rescaling: the shape is untouched


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


def test_urban_rural_ratio_from_latest_round():
    s = _survey([
        (2010, "residence", "urban", None, "RDT", 0.23, "p"),
        (2010, "residence", "rural", None, "RDT", 0.48, "p"),
        (2021, "residence", "urban", None, "microscopy", 0.105, "f"),
        (2021, "residence", "rural", None, "microscopy", 0.267, "f"),
    ])
    ratio, year = model.urban_rural_ratio(s)
    assert year == 2021 and ratio == pytest.approx(0.105 / 0.267)
