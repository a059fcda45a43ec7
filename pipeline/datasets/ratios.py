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
from pipeline.model import forecast_cv, hub, skill
from pipeline.site import plots
from pipeline.sources import dated_cases

SKILL_FILE = "docs/skill.json"
SKILL_PLOT = "docs/figures/skill_scorecard.svg"
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


def dated_series(ctx: BuildContext, lgas: dict[str, dict[str, Any]]) -> tuple[skill.CaseSeries, skill.CaseSeries] | None:
    """(LGA series of published LGAs, state series) of the dated counts, or None without them."""
    dated = ctx.inputs.dated_cases
    if dated is None or dated.height == 0:
        return None
    lga_series, state_series = skill.case_series(dated)
    keep = [i for i, c in enumerate(lga_series.codes) if c in lgas]
    return (skill.CaseSeries([lga_series.codes[i] for i in keep], lga_series.state[keep],
                             lga_series.counts[keep], lga_series.first), state_series)


def zones_of(ctx: BuildContext) -> dict[str, str]:
    """Geopolitical zone of each state (the selection rule's unit); each state its own without a geography."""
    geo = getattr(ctx, "geography", None)
    if geo is None:
        return {}
    return dict(zip(geo.states["state_code"].to_list(), geo.states["zone"].to_list(), strict=True))


def _levels(ctx: BuildContext, states: dict[str, dict[str, Any]], lgas: dict[str, dict[str, Any]]
            ) -> list[tuple[str, skill.CaseSeries, np.ndarray, list[str]]] | None:
    """(level, series, published index, season classes) of the LGA and state series; None without them."""
    both = dated_series(ctx, lgas)
    if both is None:
        return None
    out = []
    for level, series, seasons in (("lgas", both[0], lgas), ("states", both[1], states)):
        sea = [seasons[c] for c in series.codes]
        out.append((level, series, index_of(sea), [skill.season_class(s) for s in sea]))
    return out


def run_cvs(ctx: BuildContext, states: dict[str, dict[str, Any]], lgas: dict[str, dict[str, Any]]
            ) -> tuple[dict[str, skill.LevelCV], dict[str, forecast_cv.LevelResult]] | None:
    """(protocol 1's nested CV, protocols 2 and 3's) of both levels on the dated series, or None without them.

    Fits of the dated series and the published season: kept between builds by the content of their
    arguments (pipeline.cache), since a new month of rainfall changes neither. Protocol 2's state level
    takes the LGA level's picks, fold by fold."""
    levels = _levels(ctx, states, lgas)
    if levels is None:
        return None
    zones = zones_of(ctx)
    code1 = cache.code_of("pipeline.model.skill")
    code2 = cache.code_of("pipeline.model.forecast_cv", "pipeline.model.skill")
    p1: dict[str, skill.LevelCV] = {}
    p2: dict[str, forecast_cv.LevelResult] = {}
    for level, series, index, cls in levels:
        p1[level] = cache.call(f"ratios-cv-{level}", code1, skill.level_cv, series, index, cls, local=True)
        p1[level + PRE] = cache.call(f"ratios-pre-{level}", code1, skill.level_cv, series, index, cls,
                                     alphas=skill.ALPHAS_PREREGISTERED, local=True)
        fold_picks = p2["lgas"].fold_picks if level == "states" else None
        p2[level] = cache.call(f"ratios-cv2-{level}", code2, forecast_cv.level_cv, series, index, cls,
                               zones, fold_picks, extra_alphas=skill.ALPHAS, local=True)
    return p1, p2


PRE = "_pre_registered_grid"


def protocol_1_report(cvs: dict[str, skill.LevelCV] | None, alpha: list[float]) -> dict[str, Any]:
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


PROTOCOL = "docs/skill-protocol.md, protocol 3, registered before any result"
METHODS = {
    "published": "what the registered one-count rule chose, made fold by fold (rule, verdicts, fallback and ranges "
                 "from the training states only): what the map's form and a client given one count issue",
    "published_several_months": "what a client given the last k months issues: the several-months rule's k-month "
                                "base where the record carries it, else the one-count forecast, with the "
                                "one-count quantiles (fold by fold)",
    "protocol_2": "protocol 2's rule as a procedure (one rule over all freer candidates, the weak-class fallback "
                  "wherever the class verdict is not true), scored in the same folds",
    "protocol_1": "protocol 1's published method: alpha per horizon chosen from 0.50-2.00, one count",
    "persistence": "the last count carried forward",
    "seasonal_naive": "the count of the same month last year",
    "flat": "the mean of log cases over the last 12 months (past only, no season)",
    "seasonal_adjustment_k1": "season x the deseasonalised last count (Abeku et al. 2002, k = 1; = projected_a1)",
    "seasonal_adjustment_k2": "season x the mean deseasonalised level of the last 2 months (Abeku et al. 2002)",
    "seasonal_adjustment_k3": "season x the mean deseasonalised level of the last 3 months (Abeku et al. 2002)",
    "projected_a1": "the last count x I(m+h) / I(m): the simplest (alpha 1, one count)",
    "projected_alpha": "the last count x (I(m+h) / I(m)) ** alpha_h, alpha chosen in the folds",
    "projected_alpha_class": "as projected_alpha, alpha chosen per season class",
    "seasonal_adjustment_k": "season x the deseasonalised level of the last k months, k chosen in the folds",
}


