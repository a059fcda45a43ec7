"""Producer of /v1/transmission/ratios/states and /v1/transmission/ratios/lgas, and docs/skill.json.

The season ratio tables (expected cases(m+h) / cases(m) per area, start month and horizon, with an 80 %
range and whether it beat persistence) and the forecast scorecard, both by the protocol fixed in
docs/skill-protocol.md. Runs after the transmission producer and reads the seasonal index from the
documents it publishes (`published_seasons`): the ratios can never drift from the published season.
Without the dated series the ratios are still published, with null ranges and a null verdict (no
evidence), and the scorecard says it was not run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from pipeline import cache
from pipeline.datasets.base import BuildContext, Produced, Rendered
from pipeline.errors import DatasetUnavailable
from pipeline.model import skill
from pipeline.sources import dated_cases

SKILL_FILE = "docs/skill.json"
STATES_ROUTE = "/v1/transmission/ratios/states"
LGAS_ROUTE = "/v1/transmission/ratios/lgas"
DESCRIPTION = (
    "Expected ratio of reported cases h months after a start month to the cases of the start month, "
    "from the published seasonal index: ratio = (I(start + h) / I(start)) ** alpha_h. Multiply a count "
    "you have (e.g. last month's confirmed cases) by it to project the next 1-4 months. low and high are "
    "the 80 % range from out-of-sample errors of whole-state cross-validation on dated LGA case series, "
    "by horizon and season class. beats_persistence says whether, in that cross-validation, projected "
    "counts beat carrying the count forward for areas of the same season class (null: no evidence). "
    "docs/skill.md has the method and the scorecard."
)


def published_seasons(produced: list[Produced]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]],
                                                        dict[str, list[tuple[str, str]]], dict[str, str]]:
    """(state season by code, LGA record by code, LGAs (code, name) per state in published order,
    state names) from the transmission documents of this build: the one place ratios read a season."""
    docs = {path: {k: _doc(v) for k, v in d.items()} for p in produced for path, d in p.documents.items()
            if path.startswith("/v1/transmission/")}
    if "/v1/transmission/states" not in docs:
        raise DatasetUnavailable("season ratios need the transmission documents")
    states_doc = docs["/v1/transmission/states"][()]
    states = {s["state_code"]: s["season"] for s in states_doc["states"]}
    names = {s["state_code"]: s["state"] for s in states_doc["states"]}
    lgas: dict[str, dict[str, Any]] = {}
    order: dict[str, list[tuple[str, str]]] = {}
    for (code,), d in docs["/v1/transmission/lgas"].items():
        order[code] = [(r["lga_code"], r["lga"]) for r in d["lgas"]]
        for r in d["lgas"]:
            lgas[r["lga_code"]] = r
    return states, lgas, order, names


def _doc(v: Any) -> Any:
    """A document as a dict, also when its producer handed it over already rendered."""
    return orjson.loads(v.json) if isinstance(v, Rendered) else v


def index_of(seasons: list[dict[str, Any]]) -> np.ndarray:
    return np.array([s["seasonal_index"] for s in seasons], dtype=float)


def run_cv(ctx: BuildContext, states: dict[str, dict[str, Any]], lgas: dict[str, dict[str, Any]]
           ) -> dict[str, skill.LevelCV] | None:
    """The nested CV of both levels on the dated series, or None without them."""
    dated = ctx.inputs.dated_cases
    if dated is None or dated.height == 0:
        return None
    lga_series, state_series = skill.case_series(dated)
    keep = [i for i, c in enumerate(lga_series.codes) if c in lgas]
    lga_series = skill.CaseSeries([lga_series.codes[i] for i in keep], lga_series.state[keep],
                                  lga_series.counts[keep], lga_series.first)
    out = {}
    for level, series, seasons in (("lgas", lga_series, lgas), ("states", state_series, states)):
        sea = [seasons[c] for c in series.codes]
        cls = [skill.season_class(s) for s in sea]
        # a fit of the dated series and the published season: kept between builds by the content of its
        # arguments (pipeline.cache), since a new month of rainfall changes neither
        code = cache.code_of("pipeline.model.skill")
        out[level] = cache.call(f"ratios-cv-{level}", code, skill.level_cv, series, index_of(sea), cls, local=True)
        out[level + PRE] = cache.call(f"ratios-pre-{level}", code, skill.level_cv, series, index_of(sea), cls,
                                      alphas=skill.ALPHAS_PREREGISTERED, local=True)
    return out


PRE = "_pre_registered_grid"


def skill_report(cvs: dict[str, skill.LevelCV] | None, alpha: list[float]) -> dict[str, Any]:
    """docs/skill.json: the scorecard of both levels (summaries only), the method and the aims."""
    base = {
        "protocol": "docs/skill-protocol.md (committed before any result)",
        "methods": {
            "projected": "last count x (I(m+h) / I(m)): today's published index as ratios (alpha 1)",
            "projected_published": "last count x (I(m+h) / I(m)) ** alpha_h, alpha chosen in the folds (published)",
            "projected_chosen": "mean of the last k deseasonalised counts x I(m+h) ** alpha ..., alpha and k "
                                "chosen in the folds (candidate, not published)",
            "persistence": "the last count carried forward",
            "flat": "the mean of log cases over the last 12 months (past only, no season)",
            "climatology": "the mean of log cases in the same calendar month of the past years only",
            "api_forecast": "the API's own forecast made of a fixed level x the published season: the area's "
                            "deseasonalised mean over the last 12 months x I(m+h)",
        },
        "candidates": {"alpha": list(skill.ALPHAS), "base_months": list(skill.BASE_MONTHS)},
        "cross_validation": "nested leave-one-whole-state-out on the dated series: candidate choices and range "
                            "quantiles of a held-out state come from the other states only, and the residuals "
                            "pooled for a state's range were each made with choices that did not see their state",
        "metrics": "skill = 1 - MSE / MSE(reference) on log cases, pooled over every forecast of every fold; "
                   "coverage_80 = share of observed counts inside the 80 % range",
        "source": dated_cases.DATED_CASES_SOURCE,
        "published_alpha": alpha,
        "class_thresholds_trough_to_peak": dict(skill.CLASS_THRESHOLDS),
    }
    if cvs is None:
        return {**base, "run": False, "reason": "the dated case series are absent from this data load", "levels": {}}
    levels = {lv: skill.scorecard(cv) for lv, cv in cvs.items() if not lv.endswith(PRE)}
    pre = {lv[: -len(PRE)]: [{"months_ahead": e["months_ahead"], "projected_published": e["projected_published"],
                              "projected_chosen": e["projected_chosen"]}
                             for e in skill.scorecard(cv)["horizons"]]
           for lv, cv in cvs.items() if lv.endswith(PRE)}
    lg = {e["months_ahead"]: e for e in levels["lgas"]["horizons"]}
    aims = []
    for h in skill.HORIZONS:
        want = 0.10 if h == 1 else 0.20
        for name, key, method in (("before", "projected", "projected"),
                                  ("after", "projected_published", "projected_published")):
            e = lg[h][method]
            aims.append({"months_ahead": h, "which": name, "method": key,
                         "skill_vs_persistence": e["skill_vs_persistence"], "aim_vs_persistence": want,
                         "skill_vs_flat": e["skill_vs_flat"], "aim_vs_flat": 0.25,
                         "coverage_80": e["coverage_80"], "aim_coverage": [0.75, 0.85],
                         "met": bool((e["skill_vs_persistence"] or -9) >= want and (e["skill_vs_flat"] or -9) >= 0.25
                                     and e["coverage_80"] is not None and 0.75 <= e["coverage_80"] <= 0.85)})
    return {**base, "run": True, "levels": levels, "aims": aims,
            "pre_registered_grid": {"alpha": list(skill.ALPHAS_PREREGISTERED), "levels": pre,
                                    "published_alpha": skill.published_alpha(cvs["lgas" + PRE])},
            "beats_persistence": {lv: skill.beats_persistence(cvs[lv]) for lv in levels}}


def _rows(seasons: list[dict[str, Any]], alpha: list[float], q: dict[str, Any] | None,
          beats: dict[str, list[bool | None]] | None) -> tuple[list[str], list[list[dict[str, Any]]]]:
    classes = [skill.season_class(s) for s in seasons]
    return classes, skill.ratio_rows(index_of(seasons), classes, alpha, q, beats)


def produce(ctx: BuildContext) -> Produced:
    states, lgas, order, names = published_seasons(ctx.produced)
    cvs = run_cv(ctx, states, lgas)
    alpha = skill.published_alpha(cvs["lgas"]) if cvs else [1.0] * len(skill.HORIZONS)
    method = {"description": DESCRIPTION, "alpha_by_horizon": alpha,
              "range": "80 %", "season_class": "the season's published class where it has one, else by trough/peak "
                                               "of the index (< 0.50 marked, 0.50-0.70 moderate, >= 0.70 weak)",
              "cross_validated": cvs is not None, "scorecard": "/docs/skill.json"}
    source = {"season": "the seasonal_index of /v1/transmission/states and /v1/transmission/lgas",
              "ranges": dated_cases.DATED_CASES_SOURCE + " (summaries of out-of-sample errors only)"}
    st_codes = sorted(states)
    st_cls, st_rows = _rows([states[c] for c in st_codes], alpha,
                            skill.published_quantiles(cvs["states"]) if cvs else None,
                            skill.beats_persistence(cvs["states"]) if cvs else None)
    states_doc = {
        "method": method,
        "states": [{"state_code": c, "state": names[c], "season_class": cl, **r}
                   for c, cl, recs in zip(st_codes, st_cls, st_rows, strict=True) for r in recs],
        "source": source,
    }
    q_l = skill.published_quantiles(cvs["lgas"]) if cvs else None
    b_l = skill.beats_persistence(cvs["lgas"]) if cvs else None
    lga_docs: dict[tuple[str, ...], Any] = {}
    for code in st_codes:
        part = order.get(code, [])
        cls, rows = _rows([lgas[c] for c, _ in part], alpha, q_l, b_l)
        lga_docs[(code,)] = {
            "state_code": code, "state": names[code], "method": method,
            "lgas": [{"lga_code": c, "lga": n, "season_class": cl, **r}
                     for (c, n), cl, recs in zip(part, cls, rows, strict=True) for r in recs],
            "source": source,
        }
    report = skill_report(cvs, alpha)
    return Produced(
        dataset="ratios",
        documents={STATES_ROUTE: {(): states_doc}, LGAS_ROUTE: lga_docs},
        files={SKILL_FILE: ("application/json", orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")},
    )
