"""Model 6: the rain-driven season, its thermal suitability, its place in the nested whole-state CV, and the
class and window rules that err toward flat (docs/model-6-protocol.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.model import season5 as S
from pipeline.model import season6 as R

from .test_season5 import _perturbed

# --- thermal suitability (Mordecai et al. 2013) ------------------------------------------------------


def test_thermal_suitability_has_the_published_optimum_and_limits() -> None:
    """The paper's landmarks: transmission peaks near 25 °C and stops below about 16 °C and above about 34 °C."""
    t = np.linspace(10, 40, 3001)
    s = R.thermal_suitability(t)
    assert s.max() == pytest.approx(1.0, abs=1e-6)
    assert 24.5 <= t[s.argmax()] <= 26.0
    assert 15.0 <= t[s > 0].min() <= 17.0 and 33.0 <= t[s > 0].max() <= 34.5
    assert (s >= 0).all() and (s <= 1 + 1e-9).all()
    # unimodal: rising to the optimum, falling after it
    k = int(s.argmax())
    assert (np.diff(s[: k + 1]) >= -1e-12).all() and (np.diff(s[k:]) <= 1e-12).all()
    # a cool plateau month (20 °C) allows far less than an optimal one; a hot Sahel April (33 °C) too
    assert R.thermal_suitability(np.array([20.0]))[0] < 0.3 and R.thermal_suitability(np.array([33.0]))[0] < 0.2


# --- the kernel's properties ---------------------------------------------------------------------------

def _rain(peak: int, amp: float, base: float = 20.0) -> np.ndarray:
    m = np.arange(12)
    return base + amp * np.clip(np.cos(2 * np.pi * (m - peak) / 12), 0, None) ** 2


@settings(max_examples=60, deadline=None)
@given(peak=st.integers(0, 11), k=st.integers(1, 11), amp=st.floats(50, 400), h=st.sampled_from(R.GRID_H_MM),
       mu=st.sampled_from(R.GRID_MU), sigma=st.sampled_from(R.GRID_SIGMA), b=st.sampled_from(R.GRID_B))
def test_shifting_the_rain_by_k_months_shifts_the_predicted_season_by_k(peak, k, amp, h, mu, sigma, b) -> None:
    rain = _rain(peak, amp)[None]
    flat_t = np.full((1, 12), 25.0)
    suit = R.thermal_suitability(flat_t)
    p0 = R.profiles(rain, suit, h, mu, sigma, b)
    pk = R.profiles(np.roll(rain, k, axis=1), suit, h, mu, sigma, b)
    np.testing.assert_allclose(pk, np.roll(p0, k, axis=1), atol=1e-12)
    assert int(S.smooth3(pk).argmax()) == (int(S.smooth3(p0).argmax()) + k) % 12 or \
        np.isclose(S.smooth3(p0).max(), S.smooth3(p0)[0, (int(S.smooth3(pk).argmax()) - k) % 12])


@settings(max_examples=40, deadline=None)
@given(level=st.floats(0.0, 500.0), temp=st.floats(18.0, 32.0), h=st.sampled_from(R.GRID_H_MM),
       mu=st.sampled_from(R.GRID_MU), sigma=st.sampled_from(R.GRID_SIGMA), b=st.sampled_from(R.GRID_B))
def test_flat_rain_and_temperature_give_a_weak_season(level, temp, h, mu, sigma, b) -> None:
    p = R.profiles(np.full((1, 12), level), R.thermal_suitability(np.full((1, 12), temp)), h, mu, sigma, b)
    tp = S.trough_to_peak(S.smooth3(p))[0]
    assert tp == pytest.approx(1.0) and S.season_class(tp) == "weak"


@settings(max_examples=40, deadline=None)
@given(amp=st.floats(20, 400), b1=st.floats(0, 4), db=st.floats(0.01, 4))
def test_more_background_only_flattens_the_season(amp, b1, db) -> None:
    rain = _rain(7, amp)[None]
    suit = np.ones((1, 12))
    a = S.trough_to_peak(S.smooth3(R.profiles(rain, suit, 50.0, 1.0, 1.0, b1)))[0]
    c = S.trough_to_peak(S.smooth3(R.profiles(rain, suit, 50.0, 1.0, 1.0, b1 + db)))[0]
    assert c >= a - 1e-12


