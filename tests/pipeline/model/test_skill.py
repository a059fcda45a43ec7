"""Season ratios and the nested scorecard (pipeline.model.skill): properties on made-up indices and
series (Hypothesis), and the rule that a held-out state's data chooses nothing in its own fold."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pipeline.model import skill

INDEX = arrays(np.float64, 12, elements=st.floats(0.05, 1.0))
ALPHA = st.sampled_from(skill.ALPHAS)


@given(INDEX, ALPHA, st.integers(0, 11))
def test_ratios_compose(index: np.ndarray, alpha: float, m: int) -> None:
    r = skill.ratios(index, alpha)[0]
    for h in (2, 3, 4):
        chained = r[m, h - 2] * r[(m + h - 1) % 12, 0]  # (h-1 months from m) x (1 month from m+h-1)
        assert r[m, h - 1] == pytest.approx(chained, rel=1e-9)


@given(st.floats(0.1, 1.0), arrays(np.float64, 12, elements=st.floats(-1e-3, 1e-3)), ALPHA)
def test_a_flat_season_gives_ratios_near_one(level: float, wobble: np.ndarray, alpha: float) -> None:
    r = skill.ratios(level * (1 + wobble), alpha)
    assert np.all(np.abs(r - 1) < 0.01)


def random_groups(seed: int, n: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """(season classes, states) of n made-up series."""
    rng = np.random.default_rng(seed)
    return rng.choice(skill.CLASSES, n), rng.choice(["AA", "BB", "CC"], n)


def _wide_after_one_month() -> np.ndarray:
    resid = np.full((6, 30, 4), 2.0)
    resid[:, ::2, 0] = 0.0
    return resid


@given(arrays(np.float64, (6, 30, 4), elements=st.floats(-3, 3)), st.integers(0, 2 ** 31 - 1))
@example(_wide_after_one_month(), 0)  # wide ranges on small ratios: the rounding error once taken for shrinking
@settings(max_examples=40, deadline=None)
def test_ranges_widen_with_horizon(resid: np.ndarray, seed: int) -> None:
    classes, states = random_groups(seed)
    q = skill.quantiles(resid, classes, states)
    for cls in skill.CLASSES:
        assert np.all(np.diff(q[cls]["q_low"]) <= 1e-12)
        assert np.all(np.diff(q[cls]["q_high"]) >= -1e-12)
    rows = skill.ratio_rows(np.linspace(0.4, 1.0, 12)[None, :], [classes[0]], [1.0] * 4, q, None)[0]
    for m in range(1, 13):
        recs = [r for r in rows if r["start_month"] == m]
        width = [(r["high"] - r["low"]) / r["ratio"] for r in recs]
        # ratio, low and high are each rounded to 3 decimals (error <= 5e-4): the width's error bound
        slack = [1e-3 / r["ratio"] + (r["high"] - r["low"]) * 5e-4 / r["ratio"] ** 2 for r in recs]
        assert all(b >= a - sa - sb for a, b, sa, sb in zip(width, width[1:], slack, slack[1:], strict=False))


def synthetic(seed: int, states: int = 4, lgas: int = 5, years: int = 4) -> tuple[skill.CaseSeries, np.ndarray]:
    """Counts following a known season (trough/peak 0.4) with noise and a slow level drift."""
    rng = np.random.default_rng(seed)
    season = 0.4 + 0.6 * (0.5 + 0.5 * np.cos(2 * np.pi * (np.arange(12) - 8) / 12))
    n, T = states * lgas, 12 * years
    level = rng.uniform(50, 500, n)[:, None] * np.exp(np.cumsum(rng.normal(0, 0.05, (n, T)), axis=1))
    counts = level * season[np.arange(T) % 12] * np.exp(rng.normal(0, 0.15, (n, T)))
    counts[rng.random((n, T)) < 0.03] = np.nan
    state = np.repeat([f"S{i}" for i in range(states)], lgas)
    index = np.tile(season / season.max(), (n, 1))
    return skill.CaseSeries([f"L{i}" for i in range(n)], state, counts, (2020, 1)), index


def test_projected_counts_beat_persistence_and_cover_near_80_on_a_seasonal_series() -> None:
    series, index = synthetic(1)
    lv = skill.level_cv(series, index, skill.class_of_index(index))
    card = {e["months_ahead"]: e for e in skill.scorecard(lv)["horizons"]}
    for h in (2, 3, 4):
        assert card[h]["projected"]["skill_vs_persistence"] > 0.2
        assert 0.65 <= card[h]["projected_published"]["coverage_80"] <= 0.95
    assert card[4]["persistence"]["skill_vs_flat"] < card[4]["projected"]["skill_vs_flat"]


def test_a_held_out_states_data_chooses_nothing_in_its_own_fold() -> None:
    series, index = synthetic(2)
    classes = skill.class_of_index(index)
    held = "S1"
    rows = series.state == held
    noisy = series.counts.copy()
    rng = np.random.default_rng(7)
    noisy[rows] = noisy[rows] * np.exp(rng.normal(0, 1.0, noisy[rows].shape))  # wreck the held-out state
    other = skill.CaseSeries(series.codes, series.state, noisy, series.first)
    a = skill.level_cv(series, index, classes)
    b = skill.level_cv(other, index, classes)
    for method in ("projected_published", "projected_chosen", "persistence"):
        assert a.cv[method].chosen[held] == b.cv[method].chosen[held]
        qa, qb = a.cv[method].fold_quantiles[held], b.cv[method].fold_quantiles[held]
        for cls in skill.CLASSES:
            np.testing.assert_array_equal(qa[cls]["q_low"], qb[cls]["q_low"])
            np.testing.assert_array_equal(qa[cls]["q_high"], qb[cls]["q_high"])
    # the perturbation was real: the held-out state's own errors moved, and so did another fold's ranges
    assert not np.allclose(np.nan_to_num(a.cv["projected"].resid[rows]), np.nan_to_num(b.cv["projected"].resid[rows]))
    qa, qb = a.cv["projected"].fold_quantiles["S0"], b.cv["projected"].fold_quantiles["S0"]
    assert any(not np.array_equal(qa[c]["q_high"], qb[c]["q_high"]) for c in skill.CLASSES)


def test_season_class_prefers_the_published_class() -> None:
    flat = {"seasonal_index": [1.0] * 12}
    assert skill.season_class(flat) == "weak"
    assert skill.season_class({**flat, "season_class": "marked"}) == "marked"
    assert skill.season_class({"seasonal_index": [0.2] * 11 + [1.0]}) == "marked"
    assert skill.season_class({"seasonal_index": [0.6] * 11 + [1.0]}) == "moderate"
