"""Producer for /v1/periods, /v1/risk/* and /v1/forecasts/* (SPEC 2.1-2.4).

Reads which months have recorded rainfall (they define the estimated months), the survey
rounds and the seasonal index of every LGA (the transmission producer's fitted model),
runs the baseline model for every state over one monthly grid, multiplies by the season
and shapes the documents. Ordering within a report is highest score first; equal
(rounded) scores are ordered by state_code / lga_code ascending, so the order is total
and stable across builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from pipeline.datasets import months as month_terms
from pipeline.datasets.base import BuildContext, Produced
from pipeline.datasets.transmission import SeasonModel, season_model
from pipeline.errors import InputError
from pipeline.model import risk as model
from pipeline.sources.inputs import Inputs
from pipeline.sources.names import state_code_for

if TYPE_CHECKING:
    from pipeline.geography import Geography

FIRST_PERIOD = "2018-01"
GRID_START = "2010-01"  # the first survey round with state or zone values
DECIMALS = 4
LGA_POSITIVITY_YEAR = 2018


def month_index(period: str) -> int:
    return int(period[:4]) * 12 + int(period[5:7]) - 1


def period_of(index: int) -> str:
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


@dataclass(frozen=True)
class ModelData:
    """Everything the model needs, as aligned arrays (rows = geo.lgas order)."""

    periods: list[str]  # consecutive recorded months from FIRST_PERIOD, oldest first
    provisional: np.ndarray  # [T] bool
    state_idx: np.ndarray  # [n_lga] index into state_codes
    state_codes: list[str]
    lga_codes: list[str]  # geo.lgas order
    zones: list[str]  # per state
    population: np.ndarray  # [n_lga] float
    is_urban: np.ndarray  # [n_lga] bool
    rounds: pl.DataFrame  # state_code, survey_year, positivity, test, children
    zone_rounds: pl.DataFrame  # area, survey_year, positivity (microscopy)
    urban_ratio: float
    urban_ratio_year: int
    lga_c: np.ndarray  # [n_lga, 12] seasonal index rescaled to mean 1
    state_c: np.ndarray  # [n_states, 12] population-weighted mean of its LGAs' c
    season: SeasonModel
    rain_factor: np.ndarray  # [n_lga, len(periods)] the adopted rain term's multiplier (1 without it)
    months: month_terms.MonthEvidence | None  # the pre-registered tests on the dated series, or None
    rain_source: str
    lga_positivity: pl.DataFrame | None  # NDHS 2018 per-LGA observations with lga_code, or None


def state_monthly_codes(state: pl.DataFrame, geo: Geography) -> pl.DataFrame:
    out = state.join(geo.states.select("ocha_pcode", "state_code"), on="ocha_pcode", how="left")
    if out["state_code"].null_count():
        bad = sorted(out.filter(pl.col("state_code").is_null())["ocha_pcode"].unique())
        raise InputError("recorded rainfall", f"unknown state p-code(s) {bad}")
    return out


def recorded_months(state: pl.DataFrame, n_states: int) -> list[str]:
    """Consecutive months up to the last one recorded for EVERY state, from FIRST_PERIOD.

    A month missing for some state would make `last_estimated` claim a month that is
    not recorded everywhere, so the series is cut at the first such gap."""
    counts = state.group_by("period").agg(pl.col("state_code").n_unique().alias("n")).sort("period")
    full = counts.filter(pl.col("n") == n_states)["period"].to_list()
    if not full:
        raise InputError("recorded rainfall", "no month is recorded for every state")
    idx = sorted(month_index(p) for p in full)
    last = idx[-1]
    start = last
    have = set(idx)
    while start - 1 in have:
        start -= 1
    first = month_index(FIRST_PERIOD)
    if start > first:
        raise InputError(
            "recorded rainfall",
            f"recorded months for every state run only from {period_of(start)}; need {FIRST_PERIOD} onward",
        )
    return [period_of(i) for i in range(first, last + 1)]


def survey_children(rounds: pl.DataFrame, survey: pl.DataFrame, lga_pos: pl.DataFrame | None,
                    states: pl.DataFrame) -> pl.DataFrame:
    """Add `children` (tested, per state and round): the survey table's count where it has
    one, else the sum over the NDHS 2018 LGA file for 2018; null where unknown."""
    known = (
        survey.filter(pl.col("level") == "state", pl.col("children_tested").is_not_null())
        .group_by("state_code", "survey_year").agg(pl.col("children_tested").max().alias("n_table"))
    )
    out = rounds.join(known, on=["state_code", "survey_year"], how="left")
    if lga_pos is not None:
        codes = {n: state_code_for(n, states) for n in lga_pos["state"].unique()}
        per_state = (
            lga_pos.with_columns(pl.col("state").replace_strict(codes, default=None).alias("state_code"))
            .group_by("state_code").agg(pl.col("children").sum().alias("n_lga"))
            .with_columns(pl.lit(LGA_POSITIVITY_YEAR, dtype=pl.Int64).alias("survey_year"))
        )
        out = out.join(per_state, on=["state_code", "survey_year"], how="left")
    else:
        out = out.with_columns(pl.lit(None, dtype=pl.Int64).alias("n_lga"))
    return out.with_columns(pl.coalesce("n_table", "n_lga").cast(pl.Int64).alias("children")).drop("n_table", "n_lga")


def zone_rounds(survey: pl.DataFrame) -> pl.DataFrame:
    """Zone microscopy values (area, survey_year, positivity): used only to estimate the
    random-walk variance when the states have too few consecutive rounds."""
    return (
        survey.filter(pl.col("level") == "zone", pl.col("test") == model.PREFERRED_TEST)
        .group_by("area", "survey_year").agg(pl.col("positivity").mean())
        .sort("area", "survey_year")
    )


def load_model_data(data_dir: Path, geo: Geography, inputs: Inputs | None = None) -> ModelData:
    inputs = Inputs(data_dir, geo) if inputs is None else inputs
    rec = inputs.recorded_rainfall
    state = state_monthly_codes(rec.state, geo)
    periods = recorded_months(state, geo.states.height)
    prov = dict(state.filter(pl.col("period").is_in(periods)).group_by("period").agg(pl.col("provisional").any()).iter_rows())
    if rec.lga is not None:
        for p, v in rec.lga.filter(pl.col("period").is_in(periods)).group_by("period").agg(pl.col("provisional").any()).iter_rows():
            prov[p] = bool(prov.get(p, False) or v)
    provisional = np.array([bool(prov.get(p, False)) for p in periods])

    lgas = geo.lgas
    state_codes = geo.states["state_code"].to_list()
    survey = inputs.survey
    rounds = model.state_rounds(survey, state_codes)
    missing = sorted(set(state_codes) - set(rounds["state_code"]))
    if missing:
        raise InputError("survey positivity", f"no positivity for state(s) {missing}")
    try:
        ratio, ratio_year = model.urban_rural_ratio(survey)
    except ValueError as e:
        raise InputError("survey positivity", str(e)) from None
    lga_pos = inputs.lga_positivity
    rounds = survey_children(rounds, survey, lga_pos, geo.states)

    sm = season_model(Path(data_dir), geo, inputs)
    pos = {c: i for i, c in enumerate(sm.lga_codes)}
    rows = np.array([pos[c] for c in lgas["lga_code"].to_list()])
    lga_c = model.season_factor(sm.lga_index[rows])
    evidence = month_terms.month_evidence(inputs, geo, sm)
    factor = np.ones((len(rows), len(periods)))
    if evidence is not None and evidence.rain_beta is not None:
        factor = month_terms.rain_factor(inputs, geo, sm, evidence.rain_beta, [month_index(p) for p in periods])[rows]
    s_pos = {c: i for i, c in enumerate(state_codes)}
    state_idx = lgas["state_code"].replace_strict(s_pos, return_dtype=pl.Int64).to_numpy()
    population = lgas["population"].cast(pl.Float64).to_numpy()
    state_c = model.aggregate(lga_c, state_idx, population, len(state_codes))
    if lga_pos is not None:
        from pipeline.sources.names import hbhi_lga_codes

        lga_pos = lga_pos.join(
            hbhi_lga_codes(lga_pos.select("lga", "state"), geo, source="NDHS 2018 LGA positivity"),
            on="lga", how="inner",
        )
    return ModelData(
        periods=periods,
        provisional=provisional,
        state_idx=state_idx,
        state_codes=state_codes,
        lga_codes=lgas["lga_code"].to_list(),
        zones=geo.states["zone"].to_list(),
        population=population,
        is_urban=lgas["is_urban"].to_numpy().astype(bool),
        rounds=rounds,
        zone_rounds=zone_rounds(survey),
        urban_ratio=ratio,
        urban_ratio_year=ratio_year,
        lga_c=lga_c,
        state_c=state_c,
        season=sm,
        rain_factor=factor,
        months=evidence,
        rain_source=rec.source,
        lga_positivity=lga_pos,
    )


def fit_baseline(md: ModelData, rounds: pl.DataFrame, last_month: int) -> model.Baseline:
    """The state baselines from `rounds` on the grid GRID_START..last_month.

    The random-walk variance comes from consecutive rounds of the same state; with fewer
    than MIN_PAIRS of them (a data load with one state round), from the zone rounds.
    """
    t0 = month_index(GRID_START)
    obs = model.observations(rounds, md.state_codes, md.state_c, t0, last_month)
    d, v, yrs = model.state_pairs(obs)
    if d.size < model.MIN_PAIRS:
        d, v, yrs = zone_pairs(md, int(rounds["survey_year"].to_numpy().max()), obs.typical_children)
    return model.smooth(obs, model.random_walk_variance(d, v, yrs))


def zone_pairs(md: ModelData, upto_year: int, typical: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Consecutive-round differences of zone logits up to `upto_year`; a zone's sample is
    taken as its number of states times a state's."""
    zr = md.zone_rounds.filter(pl.col("survey_year") <= upto_year)
    per_zone = {z: md.zones.count(z) for z in set(md.zones)}
    d, v, yrs = [], [], []
    for (zone,), g in zr.group_by("area", maintain_order=True):
        y = g["survey_year"].to_numpy()
        p = g["positivity"].to_numpy()
        if len(y) < 2:
            continue
        z = model.logit(p)
        var = model.binomial_logit_var(p, typical * max(per_zone.get(zone, 1), 1))
        d += list(np.diff(z))
        v += list(var[1:] + var[:-1])
        yrs += list(np.diff(y).astype(float))
    return np.array(d), np.array(v), np.array(yrs)


