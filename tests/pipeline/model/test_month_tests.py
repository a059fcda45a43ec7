"""The registered month-term test as pure functions: a real wet-season effect passes, no effect and a
dry-season effect do not, and the two outcomes are what the registration says."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.model import month_tests as mt

CLIM = np.array([5, 5, 20, 60, 120, 180, 250, 280, 200, 80, 10, 5], dtype=float)


def test_centred_average_is_the_2x12_moving_average() -> None:
    x = np.arange(30, dtype=float)[None]
    a = mt.centred_average(x)
    assert np.isnan(a[0, :6]).all() and np.isnan(a[0, -6:]).all()
    assert np.allclose(a[0, 6:-6], x[0, 6:-6])  # a straight line is its own centred average
    seasonal = np.tile(np.arange(12, dtype=float), 3)[None]
    assert np.allclose(mt.centred_average(seasonal)[0, 6:-6], 5.5)  # a pure season averages out


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-2, 2), min_size=12, max_size=12), st.lists(st.floats(-1, 1), min_size=4, max_size=4))
def test_the_anomaly_removes_any_season_and_keeps_what_differs_between_years(season, years) -> None:
    """O2 of season[m] + level[year] is level[year] minus its mean: the season cancels exactly."""
    t0 = 2020 * 12
    log_x = (np.tile(season, 4) + np.repeat(years, 12))[None]
    a = mt.anomaly(log_x, np.ones_like(log_x, dtype=bool), t0)
    assert np.allclose(a[0], np.repeat(np.array(years) - np.mean(years), 12))


def _data(effect: float, dry_effect: float = 0.0, states: int = 6, lgas: int = 5, seed: int = 0) -> mt.MonthData:
    """Cases = season x exp(effect x rain anomaly at lag 1 [+ dry_effect x anomaly in dry months]) x noise."""
    rng = np.random.default_rng(seed)
    L, T = states * lgas, 48
    t0 = 2020 * 12
    state = np.repeat([f"S{i}" for i in range(states)], lgas)
    clim = np.tile(CLIM[np.arange(t0 - 12, t0 + T) % 12], (L, 1))
    rain = clim * rng.lognormal(0, 0.6, clim.shape)
    season = np.tile(np.array([0.6, 0.6, 0.6, 0.6, 0.65, 0.7, 0.8, 0.9, 1.0, 0.9, 0.7, 0.6]), (L, 1))
    r = mt.rain_anomaly(rain, clim)
    lag1 = r[:, 11:11 + T]
    dry = mt.dry_months_mask(clim, 12, T)
    log_ref = np.log(season[:, np.arange(t0, t0 + T) % 12])
    cases = 1000 * np.exp(log_ref + effect * lag1 * (clim[:, 11:11 + T] >= 50) + dry_effect * r[:, 12:12 + T] * dry) \
        * rng.lognormal(0, 0.05, (L, T))
    feats = mt.term_features(rain, clim, 12, T)
    return mt.MonthData(t0, cases, log_ref + np.log(1000), feats, dry, state)


def test_a_real_wet_season_effect_passes_the_registered_rule() -> None:
    res = mt.run_tests(_data(effect=0.3))
    t1 = res["t1_rain_lags_1_2_wet_months"]
    assert t1["meets_minimum_effect"] and t1["plausible"] and t1["adopted"]
    assert t1["states_gaining_at_least_0_03"] >= 5 and t1["pooled_gain_month_to_month_interval"][0] > 0
    assert abs(t1["by_state"]["S0"]["coefficients"][0] - 0.3) < 0.05  # lag 1 found, lag 2 near zero
    assert abs(t1["by_state"]["S0"]["coefficients"][1]) < 0.05
    assert res["adopted"] and res["adopted"][0] in mt.TERMS


def test_no_effect_no_adoption() -> None:
    res = mt.run_tests(_data(effect=0.0, seed=3))
    assert res["adopted"] == []
    for t in mt.TERMS:
        assert not res[t]["meets_minimum_effect"]


def test_an_effect_in_dry_months_is_implausible_whatever_its_r() -> None:
    """T2 (ungated) picks up a dry-season rain effect; the plausibility rule rejects it."""
    res = mt.run_tests(_data(effect=0.0, dry_effect=2.0, seed=1))
    t2 = res["t2_rain_lags_0_3"]
    assert t2["dry_month_max_effect"] > mt.DRY_MAX_EFFECT and not t2["plausible"] and not t2["adopted"]
    # the gated terms carry no effect in dry months by construction
    assert res["t1_rain_lags_1_2_wet_months"]["dry_month_max_effect"] == 0.0


def test_bootstrap_interval_holds_the_pooled_gain() -> None:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(12, 24))
    state = np.repeat(["A", "B", "C"], 4)
    ref = obs + rng.normal(0, 1.0, obs.shape)
    better = obs + rng.normal(0, 0.3, obs.shape)
    gain, lo, hi = mt.bootstrap_gain(obs, ref, better, state, n=200)
    assert lo <= gain <= hi and lo > 0
    same = mt.bootstrap_gain(obs, ref, ref, state, n=50)
    assert same[0] == 0.0 and same[1] == 0.0 == same[2]
