"""Model-4 seasons: each area's calendar-month profile of reported cases, fitted to cases and
partially pooled (docs/seasons.md).

Pure numpy. An area's season is the exponential of annual + semi-annual harmonics of log cases,

    log p[a, m] = c_a + sum_{h=1,2} (alpha_ah cos(2 pi h m / 12) + beta_ah sin(2 pi h m / 12)),

its four shape coefficients theta_a = X_a B + u_a:

* X_a B, the covariate part: the area's rainfall climatology (annual and semi-annual harmonics of
  log rain), latitude and dry months, mapped to case harmonics by a ridge regression B fitted on
  every case profile in training (the archetype profiles and the dated LGA series). A linear map of
  the rain harmonics can rotate them: the delay between rain and cases is learnt from cases;
* u_a, the pooled residual: the distance-weighted mean of the dated LGAs' own residuals
  (theta_l - X_l B), each weighted by exp(-d / range) times its data weight, shrunk toward zero by
  `shrink`: an area far from every dated LGA, or near LGAs with little data, keeps its covariate part.

range and shrink are chosen by an inner leave-one-state-out over the training states, so that every
check figure is a nested cross-validation (pipeline.model.season_cv).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MONTHS = 12
HARMONICS = 2
N_COEF = 2 * HARMONICS
RAIN_OFFSET_MM = 10.0  # keeps log rain finite in rainless months
RIDGE = 1.0  # on standardised covariates, fixed before fitting (not tuned)
GRID_RANGE_KM = (50.0, 100.0, 200.0, 400.0, 800.0, 1600.0)
GRID_SHRINK = (0.05, 0.25, 1.0, 4.0, 16.0)
EARTH_KM = 6371.0
MIN_SHARE = 0.05  # lowest month as a share of the peak
_M = np.arange(MONTHS)
BASIS = np.concatenate([np.stack([np.cos(2 * np.pi * h * _M / MONTHS), np.sin(2 * np.pi * h * _M / MONTHS)])
                        for h in range(1, HARMONICS + 1)])  # [4, 12]


def harmonics(log_profiles: np.ndarray) -> np.ndarray:
    """[n, 12] log profiles -> [n, 4] least-squares harmonic coefficients (the mean drops out)."""
    x = np.asarray(log_profiles, dtype=float)
    return (x - x.mean(axis=1, keepdims=True)) @ BASIS.T * (2.0 / MONTHS)


def profiles(theta: np.ndarray) -> np.ndarray:
    """[n, 4] coefficients -> [n, 12] profiles scaled to peak 1 (unrounded), no month under MIN_SHARE.

    Routine case counts never fall to nothing in a month; the bound only binds where a regression on
    few profiles extrapolates (it never does on the shared data's fit)."""
    lp = np.atleast_2d(theta) @ BASIS
    return np.maximum(np.exp(lp - lp.max(axis=1, keepdims=True)), MIN_SHARE)


def rain_covariates(rain: np.ndarray, lat: np.ndarray, dry: np.ndarray) -> np.ndarray:
    """[n, 6] raw covariates: log-rain harmonics (4), latitude, dry months."""
    r = harmonics(np.log(np.asarray(rain, dtype=float) + RAIN_OFFSET_MM))
    return np.column_stack([r, np.asarray(lat, dtype=float), np.asarray(dry, dtype=float)])


@dataclass(frozen=True)
class Standardiser:
    """Centre and scale of the covariates, taken over every area (covariates only, never cases)."""

    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def of(cls, x: np.ndarray) -> Standardiser:
        sd = x.std(axis=0)
        return cls(x.mean(axis=0), np.where(sd > 0, sd, 1.0))

    def design(self, x: np.ndarray) -> np.ndarray:
        """[n, 1 + k]: intercept and standardised covariates."""
        return np.column_stack([np.ones(len(x)), (x - self.mean) / self.scale])


def fit_regression(design: np.ndarray, theta: np.ndarray, weight: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """Weighted ridge least squares [1 + k, 4]; the intercept is not penalised."""
    w = np.asarray(weight, dtype=float)
    xtw = design.T * w
    pen = ridge * np.eye(design.shape[1])
    pen[0, 0] = 0.0
    return np.linalg.solve(xtw @ design + pen, xtw @ theta)


def distances_km(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Great-circle km between rows of a [n, 2] and b [m, 2] (lon, lat degrees)."""
    la, lb = np.radians(a[:, 1])[:, None], np.radians(b[:, 1])[None, :]
    dl = np.radians(a[:, 0])[:, None] - np.radians(b[:, 0])[None, :]
    h = np.sin((la - lb) / 2) ** 2 + np.cos(la) * np.cos(lb) * np.sin(dl / 2) ** 2
    return 2 * EARTH_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def pooled_residual(dist: np.ndarray, resid: np.ndarray, data_weight: np.ndarray, range_km: float,
                    shrink: float) -> np.ndarray:
    """[n, 4]: sum_l k_l e_l / (shrink + sum_l k_l), k_l = data_weight_l exp(-d_l / range).

    With no dated LGA near (or none with data) the sum is ~0 and the residual is ~0: the area keeps
    its covariate part. More or nearer data move it toward the neighbours' residuals."""
    k = np.exp(-np.asarray(dist, dtype=float) / range_km) * np.asarray(data_weight, dtype=float)[None, :]
    return (k @ resid) / (shrink + k.sum(axis=1, keepdims=True))


@dataclass(frozen=True)
class HarmonicFit:
    """What predicting a season needs: the regression, the pooled residuals' sources and constants."""

    std: Standardiser
    coef: np.ndarray  # [1 + k, 4]
    source_xy: np.ndarray  # [L, 2] dated LGAs (lon, lat) whose residuals are pooled
    source_resid: np.ndarray  # [L, 4]
    source_weight: np.ndarray  # [L]
    range_km: float
    shrink: float

    def predict(self, x: np.ndarray, xy: np.ndarray) -> np.ndarray:
        """[n, 4] coefficients of areas with raw covariates x and coordinates xy."""
        theta = self.std.design(x) @ self.coef
        if len(self.source_resid) == 0:
            return theta
        return theta + pooled_residual(distances_km(xy, self.source_xy), self.source_resid, self.source_weight,
                                       self.range_km, self.shrink)

    def to_json(self) -> dict[str, object]:
        return {"harmonics": HARMONICS, "covariates": list(COVARIATES), "ridge": RIDGE,
                "pooling_range_km": self.range_km, "pooling_shrink": self.shrink,
                "dated_lgas_pooled": int(len(self.source_resid)),
                "coefficients": [[round(float(v), 4) for v in row] for row in self.coef]}


COVARIATES = ("intercept", "log rain annual cos", "log rain annual sin", "log rain semi-annual cos",
              "log rain semi-annual sin", "latitude", "dry months")


@dataclass(frozen=True)
class Units:
    """Case profiles to fit on: archetypes (weights over areas) and dated LGAs (one area each)."""

    theta: np.ndarray  # [U, 4] harmonics of each unit's log profile
    x: np.ndarray  # [U, k] raw covariates (archetypes: population-weighted mean of their areas')
    weight: np.ndarray  # [U] loss weight
    dated: np.ndarray  # [U] bool: a dated LGA (its residual is pooled)
    xy: np.ndarray  # [U, 2] coordinates (archetypes: NaN, never pooled)
    data_weight: np.ndarray  # [U] share of its months present (dated LGAs), 0 for archetypes
    state: np.ndarray  # [U] state code a dated LGA belongs to ("" for archetypes)


def fit(units: Units, std: Standardiser, keep: np.ndarray, range_km: float, shrink: float) -> HarmonicFit:
    """Regression on the kept units, then the kept dated LGAs' residuals as pooling sources."""
    k = np.asarray(keep, dtype=bool) & (units.weight > 0)
    d = std.design(units.x[k])
    coef = fit_regression(d, units.theta[k], units.weight[k])
    src = k & units.dated
    resid = units.theta[src] - std.design(units.x[src]) @ coef
    return HarmonicFit(std, coef, units.xy[src], resid, units.data_weight[src], range_km, shrink)


def choose_pooling(units: Units, std: Standardiser, keep: np.ndarray) -> tuple[float, float]:
    """(range, shrink) with the least squared coefficient error over the kept dated LGAs, each state's
    LGAs predicted by a fit without that state (inner leave-one-state-out; ties: first grid point)."""
    keep = np.asarray(keep, dtype=bool)
    states = sorted({s for s in units.state[keep & units.dated]})
    if len(states) < 2:
        return GRID_RANGE_KM[0], GRID_SHRINK[-1]
    best, where = np.inf, (GRID_RANGE_KM[0], GRID_SHRINK[-1])
    folds = []
    for g in states:
        train = keep & (units.state != g)
        held = keep & units.dated & (units.state == g)
        folds.append((train, held))
    for rk in GRID_RANGE_KM:
        for sh in GRID_SHRINK:
            err = 0.0
            for train, held in folds:
                f = fit(units, std, train, rk, sh)
                pred = f.predict(units.x[held], units.xy[held])
                err += float(((pred - units.theta[held]) ** 2).sum(axis=1).mean())
            if err < best - 1e-12:
                best, where = err, (rk, sh)
    return where


def seasonal_index_of(theta: np.ndarray, decimals: int = 3) -> np.ndarray:
    """Published index: the profile scaled to peak 1, rounded (the peak month reads exactly 1)."""
    return np.round(profiles(theta), decimals)


def signed_month_difference(a: np.ndarray | Sequence[float] | float, b: np.ndarray | Sequence[float] | float) -> np.ndarray:
    """a - b in months, the short way round: in [-6, 6)."""
    d = (np.asarray(a, dtype=float) - np.asarray(b, dtype=float)) % MONTHS
    return np.where(d >= MONTHS / 2, d - MONTHS, d)
