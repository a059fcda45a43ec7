"""Producer for /v1/transmission/states and /v1/transmission/lgas (SPEC 2.6-2.8, rule 6).

Seasons come from rainfall, not from case records: there is no dated monthly case
series per state or LGA (malaria SOURCES.md §7.4), while the CHIRPS climatology covers
every state and, downscaled, every LGA. Rain makes breeding sites; cases follow after
larval development, the parasite's development in the mosquito and the incubation in
people, so the expected monthly level of reported cases is the rainfall climatology
shifted later by that lag (docs/seasons.md gives the reasoning for one month).

The only independent monthly case records (22 routine-data archetype profiles) are
used for nothing but `method.check`, so the published agreement is an honest figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from pipeline.datasets.base import BuildContext, Produced
from pipeline.errors import DatasetUnavailable
from pipeline.model.downscale import lga_climatology
from pipeline.model.seasons import (
    Season,
    circular_distance,
    lag_profiles,
    season_from_index,
    seasonal_index,
    seasons_from_profiles,
)
from pipeline.sources import cases, rainfall, survey
from pipeline.sources.names import hbhi_lga_codes

if TYPE_CHECKING:
    from pipeline.geography import Geography

# Larval development (~1-2 weeks), extrinsic incubation in the mosquito (~10-14 days)
# and intrinsic incubation plus care seeking (~2 weeks) add up to about a month
# between the rain that fills breeding sites and the cases that reach a clinic.
# Chosen on that reasoning before running the check; not tuned to it.
CASES_FOLLOW_RAIN_BY_MONTHS = 1
HIGH_SEASON_SHARE_OF_PEAK = 0.5
SMALL_SAMPLE_CHILDREN = 100  # SPEC 2.7 / section 8
SURVEY_TEST = "microscopy"  # preferred wherever it exists; RDT only where a round has no microscopy

RAINFALL_DECIMALS = 1
SHARE_DECIMALS = 4
CHECK_DECIMALS = 2

DESCRIPTION = (
    "The expected monthly level of reported malaria cases is the 1991-2020 CHIRPS rainfall "
    "climatology shifted one month later (cases follow rain), scaled so the peak month is 1; "
    "high months are those at half the peak or more, and the high season is the run of high "
    "months holding the peak, carried across a single lower month between two rainy seasons. "
    "LGA profiles use the IDM/GSOD LGA rainfall shape rescaled to the state CHIRPS totals, and "
    "the national profile is the population-weighted mean of the state profiles. "
    "The check compares these predictions with 22 routine-data case seasonality profiles "
    "of LGA groups, which are not used to make them."
)

SURVEY_NOTE = (
    "Positivity by microscopy in children 6-59 months. Rounds or areas with only an RDT figure "
    "are left out rather than mixed in, because RDT reads higher than microscopy in the same "
    "children. clusters, children_tested and the 95% range are null where the source table does "
    "not give them, and small_sample is then null too (unknown, not false). 2010 has zone figures "
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


def normalised(profiles: np.ndarray) -> np.ndarray:
    """Unrounded peak-1 profiles, for weighting before the published rounding."""
    return profiles / profiles.max(axis=1, keepdims=True)


def national_season(state_lagged: np.ndarray, population: np.ndarray, share: float) -> Season:
    """Population-weighted mean of the state profiles (each scaled to peak 1), then the rules.

    Shapes, not millimetres, are weighted: a person in wet Bayelsa counts as much as
    one in dry Yobe, so the national season is the one most people live with.
    """
    w = np.asarray(population, dtype=float)
    prof = (normalised(state_lagged) * w[:, None]).sum(axis=0) / w.sum()
    return season_from_index(seasonal_index(prof)[0], share)


def seasonality_check(
    lga_lagged: pl.DataFrame,
    lga_archetype: pl.DataFrame,
    recorded: pl.DataFrame,
    lgas: pl.DataFrame,
    state_names: dict[str, str],
    share: float = HIGH_SEASON_SHARE_OF_PEAK,
) -> tuple[dict[str, Any], pl.DataFrame]:
    """Compare predicted and recorded seasons for each case series (archetype).

    Inputs: `lga_lagged` (lga_code, month, expected: lagged rainfall profile),
    `lga_archetype` (lga_code, archetype), `recorded` (archetype, month, incidence),
    `lgas` (lga_code, state_code, population), `state_names` code -> name.

    Predicted profile of a series = population-weighted mean of its LGAs' peak-1
    profiles. Both profiles then go through the same season rules (the recorded one
    without a lag: it already is cases). Per series: Pearson correlation of the two
    12-month profiles; months_off = mean of the circular distances between predicted
    and recorded season start and season end; peak_off = circular distance between
    the peak months. Returns the SPEC `check` object and the per-series table.
    """
    prof = lga_lagged.with_columns(
        (pl.col("expected") / pl.col("expected").max().over("lga_code")).alias("shape")
    )
    members = lga_archetype.join(lgas.select("lga_code", "state_code", "population"), on="lga_code", how="inner")
    pred = (
        prof.join(members, on="lga_code", how="inner")
        .group_by("archetype", "month")
        .agg(((pl.col("shape") * pl.col("population")).sum() / pl.col("population").sum()).alias("predicted"))
    )
    series = sorted(set(pred["archetype"]) & set(recorded["archetype"]))
    if not series:
        return empty_check(), pl.DataFrame()
    p = wide(pred.filter(pl.col("archetype").is_in(series)), "archetype", "predicted", series)
    r = wide(recorded.filter(pl.col("archetype").is_in(series)), "archetype", "incidence", series)
    pc, rc = p - p.mean(axis=1, keepdims=True), r - r.mean(axis=1, keepdims=True)
    denom = np.sqrt((pc**2).sum(axis=1) * (rc**2).sum(axis=1))
    corr = np.where(denom > 0, (pc * rc).sum(axis=1) / np.where(denom > 0, denom, 1), np.nan)
    ps = [season_from_index(row, share) for row in seasonal_index(p)]
    rs = [season_from_index(row, share) for row in seasonal_index(r)]

    def col(ss: list[Season], f: str) -> np.ndarray:
        return np.array([getattr(s, f) for s in ss])

    start_off = circular_distance(col(ps, "season_start_month"), col(rs, "season_start_month"))
    end_off = circular_distance(col(ps, "season_end_month"), col(rs, "season_end_month"))
    months_off = (start_off + end_off) / 2
    peak_off = circular_distance(col(ps, "peak_month"), col(rs, "peak_month"))
    per_states = (
        members.filter(pl.col("archetype").is_in(series))
        .group_by("archetype")
        .agg(pl.col("state_code").unique().sort(), pl.len().alias("lgas"), pl.col("population").sum())
    )
    table = pl.DataFrame(
        {
            "archetype": series,
            "correlation": corr,
            "predicted_peak": col(ps, "peak_month"),
            "recorded_peak": col(rs, "peak_month"),
            "predicted_start": col(ps, "season_start_month"),
            "predicted_end": col(ps, "season_end_month"),
            "recorded_start": col(rs, "season_start_month"),
            "recorded_end": col(rs, "season_end_month"),
            "recorded_months": col(rs, "season_months"),
            "months_off": months_off,
            "peak_off": peak_off,
        }
    ).join(per_states, on="archetype", how="left")
    codes = sorted({c for cs in table["state_code"] for c in cs})
    check = {
        "series": len(series),
        "states": sorted(state_names[c] for c in codes),
        "median_correlation": _round(np.nanmedian(corr), CHECK_DECIMALS),
        "mean_months_off": _round(months_off.mean(), CHECK_DECIMALS),
        "mean_months_peak_is_off": _round(peak_off.mean(), CHECK_DECIMALS),
    }
    return check, table


def empty_check() -> dict[str, Any]:
    """The check when its case records are absent: nothing compared, no figure invented."""
    return {"series": 0, "states": [], "median_correlation": None, "mean_months_off": None, "mean_months_peak_is_off": None}


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
    res: dict[tuple[int, str], float] = {}
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


def survey_trends(survey_rows: pl.DataFrame) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """National trend (with urban/rural) and per-state trends keyed by state_code."""
    rows = one_row_per_round(survey_rows)
    national = survey_entries(
        rows.filter(pl.col("level") == "national"), rows.filter(pl.col("level") == "residence")
    )
    states = {
        code: survey_entries(part)
        for (code,), part in rows.filter(pl.col("level") == "state").group_by("state_code", maintain_order=True)
    }
    return national, states


# --- producer ----------------------------------------------------------------------------


def _inputs_present(data_dir: Path) -> list[str]:
    """Missing transmission inputs (relative paths); empty when all are there."""
    missing = [f for f in (rainfall.CHIRPS_CLIMATOLOGY, rainfall.LGA_CLIMATOLOGY) if not (data_dir / f).exists()]
    if not (data_dir / survey.SURVEY_CSV).exists() and not (data_dir / survey.DHS_API_JSON).exists():
        missing.append(f"{survey.SURVEY_CSV} (or {survey.DHS_API_JSON})")
    return missing


def _check_inputs_present(data_dir: Path) -> bool:
    return (data_dir / cases.ARCHETYPE_PROFILES).exists() and (data_dir / cases.LGA_ARCHETYPES).exists()


def produce(ctx: BuildContext) -> Produced:
    data_dir = Path(ctx.data_dir)
    missing = _inputs_present(data_dir)
    if missing:
        raise DatasetUnavailable(f"transmission inputs absent: {', '.join(missing)}")
    geo = ctx.geography
    states = geo.states.sort("state_code")
    lgas = geo.lgas.sort("lga_code")
    lag, share = CASES_FOLLOW_RAIN_BY_MONTHS, HIGH_SEASON_SHARE_OF_PEAK

    state_clim = rainfall.read_state_chirps_climatology(data_dir)
    state_rain = wide(
        state_clim.join(states.select("ocha_pcode", "state_code"), on="ocha_pcode", how="inner"),
        "state_code", "rainfall_mm", states["state_code"].to_list(),
    )
    lga_clim = lga_climatology(geo, state_clim, rainfall.read_lga_climatology(data_dir))
    lga_codes = lgas["lga_code"].to_list()
    lga_rain = wide(lga_clim, "lga_code", "rainfall_mm", lga_codes)

    state_seasons = seasons_from_profiles(state_rain, lag, share)
    national = national_season(lag_profiles(state_rain, lag), states["population"].to_numpy(), share)
    lga_seasons = seasons_from_profiles(lga_rain, lag, share)

    state_names = dict(zip(states["state_code"], states["state"], strict=True))
    survey_rows = survey.read_survey_positivity(data_dir, {v: k for k, v in state_names.items()})
    nat_trend, state_trends = survey_trends(survey_rows)

    check, _ = run_check(data_dir, geo, lga_codes, lga_rain, lag, state_names, share)

    sources = {
        "rainfall": rainfall.CHIRPS_SOURCE,
        "lga_rainfall_shape": rainfall.LGA_CLIM_SOURCE,
        "check_cases": cases.CASES_SOURCE,
        "surveys": sorted(set(survey_rows["source"].to_list())),
        "survey_note": SURVEY_NOTE,
    }
    states_doc = {
        "method": {
            "cases_follow_rain_by_months": lag,
            "high_season_share_of_peak": share,
            "description": DESCRIPTION,
            "check": check,
        },
        "national": {"season": national.to_json(), "survey_trend": nat_trend},
        "states": [
            {
                "state_code": code,
                "state": name,
                "zone": zone,
                "season": s.to_json(),
                "survey_trend": state_trends.get(code, []),
            }
            for code, name, zone, s in zip(
                states["state_code"], states["state"], states["zone"], state_seasons, strict=True
            )
        ],
        "source": sources,
    }

    by_code = {
        code: {"lga_code": code, **s.to_json(), "typical_rainfall_mm": [round(float(v), RAINFALL_DECIMALS) for v in rain]}
        for code, s, rain in zip(lga_codes, lga_seasons, lga_rain, strict=True)
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
    data_dir: Path,
    geo: Geography,
    lga_codes: list[str],
    lga_rain: np.ndarray,
    lag: int,
    state_names: dict[str, str],
    share: float = HIGH_SEASON_SHARE_OF_PEAK,
) -> tuple[dict[str, Any], pl.DataFrame]:
    """Read the case records and run `seasonality_check`; nulls when they are absent."""
    if not _check_inputs_present(data_dir):
        return empty_check(), pl.DataFrame()
    recorded = cases.read_archetype_profiles(data_dir)
    arche = cases.read_lga_archetypes(data_dir)
    arche = arche.join(hbhi_lga_codes(arche, geo, source=cases.LGA_ARCHETYPES), on="lga", how="inner")
    lagged = lag_profiles(lga_rain, lag)
    long = pl.DataFrame(
        {
            "lga_code": np.repeat(np.asarray(lga_codes, dtype=object), 12).tolist(),
            "month": np.tile(np.arange(1, 13), len(lga_codes)),
            "expected": lagged.reshape(-1),
        }
    )
    return seasonality_check(
        long, arche.select("lga_code", "archetype"), recorded, geo.lgas, state_names, share
    )
