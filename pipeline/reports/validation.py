"""The validation report: how the published seasons, scores and ranges fare against data
they were not fitted to. `make build` ships it in every release (docs/validation.json,
quoted by the docs pages); this module's command writes the same report to reports/.

(a) seasons: leave-one-archetype-out over the 22 routine case profiles (from the
    transmission model's check);
(b) time-held-out survey rounds: the baseline refitted on rounds <= 2015 predicts the
    2018 round, on rounds <= 2018 the 2021 round (Spearman, RMSE, share inside the 80 %
    range), beside the Model 1 reference (last round held flat with its "95 %" band);
(c) agreement with the MAP-style incidence table, 2018-2019 only (a check, never an input);
(d) the LGA comparison: leave-one-LGA-out prediction of the NDHS 2018 LGA observations;
(f) the pre-registered tests of what a month carries, on the dated LGA series, and the score
    against cases month by month (every season in it from the fold that held the state out).

The build runs this as its own producer (pipeline/datasets/validation.py), after the risk
model; this module imports the risk producer's model functions, never the other way round.

    python -m pipeline.reports.validation --data-dir DIR --out reports/
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import click
import numpy as np
import orjson
import polars as pl

from pipeline import cache
from pipeline.model import month_tests, national_trend, ranges, small_area
from pipeline.model import risk as model
from pipeline.reports import report_command
from pipeline.sources.inputs import Inputs

HELD_OUT = ((2015, 2018), (2018, 2021))  # (train on rounds up to, predict)
AGREEMENT_YEARS = (2018, 2019)
# Model 1's range for the reference row: the last round held flat, B +- 1.96 sqrt(B(1-B)/150).
MODEL1_N = 150.0
NOT_VALIDATED = [
    "Seasons in the states without dated series: the leave-whole-state-out figures estimate that error "
    "from six states (two far-northern, two middle-belt, two southern) and the archetype groups.",
    "LGA differences over time: one LGA survey (NDHS 2018, 1-108 children each) sets every LGA's position "
    "within its state; an LGA's own-data part of its published value is not covered by the leave-one-out check.",
    "The season's year-to-year variation: the case profiles are 12-month averages over unstated years.",
    "Months after the last survey: the range widens with time, but no survey after 2021 exists to check it.",
    "The dated case series are routine counts: reporting completeness, stock-outs and care seeking move "
    "them as well as malaria does.",
]
CAVEATS = [
    "Every season figure here is out of sample: constants refitted without the state being scored "
    "(leave one whole state out). Six states have dated series; the rest of the country is judged by them "
    "and by 22 archetype profiles of unstated years.",
    "The dated series are routine facility counts (NHMIS/DHIS2) without a stated licence: used for fitting "
    "and validation only, never published; figures and plots here derive from them (ratios and averages), "
    "no row is shown.",
    "Routine counts mix malaria with reporting completeness, stock-outs and care seeking: agreement is "
    "limited by them as much as by the model.",
    "The score is a survey-based positivity; the dated series are case counts. Only their timing over the "
    "year is compared, never their level.",
]
SEASON_RULE_NAMES = {
    "model_2": "model 2 rule: one floor everywhere, lag by dry months, fitted to the archetype profiles only",
    "constant_floor_both_sources": "one floor everywhere, fitted to the archetype profiles and the dated series",
    "model_3": "model 3 rule: floor and lag both by dry months, fitted to the archetype profiles and the dated series",
}
LGA_SAMPLE_PER_STATE = 2  # dated LGAs plotted per state: the first ones by code (not chosen by fit)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho with average ranks for ties."""
    rx = pl.Series(np.asarray(x, dtype=float)).rank("average").to_numpy()
    ry = pl.Series(np.asarray(y, dtype=float)).rank("average").to_numpy()
    return float(np.corrcoef(rx, ry)[0, 1])


def _r(v: float | None, d: int = 3) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), d)