def test_lag_moves_the_peak_later_and_saturation_flattens_wet_months() -> None:
    rain = _rain(6, 300.0)[None]
    suit = np.ones((1, 12))
    p0 = R.profiles(rain, suit, 100.0, 0.0, 0.5, 0.0)
    p2 = R.profiles(rain, suit, 100.0, 2.0, 0.5, 0.0)
    assert int(p2.argmax()) == (int(p0.argmax()) + 2) % 12
    wet = _rain(6, 2000.0, base=300.0)[None]  # the wet south: rain everywhere above saturation
    tp_low_h = S.trough_to_peak(R.profiles(wet, suit, 12.5, 1.0, 1.0, 0.0))[0]
    tp_high_h = S.trough_to_peak(R.profiles(wet, suit, 400.0, 1.0, 1.0, 0.0))[0]
    assert tp_low_h > 0.9 > tp_high_h


def test_a_cool_wet_season_moves_cases_to_the_warmer_months() -> None:
    """The plateau: rain peaks in August while August is cold; R0(T) moves the predicted peak earlier."""
    rain = _rain(7, 300.0)[None]
    temp = (23.0 - 4.0 * np.cos(2 * np.pi * (np.arange(12) - 7) / 12))[None]  # coolest in August
    warm = R.profiles(rain, np.ones((1, 12)), 100.0, 1.0, 1.0, 0.5)
    cool = R.profiles(rain, R.thermal_suitability(temp), 100.0, 1.0, 1.0, 0.5)
    assert S.season_centre(cool)[0] < S.season_centre(warm)[0]


def test_the_lag_kernel_on_a_dated_series_equals_the_circular_one_on_a_repeating_year() -> None:
    rain = _rain(7, 300.0)[None]
    suit = np.ones((1, 12))
    years = np.tile(rain, (1, 4))
    dated = R.dated_series(years, np.tile(suit, (1, 4)), rain, suit, 100.0, 1.5, 1.0, 0.5)
    clim = R.profiles(rain, suit, 100.0, 1.5, 1.0, 0.5)
    assert np.isnan(dated[0, :R.MAX_LAG]).all()
    # the climatology scale: the dated series over a repeating year is the profile (before its mean-1 rescale)
    ratio = dated[0, 12:24] / clim[0]
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)


# --- fitting -----------------------------------------------------------------------------------------

def _groups(n_states: int, per: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.arange(i * per, (i + 1) * per), np.ones(per)) for i in range(n_states)]


def test_fit_recovers_the_constants_that_made_the_seasons() -> None:
    rng = np.random.default_rng(3)
    peaks = [5, 6, 7, 8, 9]
    rain = np.vstack([_rain(p, a) for p in peaks for a in rng.uniform(100, 300, 3)])
    temp = 24 + rng.normal(0, 2, rain.shape)
    suit = R.thermal_suitability(temp)
    truth = (100.0, 1.5, 1.0, 0.5)
    prof = R.profiles(rain, suit, *truth)
    groups = _groups(5, 3)
    rec = np.array([prof[g].mean(axis=0) for g, _ in groups])
    kf = R.fit(rain, suit, groups, rec)
    assert kf.params == truth and kf.loss < 1e-12 and not kf.at_grid_edge


def test_a_best_value_at_the_grid_edge_extends_the_grid_and_says_so() -> None:
    rain = np.vstack([_rain(p, 200.0) for p in (5, 6, 7)])
    suit = np.ones_like(rain)
    truth = (100.0, 1.0, 1.0, 64.0)  # far beyond the b grid's last value (4) and its 3 extensions (32)
    prof = R.profiles(rain, suit, *truth)
    kf = R.fit(rain, suit, _groups(3, 1), prof)
    assert kf.b == 32.0 and kf.at_grid_edge


# --- in the nested cross-validation -------------------------------------------------------------------

