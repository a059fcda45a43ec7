"""Producer for /v1/transmission/states and /v1/transmission/lgas (SPEC 2.6-2.8, rule 6).

Seasons come from rainfall, shaped by the only independent monthly case records: there
is no dated monthly case series per state or LGA (malaria SOURCES.md §7.4), while the
CHIRPS climatology covers every state and, downscaled, every LGA. The expected monthly
level of reported cases is a floor plus a lagged rainfall shape, the lag growing with
the length of the dry season (pipeline.model.seasons). The floor and the lag rule are
fitted to the 22 routine-data archetype profiles; every figure published in
`method.check` is cross-validated (leave one archetype out, all parameters refitted), so
no profile is ever scored by parameters it helped fit. docs/seasons.md has the reasoning.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from pipeline.datasets import survey_sample
from pipeline.datasets.base import BuildContext, Produced
from pipeline.errors import DatasetUnavailable
from pipeline.model import national_trend
from pipeline.model.downscale import lga_climatology
from pipeline.model.seasons import (
    DRY_MONTH_MM,
    LAG_RULES,
    Season,
    SeasonParams,
    best_months_share,
    choose_rule,
    circular_distance,
    fit_table,
    floored_index,
    lags_for,
    leave_one_out,
    peak_window,
    profile_errors,
    rain_shape,
    rule_cv_errors,
    season_centre,
    season_from_index,
    trough_to_peak,
)
from pipeline.sources import cases, rainfall, survey
from pipeline.sources.names import hbhi_lga_codes

if TYPE_CHECKING:
    from pipeline.geography import Geography

# Used only when the case records are absent from DATA_DIR: the fit on all 22 archetype
# profiles of the 2026-11 data load (docs/seasons.md). With the records present the
# parameters are refitted on every build.
DEFAULT_PARAMS = SeasonParams(floor=0.77, lag_at_pivot=0.9, lag_per_dry_month=0.5, rule="linear")
SMALL_SAMPLE_CHILDREN = 100  # SPEC 2.7 / section 8
SURVEY_TEST = "microscopy"  # preferred wherever it exists; RDT only where a round has no microscopy
LAG_DECIMALS = 1
CENTRE_DECIMALS = 1
# Geopolitical zone -> band used to break the check down (north / middle belt / south).
BANDS = {
    "North West": "north", "North East": "north", "North Central": "middle_belt",
    "South West": "south", "South East": "south", "South South": "south",
}

RAINFALL_DECIMALS = 1
SHARE_DECIMALS = 4
CHECK_DECIMALS = 2

def description(p: SeasonParams) -> str:
    """`method.description`: the rule with this release's constants."""
    return (
        "Expected monthly level of reported malaria cases, as a share of the peak month: "
        f"index = {p.floor:.2f} + {1 - p.floor:.2f} x (rainfall climatology shifted later by the area's lag, "
        "scaled to peak 1). The lag in months is "
        f"{p.lag_at_pivot:.1f} + {p.lag_per_dry_month:.2f} x (dry months - 5), where a dry month has under 50 mm "
        "in the 1991-2020 CHIRPS climatology (fractional lags interpolate between months; bounds -1 to 4): "
        "cases follow rain later where the dry season is long (Sahel) and earlier in the south. "
        "The floor and the lag rule are fitted to 22 routine-data case profiles of LGA groups; "
        f"high months are those at {p.high_share} of the peak or more (where the rain-driven part reaches "
        "half its own peak), and the high season is the run of high months holding the peak, carried "
        "across a single lower month. cases_follow_rain_by_months is the population-weighted mean lag; "
        "each season carries its own lag_months. The check figures are leave-one-archetype-out: "
        "every parameter refitted without the profile being scored."
    )