def held_out(md: Any, train_upto: int, target: int) -> dict[str, Any]:
    """Predict the `target` round of every state from rounds <= `train_upto` only: Q, its
    method (nested choice on those rounds) and the design effects are all refitted there."""
    from pipeline.datasets.risk import design_effects, predict_round

    out: dict[str, Any] = {"trained_on_rounds_up_to": train_upto, "predicted_round": target}
    train = md.rounds.filter(pl.col("survey_year") <= train_upto)
    obs = md.rounds.filter(pl.col("survey_year") == target)
    pr = predict_round(md, train, obs, target)
    if pr is None:
        return {**out, "states": 0, "note": "round absent from this data load"}
    y, pred, lo, hi = pr.observed, pr.predicted, pr.low, pr.high
    rows = pr.rows
    last = train.sort("survey_year").group_by("state_code").agg(pl.col("positivity").last())
    held = dict(zip(last["state_code"], last["positivity"], strict=True))
    flat = np.array([held[md.state_codes[i]] for i in rows])
    hw = 1.96 * np.sqrt(flat * (1 - flat) / MODEL1_N)
    _, _, icc = design_effects(md, train_upto, [])
    ref = predict_round(md, train, obs, target, q_method="pooled", use_design_effect=False)
    ref_cal = ranges.calibration(ref.z) if ref is not None else {}
    return {
        **out,
        "states": len(rows),
        "random_walk_variance_per_year": _r(pr.baseline.q, 4),
        "random_walk_variance_method": pr.baseline.q_method,
        "cluster_icc": _r(icc, 3),
        "new_survey_design_effect": _r(pr.baseline.new_survey_deff, 2),
        "spearman": _r(spearman(pred, y)),
        "rmse": _r(float(np.sqrt(np.mean((pred - y) ** 2)))),
        "share_inside_80_range": _r(float(np.mean((lo <= y) & (y <= hi)))),
        "mean_range_width": _r(float(np.mean(hi - lo))),
        "calibration": ranges.calibration(pr.z),
        "model_2_reference": {
            "method": "Q pooled over every change, binomial sampling variance (model 2.0)",
            "random_walk_variance_per_year": _r(ref.baseline.q, 4) if ref is not None else None,
            "var_z": ref_cal.get("var_z"),
            "share_inside_80_range": ref_cal.get("share_inside"),
        },
        "model_1_reference": {
            "method": "last round held flat, range B +- 1.96 sqrt(B(1-B)/150) (stated as 95 %)",
            "spearman": _r(spearman(flat, y)),
            "rmse": _r(float(np.sqrt(np.mean((flat - y) ** 2)))),
            "share_inside_95_range": _r(float(np.mean((flat - hw <= y) & (y <= flat + hw)))),
        },
    }


def map_agreement(md: Any, res: Any, incidence: pl.DataFrame | None) -> dict[str, Any]:
    """Spearman of each state's annual mean score with the MAP-style incidence, 2018-2019."""
    note = ("After 2020 the incidence table follows the 2018 survey, not the 2021 one, so later years "
            "are not a check of this model and are not reported.")
    if incidence is None:
        return {"years": [], "note": "incidence table absent from this data load"}
    years = np.array([int(p[:4]) for p in res.estimated])
    out = []
    for y in AGREEMENT_YEARS:
        cols = years == y
        if cols.sum() < 12:
            continue
        annual = res.state.score[:, cols].mean(axis=1)
        inc = dict(incidence.filter(pl.col("year") == y).select("state_code", "incidence").iter_rows())
        idx = [i for i, c in enumerate(md.state_codes) if c in inc]
        if len(idx) < 3:
            continue
        out.append({"year": y, "states": len(idx),
                    "spearman": _r(spearman(annual[idx], np.array([inc[md.state_codes[i]] for i in idx])))})
    return {"years": out, "note": note}


def binomial_deviance(p: np.ndarray, q: np.ndarray, n: np.ndarray) -> float:
    """n-weighted binomial deviance of observed shares p against predictions q, per child."""
    q = np.clip(q, 1e-4, 1 - 1e-4)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(p > 0, p * np.log(p / q), 0.0)
        b = np.where(p < 1, (1 - p) * np.log((1 - p) / (1 - q)), 0.0)
    return float(2 * (n * (a + b)).sum() / n.sum())


