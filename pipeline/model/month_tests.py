"""The registered test of a month term (docs/validation.md, section (g), model 4).

Pure numpy over [LGA x month] matrices. Two outcomes of the dated LGA case series: O1, the
month-to-month movement y = log(cases / A(cases)), A the centred 2x12 moving average; O2, the
inter-annual anomaly a = log cases - the mean of log cases in the same calendar month over the
LGA's years. The reference R is the score without a month term (survey baseline x season, the
season from the fold holding the state out); each candidate term multiplies R by exp(sum beta f).
Each beta is fitted on the other states' O1; a term is adopted only if it meets the minimum
effect size on both outcomes and the dry-month plausibility rule. Nothing is tuned to the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MONTHS = 12
MA_WEIGHTS = np.array([0.5] + [1.0] * 11 + [0.5]) / 12.0  # centred 2x12 moving average
RAIN_OFFSET_MM = 10.0  # keeps log rain anomalies finite in dry months
WET_MONTH_MM = 50.0  # the gates of T1 and T3, and the dry months of the plausibility rule
WET_QUARTER_MM = 150.0
MIN_GAIN = 0.03  # held-out r, per left-out state
MIN_STATES = 5  # of 6
BOOTSTRAP = 1000
SEED = 20261126
DRY_MEAN_EFFECT = 0.02
DRY_MAX_EFFECT = 0.10
MIN_YEARS_ANOMALY = 2
DECIMALS = 3
TERMS = ("t1_rain_lags_1_2_wet_months", "t2_rain_lags_0_3", "t3_rain_three_months_wet")
LAGS = {"t1_rain_lags_1_2_wet_months": (1, 2), "t2_rain_lags_0_3": (0, 1, 2, 3), "t3_rain_three_months_wet": (1, 2, 3)}


def centred_average(x: np.ndarray) -> np.ndarray:
    """2x12 centred moving average along the last axis; NaN where any of the 13 months is missing."""
    n = x.shape[-1]
    out = np.full(x.shape, np.nan)
    if n < 13:
        return out
    win = np.lib.stride_tricks.sliding_window_view(x, 13, axis=-1)  # [..., n-12, 13]
    out[..., 6:n - 6] = (win * MA_WEIGHTS).sum(axis=-1)
    return out


def outcome(cases: np.ndarray) -> np.ndarray:
    """O1: y = log(cases / centred average); NaN where a case count or its average is missing."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(cases / centred_average(cases))


def anomaly(log_x: np.ndarray, present: np.ndarray, t0: int) -> np.ndarray:
    """O2: log_x minus its mean over the `present` months of the same calendar month (per row);
    NaN where the month is absent or its calendar month is present in fewer than two years."""
    cal = (t0 + np.arange(log_x.shape[1])) % MONTHS
    onehot = (cal[None, :] == np.arange(MONTHS)[:, None]).astype(float)  # [12, T]
    v = np.where(present, log_x, 0.0)
    n = present.astype(float) @ onehot.T  # [L, 12]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (v @ onehot.T) / n
    out = log_x - mean[:, cal]
    return np.where(present & (n[:, cal] >= MIN_YEARS_ANOMALY), out, np.nan)


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return float("nan")
    x, y = a[ok] - a[ok].mean(), b[ok] - b[ok].mean()
    d = np.sqrt((x**2).sum() * (y**2).sum())
    return float((x * y).sum() / d) if d > 0 else float("nan")


def rain_anomaly(rain: np.ndarray, clim: np.ndarray) -> np.ndarray:
    return np.log((rain + RAIN_OFFSET_MM) / (clim + RAIN_OFFSET_MM))


def term_features(rain: np.ndarray, clim: np.ndarray, first: int, width: int) -> dict[str, np.ndarray]:
    """Every candidate's features [K, L, width] for months first .. first+width-1 of `rain` [L, T'],
    `clim` the climatology aligned with `rain`. Lagged months before column 0 are NaN."""
    r = rain_anomaly(rain, clim)

    def lag(x: np.ndarray, k: int) -> np.ndarray:
        out = np.full((x.shape[0], width), np.nan)
        lo = max(0, k - first)
        out[:, lo:] = x[:, first - k + lo:first - k + width]
        return out

    wet = {k: lag((clim >= WET_MONTH_MM).astype(float), k) for k in range(4)}
    t1 = np.stack([lag(r, k) * wet[k] for k in (1, 2)])
    t2 = np.stack([lag(r, k) for k in (0, 1, 2, 3)])
    p3 = sum(lag(rain, k) for k in (1, 2, 3))
    c3 = sum(lag(clim, k) for k in (1, 2, 3))
    t3 = (np.log((p3 + 3 * RAIN_OFFSET_MM) / (c3 + 3 * RAIN_OFFSET_MM)) * (c3 >= WET_QUARTER_MM))[None]
    return dict(zip(TERMS, (t1, t2, t3), strict=True))


