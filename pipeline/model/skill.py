"""Season ratios and the forecast scorecard (docs/skill-protocol.md, docs/skill.md).

A programme officer has last month's count; the season's worth to them is the expected change from
that month to the next four. This module turns the published seasonal index into those ratios and
judges them, with four simple rules beside them, in nested whole-state cross-validation on the dated
series. Pure: arrays in, arrays and summaries out. Nothing of a dated series leaves as a row: only
pooled errors, quantiles and counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

HORIZONS = (1, 2, 3, 4)
MONTHS = 12
# pre-registered candidates (docs/skill-protocol.md): shrink of the log ratio and months in the base
ALPHAS_PREREGISTERED = (0.5, 0.75, 1.0, 1.25)
# amendment (docs/skill-protocol.md, "Amendment 1"): the pre-registered grid's choice sat at its upper
# edge, so the grid is widened; the pre-registered grid's figures stay in the scorecard beside it
ALPHAS = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)
BASE_MONTHS = (1, 2, 3)
# season class of an index without a published one: trough/peak thresholds (protocol)
CLASS_THRESHOLDS = (("marked", 0.5), ("moderate", 0.7))
CLASSES = ("marked", "moderate", "weak")
LEVEL_MONTHS = 12  # the past window of the flat level and the API's own forecast
MIN_LEVEL_MONTHS = 9
MIN_GROUP_RESIDUALS = 100  # a horizon x class quantile needs this many residuals ...
MIN_GROUP_STATES = 2  # ... from this many states, else the horizon's pooled residuals
RANGE_QUANTILES = (0.1, 0.9)  # 80 % range
RATIO_DECIMALS = 3
INDEX_FLOOR = 1e-6
METHODS = ("projected", "persistence", "flat", "climatology", "api_forecast")


# --- ratios from a published index ---------------------------------------------------------


def log_ratios(index: np.ndarray, horizons: Sequence[int] = HORIZONS) -> np.ndarray:
    """[n, 12, H] log I(m+h) - log I(m): row m is the start month m+1 (January first)."""
    li = np.log(np.clip(np.atleast_2d(np.asarray(index, dtype=float)), INDEX_FLOOR, None))
    return np.stack([np.roll(li, -h, axis=1) - li for h in horizons], axis=-1)


def ratios(index: np.ndarray, alpha: Sequence[float] | float = 1.0, horizons: Sequence[int] = HORIZONS) -> np.ndarray:
    """[n, 12, H] expected cases(m+h) / cases(m) under the index: (I(m+h) / I(m)) ** alpha[h]."""
    a = np.broadcast_to(np.asarray(alpha, dtype=float), (len(horizons),))
    return np.exp(log_ratios(index, horizons) * a)


def trough_to_peak(index: np.ndarray) -> np.ndarray:
    ix = np.atleast_2d(np.asarray(index, dtype=float))
    return ix.min(axis=1) / ix.max(axis=1)


def class_of_index(index: np.ndarray) -> list[str]:
    """Season class from trough/peak of the index (used where the season publishes none)."""
    out = []
    for tp in trough_to_peak(index):
        cls = CLASSES[-1]
        for name, upper in CLASS_THRESHOLDS:
            if tp < upper:
                cls = name
                break
        out.append(cls)
    return out


def season_class(season: Mapping[str, Any]) -> str:
    """The adapter: a season's published `season_class` when the season model publishes one (model 5),
    else the class of its published index's trough/peak. Ratios, ranges and `beats_persistence` are
    grouped by what this returns, so pointing them at a new class is a change here only."""
    published = season.get("season_class")
    if isinstance(published, str) and published in CLASSES:
        return published
    return class_of_index(np.asarray(season["seasonal_index"], dtype=float))[0]


# --- the dated series as matrices ----------------------------------------------------------


@dataclass(frozen=True)
class CaseSeries:
    """Monthly counts of one level (LGAs or states), months consecutive from `first`."""

    codes: list[str]
    state: np.ndarray  # [n] the state each series is held out with
    counts: np.ndarray  # [n, T] NaN where missing
    first: tuple[int, int]  # (year, month) of column 0

    @property
    def calendar(self) -> np.ndarray:
        """[T] calendar month index 0..11 of every column."""
        return (self.first[1] - 1 + np.arange(self.counts.shape[1])) % MONTHS


def case_series(dated: pl.DataFrame) -> tuple[CaseSeries, CaseSeries]:
    """(LGA series, state series) of the dated counts (`cases` null where missing). A state-month is
    the sum of its LGAs, missing when any of them is missing (no infilling)."""
    d = dated.with_columns((pl.col("year") * 12 + pl.col("month") - 1).alias("_t"))
    t = d["_t"].to_numpy()
    t0, t1 = int(t.min()), int(t.max())
    T = t1 - t0 + 1
    lga = d.select("lga_code", "state_code").unique().sort("lga_code")
    codes = lga["lga_code"].to_list()
    pos = {c: i for i, c in enumerate(codes)}
    counts = np.full((len(codes), T), np.nan)
    ok = d.filter(pl.col("cases").is_not_null())
    rows = np.array([pos[c] for c in ok["lga_code"].to_list()], dtype=int)
    counts[rows, ok["_t"].to_numpy() - t0] = ok["cases"].to_numpy()
    lga_state = np.array(lga["state_code"].to_list())
    scodes = sorted(set(lga_state.tolist()))
    st = np.vstack([counts[lga_state == s].sum(axis=0) for s in scodes]) if scodes else np.zeros((0, T))
    first = (t0 // 12, t0 % 12 + 1)
    return (CaseSeries(codes, lga_state, counts, first),
            CaseSeries(scodes, np.array(scodes), st, first))


# --- forecasts of every method and candidate ----------------------------------------------


def _lagged(x: np.ndarray, lag: int) -> np.ndarray:
    """x shifted so column t holds x[:, t - lag] (NaN before the start)."""
    out = np.full_like(x, np.nan)
    if lag < x.shape[1]:
        out[:, lag:] = x[:, : x.shape[1] - lag]
    return out


def _window_mean(x: np.ndarray, width: int, need: int) -> np.ndarray:
    """Column t: mean of the finite values of x[:, t-width+1 .. t], NaN with fewer than `need`."""
    stack = np.stack([_lagged(x, j) for j in range(width)])
    n = np.isfinite(stack).sum(axis=0)
    with np.errstate(invalid="ignore"):
        m = np.nansum(stack, axis=0) / np.where(n > 0, n, 1)
    return np.where(n >= need, m, np.nan)


@dataclass(frozen=True)
class Forecasts:
    """Log forecasts [n, T, H] (origin t, horizon h) and the targets, for every method and candidate."""

    target: np.ndarray  # [n, T, H] log c(t+h)
    methods: dict[str, np.ndarray]  # the references (b)-(e), and "projected" (alpha 1, k 1)
    candidates: dict[tuple[float, int], np.ndarray]  # (alpha, k) -> projected counts
    valid: np.ndarray  # [n, T, H] the common triples: every method defined


def forecasts(series: CaseSeries, index: np.ndarray, horizons: Sequence[int] = HORIZONS,
              alphas: Sequence[float] = ALPHAS, base_months: Sequence[int] = BASE_MONTHS) -> Forecasts:
    """Every method's log forecast from each origin month (docs/skill-protocol.md)."""
    c = series.counts
    n, T = c.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        logc = np.where(np.isfinite(c) & (c > 0), np.log(c), np.nan)
    li = np.log(np.clip(np.asarray(index, dtype=float), INDEX_FLOOR, None))
    cal = series.calendar
    li_t = li[:, cal]  # [n, T] log index of each column's calendar month
    des = logc - li_t
    H = len(horizons)
    target = np.full((n, T, H), np.nan)
    li_ahead = np.full((n, T, H), np.nan)
    for k, h in enumerate(horizons):
        target[:, : T - h, k] = logc[:, h:]
        li_ahead[:, :, k] = li[:, (cal + h) % MONTHS]
    pers = np.repeat(logc[:, :, None], H, axis=2)
    flat = np.repeat(_window_mean(logc, LEVEL_MONTHS, MIN_LEVEL_MONTHS)[:, :, None], H, axis=2)
    api = _window_mean(des, LEVEL_MONTHS, MIN_LEVEL_MONTHS)[:, :, None] + li_ahead
    clim = np.full((n, T, H), np.nan)
    for k, h in enumerate(horizons):
        same = np.stack([_lagged(logc, 12 * y - h) for y in range(1, T // 12 + 2) if 12 * y - h < T])
        cnt = np.isfinite(same).sum(axis=0)
        with np.errstate(invalid="ignore"):
            clim[:, :, k] = np.where(cnt > 0, np.nansum(same, axis=0) / np.where(cnt > 0, cnt, 1), np.nan)
    lr = li_ahead - li_t[:, :, None]
    cands: dict[tuple[float, int], np.ndarray] = {}
    for kb in base_months:
        base = _window_mean(des, kb, 1) + li_t  # the current level, deseasonalised over k months
        base = np.where(np.isfinite(logc), base, np.nan)  # the origin month's own count is required
        for a in alphas:
            cands[(float(a), int(kb))] = base[:, :, None] + a * lr
    projected = pers + lr
    methods = {"projected": projected, "persistence": pers, "flat": flat, "climatology": clim, "api_forecast": api}
    valid = np.isfinite(target)
    for m in methods.values():
        valid &= np.isfinite(m)
    return Forecasts(target, methods, cands, valid)


# --- nested whole-state cross-validation ---------------------------------------------------


def _mse(err: np.ndarray, rows: np.ndarray, valid: np.ndarray, h: int) -> float:
    e = err[rows, :, h][valid[rows, :, h]]
    return float(np.mean(e**2)) if e.size else np.inf


def choose(errs: Sequence[np.ndarray], rows: np.ndarray, valid: np.ndarray, h: int) -> int:
    """The candidate with the smallest pooled MSE over `rows` at horizon h (first on ties)."""
    return int(np.argmin([_mse(e, rows, valid, h) for e in errs]))


def quantiles(resid: np.ndarray, classes: np.ndarray, states: np.ndarray,
              horizons: Sequence[int] = HORIZONS) -> dict[str, Any]:
    """Per class: [H] q10 and q90 of the residuals (rows: residuals [n, T, H] NaN outside the pool),
    with the protocol's fallback to the horizon's pooled residuals and widths that never shrink with h."""
    out: dict[str, Any] = {}
    for cls in CLASSES:
        q_lo, q_hi, pooled = [], [], []
        for k in range(len(horizons)):
            rows = classes == cls
            r = resid[rows, :, k]
            ok = np.isfinite(r)
            n_states = len(set(states[rows][ok.any(axis=1)].tolist())) if rows.any() else 0
            use_pool = ok.sum() < MIN_GROUP_RESIDUALS or n_states < MIN_GROUP_STATES
            vals = resid[:, :, k][np.isfinite(resid[:, :, k])] if use_pool else r[ok]
            if vals.size == 0:
                q_lo.append(np.nan)
                q_hi.append(np.nan)
            else:
                lo, hi = np.quantile(vals, RANGE_QUANTILES)
                q_lo.append(float(lo))
                q_hi.append(float(hi))
            pooled.append(bool(use_pool))
        lo_a, hi_a = np.array(q_lo), np.array(q_hi)
        if np.isfinite(lo_a).all():
            lo_a, hi_a = np.minimum.accumulate(lo_a), np.maximum.accumulate(hi_a)
        out[cls] = {"q_low": lo_a, "q_high": hi_a, "pooled_over_classes": pooled}
    return out


@dataclass(frozen=True)
class MethodCV:
    """One method's out-of-sample residuals and range hits over every outer fold."""

    resid: np.ndarray  # [n, T, H] NaN outside the valid triples
    inside: np.ndarray  # [n, T, H] bool: the observed count inside the 80 % range
    chosen: dict[str, list[int]]  # held-out state -> candidate index per horizon
    oos_resid: np.ndarray  # [n, T, H] residuals each made with a choice that did not see its state
    fold_quantiles: dict[str, Any]  # held-out state -> the range quantiles applied to it (from the others)


def nested_cv(errs: Sequence[np.ndarray], valid: np.ndarray, state: np.ndarray, classes: np.ndarray,
              horizons: Sequence[int] = HORIZONS) -> MethodCV:
    """Nested leave-one-state-out of a method with candidates `errs` (each [n, T, H], forecast - target).

    Outer fold S: the candidate per horizon is chosen on the other states; the quantiles applied to S
    come from the other states' residuals, each made with the candidate chosen without that state too
    (inner leave-one-state-out). `oos_resid` is each state's residual under its outer choice."""
    H = len(horizons)
    states = sorted(set(state.tolist()))
    resid = np.full(valid.shape, np.nan)
    inside = np.zeros(valid.shape, dtype=bool)
    chosen: dict[str, list[int]] = {}
    fold_q: dict[str, Any] = {}

    def oos_for(train: list[str]) -> np.ndarray:
        """Residuals of each state in `train`, with the candidate chosen on the rest of `train`."""
        out = np.full(valid.shape, np.nan)
        for t_state in train:
            rest = np.isin(state, [s for s in train if s != t_state])
            mine = state == t_state
            for k in range(H):
                c = choose(errs, rest, valid, k) if rest.any() else 0
                r = -errs[c][mine, :, k]
                out[mine, :, k] = np.where(valid[mine, :, k], r, np.nan)
        return out

    for s in states:
        train = [x for x in states if x != s]
        rows = state == s
        tr = np.isin(state, train)
        picks = [choose(errs, tr, valid, k) for k in range(H)]
        chosen[s] = picks
        q = quantiles(oos_for(train), classes, state, horizons) if train else None
        fold_q[s] = q
        for k in range(H):
            r = -errs[picks[k]][rows, :, k]
            r = np.where(valid[rows, :, k], r, np.nan)
            resid[rows, :, k] = r
            if q is None:
                continue
            lo = np.array([q[c]["q_low"][k] for c in classes[rows]])[:, None]
            hi = np.array([q[c]["q_high"][k] for c in classes[rows]])[:, None]
            inside[rows, :, k] = np.isfinite(r) & (r >= lo) & (r <= hi)
    return MethodCV(resid, inside, chosen, resid, fold_q)


def _skill(mse: float, ref: float) -> float | None:
    return None if not (np.isfinite(mse) and np.isfinite(ref) and ref > 0) else round(1 - mse / ref, 3)


def _r(v: float | None, d: int = 4) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), d)


@dataclass(frozen=True)
class LevelCV:
    """The nested CV of one level: every method's residuals, and the published method's choices."""

    series: CaseSeries
    classes: np.ndarray
    fc: Forecasts
    cv: dict[str, MethodCV]  # method name -> its nested CV
    candidates: list[tuple[float, int]]  # of "projected_chosen"
    published_alphas: list[float]  # candidates of "projected_published" (k = 1)


def level_cv(series: CaseSeries, index: np.ndarray, classes: Sequence[str],
             horizons: Sequence[int] = HORIZONS, alphas: Sequence[float] = ALPHAS) -> LevelCV:
    """Every method in the same nested folds (protocol): (a) as published today (alpha 1, k 1), (a) with
    alpha chosen (k 1: what is published), (a) with alpha and k chosen, and the references (b)-(e)."""
    fc = forecasts(series, index, horizons, alphas)
    cls = np.asarray(classes)
    err = {m: p - fc.target for m, p in fc.methods.items()}
    cands = sorted(fc.candidates)
    pub = [c for c in cands if c[1] == 1]
    out = {m: nested_cv([e], fc.valid, series.state, cls, horizons) for m, e in err.items()}
    out["projected_published"] = nested_cv([fc.candidates[c] - fc.target for c in pub], fc.valid, series.state,
                                           cls, horizons)
    out["projected_chosen"] = nested_cv([fc.candidates[c] - fc.target for c in cands], fc.valid, series.state,
                                        cls, horizons)
    return LevelCV(series, cls, fc, out, cands, [a for a, _ in pub])


def scorecard(lv: LevelCV, horizons: Sequence[int] = HORIZONS) -> dict[str, Any]:
    """Summaries of one level: per horizon, every method's MSE, skill against persistence and against the
    flat level, 80 % coverage and the spread of per-state skill (min, median, max). Nothing per month."""
    valid = lv.fc.valid
    st = lv.series.state
    states = sorted(set(st.tolist()))
    rows_out = []
    for k, h in enumerate(horizons):
        v = valid[:, :, k]
        mse = {m: float(np.nanmean(cv.resid[:, :, k][v] ** 2)) if v.any() else np.nan for m, cv in lv.cv.items()}
        entry: dict[str, Any] = {"months_ahead": h, "series": int(v.any(axis=1).sum()), "forecasts": int(v.sum())}
        for m, cv in lv.cv.items():
            per_state = []
            for s in states:
                rs = st == s
                vs = v[rs]
                if not vs.any():
                    continue
                ms = float(np.mean(cv.resid[rs, :, k][vs] ** 2))
                mp = float(np.mean(lv.cv["persistence"].resid[rs, :, k][vs] ** 2))
                per_state.append(1 - ms / mp if mp > 0 else np.nan)
            ps = np.array(per_state, dtype=float)
            entry[m] = {
                "mse": _r(mse[m]),
                "skill_vs_persistence": _skill(mse[m], mse["persistence"]),
                "skill_vs_flat": _skill(mse[m], mse["flat"]),
                "coverage_80": _r(float(cv.inside[:, :, k][v].mean()) if v.any() else np.nan, 3),
                "per_state_skill_vs_persistence": {
                    "min": _r(float(np.nanmin(ps)), 3) if ps.size else None,
                    "median": _r(float(np.nanmedian(ps)), 3) if ps.size else None,
                    "max": _r(float(np.nanmax(ps)), 3) if ps.size else None,
                    "states_above_0": int((ps > 0).sum()),
                    "states": int(ps.size),
                },
            }
        rows_out.append(entry)
    chosen = {s: [list(lv.candidates[i]) for i in picks] for s, picks in sorted(lv.cv["projected_chosen"].chosen.items())}
    alphas = {s: [lv.published_alphas[i] for i in picks]
              for s, picks in sorted(lv.cv["projected_published"].chosen.items())}
    return {
        "series": len(lv.series.codes),
        "states": len(states),
        "horizons": rows_out,
        # the choices per outer fold (no figure of a state's data; states by position, not named)
        "choices_by_fold": {"alpha_k1": list(alphas.values()), "alpha_k": list(chosen.values())},
    }


def beats_persistence(lv: LevelCV, horizons: Sequence[int] = HORIZONS,
                      method: str = "projected_published") -> dict[str, list[bool | None]]:
    """Per season class, per horizon: the protocol's verdict (true / false / null without evidence)."""
    valid, st = lv.fc.valid, lv.series.state
    out: dict[str, list[bool | None]] = {}
    for cls in CLASSES:
        verdicts: list[bool | None] = []
        for k in range(len(horizons)):
            rows = lv.classes == cls
            v = valid[:, :, k] & rows[:, None]
            states = sorted(set(st[v.any(axis=1)].tolist()))
            if len(states) < MIN_GROUP_STATES:
                verdicts.append(None)
                continue
            m = lv.cv[method].resid[:, :, k][v]
            p = lv.cv["persistence"].resid[:, :, k][v]
            pooled = 1 - np.mean(m**2) / np.mean(p**2)
            wins = 0
            for s in states:
                vs = v & (st == s)[:, None]
                wins += int(np.mean(lv.cv[method].resid[:, :, k][vs] ** 2)
                            < np.mean(lv.cv["persistence"].resid[:, :, k][vs] ** 2))
            verdicts.append(bool(pooled > 0 and wins * 2 >= len(states)))
        out[cls] = verdicts
    return out


def published_alpha(lv: LevelCV, horizons: Sequence[int] = HORIZONS) -> list[float]:
    """alpha per horizon chosen on every state's series (k = 1): what the published ratios use."""
    errs = [lv.fc.candidates[(a, 1)] - lv.fc.target for a in lv.published_alphas]
    every = np.ones(len(lv.series.codes), dtype=bool)
    return [lv.published_alphas[choose(errs, every, lv.fc.valid, k)] for k in range(len(horizons))]


def published_quantiles(lv: LevelCV, horizons: Sequence[int] = HORIZONS) -> dict[str, Any]:
    """Range quantiles of the published ratios: every state's out-of-sample residuals (alpha chosen
    without the state), per horizon and class, by the protocol's rule."""
    return quantiles(lv.cv["projected_published"].oos_resid, lv.classes, lv.series.state, horizons)


# --- the published table -------------------------------------------------------------------


def ratio_rows(index: np.ndarray, classes: Sequence[str], alpha: Sequence[float],
               q: Mapping[str, Any] | None, beats: Mapping[str, Sequence[bool | None]] | None,
               horizons: Sequence[int] = HORIZONS) -> list[list[dict[str, Any]]]:
    """Per area: one record per start month and horizon (start month first), from its published index.

    ratio = (I(m+h) / I(m)) ** alpha[h]; low, high = ratio x exp(q10), ratio x exp(q90) of its class
    and horizon (null without a scorecard); beats_persistence from the scorecard (null without)."""
    r = ratios(index, alpha, horizons)
    out = []
    for i, cls in enumerate(classes):
        recs = []
        for m in range(MONTHS):
            for k, h in enumerate(horizons):
                val = float(r[i, m, k])
                lo = hi = None
                if q is not None and np.isfinite(q[cls]["q_low"][k]):
                    lo = round(val * float(np.exp(q[cls]["q_low"][k])), RATIO_DECIMALS)
                    hi = round(val * float(np.exp(q[cls]["q_high"][k])), RATIO_DECIMALS)
                recs.append({"start_month": m + 1, "horizon": h, "ratio": round(val, RATIO_DECIMALS),
                             "low": lo, "high": hi,
                             "beats_persistence": None if beats is None else beats[cls][k]})
        out.append(recs)
    return out
