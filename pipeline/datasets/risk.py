"""Producer for /v1/periods, /v1/risk/* and /v1/forecasts/* (SPEC 2.1-2.4).

Loads recorded rainfall (WFP HDX file if present, else the CHIRPS state CSV),
downscales it to LGAs, derives the survey baseline, runs the model over every LGA x
month at once, and shapes the documents. Ordering within a report is highest score
first; equal (rounded) scores are ordered by state_code / lga_code ascending, so the
order is total and stable across builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from pipeline.datasets.base import BuildContext, Produced
from pipeline.errors import InputError
from pipeline.model import risk as model
from pipeline.model.downscale import lga_monthly, lga_ratios
from pipeline.sources.names import state_name_codes
from pipeline.sources.rainfall import read_lga_climatology, read_recorded_rainfall
from pipeline.sources.survey import read_survey_positivity

if TYPE_CHECKING:
    from pipeline.geography import Geography

FIRST_PERIOD = "2018-01"
DECIMALS = 4


def month_index(period: str) -> int:
    return int(period[:4]) * 12 + int(period[5:7]) - 1


def period_of(index: int) -> str:
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


@dataclass(frozen=True)
class ModelData:
    """Everything the model needs, as aligned arrays (rows = geo.lgas order)."""

    periods: list[str]  # consecutive recorded months, oldest first
    rain: np.ndarray  # [n_lga, T] mm
    provisional: np.ndarray  # [T] bool
    calendar_month: np.ndarray  # [T] 1..12
    state_idx: np.ndarray  # [n_lga] index into state_codes
    state_codes: list[str]
    population: np.ndarray  # [n_lga] float
    is_urban: np.ndarray  # [n_lga] bool
    rounds: pl.DataFrame
    urban_ratio: float
    urban_ratio_year: int
    rain_source: str


def state_monthly_codes(state: pl.DataFrame, geo: Geography) -> pl.DataFrame:
    out = state.join(geo.states.select("ocha_pcode", "state_code"), on="ocha_pcode", how="left")
    if out["state_code"].null_count():
        bad = sorted(out.filter(pl.col("state_code").is_null())["ocha_pcode"].unique())
        raise InputError("recorded rainfall", f"unknown state p-code(s) {bad}")
    return out


def recorded_months(state: pl.DataFrame, n_states: int) -> list[str]:
    """Consecutive months up to the last one recorded for EVERY state.

    A month missing for some state in the middle of the series would leave a hole
    in the lags, so the series is cut at the first such gap after FIRST_PERIOD."""
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
    if start > month_index(FIRST_PERIOD) - 2:
        raise InputError(
            "recorded rainfall",
            f"recorded months for every state run only from {period_of(start)}; need {period_of(month_index(FIRST_PERIOD) - 2)} onward",
        )
    return [period_of(i) for i in range(start, last + 1)]


def load_model_data(data_dir: Path, geo: Geography) -> ModelData:
    rec = read_recorded_rainfall(data_dir)
    state = state_monthly_codes(rec.state, geo)
    n_states = geo.states.height
    periods = recorded_months(state, n_states)
    state = state.filter(pl.col("period").is_in(periods))

    lgas = geo.lgas
    ratios = lga_ratios(geo, read_lga_climatology(data_dir))
    down = lga_monthly(geo, state.select("state_code", "period", "rainfall_mm", "provisional"), ratios)
    if rec.lga is not None:  # admin-2 rows replace the downscaled values where they exist
        direct = rec.lga.filter(pl.col("period").is_in(periods), pl.col("lga_code").is_in(lgas["lga_code"].implode()))
        down = (
            down.join(direct.select("lga_code", "period", pl.col("rainfall_mm").alias("d"), pl.col("provisional").alias("dp")),
                      on=["lga_code", "period"], how="left")
            .with_columns(pl.coalesce("d", "rainfall_mm").alias("rainfall_mm"), pl.coalesce("dp", "provisional").alias("provisional"))
            .drop("d", "dp")
        )
    lga_pos = {c: i for i, c in enumerate(lgas["lga_code"].to_list())}
    t0 = month_index(periods[0])
    li = down["lga_code"].replace_strict(lga_pos, return_dtype=pl.Int64).to_numpy()
    ti = (
        down.select(pl.col("period").str.slice(0, 4).cast(pl.Int64) * 12 + pl.col("period").str.slice(5, 2).cast(pl.Int64) - 1)
        .to_series()
        .to_numpy()
        - t0
    )
    rain = np.full((lgas.height, len(periods)), np.nan)
    rain[li, ti] = down["rainfall_mm"].to_numpy()
    if np.isnan(rain).any():
        raise InputError("recorded rainfall", "downscaled LGA series has gaps")
    prov_by_month = dict(
        state.group_by("period").agg(pl.col("provisional").any()).iter_rows()
    )
    prov_lga = down.group_by("period").agg(pl.col("provisional").any())
    for p, v in prov_lga.iter_rows():
        prov_by_month[p] = bool(prov_by_month.get(p, False) or v)
    provisional = np.array([bool(prov_by_month.get(p, False)) for p in periods])

    state_codes = geo.states["state_code"].to_list()
    codes = state_name_codes(geo.states)
    survey = read_survey_positivity(data_dir, codes)
    rounds = model.state_rounds(survey, state_codes)
    missing = sorted(set(state_codes) - set(rounds["state_code"]))
    if missing:
        raise InputError("survey positivity", f"no positivity for state(s) {missing}")
    try:
        ratio, ratio_year = model.urban_rural_ratio(survey)
    except ValueError as e:
        raise InputError("survey positivity", str(e)) from None
    s_pos = {c: i for i, c in enumerate(state_codes)}
    return ModelData(
        periods=periods,
        rain=rain,
        provisional=provisional,
        calendar_month=np.array([int(p[5:7]) for p in periods]),
        state_idx=lgas["state_code"].replace_strict(s_pos, return_dtype=pl.Int64).to_numpy(),
        state_codes=state_codes,
        population=lgas["population"].cast(pl.Float64).to_numpy(),
        is_urban=lgas["is_urban"].to_numpy().astype(bool),
        rounds=rounds,
        urban_ratio=ratio,
        urban_ratio_year=ratio_year,
        rain_source=rec.source,
    )


def decimal_years(periods: list[str]) -> np.ndarray:
    return np.array([int(p[:4]) + (int(p[5:7]) - 1) / 12 for p in periods])


def lga_baselines(md: ModelData, periods: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-LGA baseline, low and high [n_lga, len(periods)]."""
    sb = model.state_baseline(md.rounds, md.state_codes, decimal_years(periods))
    hw = model.survey_halfwidth(sb)
    split = [
        model.urban_split(x, md.population, md.is_urban, md.state_idx, md.urban_ratio)
        for x in (sb, np.clip(sb - hw, 0, 1), np.clip(sb + hw, 0, 1))
    ]
    return split[0], split[1], split[2]


