"""Calibrated ranges (pipeline.model.ranges) on synthetic data where the truth is known, and
range properties with the design effect and the small-area LGA variance (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pipeline.model import ranges, small_area
from pipeline.model import risk as model


def test_drift_removed_q_ignores_a_common_shift_the_pooled_q_absorbs():
    rng = np.random.default_rng(5)
    q, v, years, k = 0.05, 0.02, 3.0, 400
    interval = np.repeat([1, 2, 3], k)
    drift = np.repeat([-0.9, -0.3, 0.4], k)  # the national change of each interval
    d = drift + rng.normal(0, np.sqrt(q * years + v), interval.size)
    args = (d, np.full(d.size, v), np.full(d.size, years), interval)
    assert ranges.q_drift_removed(*args) == pytest.approx(q, rel=0.15)
    # the pooled estimate reads the drift as random walk: far larger
    assert ranges.q_pooled(*args) > q + 0.05
    # intervals with a single pair carry nothing about how states differ
    assert ranges.q_drift_removed(d[:1], np.full(1, v), np.full(1, years), interval[:1]) == ranges.Q_MIN
    with pytest.raises(ValueError, match="unknown Q method"):
        ranges.estimate_q("median", *args)


def test_cluster_icc_recovers_a_simulated_intra_cluster_correlation():
    rng = np.random.default_rng(11)
    rho, m, n_clusters = 0.15, 20, 3000
    # beta-binomial clusters: p_c ~ Beta with ICC rho around stratum means 0.2 and 0.5
    stratum = np.repeat([0, 1], n_clusters // 2)
    mean = np.where(stratum == 0, 0.2, 0.5)
    a, b = mean * (1 - rho) / rho, (1 - mean) * (1 - rho) / rho
    pc = rng.beta(a, b)
    children = np.full(n_clusters, m)
    positives = rng.binomial(children, pc)
    got = ranges.cluster_icc(children, positives, stratum)
    assert got == pytest.approx(rho, abs=0.02)
    # independent children: no clustering (never negative)
    flat = rng.binomial(children, mean)
    assert ranges.cluster_icc(children, flat, stratum) < 0.01
    assert ranges.design_effect(m, got) == pytest.approx(1 + (m - 1) * got)
    assert ranges.design_effect(0.5, 0.3) == 1.0


def test_round_design_effects_give_unseen_rounds_the_median_design():
    per, new = ranges.round_design_effects({2015: 15.0, 2018: 6.0, 2010: 17.0}, 0.1, [2015, 2018, 2021])
    assert per[2015] == pytest.approx(2.4) and per[2018] == pytest.approx(1.5)
    assert per[2021] == new == pytest.approx(2.4)  # median cluster size 15: 1 + 14 x 0.1
    per, new = ranges.round_design_effects({}, 0.1, [2021])
    assert per == {2021: 1.0} and new == 1.0


def test_calibration_of_standard_normal_errors():
    z = np.random.default_rng(2).normal(size=20000)
    cal = ranges.calibration(z)
    assert cal["var_z"] == pytest.approx(1.0, abs=0.03)
    assert cal["share_inside"] == pytest.approx(ranges.RANGE_LEVEL, abs=0.01)
    # twice the spread: the ranges would be too narrow
    assert ranges.calibration(2 * z)["share_inside"] < 0.6
    assert ranges.calibration(np.array([0.3]))["var_z"] is None


def test_choose_method_takes_the_one_closest_to_one_on_the_log_scale():
    assert ranges.choose_method({"pooled": [0.5, 0.6], "drift_removed": [1.5, 0.7]}) == "drift_removed"
    assert ranges.choose_method({"pooled": [1.1], "drift_removed": [0.5]}) == "pooled"
    # no inner check possible: the documented default
    assert ranges.choose_method({"pooled": [], "drift_removed": []}) == ranges.DEFAULT_Q_METHOD


@settings(max_examples=40, deadline=None)
@given(
    mean=arrays(np.float64, (2, 6), elements=st.floats(-4, 2)),
    var=arrays(np.float64, (2, 6), elements=st.floats(0, 3)),
    deff=st.floats(1, 4),
    delta=arrays(np.float64, (5,), elements=st.floats(-2, 2)),
    lga_var=arrays(np.float64, (5,), elements=st.floats(0, 2)),
)
@example(mean=np.ones((2, 6)), var=np.zeros((2, 6)), deff=1.0, delta=np.full(5, 2.0), lga_var=np.zeros(5))
def test_lga_ranges_hold_the_score_and_are_wider_than_the_state_part(mean, var, deff, delta, lga_var):
    """The published LGA construction (datasets/risk.lga_scores): centre shifted to keep the
    state's mean, range from the state's variance plus the LGA offset's."""
    base = model.Baseline(mean, var, 0, 0.1, 150.0, deff)
    centre, low, high = model.baseline_range(base, np.arange(6))
    state_idx = np.array([0, 0, 1, 1, 1])
    pop = np.array([1.0, 3.0, 2.0, 2.0, 1.0])
    ls = model.logit(centre)
    sd_state = ((model.logit(high) - ls) / model.Z_RANGE)[state_idx]
    lg = small_area.shift_to_mean(ls, delta, pop, state_idx, np.clip(centre, model.EPS, 1 - model.EPS))
    sd = np.sqrt(sd_state**2 + lga_var[:, None])
    s = model.scores(model.expit(lg), model.expit(lg - model.Z_RANGE * sd), model.expit(lg + model.Z_RANGE * sd),
                     np.ones((5, 6)))
    assert (s.low <= s.score + 1e-12).all() and (s.score <= s.high + 1e-12).all()
    # the population-weighted mean of a state's LGAs is the state's baseline
    agg = model.aggregate(model.expit(lg), state_idx, pop, 2)
    assert np.allclose(agg, np.clip(centre, model.EPS, 1 - model.EPS), atol=1e-6)
    # the LGA's own variance only ever widens the range around the same centre
    assert (s.high >= model.expit(lg + model.Z_RANGE * sd_state) - 1e-12).all()
    assert (s.low <= model.expit(lg - model.Z_RANGE * sd_state) + 1e-12).all()


