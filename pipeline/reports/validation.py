"""The validation report: how the published seasons, scores and ranges fare against data
they were not fitted to. `make build` ships it in every release (docs/validation.json,
quoted by the docs pages); this module's command writes the same report to reports/.

(a) seasons: leave-one-archetype-out over the 22 routine case profiles (from the
    transmission model's check);
(b) time-held-out survey rounds: the baseline refitted on rounds <= 2015 predicts the
    2018 round, on rounds <= 2018 the 2021 round (Spearman, RMSE, share inside the 80 %
    range), beside the Model 1 reference (last round held flat with its "95 %" band);
(c) agreement with the MAP-style incidence table, 2018-2019 only (a check, never an input);
(d) the LGA comparison: leave-one-LGA-out prediction of the NDHS 2018 LGA observations.

    python -m pipeline.reports.validation --data-dir DIR --out reports/
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import numpy as np
import orjson
import polars as pl

from pipeline.model import national_trend, ranges, small_area
from pipeline.model import risk as model
from pipeline.reports import report_command
from pipeline.sources.incidence import read_incidence

HELD_OUT = ((2015, 2018), (2018, 2021))  # (train on rounds up to, predict)
AGREEMENT_YEARS = (2018, 2019)
# Model 1's range for the reference row: the last round held flat, B +- 1.96 sqrt(B(1-B)/150).
MODEL1_N = 150.0
NOT_VALIDATED = [
    "Month-to-month rain anomalies: no term for them, because the data here give no evidence of skill "
    "(rainfall does not explain changes in prevalence between survey rounds); the score's monthly pattern "
    "is the climatological season only.",
    "LGA differences over time: one LGA survey (NDHS 2018, 1-108 children each) sets every LGA's position "
    "within its state; an LGA's own-data part of its published value is not covered by the leave-one-out check.",
    "The season's year-to-year variation: the case profiles are 12-month averages over unstated years.",
    "Months after the last survey: the range widens with time, but no survey after 2021 exists to check it.",
]


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
    figs = small_area.validation_figures(p, n, md.lga_covariates[gi], md.state_idx[gi], adj)
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


def national_trend_figures(data_dir: Path, geo: Any) -> dict[str, Any]:
    """The national trend's derivation checked against the published national figures."""
    from pipeline.sources.names import state_name_codes
    from pipeline.sources.survey import read_survey_positivity

    survey = read_survey_positivity(data_dir, state_name_codes(geo.states))
    zone_pop = {z: float(v) for z, v in geo.states.group_by("zone").agg(pl.col("population").sum()).iter_rows()}
    state_pop = {c: float(v) for c, v in geo.states.select("state_code", "population").iter_rows()}
    return national_trend.validation_figures(survey, zone_pop, state_pop)


def validation_report(data_dir: Path, geo: Any, md: Any, res: Any) -> dict[str, Any]:
    """The whole report as a JSON-able dict (see the module docstring)."""
    sm = md.season
    return {
        "model_version": model.MODEL_VERSION,
        "score_range_level": model.RANGE_LEVEL,
        "seasons": {
            "parameters": sm.params.to_json(),
            "parameters_fitted_to_series": sm.fitted_to,
            "check": sm.check,
        },
        "held_out_rounds": [held_out(md, a, b) for a, b in HELD_OUT],
        "map_agreement": map_agreement(md, res, read_incidence(data_dir, geo.states)),
        "lga_comparison": (lga := lga_comparison(md)),
        "lga_small_area": small_area_comparison(md, lga.get("deviance_urban_split")),
        "national_trend": national_trend_figures(data_dir, geo),
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