def lga_comparison(md: Any) -> dict[str, Any]:
    """Leave-one-LGA-out prediction of the NDHS 2018 LGA observations.

    For each LGA, its state's level is the children-weighted mean of the state's *other*
    LGAs (and the national level that of all other LGAs); "state value" gives every LGA that level, "urban split" applies the published
    urban/rural contrast within the state (population-preserving, as the score does).
    """
    lp = md.lga_positivity
    if lp is None or lp.height == 0:
        return {"lgas": 0, "note": "LGA observations absent from this data load"}
    # the split is linear below its cap at 1, so a small level gives each LGA's factor
    unit = 0.01
    factor = model.urban_split(np.full(len(md.state_codes), unit), md.population, md.is_urban, md.state_idx,
                               md.urban_ratio) / unit
    row = {c: i for i, c in enumerate(md.lga_codes)}
    gi = np.array([row[c] for c in lp["lga_code"].to_list()])
    st = md.state_idx[gi]
    p = lp["positivity"].to_numpy()
    n = lp["children"].to_numpy().astype(float)
    tot_np = np.bincount(st, weights=n * p, minlength=len(md.state_codes))
    tot_n = np.bincount(st, weights=n, minlength=len(md.state_codes))
    others = tot_n[st] - n
    keep = others > 0
    state_val = np.where(keep, (tot_np[st] - n * p) / np.where(keep, others, 1), np.nan)
    split_val = state_val * factor[gi]
    # the national reference leaves the LGA out too, like every other prediction here
    national = ((n * p).sum() - n * p) / (n.sum() - n)
    # a small-area alternative: the urban/rural ratio fitted on the other LGAs' observations
    urb = md.is_urban[gi].astype(float)
    u_np, u_n = (urb * n * p).sum() - urb * n * p, (urb * n).sum() - urb * n
    r_np, r_n = ((1 - urb) * n * p).sum() - (1 - urb) * n * p, ((1 - urb) * n).sum() - (1 - urb) * n
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where((u_n > 0) & (r_np > 0), (u_np / u_n) / (r_np / r_n), 1.0)
    w_urban = np.bincount(md.state_idx, weights=md.population * md.is_urban, minlength=len(md.state_codes))
    w_all = np.bincount(md.state_idx, weights=md.population, minlength=len(md.state_codes))
    rural_f = w_all[st] / (w_all[st] - w_urban[st] + rho * w_urban[st])
    fitted_val = np.clip(state_val * np.where(urb > 0, rho * rural_f, rural_f), 0, 1)
    k = keep
    dev_state = binomial_deviance(p[k], state_val[k], n[k])
    dev_split = binomial_deviance(p[k], split_val[k], n[k])
    dev_fitted = binomial_deviance(p[k], fitted_val[k], n[k])
    res: dict[str, Any] = {
        "lgas": int(k.sum()),
        "children": int(n[k].sum()),
        "deviance_national_value": _r(binomial_deviance(p[k], national[k], n[k]), 4),
        "deviance_state_value": _r(dev_state, 4),
        "deviance_urban_split": _r(dev_split, 4),
        "deviance_urban_ratio_fitted_to_lgas": _r(dev_fitted, 4),
        "urban_ratio_fitted_to_lgas": _r(float(np.median(rho[k]))),
        "urban_lgas": int(md.is_urban[gi][k].sum()),
        "urban_ratio": _r(md.urban_ratio),
    }
    res["urban_split_beats_state_value"] = bool(dev_split < dev_state)
    return res


def _p(x: np.ndarray) -> list[float]:
    return [round(float(v), 3) for v in x]


def season_profiles(sm: Any, geo: Any) -> dict[str, Any]:
    """Recorded 12-month profiles of the dated states and a fixed sample of dated LGAs beside the
    published index and the out-of-sample one (the fold that held the state out). All scaled to
    peak 1; the recorded ones are 4-year averages of ratios, never counts."""
    fit = sm.fit
    if fit is None or fit.dated is None:
        return {"states": [], "lgas": [], "note": "dated case series absent from this data load"}
    cv, dated, rule = fit.cv, fit.dated, sm.rule
    names = dict(zip(geo.states["state_code"], geo.states["state"], strict=True))
    states = geo.states.sort("state_code")
    srow = {c: i for i, c in enumerate(states["state_code"].to_list())}
    lga_names = dict(zip(geo.lgas["lga_code"], geo.lgas["lga"], strict=True))
    state_rows = []
    dated_states = [s for s in dated.state_codes if s in srow]
    for k, code in enumerate(dated_states):
        rec = dated.state[dated.state_codes.index(code)]
        state_rows.append({"state_code": code, "state": names[code],
                           "recorded": _p(rec / rec.max()),
                           "out_of_sample": _p(cv.state_pred[rule][k]),
                           "model_2_out_of_sample": _p(cv.state_pred["model_2"][k])})
    pos = {c: i for i, c in enumerate(sm.lga_codes)}
    lga_rows = []
    srow_of = {n: i for i, n in enumerate(fit.series.names)}
    for code in dated_states:
        for lga in [c for c, s in zip(dated.lga_codes, dated.lga_state, strict=True) if s == code][:LGA_SAMPLE_PER_STATE]:
            i = srow_of.get(lga)
            if i is None:
                continue
            rec = fit.series.recorded[i]
            lga_rows.append({"lga_code": lga, "lga": lga_names.get(lga, lga), "state_code": code,
                             "recorded": _p(rec / rec.max()), "published": _p(sm.lga_index[pos[lga]]),
                             "out_of_sample": _p(cv.series_pred[rule][i])})
    return {"states": state_rows, "lgas": lga_rows,
            "note": "recorded: each LGA-month over its LGA-year mean, averaged per calendar month over 2020-2023 "
                    "(the state: case-weighted over its LGAs), scaled to peak 1; out_of_sample: the season "
                    "predicted by constants fitted without the state"}


