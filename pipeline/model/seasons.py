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


def season_from_index(index: Sequence[float] | np.ndarray, share: float = 0.5) -> Season:
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


# --- Model 2: a floor on a lagged rainfall shape, lag varying with the dry season -------------
#
#   shape[a,m] = P[a, m - lag_a] / max(P_a)       P = rainfall climatology, fractional lag
#   index[a,m] = floor + (1 - floor) * shape[a,m]
#   lag_a      = lag_at_pivot + lag_per_dry_month * (dry_months_a - LAG_PIVOT_DRY_MONTHS)
#
# floor, lag_at_pivot and lag_per_dry_month are fitted to the routine case profiles by
# grid search (least squares on profiles scaled to mean 1), inside leave-one-out
# cross-validation for every published check figure. docs/seasons.md gives the reasons.

DRY_MONTH_MM = 50.0  # a month with less rain than this counts as dry
LAG_PIVOT_DRY_MONTHS = 5  # the lag rule is written around an area with 5 dry months
LAG_BOUNDS = (-1.0, 4.0)  # months; keeps the shift inside one season
GRID_FLOOR = np.round(np.arange(0.30, 0.9001, 0.01), 2)
GRID_LAG_AT_PIVOT = np.round(np.arange(-1.0, 2.5001, 0.1), 2)
GRID_LAG_PER_DRY_MONTH = np.round(np.arange(0.0, 0.6001, 0.05), 2)
# The rain-driven part of the index must reach this share of its own peak for a month
# to be "high" (SPEC 2.6 "half the peak", applied to the part that varies).
HIGH_RAIN_SHARE = 0.5
# ... and this share for a month to be in the peak window.
PEAK_WINDOW_RAIN_SHARE = 0.8
BEST_MONTHS = 4  # months in the "best months" share of a year's cases


# Candidate lag rules, compared by cross-validation (the constant lag is "linear" with no slope,
# and is scored as its own candidate). Each maps (lag_at_pivot, lag_per_dry_month, dry months) to a lag.
LAG_RULES = ("constant", "linear", "linear_non_negative", "above_5_dry_months")


def rule_lag(rule: str, a: float, s: float, dry: np.ndarray) -> np.ndarray:
    """The lag of every area under one of LAG_RULES."""
    x = dry - LAG_PIVOT_DRY_MONTHS
    if rule == "constant":
        return np.clip(np.full(dry.shape, a, dtype=float), *LAG_BOUNDS)
    if rule == "linear":
        return np.clip(a + s * x, *LAG_BOUNDS)
    if rule == "linear_non_negative":
        return np.clip(a + s * x, 0.0, LAG_BOUNDS[1])
    if rule == "above_5_dry_months":
        return np.clip(a + s * np.maximum(x, 0), 0.0, LAG_BOUNDS[1])
    raise ValueError(f"unknown lag rule {rule!r}")


@dataclass(frozen=True)
class SeasonParams:
    """The fitted constants of the seasonal index and the lag rule they belong to."""

    floor: float
    lag_at_pivot: float
    lag_per_dry_month: float
    rule: str = "linear"

    @property
    def high_share(self) -> float:
        """`high_season_share_of_peak`: where the rain-driven part reaches HIGH_RAIN_SHARE."""
        return round(self.floor + (1.0 - self.floor) * HIGH_RAIN_SHARE, INDEX_DECIMALS)

    @property
    def peak_window_share(self) -> float:
        return round(self.floor + (1.0 - self.floor) * PEAK_WINDOW_RAIN_SHARE, INDEX_DECIMALS)

    def to_json(self) -> dict[str, float | str]:
        return {"floor": self.floor, "lag_at_pivot": self.lag_at_pivot, "lag_per_dry_month": self.lag_per_dry_month,
                "lag_rule": self.rule}


def dry_months(rain: np.ndarray | Sequence) -> np.ndarray:
    """Months with less than DRY_MONTH_MM of rain in the climatology, per row."""
    return (_as_matrix(rain) < DRY_MONTH_MM).sum(axis=1)


def lags_for(rain: np.ndarray | Sequence, params: SeasonParams) -> np.ndarray:
    """Per-row lag (months, fractional) from the length of the dry season."""
    return rule_lag(params.rule, params.lag_at_pivot, params.lag_per_dry_month, dry_months(rain))


