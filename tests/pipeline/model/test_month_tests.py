"""The pre-registered month tests as pure functions: each can adopt a term, and refuse one."""

from __future__ import annotations

import numpy as np

from pipeline.model import month_tests as mt


def test_centred_average_is_the_2x12_moving_average() -> None:
    x = np.arange(30, dtype=float)[None]
    a = mt.centred_average(x)
    assert np.isnan(a[0, :6]).all() and np.isnan(a[0, -6:]).all()
    assert np.allclose(a[0, 6:-6], x[0, 6:-6])  # a straight line is its own centred average
    seasonal = np.tile(np.arange(12, dtype=float), 3)[None]
    assert np.allclose(mt.centred_average(seasonal)[0, 6:-6], 5.5)  # a pure season averages out


def _data(effect: float, states: int = 6, lgas: int = 4, seed: int = 0) -> mt.MonthData:
    """Cases = season x exp(effect x rain anomaly at lag 1) x noise, for `states` x `lgas` LGAs."""
    rng = np.random.default_rng(seed)
    L, T = states * lgas, 48
    t0, rain_t0 = 2020 * 12, 2019 * 12
    state = np.repeat([f"S{i}" for i in range(states)], lgas)
    clim = np.tile(np.array([5, 5, 20, 60, 120, 180, 250, 280, 200, 80, 10, 5], dtype=float), (L, 1))
    rain = clim[:, np.arange(rain_t0, rain_t0 + T + 12) % 12] * rng.lognormal(0, 0.5, (L, T + 12))
    index = np.tile(np.array([0.6, 0.6, 0.6, 0.6, 0.65, 0.7, 0.8, 0.9, 1.0, 0.9, 0.7, 0.6]), (L, 1))
    anomaly = np.log((rain + 10) / (clim[:, np.arange(rain_t0, rain_t0 + T + 12) % 12] + 10))
    cases = 1000 * index[:, np.arange(t0, t0 + T) % 12] * np.exp(effect * anomaly[:, 11:11 + T]) \
        * rng.lognormal(0, 0.05, (L, T))
    return mt.month_data(cases, t0, state, index, np.full(L, 0.6), np.full(L, 1.0), rain, rain_t0, clim,
                         {("S0", 2020)}, {"S1": [2018, 2021]})


def test_a_real_rain_effect_is_adopted_and_its_lag_found() -> None:
    res = mt.run_tests(_data(effect=0.3))
    b = res["b_rain_anomalies_lags_0_3"]
    assert b["adopted"] and b["improved_in"] == 6 and "b_rain_anomalies_lags_0_3" in res["adopted"]
    coef = b["by_state"]["S0"]["coefficients"]
    assert abs(coef[1] - 0.3) < 0.05 and max(abs(coef[0]), abs(coef[2]), abs(coef[3])) < 0.05


def test_no_effect_no_adoption() -> None:
    res = mt.run_tests(_data(effect=0.0, seed=3))
    assert not res["b_rain_anomalies_lags_0_3"]["adopted"] or res["b_rain_anomalies_lags_0_3"]["improved_in"] >= 4
    assert not res["c2_llin_campaign_timing"]["adopted"]
    # SMC is tested only on the years the data cover
    assert res["c1_smc_rounds"]["by_state"]["S0"]["lga_months"] < res["b_rain_anomalies_lags_0_3"]["by_state"]["S0"]["lga_months"]


def test_llin_years_since_campaign() -> None:
    d = _data(effect=0.0)
    s1 = np.flatnonzero(d.state == "S1")[0]
    # January 2020: 2018 campaign placed at July 2018 -> 1.5 years; August 2021: one month after the 2021 one
    assert np.isclose(d.llin[s1, 0], 1.5) and np.isclose(d.llin[s1, 19], 1 / 12)
    assert np.isnan(d.llin[np.flatnonzero(d.state == "S2")[0]]).all()
