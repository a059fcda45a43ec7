"""Model-4 seasons (harmonics of log cases, partially pooled) and the ranges that carry their error."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.model import risk as model
from pipeline.model import season_cv
from pipeline.model import season_harmonics as H
from pipeline.model.seasons import season_from_index

coef = st.floats(-1.5, 1.5, allow_nan=False)
thetas = st.lists(st.lists(coef, min_size=4, max_size=4), min_size=1, max_size=6).map(np.array)


@settings(max_examples=200, deadline=None)
@given(thetas)
def test_index_in_range_and_peak_month_recomputable(theta) -> None:
    index = H.seasonal_index_of(theta)
    assert np.all(index.max(axis=1) == 1.0)
    assert np.all(index >= H.MIN_SHARE - 0.0005) and np.all(index <= 1.0)
    for ix in index:
        floor = float(ix.min())
        share = round(floor + (1 - floor) / 2, 3)
        season = season_from_index(ix, share)
        # a client re-derives the peak and the high months from the published index alone
        assert ix[season.peak_month - 1] == 1.0
        assert list(season.high_months) == [m + 1 for m in range(12) if ix[m] >= share]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-0.6, 0.6), min_size=4, max_size=4).map(np.array))
def test_harmonics_of_a_profile_give_back_its_coefficients(theta) -> None:
    """Where the lower bound does not bind, the fitting transform inverts the profile: nothing is lost."""
    p = H.profiles(theta[None])
    assume(p.min() > H.MIN_SHARE)
    assert np.allclose(H.harmonics(np.log(p)), theta[None], atol=1e-9)


@settings(max_examples=150, deadline=None)
@given(st.floats(0.01, 1.0), st.floats(0.05, 10.0), st.floats(10.0, 2000.0),
       st.lists(st.floats(-1, 1), min_size=4, max_size=4), st.lists(st.floats(-1, 1), min_size=4, max_size=4))
def test_pooling_shrinks_toward_the_neighbours_as_the_own_data_thins(own_weight, shrink, range_km, e_own, e_nb) -> None:
    """An area with its own series (distance 0) and one neighbour 100 km away: as the own series' data
    weight falls, the pooled residual moves monotonically from near its own residual toward the
    neighbour-only estimate, which itself shrinks toward 0 (the covariate part) as `shrink` grows."""
    resid = np.array([e_own, e_nb])
    dist = np.array([[0.0, 100.0]])
    weights = [own_weight, own_weight / 2, own_weight / 4, 0.0]
    est = [H.pooled_residual(dist, resid, np.array([w, 1.0]), range_km, shrink)[0] for w in weights]
    nb_only = est[-1]
    gaps = [np.linalg.norm(e - nb_only) for e in est]
    assert all(a >= b - 1e-12 for a, b in zip(gaps, gaps[1:], strict=False))
    more_shrink = H.pooled_residual(dist, resid, np.array([0.0, 1.0]), range_km, shrink * 10)[0]
    assert np.linalg.norm(more_shrink) <= np.linalg.norm(nb_only) + 1e-12


def test_an_area_far_from_every_dated_lga_keeps_its_covariate_part() -> None:
    resid = np.array([[0.5, -0.5, 0.2, 0.1]])
    far = H.pooled_residual(np.array([[5000.0]]), resid, np.array([1.0]), 100.0, 1.0)
    near = H.pooled_residual(np.array([[10.0]]), resid, np.array([1.0]), 100.0, 1.0)
    assert np.allclose(far, 0.0, atol=1e-12) and np.linalg.norm(near) > 0.3


def test_the_fit_learns_the_delay_between_rain_and_cases_from_cases() -> None:
    """Cases peaking 2 months after the rain in every training area: the held-out area's predicted peak
    follows its own rain by 2 months (a rotation of the rain harmonics, not a fixed shift)."""
    rng = np.random.default_rng(0)
    n = 40
    peaks = rng.integers(0, 12, n)
    m = np.arange(12)
    rain = 20 + 200 * np.exp(-0.5 * (((m[None, :] - peaks[:, None] + 6) % 12 - 6) / 1.5) ** 2)
    cases = 1 + 2 * np.exp(-0.5 * (((m[None, :] - peaks[:, None] - 2 + 6) % 12 - 6) / 1.5) ** 2)
    x = H.rain_covariates(rain, np.zeros(n), np.zeros(n))
    std = H.Standardiser.of(x)
    units = H.Units(H.harmonics(np.log(cases)), x, np.ones(n), np.zeros(n, bool), np.full((n, 2), np.nan),
                    np.zeros(n), np.array([""] * n))
    keep = np.arange(n) != 0
    f = H.fit(units, std, keep, 100.0, 1.0)
    pred = H.profiles(f.predict(x[:1], np.zeros((1, 2))))[0]
    assert (int(np.argmax(pred)) - (int(peaks[0]) + 2)) % 12 in (0, 1, 11)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.001, 0.95), st.floats(0.0, 0.5), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_ranges_carry_the_season_error_and_keep_their_order(score, sd, a, b) -> None:
    low, high = score * (1 - a * 0.5), min(1.0, score * (1 + b))
    s = model.Scores(np.array([score]), np.array([low]), np.array([high]))
    w = model.widen(s, sd)
    assert w.score[0] == score and w.low[0] <= score <= w.high[0]
    # never narrower than without the season error, and wider the larger the error
    assert w.low[0] <= low + 1e-12 and w.high[0] >= high - 1e-12
    w2 = model.widen(s, sd + 0.1)
    assert w2.low[0] <= w.low[0] + 1e-12 and w2.high[0] >= w.high[0] - 1e-12
    assert model.widen(s, 0.0) == s


def test_season_error_coverage_is_nested_by_state() -> None:
    """Each state's residuals are judged by the other states' sd: a state much worse than the rest is
    mostly outside, which pooling its own residuals into the sd would hide."""
    rng = np.random.default_rng(1)
    resid = np.vstack([rng.normal(0, 0.1, (5, 12)), rng.normal(0, 1.0, (1, 12))])
    group = np.array(["A", "B", "C", "D", "E", "F"])
    e = season_cv.season_error(resid, group, 1.2816)
    assert e["profiles"] == 6 and e["log_sd"] > 0.3
    assert e["lowest_month_share_inside"] <= 5 / 6