def lga_scores(md: ModelData, base: model.Baseline, months: list[int]) -> model.Scores:
    """LGA scores for month indices: urban-split state baseline range x the LGA's c x, in an
    estimated month, the adopted rain term's multiplier (forecast months: 1, no rain forecast)."""
    centre, low, high = model.baseline_range(base, np.array(months))
    split = [model.urban_split(x, md.population, md.is_urban, md.state_idx, md.urban_ratio) for x in (centre, low, high)]
    c = md.lga_c[:, [m % 12 for m in months]]
    col = {month_index(p): j for j, p in enumerate(md.periods)}
    f = np.stack([md.rain_factor[:, col[m]] if m in col else np.ones(len(md.lga_codes)) for m in months], axis=1)
    return model.scores(split[0], split[1], split[2], c * f)


@dataclass(frozen=True)
class RiskResult:
    estimated: list[str]
    forecast: list[str]
    lga: model.Scores  # [n_lga, len(estimated)]
    lga_fc: model.Scores  # [n_lga, HORIZONS]
    state: model.Scores  # [n_states, len(estimated)]
    state_fc: model.Scores
    provisional: dict[str, bool]
    baseline: model.Baseline


def run_model(md: ModelData, rounds: pl.DataFrame | None = None) -> RiskResult:
    """Estimate every month from FIRST_PERIOD to the last recorded one and forecast the
    HORIZONS months after it."""
    rounds = md.rounds if rounds is None else rounds
    last = month_index(md.periods[-1])
    est_m = [month_index(p) for p in md.periods]
    fc_m = [last + h for h in range(1, model.HORIZONS + 1)]
    base = fit_baseline(md, rounds, fc_m[-1])
    both = lga_scores(md, base, est_m + fc_m)
    k = len(est_m)
    est = model.Scores(both.score[:, :k], both.low[:, :k], both.high[:, :k])
    fc = model.Scores(both.score[:, k:], both.low[:, k:], both.high[:, k:])
    n_states = len(md.state_codes)

    def agg(s: model.Scores) -> model.Scores:
        return model.Scores(*(model.aggregate(x, md.state_idx, md.population, n_states) for x in (s.score, s.low, s.high)))

    return RiskResult(
        estimated=md.periods,
        forecast=[period_of(m) for m in fc_m],
        lga=est,
        lga_fc=fc,
        state=agg(est),
        state_fc=agg(fc),
        provisional={p: bool(v) for p, v in zip(md.periods, md.provisional, strict=True)},
        baseline=base,
    )


