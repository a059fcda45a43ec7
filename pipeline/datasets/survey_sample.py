"""Sample information for survey-trend entries (SPEC 2.7) from sources that give only
lower bounds: additive `*_lower_bound` fields and a `small_sample` that is set only
where it is certain.

SPEC's `clusters` and `children_tested` mean exact counts. The sources found give
undercounts (clusters holding a child aged 12-23 months; children in clusters matched
to an LGA; urban clusters only), so they never go into those fields: each entry gets
`<count>_lower_bound` with `<count>_lower_bound_covers` (what exactly was counted) and
`<count>_lower_bound_source`, for `children_tested` and `clusters`, null where no source
bounds the count. Flat fields keep the entries one CSV row each. Of several bounds for
one count, the largest is kept (every one of them is a true lower bound). A lower bound of 100
children or more makes `small_sample` certainly false; below 100 it stays unknown
(null). docs/survey.md describes every field's origin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from pipeline.attribution import credit, source
from pipeline.errors import InputError
from pipeline.sources import hbhi_microscopy, ndhs_clusters, urban_clusters
from pipeline.sources.names import state_code_for

SMALL_SAMPLE_CHILDREN = 100  # SPEC 2.7: small_sample is true when fewer than 100 children were tested
QUANTITIES = ("children_tested", "clusters")

COVERS = {
    "hbhi_pfpr_lga_2018": "children 6-59 months with a microscopy result in survey clusters matched to an LGA "
                          "(8,118 nationally; clusters without a usable position drop out)",
    "ndhs2018_clusters": "survey clusters holding at least one child aged 12-23 months (1,324 of the 1,389 clusters)",
    "numalaria_urban_clusters:children_tested": "children 6-59 months with a microscopy result in urban clusters only",
    "numalaria_urban_clusters:clusters": "urban clusters with at least one child 6-59 months with a microscopy "
                                         "result (rural clusters are not in the source)",
}
# Which test a children count is about: it bounds only entries of that test.
CHILDREN_TEST = "microscopy"

BOUNDS_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "survey_year": pl.Int64,
    "state_code": pl.Utf8,  # null = national
    "quantity": pl.Utf8,
    "value": pl.Int64,
    "key": pl.Utf8,  # attribution key
    "covers": pl.Utf8,
}
SOURCE_KEYS = ("hbhi_pfpr_lga_2018", "ndhs2018_clusters", "numalaria_urban_clusters")

NOTE = (
    "children_tested_lower_bound and clusters_lower_bound carry counts that the sources give only as lower "
    "bounds (undercounts of the survey's sample), kept out of clusters and children_tested, which mean exact "
    "counts; their _covers field says what exactly was counted and their _source field where it comes from. "
    "Of several bounds the largest is shown. "
    "Children bounds count microscopy results and are attached to microscopy entries only. small_sample is "
    "false where a lower bound of 100 or more children makes that certain, and stays null where the exact "
    "number is unknown and no bound settles it."
)


# --- pure computation ------------------------------------------------------------------


def _codes(frame: pl.DataFrame, states: pl.DataFrame, path: Path | str) -> pl.DataFrame:
    """Attach `state_code` to rows with a `state` name; an unknown name stops the build."""
    table = {n: state_code_for(n, states) for n in frame["state"].unique().to_list()}
    unknown = sorted(n for n, c in table.items() if c is None)
    if unknown:
        raise InputError(path, f"state name(s) matching none of the 37 states: {', '.join(unknown)}")
    return frame.with_columns(pl.col("state").replace_strict(table, return_dtype=pl.Utf8).alias("state_code"))


def _with_national(per_state: pl.DataFrame) -> pl.DataFrame:
    """Add national rows (state_code null): the sum of state lower bounds is a lower bound."""
    national = per_state.group_by("survey_year", "quantity", "key", "covers").agg(pl.col("value").sum()).with_columns(
        pl.lit(None, dtype=pl.Utf8).alias("state_code")
    )
    return pl.concat([per_state, national.select(per_state.columns)])


def hbhi_bounds(lga_children: pl.DataFrame, states: pl.DataFrame, path: Path | str = "") -> pl.DataFrame:
    """Children-tested lower bounds per state (2018) from the HBHI LGA table."""
    per = _codes(lga_children, states, path).group_by("state_code").agg(pl.col("children").sum().alias("value"))
    return _with_national(per.select(
        pl.lit(hbhi_microscopy.SURVEY_YEAR, dtype=pl.Int64).alias("survey_year"), "state_code",
        pl.lit("children_tested").alias("quantity"), pl.col("value").cast(pl.Int64),
        pl.lit("hbhi_pfpr_lga_2018").alias("key"), pl.lit(COVERS["hbhi_pfpr_lga_2018"]).alias("covers"),
    ))


def ndhs_cluster_bounds(clusters: pl.DataFrame, states: pl.DataFrame, path: Path | str = "") -> pl.DataFrame:
    """Cluster lower bounds per state (2018) from the NDHS 2018 cluster table."""
    per = _codes(clusters, states, path)
    dup = per.filter(pl.col("state_code").is_duplicated())
    if dup.height:
        raise InputError(path, f"state {dup['state_code'][0]} given twice", row=int(dup["row"][0]))
    return _with_national(per.select(
        pl.lit(ndhs_clusters.SURVEY_YEAR, dtype=pl.Int64).alias("survey_year"), "state_code",
        pl.lit("clusters").alias("quantity"), pl.col("clusters").cast(pl.Int64).alias("value"),
        pl.lit("ndhs2018_clusters").alias("key"), pl.lit(COVERS["ndhs2018_clusters"]).alias("covers"),
    ))


def urban_bounds(clusters: pl.DataFrame, states: pl.DataFrame, path: Path | str = "") -> pl.DataFrame:
    """Cluster and children lower bounds per state and survey from the urban clusters
    (only clusters where at least one child has a microscopy result count)."""
    tested = _codes(clusters, states, path).filter(pl.col("children") > 0)
    per = tested.group_by("survey_year", "state_code").agg(
        pl.col("children").sum().alias("children_tested"), pl.len().cast(pl.Int64).alias("clusters")
    )
    long = per.unpivot(index=["survey_year", "state_code"], on=list(QUANTITIES), variable_name="quantity",
                       value_name="value")
    key = "numalaria_urban_clusters"
    return _with_national(long.select(
        "survey_year", "state_code", "quantity", pl.col("value").cast(pl.Int64), pl.lit(key).alias("key"),
        pl.col("quantity").replace_strict(
            {q: COVERS[f"{key}:{q}"] for q in QUANTITIES}, return_dtype=pl.Utf8).alias("covers"),
    ))


def largest(bounds: pl.DataFrame) -> pl.DataFrame:
    """One bound per (survey year, area, quantity): the largest; ties by source key."""
    if bounds.height == 0:
        return bounds
    return (
        bounds.sort(["survey_year", "state_code", "quantity", "value", "key"],
                    descending=[False, False, False, True, False], nulls_last=False)
        .unique(subset=["survey_year", "state_code", "quantity"], keep="first", maintain_order=True)
    )


FIELDS = tuple(f"{q}_lower_bound{suffix}" for q in QUANTITIES for suffix in ("", "_covers", "_source"))


def _bound_fields(quantity: str, row: dict[str, Any] | None) -> dict[str, Any]:
    name = f"{quantity}_lower_bound"
    if row is None:
        return {name: None, f"{name}_covers": None, f"{name}_source": None}
    return {name: row["value"], f"{name}_covers": row["covers"], f"{name}_source": credit(row["key"])}


def attach_to_entries(entries: list[dict[str, Any]], bounds: pl.DataFrame) -> list[dict[str, Any]]:
    """Copies of one area's SPEC 2.7 entries with the lower-bound fields (`FIELDS`) added
    and `small_sample` set where a bound makes it certain. `bounds` holds that area's rows
    of `largest`.

    An exact count always wins: no bound is attached where the SPEC field has a value.
    """
    index = {(r["survey_year"], r["quantity"]): r for r in bounds.iter_rows(named=True)}
    out = []
    for e in entries:
        year = e["survey_year"]
        children = index.get((year, "children_tested"))
        if e.get("children_tested") is not None or e.get("test") != CHILDREN_TEST:
            children = None
        clusters = None if e.get("clusters") is not None else index.get((year, "clusters"))
        small = e.get("small_sample")
        if e.get("children_tested") is None and children is not None and children["value"] >= SMALL_SAMPLE_CHILDREN:
            small = False  # at least 100 children were tested: certainly not a small sample
        out.append({**e, "small_sample": small, **_bound_fields("children_tested", children),
                    **_bound_fields("clusters", clusters)})
    return out


def attach(
    national: list[dict[str, Any]], states: dict[str, list[dict[str, Any]]], bounds: pl.DataFrame
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """`attach_to_entries` for the national trend and every state trend."""
    best = largest(bounds) if bounds.height else pl.DataFrame(schema=BOUNDS_SCHEMA)
    nat = attach_to_entries(national, best.filter(pl.col("state_code").is_null()))
    by_state = {code: attach_to_entries(entries, best.filter(pl.col("state_code") == code))
                for code, entries in states.items()}
    return nat, by_state


# --- I/O ---------------------------------------------------------------------------------


def read_bounds(data_dir: Path, states: pl.DataFrame) -> pl.DataFrame:
    """Every lower bound the sample sources give (schema `BOUNDS_SCHEMA`). A source file
    that is absent contributes nothing: its counts stay null, which is what they were."""
    data_dir = Path(data_dir)
    parts = [pl.DataFrame(schema=BOUNDS_SCHEMA)]
    p = data_dir / hbhi_microscopy.LGA_CSV
    if p.is_file():
        parts.append(hbhi_bounds(hbhi_microscopy.read_lga_children(p), states, p))
    p = data_dir / ndhs_clusters.CLUSTERS_CSV
    if p.is_file():
        parts.append(ndhs_cluster_bounds(ndhs_clusters.read_state_clusters(p), states, p))
    p = data_dir / urban_clusters.CLUSTERS_CSV
    if p.is_file():
        parts.append(urban_bounds(urban_clusters.read_urban_clusters(p), states, p))
    return pl.concat([part.select(list(BOUNDS_SCHEMA)).cast(pl.Schema(BOUNDS_SCHEMA)) for part in parts])


def source_block() -> dict[str, Any]:
    """For the transmission response's `source`: the note and the credited sources."""
    return {"note": NOTE, "sources": [source(k).to_json() for k in SOURCE_KEYS]}
