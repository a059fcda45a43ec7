"""Model-3 seasons: the series they are fitted to and the leave-whole-state-out check.

Pure: frames and arrays in, arrays out. Two kinds of recorded monthly case profiles:

* the 22 archetype profiles (12-month averages of routine incidence over groups of LGAs;
  malaria SOURCES.md §7), each predicted by the population-weighted mean of its LGAs'
  indices and assigned to the state holding most of its population;
* the dated LGA series (121 LGAs of six states, 2020-2023; §9), each LGA's own profile:
  cases over that LGA-year's mean, averaged per calendar month over the years.

Every check figure is **leave one whole state out**: the held-out state's dated LGAs and every
archetype group covering any of its population are left out of the fit, the constants are refitted
on the rest, and the held-out profiles (its LGAs, the state, its archetypes) are predicted. The
release is used for states without dated series, so that is the error that matters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from pipeline.model import season_harmonics as H
from pipeline.model.seasons import (
    MONTHS,
    AreaSeasonParams,
    FitTable,
    area_index,
    best_months_share,
    fit_area_params,
    pearson_rows,
    profile_errors,
    season_centre,
    season_from_index,
    trough_to_peak,
)

MIN_MONTHS_IN_YEAR = 9  # an LGA-year with fewer usable months gives no profile (its mean would be biased)
MIN_YEARS_PER_MONTH = 2  # each calendar month of a profile needs at least this many years
# The two sources weigh the same in the joint fit: the 22 archetype profiles 1 each, the dated
# states together 22, each state equally, each LGA equally within its state. Fixed before fitting.
DATED_SHARE = 0.5
CHECK_DECIMALS = 2


@dataclass(frozen=True)
class DatedProfiles:
    lga_codes: list[str]
    lga_state: list[str]
    lga: np.ndarray  # [n_lga, 12] mean 1
    lga_mean_cases: np.ndarray  # [n_lga] cases per month (weights of the state profile)
    state_codes: list[str]
    state: np.ndarray  # [n_states, 12] mean 1: case-weighted mean of its LGAs' profiles


def dated_profiles(dated: pl.DataFrame) -> DatedProfiles:
    """Recorded 12-month profiles of the dated series (see the module docstring)."""
    d = dated.filter(pl.col("cases").is_not_null())
    years = (d.group_by("lga_code", "year").agg(pl.len().alias("n"), pl.col("cases").mean().alias("ym"))
             .filter(pl.col("n") >= MIN_MONTHS_IN_YEAR))
    r = (d.join(years, on=["lga_code", "year"], how="inner")
         .with_columns((pl.col("cases") / pl.col("ym")).alias("ratio"))
         .group_by("lga_code", "state_code", "month")
         .agg(pl.col("ratio").mean(), pl.len().alias("years")))
    ok = (r.group_by("lga_code").agg(((pl.col("years") >= MIN_YEARS_PER_MONTH).sum() == MONTHS).alias("ok"),
                                     pl.len().alias("m"))
          .filter(pl.col("ok") & (pl.col("m") == MONTHS))["lga_code"])
    r = r.filter(pl.col("lga_code").is_in(ok.implode()))
    wide = r.pivot(on="month", index=["lga_code", "state_code"], values="ratio", sort_columns=True).sort("lga_code")
    cols = [str(m) for m in range(1, MONTHS + 1)]
    prof = wide.select(cols).to_numpy().astype(float) if wide.height else np.zeros((0, MONTHS))
    prof = prof / prof.mean(axis=1, keepdims=True) if len(prof) else prof
    means = dict(years.group_by("lga_code").agg(pl.col("ym").mean()).iter_rows())
    codes = wide["lga_code"].to_list()
    states = wide["state_code"].to_list()
    mc = np.array([means[c] for c in codes], dtype=float)
    scodes = sorted(set(states))
    sidx = np.array([scodes.index(s) for s in states], dtype=int)
    sp = np.zeros((len(scodes), MONTHS))
    np.add.at(sp, sidx, mc[:, None] * prof)
    sp = sp / sp.mean(axis=1, keepdims=True) if len(scodes) else sp
    return DatedProfiles(codes, states, prof, mc, scodes, sp)


@dataclass(frozen=True)
class Series:
    """Everything fitted to: one row per recorded profile."""

    names: list[str]  # archetype name or lga_code
    kind: list[str]  # "archetype" | "lga"
    state: list[str]  # the state the series is left out with
    weights: np.ndarray  # [S, n_areas] area weights of its predicted profile
    recorded: np.ndarray  # [S, 12]
    weight_model_2: np.ndarray  # [S] loss weight of the model-2 fit (archetypes only)
    weight_joint: np.ndarray  # [S] loss weight of the joint fit


def series_table(arch_names: list[str], arch_weights: np.ndarray, arch_recorded: np.ndarray, arch_state: list[str],
                 dated: DatedProfiles | None, area_codes: list[str]) -> Series:
    """Stack the archetype profiles and the dated LGA profiles into one fitting table."""
    n_a = len(arch_names)
    names, kind, state = list(arch_names), ["archetype"] * n_a, list(arch_state)
    w = [np.asarray(arch_weights, dtype=float).reshape(n_a, len(area_codes))]
    rec = [np.asarray(arch_recorded, dtype=float).reshape(n_a, MONTHS)]
    wm2 = [np.ones(n_a)]
    wj = [np.ones(n_a)]
    if dated is not None and dated.lga_codes:
        pos = {c: i for i, c in enumerate(area_codes)}
        keep = [i for i, c in enumerate(dated.lga_codes) if c in pos]
        one = np.zeros((len(keep), len(area_codes)))
        for r, i in enumerate(keep):
            one[r, pos[dated.lga_codes[i]]] = 1.0
        st = [dated.lga_state[i] for i in keep]
        per_state = {s: st.count(s) for s in set(st)}
        total = n_a * DATED_SHARE / (1 - DATED_SHARE) if n_a else 1.0
        names += [dated.lga_codes[i] for i in keep]
        kind += ["lga"] * len(keep)
        state += st
        w.append(one)
        rec.append(dated.lga[keep])
        wm2.append(np.zeros(len(keep)))
        wj.append(np.array([total / len(per_state) / per_state[s] for s in st]))
    return Series(names, kind, state, np.vstack(w), np.vstack(rec), np.concatenate(wm2), np.concatenate(wj))


RULES = {
    # name: (loss weights, floor rule)
    "model_2": ("weight_model_2", "constant"),
    "constant_floor_both_sources": ("weight_joint", "constant"),
    "model_3": ("weight_joint", "linear"),
}


def held_out_rows(series: Series, area_state: list[str] | np.ndarray, state: str) -> np.ndarray:
    """[S] bool: the series a fold leaving `state` out may not train on: its own series and every
    archetype group covering any of its population (nothing of the state stays in training)."""
    areas = np.asarray(area_state) == state
    return (np.array(series.state) == state) | (series.weights[:, areas].sum(axis=1) > 0)


def fit(table: FitTable, rain: np.ndarray, series: Series, rule: str, out: np.ndarray | None = None) -> AreaSeasonParams:
    """One rule's constants, fitted without the series marked in `out` (see `held_out_rows`)."""
    attr, floor_rule = RULES[rule]
    sw = getattr(series, attr).copy()
    if out is not None:
        sw[out] = 0.0
    if not (sw > 0).any():
        sw = series.weight_model_2.copy() if attr == "weight_joint" else series.weight_joint.copy()
        if out is not None:
            sw[out] = 0.0
    return fit_area_params(table, rain, series.weights, series.recorded, sw, floor_rule)


