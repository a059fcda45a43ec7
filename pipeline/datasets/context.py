"""Producer of `/v1/context/states` and `/v1/context/lgas`: coverage context per area.

These figures are context shown next to the risk score, not inputs to it. The only
sources are state-level (NDHS 2018 is representative at state level only; walking
time was aggregated to states), so every LGA carries its state's figure and says so.
State figures are then computed the way SPEC 2.5 defines them, as population-weighted
averages over the state's LGAs: with one value per state that returns the state value,
but it keeps the rule correct if an LGA-level source is ever added.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from pipeline.datasets.base import BuildContext, Produced
from pipeline.errors import InputError
from pipeline.geography import (
    URBAN_DENSITY_THRESHOLD,
    Geography,
    normalise_name,
    normalise_name_expr,
)
from pipeline.sources import coverage

STATES_ROUTE = "/v1/context/states"
LGAS_ROUTE = "/v1/context/lgas"

SHARE_FIELDS = ("itn_use", "itn_access", "irs_coverage", "effective_treatment")
FIGURE_FIELDS = (*SHARE_FIELDS, "travel_minutes_to_care", "response_index")
SHARE_DECIMALS = 4  # sources give 0.1 percentage point; the response index halves that step
MINUTES_DECIMALS = 1

# Spellings of state names seen in the malaria inputs (SOURCES.md) -> normalised OCHA name.
STATE_ALIASES = {
    "fct": "federal capital territory",
    "fct abuja": "federal capital territory",
    "abuja": "federal capital territory",
    "abuja fct": "federal capital territory",
    "nassarawa": "nasarawa",
}

SOURCE_NAME = (
    "Net use, net access and effective treatment: Nigeria Demographic and Health Survey (NDHS) 2018, "
    "state estimates (DHS STATcompiler export in the WHO Nigeria Malaria Report 2022 repository "
    "sepmein/nigeria_malaria_report_2022, Apache-2.0). Travel time: walking time to the nearest primary "
    "health care facility, aggregated to states from ward estimates in SoeHtutAung/MCDA-Spatial-DHS-Rshiny-Nigeria "
    "(MIT), built on the Malaria Atlas Project walking-only friction surface (2020), GRID3 health facilities "
    "and WorldPop v2.1. Population: WorldPop and National Population Commission of Nigeria bottom-up "
    "population v2.0 (CC BY 4.0). Area: computed from eHealth Africa / GRID3 LGA outlines."
)
SOURCE_NOTE = (
    "Survey and modelled context, not inputs to the risk score. The NDHS 2018 is representative at state "
    "level only: LGA figures repeat the state survey estimate. State figures are population-weighted "
    "averages of their LGAs. itn_use, itn_access and effective_treatment are shares 0 to 1; null where the "
    "survey publishes no estimate for the state. irs_coverage is null everywhere: no source of indoor "
    "residual spraying coverage for Nigeria was found. travel_minutes_to_care is walking time, an "
    "approximate mean from time bands (midpoints 15/45/85/140 minutes), not a measured mean, and describes "
    "about 2020 rather than 2018. response_index is the mean of itn_use and effective_treatment, null if either is null."
)
SOURCE_FIELDS = {
    "itn_use": "NDHS 2018: population who slept under an insecticide-treated net last night.",
    "itn_access": "NDHS 2018: persons with access to an insecticide-treated net.",
    "irs_coverage": "No source: null.",
    "effective_treatment": "NDHS 2018: children under 5 with fever given antimalarials who took an ACT (artemisinin-based combination therapy).",
    "travel_minutes_to_care": "Approximate mean walking time to the nearest primary health care facility (band midpoints), ~2020.",
    "response_index": "Mean of itn_use and effective_treatment.",
    "population": "WorldPop/NPC bottom-up v2.0, modelled; rounded to whole people.",
    "area_km2": "Geodesic area (WGS84) of the eHA/GRID3 outline.",
    "is_urban": (
        f"Derived: population density of {URBAN_DENSITY_THRESHOLD:,.0f} people per km2 or more; "
        "not an official classification."
    ),
}


def source_block() -> dict[str, Any]:
    return {
        "name": SOURCE_NAME,
        "coverage_year": coverage.COVERAGE_YEAR,
        "note": SOURCE_NOTE,
        "fields": SOURCE_FIELDS,
    }


def state_key(name: str) -> str:
    """Join key for a state name across files (FCT spellings, Nasarawa, spacing)."""
    key = normalise_name(name)
    return STATE_ALIASES.get(key, key)


def match_states(frame: pl.DataFrame, states: pl.DataFrame, file: Path | str) -> pl.DataFrame:
    """Attach `state_code` to a per-state frame (columns `state`, `row`) by name.

    Fails with InputError on a name that matches no state, a state given twice, or
    any of the 37 states missing: a silently dropped state would publish nulls that
    look like "no survey estimate".
    """
    alias = pl.col("_key").replace(STATE_ALIASES)
    keyed = frame.with_columns(normalise_name_expr("state").alias("_key")).with_columns(alias.alias("_key"))
    known = states.select("state_code", normalise_name_expr("state").alias("_key"))
    joined = keyed.join(known, on="_key", how="left")
    unknown = joined.filter(pl.col("state_code").is_null())
    if unknown.height:
        r = unknown.row(0, named=True)
        raise InputError(file, f"state {r['state']!r} matches none of the 37 states", row=r["row"])
    dup = joined.filter(pl.col("state_code").is_duplicated()).sort("row")
    if dup.height:
        r = dup.row(1, named=True)
        raise InputError(file, f"state {r['state_code']} ({r['state']!r}) appears more than once", row=r["row"])
    absent = states.join(joined, on="state_code", how="anti")
    if absent.height:
        raise InputError(file, f"no row for state(s) {', '.join(absent['state_code'].to_list())}")
    return joined.drop("_key")


def weighted_mean(field: str) -> pl.Expr:
    """Population-weighted mean over non-null values; all null -> null."""
    has = pl.col(field).is_not_null()
    weight = pl.when(has).then(pl.col("population")).otherwise(0)
    total = weight.sum()
    return pl.when(total > 0).then((pl.col(field).fill_null(0) * weight).sum() / total).otherwise(None).alias(field)


def _rounded() -> list[pl.Expr]:
    shares = [pl.col(f).round(SHARE_DECIMALS) for f in (*SHARE_FIELDS, "response_index")]
    return [*shares, pl.col("travel_minutes_to_care").round(MINUTES_DECIMALS)]


def context_frames(
    geography: Geography, survey: pl.DataFrame, travel: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(state records, LGA records) as frames. `survey` and `travel` are per state with
    `state_code` already attached (see `match_states`)."""
    per_state = survey.select("state_code", "itn_use", "itn_access", "effective_treatment").join(
        travel.select("state_code", "travel_minutes_to_care"), on="state_code", how="full", coalesce=True
    )
    lgas = (
        geography.lgas.select("lga_code", "lga", "state_code", "is_urban", "population", "area_km2")
        .join(per_state, on="state_code", how="left")
        .with_columns(pl.lit(None, dtype=pl.Float64).alias("irs_coverage"))
        .with_columns(((pl.col("itn_use") + pl.col("effective_treatment")) / 2).alias("response_index"))
    )
    weighted = lgas.group_by("state_code").agg(weighted_mean(f) for f in FIGURE_FIELDS)
    states = (
        geography.states.select("state_code", "state", "zone", "lgas", "population", "area_km2")
        .join(weighted, on="state_code", how="left")
        .with_columns(_rounded())
        .select("state_code", "state", "zone", "lgas", "population", "area_km2", *FIGURE_FIELDS)
        .sort("state_code")
    )
    lgas = (
        lgas.with_columns(_rounded())
        .sort(pl.col("lga").str.to_lowercase(), "lga_code")
        .select("lga_code", "lga", "state_code", "is_urban", "population", "area_km2", *FIGURE_FIELDS)
    )
    return states, lgas