@settings(max_examples=25, deadline=None)
@given(p15=st.floats(0.02, 0.7), p18=st.floats(0.02, 0.7), deff=st.floats(1, 4), h=st.integers(1, 48))
def test_range_with_design_effect_widens_after_the_last_round(p15, p18, deff, h):
    import polars as pl

    rounds = pl.DataFrame({"state_code": ["KN", "KN"], "survey_year": [2015, 2018], "positivity": [p15, p18],
                           "test": ["microscopy"] * 2, "children": [200, 200]})
    last = model.round_month(2018)
    obs = model.observations(rounds, ["KN"], np.ones((1, 12)), 2010 * 12, last + 60, {2015: deff, 2018: 1.0})
    base = model.smooth(obs, 0.05, deff)
    centre, low, high = model.baseline_range(base, np.array([last + h, last + h + 1]))
    width = model.logit(high) - model.logit(low)
    assert width[0, 1] > width[0, 0]
    # a design effect above 1 is a wider range than the binomial one at the same month
    plain = model.smooth(model.observations(rounds, ["KN"], np.ones((1, 12)), 2010 * 12, last + 60), 0.05)
    _, lo1, hi1 = model.baseline_range(plain, np.array([last + h]))
    assert (model.logit(high[0, 0]) - model.logit(low[0, 0])) >= (model.logit(hi1[0, 0]) - model.logit(lo1[0, 0])) - 1e-9


# --- range calibration: drift and variance scale fitted leaving whole states out -------------------


def test_fit_calibration_recovers_a_known_drift_and_scale() -> None:
    rng = np.random.default_rng(7)
    n = 4000
    var = rng.uniform(0.1, 0.5, n)
    years = rng.choice([2.0, 3.0, 4.0], n)
    e = -0.08 * years + rng.normal(0, np.sqrt(0.6 * var))
    cal = ranges.fit_calibration(e, var, years)
    assert abs(cal.drift_per_year + 0.08) < 0.01
    assert abs(cal.var_scale - 0.6) < 0.05
    z = ranges.calibrated_z(e, var, years, cal)
    assert abs(z.mean()) < 0.05 and abs(z.var() - 1) < 0.06