@dataclass(frozen=True)
class Fold:
    state: str
    params: dict[str, Any]  # rule -> AreaSeasonParams (models 2, 3) or season_harmonics.HarmonicFit (model 4)


@dataclass(frozen=True)
class CrossValidated:
    """Out-of-sample predictions of every series and dated state, per rule."""

    folds: list[Fold]
    series_pred: dict[str, np.ndarray]  # rule -> [S, 12] peak 1
    series_floor: dict[str, np.ndarray]  # rule -> [S] weighted mean floor of the series' areas
    state_pred: dict[str, np.ndarray]  # rule -> [n_dated_states, 12] peak 1
    area_floor: dict[str, np.ndarray]  # rule -> [n_areas] floor of each area in the fold holding out its state
    area_lag: dict[str, np.ndarray]
    area_index: dict[str, np.ndarray]  # rule -> [n_areas, 12] unrounded index from that fold


def leave_state_out(table: FitTable, rain: np.ndarray, series: Series, area_state: list[str],
                    dated_states: list[str], state_rain: dict[str, np.ndarray]) -> CrossValidated:
    """Refit every rule once per state that owns a series; predict that state's series only."""
    states = sorted(set(series.state) | set(dated_states))
    s_arr = np.array(series.state)
    a_arr = np.array(area_state)
    S, n = series.recorded.shape[0], rain.shape[0]
    out_s = {r: np.full((S, MONTHS), np.nan) for r in RULES}
    out_f = {r: np.full(S, np.nan) for r in RULES}
    out_st = {r: np.full((len(dated_states), MONTHS), np.nan) for r in RULES}
    af = {r: np.full(n, np.nan) for r in RULES}
    al = {r: np.full(n, np.nan) for r in RULES}
    ai = {r: np.full((n, MONTHS), np.nan) for r in RULES}
    folds = []
    for g in states:
        params = {r: fit(table, rain, series, r, out=held_out_rows(series, area_state, g)) for r in RULES}
        folds.append(Fold(g, params))
        rows = np.flatnonzero(s_arr == g)
        areas = np.flatnonzero(a_arr == g)
        for r, p in params.items():
            used = np.flatnonzero(series.weights[rows].sum(axis=0) > 0)
            ix, fl, _ = area_index(rain[used], p, rounded=False)
            w = series.weights[rows][:, used]
            pred = w @ ix
            out_s[r][rows] = pred / pred.max(axis=1, keepdims=True)
            out_f[r][rows] = (w @ fl) / w.sum(axis=1)
            if areas.size:
                ix_a, f_a, l_a = area_index(rain[areas], p, rounded=False)
                af[r][areas], al[r][areas], ai[r][areas] = f_a, l_a, ix_a
            if g in dated_states:
                six, _, _ = area_index(state_rain[g][None, :], p, rounded=False)
                out_st[r][dated_states.index(g)] = six[0] / six[0].max()
    return CrossValidated(folds, out_s, out_f, out_st, af, al, ai)