def shift_fractional(profiles: np.ndarray | Sequence, lags: np.ndarray | float) -> np.ndarray:
    """Rows shifted later by their own (fractional) lag, linear between whole-month shifts.

    The climatology is a cycle, so the shift wraps. Negative lags shift earlier.
    """
    arr = _as_matrix(profiles)
    lag = np.broadcast_to(np.asarray(lags, dtype=float), (arr.shape[0],))
    whole = np.floor(lag).astype(int)
    frac = lag - whole
    src = (np.arange(MONTHS)[None, :] - whole[:, None]) % MONTHS
    a = np.take_along_axis(arr, src, axis=1)
    b = np.take_along_axis(arr, (src - 1) % MONTHS, axis=1)
    return (1.0 - frac)[:, None] * a + frac[:, None] * b


def rain_shape(rain: np.ndarray | Sequence, lags: np.ndarray | float) -> np.ndarray:
    """Lagged rainfall scaled to peak 1 (unrounded); raises on a row without rain."""
    lagged = shift_fractional(rain, lags)
    peak = lagged.max(axis=1, keepdims=True)
    if np.any(peak <= 0) or not np.all(np.isfinite(lagged)):
        raise ValueError("a profile has no positive month")
    return lagged / peak


def floored_index(shape: np.ndarray, floor: float) -> np.ndarray:
    """Published index: floor + (1 - floor) * shape, rounded; the peak month reads exactly 1."""
    return np.round(floor + (1.0 - floor) * _as_matrix(shape), INDEX_DECIMALS)


def season_centre(profiles: np.ndarray | Sequence) -> np.ndarray:
    """Centre of the season: phase of the first annual harmonic, as a month in [1, 13).

    7.0 is mid-July; 12.5 is the turn of December to January. A constant added to the
    profile (the floor) does not move it, and it does not jump between two near-equal
    peaks the way the single highest month does.
    """
    arr = _as_matrix(profiles)
    z = (arr * np.exp(2j * np.pi * np.arange(MONTHS) / MONTHS)[None, :]).sum(axis=1)
    return (np.angle(z) * MONTHS / (2 * np.pi)) % MONTHS + 1.0


def circular_month_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Fractional months between two season centres, the short way round."""
    d = np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)) % MONTHS
    return np.minimum(d, MONTHS - d)


def best_months_share(profiles: np.ndarray | Sequence, k: int = BEST_MONTHS) -> np.ndarray:
    """Share of a year's cases falling in its k highest months."""
    arr = _as_matrix(profiles)
    return np.sort(arr, axis=1)[:, -k:].sum(axis=1) / arr.sum(axis=1)


def trough_to_peak(profiles: np.ndarray | Sequence) -> np.ndarray:
    arr = _as_matrix(profiles)
    return arr.min(axis=1) / arr.max(axis=1)


