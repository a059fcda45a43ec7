"""Producer of the validation report shipped in every release (docs/validation.json and its plots).

How the published seasons, scores and ranges fare against data they were not fitted to:

(a) seasons, leaving whole states out (pipeline.model.season_cv);
(b) time-held-out survey rounds: the baseline refitted on rounds <= 2015 predicts the
    2018 round, on rounds <= 2018 the 2021 round (Spearman, RMSE, share inside the 80 %
    range), beside the Model 1 reference (last round held flat with its "95 %" band);
(c) agreement with the MAP-style incidence table, 2018-2019 only (a check, never an input);
(d) the LGA comparison: leave-one-LGA-out prediction of the NDHS 2018 LGA observations;
(f) the registered tests of what a month carries, on the dated LGA series, and the score
    against cases month by month (every season in it from the fold that held the state out).

Its own dataset producer, run after the risk and transmission producers: it reuses the risk
model's run for this build (`risk.model_run`). pipeline.reports.validation reads what this
produces (never the other way round). Nothing here feeds back into a published score, and no
value of the dated case series leaves it other than as a summary statistic.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl

from pipeline import cache
from pipeline.datasets import risk
from pipeline.datasets.base import BuildContext, Produced
from pipeline.model import month_tests, national_trend, ranges, small_area
from pipeline.model import risk as model
from pipeline.model.small_area import binomial_deviance
from pipeline.site import plots
from pipeline.sources.inputs import Inputs

VALIDATION_FILE = "docs/validation.json"
SVG = "image/svg+xml"
HELD_OUT = ((2015, 2018), (2018, 2021))  # (train on rounds up to, predict)
AGREEMENT_YEARS = (2018, 2019)
# Model 1's range for the reference row: the last round held flat, B +- 1.96 sqrt(B(1-B)/150).
MODEL1_N = 150.0
NOT_VALIDATED = [
    "Seasons in the states without dated series: the leave-whole-state-out figures estimate that error "
    "from seven states (two far-northern, two middle-belt, two southern, one south-western) and the archetype groups.",
    "LGA differences over time: one LGA survey (NDHS 2018, 1-108 children each) sets every LGA's position "
    "within its state; an LGA's own-data part of its published value is not covered by the leave-one-out check.",
    "The season's year-to-year variation: the case profiles are 12-month averages over unstated years.",
    "Months after the last survey: the baseline holds the last round's level unless a drift passed its registered "
    "check (drift_check), and the range widens with time; no survey after 2021 exists to check either.",
    "The range calibration's constants are fitted across states within a round: a future round whose national "
    "change differs from 2015-2021 is not covered.",
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
    "model_4": "model 4: harmonics of log cases on rain covariates, dated LGAs' residuals pooled by distance",
    "model_5": "model 5: the method chosen by nested whole-state cross-validation among model 4 and three "
               "references (seasons.check.model_5), smoothed, LGAs at their state's season unless LGA "
               "deviations repeat across years",
    "model_6": "model 6: the candidate the registered rule picks in nested whole-state cross-validation among "
               "rain-driven seasons, model 4 and four references (seasons.check.model_6), smoothed, the class "
               "corrected for its out-of-sample bias, LGAs at their state's season unless LGA deviations repeat",
    "model_7": "model 7: the candidate the registered rule picks in nested whole-state cross-validation among "
               "the climate-driven seasons and model 4, the borrowed seasons reported as references "
               "(seasons.check.model_7), smoothed, the class corrected for its out-of-sample bias, LGAs at their "
               "state's season unless LGA deviations repeat",
}
LGA_SAMPLE_PER_STATE = 2  # dated LGAs plotted per state: the first ones by code (not chosen by fit)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho with average ranks for ties."""
    rx = pl.Series(np.asarray(x, dtype=float)).rank("average").to_numpy()
    ry = pl.Series(np.asarray(y, dtype=float)).rank("average").to_numpy()
    return float(np.corrcoef(rx, ry)[0, 1])


def _r(v: float | None, d: int = 3) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), d)