def _data6(seed: int = 0) -> S.Data:
    """Five states whose recorded seasons follow their own rain (and temperature) through a known kernel."""
    rng = np.random.default_rng(seed)
    states = ["AA", "BB", "CC", "DD", "EE"]
    per = 4
    area_state = np.repeat(states, per)
    n = len(area_state)
    rain = np.vstack([_rain(4 + i, 150 + 40 * i) * rng.uniform(0.8, 1.2) for i in range(5) for _ in range(per)])
    temp = np.vstack([24 + 3 * np.sin(2 * np.pi * (np.arange(12) - 2 - i) / 12) for i in range(5) for _ in range(per)])
    prof = R.profiles(rain, R.thermal_suitability(temp), 100.0, 1.5, 1.0, 0.5)
    rec_state = np.array([prof[area_state == s].mean(axis=0) for s in states]) * np.exp(rng.normal(0, 0.02, (5, 12)))
    rec_state /= rec_state.mean(axis=1, keepdims=True)
    rec_lga = prof * np.exp(rng.normal(0, 0.05, (n, 12)))
    rec_lga /= rec_lga.mean(axis=1, keepdims=True)
    cal = np.arange(48) % 12
    cases = 100 * rec_lga[:, cal] * np.exp(rng.normal(0, 0.1, (n, 48)))
    return S.Data(area_state=area_state, area_lat=np.repeat([4.5, 6.0, 7.5, 9.0, 11.0], per), area_pop=np.ones(n),
                  arch_profile=None, dated_states=states, rec_state=rec_state, rec_area=np.arange(n),
                  rec_lga=rec_lga, rec_lga_state=area_state.copy(), cases=cases, cal=cal,
                  split_r=rng.uniform(-0.5, 0.9, n), area_rain=rain, area_temp=temp,
                  area_rain_months=np.tile(rain, (1, 5))[:, 12 - R.MAX_LAG:12 + 48], protocol=6)


METHODS6 = ("national_mean", "rain_crude", "latitude_band", "rain_kernel")


def assert_held_out_fold_unchanged(d: S.Data, held: str, methods: tuple[str, ...], trained: str) -> None:
    """Perturbing everything recorded of `held` changes nothing in the outer fold that leaves it out, for
    every method and the selection; the next fold, which trains `trained` on it, does change."""
    i = d.dated_states.index(held)
    a, b = S.outer(d, methods), S.outer(_perturbed(d, held, 5), methods)
    rows = d.rec_lga_state == held
    for m in (*methods, "selection"):
        assert a[m].chosen[i] == b[m].chosen[i]
        np.testing.assert_allclose(a[m].state_pred[i], b[m].state_pred[i])
        np.testing.assert_allclose(a[m].lga_pred[rows], b[m].lga_pred[rows])
        assert a[m].state_k[i] == b[m].state_k[i] and (a[m].lga_k[rows] == b[m].lga_k[rows]).all()
        assert a[m].by_source["chosen"][0][i] == b[m].by_source["chosen"][0][i]
    j = (i + 1) % len(d.dated_states)  # a fold that trains on the state does change: the test can fail
    assert a[trained].chosen[j] != b[trained].chosen[j] or \
        not np.allclose(a[trained].state_pred[j], b[trained].state_pred[j])


@pytest.mark.parametrize("held", ["AA", "CC"])
def test_a_perturbed_held_out_state_changes_nothing_in_its_fold(held: str) -> None:
    assert_held_out_fold_unchanged(_data6(), held, METHODS6, "rain_kernel")


def test_the_rule_prefers_the_simplest_within_the_margin() -> None:
    loss = {"national_mean": 0.30, "rain_crude": 0.26, "latitude_band": 0.25, "rain_kernel": 0.19}
    bias = dict.fromkeys(loss, 0.0)
    # rain_kernel wins by more than the margin over everything simpler
    assert S.simplest_within_margin(list(loss), loss, bias) == "rain_kernel"
    # exactly the margin is not more than it: the simpler one stays
    assert S.simplest_within_margin(list(loss), {**loss, "rain_kernel": 0.20}, bias) == "latitude_band"
    # within the margin, the simpler one is kept
    assert S.simplest_within_margin(list(loss), {**loss, "rain_kernel": 0.22}, bias) == "rain_crude"
    # a candidate late by more than half a month on average is not admissible, however low its loss
    assert S.simplest_within_margin(list(loss), loss, {**bias, "rain_kernel": 0.8}) == "national_mean"
    # if none is admissible, all are
    assert S.simplest_within_margin(list(loss), loss, dict.fromkeys(loss, 1.0)) == "rain_kernel"