SURVEY_NOTE = (
    "Positivity in children 6-59 months, by microscopy wherever the round has it. A round or area "
    "with only an RDT figure is kept and labelled (`test`: RDT; `test_assumed` where the source does "
    "not say which test), because RDT reads higher than microscopy in the same children. clusters, children_tested and the 95% range are null where the source table does "
    "not give them, and small_sample is then null too (unknown, not false) unless a lower bound of "
    "100 or more children (children_tested_lower_bound) makes it false. 2010 has zone figures "
    "only, so no state entry for 2010."
)
RAINFALL_NOTE = (
    "typical_rainfall_mm is downscaled, not measured per LGA: the state's CHIRPS 1991-2020 monthly "
    "mean times the LGA's within-state ratio from the IDM/GSOD 2001-2016 LGA climatology "
    "(area-weighted LGA means reproduce the state value)."
)


# --- pure computation ------------------------------------------------------------------


def wide(df: pl.DataFrame, key: str, value: str, keys: list[str]) -> np.ndarray:
    """(len(keys), 12) matrix of `value` by `key` and month, rows in the order of `keys`."""
    piv = (
        df.select(key, pl.col("month").cast(pl.Int64), value)
        .pivot(on="month", index=key, values=value, sort_columns=True)
    )
    months = [str(m) for m in range(1, 13)]
    if set(months) - set(piv.columns):
        raise ValueError(f"{value}: not every month present")
    order = pl.DataFrame({key: keys})
    mat = order.join(piv, on=key, how="left").select(months).to_numpy().astype(float)
    if np.isnan(mat).any():
        raise ValueError(f"{value}: missing values for some {key}")
    return mat


@dataclass(frozen=True)
class SeasonModel:
    """The fitted seasonal index for every LGA and state, with its cross-validated check."""

    params: SeasonParams
    fitted_to: int  # case series the published parameters were fitted to (0: DEFAULT_PARAMS)
    lga_codes: list[str]  # sorted by code
    lga_rain: np.ndarray  # [n_lga, 12] mm
    lga_lag: np.ndarray  # [n_lga]
    lga_index: np.ndarray  # [n_lga, 12] published (rounded) index
    check: dict[str, Any]


def season_of(index: np.ndarray, lag: float, p: SeasonParams) -> dict[str, Any]:
    """SPEC 2.6 season plus the additive centre, peak window and lag."""
    s = season_from_index(index, p.high_share)
    return {
        **s.to_json(),
        "season_centre_month": round(float(season_centre(index)[0]), CENTRE_DECIMALS),
        "peak_window": list(peak_window(index, p.peak_window_share)),
        "lag_months": round(float(lag), LAG_DECIMALS),
    }


def national_index(state_rain: np.ndarray, state_lag: np.ndarray, population: np.ndarray, p: SeasonParams) -> np.ndarray:
    """Population-weighted mean of the state rain shapes (each peak 1), rescaled to peak 1, then the floor.

    Shapes, not millimetres, are weighted: a person in wet Bayelsa counts as much as
    one in dry Yobe, so the national season is the one most people live with.
    """
    w = np.asarray(population, dtype=float)
    prof = (rain_shape(state_rain, state_lag) * w[:, None]).sum(axis=0) / w.sum()
    return floored_index(prof / prof.max(), p.floor)[0]


def series_weights(lga_archetype: pl.DataFrame, lgas: pl.DataFrame, lga_codes: list[str],
                   series: list[str]) -> np.ndarray:
    """[n_series, n_lga]: population of each series' LGAs (0 elsewhere)."""
    pos = {c: i for i, c in enumerate(lga_codes)}
    pop = dict(zip(lgas["lga_code"], lgas["population"].cast(pl.Float64), strict=True))
    w = np.zeros((len(series), len(lga_codes)))
    sidx = {a: i for i, a in enumerate(series)}
    for code, arch in lga_archetype.select("lga_code", "archetype").iter_rows():
        if code in pos and arch in sidx:
            w[sidx[arch], pos[code]] = pop[code]
    return w


