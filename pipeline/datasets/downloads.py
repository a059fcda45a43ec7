"""Producer of the release's bulk downloads (`/v1/downloads`): tables, outlines and their description.

Every table is built from the documents the other producers return for the JSON API
(`ctx.produced`), through the same flattening the CSV responses use, so a figure in a
bundle, a CSV response and a JSON response is the same number by construction; fields
the other producers add flow into the tables without a change here. Files that name the
release id (README, datapackage.json, SHA256SUMS, the zip and the index document) are
made by `stamp` once the renderer knows the id. Design notes: docs/downloads.md.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import orjson
import polars as pl
import shapely

from edge.routes import BUNDLE_ZIP, CSV, DOWNLOAD_FILE, GEOJSON, JSON
from pipeline import cache
from pipeline.attribution import BUNDLE_SOURCES, Artefact, artefact_terms, resource_licences
from pipeline.datasets.base import BuildContext, Documents, Produced, StaticFiles
from pipeline.datasets.boundaries import SOURCE as OUTLINE_SOURCE
from pipeline.datasets.boundaries import geometry_json
from pipeline.datasets.bundle_scopes import (
    DESCRIPTION_FILES,
    TABLE_ROUTES,
    download_scope_map,
    download_scope_text,
    scopes_for,
    scopes_of_routes,
)
from pipeline.errors import DatasetUnavailable
from pipeline.release import tabular
from pipeline.settings import DEFAULT_BASE_URL

T = TypeVar("T")

ROUTE = "/v1/downloads"
PARQUET = "application/vnd.apache.parquet"
ZIP = "application/zip"
MARKDOWN = "text/markdown; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
ZIP_NAME = BUNDLE_ZIP
# the scope rule lives in pipeline.datasets.bundle_scopes (the OpenAPI document reads it too)
__all__ = ["DESCRIPTION_FILES", "TABLE_ROUTES", "download_scope_map", "download_scope_text", "scopes_for",
           "scopes_of_routes"]
PACKAGE_NAME = "malaria-risk-nigeria"
# GeoParquet 1.1: WKB geometry plus a `geo` key in the file metadata; no CRS member means
# OGC:CRS84 (longitude/latitude on WGS 84), which is what the outlines are in.
GEOPARQUET_VERSION = "1.1.0"

# Column orders the downloads promise (docs/downloads.md); any other field follows in its JSON order.
LEAD: dict[str, tuple[str, ...]] = {
    "risk_lga_month": ("lga_code", "lga", "state_code", "state", "period", "kind", "horizon",
                       "score", "score_low", "score_high", "level"),
    "risk_state_month": ("state_code", "state", "period", "kind", "horizon", "score", "score_low",
                         "score_high", "level"),
    "context_lga": ("lga_code", "lga", "state_code", "state"),
    "context_state": ("state_code", "state"),
    "transmission_lga_month": ("lga_code", "lga", "state_code", "month", "seasonal_index",
                               "typical_rainfall_mm", "high_season"),
    "transmission_state_month": ("area_type", "state_code", "state", "month", "seasonal_index", "high_season"),
    "season_ratio_lga": ("lga_code", "lga", "state_code", "start_month", "horizon", "ratio", "low", "high",
                         "q10", "q25", "q50", "q75", "q90", "beats_persistence", "insufficient_skill", "forecast", "base_months",
                         "season_class"),
    "season_ratio_state": ("state_code", "state", "start_month", "horizon", "ratio", "low", "high",
                           "q10", "q25", "q50", "q75", "q90", "beats_persistence", "insufficient_skill", "forecast", "base_months",
                           "season_class"),
    "survey_trend": ("area_type", "state_code", "state", "survey_year", "positivity", "low", "high"),
    "gazetteer": ("lga_code", "lga", "state_code", "state", "admin1_pcode", "zone", "population",
                  "area_km2", "is_urban", "eha_code"),
    "smc_lga": ("lga_code", "lga", "state_code", "eligible", "margin", "years_passed", "first_cycle_month", "cycles"),
    "smc_state": ("state_code", "state", "eligible", "margin", "years_passed", "first_cycle_month", "cycles"),
}

TABLE_TITLES: dict[str, str] = {
    "risk_lga_month": "Risk score per LGA and month: every estimated month and the forecast months.",
    "risk_state_month": "Risk score per state and month: every estimated month and the forecast months.",
    "context_lga": "Coverage context per LGA (survey and modelled figures; not risk score inputs).",
    "context_state": "Coverage context per state (population-weighted averages of the LGAs).",
    "transmission_lga_month": "Transmission season per LGA, one row per calendar month, with the season's fields.",
    "transmission_state_month": "Transmission season per state and nationally, one row per calendar month.",
    "season_ratio_lga": "Season ratios per LGA: expected cases h = 1-4 months after a start month over the start "
                        "month's cases, with the 80 % range and whether it beat persistence in cross-validation.",
    "season_ratio_state": "Season ratios per state (as the LGA table).",
    "smc_lga": "SMC planning per LGA by Nigeria's rule (>= 60 % of the year's rain in 4 consecutive months, in 4 "
               "consecutive of the last ten complete years): verdict, margin, onset, first cycle and cycles, with "
               "which years rest on the LGA's own rainfall.",
    "smc_state": "SMC planning per state (as the LGA table), with this year's rain so far against the average and "
                 "the children treated per cycle in the last campaign.",
    "survey_trend": "Survey parasite positivity in children 6 to 59 months per round, national and per state.",
    "gazetteer": "Every LGA with its codes (OCHA p-codes, eHA/GRID3 code), state, zone, population and area.",
}

# Descriptions of the columns the bundle adds or renames; every other column takes the
# description the API reference (the OpenAPI schemas) or the producer's source block gives it.
OWN_FIELDS: dict[str, str] = {
    "rain_this_year_year": "SMC tables: the year of the rain so far.",
    "rain_this_year_through": "SMC tables: start date of the last dekad counted this year.",
    "rain_this_year_rain_mm": "SMC tables: rain so far this year, mm (state mean).",
    "rain_this_year_average_mm": "SMC tables: long-term average rain for the same dekads, mm (WFP rfh_avg).",
    "rain_this_year_percent_of_average": "SMC tables: 100 x rain so far / average (WFP's rfq anomaly).",
    "rain_this_year_provisional": "SMC tables: true when some of this year's dekads are CHIRPS-preliminary.",
    "rain_this_year_onset_date": "SMC tables: this year's start of season (first day of the dekad); empty: not yet.",
    "rain_this_year_onset_vs_median_dekads": "SMC tables: this year's onset minus the median onset, in dekads "
                                             "(negative: early).",
    "kind": "`estimated` (a month with recorded rainfall) or `forecast` (a month after the last estimated one). "
            "The JSON API spells the first `estimated`.",
    "horizon": "Months ahead, 1 to 4: in the risk tables, of the last estimated month (empty for estimates); in "
               "the season ratio tables, of the start month.",
    "low": "Lower end of the record's range: the 95 % range of survey positivity (survey_trend) or the 80 % "
           "range of the season ratio (season_ratio_*).",
    "high": "Upper end of the record's range: the 95 % range of survey positivity (survey_trend) or the 80 % "
            "range of the season ratio (season_ratio_*).",
    "provisional": "true when the month's rainfall is preliminary and may be revised.",
    "month": "Calendar month, 1 (January) to 12 (December).",
    "seasonal_index": "Expected level of reported cases in this calendar month as a share of the peak month "
                      "(peak month = 1). Modelled: the season fitted to routine case data (docs: seasons).",
    "typical_rainfall_mm": "Usual rainfall in this calendar month, mm (downscaled from state CHIRPS).",
    "high_season": "true when the month is one of the season's high months.",
    "area_type": "`state` or `national`; national rows have state_code `NG` (Nigeria, ISO 3166-1), so they "
                 "cannot be mistaken for Nasarawa (`NA`) by a reader that takes empty cells and `NA` as missing.",
    "admin1_pcode": "OCHA COD-AB admin-1 p-code of the state.",
    "eha_code": "eHealth Africa / GRID3 LGA code of the outline the LGA is linked to.",
    "density_per_km2": "People per km² (population / area_km2).",
    "rep_lon": "Longitude of a point inside the LGA outline (for labels).",
    "rep_lat": "Latitude of a point inside the LGA outline (for labels).",
    "state_code": "Two-letter state code (ISO 3166-2:NG suffix).",
    "state": "State name.",
    "lga_code": "Stable LGA identifier: the OCHA COD-AB admin-2 p-code.",
    "lga": "LGA name (OCHA).",
    "zone": "Geopolitical zone.",
    "period": "Month, YYYY-MM.",
}

# Primary keys of the tables (unique and never empty in every build; checked by `frictionless validate`)
# and their foreign keys: every LGA row points at the gazetteer, every state row at context_state.
# National rows (state_code `NG`, NATIONAL_CODE) are keyed by the state name "Nigeria"; their tables point at
# context_state only from the state rows, so they declare no foreign key on state_code (Frictionless has
# no partial keys).
NATIONAL_CODE = "NG"
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "risk_lga_month": ("lga_code", "period"),
    "risk_state_month": ("state_code", "period"),
    "context_lga": ("lga_code",),
    "context_state": ("state_code",),
    "transmission_lga_month": ("lga_code", "month"),
    "transmission_state_month": ("area_type", "state", "month"),
    "season_ratio_lga": ("lga_code", "start_month", "horizon"),
    "season_ratio_state": ("state_code", "start_month", "horizon"),
    "smc_lga": ("lga_code",),
    "smc_state": ("state_code",),
    "survey_trend": ("area_type", "state", "survey_year"),
    "gazetteer": ("lga_code",),
}
_TO_GAZETTEER = {"fields": "lga_code", "reference": {"resource": "gazetteer", "fields": "lga_code"}}
_TO_STATES = {"fields": "state_code", "reference": {"resource": "context_state", "fields": "state_code"}}
FOREIGN_KEYS: dict[str, tuple[dict[str, Any], ...]] = {
    "risk_lga_month": (_TO_GAZETTEER, _TO_STATES),
    "risk_state_month": (_TO_STATES,),
    "context_lga": (_TO_GAZETTEER, _TO_STATES),
    "smc_lga": (_TO_GAZETTEER, _TO_STATES),
    "smc_state": (_TO_STATES,),
    "transmission_lga_month": (_TO_GAZETTEER, _TO_STATES),
    "season_ratio_lga": (_TO_GAZETTEER, _TO_STATES),
    "season_ratio_state": (_TO_STATES,),
    "gazetteer": (_TO_STATES,),
}

UNITS: dict[str, str] = {
    "population": "people", "area_km2": "km²", "typical_rainfall_mm": "mm", "travel_minutes_to_care": "minutes",
    "density_per_km2": "people per km²", "score": "share (0 to 1)", "score_low": "share (0 to 1)",
    "score_high": "share (0 to 1)", "positivity": "share (0 to 1)", "itn_use": "share (0 to 1)",
    "itn_access": "share (0 to 1)", "irs_coverage": "share (0 to 1)", "effective_treatment": "share (0 to 1)",
    "response_index": "share (0 to 1)", "seasonal_index": "share of the peak month", "rep_lon": "degrees",
    "rep_lat": "degrees", "horizon": "months",
    # ranges and further shares: the unit of the figure they bound or describe
    "itn_use_low_90": "share (0 to 1)", "itn_use_high_90": "share (0 to 1)", "itn_use_2024": "share (0 to 1)",
    "itn_use_2024_low_90": "share (0 to 1)", "itn_use_2024_high_90": "share (0 to 1)", "low": "share (0 to 1)",
    "high": "share (0 to 1)", "urban": "share (0 to 1)", "rural": "share (0 to 1)",
    "seasonal_floor": "share of the peak month", "high_season_share_of_peak": "share of the peak month",
    "lag_months": "months", "season_centre_month": "month of the year (1 to 13)", "season_months": "months",
    "month": "month of the year (1 to 12)", "peak_month": "month of the year (1 to 12)",
    "season_start_month": "month of the year (1 to 12)", "season_end_month": "month of the year (1 to 12)",
    "survey_year": "year", "lgas": "LGAs", "clusters": "survey clusters", "children_tested": "children",
    "children_tested_lower_bound": "children", "clusters_lower_bound": "survey clusters",
    "rank": "rank within the state (1 = highest)", "rank_low": "rank within the state (1 = highest)",
    "rank_high": "rank within the state (1 = highest)",
    # SMC planning (smc_lga, smc_state)
    "margin": "share (0 to 1)", "rain_shares": "share (0 to 1)", "rain_share_median": "share (0 to 1)",
    "case_share_modelled": "share (0 to 1)", "best4_start_month": "month of the year (1 to 12)",
    "first_cycle_month": "month of the year (1 to 12)", "cycle_months": "month of the year (1 to 12)",
    "onset_month_median": "month of the year (1 to 12)", "cessation_month_median": "month of the year (1 to 12)",
    "wet_season_months_median": "months", "cycles": "monthly cycles",
    "children_treated_per_cycle": "treatments (children reached per cycle)",
    "rain_this_year_rain_mm": "mm", "rain_this_year_average_mm": "mm", "rain_this_year_percent_of_average": "percent",
}

# Which credited sources (keys of pipeline/attribution.py) each file rests on, from the one licence
# table (attribution.BUNDLE_SOURCES): a file credits exactly the inputs behind it, and its
# `licenses` follow from whether it passes a source's values on or only derives from them.
def bundle_artefact(stem: str) -> Artefact:
    return Artefact(stem, "bundle file", *BUNDLE_SOURCES[stem])


TABLE_SOURCES: dict[str, tuple[str, ...]] = {stem: bundle_artefact(stem).sources for stem in BUNDLE_SOURCES}


@dataclass(frozen=True)
class BundleFile:
    name: str
    media_type: str
    data: bytes
    description: str
    scopes: tuple[str, ...] | None = None  # None: by `scopes_for` from the name

    @property
    def needs(self) -> tuple[str, ...]:
        return self.scopes if self.scopes is not None else scopes_for(self.name)


# --- tables --------------------------------------------------------------------------------


def _docs(produced: Iterable[Produced]) -> dict[str, dict[tuple[str, ...], Any]]:
    out: dict[str, dict[tuple[str, ...], Any]] = {}
    for p in produced:
        out.update(p.documents)
    return out


def _ordered(df: pl.DataFrame, table: str, drop: Iterable[str] = ()) -> pl.DataFrame:
    lead = [c for c in LEAD[table] if c in df.columns]
    missing = set(LEAD[table]) - set(df.columns)
    if missing:
        raise ValueError(f"{table}: the documents lack {sorted(missing)}")
    gone = set(drop)
    return df.select(*lead, *(c for c in df.columns if c not in lead and c not in gone))


def _month_number(col: str) -> pl.Expr:
    return pl.col(col).str.slice(0, 4).cast(pl.Int32) * 12 + pl.col(col).str.slice(5, 2).cast(pl.Int32)


def risk_table(estimates: Iterable[dict], forecasts: Iterable[dict], periods: dict, table: str) -> pl.DataFrame:
    """Estimated months and the full forecast (the 4-month response) as one long table."""
    est = tabular.frame(estimates)
    fc = tabular.frame(forecasts)
    df = pl.concat([est, fc], how="diagonal_relaxed")
    provisional = pl.DataFrame(
        [(m["period"], m.get("provisional")) for m in periods["months"]],
        schema={"period": pl.String, "provisional": pl.Boolean}, orient="row",
    )
    last = periods["last_estimated"]
    last_n = int(last[:4]) * 12 + int(last[5:7])
    df = df.with_columns(
        pl.when(pl.col("kind") == "forecast").then(_month_number("period") - last_n)
        .otherwise(None).cast(pl.Int32).alias("horizon"),
    )
    if "provisional" not in df.columns:
        df = df.join(provisional, on="period", how="left")
    key = "lga_code" if table == "risk_lga_month" else "state_code"
    # newest month first within each area: the forecast rows (with `horizon`) lead the file, so a reader
    # that types a column from the first rows (polars: 100, readr: 1000) sees a whole number there, not
    # only the empty cells of the estimated months (docs/downloads.md#row-order); for the same reason the LGAs
    # whose state publishes rank ranges come first (elsewhere `rank_low`/`rank_high` are empty)
    first = [pl.col("rank_low").is_null()] if "rank_low" in df.columns else []
    return _ordered(df, table).sort(*first, key, "period", descending=[False] * len(first) + [False, True])


def context_tables(docs: Mapping[str, dict]) -> tuple[pl.DataFrame, pl.DataFrame]:
    lga = tabular.frame(docs["/v1/context/lgas"][k] for k in sorted(docs["/v1/context/lgas"]))
    state = tabular.frame([docs["/v1/context/states"][()]])
    return _ordered(lga, "context_lga").sort("lga_code"), _ordered(state, "context_state").sort("state_code")


def _monthly(df: pl.DataFrame, lists: tuple[str, ...]) -> pl.DataFrame:
    """One row per area × calendar month from the 12-value lists; `high_months` becomes a flag."""
    n = df.height
    df = df.with_columns(
        *(pl.col(c).fill_null(pl.lit([None] * 12, dtype=pl.List(pl.Float64))) for c in lists),
        pl.int_ranges(1, 13, dtype=pl.Int32).alias("month"),
    )
    out = df.explode("month", *lists).with_columns(
        pl.col("high_months").list.contains(pl.col("month")).alias("high_season"),
    )
    assert out.height == 12 * n
    return out


def transmission_tables(docs: Mapping[str, dict]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    lga = tabular.frame(docs["/v1/transmission/lgas"][k] for k in sorted(docs["/v1/transmission/lgas"]))
    lga = _ordered(_monthly(lga, ("seasonal_index", "typical_rainfall_mm")), "transmission_lga_month",
                   drop=("high_months",))
    # LGAs whose season names a peak month first (weak seasons publish none): readers that type a column
    # from its first rows then meet a whole number in `peak_month` (docs/downloads.md: row order)
    lga = lga.sort(pl.col("peak_month").is_null(), "lga_code", "month")

    states_doc = docs["/v1/transmission/states"][()]
    national = states_doc["national"]
    areas = [{"area_type": "national", "state_code": NATIONAL_CODE, "state": "Nigeria", "zone": None,
              **national["season"]}]
    areas += [{"area_type": "state", "state_code": s["state_code"], "state": s["state"], "zone": s.get("zone"),
               **s["season"]} for s in states_doc["states"]]
    state = pl.from_dicts(areas, infer_schema_length=None)
    state = _ordered(_monthly(state, ("seasonal_index",)), "transmission_state_month", drop=("high_months",))

    trend = [{"area_type": "national", "state_code": NATIONAL_CODE, "state": "Nigeria", **e}
             for e in national["survey_trend"]]
    for s in states_doc["states"]:
        trend += [{"area_type": "state", "state_code": s["state_code"], "state": s["state"], **e}
                  for e in s["survey_trend"]]
    survey = _ordered(pl.from_dicts(trend, infer_schema_length=None), "survey_trend")
    return lga, state, survey


def ratio_tables(docs: Mapping[str, dict]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The season ratio routes as two tables (one row per area, start month and horizon)."""
    lga = tabular.frame(docs["/v1/transmission/ratios/lgas"][k] for k in sorted(docs["/v1/transmission/ratios/lgas"]))
    lga = _ordered(lga, "season_ratio_lga").sort("lga_code", "start_month", "horizon")
    state = tabular.frame([docs["/v1/transmission/ratios/states"][()]])
    return lga, _ordered(state, "season_ratio_state").sort("state_code", "start_month", "horizon")


