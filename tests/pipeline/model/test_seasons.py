"""Season rules (SPEC 2.6): worked examples reasoned by hand, then general properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.model.seasons import (
    Season,
    circular_distance,
    lag_profiles,
    season_from_index,
    seasonal_index,
    seasons_from_profiles,
    weighted_profile,
)

# --- worked examples -------------------------------------------------------------

# Kano-like single rainy season: peak August, near-dry November-February.
KANO = [0.2, 0.5, 3, 12, 50, 110, 210, 287, 150, 30, 1, 0.1]
# Lagos-like two rainy seasons: June peak, August dip, September second peak.
LAGOS = [25, 50, 100, 150, 200, 329, 150, 84, 228, 150, 50, 20]


def test_unimodal_no_lag() -> None:
    s = seasons_from_profiles(KANO, lag_months=0)[0]
    # 287 is the peak; >= 143.5 are July (210), August, September (150)
    assert s.peak_month == 8
    assert s.high_months == (7, 8, 9)
    assert (s.season_start_month, s.season_end_month, s.season_months) == (7, 9, 3)
    assert s.seasonal_index[7] == 1.0
    assert s.seasonal_index[6] == round(210 / 287, 3)


def test_lag_moves_everything_later() -> None:
    s = seasons_from_profiles(KANO, lag_months=1)[0]
    assert s.peak_month == 9
    assert s.high_months == (8, 9, 10)
    assert (s.season_start_month, s.season_end_month) == (8, 10)
    # January cases follow December rain
    assert s.seasonal_index[0] == round(0.1 / 287, 3)


def test_bimodal_two_low_months_are_not_carried() -> None:
    s = seasons_from_profiles(LAGOS, lag_months=0)[0]
    # half of 329 is 164.5: May (200), June (329), September (228) are high;
    # July (150) and August (84) are both low, so two low months separate the runs
    # and the season stays May-June.
    assert s.high_months == (5, 6, 9)
    assert (s.season_start_month, s.season_end_month, s.season_months) == (5, 6, 2)
    # a high month outside the main season is allowed
    assert 9 not in s.months


def test_bimodal_single_gap_is_carried() -> None:
    prof = [10, 20, 60, 80, 100, 90, 30, 85, 70, 20, 10, 5]
    s = season_from_index(seasonal_index(prof)[0])
    assert s.high_months == (3, 4, 5, 6, 8, 9)
    assert s.months == (3, 4, 5, 6, 7, 8, 9)
    assert s.season_months == 7 and s.peak_month == 5


def test_wraps_year_end() -> None:
    prof = [90, 60, 10, 5, 2, 1, 1, 2, 5, 20, 70, 100]  # November-February season
    s = season_from_index(seasonal_index(prof)[0])
    assert s.peak_month == 12
    assert (s.season_start_month, s.season_end_month, s.season_months) == (11, 2, 4)
    assert s.months == (11, 12, 1, 2)
    assert s.high_months == (1, 2, 11, 12)


def test_flat_profile_is_january_to_december() -> None:
    s = season_from_index([1.0] * 12)
    assert (s.peak_month, s.season_start_month, s.season_end_month, s.season_months) == (1, 1, 12, 12)
    assert s.high_months == tuple(range(1, 13))


def test_all_high_starts_after_trough() -> None:
    idx = [0.8, 0.7, 0.6, 0.9, 1.0, 0.9, 0.8, 0.8, 0.9, 0.9, 0.8, 0.7]
    s = season_from_index(idx)
    assert (s.season_start_month, s.season_end_month, s.season_months) == (4, 3, 12)
    assert s.peak_month == 5


def test_eleven_high_months_keep_a_gap() -> None:
    idx = [1.0] * 12
    idx[3] = 0.2
    s = season_from_index(idx)
    assert s.season_months == 11
    assert (s.season_start_month, s.season_end_month) == (5, 3)
    assert s.peak_month == 5  # first maximum in season order


def test_tie_between_runs_prefers_larger_sum() -> None:
    idx = [0.1, 1.0, 0.1, 0.1, 0.1, 0.6, 1.0, 0.7, 0.1, 0.1, 0.1, 0.1]
    s = season_from_index(idx)
    assert s.peak_month == 7 and s.months == (6, 7, 8)


def test_tie_between_equal_runs_prefers_earlier_start() -> None:
    idx = [0.1, 1.0, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 0.1, 0.1, 0.1, 0.1]
    s = season_from_index(idx)
    assert s.peak_month == 2 and s.months == (2,)


def test_share_threshold_is_inclusive() -> None:
    idx = [0.5, 1.0, 0.499] + [0.0] * 9
    s = season_from_index(idx, share=0.5)
    assert s.high_months == (1, 2)


def test_rejects_profile_without_rain() -> None:
    with pytest.raises(ValueError):
        seasonal_index([0.0] * 12)
    with pytest.raises(ValueError):
        seasonal_index([1.0] * 11)
    with pytest.raises(ValueError):
        seasonal_index([1.0] * 11 + [float("nan")])


def test_helpers() -> None:
    assert circular_distance(12, 1) == 1
    assert circular_distance(1, 7) == 6
    assert circular_distance(3, 3) == 0
    assert list(lag_profiles(list(range(12)), 2)[0][:3]) == [10, 11, 0]
    w = weighted_profile([[1.0] * 12, [3.0] * 12], [1, 3])
    assert np.allclose(w, 2.5)
    with pytest.raises(ValueError):
        weighted_profile([[1.0] * 12], [0])


def test_to_json_has_spec_fields() -> None:
    d = seasons_from_profiles(KANO, 1)[0].to_json()
    assert list(d) == [
        "peak_month", "season_start_month", "season_end_month", "season_months",
        "high_months", "seasonal_index",
    ]
    assert len(d["seasonal_index"]) == 12


# --- properties ------------------------------------------------------------------

values = st.floats(min_value=0.0, max_value=1000.0, allow_nan=False, allow_infinity=False)
profiles = st.lists(values, min_size=12, max_size=12).filter(lambda p: max(p) > 0)
shares = st.sampled_from([0.3, 0.5, 0.6, 0.75])


@st.composite
def unimodal(draw: st.DrawFn) -> list[float]:
    """A bump centred anywhere (wrapping included) on a dry baseline."""
    centre = draw(st.integers(0, 11))
    width = draw(st.floats(0.6, 3.0))
    base = draw(st.floats(0.0, 0.2))
    d = np.minimum(np.abs(np.arange(12) - centre), 12 - np.abs(np.arange(12) - centre))
    return list(base + np.exp(-0.5 * (d / width) ** 2))


@st.composite
def bimodal(draw: st.DrawFn) -> list[float]:
    a = draw(st.integers(0, 11))
    gap = draw(st.integers(2, 5))
    h2 = draw(st.floats(0.5, 1.0))
    p = np.full(12, 0.05)
    for c, h in ((a, 1.0), ((a + gap) % 12, h2)):
        d = np.minimum(np.abs(np.arange(12) - c), 12 - np.abs(np.arange(12) - c))
        p = p + h * np.exp(-0.5 * (d / 0.8) ** 2)
    return list(p)


@st.composite
def with_ties(draw: st.DrawFn) -> list[float]:
    """Small integer levels, so equal months (and tied peaks) are common."""
    return draw(st.lists(st.integers(0, 4), min_size=12, max_size=12).filter(lambda p: max(p) > 0))


any_profile = st.one_of(profiles, unimodal(), bimodal(), with_ties())


def check_invariants(s: Season, share: float) -> None:
    idx = np.asarray(s.seasonal_index)
    assert idx.max() == 1.0
    assert idx[s.peak_month - 1] == 1.0
    assert s.high_months == tuple(int(m) + 1 for m in np.flatnonzero(idx >= share))
    assert 1 <= s.season_months <= 12
    months = s.months
    assert months[0] == s.season_start_month and months[-1] == s.season_end_month
    assert s.peak_month in months
    high = set(s.high_months)
    if s.season_months == 12:
        assert high == set(range(1, 13))
        return
    # the season starts and ends on a high month, and its ends are not extendable
    assert s.season_start_month in high and s.season_end_month in high
    before = (s.season_start_month - 2) % 12 + 1
    after = s.season_end_month % 12 + 1
    assert before not in high and after not in high
    # every lower month inside is a single month between two high months
    for k, m in enumerate(months):
        if m not in high:
            assert 0 < k < len(months) - 1
            assert months[k - 1] in high and months[k + 1] in high
    # a single low month between the season and another high run is always carried
    # (when carrying closes the ring, the run beyond the gap is the season itself)
    after2 = after % 12 + 1
    before2 = (before - 2) % 12 + 1
    assert after2 not in high or after2 in months
    assert before2 not in high or before2 in months


@settings(max_examples=300)
@given(any_profile, shares, st.integers(0, 3))
def test_invariants_hold_for_any_profile(p: list[float], share: float, lag: int) -> None:
    s = seasons_from_profiles(p, lag, share)[0]
    check_invariants(s, share)


@given(any_profile, st.integers(0, 11))
def test_lag_is_rotation(p: list[float], lag: int) -> None:
    a = seasons_from_profiles(p, lag)[0]
    b = seasons_from_profiles(np.roll(p, lag), 0)[0]
    assert a == b


@given(st.one_of(profiles, unimodal(), bimodal()), st.integers(1, 11))
def test_rotation_equivariance_with_unique_peak(p: list[float], k: int) -> None:
    idx = seasonal_index(p)[0]
    assume((idx == 1.0).sum() == 1 and (idx < 0.5).any())
    s = season_from_index(idx)
    r = season_from_index(np.roll(idx, k))

    def shift(m: int) -> int:
        return (m - 1 + k) % 12 + 1

    assert r.peak_month == shift(s.peak_month)
    assert r.season_start_month == shift(s.season_start_month)
    assert r.season_end_month == shift(s.season_end_month)
    assert r.season_months == s.season_months
    assert set(r.high_months) == {shift(m) for m in s.high_months}


@given(any_profile, st.integers(-3, 3))
def test_scale_invariance(p: list[float], e: int) -> None:
    # powers of two scale floats exactly, so the rounded index cannot move
    assert seasons_from_profiles(p, 1)[0] == seasons_from_profiles(np.asarray(p) * 2.0**e, 1)[0]


@given(unimodal())
def test_unimodal_season_is_the_high_run(p: list[float]) -> None:
    s = seasons_from_profiles(p, 0)[0]
    # a single bump gives one contiguous run of high months, and the season is exactly it
    assert set(s.months) == set(s.high_months)
    assert s.peak_month == int(np.argmax(seasonal_index(p)[0])) + 1 or s.seasonal_index.count(1.0) > 1


@given(bimodal())
def test_bimodal_season_covers_peak_run(p: list[float]) -> None:
    s = seasons_from_profiles(p, 0)[0]
    idx = np.asarray(s.seasonal_index)
    # the month after a carried low month is high (the second rainy season)
    for m in s.months:
        if idx[m - 1] < 0.5:
            assert idx[m % 12] >= 0.5 and idx[(m - 2) % 12] >= 0.5


# --- Model 2: the floored index with a lag from the dry season ------------------------------

from pipeline.model.seasons import (  # noqa: E402
    LAG_BOUNDS,
    SeasonParams,
    best_months_share,
    dry_months,
    floored_index,
    lags_for,
    peak_window,
    rain_shape,
    season_centre,
    shift_fractional,
)

rain_profile = st.lists(st.floats(0, 600, allow_nan=False), min_size=12, max_size=12).filter(lambda r: max(r) > 1)
params = st.builds(
    SeasonParams,
    floor=st.floats(0.3, 0.9).map(lambda v: round(v, 2)),
    lag_at_pivot=st.floats(-1, 2.5).map(lambda v: round(v, 1)),
    lag_per_dry_month=st.floats(0, 0.6).map(lambda v: round(v, 2)),
)


@settings(max_examples=60, deadline=None)
@given(rain=rain_profile, p=params)
def test_floored_index_rules(rain, p):
    lag = lags_for([rain], p)
    index = floored_index(rain_shape([rain], lag), p.floor)[0]
    assert index.max() == 1.0 and index.min() >= round(p.floor, 3) - 1e-9
    s = season_from_index(index, p.high_share)
    # high months are exactly the months at the published share, recomputable by a client
    assert list(s.high_months) == [m + 1 for m in range(12) if index[m] >= p.high_share]
    assert s.peak_month in s.high_months
    # the peak window is inside the high months and holds the peak
    window = peak_window(index, p.peak_window_share)
    assert set(window) <= set(s.high_months) and s.peak_month in window
    assert LAG_BOUNDS[0] <= lag[0] <= LAG_BOUNDS[1]


@settings(max_examples=60, deadline=None)
@given(rain=rain_profile, k=st.integers(1, 11), lag=st.floats(-1, 4))
def test_rotating_the_calendar_rotates_the_index_and_its_centre(rain, k, lag):
    a = shift_fractional([rain], lag)[0]
    b = shift_fractional([np.roll(rain, k)], lag)[0]
    assert np.allclose(np.roll(a, k), b)
    ca, cb = season_centre([a])[0], season_centre([b])[0]
    d = (cb - ca - k) % 12
    assume(np.abs(np.fft.fft(a)[1]) > 1e-6 * np.abs(a).sum())  # a centre exists
    assert min(d, 12 - d) == pytest.approx(0, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(rain=rain_profile, b=st.floats(0.3, 0.9))
def test_the_floor_does_not_move_the_centre_and_flattens_the_year(rain, b):
    shape = rain_shape([rain], 0.0)
    low, high = shape, b + (1 - b) * shape
    assume(np.abs(np.fft.fft(shape[0])[1]) > 1e-6 * shape.sum())
    d = abs(season_centre(low)[0] - season_centre(high)[0]) % 12
    assert min(d, 12 - d) == pytest.approx(0, abs=1e-6)
    # a floor can only bring the best four months closer to a third of the year
    assert best_months_share(high)[0] <= best_months_share(low)[0] + 1e-12


@settings(max_examples=40, deadline=None)
@given(p=params, dry_a=st.integers(0, 12), dry_b=st.integers(0, 12))
def test_longer_dry_season_never_shortens_the_lag(p, dry_a, dry_b):
    def rain(dry: int) -> list[float]:
        return [10.0] * dry + [200.0] * (12 - dry)

    assume(dry_a < 12 and dry_b < 12)
    la, lb = lags_for([rain(dry_a)], p)[0], lags_for([rain(dry_b)], p)[0]
    assert dry_months([rain(dry_a)])[0] == dry_a
    if dry_a <= dry_b:
        assert la <= lb