@dataclass(frozen=True)
class RiskResult:
    estimated: list[str]
    forecast: list[str]
    lga: model.Scores  # [n_lga, len(estimated)]
    lga_fc: model.Scores  # [n_lga, HORIZONS]
    state: model.Scores  # [n_states, len(estimated)]
    state_fc: model.Scores
    provisional: dict[str, bool]


def run_model(md: ModelData, issue: int | None = None) -> RiskResult:
    """Estimate every month from FIRST_PERIOD to `issue` (default: the last recorded)
    and forecast the HORIZONS months after it, using rain up to `issue` only."""
    issue = len(md.periods) - 1 if issue is None else issue
    start = md.periods.index(FIRST_PERIOD)
    upto = issue + 1
    b, bl, bh = lga_baselines(md, md.periods[:upto])
    est = model.estimate(md.rain[:, :upto], md.provisional[:upto], b, bl, bh, start)
    last = month_index(md.periods[issue])
    fc_periods = [period_of(last + h) for h in range(1, model.HORIZONS + 1)]
    fb, fbl, fbh = lga_baselines(md, fc_periods)
    clim = model.climatology(md.rain, md.calendar_month, upto)
    fc = model.forecast(md.rain, md.provisional, md.calendar_month, issue, fb, fbl, fbh, clim)
    n_states = len(md.state_codes)

    def agg(s: model.Scores) -> model.Scores:
        return model.Scores(*(model.aggregate(x, md.state_idx, md.population, n_states) for x in (s.score, s.low, s.high)))

    return RiskResult(
        estimated=md.periods[start:upto],
        forecast=fc_periods,
        lga=est,
        lga_fc=fc,
        state=agg(est),
        state_fc=agg(fc),
        provisional={p: bool(v) for p, v in zip(md.periods[start:upto], md.provisional[start:upto], strict=True)},
    )


# --- documents -----------------------------------------------------------------------------


def _rounded(s: model.Scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    score = np.round(s.score, DECIMALS)
    # rounding each end outward keeps low <= score <= high after rounding
    low = np.minimum(np.round(s.low, DECIMALS), score)
    high = np.maximum(np.round(s.high, DECIMALS), score)
    return score, low, high


def _records(static: list[dict], s: model.Scores) -> list[list[dict]]:
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


def produce(ctx: BuildContext) -> Produced:
    geo = ctx.geography
    md = load_model_data(ctx.data_dir, geo)
    res = run_model(md)
    docs = build_documents(geo, res, ctx.updated_at)
    return Produced(
        dataset="risk",
        documents=docs,
        facts={"estimated": res.estimated, "forecast": res.forecast},
        model_version=model.MODEL_VERSION,
    )