def pearson_rows(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    pc, rc = p - p.mean(axis=1, keepdims=True), r - r.mean(axis=1, keepdims=True)
    denom = np.sqrt((pc**2).sum(axis=1) * (rc**2).sum(axis=1))
    return np.where(denom > 0, (pc * rc).sum(axis=1) / np.where(denom > 0, denom, 1.0), np.nan)


@dataclass(frozen=True)
class FitTable:
    """Squared error of every grid point for every case series: [lag, slope, floor, series]."""

    loss: np.ndarray
    shapes: np.ndarray  # [lag, slope, series, 12] series shape (population-weighted mean of area shapes)
    rule: str = "linear"

    def best(self, keep: np.ndarray | None = None) -> tuple[SeasonParams, tuple[int, int, int]]:
        """Grid point with the least total error over the series in `keep` (all by default).

        Ties go to the first grid point in (lag, slope, floor) order, so the fit is deterministic.
        """
        loss = self._loss if keep is None else self._loss[..., keep]
        total = loss.sum(axis=-1)
        i, j, k = np.unravel_index(int(np.argmin(total)), total.shape)
        return (
            SeasonParams(float(GRID_FLOOR[k]), float(GRID_LAG_AT_PIVOT[i]), float(GRID_LAG_PER_DRY_MONTH[j]), self.rule),
            (int(i), int(j), int(k)),
        )

    @property
    def _loss(self) -> np.ndarray:
        """The grid this rule may use: a constant lag has no slope."""
        return self.loss[:, :1] if self.rule == "constant" else self.loss

    def loo_errors(self, exclude: int | None = None) -> np.ndarray:
        """Leave-one-out error of each series (NaN for `exclude`), refitting for every held-out one."""
        loss = self._loss
        n = loss.shape[-1]
        total = loss.sum(axis=-1)
        if exclude is not None:
            total = total - loss[..., exclude]
        flat = (total[..., None] - loss).reshape(-1, n)  # grid x held-out series
        best = np.argmin(flat, axis=0)
        err = loss.reshape(-1, n)[best, np.arange(n)]
        if exclude is not None:
            err = err.astype(float)
            err[exclude] = np.nan
        return err


@dataclass(frozen=True)
class SparseRows:
    """A sparse non-negative weight matrix [n_series, n_areas] as its non-zero entries.

    `product(x)` is `w @ x` without BLAS: a segment sum over the non-zero weights. Each series
    covers few areas, and multi-threaded BLAS on a busy machine is many times slower than
    this for the thin matrices of the season fit."""

    n: int
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    present: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, w: np.ndarray) -> SparseRows:
        rows, cols = np.nonzero(w)
        present = np.unique(rows)
        return cls(w.shape[0], rows, cols, w[rows, cols], present, np.searchsorted(rows, present))

    def product(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros((self.n,) + x.shape[1:])
        if self.rows.size:
            out[self.present] = np.add.reduceat(self.vals[:, None] * x[self.cols], self.starts, axis=0)
        return out


def fit_table(area_rain: np.ndarray, weights: np.ndarray, recorded: np.ndarray, rule: str = "linear") -> FitTable:
    """Errors of every grid point against each recorded case profile.

    area_rain: [n_areas, 12] rainfall climatology; weights: [n_series, n_areas] (each row
    the population of the series' areas, zero elsewhere); recorded: [n_series, 12].
    A series' predicted profile is the weighted mean of its areas' indices; both profiles
    are scaled to mean 1 before comparing, because the index is a shape, not a rate.
    """
    rain = _as_matrix(area_rain)
    w = np.asarray(weights, dtype=float)
    w = w / w.sum(axis=1, keepdims=True)
    rec = _as_matrix(recorded)
    rec = rec / rec.mean(axis=1, keepdims=True)
    d = dry_months(rain)
    floors = GRID_FLOOR[:, None, None]
    r1, r2 = rec.sum(axis=1), (rec**2).sum(axis=1)
    sw = SparseRows.of(w)
    loss = np.empty((len(GRID_LAG_AT_PIVOT), len(GRID_LAG_PER_DRY_MONTH), len(GRID_FLOOR), rec.shape[0]))
    shapes = np.empty((len(GRID_LAG_AT_PIVOT), len(GRID_LAG_PER_DRY_MONTH), rec.shape[0], MONTHS))
    for i, a in enumerate(GRID_LAG_AT_PIVOT):  # 36 x 13 whole-matrix evaluations
        for j, s in enumerate(GRID_LAG_PER_DRY_MONTH):
            if rule == "constant" and j:
                loss[i, j], shapes[i, j] = np.inf, np.nan  # a constant lag has no slope: never chosen
                continue
            lag = rule_lag(rule, a, s, d)
            sh = sw.product(rain_shape(rain, lag))
            shapes[i, j] = sh
            # sum_m (p_m / mean(p) - r_m)^2 with p = f + (1 - f) sh, expanded so the floor grid
            # needs only per-series sums (tested against the direct formula)
            s1, s2, sr = sh.sum(axis=1), (sh**2).sum(axis=1), (sh * rec).sum(axis=1)
            g = floors[:, :, 0]  # [F, 1]
            mp = (MONTHS * g + (1 - g) * s1[None]) / MONTHS
            pp = MONTHS * g**2 + 2 * g * (1 - g) * s1[None] + (1 - g) ** 2 * s2[None]
            pr = g * r1[None] + (1 - g) * sr[None]
            loss[i, j] = np.maximum(pp / mp**2 - 2 * pr / mp + r2[None], 0.0)
    return FitTable(loss=loss, shapes=shapes, rule=rule)


@dataclass(frozen=True)
class CrossValidation:
    """Leave-one-series-out: each series predicted with parameters fitted on the others."""

    predicted: np.ndarray  # [n_series, 12] unrounded index, peak 1
    params: list[SeasonParams]  # the parameters (and rule) each held-out series was predicted with


def choose_rule(tables: dict[str, FitTable], exclude: int | None = None) -> FitTable:
    """The rule with the least leave-one-out error over the series (without `exclude`).

    Ties go to the first rule in LAG_RULES order (the simpler one)."""
    errors = {r: float(np.nansum(tables[r].loo_errors(exclude))) for r in LAG_RULES if r in tables}
    return tables[min(errors, key=lambda r: (errors[r], LAG_RULES.index(r)))]


def rule_cv_errors(tables: dict[str, FitTable]) -> dict[str, float]:
    """Leave-one-out error of each candidate rule over all series (reported, and how the rule is chosen)."""
    return {r: round(float(tables[r].loo_errors().sum()), 3) for r in LAG_RULES if r in tables}


def leave_one_out(tables: FitTable | dict[str, FitTable]) -> CrossValidation:
    """Each held-out series is predicted by a rule chosen, and parameters fitted, on the others only
    (nested: the rule choice itself is a leave-one-out comparison inside the training series)."""
    if isinstance(tables, FitTable):
        tables = {tables.rule: tables}
    n = next(iter(tables.values())).loss.shape[-1]
    preds = np.empty((n, MONTHS))
    params = []
    for h in range(n):  # one refit per held-out series, each an argmin over precomputed grids
        table = choose_rule(tables, exclude=h) if len(tables) > 1 else next(iter(tables.values()))
        keep = np.arange(n) != h
        p, (i, j, _) = table.best(keep)
        sh = table.shapes[i, j, h]
        ix = p.floor + (1.0 - p.floor) * sh
        preds[h] = ix / ix.max()
        params.append(p)
    return CrossValidation(predicted=preds, params=params)


def profile_errors(predicted: np.ndarray, recorded: np.ndarray) -> dict[str, np.ndarray]:
    """Per series: correlation, centre distance, best-months share error, trough/peak error."""
    p, r = _as_matrix(predicted), _as_matrix(recorded)
    return {
        "correlation": pearson_rows(p, r),
        "centre_off": circular_month_distance(season_centre(p), season_centre(r)),
        "best_months_share_error": np.abs(best_months_share(p) - best_months_share(r)),
        "trough_to_peak_error": np.abs(trough_to_peak(p) - trough_to_peak(r)),
    }


def peak_window(index: Sequence[float] | np.ndarray, share: float) -> tuple[int, ...]:
    """Months whose index is at least `share` of the peak (the peak is 1)."""
    return tuple(int(m) + 1 for m in np.flatnonzero(np.asarray(index, dtype=float) >= share))


# --- Model 3: the floor varies with the dry season too; fitted on case profiles and dated series -----
#
#   floor_a = clip(floor_at_pivot + floor_per_dry_month * (dry_a - 5), FLOOR_BOUNDS)
#   index[a,m] = floor_a + (1 - floor_a) * shape[a,m]
#
# The dated LGA series (six states) show quiet months at 0.41-0.61 of the peak in the north and
# flat profiles on the coast: the amplitude of the season, not only its timing, follows the length
# of the dry season. Fitted in two stages, both inside every cross-validation fold: the lag rule's
# constants with a constant floor (the model-2 grid), then the floor's two constants at that lag.

FLOOR_BOUNDS = (0.2, 0.95)  # an index with no floor, or a flat one, is not a season
GRID_FLOOR_AT_PIVOT = np.round(np.arange(0.30, 0.9001, 0.02), 2)
GRID_FLOOR_PER_DRY_MONTH = np.round(np.arange(-0.12, 0.0401, 0.01), 2)
FLOOR_RULES = ("constant", "linear")
LAG_WINDOW = 3  # grid steps searched around the current lag in each round of the coordinate descent
MAX_ROUNDS = 5


@dataclass(frozen=True)
class AreaSeasonParams:
    """Model 3 constants: the lag rule (as SeasonParams) and the floor's own rule."""

    lag_at_pivot: float
    lag_per_dry_month: float
    floor_at_pivot: float
    floor_per_dry_month: float
    lag_rule: str = "linear"

    def floors(self, dry: np.ndarray) -> np.ndarray:
        return area_floor(self.floor_at_pivot, self.floor_per_dry_month, np.asarray(dry, dtype=float))

    def lags(self, dry: np.ndarray) -> np.ndarray:
        return rule_lag(self.lag_rule, self.lag_at_pivot, self.lag_per_dry_month, np.asarray(dry, dtype=float))

    def to_json(self) -> dict[str, float | str | list[float]]:
        return {"floor_at_5_dry_months": self.floor_at_pivot, "floor_per_dry_month": self.floor_per_dry_month,
                "floor_bounds": list(FLOOR_BOUNDS), "lag_at_5_dry_months": self.lag_at_pivot,
                "lag_per_dry_month": self.lag_per_dry_month, "lag_rule": self.lag_rule}

    @classmethod
    def from_model_2(cls, p: SeasonParams) -> AreaSeasonParams:
        return cls(p.lag_at_pivot, p.lag_per_dry_month, p.floor, 0.0, p.rule)


def area_floor(at_pivot: float, per_dry_month: float, dry: np.ndarray) -> np.ndarray:
    """Floor of each area from its dry months, kept inside FLOOR_BOUNDS."""
    return np.clip(at_pivot + per_dry_month * (np.asarray(dry, dtype=float) - LAG_PIVOT_DRY_MONTHS), *FLOOR_BOUNDS)


def high_share_of(floor: np.ndarray | float) -> np.ndarray:
    """`high_season_share_of_peak` of an area: where its rain-driven part reaches half its own peak."""
    return np.round(np.asarray(floor, dtype=float) + (1.0 - np.asarray(floor, dtype=float)) * HIGH_RAIN_SHARE,
                    INDEX_DECIMALS)


def peak_window_share_of(floor: np.ndarray | float) -> np.ndarray:
    return np.round(np.asarray(floor, dtype=float) + (1.0 - np.asarray(floor, dtype=float)) * PEAK_WINDOW_RAIN_SHARE,
                    INDEX_DECIMALS)


def area_index(rain: np.ndarray | Sequence, p: AreaSeasonParams, rounded: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(index [n,12], floor [n], lag [n]) of areas with these rainfall climatologies.

    The index's peak reads exactly 1 and every month lies in [floor, 1]; rounded to the
    published precision unless `rounded` is False.
    """
    arr = _as_matrix(rain)
    d = dry_months(arr)
    lag, floor = p.lags(d), p.floors(d)
    ix = floor[:, None] + (1.0 - floor[:, None]) * rain_shape(arr, lag)
    return (np.round(ix, INDEX_DECIMALS) if rounded else ix), floor, lag


def floor_grid_loss(shape: np.ndarray, dry: np.ndarray, weights: np.ndarray, recorded: np.ndarray) -> np.ndarray:
    """Squared error [n_floor_at_pivot, n_floor_per_dry_month, n_series] of every floor grid point.

    shape: [n_areas, 12] lagged rain shapes; weights: [n_series, n_areas]; recorded: [n_series, 12].
    Profiles scaled to mean 1 on both sides, as in `fit_table`.
    """
    w = np.asarray(weights, dtype=float)
    w = w / w.sum(axis=1, keepdims=True)
    rec = _as_matrix(recorded)
    rec = rec / rec.mean(axis=1, keepdims=True)
    # The floor depends on an area only through its whole number of dry months, so areas are
    # grouped by it first: the grid then multiplies [dry values] instead of [areas].
    dvals, group = np.unique(np.asarray(dry, dtype=int), return_inverse=True)
    onehot = np.zeros((len(dvals), len(group)))
    onehot[group, np.arange(len(group))] = 1.0
    w_by = np.einsum("sa,va->vs", w, onehot)  # [V, S]
    ws_by = np.stack([SparseRows.of(w * onehot[v][None]).product(shape) for v in range(len(dvals))])  # [V, S, 12]
    f = np.clip(GRID_FLOOR_AT_PIVOT[:, None, None]
                + GRID_FLOOR_PER_DRY_MONTH[None, :, None] * (dvals - LAG_PIVOT_DRY_MONTHS)[None, None, :],
                *FLOOR_BOUNDS)  # [F, H, V]
    # series profile = w @ (f + (1 - f) * shape) = w@f + w@shape - w@(f * shape)
    wf = np.einsum("fhv,vs->fhs", f, w_by)
    ws = ws_by.sum(axis=0)  # [S, 12]
    wfs = np.einsum("fhv,vsm->fhsm", f, ws_by)  # plain c_einsum: no BLAS threads
    pred = wf[..., None] + ws[None, None] - wfs
    pred = pred / pred.mean(axis=-1, keepdims=True)
    return ((pred - rec[None, None]) ** 2).sum(axis=-1)


def fit_area_params(table: FitTable, rain: np.ndarray, weights: np.ndarray, recorded: np.ndarray,
                    series_weight: np.ndarray, floor_rule: str = "linear") -> AreaSeasonParams:
    """Two-stage fit on the series with positive `series_weight` (zero: held out).

    Stage 1: the lag constants (and a constant floor) minimising the weighted squared error over
    the model-2 grid (`table`); then, for floor_rule "linear", alternately the floor's two constants
    (GRID_FLOOR_AT_PIVOT x GRID_FLOOR_PER_DRY_MONTH) at the current lag and the lag's constants at
    that floor, until neither moves. Ties go to the first grid point.
    """
    sw = np.asarray(series_weight, dtype=float)
    loss = table.loss[:, :1] if table.rule == "constant" else table.loss
    total = np.einsum("ijks,s->ijk", loss, sw)
    i0, j0, k0 = np.unravel_index(int(np.argmin(total)), total.shape)
    i, j, k = int(i0), int(j0), int(k0)
    lag_a, lag_s = float(GRID_LAG_AT_PIVOT[i]), float(GRID_LAG_PER_DRY_MONTH[j])
    if floor_rule == "constant":
        return AreaSeasonParams(lag_a, lag_s, float(GRID_FLOOR[k]), 0.0, table.rule)
    keep = sw > 0
    d = dry_months(rain)
    w_keep = np.asarray(weights)[keep]
    used = np.flatnonzero(w_keep.sum(axis=0) > 0)
    rain_u, d_u, w_u = _as_matrix(rain)[used], d[used], w_keep[:, used]
    rec_k, sw_k = _as_matrix(recorded)[keep], sw[keep]
    rec_n = rec_k / rec_k.mean(axis=1, keepdims=True)
    sparse = SparseRows.of(w_u / w_u.sum(axis=1, keepdims=True))
    # Coordinate descent from the constant-floor fit: the floor's constants at the current lag, then
    # the lag's constants (within LAG_WINDOW grid steps) at that floor, until neither moves. A lag
    # fitted under one floor everywhere is biased where the floor varies; this removes the bias.
    for _ in range(MAX_ROUNDS):
        shape = rain_shape(rain_u, rule_lag(table.rule, float(GRID_LAG_AT_PIVOT[i]), float(GRID_LAG_PER_DRY_MONTH[j]), d_u))
        fl = floor_grid_loss(shape, d_u, w_u, rec_k)
        a, b = np.unravel_index(int(np.argmin(np.einsum("fhs,s->fh", fl, sw_k))), fl.shape[:2])
        floor = area_floor(float(GRID_FLOOR_AT_PIVOT[a]), float(GRID_FLOOR_PER_DRY_MONTH[b]), d_u)[:, None]
        best, where = np.inf, (i, j)
        for ii in range(max(0, i - LAG_WINDOW), min(len(GRID_LAG_AT_PIVOT), i + LAG_WINDOW + 1)):
            for jj in range(max(0, j - LAG_WINDOW), min(len(GRID_LAG_PER_DRY_MONTH), j + LAG_WINDOW + 1)):
                if table.rule == "constant" and jj:
                    continue
                lag = rule_lag(table.rule, float(GRID_LAG_AT_PIVOT[ii]), float(GRID_LAG_PER_DRY_MONTH[jj]), d_u)
                prof = sparse.product(floor + (1.0 - floor) * rain_shape(rain_u, lag))
                prof = prof / prof.mean(axis=1, keepdims=True)
                err = float((((prof - rec_n) ** 2).sum(axis=1) * sw_k).sum())
                if err < best - 1e-12:
                    best, where = err, (ii, jj)
        if where == (i, j):
            break
        i, j = where
    return AreaSeasonParams(float(GRID_LAG_AT_PIVOT[i]), float(GRID_LAG_PER_DRY_MONTH[j]),
                            float(GRID_FLOOR_AT_PIVOT[a]), float(GRID_FLOOR_PER_DRY_MONTH[b]), table.rule)


def season_of_area(index: Sequence[float] | np.ndarray, floor: float) -> Season:
    """SPEC 2.6 season of one area at its own high-season share."""
    return season_from_index(index, float(high_share_of(floor)))
