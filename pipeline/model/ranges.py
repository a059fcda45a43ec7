"""Calibrated ranges: how the random-walk variance Q and the surveys' sampling variance are
estimated, and the calibration figures that judge them (docs/model.md, "The range").

Pure numpy: arrays in, numbers out. Two things decide how wide a range is:

* the **sampling variance** of a state survey. Children in one survey cluster resemble each
  other, so a state value from few, large clusters (NMIS 2015: nine clusters a state) is
  noisier than the binomial count says. The design effect `1 + (m - 1) * icc` (m children
  per cluster) uses an intra-cluster correlation estimated from the survey clusters of the
  training rounds (one-way ANOVA within state and round);
* **Q**, estimated by the method of moments from consecutive rounds of the same area, either
  pooled (every change counts) or with the national drift of each interval removed (only how
  states move against each other counts: the national decline between two rounds is a trend,
  not a state's random walk). Which of the two is used is chosen by a nested check on the
  training rounds only (`choose_method`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Q_MIN = 0.01
Q_METHODS = ("pooled", "drift_removed")
# Used when the training rounds allow no inner check (fewer than two rounds with states
# to predict from earlier ones): removing the drift is the reading of the diagnosis that
# the pooled estimate absorbs the national decline between rounds.
DEFAULT_Q_METHOD = "drift_removed"
RANGE_LEVEL = 0.8
Z_RANGE = NormalDist().inv_cdf(0.5 + RANGE_LEVEL / 2)


def q_pooled(d: np.ndarray, v: np.ndarray, years: np.ndarray, interval: np.ndarray) -> float:
    """E[d^2] = Q * years + v1 + v2 over every pair; floored at Q_MIN."""
    if d.size == 0:
        return Q_MIN
    return max(Q_MIN, float((d**2 - v).sum() / years.sum()))


def q_drift_removed(d: np.ndarray, v: np.ndarray, years: np.ndarray, interval: np.ndarray) -> float:
    """Method of moments on the changes around each interval's mean change.

    Pairs sharing `interval` (same two rounds) have their mean change removed; the k - 1
    degrees of freedom left in an interval of k pairs are corrected for, and intervals
    with a single pair carry no information about deviations and are skipped.
    """
    if d.size == 0:
        return Q_MIN
    ids, inv, counts = np.unique(interval, return_inverse=True, return_counts=True)
    mean = np.bincount(inv, weights=d) / counts
    keep = counts[inv] > 1
    if not keep.any():
        return Q_MIN
    k = counts[inv][keep].astype(float)
    scale = k / (k - 1)
    num = ((d[keep] - mean[inv][keep]) ** 2 * scale - v[keep]).sum()
    return max(Q_MIN, float(num / years[keep].sum()))


def estimate_q(method: str, d: np.ndarray, v: np.ndarray, years: np.ndarray, interval: np.ndarray) -> float:
    if method == "pooled":
        return q_pooled(d, v, years, interval)
    if method == "drift_removed":
        return q_drift_removed(d, v, years, interval)
    raise ValueError(f"unknown Q method {method!r}; known: {Q_METHODS}")


def cluster_icc(children: np.ndarray, positives: np.ndarray, stratum: np.ndarray) -> float:
    """Intra-cluster correlation of positivity, one-way ANOVA of clusters within strata.

    children, positives: per cluster; stratum: per cluster (state and round), so that
    differences between states and rounds are not counted as clustering. Returns 0 when
    there are too few clusters, and never a negative value.
    """
    n = np.asarray(children, dtype=float)
    y = np.asarray(positives, dtype=float)
    ok = n > 0
    n, y, s = n[ok], y[ok], np.asarray(stratum)[ok]
    _, inv = np.unique(s, return_inverse=True)
    n_strata = int(inv.max()) + 1 if inv.size else 0
    k, total = n.size, n.sum()
    if k - n_strata < 2 or total - k < 2:
        return 0.0
    p = y / n
    ps = (np.bincount(inv, weights=y) / np.bincount(inv, weights=n))[inv]
    msb = (n * (p - ps) ** 2).sum() / (k - n_strata)
    msw = (y * (1 - p)).sum() / (total - k)
    n0 = (total - (n**2).sum() / total) / (k - 1)
    denom = msb + (n0 - 1) * msw
    return float(max(0.0, (msb - msw) / denom)) if denom > 0 else 0.0


def design_effect(cluster_size: float, icc: float) -> float:
    """Kish's design effect of a cluster sample: 1 + (m - 1) * icc (at least 1)."""
    return max(1.0, 1.0 + (float(cluster_size) - 1.0) * float(icc))