def versions(ctx: BuildContext, series: skill.CaseSeries, states: dict[str, dict[str, Any]],
             lgas: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, model) version blocks every scorecard row names: digests, not data."""
    import hashlib

    counts = np.nan_to_num(series.counts, nan=-1.0)
    y0, m0 = series.first
    t1 = y0 * 12 + m0 - 1 + series.counts.shape[1] - 1
    data = {"source": dated_cases.DATED_CASES_SOURCE, "months": f"{y0:04d}-{m0:02d}/{t1 // 12:04d}-{t1 % 12 + 1:02d}",
            "digest": hashlib.sha256(counts.tobytes()).hexdigest()[:16]}
    idx = [s["seasonal_index"] for _, s in sorted(states.items())] + [r["seasonal_index"] for _, r in sorted(lgas.items())]
    model = {"season_digest": hashlib.sha256(np.asarray(idx, dtype=float).tobytes()).hexdigest()[:16],
             "season": "the published seasonal_index of /v1/transmission/*", "ratios": "protocol 3"}
    return data, model


def flat_rows(card: dict[str, Any], level: str, data: dict[str, Any], model: dict[str, Any]) -> list[dict[str, Any]]:
    """The scorecard as rows (level x horizon x season class or state x method), each naming data and model."""
    out = []
    for h in card["horizons"]:
        groups = [("all", None, h["all"])]
        groups += [("season_class", c, e) for c, e in h["by_season_class"].items()]
        groups += [("state", s, e) for s, e in h["by_state"].items()]
        for by, key, e in groups:
            for m, sc in e.get("methods", {}).items():
                out.append({"level": level, "months_ahead": h["months_ahead"], "by": by, "group": key, "method": m,
                            "series": e["series"], "origins": e["origins"], "forecasts": e["forecasts"], **sc,
                            "data": data["digest"], "model": model["season_digest"] + "/" + model["ratios"]})
    return out


def _published_block(p: forecast_cv.Published) -> dict[str, Any]:
    return {"picks_by_horizon": p.picks, "alpha_by_class": p.alpha, "base_months_by_horizon": p.base_months,
            "evidence": forecast_cv.evidence(p),
            "quantiles_log_residual": {c: np.round(q, 4).tolist() for c, q in p.q.items()},
            "zone_skill_vs_simplest": [{m: {z: round(float(v), 3) for z, v in d.items()} for m, d in zs.items()}
                                       for zs in p.zone_skill],
            "picks_several_months_by_horizon": p.picks_several_months,
            "zone_skill_several_months_vs_simplest": [{m: {z: round(float(v), 3) for z, v in d.items()}
                                                       for m, d in zs.items()} for zs in p.zone_skill_several_months],
            "pooled_over_classes": [{"months_ahead": h, "beats_persistence": v, "reason": why}
                                    for h, (v, why) in zip(skill.HORIZONS, p.pooled, strict=False)],
            "insufficient_skill": [{"season_class": c, "months_ahead": e["months_ahead"], "reason": e["reason"]}
                                   for c, ev in forecast_cv.evidence(p).items() for e in ev
                                   if e["beats_persistence"] is not True]}


def aims(cards: dict[str, dict[str, Any]], p1: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The issue's aims, before (protocol 2's rule, scored in the same folds; protocol 1 as it published, in
    its own nested CV, beside it) and after (protocol 3's one-count rule; the several-months one beside)."""
    want = {1: 0.08, 2: 0.16, 3: 0.23, 4: 0.28}
    out = []
    lg = {h["months_ahead"]: h for h in cards["lgas"]["horizons"]}
    stt = {h["months_ahead"]: h for h in cards["states"]["horizons"]}
    before = {e["months_ahead"]: e for e in p1["levels"]["lgas"]["horizons"]} if p1 else {}
    for h, aim in want.items():
        m = lg[h]["all"]["methods"]
        pub, p2, sev = m["published"], m[forecast_cv.PROTOCOL_2], m[forecast_cv.SEVERAL]
        weak_m = lg[h]["by_season_class"].get("weak", {}).get("methods", {})
        weak = weak_m.get("published", {})
        sm = stt[h]["all"]["methods"]
        spub, sp2 = sm["published"], sm[forecast_cv.PROTOCOL_2]
        b = before.get(h, {}).get("projected_published", {})
        cov = [pub["coverage_80"], pub["coverage_50"], spub["coverage_80"], spub["coverage_50"]]
        out.append({
            "months_ahead": h,
            "vs_persistence": {"before": p2["skill_vs_persistence"], "after": pub["skill_vs_persistence"],
                               "protocol_1": b.get("skill_vs_persistence"),
                               "several_months": sev["skill_vs_persistence"],
                               "aim": aim, "met": (pub["skill_vs_persistence"] or -9) >= aim},
            "weak_vs_persistence": {"before": weak_m.get(forecast_cv.PROTOCOL_2, {}).get("skill_vs_persistence"),
                                    "after": weak.get("skill_vs_persistence"), "aim": -0.02,
                                    "met": weak.get("skill_vs_persistence") is None
                                    or weak["skill_vs_persistence"] >= -0.02},
            "coverage": {"before_lga_80": p2["coverage_80"],
                         "before": {"lga_80": p2["coverage_80"], "lga_50": p2["coverage_50"],
                                    "state_80": sp2["coverage_80"], "state_50": sp2["coverage_50"]},
                         "several_months": {"lga_80": sev["coverage_80"], "lga_50": sev["coverage_50"],
                                            "state_80": sm[forecast_cv.SEVERAL]["coverage_80"],
                                            "state_50": sm[forecast_cv.SEVERAL]["coverage_50"]},
                         "after": {"lga_80": cov[0], "lga_50": cov[1], "state_80": cov[2], "state_50": cov[3]},
                         "met": all(c is not None for c in cov)
                         and abs(cov[0] - 0.8) <= 0.05 and abs(cov[2] - 0.8) <= 0.05
                         and abs(cov[1] - 0.5) <= 0.05 and abs(cov[3] - 0.5) <= 0.05},
            "vs_seasonal_adjustment_k3": {"published": pub["skill_vs_seasonal_adjustment_k3"],
                                          "before": p2["skill_vs_seasonal_adjustment_k3"],
                                          "several_months": sev["skill_vs_seasonal_adjustment_k3"],
                                          "projected_a1": lg[h]["all"]["methods"]["projected_a1"][
                                              "skill_vs_seasonal_adjustment_k3"]},
        })
    return out


