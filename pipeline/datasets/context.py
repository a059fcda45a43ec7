"""Producer of `/v1/context/states` and `/v1/context/lgas`: coverage context per area.

These figures are context shown next to the risk score, not inputs to it. Net use is
an LGA-level source (small-area estimates for children under 5), indoor spraying an
LGA summary of a MAP surface; net access, effective treatment and travel time exist
per state only, so every LGA carries its state's figure and the docs say so. State
figures are computed the way SPEC 2.5 defines them, as population-weighted averages
over the state's LGAs (docs/context.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from pipeline.attribution import source
from pipeline.datasets.base import BuildContext, Produced
from pipeline.errors import InputError
from pipeline.geography import (
    URBAN_DENSITY_THRESHOLD,
    Geography,
    normalise_name,
    normalise_name_expr,
)
from pipeline.sources import coverage, eha_names, itn_sae, map_irs
from pipeline.sources.names import normalise, state_code_for

STATES_ROUTE = "/v1/context/states"
LGAS_ROUTE = "/v1/context/lgas"

SHARE_FIELDS = ("itn_use", "itn_access", "irs_coverage", "effective_treatment")
FIGURE_FIELDS = (*SHARE_FIELDS, "travel_minutes_to_care", "response_index")
# Additive: the small-area estimates' 90% interval (LGA records only; null in state
# records, where a weighted mean of interval ends is no interval) and the newer 2024 figure.
ITN_INTERVAL_FIELDS = ("itn_use_low_90", "itn_use_high_90")
ITN_2024 = "itn_use_2024"
ITN_2024_INTERVAL_FIELDS = ("itn_use_2024_low_90", "itn_use_2024_high_90")
EXTRA_FIELDS = (*ITN_INTERVAL_FIELDS, ITN_2024, *ITN_2024_INTERVAL_FIELDS)
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
    "Net use: University of Washington small-area estimates of ITN use by children under 5 (DHS indicator "
    "ML_NETC_C_ITN) per LGA, Nigeria DHS 2018 and 2024 (richardli/gatesweb; no licence stated). Net access and "
    "effective treatment: Nigeria Demographic and Health Survey (NDHS) 2018, state estimates (DHS STATcompiler "
    "export in the WHO Nigeria Malaria Report 2022 repository sepmein/nigeria_malaria_report_2022, Apache-2.0). "
    "Indoor spraying: Malaria Atlas Project, Africa IRS coverage 2022 (MAP release 2024-06, CC BY 4.0), averaged "
    "per LGA. Travel time: walking time to the nearest primary health care facility, aggregated to states from "
    "ward estimates in SoeHtutAung/MCDA-Spatial-DHS-Rshiny-Nigeria (MIT), built on the Malaria Atlas Project "
    "walking-only friction surface (2020), GRID3 health facilities and WorldPop v2.1. Population: WorldPop and "
    "National Population Commission of Nigeria bottom-up population v2.0 (CC BY 4.0). Area: computed from "
    "eHealth Africa / GRID3 LGA outlines."
)
SOURCE_NOTE = (
    "Survey and modelled context, not inputs to the risk score. coverage_year 2018: itn_use, itn_access and "
    "effective_treatment describe the NDHS 2018; the newer NDHS 2024 net-use estimate is the separate field "
    "itn_use_2024. itn_use is a model-based small-area estimate for each LGA (children under 5), with its 90% "
    "interval in itn_use_low_90/itn_use_high_90 (LGA records only). itn_access and effective_treatment exist per "
    "state only: LGA figures repeat the state survey estimate; null where the survey publishes no estimate for "
    "the state. State figures are population-weighted averages of their LGAs. irs_coverage is 0 everywhere: the "
    "Malaria Atlas Project's modelled 2022 IRS coverage is 0 in every pixel of Nigeria; indoor residual spraying "
    "in Nigeria was limited to pilots in 2006-2007 and to two Nasarawa LGAs (Doma, Nasarawa Eggon) sprayed by the "
    "PMI Africa IRS project around 2011-2013, which a 2022 surface does not show. travel_minutes_to_care is walking "
    "time, an approximate mean from time bands (midpoints 15/45/85/140 minutes), not a measured mean, and "
    "describes about 2020. response_index is the mean of itn_use and effective_treatment, null if either is null."
)
SOURCE_FIELDS = {
    "itn_use": "NDHS 2018, children under 5 who slept under an insecticide-treated net: University of Washington "
               "model-based small-area estimate per LGA; state = population-weighted mean of its LGAs.",
    "itn_use_low_90": "Lower end of the 90% interval of the LGA's 2018 small-area estimate; null in state records.",
    "itn_use_high_90": "Upper end of the 90% interval of the LGA's 2018 small-area estimate; null in state records.",
    "itn_use_2024": "As itn_use, for the NDHS 2024 (a newer year than coverage_year).",
    "itn_use_2024_low_90": "Lower end of the 90% interval of the LGA's 2024 estimate; null in state records.",
    "itn_use_2024_high_90": "Upper end of the 90% interval of the LGA's 2024 estimate; null in state records.",
    "itn_access": "NDHS 2018: persons with access to an insecticide-treated net (state estimate).",
    "irs_coverage": "Malaria Atlas Project, Africa IRS coverage, 2022 (modelled; 0 in every pixel of Nigeria), "
                    "mean inside each LGA outline.",
    "effective_treatment": "NDHS 2018: children under 5 with fever given antimalarials who took an ACT "
                           "(artemisinin-based combination therapy) (state estimate).",
    "travel_minutes_to_care": "Approximate mean walking time to the nearest primary health care facility (band midpoints), ~2020.",
    "response_index": "Mean of itn_use and effective_treatment.",
    "population": "WorldPop/NPC bottom-up v2.0, modelled; rounded to whole people.",
    "area_km2": "Geodesic area (WGS84) of the eHA/GRID3 outline.",
    "is_urban": (
        f"Derived: population density of {URBAN_DENSITY_THRESHOLD:,.0f} people per km2 or more; "
        "not an official classification."
    ),
}
SOURCE_YEARS = {
    "itn_use": coverage.COVERAGE_YEAR,
    "itn_use_2024": 2024,
    "itn_access": coverage.COVERAGE_YEAR,
    "effective_treatment": coverage.COVERAGE_YEAR,
    "irs_coverage": map_irs.YEAR,
    "travel_minutes_to_care": 2020,
}
ATTRIBUTION_KEYS = ("uw_sae_itn", "dhs_sepmein", "map_irs_2022", "nmis2021_soehtutaung", "population", "boundaries")


def source_block() -> dict[str, Any]:
    return {
        "name": SOURCE_NAME,
        "coverage_year": coverage.COVERAGE_YEAR,
        "note": SOURCE_NOTE,
        "fields": SOURCE_FIELDS,
        "years": SOURCE_YEARS,
        "attribution": [source(k).to_json() for k in ATTRIBUTION_KEYS],
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
    shares = [pl.col(f).round(SHARE_DECIMALS) for f in (*SHARE_FIELDS, "response_index", *EXTRA_FIELDS)]
    return [*shares, pl.col("travel_minutes_to_care").round(MINUTES_DECIMALS)]


def lga_irs(irs: pl.DataFrame, geography: Geography, file: Path | str) -> pl.DataFrame:
    """`lga_code`, `irs_coverage` for every LGA; the table is keyed by the eHA code."""
    out = geography.lgas.select("lga_code", "eha_code", "lga").join(irs, on="eha_code", how="left")
    missing = out.filter(pl.col("irs_coverage").is_null())
    if missing.height:
        listed = ", ".join(f"{r['lga_code']} {r['lga']} (eHA {r['eha_code']})" for r in missing.head(10).iter_rows(named=True))
        raise InputError(file, f"no IRS value for {missing.height} LGA(s): {listed}")
    return out.select("lga_code", "irs_coverage")


def lga_itn(sae: pl.DataFrame, eha: pl.DataFrame, geography: Geography, file: Path | str) -> pl.DataFrame:
    """`lga_code`, itn_use with its 90% interval (2018) and the 2024 fields, for every LGA.

    LGA names are matched within their state to the eHA/GRID3 names (the spelling the
    estimates use), then through the eHA code to the service's `lga_code`. An
    unmatched name, two names on one LGA or an LGA without both years stops the build.
    """
    lgas = sae.filter(pl.col("admin") == 2)
    table = {n: state_code_for(n, geography.states) for n in lgas["state"].unique().to_list()}
    unknown = sorted(n for n, c in table.items() if c is None)
    if unknown:
        raise InputError(file, f"state name(s) matching none of the 37 states: {', '.join(unknown)}")
    key = pl.col("lga").map_elements(normalise, return_dtype=pl.Utf8)
    lgas = lgas.with_columns(pl.col("state").replace_strict(table, return_dtype=pl.Utf8).alias("state_code"), key.alias("key"))
    names = eha.select("state_code", pl.col("eha_name").map_elements(normalise, return_dtype=pl.Utf8).alias("key"), "eha_code")
    dup_names = names.filter(pl.struct("state_code", "key").is_duplicated())
    if dup_names.height:
        raise InputError(eha_names.LGAS_CSV, f"two eHA LGAs share the name key {dup_names['key'][0]!r} in {dup_names['state_code'][0]}")
    joined = lgas.join(names, on=["state_code", "key"], how="left")
    unmatched = joined.filter(pl.col("eha_code").is_null())
    if unmatched.height:
        r = unmatched.row(0, named=True)
        raise InputError(file, f"{unmatched.height} LGA name(s) match no eHA/GRID3 LGA, first {r['lga']!r} ({r['state']})", row=r["row"])
    twice = joined.filter(pl.struct("year", "eha_code").is_duplicated())
    if twice.height:
        r = twice.row(0, named=True)
        raise InputError(file, f"LGA {r['lga']!r} ({r['state']}) given twice for {r['year']}", row=r["row"])
    by_year = [
        joined.filter(pl.col("year") == year).select(
            "eha_code", pl.col("mean").alias(f"{prefix}"), pl.col("low").alias(f"{prefix}_low_90"),
            pl.col("high").alias(f"{prefix}_high_90"),
        )
        for year, prefix in ((coverage.COVERAGE_YEAR, "itn_use"), (2024, ITN_2024))
    ]
    out = geography.lgas.select("lga_code", "eha_code", "lga")
    for part in by_year:
        out = out.join(part, on="eha_code", how="left")
    missing = out.filter(pl.any_horizontal(pl.col("itn_use", ITN_2024).is_null()))
    if missing.height:
        listed = ", ".join(f"{r['lga_code']} {r['lga']}" for r in missing.head(10).iter_rows(named=True))
        raise InputError(file, f"no estimate for both {coverage.COVERAGE_YEAR} and 2024 for {missing.height} LGA(s): {listed}")
    return out.select("lga_code", "itn_use", *ITN_INTERVAL_FIELDS, ITN_2024, *ITN_2024_INTERVAL_FIELDS)


def context_frames(
    geography: Geography, survey: pl.DataFrame, travel: pl.DataFrame, itn: pl.DataFrame, irs: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(state records, LGA records) as frames. `survey` and `travel` are per state with
    `state_code` already attached (see `match_states`); `itn` (see `lga_itn`) and `irs`
    (see `lga_irs`) per LGA."""
    per_state = survey.select("state_code", "itn_access", "effective_treatment").join(
        travel.select("state_code", "travel_minutes_to_care"), on="state_code", how="full", coalesce=True
    )
    lgas = (
        geography.lgas.select("lga_code", "lga", "state_code", "is_urban", "population", "area_km2")
        .join(per_state, on="state_code", how="left")
        .join(itn, on="lga_code", how="left")
        .join(irs, on="lga_code", how="left")
        .with_columns(((pl.col("itn_use") + pl.col("effective_treatment")) / 2).alias("response_index"))
    )
    interval_fields = (*ITN_INTERVAL_FIELDS, *ITN_2024_INTERVAL_FIELDS)
    weighted = lgas.group_by("state_code").agg(weighted_mean(f) for f in (*FIGURE_FIELDS, ITN_2024))
    states = (
        geography.states.select("state_code", "state", "zone", "lgas", "population", "area_km2")
        .join(weighted, on="state_code", how="left")
        .with_columns(pl.lit(None, dtype=pl.Float64).alias(f) for f in interval_fields)
        .with_columns(_rounded())
        .select("state_code", "state", "zone", "lgas", "population", "area_km2", *FIGURE_FIELDS, *EXTRA_FIELDS)
        .sort("state_code")
    )
    lgas = (
        lgas.with_columns(_rounded())
        .sort(pl.col("lga").str.to_lowercase(), "lga_code")
        .select("lga_code", "lga", "state_code", "is_urban", "population", "area_km2", *FIGURE_FIELDS, *EXTRA_FIELDS)
    )
    return states, lgas


def documents(
    geography: Geography, survey: pl.DataFrame, travel: pl.DataFrame, itn: pl.DataFrame, irs: pl.DataFrame
) -> dict[str, dict[tuple[str, ...], Any]]:
    states, lgas = context_frames(geography, survey, travel, itn, irs)
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
    data_dir = Path(ctx.data_dir)
    malaria = data_dir / "malaria"
    dhs_path = malaria / coverage.DHS_CSV
    travel_path = malaria / coverage.TRAVEL_CSV
    sae_path = data_dir / itn_sae.SAE_CSV
    irs_path = data_dir / map_irs.LGA_CSV
    geography: Geography = ctx.geography
    survey = match_states(coverage.read_dhs_state_coverage(dhs_path), geography.states, dhs_path)
    travel = match_states(coverage.read_travel_time(travel_path), geography.states, travel_path)
    eha = eha_names.read_eha_names(data_dir / eha_names.LGAS_CSV)
    itn = lga_itn(itn_sae.read_itn_sae(sae_path), eha, geography, sae_path)
    irs = lga_irs(map_irs.read_lga_irs(irs_path), geography, irs_path)
    return Produced(dataset="context", documents=documents(geography, survey, travel, itn, irs))
