"""Model 7: the rains' onset in the rain-driven season, and a rule that publishes climate-driven seasons or
model 4 only, the borrowed ones kept as references (docs/model-7-protocol.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.model import season5 as S
from pipeline.model import season6 as R

from .test_season6 import _data6, _groups, _rain, assert_held_out_fold_unchanged


def _onset(month: int, spread: float = 0.3) -> np.ndarray:
    """[12] an onset distribution centred on `month` (shares summing to 1)."""
    m = np.arange(12)
    d = np.minimum(np.abs(m - month), 12 - np.abs(m - month))
    o = np.exp(-(d**2) / (2 * spread**2))
    return o / o.sum()


@settings(max_examples=60, deadline=None)
@given(peak=st.integers(0, 11), k=st.integers(1, 11), amp=st.floats(50, 400), h=st.sampled_from(R.GRID_H_MM),
       mu=st.sampled_from(R.GRID_MU_ONSET), om=st.sampled_from(R.GRID_OMEGA), b=st.sampled_from(R.GRID_B))
def test_shifting_rain_and_onset_by_k_months_shifts_the_season_by_k(peak, k, amp, h, mu, om, b) -> None:
    rain, onset = _rain(peak, amp)[None], _onset((peak - 3) % 12)[None]
    suit = R.thermal_suitability(np.full((1, 12), 25.0))
    p0 = R.onset_profiles(rain, suit, onset, h, mu, om, b)
    pk = R.onset_profiles(np.roll(rain, k, axis=1), suit, np.roll(onset, k, axis=1), h, mu, om, b)
    np.testing.assert_allclose(pk, np.roll(p0, k, axis=1), atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(level=st.floats(0.0, 500.0), temp=st.floats(18.0, 32.0), h=st.sampled_from(R.GRID_H_MM),
       mu=st.sampled_from(R.GRID_MU_ONSET), om=st.sampled_from(R.GRID_OMEGA), b=st.sampled_from(R.GRID_B))
def test_flat_rain_and_an_even_onset_give_a_weak_season(level, temp, h, mu, om, b) -> None:
    rain, suit = np.full((1, 12), level), R.thermal_suitability(np.full((1, 12), temp))
    p = R.onset_profiles(rain, suit, np.full((1, 12), 1 / 12), h, mu, om, b)
    np.testing.assert_allclose(p, 1.0, atol=1e-12)
    assert S.season_class(S.trough_to_peak(S.smooth3(p)))[0] == "weak"


def test_the_onset_pulse_moves_cases_before_the_rain_peak() -> None:
    """Rains that begin in March and peak in July: the onset weight pulls the season earlier, and a lag
    below zero reads the month after (the kernel may start one month before the monthly total)."""
    rain, onset, suit = _rain(6, 300.0)[None], _onset(2)[None], np.ones((1, 12))
    plain = R.onset_profiles(rain, suit, onset, 100.0, 1.0, 0.0, 0.5)
    pulse = R.onset_profiles(rain, suit, onset, 100.0, 1.0, 8.0, 0.5)
    assert int(S.smooth3(pulse).argmax()) < int(S.smooth3(plain).argmax())
    early = R.onset_profiles(rain, suit, onset, 100.0, -1.0, 0.0, 0.0)
    late = R.onset_profiles(rain, suit, onset, 100.0, 0.0, 0.0, 0.0)
    assert int(S.smooth3(early).argmax()) == (int(S.smooth3(late).argmax()) - 1) % 12


def test_with_no_onset_weight_the_kernel_is_model_6_s_at_spread_1_up_to_its_wider_support() -> None:
    rain, suit = _rain(7, 250.0)[None], np.ones((1, 12))
    a = R.onset_profiles(rain, suit, _onset(4)[None], 100.0, 2.0, 0.0, 0.5)
    w = R.lag_weights(2.0, 1.0, R.ONSET_LAG_MIN)
    # model 6's kernel with the month-after weight added at j = -1
    v = sum(wj * np.roll(R.drive(rain, suit, 100.0), j, axis=1) for j, wj in zip(range(-1, R.MAX_LAG + 1), w, strict=True))
    expect = 0.5 + v / v.mean()
    np.testing.assert_allclose(a, expect / expect.mean(), rtol=1e-12)


def test_the_dated_onset_series_equals_the_circular_one_on_a_repeating_year() -> None:
    rain, suit = _rain(7, 300.0)[None], np.ones((1, 12))
    on = np.zeros((1, 12))
    on[0, 3] = 1.0
    dated = R.onset_dated_series(np.tile(rain, (1, 4)), np.tile(suit, (1, 4)), np.tile(on, (1, 4)),
                                 rain, suit, on, 100.0, 0.5, 2.0, 0.5)
    clim = R.onset_profiles(rain, suit, on, 100.0, 0.5, 2.0, 0.5)
    assert np.isnan(dated[0, :R.MAX_LAG]).all() and np.isnan(dated[0, R.ONSET_LAG_MIN:]).all()
    ratio = dated[0, 12:24] / clim[0]
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)


def test_fit_onset_recovers_the_constants_that_made_the_seasons() -> None:
    rng = np.random.default_rng(5)
    peaks = [5, 6, 7, 8, 9]
    rain = np.vstack([_rain(p, a) for p in peaks for a in rng.uniform(100, 300, 3)])
    onset = np.vstack([_onset(p - 3 - i % 2) for p in peaks for i in range(3)])
    suit = R.thermal_suitability(24 + rng.normal(0, 2, rain.shape))
    truth = (100.0, 0.5, 2.0, 0.5)
    prof = R.onset_profiles(rain, suit, onset, *truth)
    groups = _groups(5, 3)
    rec = np.array([prof[g].mean(axis=0) for g, _ in groups])
    kf = R.fit_onset(rain, suit, onset, groups, rec)
    assert kf.params == truth and kf.loss < 1e-12 and not kf.at_grid_edge


def _data7(seed: int = 0, truth: tuple[float, float, float, float] = (100.0, 0.5, 2.0, 0.5)) -> S.Data:
    """Model 6's five synthetic states, their recorded seasons made by `rain_onset` from their own rain and
    onsets (rains beginning three months before their peak)."""
    d = _data6(seed)
    assert d.area_rain is not None and d.area_temp is not None
    rng = np.random.default_rng(seed + 100)
    peaks = np.argmax(d.area_rain, axis=1)
    onset = np.vstack([_onset(int(p) - 3) for p in peaks])
    prof = R.onset_profiles(d.area_rain, R.thermal_suitability(d.area_temp), onset, *truth)
    states = d.dated_states
    rec_state = np.array([prof[d.area_state == s].mean(axis=0) for s in states]) * np.exp(rng.normal(0, 0.02, (5, 12)))
    rec_state /= rec_state.mean(axis=1, keepdims=True)
    T = d.area_rain_months.shape[1] if d.area_rain_months is not None else 0
    cal_all = (d.cal[0] - R.MAX_LAG + np.arange(T)) % 12
    months = onset[:, cal_all]
    return dataclasses.replace(d, rec_state=rec_state, area_onset=onset, area_onset_months=months, protocol=7,
                               _cache={})


METHODS7 = ("national_mean", "rain_crude", "latitude_band", "rain_kernel", "rain_onset")


def test_the_rule_never_publishes_a_borrowed_season() -> None:
    """Model 7's pool is the publishable candidates: a reference with the least loss is reported, not chosen."""
    d = _data7()
    tuned, best = S.select(d, frozenset(d.dated_states), METHODS7)
    assert best in S.PUBLISHABLE_7
    assert set(tuned) == set(METHODS7)  # the references are still tuned and reported
    # the same training set under model 6's rule may pick a reference when it is simplest within the margin
    six = dataclasses.replace(d, protocol=6, _cache={})
    _, best6 = S.select(six, frozenset(d.dated_states), METHODS7)
    assert best6 in METHODS7


def test_onset_driven_seasons_are_published_where_the_onset_explains_the_cases() -> None:
    d = _data7()
    p = S.publish(d, METHODS7)
    assert p.protocol == 7 and p.method == "selection" and p.resolved == "rain_onset"
    assert p.hyper == (100.0, 0.5, 2.0, 0.5)
    assert p.summaries["rain_onset"]["states"]["median_shape_r"] > 0.95
    rr = p.recorded_rain
    assert rr is not None and rr["method"] == "rain_onset" and rr["lgas"] == len(d.rec_lga)
    assert rr["lga_gain"] == pytest.approx(0.0, abs=1e-6) and not rr["adopted"]


@pytest.mark.parametrize("held", ["BB", "DD"])
def test_a_perturbed_held_out_state_changes_nothing_in_its_fold_under_model_7(held: str) -> None:
    assert_held_out_fold_unchanged(_data7(), held, METHODS7, "rain_onset")


def test_without_onsets_rain_onset_is_not_a_candidate() -> None:
    d = dataclasses.replace(_data7(), area_onset=None, area_onset_months=None, _cache={})
    assert not S._usable(d, "rain_onset") and S._usable(d, "rain_kernel")