def skill_report(ctx: BuildContext, cv2: dict[str, forecast_cv.LevelResult] | None,
                 pub: dict[str, forecast_cv.Published] | None, p1: dict[str, Any],
                 states: dict[str, dict[str, Any]], lgas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """docs/skill.json: protocol 3's scorecard (summaries only), protocol 2's rule scored beside it in the same
    folds, and protocol 1's report."""
    base: dict[str, Any] = {
        "protocol": PROTOCOL, "methods": METHODS,
        "candidates": {"alpha": list(forecast_cv.ALPHA_GRID), "base_months": list(forecast_cv.K_GRID),
                       "simplest": forecast_cv.SIMPLEST, "freer": list(forecast_cv.FREER),
                       "freer_one_count": list(forecast_cv.ONE_COUNT),
                       "freer_several_months": list(forecast_cv.SEVERAL_MONTHS),
                       "margin_in_every_zone": forecast_cv.MARGIN,
                       "min_states_per_class_claim": forecast_cv.MIN_CLASS_STATES},
        "cross_validation": "doubly nested leave-one-whole-state-out on the dated series: in each outer fold the rules, "
                            "the per-class verdicts (a class from fewer than 3 training states takes the verdict pooled "
                            "over classes), the weak-class fallback (only on a false verdict) and the split-conformal "
                            "quantiles come from the training states' own leave-one-state-out residuals; a published "
                            "claim needs series of its class from 3 states counted over the outer folds",
        "metrics": "skill = 1 - MSE / MSE(reference) on log cases; WIS (five quantiles) and CRPS from the quantiles "
                   "(scoringrules), on log cases; coverage_50 and coverage_80 = share of observed counts inside the "
                   "q25-q75 and q10-q90 intervals",
        "quantile_levels": list(forecast_cv.QUANTILE_LEVELS), "source": dated_cases.DATED_CASES_SOURCE,
        "protocol_1": p1,
    }
    if cv2 is None or pub is None:
        return {**base, "run": False, "reason": "the dated case series are absent from this data load", "levels": {},
                "rows": []}
    data, model = versions(ctx, cv2["lgas"].series, states, lgas)
    cards = {lv: forecast_cv.scorecard(r) for lv, r in cv2.items()}
    rows = [r for lv, c in cards.items() for r in flat_rows(c, lv, data, model)]
    return {**base, "run": True, "data": data, "model": model,
            "published": {lv: _published_block(p) for lv, p in pub.items()},
            "levels": cards, "rows": rows, "aims": aims(cards, p1 if p1.get("run") else None)}


def produce(ctx: BuildContext) -> Produced:
    states, lgas, order, names = published_seasons(ctx.produced)
    both = run_cvs(ctx, states, lgas)
    cvs, cv2 = both if both is not None else (None, None)
    p1_alpha = skill.published_alpha(cvs["lgas"]) if cvs else [1.0] * len(skill.HORIZONS)
    pub = None
    if cv2 is not None:
        pl_ = forecast_cv.published(cv2["lgas"])
        pub = {"lgas": pl_, "states": forecast_cv.published(cv2["states"], {
            forecast_cv.PUBLISHED: pl_.picks, forecast_cv.SEVERAL: pl_.picks_several_months})}
    method = {"description": DESCRIPTION,
              "alpha_by_horizon": pub["lgas"].alpha["moderate"] if pub else [1.0] * len(skill.HORIZONS),
              "alpha_by_class": pub["lgas"].alpha if pub else None,
              "base_months_by_horizon": pub["lgas"].base_months if pub else [1] * len(skill.HORIZONS),
              "forecast_by_horizon": pub["lgas"].picks if pub else None,
              "forecast_several_months_by_horizon": pub["lgas"].picks_several_months if pub else None,
              "quantile_levels": list(forecast_cv.QUANTILE_LEVELS),
              "range": "80 %: low = q10, high = q90", "season_class": "the season's published class where it has one, "
              "else by trough/peak of the index (< 0.50 marked, 0.50-0.70 moderate, >= 0.70 weak)",
              "cross_validated": pub is not None, "scorecard": "/docs/skill.json"}
    source = {"season": "the seasonal_index of /v1/transmission/states and /v1/transmission/lgas",
              "ranges": dated_cases.DATED_CASES_SOURCE + " (summaries of out-of-sample errors only)"}
    st_codes = sorted(states)
    st_pub = pub["states"] if pub else None
    st_cls = [skill.season_class(states[c]) for c in st_codes]
    st_rows = forecast_cv.ratio_rows(index_of([states[c] for c in st_codes]), st_cls, st_pub)
    states_doc: dict[str, Any] = {
        "method": {**method, "evidence": forecast_cv.evidence(st_pub) if st_pub else None},
        "states": [{"state_code": c, "state": names[c], "season_class": cl, **r}
                   for c, cl, recs in zip(st_codes, st_cls, st_rows, strict=True) for r in recs],
        "source": source,
    }
    lg_pub = pub["lgas"] if pub else None
    lga_method = {**method, "evidence": forecast_cv.evidence(lg_pub) if lg_pub else None}
    lga_docs: dict[tuple[str, ...], Any] = {}
    for code in st_codes:
        part = order.get(code, [])
        cls = [skill.season_class(lgas[c]) for c, _ in part]
        rows = forecast_cv.ratio_rows(index_of([lgas[c] for c, _ in part]), cls, lg_pub)
        lga_docs[(code,)] = {
            "state_code": code, "state": names[code], "method": lga_method,
            "lgas": [{"lga_code": c, "lga": n, "season_class": cl, **r}
                     for (c, n), cl, recs in zip(part, cls, rows, strict=True) for r in recs],
            "source": source,
        }
    report = skill_report(ctx, cv2, pub, protocol_1_report(cvs, p1_alpha), states, lgas)
    files = {SKILL_FILE: ("application/json", orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n"),
             SKILL_PLOT: ("image/svg+xml", plots.skill_plot(report).encode())}
    origin = origin_month(getattr(ctx, "updated_at", ""))
    if origin is not None and pub is not None:
        recs = [(r["state_code"], r) for r in states_doc["states"]]
        recs += [(r["lga_code"], r) for d in lga_docs.values() for r in d["lgas"]]
        files[hub.round_path(origin)] = ("text/csv", hub.render_round(hub.round_rows(origin, recs)))
    return Produced(
        dataset="ratios",
        documents={STATES_ROUTE: {(): states_doc}, LGAS_ROUTE: lga_docs},
        files=files,
    )


def origin_month(updated_at: str) -> str | None:
    """The round's origin: the last whole month before the data load (YYYY-MM), None without a date."""
    if len(updated_at) < 7 or not updated_at[:4].isdigit():
        return None
    return hub.month_add(updated_at[:7], -1)