def month_validation(md: Any, res: Any) -> dict[str, Any]:
    """(f): the pre-registered tests (run by the risk producer before it scores, since a term enters
    the score only if they adopt it) and the score against cases month by month.

    Every season here is the one predicted for the LGA's state by constants fitted without that
    state (season_cv.leave_state_out), never the published one."""
    ev = md.months
    if ev is None:
        return {"tests": None, "score_against_cases": [], "note": "dated case series absent from this data load"}
    return {"tests": ev.tests, "score_against_cases": score_against_cases(md, res, ev),
            "lga_months": int(np.isfinite(ev.data.y).sum()), "lgas": len(ev.lga_codes),
            "months": f"{ev.t0 // 12}-01 to {(ev.t0 + ev.cases.shape[1] - 1) // 12}-12"}


def score_against_cases(md: Any, res: Any, ev: Any) -> list[dict[str, Any]]:
    """Per dated state, month by month: its LGAs' cases against the score, each LGA over its own
    mean and averaged over the state's LGAs present that month (at least half of them). The score is
    refitted out of sample: the season of the fold that held the state out and, where the rain term
    is adopted, that fold's rain coefficients. r of the levels and of the month-to-month anomalies."""
    from pipeline.datasets.risk import month_index

    est = {month_index(p): j for j, p in enumerate(res.estimated)}
    n = ev.cases.shape[1]
    months = np.arange(ev.t0, ev.t0 + n)
    base_all, _, _ = model.baseline_range(res.baseline, np.array([m for m in months if m in est] or [ev.t0]))
    have = np.array([m in est for m in months])
    rain = ev.tests.get("b_rain_anomalies_lags_0_3", {})
    adopted = bool(rain.get("adopted"))
    data = ev.data
    out = []
    for code in sorted(set(data.state.tolist())):
        sel = data.state == code
        s_i = md.state_codes.index(code)
        c = np.exp(data.reference[sel])  # the held-out season: index over its mean, per month
        factor = np.ones_like(c)
        if adopted:
            beta = np.array(rain["by_state"].get(code, {}).get("coefficients") or [0.0] * data.anomalies.shape[0])
            factor = np.exp(np.einsum("k,klt->lt", beta, np.nan_to_num(data.anomalies[:, sel], nan=0.0)))
        score = np.full(c.shape, np.nan)
        score[:, have] = base_all[s_i][None, :] * c[:, have] * factor[:, have]
        cases = ev.cases[sel]
        enough = np.isfinite(cases).sum(axis=0) >= max(1, sel.sum() / 2)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # months no LGA reported: NaN, as intended
            lvl_c = np.nanmean(cases / np.nanmean(cases, axis=1, keepdims=True), axis=0)
            lvl_s = np.nanmean(score / np.nanmean(score, axis=1, keepdims=True), axis=0)
            an_c = np.nanmean(month_tests.outcome(cases), axis=0)
            an_s = np.nanmean(month_tests.outcome(score), axis=0)
        lvl_c[~enough], an_c[~enough] = np.nan, np.nan
        out.append({
            "state_code": code, "months": int(np.isfinite(lvl_c).sum()),
            "r_monthly_level": _r(month_tests.pearson(lvl_c, lvl_s)),
            "r_month_to_month": _r(month_tests.pearson(an_c, an_s)),
            "cases_over_mean": [None if not np.isfinite(v) else round(float(v), 2) for v in lvl_c],
            "score_over_mean": [None if not np.isfinite(v) else round(float(v), 2) for v in lvl_s],
        })
    return out


