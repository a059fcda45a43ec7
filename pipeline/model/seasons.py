"""Season rules on 12-value monthly profiles (SPEC 2.6).

Everything here is pure: it takes monthly numbers and returns numbers, so the same
rules serve states, LGAs, the national profile and the independent case records of
the seasonality check. The rules run on the *rounded* published index, so a client
can re-derive `high_months` and `peak_month` from `seasonal_index` and get the same
answer as the service.

Rules (months are 1..12, arrays run January..December):

* expected cases = rainfall climatology shifted later by the lag (cases follow rain);
* `seasonal_index` = that profile divided by its maximum, rounded to 3 decimals
  (the peak month reads exactly 1);
* `high_months` = every month whose index is >= the share of the peak (0.5);
* the season is built from runs of consecutive high months (circular, so a season
  may wrap the year end). A single lower month between two high runs is carried
  into the season (the southern two-rainy-season case). If carrying every such month
  would close the whole year into one ring while some month is not high, the carried
  month with the lowest index (the latest in the year on ties) stays outside, so the
  season keeps a start and an end;
* the main season is the run that holds the peak month. Ties for the peak: the run
  with the larger index sum wins, then the longer run, then the run starting earlier
  in the calendar; within the run the first maximum in season order is the peak;
* when every month is high the season is the whole year and starts the month after
  the lowest month (the latest lowest month on ties), so a flat profile reads
  January-December.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MONTHS = 12
INDEX_DECIMALS = 3


@dataclass(frozen=True)
class Season:
    """One area's season; field names are the SPEC 2.6 names."""

    peak_month: int
    season_start_month: int
    season_end_month: int
    season_months: int
    high_months: tuple[int, ...]
    seasonal_index: tuple[float, ...]

    def to_json(self) -> dict:
        return {
            "peak_month": self.peak_month,
            "season_start_month": self.season_start_month,
            "season_end_month": self.season_end_month,
            "season_months": self.season_months,
            "high_months": list(self.high_months),
            "seasonal_index": list(self.seasonal_index),
        }

    @property
    def months(self) -> tuple[int, ...]:
        """Months of the main season in season order (start first)."""
        return tuple(
            (self.season_start_month - 1 + k) % MONTHS + 1 for k in range(self.season_months)
        )


def _as_matrix(profiles: np.ndarray | Sequence) -> np.ndarray:
    arr = np.asarray(profiles, dtype=float)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != MONTHS:
        raise ValueError(f"profiles must have 12 monthly values per row, got shape {arr.shape}")
    return arr


def lag_profiles(profiles: np.ndarray | Sequence, lag_months: int) -> np.ndarray:
    """Shift profiles later by `lag_months`: cases in month m follow rain in month m-lag.

    The climatology is a cycle, so the shift wraps: December rain drives January cases.
    """
    arr = _as_matrix(profiles)
    return np.roll(arr, int(lag_months), axis=1)


def seasonal_index(profiles: np.ndarray | Sequence) -> np.ndarray:
    """Rows scaled so their maximum is exactly 1, rounded to the published precision.

    Raises on a row without a positive maximum: a season cannot be read from a profile
    with no rain (or no cases) at all, and silently returning zeros would publish a
    made-up season.
    """
    arr = _as_matrix(profiles)
    if not np.all(np.isfinite(arr)):
        raise ValueError("profiles contain missing or infinite values")
    if np.any(arr < 0):
        raise ValueError("profiles contain negative values")
    peak = arr.max(axis=1, keepdims=True)
    if np.any(peak <= 0):
        raise ValueError("a profile has no positive month")
    return np.round(arr / peak, INDEX_DECIMALS)


def weighted_profile(profiles: np.ndarray | Sequence, weights: Sequence[float]) -> np.ndarray:
    """Weighted mean of profiles (e.g. state seasonal indices weighted by population)."""
    arr = _as_matrix(profiles)
    w = np.asarray(weights, dtype=float)
    if w.shape != (arr.shape[0],) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be one non-negative number per profile with a positive sum")
    return (w[:, None] * arr).sum(axis=0) / w.sum()