def test_fit_calibration_is_the_identity_without_enough_rows_and_bounded() -> None:
    assert ranges.fit_calibration(np.array([1.0, 2.0]), np.ones(2), np.ones(2)) == ranges.Calibration(rows=2)
    cal = ranges.fit_calibration(np.array([50.0, -50.0, 40.0, -45.0]), np.full(4, 0.01), np.ones(4))
    assert cal.var_scale == ranges.VAR_SCALE_MAX


def test_cross_validated_z_never_uses_the_held_out_fold() -> None:
    rng = np.random.default_rng(3)
    n = 60
    e, var, years = rng.normal(-0.2, 0.5, n), np.full(n, 0.25), np.full(n, 3.0)
    fold = np.repeat(np.arange(6), 10)
    rnd = np.tile([2018, 2021], n // 2)
    z, consts = ranges.cross_validated_z(e, var, years, fold, rnd)
    assert set(consts) == {f"{r}|{f}" for r in (2018, 2021) for f in range(6)}
    # moving the rows of fold 0 leaves their own constants (and so nothing else of fold 0) unchanged
    e2 = e.copy()
    e2[fold == 0] += 5.0
    z2, consts2 = ranges.cross_validated_z(e2, var, years, fold, rnd)
    assert consts2["2018|0"] == consts["2018|0"] and consts2["2021|0"] == consts["2021|0"]
    np.testing.assert_allclose(z2[fold == 0] - z[fold == 0], 5.0 / np.sqrt(
        np.array([consts[f"{r}|0"].var_scale for r in rnd[fold == 0]]) * 0.25))
    # but other folds' constants (fitted with fold 0's rows) move
    assert consts2["2018|1"] != consts["2018|1"]
    # and the constants of one round never see the other round's rows
    e3 = e.copy()
    e3[rnd == 2021] += 3.0
    _, consts3 = ranges.cross_validated_z(e3, var, years, fold, rnd)
    assert all(consts3[f"2018|{f}"] == consts[f"2018|{f}"] for f in range(6))


# --- the registered drift check (docs/range-protocol.md §1) ------------------------------------------


def _round_errors(rng: np.random.Generator, drift: float, n: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    var = rng.uniform(0.1, 0.3, n)
    years = rng.choice([3.0, 3.1], n)
    return drift * years + rng.normal(0, np.sqrt(var)), var, years


def test_drift_check_applies_a_drift_that_continues_and_holds_one_that_stopped() -> None:
    rng = np.random.default_rng(11)
    train = _round_errors(rng, -0.1)
    cal, held = ranges.fit_calibration(*train), ranges.fit_calibration(*train, with_drift=False)
    assert held.drift_per_year == 0.0 and cal.drift_per_year < -0.08
    # the decline goes on into the predicted round: the drift earns its place
    kept = ranges.drift_check(*_round_errors(rng, -0.1), cal, held, 2021)
    assert kept.applied and kept.mae_held - kept.mae_drift >= ranges.DRIFT_MIN_GAIN
    assert kept.log_score_drift > kept.log_score_held and abs(kept.bias_drift) < abs(kept.bias_held)
    # the decline stopped: the held level is as good or better, so the level holds
    stopped = ranges.drift_check(*_round_errors(rng, 0.0), cal, held, 2021)
    assert not stopped.applied and stopped.mae_drift > stopped.mae_held
    # a gain below the registered margin is not enough
    small = ranges.drift_check(*_round_errors(rng, -0.1), cal, held, 2021, min_gain=10.0)
    assert not small.applied
    assert kept.to_json()["applied"] is True and kept.to_json()["min_gain"] == ranges.DRIFT_MIN_GAIN


def test_a_held_calibration_gives_every_degree_of_freedom_to_the_scale() -> None:
    e, var, years = np.array([-0.3, 0.1, -0.2, 0.4]), np.full(4, 0.25), np.full(4, 3.0)
    held = ranges.fit_calibration(e, var, years, with_drift=False)
    assert held.drift_per_year == 0.0
    assert held.var_scale == pytest.approx(float((e**2 / var).sum() / 4))
    z, consts = ranges.cross_validated_z(e, var, years, np.array([0, 0, 1, 1]), with_drift=False)
    assert all(c.drift_per_year == 0.0 for c in consts.values())