def round_design_effects(cluster_size: Mapping[int, float], icc: float, years: list[int]) -> tuple[dict[int, float], float]:
    """Design effect per round, and that of a new survey.

    A round whose cluster size is known gets its own; any other round (and a new survey)
    the one at the median known cluster size, so nothing about an unseen round is assumed
    beyond "designed like the others".
    """
    sizes = [float(m) for m in cluster_size.values()]
    typical = design_effect(float(np.median(sizes)), icc) if sizes else 1.0
    per = {int(y): design_effect(cluster_size[y], icc) if y in cluster_size else typical for y in years}
    return per, typical


def z_scores(y_logit: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Standardised prediction errors on the logit scale."""
    return (np.asarray(y_logit) - np.asarray(mean)) / np.sqrt(np.asarray(var))


def calibration(z: np.ndarray) -> dict[str, float | int | None]:
    """var(z), mean z and the share inside the RANGE_LEVEL range: a calibrated range has
    var(z) near 1 and holds about RANGE_LEVEL of the held-out values."""
    z = np.asarray(z, dtype=float)
    z = z[np.isfinite(z)]
    if z.size < 2:
        return {"n": int(z.size), "var_z": None, "mean_z": None, "share_inside": None}
    return {
        "n": int(z.size),
        "var_z": round(float(z.var(ddof=1)), 3),
        "mean_z": round(float(z.mean()), 3),
        "share_inside": round(float(np.mean(np.abs(z) <= Z_RANGE)), 3),
    }


def choose_method(inner_var_z: Mapping[str, list[float]]) -> str:
    """The Q method whose inner checks' var(z) is closest to 1 on the log scale (mean over
    the checks); DEFAULT_Q_METHOD when no method has a check, and on ties."""
    scored = {m: float(np.mean(np.abs(np.log(v)))) for m, v in inner_var_z.items() if v and all(x > 0 for x in v)}
    if not scored:
        return DEFAULT_Q_METHOD
    best = min(scored.values())
    winners = [m for m in Q_METHODS if m in scored and scored[m] <= best + 1e-12]
    return DEFAULT_Q_METHOD if DEFAULT_Q_METHOD in winners else winners[0]


# --- calibration of the range against held-out survey rounds (docs/model.md, "Calibration") ----------
#
# A round predicted from earlier rounds (pipeline.datasets.risk.predict_round) has a logit error
# e = y - m and a predictive variance V (baseline + new survey + season). Two constants correct it:
#
# * a drift per year d: the random walk holds the last round's level, while positivity fell between
#   rounds, so e has a mean that grows with the years since the last round (e ~ d * years);
# * a variance scale k: the components of V are estimated separately (random walk, design effect,
#   season error); k = E[(e - d years)^2 / V] rescales their sum.
#
# Both are fitted by `fit_calibration` and judged by `cross_validated_z`: every constant that scores
# a state is fitted without the states of its fold (whole states held out), so the z figures are
# out of sample. Constants are fitted per predicted round (the rounds differ: one constant for both
# left 2018's var(z) at 1.41 out of sample); the published range uses the constants fitted on every
# state of the latest predicted round, whose training (two or more state rounds) is most like the
# published model's.

# Bounds of the variance scale: a scale outside them would mean the variance model is wrong, not
# mis-scaled (the fit is never that far from 1 in any fold of the real data; the bounds guard
# against a fold with few states).
VAR_SCALE_MIN = 0.25
VAR_SCALE_MAX = 4.0


@dataclass(frozen=True)
class Calibration:
    """Constants of the range calibration: a drift of the logit baseline per year after a state's
    last round, and a scale of the predictive variance. The identity (0, 1) changes nothing."""

    drift_per_year: float = 0.0
    var_scale: float = 1.0
    rows: int = 0  # state-rounds it was fitted on

    def to_json(self) -> dict[str, float | int]:
        return {"drift_per_year_logit": round(self.drift_per_year, 4), "var_scale": round(self.var_scale, 4),
                "state_rounds": self.rows}


def fit_calibration(e: np.ndarray, var: np.ndarray, years: np.ndarray, with_drift: bool = True) -> Calibration:
    """Drift by weighted least squares of e on years (weights 1/V, no intercept: no years since a
    round, no drift), then the variance scale as the mean squared standardised residual, with one
    degree of freedom for the drift. `with_drift=False` holds the level (drift 0, every degree of
    freedom to the scale): the calibration when the drift failed its check (docs/range-protocol.md)."""
    e, var, years = (np.asarray(a, dtype=float) for a in (e, var, years))
    ok = np.isfinite(e) & np.isfinite(var) & (var > 0) & np.isfinite(years)
    e, var, years = e[ok], var[ok], years[ok]
    if e.size < 3:
        return Calibration(rows=int(e.size))
    w = 1.0 / var
    den = float((w * years**2).sum())
    d = float((w * years * e).sum() / den) if den > 0 and with_drift else 0.0
    r = e - d * years
    k = float((r**2 * w).sum() / (e.size - int(with_drift)))
    return Calibration(d, float(np.clip(k, VAR_SCALE_MIN, VAR_SCALE_MAX)), int(e.size))


def calibrated_z(e: np.ndarray, var: np.ndarray, years: np.ndarray, cal: Calibration) -> np.ndarray:
    return (np.asarray(e) - cal.drift_per_year * np.asarray(years)) / np.sqrt(cal.var_scale * np.asarray(var))


def cross_validated_z(e: np.ndarray, var: np.ndarray, years: np.ndarray, fold: np.ndarray,
                      stratum: np.ndarray | None = None, with_drift: bool = True
                      ) -> tuple[np.ndarray, dict[str, Calibration]]:
    """z of every row with the constants fitted on the rows of the other folds (fold = a group of
    whole states, so a state's own rounds never set its calibration), within its stratum (the round
    predicted: constants are fitted per round when `stratum` is given, pooled otherwise).
    Returns (z, constants by "stratum|fold")."""
    fold = np.asarray(fold)
    strat = np.zeros(fold.shape, dtype=int) if stratum is None else np.asarray(stratum)
    e, var, years = (np.asarray(a, dtype=float) for a in (e, var, years))
    z = np.full(e.shape, np.nan)
    consts: dict[str, Calibration] = {}
    for s in np.unique(strat):
        ins = strat == s
        for g in np.unique(fold[ins]):
            out = ins & (fold == g)
            train = ins & ~out
            cal = fit_calibration(e[train], var[train], years[train], with_drift)
            z[out] = calibrated_z(e[out], var[out], years[out], cal)
            consts[f"{s}|{g}"] = cal
    return z, consts


# --- the registered check a drift must pass to be applied after the last round (docs/range-protocol.md §1) ---

# Least gain in mean absolute logit error over the states of the newest round, predicted by a build without
# it, that the drift must show against the held level. Registered before the check was implemented.
DRIFT_MIN_GAIN = 0.05


@dataclass(frozen=True)
class DriftCheck:
    """The newest round predicted by a build without it, with its drift and with the level held."""

    predicted_round: int
    states: int
    drift_per_year: float  # the drift the build without the round would publish
    mae_held: float
    mae_drift: float
    bias_held: float  # mean signed logit error (observed - predicted)
    bias_drift: float
    log_score_held: float  # mean Gaussian log density of the logit error, each with its own variance scale
    log_score_drift: float
    applied: bool

    def to_json(self) -> dict[str, float | int | bool | str]:
        r4 = {k: round(float(getattr(self, k)), 4) for k in (
            "drift_per_year", "mae_held", "mae_drift", "bias_held", "bias_drift", "log_score_held",
            "log_score_drift")}
        return {"predicted_round": self.predicted_round, "states": self.states, **r4,
                "mae_gain": round(self.mae_held - self.mae_drift, 4), "min_gain": DRIFT_MIN_GAIN,
                "decision_measure": "mean absolute logit error over the states of the predicted round",
                "applied": self.applied}


def _gaussian_log_score(e: np.ndarray, var: np.ndarray) -> float:
    return float(np.mean(-0.5 * np.log(2 * np.pi * var) - e**2 / (2 * var)))


def drift_check(e: np.ndarray, var: np.ndarray, years: np.ndarray, train: Calibration, train_held: Calibration,
                predicted_round: int, min_gain: float = DRIFT_MIN_GAIN) -> DriftCheck:
    """Score the newest round's uncalibrated logit errors `e` (predictive variance `var`, `years` since each
    state's last training round) with the drift of the calibration fitted without that round (`train`)
    against the held level (`train_held`, fitted with the drift fixed at 0); the drift is applied only if
    it lowers the mean absolute error by at least `min_gain`."""
    e, var, years = (np.asarray(a, dtype=float) for a in (e, var, years))
    ok = np.isfinite(e) & np.isfinite(var) & (var > 0) & np.isfinite(years)
    e, var, years = e[ok], var[ok], years[ok]
    ed = e - train.drift_per_year * years
    mae_h, mae_d = float(np.mean(np.abs(e))), float(np.mean(np.abs(ed)))
    return DriftCheck(
        predicted_round=int(predicted_round), states=int(e.size), drift_per_year=train.drift_per_year,
        mae_held=mae_h, mae_drift=mae_d, bias_held=float(e.mean()), bias_drift=float(ed.mean()),
        log_score_held=_gaussian_log_score(e, train_held.var_scale * var),
        log_score_drift=_gaussian_log_score(ed, train.var_scale * var),
        applied=bool(mae_h - mae_d >= min_gain),
    )