def circular_distance(a: int | np.ndarray, b: int | np.ndarray) -> int | np.ndarray:
    """Months between two calendar months the short way round (December-January is 1)."""
    d = np.abs(np.asarray(a) - np.asarray(b)) % MONTHS
    out = np.minimum(d, MONTHS - d)
    return int(out) if out.ndim == 0 else out


def _runs(mask: np.ndarray) -> list[list[int]]:
    """Circular runs of True as lists of 0-based months in order; [] if none, one ring if all."""
    if mask.all():
        return [list(range(MONTHS))]
    if not mask.any():
        return []
    # start scanning just after a False month so no run is split across the year end
    first_false = int(np.flatnonzero(~mask)[0])
    runs: list[list[int]] = []
    current: list[int] = []
    for k in range(1, MONTHS + 1):
        m = (first_false + k) % MONTHS
        if mask[m]:
            current.append(m)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def _opposite_peak(months: np.ndarray, peak: int) -> int:
    """The month of `months` farthest (circularly) from `peak`; between two equally far,
    the one after the peak. Relative to the peak, so rotating the calendar rotates the answer."""

    def key(m: int) -> tuple[int, int]:
        ahead = (m - peak) % MONTHS
        return (-min(ahead, MONTHS - ahead), ahead)

    return min((int(m) for m in months), key=key)


def season_from_index(index: Sequence[float], share: float = 0.5) -> Season:
    """Apply the SPEC 2.6 rules to one 12-value index whose maximum is 1."""
    idx = np.asarray(index, dtype=float)
    if idx.shape != (MONTHS,):
        raise ValueError("an index has 12 values")
    high = idx >= share
    top = idx.max()
    is_max = idx == top
    high_months = tuple(int(m) + 1 for m in np.flatnonzero(high))

    if high.all():
        lows = np.flatnonzero(idx == idx.min())
        # a flat profile has no peak to measure from: it reads January to December
        start = 0 if top == idx.min() else (_opposite_peak(lows, int(np.argmax(idx))) + 1) % MONTHS
        order = [(start + k) % MONTHS for k in range(MONTHS)]
        peak = next(m for m in order if is_max[m])
        return Season(
            peak_month=peak + 1,
            season_start_month=start + 1,
            season_end_month=(start - 1) % MONTHS + 1,
            season_months=MONTHS,
            high_months=high_months,
            seasonal_index=tuple(float(v) for v in idx),
        )

    # carry single lower months lying between two high months
    carried = ~high & np.roll(high, 1) & np.roll(high, -1)
    in_season = high | carried
    if in_season.all():
        # keep the ring open at the weakest carried month; on ties the one lying
        # farthest from the peak, so the answer does not depend on where January falls
        cand = np.flatnonzero(carried)
        weakest = _opposite_peak(cand[idx[cand] == idx[cand].min()], int(np.argmax(idx)))
        in_season[weakest] = False

    runs = [r for r in _runs(in_season) if is_max[r].any()]

    def rank(run: list[int]) -> tuple[float, int, int]:
        return (-float(idx[run].sum()), -len(run), run[0])

    main = min(runs, key=rank)
    peak = next(m for m in main if is_max[m])
    return Season(
        peak_month=peak + 1,
        season_start_month=main[0] + 1,
        season_end_month=main[-1] + 1,
        season_months=len(main),
        high_months=high_months,
        seasonal_index=tuple(float(v) for v in idx),
    )


def seasons_from_profiles(
    profiles: np.ndarray | Sequence, lag_months: int, share: float = 0.5
) -> list[Season]:
    """Seasons for many monthly profiles (rainfall, or already case-like when lag is 0).

    Normalising and shifting are done for the whole matrix at once; only the run logic
    works one 12-value row at a time.
    """
    idx = seasonal_index(lag_profiles(profiles, lag_months))
    return [season_from_index(row, share) for row in idx]