def documents(geography: Geography, survey: pl.DataFrame, travel: pl.DataFrame) -> dict[str, dict[tuple[str, ...], Any]]:
    states, lgas = context_frames(geography, survey, travel)
    source = source_block()
    by_state: dict[tuple[str, ...], Any] = {}
    names = dict(geography.states.select("state_code", "state").iter_rows())
    for (code,), group in lgas.partition_by("state_code", as_dict=True, maintain_order=True).items():
        by_state[(code,)] = {
            "source": source,
            "state_code": code,
            "state": names[code],
            "lgas": group.drop("state_code").to_dicts(),
        }
    return {
        STATES_ROUTE: {(): {"source": source, "states": states.to_dicts()}},
        LGAS_ROUTE: dict(sorted(by_state.items())),
    }


def produce(ctx: BuildContext) -> Produced:
    malaria = Path(ctx.data_dir) / "malaria"
    dhs_path = malaria / coverage.DHS_CSV
    travel_path = malaria / coverage.TRAVEL_CSV
    geography: Geography = ctx.geography
    survey = match_states(coverage.read_dhs_state_coverage(dhs_path), geography.states, dhs_path)
    travel = match_states(coverage.read_travel_time(travel_path), geography.states, travel_path)
    return Produced(dataset="context", documents=documents(geography, survey, travel))