def small_area_comparison(md: Any, urban_split_deviance: float | None) -> dict[str, Any]:
    """Leave-one-LGA-out deviance of the small-area model (pipeline.model.small_area), every
    parameter refitted without the held-out LGA, beside the urban split; and the fitted
    constants of the published model."""
    from pipeline.datasets.risk import SMALL_AREA_COVARIATES

    lp = md.lga_positivity
    if lp is None or md.lga_adjacency is None or lp.height < small_area.MIN_LGAS:
        return {"lgas": 0, "note": "LGA observations absent from this data load: LGAs use the urban split"}
    row = {c: i for i, c in enumerate(md.lga_codes)}
    gi = np.array([row[c] for c in lp["lga_code"].to_list()])
    adj = md.lga_adjacency[np.ix_(gi, gi)]
    p = lp["positivity"].to_numpy()
    n = lp["children"].to_numpy().astype(float)
    # every refit of the leave-one-out depends only on these arrays: kept between builds (pipeline.cache)
    figs = cache.call("small-area-check", cache.code_of("pipeline.model"), small_area.validation_figures,
                      p, n, md.lga_covariates[gi], md.state_idx[gi], adj)
    beats = urban_split_deviance is not None and figs["deviance_small_area"] < urban_split_deviance
    out = {
        "lgas": int(gi.size),
        "covariates": list(SMALL_AREA_COVARIATES),
        "neighbours": "LGAs whose outlines touch (within 0.001 degrees)",
        "cross_validation": "leave one LGA out; state levels, covariate centring, covariate and neighbour "
                            "coefficients, between-LGA variance and the neighbours' residuals refitted without it",
        **figs,
        "deviance_urban_split": urban_split_deviance,
        "small_area_beats_urban_split": bool(beats),
        "published": "small-area model" if md.lga_offsets is not None else "urban split",
    }
    if md.lga_offsets is not None:
        out["published_model"] = small_area.published_figures(md.lga_offsets, list(SMALL_AREA_COVARIATES))
    return out


def national_trend_figures(survey: pl.DataFrame, geo: Any) -> dict[str, Any]:
    """The national trend's derivation checked against the published national figures."""
    zone_pop = {z: float(v) for z, v in geo.states.group_by("zone").agg(pl.col("population").sum()).iter_rows()}
    state_pop = {c: float(v) for c, v in geo.states.select("state_code", "population").iter_rows()}
    return national_trend.validation_figures(survey, zone_pop, state_pop)


def validation_report(data_dir: Path, geo: Any, md: Any, res: Any, inputs: Inputs | None = None) -> dict[str, Any]:
    """The whole report as a JSON-able dict (see the module docstring)."""
    inputs = Inputs(data_dir, geo) if inputs is None else inputs
    sm = md.season
    return {
        "model_version": model.MODEL_VERSION,
        "score_range_level": model.RANGE_LEVEL,
        "caveats": CAVEATS,
        "seasons": {
            "parameters": sm.params.to_json(),
            "rule": sm.rule,
            "rules_compared": SEASON_RULE_NAMES,
            "parameters_fitted_to_series": sm.fitted_to,
            "check": sm.check,
            "profiles": season_profiles(sm, geo),
        },
        "months": month_validation(md, res),
        "held_out_rounds": [held_out(md, a, b) for a, b in HELD_OUT],
        "map_agreement": map_agreement(md, res, inputs.incidence),
        "lga_comparison": (lga := lga_comparison(md)),
        "lga_small_area": small_area_comparison(md, lga.get("deviance_urban_split")),
        "national_trend": national_trend_figures(inputs.survey, geo),
        "baseline": {
            "random_walk_variance_per_year": _r(res.baseline.q, 4),
            "random_walk_variance_method": res.baseline.q_method,
            "new_survey_design_effect": _r(res.baseline.new_survey_deff, 2),
            "typical_children_per_state_survey": _r(res.baseline.typical_children, 1),
            "rounds": sorted(int(y) for y in md.rounds["survey_year"].unique()),
        },
        "not_validated": NOT_VALIDATED,
    }