def smc_tables(docs: Mapping[str, dict]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The SMC planning routes as two tables (one row per LGA, one per state)."""
    lga = tabular.frame(docs["/v1/transmission/smc/lgas"][k] for k in sorted(docs["/v1/transmission/smc/lgas"]))
    state = tabular.frame([docs["/v1/transmission/smc/states"][()]])
    # an empty list is an empty cell, as the CSV reads it back
    lga, state = (df.with_columns(pl.when(pl.col(c).list.len() > 0).then(pl.col(c)).alias(c)
                                  for c, t in df.schema.items() if isinstance(t, pl.List)) for df in (lga, state))
    return _ordered(lga, "smc_lga").sort("lga_code"), _ordered(state, "smc_state").sort("state_code")


def gazetteer(geography: Any) -> pl.DataFrame:
    states = geography.states.select("state_code", "state", pl.col("ocha_pcode").alias("admin1_pcode"), "zone")
    df = geography.lgas.join(states, on="state_code", how="left")
    return _ordered(df, "gazetteer").sort("lga_code")


# --- outlines ------------------------------------------------------------------------------


def lga_outlines(boundary_docs: Mapping[tuple[str, ...], dict], state_names: Mapping[str, str]) -> dict[str, Any]:
    """All LGAs as served per state, in one collection, with the API's field names."""
    features = []
    for key in sorted(boundary_docs):
        for f in boundary_docs[key]["features"]:
            p = f["properties"]
            features.append({"type": "Feature", "properties": {
                "lga_code": p["lgaCode"], "lga": p["lga"], "state_code": p["state"], "state": state_names[p["state"]],
            }, "geometry": f["geometry"]})
    features.sort(key=lambda f: f["properties"]["lga_code"])
    return {"type": "FeatureCollection", "source": OUTLINE_SOURCE, "features": features}


def _shapes(collection: dict[str, Any]) -> np.ndarray:
    return shapely.from_geojson([orjson.dumps(f["geometry"]) for f in collection["features"]])


def state_outlines(lgas: dict[str, Any], states: pl.DataFrame, geoms: np.ndarray | None = None) -> dict[str, Any]:
    """States dissolved from the served LGA outlines, so state and LGA edges coincide exactly."""
    geoms = _shapes(lgas) if geoms is None else geoms
    codes = np.array([f["properties"]["state_code"] for f in lgas["features"]])
    features = []
    for code, name in states.select("state_code", "state").sort("state_code").iter_rows():
        part = geoms[codes == code]
        try:
            merged = shapely.coverage_union_all(part)
        except shapely.errors.GEOSException:  # not an exact coverage after rounding: a plain union
            merged = shapely.union_all(part)
        features.append((code, name, merged))
    shapes = geometry_json(np.array([g for _, _, g in features], dtype=object))
    return {
        "type": "FeatureCollection",
        "source": OUTLINE_SOURCE + " State outlines are the union of their LGAs' outlines.",
        "features": [{"type": "Feature", "properties": {"state_code": c, "state": n}, "geometry": g}
                     for (c, n, _), g in zip(features, shapes, strict=True)],
    }


def geoparquet(collection: dict[str, Any], geoms: np.ndarray | None = None) -> bytes:
    """The collection as GeoParquet 1.1 (WKB geometry column, `geo` metadata), written by polars."""
    feats = collection["features"]
    geoms = _shapes(collection) if geoms is None else geoms
    props = pl.from_dicts([f["properties"] for f in feats], infer_schema_length=None)
    df = props.with_columns(pl.Series("geometry", shapely.to_wkb(geoms).tolist(), dtype=pl.Binary))
    xmin, ymin, xmax, ymax = shapely.total_bounds(geoms).tolist()
    geo = {
        "version": GEOPARQUET_VERSION,
        "primary_column": "geometry",
        "columns": {"geometry": {
            "encoding": "WKB",
            "geometry_types": sorted({f["geometry"]["type"] for f in feats}),
            "bbox": [xmin, ymin, xmax, ymax],
        }},
    }
    buf = io.BytesIO()
    df.write_parquet(buf, metadata={"geo": orjson.dumps(geo).decode()})
    return buf.getvalue()


# --- encoding ------------------------------------------------------------------------------


def _joined_lists(df: pl.DataFrame) -> pl.DataFrame:
    """Lists (from fields other producers may add, e.g. `peak_window`) `;`-joined as in CSV responses,
    so the CSV and the Parquet file hold the same values under the one documented schema."""
    lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
    if not lists:
        return df
    return df.with_columns(pl.col(c).cast(pl.List(pl.String)).list.join(tabular.LIST_SEPARATOR) for c in lists)


def csv_bytes(df: pl.DataFrame) -> bytes:
    """UTF-8 CSV, one header row: the writer the CSV responses use (see tabular.frame_csv)."""
    return tabular.frame_csv(_joined_lists(df))


def parquet_bytes(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    _joined_lists(df).write_parquet(buf, compression="zstd", statistics=True)
    return buf.getvalue()


def _kept(tables: Callable[[Mapping[str, dict]], T], docs: Mapping[str, dict], *routes: str) -> T:
    """`tables(docs)` for a function of the documents of `routes` only, kept between builds of a root by
    those documents and the code (pipeline.cache): the season, ratio, SMC and context tables read no
    month, so a new month reads them back."""
    return cache.call(f"bundle-{tables.__name__}", cache.code_of("pipeline.datasets.downloads", "pipeline.release.tabular"),
                      _tables_of, tables, {r: docs[r] for r in routes}, pl.__version__, local=True)


def _tables_of(tables: Callable[[Mapping[str, dict]], T], docs: Mapping[str, dict], _polars: str) -> T:
    return tables(docs)


def full_tables(produced: list[Produced], geography: Any) -> dict[str, pl.DataFrame]:
    """Every table with every field the documents have."""
    docs = _docs(produced)
    have = {p.dataset for p in produced}
    if "risk" not in have or "context" not in have:
        raise DatasetUnavailable("downloads need the risk and context documents")
    periods = docs["/v1/periods"][()]
    out: dict[str, pl.DataFrame] = {}
    out["risk_lga_month"] = risk_table(
        (docs["/v1/risk/lgas"][k] for k in sorted(docs["/v1/risk/lgas"])),
        (docs["/v1/forecasts/lgas"][k] for k in sorted(docs["/v1/forecasts/lgas"]) if k[1] == "4"),
        periods, "risk_lga_month")
    out["risk_state_month"] = risk_table(
        (docs["/v1/risk/states"][k] for k in sorted(docs["/v1/risk/states"])),
        [docs["/v1/forecasts/states"][("4",)]], periods, "risk_state_month")
    out["context_lga"], out["context_state"] = _kept(context_tables, docs, "/v1/context/lgas", "/v1/context/states")
    if "transmission" in have:
        lga, state, survey = _kept(transmission_tables, docs, "/v1/transmission/lgas", "/v1/transmission/states")
        out["transmission_lga_month"], out["transmission_state_month"], out["survey_trend"] = lga, state, survey
    if "ratios" in have:
        out["season_ratio_lga"], out["season_ratio_state"] = _kept(
            ratio_tables, docs, "/v1/transmission/ratios/lgas", "/v1/transmission/ratios/states")
    if "smc" in have:
        out["smc_lga"], out["smc_state"] = _kept(smc_tables, docs, "/v1/transmission/smc/lgas",
                                                 "/v1/transmission/smc/states")
    out["gazetteer"] = gazetteer(geography)
    return out


def empty_columns(frames: Mapping[str, pl.DataFrame]) -> dict[str, list[str]]:
    """Per table, the columns null in every row: a figure no source has for this table, such as the
    LGA-only ranges in the state table, or a survey range no round gives. They are left out of the bundle,
    as no reader can type a column from empty cells (polars and duckdb read it as text whatever
    datapackage.json declares); the README and `x-columns-left-out` list them (docs/downloads.md)."""
    return {name: [c for c in df.columns if df[c].null_count() == df.height] for name, df in frames.items()}


def _schema_types() -> dict[str, pl.DataType]:
    """Field name → polars type from the API's schemas, for columns that hold only nulls here."""
    from pipeline.site.openapi import resource_schemas

    to_polars = {"number": pl.Float64(), "integer": pl.Int64(), "boolean": pl.Boolean(), "string": pl.String()}
    out: dict[str, pl.DataType] = {}
    for schema in resource_schemas().values():
        for name, prop in (schema.get("properties") or {}).items():
            kinds = prop.get("type") if isinstance(prop, dict) else None
            kinds = [kinds] if isinstance(kinds, str) else (kinds or [])
            for k in kinds:
                if k in to_polars:
                    out.setdefault(name, to_polars[k])
                    break
    return out


def _typed_nulls(df: pl.DataFrame) -> pl.DataFrame:
    """A column null in every row (e.g. a figure no source has) gets the type the API documents."""
    empty = [c for c, t in df.schema.items() if t == pl.Null]
    if not empty:
        return df
    types = _schema_types()
    return df.with_columns(pl.col(c).cast(types.get(c, pl.String())) for c in empty)


def table_files(frames: Mapping[str, pl.DataFrame]) -> list[BundleFile]:
    files: list[BundleFile] = []
    for name, df in frames.items():
        files.append(BundleFile(f"{name}.csv", CSV, csv_bytes(df), TABLE_TITLES[name] + " CSV."))
        files.append(BundleFile(f"{name}.parquet", PARQUET, parquet_bytes(df), TABLE_TITLES[name] + " Parquet."))
    return files


def outline_files(boundary_docs: Mapping[tuple[str, ...], dict], geography: Any) -> list[BundleFile]:
    names = dict(geography.states.select("state_code", "state").iter_rows())
    lgas = lga_outlines(boundary_docs, names)
    lga_shapes = _shapes(lgas)
    states = state_outlines(lgas, geography.states, lga_shapes)
    out = []
    for stem, coll, shapes, what in (
        ("lga_outlines", lgas, lga_shapes, "All 774 LGA outlines (simplified, as served by /v1/boundaries/lgas), "
         "properties lga_code, lga, state_code, state."),
        ("state_outlines", states, None, "All 37 state outlines (the union of their LGAs), properties "
         "state_code, state."),
    ):
        out.append(BundleFile(f"{stem}.geojson", GEOJSON, orjson.dumps(coll), what + " GeoJSON."))
        out.append(BundleFile(f"{stem}.parquet", PARQUET, geoparquet(coll, shapes), what + " GeoParquet 1.1."))
    return out


# --- the description files and the index (need the release id) --------------------------


# Where a column name means another thing in one table: the season ratio tables' `ratio`, `low`, `high`
# are ratios of case counts, not shares of children (UNITS above holds the survey tables' meaning).
RATIO_NOTES = {
    "ratio": "Expected reported cases `horizon` months after the start month as a ratio to the start month's "
             "cases (a ratio of two counts, no unit), from the published seasonal index. Modelled.",
    "low": "Lower end of the 80 % range of the ratio (a ratio of case counts), from out-of-sample errors in "
           "whole-state cross-validation on dated case series; empty where none was run.",
    "high": "Upper end of the 80 % range of the ratio (a ratio of case counts); empty where none was run.",
    **{f"q{q}": f"The ratio's {q} % quantile (a ratio of case counts): the ratio times the split-conformal quantile "
                f"of out-of-sample errors in whole-state cross-validation on dated case series; empty where none "
                f"was run. Modelled." for q in (10, 25, 50, 75, 90)},
}
TABLE_FIELDS: dict[str, dict[str, tuple[str, str]]] = {
    t: {c: (note, "ratio of case counts") for c, note in RATIO_NOTES.items()}
    for t in ("season_ratio_lga", "season_ratio_state")
}


def _field_notes(produced: Iterable[Produced]) -> dict[str, str]:
    """Field descriptions in priority order: the bundle's own, the producers' source blocks, the API schemas."""
    from pipeline.site.openapi import resource_schemas

    notes: dict[str, str] = {}
    for schema in resource_schemas().values():
        for name, prop in (schema.get("properties") or {}).items():
            if isinstance(prop, dict) and prop.get("description"):
                notes.setdefault(name, prop["description"])
    # what a field measures (the API's description) first, then where its figures come from: a source
    # line alone ("NDHS 2018 …") would not say the unit or the population
    sources: dict[str, str] = {}
    for p in produced:
        for docs in p.documents.values():
            for doc in list(docs.values())[:1]:
                fields = doc.get("source", {}).get("fields") if isinstance(doc, dict) and isinstance(
                    doc.get("source"), dict) else None
                if isinstance(fields, dict):
                    sources.update({k: v for k, v in fields.items() if isinstance(v, str)})
    for name, line in sources.items():
        notes[name] = f"{notes[name]} Source: {line}" if name in notes else line
    notes.update(OWN_FIELDS)
    return notes


def _field_type(name: str, dtype: pl.DataType) -> dict[str, Any]:
    if name == "period":
        return {"type": "yearmonth"}
    if dtype == pl.Boolean:
        return {"type": "boolean", "trueValues": ["true"], "falseValues": ["false"]}
    if dtype.is_integer():
        return {"type": "integer"}
    if dtype.is_float():
        return {"type": "number"}
    if isinstance(dtype, pl.List):
        return {"type": "string", "format": "default", "x-list-separator": tabular.LIST_SEPARATOR}
    return {"type": "string"}


def _sources(keys: Iterable[str] | None = None, artefact: Artefact | None = None) -> list[dict[str, str]]:
    """The credited sources with these keys (every source when None), in the attribution order; with
    `artefact`, each says how the file uses it (`x-use`) under which terms (`x-terms`)."""
    from pipeline.attribution import SOURCES, source

    chosen = SOURCES if keys is None else tuple(source(k) for k in dict.fromkeys(keys))
    out = [{"title": f"{s.name}: {s.provider}", "licence": s.licence, "via": s.via} for s in chosen]
    if artefact is not None:
        for entry, s in zip(out, chosen, strict=True):
            entry["x-use"] = ("summary statistics only" if s.key in artefact.summary_only else
                              "values passed on unchanged" if s.key in artefact.passed_on else "derived from")
            entry["x-terms"] = s.terms
    return out


def _resource_terms(stem: str) -> dict[str, Any]:
    a = bundle_artefact(stem)
    return {"licenses": resource_licences(a), "sources": _sources(a.sources, a), "x-terms": artefact_terms(a)}


def datapackage(release_id: str, model_version: str | None, updated_at: str, frames: Mapping[str, pl.DataFrame],
                files: list[BundleFile], notes: Mapping[str, str], base_url: str = DEFAULT_BASE_URL) -> dict[str, Any]:
    """A Frictionless Data Package: every table (CSV and Parquet) with its schema, plus the outlines.

    The first licence is the service's own for its derived figures; the sources' follow."""
    from pipeline.attribution import DERIVED_LICENCE, DERIVED_LICENCE_TERMS, service_citation

    by_name = {f.name: f for f in files}
    resources: list[dict[str, Any]] = []
    for name, df in frames.items():
        fields = []
        for col, dtype in df.schema.items():
            field: dict[str, Any] = {"name": col, "description": notes.get(col, ""), **_field_type(col, dtype)}
            if col in UNITS:
                field["unit"] = UNITS[col]
            if col in TABLE_FIELDS.get(name, {}):
                field["description"], field["unit"] = TABLE_FIELDS[name][col]
            fields.append(field)
        schema: dict[str, Any] = {"fields": fields, "missingValues": [""]}
        keyed = dict(schema)
        if name in PRIMARY_KEYS:
            keyed["primaryKey"] = list(PRIMARY_KEYS[name])
        refs = [fk for fk in FOREIGN_KEYS.get(name, ()) if fk["fields"] in df.columns
                and fk["reference"]["resource"] in frames]
        if refs:
            keyed["foreignKeys"] = [dict(fk) for fk in refs]
        for ext, fmt in (("csv", "csv"), ("parquet", "parquet")):
            f = by_name[f"{name}.{ext}"]
            res: dict[str, Any] = {
                "name": f"{name}-{ext}" if ext != "csv" else name,
                "path": f.name, "title": TABLE_TITLES[name], "format": fmt,
                "mediatype": f.media_type.split(";")[0], "bytes": len(f.data),
                "hash": "sha256:" + _sha256(f.data), "schema": keyed if ext == "csv" else schema,
                **_resource_terms(name),
            }
            if ext == "csv":
                res["encoding"] = "utf-8"
                res["dialect"] = {"delimiter": ",", "header": True}
            else:
                # Typed already: described by the same schema, checked as a file (size, hash) since
                # Table Schema validators read Parquet through pandas, which turns nullable integers
                # into floats.
                res["type"] = "file"
                res["description"] = f"The same rows and columns as {name}.csv, typed (Parquet, zstd)."
            resources.append(res)
    for stem, props in (("lga_outlines", ("lga_code", "lga", "state_code", "state")),
                        ("state_outlines", ("state_code", "state"))):
        for ext, fmt in (("geojson", "geojson"), ("parquet", "geoparquet")):
            f = by_name[f"{stem}.{ext}"]
            geometry = ("GeoJSON Polygon or MultiPolygon, longitude/latitude (WGS 84)" if ext == "geojson"
                        else "WKB Polygon or MultiPolygon, longitude/latitude (OGC:CRS84)")
            fields = [{"name": c, "type": "string", "description": notes.get(c, "")} for c in props]
            fields.append({"name": "geometry", "type": "geojson" if ext == "geojson" else "any",
                           "description": "The outline: " + geometry + "."})
            resources.append({
                "name": f"{stem}-{ext}", "path": f.name, "format": fmt, "type": "file" if ext == "parquet" else "json",
                "mediatype": f.media_type.split(";")[0], "bytes": len(f.data), "hash": "sha256:" + _sha256(f.data),
                "description": f.description + (" Feature properties and geometry:" if ext == "geojson" else
                                                " Columns:") + " see `schema`.",
                "schema": {"fields": fields}, **_resource_terms(stem),
            })
    return {
        "profile": "data-package",
        "name": PACKAGE_NAME,
        "id": release_id,
        "title": "Malaria risk data for Nigeria, release " + release_id,
        "description": "Modelled malaria risk per LGA and state by month (estimates and forecasts), coverage "
                       "context, transmission seasons, survey trends, a gazetteer and outlines, exactly as the "
                       "API served them in this release. See README.md.",
        "version": release_id,
        "created": updated_at,
        "homepage": f"{base_url}/docs/",
        "keywords": ["malaria", "Nigeria", "LGA", "risk", "forecast"],
        "x-model-version": model_version,
        # the package's licences and sources follow from its resources' (the licence table)
        "licenses": [dict(DERIVED_LICENCE), *_union(lic for r in resources for lic in r["licenses"]
                                                    if lic.get("path") != DERIVED_LICENCE["path"])],
        "x-citation": service_citation(release_id, model_version, updated_at, base_url, ZIP_NAME),
        "x-licence-terms": DERIVED_LICENCE_TERMS,
        "sources": _union({k: v for k, v in src.items() if not k.startswith("x-")}
                          for r in resources for src in r["sources"]),
        "resources": resources,
    }


def _union(items: Iterable[dict[str, str]]) -> list[dict[str, str]]:
    """Distinct entries in first-seen order."""
    seen: dict[bytes, dict[str, str]] = {}
    for item in items:
        seen.setdefault(orjson.dumps(item, option=orjson.OPT_SORT_KEYS), item)
    return list(seen.values())


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def how_values_were_made(model_version: str | None, season_method: Mapping[str, Any] | None,
                         cross_fitted_states: Iterable[str] = (), score_terms: Iterable[str] | None = None) -> str:
    """The README's account of the scores and seasons, read from what the build adopted: the score's terms
    (its /v1/periods `score_terms`; the words come from pipeline.model.terms) and which season rule was
    published."""
    from pipeline.model import terms

    adopted = terms.adopted_from(score_terms)
    months = (f"an estimated month's score is {terms.made_of(terms.ESTIMATED, adopted)}; a forecast month's is "
              f"{terms.made_of(terms.FORECAST, adopted)}.")
    rule = (season_method or {}).get("season_rule")
    if rule == "model_4":
        cross = sorted(cross_fitted_states)
        season = ("Transmission seasons are fitted to routine case data (annual and semi-annual harmonics of log "
                  "cases, partially pooled between areas), with each area's rainfall climatology, latitude and "
                  "dry-season length as covariates" + (
                      f"; in the states with dated case series ({', '.join(cross)}) the season published is the "
                      "one fitted without that state's series." if cross else "."))
    elif rule is None:
        season = "Transmission seasons are not part of this release."
    else:
        season = "Transmission seasons are derived from typical rainfall shifted by the delay from rain to cases."
    return ("Risk scores are modelled, not measured: the microscopy positivity in children 6–59 months a survey of "
            "the area would be expected to find, from a survey baseline of parasite positivity per state (DHS/MIS "
            f"rounds), split between urban and rural LGAs, {months} `score_low`/`score_high` give the 80 % "
            "predictive range. "
            f"State figures are population-weighted from their LGAs. {season}")


def months_of(periods: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the bundle says of its months (README and datapackage.json `x-months`), from /v1/periods: what
    each kind is built from (pipeline.model.terms, the one wording) and whether each had ended at the load."""
    if not periods:
        return {}
    return {
        "last_estimated": periods["last_estimated"], "last_forecast": periods["last_forecast"],
        "kind_descriptions": periods.get("kind_descriptions", {}),
        "season_after_survey": periods.get("season_after_survey"),
        "all_passed_at_release": periods.get("all_passed_at_release"),
        "months": [{k: m.get(k) for k in ("period", "kind", "basis", "month_end", "passed_at_release")}
                   for m in periods["months"]],
    }


def months_section(months: Mapping[str, Any], left_out: Mapping[str, list[str]]) -> list[str]:
    """The README's "Months" section: kinds, whether they have passed, and the columns left out."""
    lines: list[str] = []
    if months:
        lines += ["## Months", "",
                  f"Estimated months run to {months['last_estimated']}, forecast months to {months['last_forecast']} "
                  "(`kind` in the risk tables; `x-months` in datapackage.json lists every month with `month_end` "
                  "and `passed_at_release`).", ""]
        lines += [f"- `{kind}`: {words}." for kind, words in months["kind_descriptions"].items()]
        if (months.get("season_after_survey") or {}).get("description"):
            lines += ["", months["season_after_survey"]["description"]]
        if months.get("all_passed_at_release"):
            lines += ["", "Every month of this release, the forecast months included, had ended when the data were "
                      "loaded: the release forecasts nothing still to come; a newer release may exist."]
        lines.append("")
    gone = {t: cols for t, cols in left_out.items() if cols}
    if gone:
        lines += ["## Columns left out", "",
                  "A column empty in every row of a table is left out of that table (no reader could type it from "
                  "empty cells); the API serves these fields as null:", ""]
        lines += [f"- `{t}`: " + ", ".join(f"`{c}`" for c in cols) for t, cols in gone.items()]
        lines.append("")
    return lines


def readme(release_id: str, model_version: str | None, updated_at: str, files: list[BundleFile],
           base_url: str = DEFAULT_BASE_URL, made: str | None = None, extra: Iterable[str] = ()) -> bytes:
    from pipeline.attribution import (
        DERIVED_LICENCE,
        DERIVED_LICENCE_TERMS,
        SOURCES,
        service_citation,
    )

    lines = [
        f"# Malaria risk data for Nigeria — release {release_id}", "",
        "The whole data set of the malaria risk data service for Nigeria, as its API served it in this "
        "release: risk scores per LGA and state for every month (estimates and forecasts, with ranges), "
        "coverage context, transmission seasons, survey trends, a gazetteer, and LGA and state outlines.", "",
        f"- Release id: `{release_id}` (fetch the same bytes again at `/v1/downloads/{release_id}/<file>` "
        "for as long as the release is kept)",
        f"- Model version: `{model_version}`",
        f"- Data loaded: {updated_at}", "",
        "## Citation", "",
        service_citation(release_id, model_version, updated_at, base_url, ZIP_NAME)
        + " Please also credit the sources below.", "",
        "## Licence", "",
        f"{DERIVED_LICENCE_TERMS} Licence text: {DERIVED_LICENCE['path']}", "",
        "Terms of each table and outline file (the licence table):", "",
        *[f"- `{stem}`: {artefact_terms(bundle_artefact(stem))}" for stem in BUNDLE_SOURCES], "",
        "## Files", "",
    ]
    lines += [f"- `{f.name}` ({len(f.data):,} bytes): {f.description}" for f in files]
    lines += [
        "- `datapackage.json`: Frictionless Data Package describing every file, column, type and unit.",
        "- `SHA256SUMS`: SHA-256 of every other file (`sha256sum -c SHA256SUMS`).", "",
        "## How the values were made", "",
        (made or how_values_were_made(model_version, None)) + " "
        "Context figures are survey and modelled values and are not score inputs. "
        "Empty cells are nulls: the sources hold no figure there. Details: /docs/model.html, "
        "/docs/seasons.html, /docs/context.html, /docs/geography.html and /docs/downloads.html.", "",
        *extra,
        "## Sources and licences", "",
        "Each source keeps its own licence; credit them when you use the data.", "",
    ]
    for s in SOURCES:
        lines.append(f"- **{s.name}** — {s.provider}. Used for: {s.used_for}. Licence: {s.licence}. "
                     f"Via: {s.via}." + (f" {s.note}" if s.note else "") + (f" Cite as: {s.citation}" if s.citation else ""))
    return ("\n".join(lines) + "\n").encode("utf-8")


def sha256sums(files: Iterable[BundleFile]) -> bytes:
    return "".join(f"{_sha256(f.data)}  {f.name}\n" for f in files).encode("utf-8")


def folder_name(release_id: str) -> str:
    """The one folder the zip unpacks into: the package and its release."""
    return f"{PACKAGE_NAME}-{release_id}"


def zip_bytes(files: Iterable[BundleFile], updated_at: str, folder: str = "") -> bytes:
    """Every file in one folder of one zip (unpacking it leaves one folder, not 27 files, where it is
    unpacked); text deflated, Parquet stored (already compressed). Fixed timestamps, so the same files give
    the same zip."""
    stamp = (int(updated_at[0:4]), int(updated_at[5:7]), int(updated_at[8:10]),
             int(updated_at[11:13]), int(updated_at[14:16]), int(updated_at[17:19]))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in files:
            info = zipfile.ZipInfo(f"{folder}/{f.name}" if folder else f.name, date_time=stamp)
            info.external_attr = 0o644 << 16
            packed = f.media_type in (PARQUET, ZIP)
            info.compress_type = zipfile.ZIP_STORED if packed else zipfile.ZIP_DEFLATED
            z.writestr(info, f.data, compresslevel=None if packed else 6)
    return buf.getvalue()


def index_document(release_id: str, model_version: str | None, files: Iterable[BundleFile]) -> dict[str, Any]:
    return {
        "release_id": release_id,
        "model_version": model_version,
        "files": [{"name": f.name, "path": DOWNLOAD_FILE.path_for(release_id, f.name), "media_type": f.media_type,
                   "bytes": len(f.data), "sha256": _sha256(f.data), "description": f.description,
                   "scopes": list(f.needs)}
                  for f in files],
    }


def bundle(files: list[BundleFile], updated_at: str, model_version: str | None,
           describe: Callable[[str], dict[str, Any]] | None = None, base_url: str = DEFAULT_BASE_URL,
           made: str | None = None, extra: Iterable[str] = ()) -> Produced:
    """The bundle as a producer's output: data files now, the files naming the release id at stamp time."""

    def stamp(release_id: str) -> tuple[Documents, StaticFiles]:
        own = list(files)
        if describe is not None:
            own.append(BundleFile("datapackage.json", JSON,
                                  orjson.dumps(describe(release_id), option=orjson.OPT_INDENT_2),
                                  "Frictionless Data Package: every file, column, type, unit, source and licence."))
        own.append(BundleFile("README.md", MARKDOWN, readme(release_id, model_version, updated_at, files, base_url, made,
                                                           extra),
                              "What the bundle is, the release id, model version, citation, sources, licences "
                              "and how the values were made."))
        own.append(BundleFile("SHA256SUMS", TEXT, sha256sums(own), "SHA-256 of every other file."))
        own.append(BundleFile(ZIP_NAME, ZIP, zip_bytes(own, updated_at, folder_name(release_id)),
                              f"Every file above in one zip, in the folder {folder_name(release_id)}/.", zip_scopes))
        out = {DOWNLOAD_FILE.key(f.name): (f.media_type, f.data) for f in own[len(files):]}
        return {ROUTE: {(): index_document(release_id, model_version, own)}}, out

    # the zip holds every file: it needs every scope any of them needs
    zip_scopes = scopes_for(ZIP_NAME, [f.needs for f in files] + [()])
    scopes = {DOWNLOAD_FILE.key(f.name): f.needs for f in files}
    scopes.update({DOWNLOAD_FILE.key(n): () for n in DESCRIPTION_FILES})
    scopes[DOWNLOAD_FILE.key(ZIP_NAME)] = zip_scopes
    return Produced("downloads", {}, files={DOWNLOAD_FILE.key(f.name): (f.media_type, f.data) for f in files},
                    stamp=stamp, scopes=scopes)


def produce(ctx: BuildContext) -> Produced:
    produced: list[Produced] = ctx.produced
    model_version = next((p.model_version for p in produced if p.model_version), None)
    full = full_tables(produced, ctx.geography)
    left_out = empty_columns(full)
    frames = {name: _typed_nulls(df.drop(left_out[name])) for name, df in full.items()}
    docs = _docs(produced)
    months = months_of((docs.get("/v1/periods") or {}).get(()))
    # the outlines (GeoJSON, GeoParquet) are made of the boundaries' documents, themselves of admin/ only:
    # kept between builds like the boundaries (pipeline.cache)
    outlines = cache.cached("bundle-outlines", ctx.data_dir, ["admin"],
                            cache.code_of("pipeline.datasets", "pipeline.attribution", "pipeline.geography",
                                          "pipeline.sources", "pipeline.release.tabular", "edge"),
                            lambda: outline_files(docs["/v1/boundaries/lgas"], ctx.geography), local=True)
    files = table_files(frames) + outlines
    notes = _field_notes(produced)

    def describe(release_id: str) -> dict[str, Any]:
        package = datapackage(release_id, model_version, ctx.updated_at, frames, files, notes, ctx.base_url)
        package["x-months"] = months
        package["x-columns-left-out"] = {t: cols for t, cols in left_out.items() if cols}
        return package

    states_doc = docs.get("/v1/transmission/states", {}).get(())
    made = how_values_were_made(
        model_version, (states_doc or {}).get("method"),
        [s["state"] for s in (states_doc or {}).get("states", []) if s["season"].get("fitted_without_own_series")],
        (docs.get("/v1/periods", {}).get(()) or {}).get("score_terms"))
    return bundle(files, ctx.updated_at, model_version, describe, ctx.base_url, made,
                  months_section(months, left_out))