def held_out(md: Any, train_upto: int, target: int, check: Any = None) -> dict[str, Any]:
    """Predict the `target` round of every state from rounds <= `train_upto` only: Q, its
    method (nested choice on those rounds) and the design effects are all refitted there.
    `calibration` is the published (calibrated) range, each state's constants fitted without its
    zone's states (risk.range_check); `uncalibrated` the same range before calibration."""
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
    after = pr.z
    if check is not None and (check.predicted_round == target).any():
        # the calibrated range of each state, with the constants of the fold that held its zone out
        sel = check.predicted_round == target
        after = check.z_after[sel]
        cal = [check.folds[f"{target}|{md.zones[i]}"] for i in check.state_rows[sel]]
        d = np.array([c.drift_per_year for c in cal]) * check.years[sel]
        sd = np.sqrt(np.array([c.var_scale for c in cal]) * check.variance[sel])
        cf = model.fieldwork_factor(md.state_c, target)[check.state_rows[sel]]
        m = model.logit(y / cf) - check.error[sel] + d
        pred = np.clip(model.expit(m) * cf, 0, 1)
        lo = np.clip(model.expit(m - model.Z_RANGE * sd) * cf, 0, 1)
        hi = np.clip(model.expit(m + model.Z_RANGE * sd) * cf, 0, 1)
    ref = predict_round(md, train, obs, target, q_method="pooled", use_design_effect=False, with_season_error=False)
    ref_cal = ranges.calibration(ref.z) if ref is not None else {}
    m3 = predict_round(md, train, obs, target, with_season_error=False)
    m3_cal = ranges.calibration(m3.z) if m3 is not None else {}
    return {
        **out,
        "states": len(rows),
        "random_walk_variance_per_year": _r(pr.baseline.q, 4),
        "random_walk_variance_method": pr.baseline.q_method,
        "cluster_icc": _r(icc, 3),
        "new_survey_design_effect": _r(pr.baseline.new_survey_deff, 2),
        # ranks from the prediction before the drift: the published drift is one constant for every state and
        # changes no rank (the folds' drifts differ only by which zone was left out)
        "spearman": _r(spearman(pr.predicted, y)),
        "rmse": _r(float(np.sqrt(np.mean((pred - y) ** 2)))),
        "share_inside_80_range": _r(float(np.mean((lo <= y) & (y <= hi)))),
        "mean_range_width": _r(float(np.mean(hi - lo))),
        "calibration": ranges.calibration(after),
        "uncalibrated": ranges.calibration(pr.z),
        "without_season_error": {
            "method": "the same range without the season-shape error (model 3's range)",
            "var_z": m3_cal.get("var_z"), "share_inside_80_range": m3_cal.get("share_inside"),
        },
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


def range_calibration(md: Any, check: Any) -> dict[str, Any]:
    """How the range was calibrated, and z before and after per round (after: out of sample, each
    state scored with constants fitted without the states of its zone)."""
    from pipeline.datasets.risk import CALIBRATION_FOLDS

    if check is None:
        return {"note": "no survey round can be predicted from an earlier one in this data load",
                "published": dict.fromkeys(("drift_per_year_logit", "var_scale", "state_rounds"))}
    per_round = []
    for y in sorted({int(v) for v in check.predicted_round}):
        sel = check.predicted_round == y
        per_round.append({"predicted_round": y, "before": ranges.calibration(check.z_before[sel]),
                          "after_out_of_sample": ranges.calibration(check.z_after[sel]),
                          "one_calibration_for_all_rounds": ranges.calibration(check.z_pooled[sel])})
    fold_consts = list(check.folds.values())
    return {
        "method": "each round predicted from the state's earlier rounds; a scale of the predictive variance "
                  "(baseline, new survey and season error together) and, only where the drift passed its "
                  "registered check (drift_check), a drift per year since the state's last round (weighted "
                  "least squares, no intercept), fitted per round on the other zones' states; the published "
                  "range uses the constants of the latest round fitted on every state",
        "tried_and_lost": "one drift and one scale for every round (one_calibration_for_all_rounds): the rounds "
                          "differ, and the 2018 round's var(z) stays above 1.25 out of sample",
        "folds": CALIBRATION_FOLDS,
        "fold_count": len(fold_consts),
        "fold_drift_per_year_range": [_r(min(c.drift_per_year for c in fold_consts), 4),
                                      _r(max(c.drift_per_year for c in fold_consts), 4)],
        "fold_var_scale_range": [_r(min(c.var_scale for c in fold_consts), 4),
                                 _r(max(c.var_scale for c in fold_consts), 4)],
        "published": {**check.published.to_json(), "drift_applied": check.drift_applied},
        "rounds": per_round,
        "aim": "var(z) 0.8-1.25 and |mean z| <= 0.2 for every round, out of sample",
    }


def drift_figures(md: Any, check: Any, incidence: pl.DataFrame | None) -> dict[str, Any]:
    """The registered drift check (docs/range-protocol.md §1) and, beside it as a check only, the MAP-style
    incidence's change after the round before the predicted one (never an input: it decides nothing)."""
    rule = ("the drift is applied only if a build without the newest round predicts it with a mean absolute "
            "logit error lower by at least min_gain than with the level held (docs/range-protocol.md)")
    dc = check.drift if check is not None else None
    if dc is None:
        return {"rule": rule, "applied": False, "note": "fewer than three state rounds: no check, no drift"}
    return {"rule": rule, **dc.to_json(),
            "map_incidence_check_only": map_incidence_trend(md, incidence, dc.predicted_round)}


def map_incidence_trend(md: Any, incidence: pl.DataFrame | None, predicted_round: int) -> dict[str, Any]:
    """Population-weighted national change per year (log scale) of the MAP-style incidence from the round
    before `predicted_round` to the table's last year, and the share of states whose incidence fell."""
    if incidence is None:
        return {"note": "incidence table absent from this data load"}
    earlier = [int(y) for y in md.rounds["survey_year"].unique().to_list() if int(y) < predicted_round]
    if not earlier:
        return {"note": "no round before the predicted one"}
    start, end = max(earlier), int(incidence["year"].cast(pl.Int64).to_numpy().max())
    wide = incidence.filter(pl.col("year").is_in([start, end])).pivot(on="year", index="state_code",
                                                                    values="incidence")
    pop = np.bincount(md.state_idx, weights=md.population, minlength=len(md.state_codes))
    w = dict(zip(md.state_codes, pop.tolist(), strict=True))
    a, b = wide[str(start)].to_numpy(), wide[str(end)].to_numpy()
    ww = np.array([w.get(c, 0.0) for c in wide["state_code"].to_list()])
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    if end <= start or not ok.any():
        return {"note": "no years after the round in the table"}
    national = np.log((ww[ok] * b[ok]).sum() / (ww[ok] * a[ok]).sum()) / (end - start)
    return {"from_year": start, "to_year": end, "states": int(ok.sum()),
            "national_log_change_per_year": _r(float(national), 4),
            "share_of_states_falling": _r(float(np.mean(b[ok] < a[ok])), 3),
            "note": "modelled by others (malaria SOURCES.md §2); reported beside the check, never an input and "
                    "never deciding"}


def rank_range_figures(md: Any, res: Any) -> dict[str, Any]:
    """Per state, how often a random ranking falls inside its LGAs' published rank ranges and whether the
    ranges are published (docs/range-protocol.md §2)."""
    from pipeline.model import evidence

    rule = (f"a state's LGA rank ranges are published only if their coverage ({evidence.RANGE_LEVEL}, nominal) "
            f"exceeds the chance a random ranking falls inside them by at least {evidence.RANK_MARGIN}")
    if res.rank_random_inclusion is None or res.rank_ranges_published is None:
        return {"rule": rule, "states": [], "note": "no rank ranges in this build"}
    n = np.bincount(md.state_idx, minlength=len(md.state_codes))
    rows = [{"state_code": c, "lgas": int(n[i]), "random_inclusion": _r(float(res.rank_random_inclusion[i]), 3),
             "published": bool(res.rank_ranges_published[i])}
            for i, c in sorted(enumerate(res.state_codes), key=lambda x: x[1])]
    return {"rule": rule, "coverage": evidence.RANGE_LEVEL, "coverage_kind": "nominal",
            "margin": evidence.RANK_MARGIN, "random_inclusion_max": round(evidence.RANK_RANDOM_INCLUSION_MAX, 4),
            "withheld_reason": evidence.RANK_RANGE_WITHHELD,
            "states_published": sum(r["published"] for r in rows), "states_judged": len(rows), "states": rows}


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


def _band(profiles: np.ndarray) -> dict[str, list[float]]:
    """Lowest and highest of published profiles (each scaled to peak 1) in every calendar month."""
    scaled = profiles / profiles.max(axis=1, keepdims=True)
    return {"low": _p(scaled.min(axis=0)), "high": _p(scaled.max(axis=0))}


def rain_and_season(sm: Any, geo: Any) -> list[dict[str, Any]]:
    """Per state: its rain climatology (CHIRPS, the population-weighted mean of its LGAs' downscaled
    climatology, mm), the published seasonal index and its peak window: what the season page draws to
    show how each state's season sits against its own rain. All published or public figures; nothing of
    the dated series."""
    from pipeline.datasets import transmission

    lstate = np.array(geo.lgas.sort("lga_code")["state_code"].to_list())
    codes, index, _, _ = sm.aggregate(lstate)
    pop = sm.lga_population if sm.lga_population is not None else np.ones(len(lstate))
    names = dict(zip(geo.states["state_code"], geo.states["state"], strict=True))
    out = []
    for c, ix in zip(codes, index, strict=True):
        rows = lstate == c
        rain = (pop[rows] / pop[rows].sum()) @ sm.lga_rain[rows]
        f = transmission.model5_fields(sm, ix, "state", "states")
        out.append({"state_code": c, "state": names.get(c, c), "rain_mm": [round(float(v), 1) for v in rain],
                    "seasonal_index": [round(float(v), 3) for v in ix], "peak_window": f["peak_window"],
                    "season_class": f["season_class"]})
    return out


def season_profiles(sm: Any, geo: Any) -> dict[str, Any]:
    """The model's seasons of the dated states and a fixed sample of dated LGAs: the out-of-sample
    one (the fold that held the state out) and, for LGAs, the published index. Beside them, for
    recorded data, only what may be published: the band spanned by the archetype case profiles
    (Apache-2.0) whose LGAs lie in the state, or the LGA's own archetype profile. No recorded value
    of the dated series, in any scaling, is carried: its rows may not leave the pipeline."""
    fit = sm.fit
    if fit is None or fit.dated is None:
        return {"states": [], "lgas": [], "note": "dated case series absent from this data load"}
    cv, dated, rule = fit.cv, fit.dated, sm.rule
    names = dict(zip(geo.states["state_code"], geo.states["state"], strict=True))
    states = geo.states.sort("state_code")
    srow = {c: i for i, c in enumerate(states["state_code"].to_list())}
    lga_names = dict(zip(geo.lgas["lga_code"], geo.lgas["lga"], strict=True))
    s = fit.series
    arch = np.flatnonzero(np.array(s.kind) == "archetype")
    area_state = np.array(fit.state_of_area)
    state_rows = []
    dated_states = [c for c in dated.state_codes if c in srow]
    for k, code in enumerate(dated_states):
        row: dict[str, Any] = {"state_code": code, "state": names[code],
                               "out_of_sample": _p(cv.state_pred[rule][k])}
        if "model_3" in cv.state_pred and rule != "model_3":
            row["model_3_out_of_sample"] = _p(cv.state_pred["model_3"][k])
        covering = [a for a in arch if s.weights[a][area_state == code].sum() > 0]
        if covering:
            row["archetype_band"] = _band(s.recorded[covering])
        state_rows.append(row)
    pos = {c: i for i, c in enumerate(sm.lga_codes)}
    lga_rows = []
    srow_of = {n: i for i, n in enumerate(s.names)}
    for code in dated_states:
        for lga in [c for c, st in zip(dated.lga_codes, dated.lga_state, strict=True) if st == code][:LGA_SAMPLE_PER_STATE]:
            i = srow_of.get(lga)
            if i is None:
                continue
            row = {"lga_code": lga, "lga": lga_names.get(lga, lga), "state_code": code,
                   "published": _p(sm.lga_index[pos[lga]]), "out_of_sample": _p(cv.series_pred[rule][i])}
            own = [a for a in arch if s.weights[a][pos[lga]] > 0]
            if own:
                rec = s.recorded[own[0]]
                row["archetype"] = s.names[own[0]]
                row["archetype_profile"] = _p(rec / rec.max())
            lga_rows.append(row)
    return {"states": state_rows, "lgas": lga_rows,
            "note": "out_of_sample: the season predicted by a fit without the state; archetype_band: the lowest and "
                    "highest of the published archetype case profiles covering the state's LGAs in each month; all "
                    "scaled to peak 1. The dated series' own profiles are used for the statistics only and are not "
                    "published."}


def month_validation(md: Any, res: Any) -> dict[str, Any]:
    """(f, g): the registered month-term test (run by the risk producer before it scores, since a term
    enters the score only if it passes) and the score against cases month by month.

    Every season here is the one predicted for the LGA's state by a fit without that state
    (season_cv.leave_state_out), never the published one; `model_3_reference` scores the model-3 season
    rule of the same folds the same way (the before of the model-4 change)."""
    ev = md.months
    if ev is None:
        return {"tests": None, "score_against_cases": [], "note": "dated case series absent from this data load"}
    present = np.isfinite(ev.cases)
    log_score = _held_out_log_score(ev)
    m3 = _model_3_log_score(md, ev)
    out: dict[str, Any] = {
        "tests": ev.tests, "score_against_cases": score_against_cases(ev, log_score),
        "lga_level": lga_month_figures(ev, log_score),
        "forecast_skill": forecast_skill(ev),
        "lga_months": int(np.isfinite(month_tests.outcome(ev.cases)).sum()), "lgas": len(ev.lga_codes),
        "lga_months_with_cases": int(present.sum()),
        "months": f"{ev.t0 // 12}-01 to {(ev.t0 + ev.cases.shape[1] - 1) // 12}-12"}
    if m3 is not None:
        st = score_against_cases(ev, m3)
        out["model_3_reference"] = {
            "season_rule": "model_3", "states": [{k: v for k, v in x.items() if k != "score_over_mean"} for x in st],
            "median_state_r_month_to_month": _median([x["r_month_to_month"] for x in st]),
            "lga_level": lga_month_figures(ev, m3)}
    out["median_state_r_month_to_month"] = _median([x["r_month_to_month"] for x in out["score_against_cases"]])
    return out


def _median(v: list[float | None]) -> float | None:
    x = [a for a in v if a is not None]
    return _r(float(np.median(x))) if x else None


def _model_3_log_score(md: Any, ev: Any) -> np.ndarray | None:
    """The reference with model 3's out-of-sample season in place of model 4's (same baseline, same folds)."""
    cv = md.season.fit.cv if md.season.fit is not None else None
    if cv is None or "model_3" not in cv.area_index or md.season.rule not in cv.area_index:
        return None
    cal = (ev.t0 + np.arange(ev.cases.shape[1])) % 12
    s4, s3 = cv.area_index[md.season.rule][ev.rows], cv.area_index["model_3"][ev.rows]
    log_base = ev.data.reference - np.log(s4[:, cal] / s4.mean(axis=1, keepdims=True))
    return log_base + np.log(s3[:, cal] / s3.mean(axis=1, keepdims=True))


def _held_out_log_score(ev: Any) -> np.ndarray:
    """[L, T] log of the score the model would give each dated LGA-month with its state held out:
    the reference (baseline x out-of-sample season) and, if a term is adopted, that fold's term."""
    log_score = ev.data.reference.copy()
    adopted = ev.tests.get("adopted") or []
    if adopted:
        term = adopted[0]
        f = np.nan_to_num(ev.data.features[term], nan=0.0)
        for code, v in ev.tests[term]["by_state"].items():
            rows = ev.data.state == code
            beta = np.array(v["coefficients"], dtype=float)
            log_score[rows] += np.einsum("k,klt->lt", beta, f[:, rows])
    return log_score


def score_against_cases(ev: Any, log_score: np.ndarray) -> list[dict[str, Any]]:
    """Per dated state, month by month: its LGAs' cases against the held-out score, each LGA over its own
    mean and averaged over the state's LGAs present that month (at least half of them); r of the levels
    and of the month-to-month movement (O1). Only the score's curve and the r values are kept."""
    data = ev.data
    score = np.exp(log_score)
    present = np.isfinite(ev.cases)
    out = []
    for code in sorted(set(data.state.tolist())):
        sel = data.state == code
        cases, sc = ev.cases[sel], score[sel]
        enough = present[sel].sum(axis=0) >= max(1, sel.sum() / 2)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # months no LGA reported: NaN, as intended
            lvl_c = np.nanmean(cases / np.nanmean(cases, axis=1, keepdims=True), axis=0)
            lvl_s = np.nanmean(sc / np.nanmean(sc, axis=1, keepdims=True), axis=0)
            an_c = np.nanmean(month_tests.outcome(cases), axis=0)
            an_s = np.nanmean(month_tests.outcome(np.where(present[sel], sc, np.nan)), axis=0)
        lvl_c[~enough], an_c[~enough] = np.nan, np.nan
        out.append({
            "state_code": code, "months": int(np.isfinite(lvl_c).sum()),
            "r_monthly_level": _r(month_tests.pearson(lvl_c, lvl_s)),
            "r_month_to_month": _r(month_tests.pearson(an_c, an_s)),
            "score_over_mean": [None if not np.isfinite(v) else round(float(v), 2) for v in lvl_s],
        })
    return out


def lga_month_figures(ev: Any, log_score: np.ndarray) -> dict[str, Any]:
    """Median over dated LGAs of each LGA's r between its cases and its held-out score (O1 and levels)."""
    present = np.isfinite(ev.cases)
    score = np.where(present, np.exp(log_score), np.nan)
    y, yhat = month_tests.outcome(ev.cases), month_tests.outcome(score)
    r_m = np.array([month_tests.pearson(a, b) for a, b in zip(y, yhat, strict=True)])
    r_l = np.array([month_tests.pearson(a, b) for a, b in zip(ev.cases, score, strict=True)])
    by_state = {}
    for code in sorted(set(ev.data.state.tolist())):
        rows = ev.data.state == code
        by_state[code] = {"lgas": int(rows.sum()), "median_r_month_to_month": _r(float(np.nanmedian(r_m[rows])))}
    return {"lgas": int(np.isfinite(r_m).sum()), "median_r_month_to_month": _r(float(np.nanmedian(r_m))),
            "median_r_monthly_level": _r(float(np.nanmedian(r_l))), "by_state": by_state}


FORECAST_HORIZONS = (1, 2, 3, 4)


def forecast_skill(ev: Any) -> dict[str, Any]:
    """Skill of h-month forecasts of each dated LGA's cases (log, over its own mean of the previous 12 months),
    against climatology and persistence. The model's forecast is the baseline x the held-out season (no
    month term: no rainfall forecast exists), so its shape equals the season climatology's; the figures say
    how much that is worth. Summaries only: mean squared errors and skill = 1 - MSE / MSE(reference)."""
    cases = ev.cases
    L, T = cases.shape
    logc = np.log(np.where(np.isfinite(cases) & (cases > 0), cases, np.nan))
    season = ev.data.reference  # log score, state held out
    out: dict[str, Any] = {"reference_climatology": "the LGA's mean log cases by calendar month over the other years",
                           "reference_persistence": "the last month seen, carried forward",
                           "model": "baseline x season from the fold without the state, scaled to the last 12 months",
                           "horizons": []}
    cal = (ev.t0 + np.arange(T)) % 12
    for h in FORECAST_HORIZONS:
        err_m, err_c, err_p = [], [], []
        for t in range(12, T - h):
            past = logc[:, t - 11:t + 1]
            ok_past = np.isfinite(past).sum(axis=1) >= 9
            target = logc[:, t + h]
            level = np.nanmean(past, axis=1)
            # the model: its season's shape, anchored on the last 12 months' level
            pred_m = level + season[:, t + h] - np.nanmean(season[:, t - 11:t + 1], axis=1)
            # climatology: the same calendar month in the other years, anchored the same way
            same = np.where(cal == cal[t + h])[0]
            same = same[same != t + h]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # an LGA without that month in other years
                clim_m = np.nanmean(logc[:, same], axis=1) - np.nanmean(logc, axis=1) + level
            pers = logc[:, t]
            ok = ok_past & np.isfinite(target) & np.isfinite(pers) & np.isfinite(clim_m)
            err_m += list((pred_m - target)[ok] ** 2)
            err_c += list((clim_m - target)[ok] ** 2)
            err_p += list((pers - target)[ok] ** 2)
        mse_m, mse_c, mse_p = (float(np.mean(e)) if e else float("nan") for e in (err_m, err_c, err_p))
        out["horizons"].append({"months_ahead": h, "lga_months": len(err_m), "mse_model": _r(mse_m, 4),
                                "mse_climatology": _r(mse_c, 4), "mse_persistence": _r(mse_p, 4),
                                "skill_vs_climatology": _r(1 - mse_m / mse_c), "skill_vs_persistence": _r(1 - mse_m / mse_p)})
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


def _t(check: dict[str, Any], rule: str, level: str, key: str) -> Any:
    return ((check.get("timing") or {}).get(rule) or {}).get(level, {}).get(key)


def targets(seasons_check: dict[str, Any], months: dict[str, Any], rounds: list[dict[str, Any]],
            rule: str) -> dict[str, Any]:
    """The model's targets, before (model 3's season rule and range, same folds) and after (this release),
    each with whether it is met: the one place the docs' counts come from."""
    c = seasons_check
    m3 = months.get("model_3_reference") or {}
    rows: list[dict[str, Any]] = []

    def add(key: str, measure: str, aim: str, before: Any, after: Any, met: bool | None) -> None:
        rows.append({"key": key, "measure": measure, "aim": aim, "model_3": before, "model_4": after, "met": met})

    def ok(v: Any, test: Any) -> bool | None:
        return None if v is None else bool(test(v))

    r4 = _t(c, rule, "states", "median_shape_r")
    add("state_shape_r", "state shape r, median", ">= 0.85", _t(c, "model_3", "states", "median_shape_r"), r4,
        ok(r4, lambda v: v >= 0.85))
    n = _t(c, rule, "states", "profiles")
    k, e = _t(c, rule, "states", "peak_within_1_month"), _t(c, rule, "states", "mean_signed_peak_error")
    add("peak_month", "peak month within 1 month of the 3-month smoothed recorded profile (mean signed error)",
        ">= 5 of 6 states; mean signed error within +-0.5",
        {"within_1_month": _t(c, "model_3", "states", "peak_within_1_month"), "states": n,
         "mean_signed_error": _t(c, "model_3", "states", "mean_signed_peak_error")},
        {"within_1_month": k, "states": n, "mean_signed_error": e},
        None if k is None or e is None or not n else bool(k >= n - 1 and abs(e) <= 0.5))
    tp = _t(c, rule, "states", "mean_trough_to_peak_error")
    add("trough_to_peak", "trough/peak error, mean", "<= 0.08", _t(c, "model_3", "states", "mean_trough_to_peak_error"),
        tp, ok(tp, lambda v: v <= 0.08))
    sm = months.get("median_state_r_month_to_month")
    add("state_month_to_month_r", "state month-to-month r, median", ">= 0.75",
        m3.get("median_state_r_month_to_month"), sm, ok(sm, lambda v: v >= 0.75))
    ls = _t(c, rule, "lgas", "median_shape_r")
    add("lga_shape_r", "LGA shape r, median", ">= 0.72", _t(c, "model_3", "lgas", "median_shape_r"), ls,
        ok(ls, lambda v: v >= 0.72))
    lm = (months.get("lga_level") or {}).get("median_r_month_to_month")
    add("lga_month_to_month_r", "LGA month-to-month r, median", ">= 0.55",
        (m3.get("lga_level") or {}).get("median_r_month_to_month"), lm, ok(lm, lambda v: v >= 0.55))
    for h in rounds:
        # before: the uncalibrated range (model 4's); after: calibrated, out of sample (leave zones out)
        v = (h.get("calibration") or {}).get("var_z")
        add(f"var_z_{h['predicted_round']}", f"80 % range var(z), {h['predicted_round']} round", "0.8-1.25",
            (h.get("uncalibrated") or {}).get("var_z"), v, ok(v, lambda x: 0.8 <= x <= 1.25))
        mz = (h.get("calibration") or {}).get("mean_z")
        add(f"mean_z_{h['predicted_round']}", f"80 % range mean z, {h['predicted_round']} round", "|mean z| <= 0.2",
            (h.get("uncalibrated") or {}).get("mean_z"), mz, ok(mz, lambda x: abs(x) <= 0.2))
    judged = [x for x in rows if x["met"] is not None]
    return {"rows": rows, "met": sum(bool(x["met"]) for x in judged), "judged": len(judged), "listed": len(rows),
            "missed": "; ".join(x["measure"] for x in judged if not x["met"]) or "none",
            "not_judged": "; ".join(x["measure"] for x in rows if x["met"] is None) or "none"}


MODEL_5_METHODS = ("model_4", "national_mean", "latitude_band", "archetype", "model_4_latitude_pooling", "rain_crude",
                   "rain_kernel", "rain_kernel_no_temperature", "rain_blend", "rain_onset", "selection")
# (key, measure, aim, level, figure key, of key (a count "k of n"), test on the value)
MODEL_5_AIMS: tuple[tuple[str, str, str, str, str, str | None, Any], ...] = (
    ("state_shape_r", "state shape r, median", ">= 0.85", "states", "median_shape_r", None, lambda v: v >= 0.85),
    ("peak_marked", "peak within 1 month, states with a marked recorded season", "all", "states",
     "marked_peak_within_1_month", "marked_states", None),
    ("peak_not_weak", "peak within 1 month, states whose recorded season is not weak (added: no state is marked)",
     "all", "states", "not_weak_peak_within_1_month", "not_weak_states", None),
    ("peak_all", "peak within 1 month, all states", "-", "states", "peak_within_1_month", "profiles", None),
    ("mean_signed_peak_error", "mean signed peak error, states (months; + late)", "within +-0.5", "states",
     "mean_signed_peak_error", None, lambda v: abs(v) <= 0.5),
    ("weak_flagged_states", "states with recorded trough/peak >= 0.70 flagged weak", "all", "states",
     "recorded_weak_flagged_weak", "recorded_weak", None),
    ("weak_flagged_lgas", "LGAs with recorded trough/peak >= 0.70 flagged weak", "all", "lgas",
     "recorded_weak_flagged_weak", "recorded_weak", None),
    ("window_states", "80 % peak window holds the recorded smoothed peak, share of states", "0.70-0.90", "states",
     "peak_window_coverage", None, lambda v: 0.7 <= v <= 0.9),
    ("window_lgas", "80 % peak window holds the recorded smoothed peak, share of LGAs", "0.70-0.90", "lgas",
     "peak_window_coverage", None, lambda v: 0.7 <= v <= 0.9),
    ("lga_shape_r", "LGA shape r, median", ">= 0.72", "lgas", "median_shape_r", None, lambda v: v >= 0.72),
    ("lga_month_to_month_r", "LGA month-to-month r (log ratio of consecutive months), median", ">= 0.55", "lgas",
     "median_month_to_month_r", None, lambda v: v >= 0.55),
    ("state_month_to_month_r", "state month-to-month r (log ratio of consecutive months), median", "-", "states",
     "median_month_to_month_r", None, None),
    ("trough_to_peak", "trough/peak error, states, mean absolute (smoothed against smoothed)", "<= 0.05", "states",
     "mean_trough_to_peak_error", None, lambda v: v <= 0.05),
    ("trough_to_peak_signed", "trough/peak error, states, mean signed (predicted - recorded; - too peaked)",
     "no sign bias (within +-0.02)", "states", "mean_signed_trough_to_peak_error", None, lambda v: abs(v) <= 0.02),
    ("start_error", "season start error, states, mean absolute (months)", "-", "states", "mean_abs_start_error",
     None, None),
    ("best_4_start_error", "best-4-month start error, states, mean absolute (months)", "-", "states",
     "mean_abs_best_4_start_error", None, None),
)


def model_5_aims(check: dict[str, Any]) -> dict[str, Any]:
    """The issue's aims for every model-5 candidate, the selection and the published method, from the outer
    folds of the nested whole-state cross-validation on the dated (development) states; summaries only.
    Same keys in every release (null without dated series)."""
    m5 = check.get("model_5") or {}
    methods = m5.get("methods") or {}
    published = m5.get("published_method")
    rows: dict[str, Any] = {}
    for key, measure, aim, level, fig, of, test in MODEL_5_AIMS:
        row: dict[str, Any] = {"measure": measure, "aim": aim}
        for m in MODEL_5_METHODS:
            lv = (methods.get(m) or {}).get(level) or {}
            v, n = lv.get(fig), (lv.get(of) if of else None)
            row[m] = None if v is None else (f"{v} of {n}" if of else v)
        pv = ((methods.get(published) or {}).get(level) or {}) if published else {}
        v, n = pv.get(fig), (pv.get(of) if of else None)
        row["published"] = None if v is None else (f"{v} of {n}" if of else v)
        if v is None or aim == "-":
            row["met"] = None
        elif of:
            row["met"] = None if not n else bool(v == n)
        else:
            row["met"] = bool(test(v))
        rows[key] = row
    judged = [r for r in rows.values() if r["met"] is not None]
    return {"label": "cross-validation on the seven dated (development) states: nested, whole states left out",
            "class_sources": model_5_class_sources(m5, published),
            "published_method": published, "release_method": m5.get("release_method"),
            "release_hyperparameters": ", ".join(str(v) for v in m5.get("release_hyperparameters") or []) or None,
            "release_at_grid_edge": m5.get("release_at_grid_edge"),
            "publishable_methods": ", ".join(m5.get("publishable_methods") or []) or None,
            "rows": rows, "met": sum(bool(r["met"]) for r in judged), "judged": len(judged),
            "missed": "; ".join(r["measure"] for r in judged if not r["met"]) or "none"}


CLASS_SOURCE_ROWS = ("method", "archetype", "larger", "mean", "chosen")


def model_5_class_sources(m5: dict[str, Any], published: str | None) -> dict[str, Any]:
    """Protocol amendment 4: the published method's outer-fold weak flags (hits among areas with recorded
    trough/peak >= 0.70, false alarms among the others) and window coverage for every candidate class
    amplitude and for the source each outer fold's inner procedure chose ("chosen": the procedure's own
    out-of-sample figure); the source the release uses. Same keys in every release (null without dated series)."""
    cs = (m5.get("class_source") or {})
    figs = (((m5.get("methods") or {}).get(published) or {}).get("class_sources") or {}) if published else {}

    def count(x: dict[str, Any], k: str, n: str) -> str | None:
        return None if x.get(k) is None else f"{x[k]} of {x[n]}"

    rows = {}
    for src in CLASS_SOURCE_ROWS:
        f = figs.get(src) or {}
        rows[src] = {lv: {"weak_flagged": count(f.get(lv) or {}, "recorded_weak_flagged_weak", "recorded_weak"),
                          "false_weak": count(f.get(lv) or {}, "recorded_not_weak_flagged_weak", "recorded_not_weak"),
                          "peak_window_coverage": (f.get(lv) or {}).get("peak_window_coverage")}
                     for lv in ("states", "lgas")}
    per_fold = (((m5.get("methods") or {}).get(published) or {}).get("class_source_per_fold") or []) if published else []
    return {"rows": rows, "release": cs.get("release"),
            "release_inner_weak_balanced_accuracy": cs.get("release_inner_weak_balanced_accuracy"),
            "chosen_per_fold": ", ".join(str(x.get("source")) for x in per_fold) or None}


TIMING_KEYS = ("profiles", "median_shape_r", "peak_within_1_month", "mean_signed_peak_error", "mean_abs_peak_error",
               "mean_signed_start_error", "mean_signed_centre_error", "mean_trough_to_peak_error",
               "mean_best_4_share_error")
TERM_KEYS = ("states_gaining_at_least_0_03", "pooled_gain_month_to_month", "pooled_gain_anomaly",
             "dry_month_mean_effect", "dry_month_max_effect", "meets_minimum_effect", "plausible", "adopted")


def page_figures(check: dict[str, Any], months: dict[str, Any], rule: str) -> dict[str, Any]:
    """The figures the documentation quotes, with the same keys in every release (null where the data load
    lacks what they need), so a page never names a figure that is absent."""
    timing = check.get("timing") or {}
    err = check.get("season_error") or {}
    tests = months.get("tests") or {}
    fs = {h["months_ahead"]: h for h in (months.get("forecast_skill") or {}).get("horizons", [])}
    from pipeline.model.month_tests import TERMS

    def interval(x: dict[str, Any], k: str) -> str | None:
        v = x.get(k)
        return None if not v or v[0] is None else f"{v[0]} to {v[1]}"

    return {
        "timing": {r: {lv: {k: ((timing.get(r) or {}).get(lv) or {}).get(k) for k in TIMING_KEYS}
                       for lv in ("states", "lgas")} for r in dict.fromkeys(("model_3", "model_4", "model_5", "model_6", "model_7", rule))},
        "season_error": {lv: {k: (err.get(lv) or {}).get(k) for k in ("log_sd", "share_inside",
                                                                       "lowest_month_share_inside", "months_below_0_7")}
                         for lv in ("states", "lgas", "archetype_groups")},
        "month_terms": {t: {**{k: (tests.get(t) or {}).get(k) for k in TERM_KEYS},
                            "interval_month_to_month": interval(tests.get(t) or {}, "pooled_gain_month_to_month_interval"),
                            "interval_anomaly": interval(tests.get(t) or {}, "pooled_gain_anomaly_interval")}
                        for t in TERMS},
        "month_terms_adopted": (", ".join(tests.get("adopted") or []) or "none") if tests else None,
        "forecast_skill": {f"h{h}": {k: (fs.get(h) or {}).get(k) for k in ("skill_vs_climatology", "skill_vs_persistence",
                                                                            "lga_months")}
                           for h in FORECAST_HORIZONS},
        "median_state_r_month_to_month": months.get("median_state_r_month_to_month"),
        "median_lga_r_month_to_month": (months.get("lga_level") or {}).get("median_r_month_to_month"),
        "lgas": months.get("lgas"), "lga_months": months.get("lga_months"),
    }


def season_model_figures(sm: Any) -> dict[str, Any]:
    """The published season's fit, with the same keys whether or not it was fitted (null when not)."""
    h = sm.harmonic.to_json() if sm.harmonic is not None else {}
    c = sm.check or {}
    return {"rule": sm.rule, "series": sm.fitted_to, "archetype_series": c.get("archetype_series"),
            "dated_lga_series": c.get("dated_lga_series"), "folds": c.get("folds"),
            "pooling_range_km": h.get("pooling_range_km"), "pooling_shrink": h.get("pooling_shrink"),
            "dated_lgas_pooled": h.get("dated_lgas_pooled"), "ridge": h.get("ridge"),
            "lowest_published_lga_month": round(float(sm.lga_index.min()), 3)}


SEASON_MODEL_KEYS = ("rule", "series", "archetype_series", "dated_lga_series", "folds", "pooling_range_km",
                     "pooling_shrink", "dated_lgas_pooled", "ridge", "lowest_published_lga_month")


def quotable_skeleton() -> dict[str, Any]:
    """The report's quotable blocks (`targets`, `page`) with every figure null: what a page may quote
    even in a release without the validation dataset (each then reads as not in this release)."""
    rounds = [{"predicted_round": b} for _, b in HELD_OUT]
    return {"targets": targets({}, {}, rounds, "model_5"),
            "page": {**page_figures({}, {}, "model_5"), "season_model": dict.fromkeys(SEASON_MODEL_KEYS),
                     "model_5": model_5_aims({})},
            "range_calibration": {"published": dict.fromkeys(("drift_per_year_logit", "var_scale", "state_rounds"))},
            "drift_check": {**dict.fromkeys(("predicted_round", "states", "drift_per_year", "mae_held", "mae_drift",
                                             "mae_gain", "min_gain", "bias_held", "bias_drift", "log_score_held",
                                             "log_score_drift", "applied")),
                            "map_incidence_check_only": dict.fromkeys((
                                "from_year", "to_year", "national_log_change_per_year", "share_of_states_falling"))},
            "rank_ranges": dict.fromkeys(("coverage", "margin", "states_published", "states_judged",
                                          "withheld_reason"))}


def validation_report(data_dir: Path, geo: Any, md: Any, res: Any, inputs: Inputs | None = None) -> dict[str, Any]:
    """The whole report as a JSON-able dict (see the module docstring)."""
    inputs = Inputs(data_dir, geo) if inputs is None else inputs
    sm = md.season
    return {
        "model_version": res.model_version,
        "score_range_level": model.RANGE_LEVEL,
        "caveats": CAVEATS,
        "seasons": {
            "parameters": sm.params.to_json(),
            "rule": sm.rule,
            "rules_compared": SEASON_RULE_NAMES,
            "parameters_fitted_to_series": sm.fitted_to,
            "check": sm.check,
            "profiles": season_profiles(sm, geo),
            "rain_and_season": rain_and_season(sm, geo),
        },
        "months": (months := month_validation(md, res)),
        "held_out_rounds": (rounds := [held_out(md, a, b, res.range_check) for a, b in HELD_OUT]),
        "range_calibration": range_calibration(md, res.range_check),
        "drift_check": drift_figures(md, res.range_check, inputs.incidence),
        "rank_ranges": rank_range_figures(md, res),
        "targets": targets(sm.check, months, rounds, sm.rule),
        "page": {**page_figures(sm.check, months, sm.rule), "season_model": season_model_figures(sm),
                 "model_5": model_5_aims(sm.check)},
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




def produce(ctx: BuildContext) -> Produced:
    md, res = risk.model_run(ctx)
    report = validation_report(ctx.data_dir, ctx.geography, md, res, ctx.inputs)
    files = {VALIDATION_FILE: ("application/json", orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")}
    for name, svg in plots.validation_plots(report).items():
        files[f"docs/figures/{name}"] = (SVG, svg.encode())
    return Produced(dataset="validation", documents={}, files=files)