def test_rain_driven_seasons_are_selected_where_the_rain_explains_the_cases() -> None:
    d = _data6()
    p = S.publish(d, METHODS6)
    assert p.method == "selection" and p.resolved == "rain_kernel"
    assert p.hyper == (100.0, 1.5, 1.0, 0.5)
    assert p.summaries["rain_kernel"]["states"]["median_shape_r"] > 0.95
    # the class correction and windows that widen strictly with class
    assert set(p.class_correction) == {"states", "lgas"}
    for hw in p.half_width.values():
        assert hw["marked"] < hw["moderate"] < hw["weak"] or hw["weak"] == 6
    rr = p.recorded_rain
    assert rr is not None and rr["lgas"] == len(d.rec_lga)
    # on a rain series that repeats one year, recorded rain and the climatology predict the same months
    assert rr["lga_gain"] == pytest.approx(0.0, abs=1e-6) and not rr["adopted"]


def test_recorded_rain_is_adopted_when_each_year_s_rain_drives_the_cases() -> None:
    """Cases built from each year's own (varying) rain: driving by the recorded months must beat the
    climatology by the registered gain; the same check on cases of a repeating year does not."""
    d = _data6(1)
    rng = np.random.default_rng(9)
    months = d.area_rain_months * rng.lognormal(0, 0.6, d.area_rain_months.shape)
    kf = (100.0, 1.5, 1.0, 0.5)
    suit = R.thermal_suitability(d.area_temp)
    lag = R.MAX_LAG
    cal_all = (d.cal[0] - lag + np.arange(lag + len(d.cal))) % 12
    series = R.dated_series(months, suit[:, cal_all], d.area_rain, suit, *kf)[:, lag:]
    cases = 100 * series * np.exp(rng.normal(0, 0.02, series.shape))
    e = dataclasses.replace(d, area_rain_months=months, cases=cases, _cache={})
    rr = S.recorded_rain_check(e)
    assert rr is not None and rr["adopted"] and rr["lga_gain"] >= S.RECORDED_RAIN_MIN_GAIN


def test_marked_needs_evidence_and_the_bias_correction_moves_the_class() -> None:
    assert S.season_class(0.45) == "marked"
    assert S.season_class(0.45, 0.08) == "moderate"  # under half the peak, but not past its typical error
    assert S.season_class(0.40, 0.08) == "marked"
    f = S.area_fields(np.array([0.66, 0.7, 0.8, 0.9, 1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.68]), "state",
                      {"marked": 1, "moderate": 2, "weak": 3}, None, class_tp=0.66 + 0.05)
    assert f["season_class"] == "weak" and f["peak_window"] == list(range(1, 13)) or len(f["peak_window"]) == 7


@settings(max_examples=60, deadline=None)
@given(errors=st.lists(st.integers(-6, 5), min_size=0, max_size=40), data=st.data())
def test_strict_windows_widen_with_every_flatter_class(errors, data) -> None:
    classes = data.draw(st.lists(st.sampled_from(S.CLASSES), min_size=len(errors), max_size=len(errors)))
    k = S.half_widths(np.array(errors), np.array(classes), strict=True)
    assert k["marked"] <= 6 and k["moderate"] <= 6 and k["weak"] <= 6
    assert k["moderate"] == 6 or k["moderate"] > k["marked"]
    assert k["weak"] == 6 or k["weak"] > k["moderate"]
    loose = S.half_widths(np.array(errors), np.array(classes))
    assert all(k[c] >= loose[c] for c in S.CLASSES)


def _fit_by_loop(rain: np.ndarray, suit: np.ndarray, groups: list[tuple[np.ndarray, np.ndarray]],
                 recorded: np.ndarray) -> dict[tuple[float, ...], float]:
    """The fitting loss of every point of the protocol's base grid, point by point (the reference the
    vectorised fit must equal)."""
    W = np.zeros((len(groups), len(rain)))
    for i, (idx, w) in enumerate(groups):
        W[i, idx] = w / w.sum()
    target = R.smooth_log(recorded)
    out = {}
    for h in R.GRID_H_MM:
        for mu in R.GRID_MU:
            for sg in R.GRID_SIGMA:
                for b in R.GRID_B:
                    p = R.profiles(rain, suit, h, mu, sg, b)
                    out[(h, mu, sg, b)] = float(((R.smooth_log(W @ p) - target) ** 2).mean())
    return out