def _r(v: float, d: int = CHECK_DECIMALS) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), d)


def summarise(pred: np.ndarray, rec: np.ndarray) -> dict[str, Any]:
    """The four check measures over a set of profiles (rows)."""
    if len(pred) == 0:
        return {"series": 0, "median_correlation": None, "mean_centre_months_off": None,
                "mean_best_4_month_share_error": None, "mean_trough_to_peak_error": None}
    e = profile_errors(pred, rec / rec.max(axis=1, keepdims=True))
    return {
        "series": int(len(pred)),
        "median_correlation": _r(float(np.nanmedian(e["correlation"]))),
        "mean_centre_months_off": _r(float(np.mean(e["centre_off"]))),
        "mean_best_4_month_share_error": _r(float(np.mean(e["best_months_share_error"])), 3),
        "mean_trough_to_peak_error": _r(float(np.mean(e["trough_to_peak_error"]))),
    }


def per_profile(pred: np.ndarray, rec: np.ndarray) -> dict[str, np.ndarray]:
    recn = rec / rec.max(axis=1, keepdims=True)
    e = profile_errors(pred, recn)
    return {**e, "predicted_centre": season_centre(pred), "recorded_centre": season_centre(recn),
            "predicted_best4": best_months_share(pred), "recorded_best4": best_months_share(recn),
            "predicted_trough": trough_to_peak(pred), "recorded_trough": trough_to_peak(recn)}


def squared_error(pred: np.ndarray, rec: np.ndarray, w: np.ndarray) -> float:
    """Weighted squared error of profiles scaled to mean 1 (the fitting criterion, out of sample)."""
    p = pred / pred.mean(axis=1, keepdims=True)
    r = rec / rec.mean(axis=1, keepdims=True)
    return float((((p - r) ** 2).sum(axis=1) * w).sum() / w.sum())


# --- Model 4: harmonics of log cases, partially pooled (pipeline.model.season_harmonics) ---------

MODEL_4 = "model_4"


@dataclass(frozen=True)
class AreaData:
    """Per-area inputs of the model-4 season (areas = LGAs, in the season model's order)."""

    x: np.ndarray  # [n, k] raw covariates
    xy: np.ndarray  # [n, 2] lon, lat
    population: np.ndarray  # [n]
    state: np.ndarray  # [n] state code