def markdown(r: dict[str, Any], command: str) -> str:
    c = r["seasons"]["check"]
    lines = [
        "# Validation report", "", f"Generated by `{command}` (model `{r['model_version']}`).", "",
        "## (a) Seasons, leave-one-archetype-out", "",
        "| series | median r | centre off (months) | best-4-month share error | trough/peak error |",
        "|---|---|---|---|---|",
        f"| {c['series']} | {c['median_correlation']} | {c['mean_centre_months_off']} | "
        f"{c['mean_best_4_month_share_error']} | {c['mean_trough_to_peak_error']} |", "",
        "## (b) Time-held-out survey rounds", "",
        "| trained on | predicts | states | Spearman | RMSE | inside 80 % range | Model 1 Spearman | Model 1 inside its 95 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for h in r["held_out_rounds"]:
        ref = h.get("model_1_reference", {})
        lines.append(f"| <= {h['trained_on_rounds_up_to']} | {h['predicted_round']} | {h['states']} | {h.get('spearman')} | "
                     f"{h.get('rmse')} | {h.get('share_inside_80_range')} | {ref.get('spearman')} | {ref.get('share_inside_95_range')} |")
    lines += ["", "| predicts | Q method | var(z) | inside 80 % | Model 2 var(z) | Model 2 inside 80 % |",
              "|---|---|---|---|---|---|"]
    for h in r["held_out_rounds"]:
        cal, ref2 = h.get("calibration", {}), h.get("model_2_reference", {})
        lines.append(f"| {h['predicted_round']} | {h.get('random_walk_variance_method')} | {cal.get('var_z')} | "
                     f"{h.get('share_inside_80_range')} | {ref2.get('var_z')} | {ref2.get('share_inside_80_range')} |")
    lines += ["", "## (c) Agreement with the MAP-style incidence (a check, not an input)", "",
              "| year | states | Spearman |", "|---|---|---|"]
    lines += [f"| {y['year']} | {y['states']} | {y['spearman']} |" for y in r["map_agreement"]["years"]]
    lines += ["", r["map_agreement"]["note"], "", "## (d) LGAs: leave-one-LGA-out, NDHS 2018", ""]
    lc = r["lga_comparison"]
    lines += [f"`{k}`: {v}" + "  " for k, v in lc.items()]
    lines += ["", "## (a) Seasons by level, leaving whole states out (before: model 2 rule; after: published)", "",
              "| level | rule | n | median r | centre off | trough/peak error | best-4-month share error |",
              "|---|---|---|---|---|---|---|"]
    for level, by_rule in (c.get("levels") or {}).items():
        for rule in ("model_2", r["seasons"]["rule"]):
            s = by_rule.get(rule) or {}
            lines.append(f"| {level} | {rule} | {s.get('series')} | {s.get('median_correlation')} | "
                         f"{s.get('mean_centre_months_off')} | {s.get('mean_trough_to_peak_error')} | "
                         f"{s.get('mean_best_4_month_share_error')} |")
    tests = (r.get("months") or {}).get("tests")
    lines += ["", "## (f) Pre-registered month tests (docs/validation.md)", ""]
    if tests:
        for term in ("a_actual_year_rainfall", "b_rain_anomalies_lags_0_3", "c1_smc_rounds", "c2_llin_campaign_timing"):
            x = tests[term]
            lines.append(f"- `{term}`: better in {x['improved_in']} of {x['states']} held-out states: "
                         f"{'adopted' if x['adopted'] else 'not adopted'}")
    else:
        lines.append(r["months"]["note"])
    lines += ["", "Small-area model (leave one LGA out, every parameter refitted):", ""]
    lines += [f"`{k}`: {v}" + "  " for k, v in r["lga_small_area"].items() if not isinstance(v, dict)]
    lines += ["", "## National survey trend: derivation checked", ""]
    lines += [f"- {c['survey_year']} {c['test']}: published {c['published']}, from zones {c['from_zones']}, "
              f"from states {c['from_states']}" for c in r["national_trend"]["published_vs_population_weighted"]]
    lines += [f"- {a['survey_year']}: {a['note']}" for a in r["national_trend"]["assumed_tests"]]
    lines += ["", "## Not validated", ""] + [f"- {x}" for x in r["not_validated"]] + [""]
    return "\n".join(lines)


@report_command
def main(data_dir: Path, out: Path) -> None:
    """Write reports/validation.md and reports/validation.json."""
    from pipeline.datasets.risk import load_model_data, run_model
    from pipeline.geography import load_geography

    geo = load_geography(data_dir)
    md = load_model_data(data_dir, geo)
    r = validation_report(data_dir, geo, md, run_model(md))
    command = "python -m pipeline.reports.validation --data-dir DATA_DIR --out " + str(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "validation.json").write_bytes(orjson.dumps(r, option=orjson.OPT_INDENT_2) + b"\n")
    (out / "validation.md").write_text(markdown(r, command) + "\n")
    for h in r["held_out_rounds"]:
        click.echo(f"{h['predicted_round']} from <= {h['trained_on_rounds_up_to']}: Spearman {h.get('spearman')}, "
                   f"inside 80% {h.get('share_inside_80_range')}")


if __name__ == "__main__":
    sys.exit(main())