def seasonality_check(
    lga_rain: np.ndarray,
    weights: np.ndarray,
    recorded: np.ndarray,
    series: list[str],
    bands: list[str],
    state_names: list[str],
) -> tuple[SeasonParams, dict[str, Any], pl.DataFrame]:
    """Fit the index to all series (published parameters) and cross-validate it.

    Every check figure is leave-one-archetype-out: the held-out profile is predicted
    with parameters (floor, lag rule) fitted to the other profiles only, and the same
    season rules (at the held-out fit's share) are applied to the prediction and to
    the recorded profile. Returns the published parameters, the `check` object and the
    per-series table.
    """
    tables = {rule: fit_table(lga_rain, weights, recorded, rule) for rule in LAG_RULES}
    cv_errors = rule_cv_errors(tables)
    params, _ = choose_rule(tables).best()
    cv = leave_one_out(tables)
    pred, rec = cv.predicted, recorded / recorded.max(axis=1, keepdims=True)
    err = profile_errors(pred, rec)
    ps = [season_from_index(np.round(row, 3), f.high_share) for row, f in zip(pred, cv.params, strict=True)]
    rs = [season_from_index(np.round(row, 3), f.high_share) for row, f in zip(rec, cv.params, strict=True)]

    def col(ss: list[Season], f: str) -> np.ndarray:
        return np.array([getattr(x, f) for x in ss])

    start_off = np.asarray(circular_distance(col(ps, "season_start_month"), col(rs, "season_start_month")))
    end_off = np.asarray(circular_distance(col(ps, "season_end_month"), col(rs, "season_end_month")))
    months_off = (start_off + end_off) / 2
    peak_off = np.asarray(circular_distance(col(ps, "peak_month"), col(rs, "peak_month")))
    tab = pl.DataFrame({
        "archetype": series, "band": bands,
        "correlation": err["correlation"], "centre_off": err["centre_off"],
        "predicted_centre": season_centre(pred), "recorded_centre": season_centre(rec),
        "predicted_best4": best_months_share(pred), "recorded_best4": best_months_share(rec),
        "predicted_trough": trough_to_peak(pred), "recorded_trough": trough_to_peak(rec),
        "best4_error": err["best_months_share_error"], "trough_error": err["trough_to_peak_error"],
        "predicted_peak": col(ps, "peak_month"), "recorded_peak": col(rs, "peak_month"),
        "months_off": months_off, "peak_off": peak_off,
        "floor": [f.floor for f in cv.params], "lag_at_pivot": [f.lag_at_pivot for f in cv.params],
        "lag_per_dry_month": [f.lag_per_dry_month for f in cv.params],
        "lag_rule": [f.rule for f in cv.params],
    })

    def summary(t: pl.DataFrame) -> dict[str, Any]:
        return {
            "series": t.height,
            "median_correlation": _round(float(np.nanmedian(t["correlation"].to_numpy())), CHECK_DECIMALS),
            "mean_centre_months_off": _round(float(np.mean(t["centre_off"].to_numpy())), CHECK_DECIMALS),
            "mean_best_4_month_share_error": _round(float(np.mean(t["best4_error"].to_numpy())), 3),
            "mean_trough_to_peak_error": _round(float(np.mean(t["trough_error"].to_numpy())), CHECK_DECIMALS),
        }

    allsum = summary(tab)
    check = {
        "series": len(series),
        "states": sorted(state_names),
        "median_correlation": allsum["median_correlation"],
        "mean_months_off": _round(float(months_off.mean()), CHECK_DECIMALS),
        "mean_months_peak_is_off": _round(float(peak_off.mean()), CHECK_DECIMALS),
        "cross_validation": "leave-one-archetype-out; the lag rule chosen and the floor and lag refitted "
                            "without the held-out profile",
        "lag_rule_cv_errors": cv_errors,
        "lag_rules_chosen": sorted({f.rule for f in cv.params}),
        "mean_centre_months_off": allsum["mean_centre_months_off"],
        "mean_best_4_month_share_error": allsum["mean_best_4_month_share_error"],
        "mean_trough_to_peak_error": allsum["mean_trough_to_peak_error"],
        "recorded_median_trough_to_peak": _round(float(np.median(trough_to_peak(rec))), CHECK_DECIMALS),
        "recorded_max_best_4_month_share": _round(float(best_months_share(rec).max()), CHECK_DECIMALS),
        "by_band": {
            band: summary(tab.filter(pl.col("band") == band))
            for band in ("north", "middle_belt", "south") if tab.filter(pl.col("band") == band).height
        },
    }
    return params, check, tab