def test_the_vectorised_fit_equals_the_loss_point_by_point() -> None:
    rng = np.random.default_rng(11)
    rain = np.vstack([_rain(p, a) for p in (4, 6, 8) for a in rng.uniform(40, 400, 2)]) * rng.uniform(0.5, 1.5, (6, 12))
    rain[0] = 0.0  # a row with no rain at all is flat
    suit = R.thermal_suitability(24 + rng.normal(0, 3, rain.shape))
    groups = [(np.array([0, 1]), np.array([1.0, 2.0])), (np.array([2, 3]), np.ones(2)), (np.array([4, 5]), np.ones(2))]
    recorded = np.abs(rng.normal(1, 0.3, (3, 12)))
    loop = _fit_by_loop(rain, suit, groups, recorded)
    kf = R.fit(rain, suit, groups, recorded)
    best = min(loop, key=lambda k: (round(loop[k], 12), k))
    if not kf.at_grid_edge and kf.params in loop:
        assert kf.params == best and kf.loss == pytest.approx(loop[best], rel=1e-9, abs=1e-12)
    u = R.drive(rain, suit, 50.0)
    kernels = np.stack([R.lag_matrix(mu, sg) for mu in R.GRID_MU for sg in R.GRID_SIGMA])
    W = np.zeros((3, 6))
    for i, (idx, w) in enumerate(groups):
        W[i, idx] = w / w.sum()
    sc = R._grid_scores(u, kernels, W, np.array(R.GRID_B), R.smooth_log(recorded))
    pairs = [(mu, sg) for mu in R.GRID_MU for sg in R.GRID_SIGMA]
    for k, (mu, sg) in enumerate(pairs):
        for j, b in enumerate(R.GRID_B):
            assert sc[k, j] == pytest.approx(loop[(50.0, mu, sg, b)], rel=1e-9, abs=1e-12)


def test_the_season_fit_key_reads_the_dated_months_rain_only() -> None:
    """The season fit is kept between builds by what it reads: a month of rain after the dated series adds
    nothing to its key, a revised dated month changes it (the recorded-rain check reads it)."""
    from types import SimpleNamespace

    import polars as pl

    from pipeline.datasets.transmission import dated_rain_digest

    dated = pl.DataFrame({"year": [2020, 2020, 2021], "month": [1, 2, 12], "cases": [1.0, 2.0, 3.0]})
    periods = [f"{y}-{m:02d}" for y in (2019, 2020, 2021, 2022) for m in range(1, 13)]
    rain = pl.DataFrame({"ocha_pcode": ["NG001"] * len(periods), "period": periods,
                         "rainfall_mm": [float(i) for i in range(len(periods))]})

    def key(r: pl.DataFrame, dek: pl.DataFrame | None = None) -> str:
        return dated_rain_digest(SimpleNamespace(dated_cases=dated, recorded_rainfall=SimpleNamespace(state=r),  # type: ignore[arg-type]
                                                 state_dekadal=dek))

    base = key(rain)
    later = pl.concat([rain, pl.DataFrame({"ocha_pcode": ["NG001"], "period": ["2023-01"], "rainfall_mm": [9.0]})])
    assert key(later) == base
    revised = rain.with_columns(pl.when(pl.col("period") == "2021-06").then(99.0).otherwise(pl.col("rainfall_mm"))
                                .alias("rainfall_mm"))
    assert key(revised) != base
    assert dated_rain_digest(SimpleNamespace(dated_cases=None, recorded_rainfall=None)) == ""  # type: ignore[arg-type]
    # model 7's onsets read the dekads up to the season years of the dated months, not later ones
    from datetime import date
    days = [date(y, m, d) for y in (2019, 2020, 2021, 2022, 2023, 2024) for m in range(1, 13) for d in (1, 11, 21)]
    dek = pl.DataFrame({"ocha_pcode": ["NG001"] * len(days), "dekad_start": days,
                        "rain_mm": [float(i % 30) for i in range(len(days))], "provisional": [False] * len(days)})
    with_dek = key(rain, dek)
    assert with_dek != base
    assert key(rain, dek.filter(pl.col("dekad_start") < date(2024, 1, 1))) == with_dek  # 2024 is after them
    moved = dek.with_columns(pl.when(pl.col("dekad_start") == date(2020, 4, 11)).then(99.0)
                             .otherwise(pl.col("rain_mm")).alias("rain_mm"))
    assert key(rain, moved) != with_dek