# --- documents -----------------------------------------------------------------------------


def _rounded(s: model.Scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    score = np.round(s.score, DECIMALS)
    # rounding each end outward keeps low <= score <= high after rounding
    low = np.minimum(np.round(s.low, DECIMALS), score)
    high = np.maximum(np.round(s.high, DECIMALS), score)
    return score, low, high


def _records(static: list[tuple[dict[str, Any], dict[str, Any]]], s: model.Scores) -> list[list[dict[str, Any]]]:
    """Per column (month), the records of all rows in highest-first order.

    `static` must be sorted by code: the stable sort on -score then keeps code
    order among ties."""
    score, low, high = _rounded(s)
    lvl = model.levels(score)
    order = np.argsort(-score, axis=0, kind="stable")
    sc, lo, hi, lv = score.T.tolist(), low.T.tolist(), high.T.tolist(), lvl.T.tolist()
    out = []
    for j in range(score.shape[1]):
        col = []
        for i in order[:, j].tolist():
            col.append({**static[i][0], "score": sc[j][i], "score_low": lo[j][i], "score_high": hi[j][i], "level": lv[j][i], **static[i][1]})
        out.append(col)
    return out


def build_documents(geo: Geography, res: RiskResult, updated_at: str) -> dict[str, dict[tuple[str, ...], Any]]:
    states = geo.states.sort("state_code")
    lgas = geo.lgas
    state_static = [
        ({"state_code": r["state_code"], "state": r["state"], "zone": r["zone"]}, {"lgas": int(r["lgas"]), "population": int(r["population"])})
        for r in states.iter_rows(named=True)
    ]
    docs: dict[str, dict[tuple[str, ...], Any]] = {
        "/v1/periods": {},
        "/v1/risk/states": {},
        "/v1/risk/lgas": {},
        "/v1/forecasts/states": {},
        "/v1/forecasts/lgas": {},
    }
    months = [{"period": p, "kind": "estimated", "provisional": res.provisional[p]} for p in res.estimated]
    months += [{"period": p, "kind": "forecast", "provisional": False} for p in res.forecast]
    docs["/v1/periods"][()] = {
        "last_estimated": res.estimated[-1],
        "last_forecast": res.forecast[-1],
        "months": months,
        "updated_at": updated_at,
        "model_version": model.MODEL_VERSION,
        "score_range_level": model.RANGE_LEVEL,
    }
    st_est = _records(state_static, res.state)
    for j, p in enumerate(res.estimated):
        docs["/v1/risk/states"][(p,)] = {"period": p, "kind": "estimated", "states": st_est[j]}
    st_fc = _records(state_static, res.state_fc)
    for h in range(1, model.HORIZONS + 1):
        docs["/v1/forecasts/states"][(str(h),)] = {
            "forecasts": [{"period": res.forecast[k], "kind": "forecast", "states": st_fc[k]} for k in range(h)]
        }
    state_names = dict(zip(states["state_code"], states["state"], strict=True))
    rows = np.arange(lgas.height)
    for code in states["state_code"].to_list():
        sel = rows[(lgas["state_code"] == code).to_numpy()]
        sub = lgas[sel]
        static = [
            ({"lga_code": r["lga_code"], "lga": r["lga"]}, {"is_urban": bool(r["is_urban"]), "population": int(r["population"])})
            for r in sub.iter_rows(named=True)
        ]
        est = _records(static, model.Scores(res.lga.score[sel], res.lga.low[sel], res.lga.high[sel]))
        for j, p in enumerate(res.estimated):
            docs["/v1/risk/lgas"][(code, p)] = {
                "period": p, "kind": "estimated", "state_code": code, "state": state_names[code], "lgas": est[j],
            }
        fc = _records(static, model.Scores(res.lga_fc.score[sel], res.lga_fc.low[sel], res.lga_fc.high[sel]))
        for h in range(1, model.HORIZONS + 1):
            docs["/v1/forecasts/lgas"][(code, str(h))] = {
                "forecasts": [
                    {"period": res.forecast[k], "kind": "forecast", "state_code": code, "state": state_names[code], "lgas": fc[k]}
                    for k in range(h)
                ]
            }
    return docs


def model_run(ctx: BuildContext) -> tuple[ModelData, RiskResult]:
    """The model's data and run for this build, computed once (the validation report reuses them)."""
    if "risk" not in ctx.runs:
        md = load_model_data(ctx.data_dir, ctx.geography, ctx.inputs)
        ctx.runs["risk"] = (md, run_model(md))
    md, res = ctx.runs["risk"]
    return md, res


def produce(ctx: BuildContext) -> Produced:
    md, res = model_run(ctx)
    docs = build_documents(ctx.geography, res, ctx.updated_at)
    return Produced(
        dataset="risk",
        documents=docs,
        facts={"estimated": res.estimated, "forecast": res.forecast},
        model_version=model.MODEL_VERSION,
    )