def harmonic_units(series: Series, areas: AreaData, data_weight: dict[str, float] | None = None) -> H.Units:
    """The fitting table of model 4: every series' log-profile harmonics and covariates."""
    kind = np.array(series.kind)
    w = series.weights / series.weights.sum(axis=1, keepdims=True)
    theta = H.harmonics(np.log(np.clip(series.recorded, 1e-9, None)))
    x = w @ areas.x
    dated = kind == "lga"
    xy = np.where(dated[:, None], w @ np.nan_to_num(areas.xy), np.nan)
    dw = np.array([(data_weight or {}).get(n, 1.0) if d else 0.0 for n, d in zip(series.names, dated, strict=True)])
    state = np.array([s if d else "" for s, d in zip(series.state, dated, strict=True)])
    return H.Units(theta, x, series.weight_joint.astype(float), dated, xy, dw, state)


def area_profiles(f: H.HarmonicFit, areas: AreaData, rows: np.ndarray) -> np.ndarray:
    """[len(rows), 12] unrounded profiles (peak 1) of the areas `rows` under fit `f`."""
    return H.profiles(f.predict(areas.x[rows], areas.xy[rows]))


def weighted_profile(prof: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted mean of profiles each scaled to mean 1, rescaled to peak 1 (an aggregate's season)."""
    m = prof / prof.mean(axis=1, keepdims=True)
    out = np.asarray(w, dtype=float) @ m
    return out / out.max(axis=-1, keepdims=True)


def harmonic_leave_state_out(series: Series, areas: AreaData, units: H.Units, std: H.Standardiser,
                             dated_states: list[str], cv: CrossValidated) -> CrossValidated:
    """Model 4's leave-whole-state-out predictions, added to `cv` under MODEL_4.

    Each fold drops the state's dated LGAs and every archetype covering any of its population, then
    chooses the pooling constants by an inner leave-one-state-out over what is left (nested)."""
    S, n = series.recorded.shape[0], len(areas.state)
    out_s, out_f = np.full((S, MONTHS), np.nan), np.full(S, np.nan)
    out_st = np.full((len(dated_states), MONTHS), np.nan)
    ai, af = np.full((n, MONTHS), np.nan), np.full(n, np.nan)
    folds = list(cv.folds)
    states = [f.state for f in cv.folds]
    for k, g in enumerate(states):
        held = held_out_rows(series, areas.state, g)
        keep = ~held
        rk, sh = H.choose_pooling(units, std, keep)
        f = H.fit(units, std, keep, rk, sh)
        folds[k] = Fold(g, {**cv.folds[k].params, MODEL_4: f})
        rows = np.flatnonzero(np.array(series.state) == g)
        used = np.flatnonzero(series.weights[rows].sum(axis=0) > 0)
        if rows.size:
            prof = area_profiles(f, areas, used)
            w = series.weights[rows][:, used]
            out_s[rows] = weighted_profile(prof, w / w.sum(axis=1, keepdims=True))
            out_f[rows] = out_s[rows].min(axis=1)
        mine = np.flatnonzero(areas.state == g)
        if mine.size:
            prof = area_profiles(f, areas, mine)
            ai[mine], af[mine] = prof, prof.min(axis=1)
            if g in dated_states:
                pw = areas.population[mine]
                out_st[dated_states.index(g)] = weighted_profile(prof, pw / pw.sum())
    lag = np.full(n, np.nan)
    return CrossValidated(folds, {**cv.series_pred, MODEL_4: out_s}, {**cv.series_floor, MODEL_4: out_f},
                          {**cv.state_pred, MODEL_4: out_st}, {**cv.area_floor, MODEL_4: af},
                          {**cv.area_lag, MODEL_4: lag}, {**cv.area_index, MODEL_4: ai})


def smooth3(profiles: np.ndarray) -> np.ndarray:
    """Circular 3-month running mean (the recorded profile the peak month is read from)."""
    p = np.atleast_2d(profiles)
    return (np.roll(p, 1, axis=1) + p + np.roll(p, -1, axis=1)) / 3


def timing(pred: np.ndarray, rec: np.ndarray) -> dict[str, np.ndarray]:
    """Per profile: signed peak, start and centre errors (months, predicted minus recorded), trough/peak
    and best-4 share errors, shape r. The recorded peak and start are read from its 3-month smoothed
    profile; each season's start at the midpoint between its own trough and peak."""
    pn = pred / pred.max(axis=1, keepdims=True)
    rn = rec / rec.max(axis=1, keepdims=True)
    rs = smooth3(rec)
    rs = rs / rs.max(axis=1, keepdims=True)
    start = []
    for a, b in zip(pn, rs, strict=True):
        sa = season_from_index(np.round(a, 3), float(a.min() + (1 - a.min()) / 2))
        sb = season_from_index(np.round(b, 3), float(b.min() + (1 - b.min()) / 2))
        start.append(float(H.signed_month_difference(sa.season_start_month, sb.season_start_month)))
    return {
        "shape_r": pearson_rows(pn, rn),
        "peak_error": H.signed_month_difference(pn.argmax(axis=1), rs.argmax(axis=1)),
        "start_error": np.array(start),
        "centre_error": H.signed_month_difference(season_centre(pn), season_centre(rn)),
        "trough_to_peak_error": np.abs(trough_to_peak(pn) - trough_to_peak(rn)),
        "best_4_share_error": np.abs(best_months_share(pn) - best_months_share(rn)),
    }


def timing_summary(t: dict[str, np.ndarray]) -> dict[str, Any]:
    """The timing measures over a set of profiles (summaries only)."""
    n = len(t["shape_r"])
    if n == 0:
        return {"profiles": 0}
    pk = t["peak_error"]
    return {
        "profiles": n,
        "median_shape_r": _r(float(np.nanmedian(t["shape_r"]))),
        "peak_within_1_month": int((np.abs(pk) <= 1).sum()),
        "mean_signed_peak_error": _r(float(pk.mean())),
        "mean_abs_peak_error": _r(float(np.abs(pk).mean())),
        "mean_signed_start_error": _r(float(t["start_error"].mean())),
        "mean_signed_centre_error": _r(float(t["centre_error"].mean())),
        "mean_abs_centre_error": _r(float(np.abs(t["centre_error"]).mean())),
        "mean_trough_to_peak_error": _r(float(t["trough_to_peak_error"].mean()), 3),
        "mean_best_4_share_error": _r(float(t["best_4_share_error"].mean()), 3),
    }


def log_residuals(pred: np.ndarray, rec: np.ndarray) -> np.ndarray:
    """[n, 12] out-of-sample error of the season on the log scale, both profiles scaled to mean 1."""
    p, r = np.atleast_2d(pred), np.atleast_2d(rec)
    return np.log(p / p.mean(axis=1, keepdims=True)) - np.log(r / r.mean(axis=1, keepdims=True))


def rms(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.sqrt(np.mean(x**2))) if x.size else 0.0


def season_error(resid: np.ndarray, group: np.ndarray, z: float) -> dict[str, Any]:
    """The season-shape error a range must carry, and its coverage checked in every calendar month.

    resid: [n, 12] out-of-sample log residuals (one row per left-out profile); group: [n] the state each
    row was left out with. The sd is the RMS of every residual. Coverage is nested: each state's rows are
    judged by the sd of the *other* states' residuals, and the share of profile-months inside +-z sd is
    summarised over the calendar months (lowest, highest, months under 0.7) and overall."""
    resid = np.atleast_2d(resid)
    g = np.asarray(group)
    if resid.shape[0] == 0:
        return {"profiles": 0, "log_sd": 0.0}
    inside = np.zeros(resid.shape, dtype=bool)
    for s in sorted(set(g.tolist())):
        rows = g == s
        sd = rms(resid[~rows]) if (~rows).any() else rms(resid)
        inside[rows] = np.abs(resid[rows]) <= z * sd
    by_month = inside.mean(axis=0)
    # only summaries of the monthly coverage are kept (no per-month values of the dated series leave)
    return {"profiles": int(resid.shape[0]), "log_sd": round(rms(resid), 4),
            "share_inside": round(float(inside.mean()), 3),
            "lowest_month_share_inside": round(float(by_month.min()), 3),
            "highest_month_share_inside": round(float(by_month.max()), 3),
            "months_below_0_7": int((by_month < 0.7).sum())}