def dry_months_mask(clim: np.ndarray, first: int, width: int) -> np.ndarray:
    """[L, width]: months whose climatology and that of the two months before are all under 50 mm."""
    dry = clim < WET_MONTH_MM
    return dry[:, first:first + width] & dry[:, first - 1:first - 1 + width] & dry[:, first - 2:first - 2 + width]


@dataclass(frozen=True)
class MonthData:
    """Aligned matrices for the dated LGAs; months run from `t0` (a month index year*12+m-1)."""

    t0: int
    cases: np.ndarray  # [L, T] (never published)
    reference: np.ndarray  # [L, T] log of R = baseline x out-of-sample season
    features: dict[str, np.ndarray]  # term -> [K, L, T]
    dry: np.ndarray  # [L, T] dry months of the plausibility rule
    state: np.ndarray  # [L] state code of each LGA


def transforms(log_pred: np.ndarray, present: np.ndarray, t0: int) -> tuple[np.ndarray, np.ndarray]:
    """(O1, O2) of a log prediction, through the same transforms as the cases (O2 over the same months)."""
    p = np.exp(log_pred)
    return np.log(p / centred_average(np.where(present, p, np.nan))), anomaly(log_pred, present, t0)


def _fit(x: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Least squares without intercept over rows with every value finite."""
    ok = np.isfinite(target) & np.isfinite(x).all(axis=1)
    if ok.sum() < x.shape[1] + 2:
        return np.zeros(x.shape[1])
    beta, *_ = np.linalg.lstsq(x[ok], target[ok], rcond=None)
    return beta


def _r(v: float, d: int = DECIMALS) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), d)


def _stats(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """[L, 6] per-LGA sums (n, sx, sy, sxx, syy, sxy) over the months both are finite."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = np.where(ok, x, 0.0), np.where(ok, y, 0.0)
    return np.stack([ok.sum(axis=1), x.sum(axis=1), y.sum(axis=1), (x * x).sum(axis=1), (y * y).sum(axis=1),
                     (x * y).sum(axis=1)], axis=1).astype(float)


def _r_of(s: np.ndarray) -> np.ndarray:
    """Pearson r from pooled sums [..., 6] (x the prediction). A prediction that does not vary scores 0:
    it says nothing about the outcome (the season alone has no inter-annual anomaly)."""
    n, sx, sy, sxx, syy, sxy = np.moveaxis(s, -1, 0)
    cov = sxy - sx * sy / n
    vx = sxx - sx**2 / n
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cov / np.sqrt(vx * (syy - sy**2 / n))
    return np.where(vx <= 1e-12 * np.maximum(sxx, 1.0), 0.0, r)


def pearson_pred(obs: np.ndarray, pred: np.ndarray) -> float:
    """r of a prediction against the outcome over the months both are finite (0 for a constant prediction)."""
    return float(_r_of(_stats(np.atleast_2d(pred).reshape(1, -1), np.atleast_2d(obs).reshape(1, -1))[0]))


def bootstrap_gain(obs: np.ndarray, ref: np.ndarray, term: np.ndarray, state: np.ndarray,
                   n: int = BOOTSTRAP, seed: int = SEED) -> tuple[float, float, float]:
    """(pooled gain in r, 2.5 %, 97.5 %) with LGAs resampled with replacement within each state."""
    s_ref, s_term = _stats(ref, obs), _stats(term, obs)
    gain = float(_r_of(s_term.sum(axis=0)) - _r_of(s_ref.sum(axis=0)))
    rng = np.random.default_rng(seed)
    counts = np.zeros((n, len(state)))
    for g in sorted(set(state.tolist())):
        rows = np.flatnonzero(state == g)
        draw = rng.integers(0, rows.size, size=(n, rows.size))
        np.add.at(counts, (np.repeat(np.arange(n), rows.size), rows[draw.ravel()]), 1.0)
    g_boot = _r_of(counts @ s_term) - _r_of(counts @ s_ref)
    lo, hi = np.nanquantile(g_boot, [0.025, 0.975])
    return gain, float(lo), float(hi)


def score_term(md: MonthData, name: str) -> dict[str, Any]:
    """One candidate through the registered rule: per left-out state r with and without it on both
    outcomes, pooled gains with bootstrap intervals, the dry-month effect, and the decision."""
    f = md.features[name]
    present = np.isfinite(md.cases) & (md.cases > 0)
    y = outcome(md.cases)
    a = anomaly(np.log(np.where(present, md.cases, 1.0)), present, md.t0)
    y_ref, a_ref = transforms(md.reference, present, md.t0)
    use = np.isfinite(f).all(axis=0)
    fz = np.nan_to_num(f, nan=0.0)
    states = sorted(set(md.state.tolist()))
    y_term, a_term = np.full(y.shape, np.nan), np.full(y.shape, np.nan)
    by_state: dict[str, Any] = {}
    dry_mean, dry_max = 0.0, 0.0
    for g in states:
        held = md.state == g
        train = ~held[:, None] & use & np.isfinite(y) & np.isfinite(y_ref)
        beta = _fit(f[:, train].T, (y - y_ref)[train])
        effect = np.einsum("k,klt->lt", beta, fz)
        lp = md.reference[held] + effect[held]
        yt, at = transforms(lp, present[held], md.t0)
        keep = use[held]
        y_term[held], a_term[held] = np.where(keep, yt, np.nan), np.where(keep, at, np.nan)
        dry = md.dry & present
        if dry.any():
            e = np.abs(effect[dry])
            dry_mean, dry_max = max(dry_mean, float(e.mean())), max(dry_max, float(e.max()))
        ref_m = np.where(keep, y_ref[held], np.nan)
        ref_a = np.where(keep, a_ref[held], np.nan)
        by_state[g] = {
            "lga_months": int((np.isfinite(y[held]) & np.isfinite(ref_m)).sum()),
            "r_reference": _r(pearson_pred(y[held], ref_m)), "r_with_term": _r(pearson_pred(y[held], y_term[held])),
            "anomaly_r_reference": _r(pearson_pred(a[held], ref_a)),
            "anomaly_r_with_term": _r(pearson_pred(a[held], a_term[held])),
            "coefficients": [_r(b, 4) for b in beta],
        }
    gains = [(v["r_with_term"] or 0.0) - (v["r_reference"] or 0.0) for v in by_state.values()
             if v["r_with_term"] is not None and v["r_reference"] is not None]
    met = sum(gv >= MIN_GAIN - 1e-12 for gv in gains)
    ref_y = np.where(use, y_ref, np.nan)
    ref_a = np.where(use, a_ref, np.nan)
    g1 = bootstrap_gain(y, ref_y, y_term, md.state)
    g2 = bootstrap_gain(a, ref_a, a_term, md.state)
    plausible = dry_mean <= DRY_MEAN_EFFECT and dry_max <= DRY_MAX_EFFECT
    size_ok = met >= MIN_STATES and g1[1] > 0 and g2[1] > 0
    return {
        "lags": list(LAGS[name]), "by_state": by_state, "states": len(by_state),
        "states_gaining_at_least_0_03": met,
        "pooled_gain_month_to_month": _r(g1[0]), "pooled_gain_month_to_month_interval": [_r(g1[1]), _r(g1[2])],
        "pooled_gain_anomaly": _r(g2[0]), "pooled_gain_anomaly_interval": [_r(g2[1]), _r(g2[2])],
        "dry_month_mean_effect": _r(dry_mean, 4), "dry_month_max_effect": _r(dry_max, 4),
        "meets_minimum_effect": bool(size_ok), "plausible": bool(plausible),
        "adopted": bool(size_ok and plausible),
    }


def run_tests(md: MonthData) -> dict[str, Any]:
    """Every registered term with its decision, and the reference's own r (the score without a term)."""
    res: dict[str, Any] = {t: score_term(md, t) for t in TERMS}
    passed = [t for t in TERMS if res[t]["adopted"]]
    res["adopted"] = [max(passed, key=lambda t: res[t]["pooled_gain_month_to_month"] or 0.0)] if passed else []
    res["rule"] = (f"adopted only if r gains at least {MIN_GAIN} in at least {MIN_STATES} left-out states, the "
                   f"bootstrap intervals over LGAs of the pooled gain exclude zero on both outcomes, and the effect "
                   f"in dry months averages at most {DRY_MEAN_EFFECT} and never exceeds {DRY_MAX_EFFECT}")
    return res


def fit_all(features: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Coefficients of `features` [K, L, T] on `target` [L, T] over every finite LGA-month (no intercept)."""
    x = features.reshape(features.shape[0], -1).T
    return _fit(x, target.reshape(-1))