def empty_check() -> dict[str, Any]:
    """The check when its case records are absent: nothing compared, no figure invented."""
    return {
        "series": 0, "states": [], "median_correlation": None, "mean_months_off": None,
        "mean_months_peak_is_off": None,
        "cross_validation": "not run: the case records are absent from this data load",
        "lag_rule_cv_errors": {}, "lag_rules_chosen": [],
        "mean_centre_months_off": None, "mean_best_4_month_share_error": None,
        "mean_trough_to_peak_error": None, "recorded_median_trough_to_peak": None,
        "recorded_max_best_4_month_share": None, "by_band": {},
    }


def _round(v: float, d: int) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), d)


def _opt_round(v: float | None, d: int) -> float | None:
    return None if v is None else round(float(v), d)


def survey_entries(rows: pl.DataFrame, with_residence: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    """SPEC 2.7 entries, one per survey year present in `rows` (already one area, one test).

    `with_residence`: rows with `area` urban/rural for national entries; absent figures
    are null. small_sample is null when children_tested is unknown.
    """
    out: list[dict[str, Any]] = []
    res: dict[tuple[int, str, str], float] = {}
    if with_residence is not None:
        res = {(y, a, t): v for y, a, t, v in
               with_residence.select("survey_year", "area", "test", "positivity").iter_rows()}
    for r in rows.sort("survey_year").iter_rows(named=True):
        n = r["children_tested"]
        e: dict[str, Any] = {
            "survey_year": r["survey_year"],
            "positivity": round(r["positivity"], SHARE_DECIMALS),
            "low": _opt_round(r["low"], SHARE_DECIMALS),
            "high": _opt_round(r["high"], SHARE_DECIMALS),
            "clusters": r["clusters"],
            "children_tested": n,
            "small_sample": None if n is None else n < SMALL_SAMPLE_CHILDREN,
        }
        if with_residence is not None:
            # urban and rural only from the same test as the national figure
            e["urban"] = _opt_round(res.get((r["survey_year"], "urban", r["test"])), SHARE_DECIMALS)
            e["rural"] = _opt_round(res.get((r["survey_year"], "rural", r["test"])), SHARE_DECIMALS)
        e["survey"] = r["survey"]
        e["test"] = r["test"]
        e["test_assumed"] = bool(r["test_assumed"])
        e["source"] = r["source"]
        out.append(e)
    return out


def one_row_per_round(survey_rows: pl.DataFrame, test: str = SURVEY_TEST) -> pl.DataFrame:
    """One row per (year, level, area): `test` where the round has it, else the other test.

    Microscopy is used wherever it exists; a round that published only an RDT figure for
    an area is kept rather than dropped, and its entry says `"test": "RDT"` so a reader
    never compares the two tests unawares (RDT reads higher: it stays positive for weeks
    after treatment). Among rows of the same test the one carrying more of
    interval/clusters/children tested wins, then the first by source name.
    """
    filled = (
        pl.col("low").is_not_null().cast(pl.Int8)
        + pl.col("high").is_not_null().cast(pl.Int8)
        + pl.col("clusters").is_not_null().cast(pl.Int8)
        + pl.col("children_tested").is_not_null().cast(pl.Int8)
    )
    return (
        survey_rows.with_columns((pl.col("test") != test).cast(pl.Int8).alias("_other"), filled.alias("_filled"))
        .sort(["survey_year", "level", "area", "_other", "_filled", "source"],
              descending=[False, False, False, False, True, False])
        .unique(subset=["survey_year", "level", "area"], keep="first", maintain_order=True)
        .drop("_other", "_filled")
    )


def survey_trends(
    survey_rows: pl.DataFrame, zone_population: dict[str, float] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """National trend (with urban/rural) and per-state trends keyed by state_code.

    The national trend is the microscopy series of pipeline.model.national_trend (one test
    only; a round without a national figure gets its zones' population-weighted mean,
    labelled `derived`); `national_survey_trends` gives both series.
    """
    rows = one_row_per_round(survey_rows)
    national = national_survey_trends(survey_rows, zone_population or {})[SURVEY_TEST]
    states = {
        code: survey_entries(part)
        for (code,), part in rows.filter(pl.col("level") == "state").group_by("state_code", maintain_order=True)
    }
    return national, states


def national_survey_trends(survey_rows: pl.DataFrame, zone_population: dict[str, float]) -> dict[str, list[dict[str, Any]]]:
    """Per test (microscopy, RDT): that test's national entries, each with urban/rural of the
    same test and the additive `derived`, `derived_from` and `test_note` fields."""
    nat = national_trend.consistent_rows(survey_rows, zone_population)
    residence = nat.filter(pl.col("level") == "residence")
    out = {}
    for test in national_trend.TESTS:
        part = one_row_per_round(national_trend.series(nat, test), test)
        extra = {r["survey_year"]: r for r in part.iter_rows(named=True)}
        entries = survey_entries(part, residence)
        out[test] = [
            {**e, "derived": bool(extra[e["survey_year"]]["derived"]),
             "derived_from": extra[e["survey_year"]]["derived_from"],
             "test_note": extra[e["survey_year"]]["test_note"]}
            for e in entries
        ]
    return out


# --- producer ----------------------------------------------------------------------------


def _inputs_present(data_dir: Path) -> list[str]:
    """Missing transmission inputs (relative paths); empty when all are there."""
    missing = [f for f in (rainfall.CHIRPS_CLIMATOLOGY, rainfall.LGA_CLIMATOLOGY) if not (data_dir / f).exists()]
    if not (data_dir / survey.SURVEY_CSV).exists() and not (data_dir / survey.DHS_API_JSON).exists():
        missing.append(f"{survey.SURVEY_CSV} (or {survey.DHS_API_JSON})")
    return missing


def _check_inputs_present(data_dir: Path) -> bool:
    return (Path(data_dir) / cases.ARCHETYPE_PROFILES).exists() and (Path(data_dir) / cases.LGA_ARCHETYPES).exists()


CLIMATOLOGY_YEARS = (1991, 2020)


def state_climatology(data_dir: Path) -> pl.DataFrame:
    """ocha_pcode, month, rainfall_mm: the CHIRPS 1991-2020 climatology file, or, when a data
    load lacks it, the same mean computed from the recorded monthly CHIRPS series (all its
    years if it does not cover 1991-2020), so the risk score keeps its season."""
    if (Path(data_dir) / rainfall.CHIRPS_CLIMATOLOGY).exists():
        return rainfall.read_state_chirps_climatology(data_dir)
    rec = rainfall.read_recorded_rainfall(data_dir).state.with_columns(
        pl.col("period").str.slice(0, 4).cast(pl.Int64).alias("year"),
        pl.col("period").str.slice(5, 2).cast(pl.Int64).alias("month"),
    )
    base = rec.filter(pl.col("year").is_between(*CLIMATOLOGY_YEARS))
    base = base if base.height else rec
    return base.group_by("ocha_pcode", "month").agg(pl.col("rainfall_mm").mean()).sort("ocha_pcode", "month")


_MEMO: list[tuple[tuple[Any, ...], Any, SeasonModel]] = []  # at most one (key, geography, model)


def _memo_key(data_dir: Path) -> tuple[Any, ...]:
    """The inputs' paths with size and modification time: a changed file is a new fit."""
    files = (rainfall.CHIRPS_CLIMATOLOGY, rainfall.LGA_CLIMATOLOGY, cases.ARCHETYPE_PROFILES, cases.LGA_ARCHETYPES)
    out: list[Any] = [str(Path(data_dir).resolve())]
    for f in files:
        path = Path(data_dir) / f
        st = path.stat() if path.exists() else None
        out.append((f, st.st_size, st.st_mtime_ns) if st else (f, None))
    return tuple(out)


def season_model(data_dir: Path, geo: Any) -> SeasonModel:
    """Fit (or, without case records, take DEFAULT_PARAMS) and apply the seasonal index to every LGA.

    The risk producer multiplies its baseline by this same index, so the fit is memoised
    per data directory and geography for the one build that asks twice.
    """
    key = _memo_key(data_dir)
    if _MEMO and _MEMO[0][0] == key and _MEMO[0][1] is geo:
        return _MEMO[0][2]
    lgas = geo.lgas.sort("lga_code")
    lga_codes = lgas["lga_code"].to_list()
    state_clim = state_climatology(data_dir)
    lga_clim = lga_climatology(geo, state_clim, rainfall.read_lga_climatology(data_dir))
    lga_rain = wide(lga_clim, "lga_code", "rainfall_mm", lga_codes)
    params, fitted_to, check = DEFAULT_PARAMS, 0, empty_check()
    if _check_inputs_present(data_dir):
        params, check, _ = run_check(data_dir, geo, lga_codes, lga_rain)
        fitted_to = check["series"] or 0
        if not fitted_to:
            params = DEFAULT_PARAMS
    lag = lags_for(lga_rain, params)
    index = floored_index(rain_shape(lga_rain, lag), params.floor)
    model = SeasonModel(params, fitted_to, lga_codes, lga_rain, lag, index, check)
    _MEMO[:] = [(key, geo, model)]
    return model


def produce(ctx: BuildContext) -> Produced:
    data_dir = Path(ctx.data_dir)
    missing = _inputs_present(data_dir)
    if missing:
        raise DatasetUnavailable(f"transmission inputs absent: {', '.join(missing)}")
    geo = ctx.geography
    states = geo.states.sort("state_code")
    lgas = geo.lgas.sort("lga_code")
    sm = season_model(data_dir, geo)
    p = sm.params

    state_clim = rainfall.read_state_chirps_climatology(data_dir)
    state_rain = wide(
        state_clim.join(states.select("ocha_pcode", "state_code"), on="ocha_pcode", how="inner"),
        "state_code", "rainfall_mm", states["state_code"].to_list(),
    )
    state_lag = lags_for(state_rain, p)
    state_index = floored_index(rain_shape(state_rain, state_lag), p.floor)
    pop = states["population"].cast(pl.Float64).to_numpy()
    national = season_of(national_index(state_rain, state_lag, pop, p), float(np.average(state_lag, weights=pop)), p)
    lga_codes = sm.lga_codes

    state_names = dict(zip(states["state_code"], states["state"], strict=True))
    survey_rows = survey.read_survey_positivity(data_dir, {v: k for k, v in state_names.items()})
    zone_pop = {z: float(v) for z, v in states.group_by("zone").agg(pl.col("population").sum()).iter_rows()}
    nat_series = national_survey_trends(survey_rows, zone_pop)
    nat_trend, state_trends = nat_series[SURVEY_TEST], survey_trends(survey_rows, zone_pop)[1]
    # survey sample (pipeline/datasets/survey_sample.py): additive lower bounds, small_sample where certain
    bounds = survey_sample.read_bounds(data_dir, states)
    nat_rdt, _ = survey_sample.attach(nat_series["RDT"], {}, bounds)
    nat_trend, state_trends = survey_sample.attach(nat_trend, state_trends, bounds)

    sources = {
        "rainfall": rainfall.CHIRPS_SOURCE,
        "lga_rainfall_shape": rainfall.LGA_CLIM_SOURCE,
        "check_cases": cases.CASES_SOURCE,
        "surveys": sorted(set(survey_rows["source"].to_list())),
        "survey_note": SURVEY_NOTE,
        "survey_sample": survey_sample.source_block(),
    }
    states_doc = {
        "method": {
            "cases_follow_rain_by_months": round(float(np.average(state_lag, weights=pop)), LAG_DECIMALS),
            "high_season_share_of_peak": p.high_share,
            "description": description(p),
            "check": sm.check,
            "seasonal_floor": p.floor,
            "lag_at_5_dry_months": p.lag_at_pivot,
            "lag_per_dry_month": p.lag_per_dry_month,
            "lag_rule": p.rule,
            "dry_month_below_mm": DRY_MONTH_MM,
            "peak_window_share_of_peak": p.peak_window_share,
            "parameters_fitted_to_series": sm.fitted_to,
        },
        "national": {"season": national, "survey_trend": nat_trend, "survey_trend_rdt": nat_rdt},
        "states": [
            {
                "state_code": code,
                "state": name,
                "zone": zone,
                "season": season_of(ix, lag, p),
                "survey_trend": state_trends.get(code, []),
            }
            for code, name, zone, ix, lag in zip(
                states["state_code"], states["state"], states["zone"], state_index, state_lag, strict=True
            )
        ],
        "source": sources,
    }

    by_code = {
        code: {"lga_code": code, **season_of(ix, lag, p),
               "typical_rainfall_mm": [round(float(v), RAINFALL_DECIMALS) for v in rain]}
        for code, ix, lag, rain in zip(lga_codes, sm.lga_index, sm.lga_lag, sm.lga_rain, strict=True)
    }
    names = dict(zip(lgas["lga_code"], lgas["lga"], strict=True))
    order = lgas.sort(pl.col("lga").str.to_lowercase(), "lga_code").select("lga_code", "state_code")
    lga_docs: dict[tuple[str, ...], Any] = {}
    for (code,), part in order.group_by("state_code", maintain_order=True):
        lga_docs[(code,)] = {
            "state_code": code,
            "state": state_names[code],
            "lgas": [_lga_record(by_code[c], names[c]) for c in part["lga_code"]],
            "source": {"rainfall": rainfall.CHIRPS_SOURCE, "lga_rainfall_shape": rainfall.LGA_CLIM_SOURCE, "note": RAINFALL_NOTE},
        }
    for code in states["state_code"]:
        lga_docs.setdefault((code,), {"state_code": code, "state": state_names[code], "lgas": []})
    return Produced(
        dataset="transmission",
        documents={"/v1/transmission/states": {(): states_doc}, "/v1/transmission/lgas": lga_docs},
    )


def _lga_record(rec: dict[str, Any], name: str) -> dict[str, Any]:
    """SPEC 2.8 field order: lga_code, lga, then the season, then typical rainfall."""
    return {"lga_code": rec["lga_code"], "lga": name, **{k: v for k, v in rec.items() if k != "lga_code"}}


def run_check(
    data_dir: Path, geo: Geography, lga_codes: list[str], lga_rain: np.ndarray,
) -> tuple[SeasonParams, dict[str, Any], pl.DataFrame]:
    """Read the case records, fit the index to them and cross-validate it."""
    recorded = cases.read_archetype_profiles(data_dir)
    arche = cases.read_lga_archetypes(data_dir)
    arche = arche.join(hbhi_lga_codes(arche, geo, source=cases.LGA_ARCHETYPES), on="lga", how="inner")
    w_all = series_weights(arche, geo.lgas, lga_codes, sorted(set(recorded["archetype"])))
    series = [a for a, w in zip(sorted(set(recorded["archetype"])), w_all, strict=True) if w.sum() > 0]
    if not series:
        return DEFAULT_PARAMS, empty_check(), pl.DataFrame()
    weights = series_weights(arche, geo.lgas, lga_codes, series)
    rec = wide(recorded.filter(pl.col("archetype").is_in(series)), "archetype", "incidence", series)
    zone_of = dict(zip(geo.states["state_code"], geo.states["zone"], strict=True))
    state_of = geo.lgas.sort("lga_code")["state_code"].to_list()
    bands, states = [], set()
    for w in weights:
        by_band: dict[str, float] = {}
        for i in np.flatnonzero(w):
            band = BANDS.get(zone_of[state_of[i]], "middle_belt")
            by_band[band] = by_band.get(band, 0.0) + float(w[i])
            states.add(state_of[i])
        bands.append(max(sorted(by_band), key=lambda b: by_band[b]))
    names = dict(zip(geo.states["state_code"], geo.states["state"], strict=True))
    return seasonality_check(lga_rain, weights, rec, series, bands, [names[c] for c in states])
