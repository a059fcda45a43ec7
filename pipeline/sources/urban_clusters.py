"""Reader of the urban survey clusters of NMIS 2010, NMIS 2015 and NDHS 2018
(`malaria/numalaria_urban_clusters/`, see its SOURCES.md).

The byte copy of the repository's cluster table is read (not the derived summary), so
the per-state counts are made here, where they can be tested. Rural clusters are not
in the file: per state, urban clusters and children tested by microscopy there are
lower bounds of the state's sample.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError
from pipeline.sources._csv import read_text_columns, require_rows

CLUSTERS_CSV = Path("malaria") / "numalaria_urban_clusters" / "multivariate_analysis_dataset.csv"
SURVEY_YEARS = (2010, 2015, 2018)


def read_urban_clusters(path: Path) -> pl.DataFrame:
    """One row per urban cluster: `survey_year`, `cluster` (DHS v001), `state` (name as
    written), `children` (unweighted children 6-59 months with a microscopy result; null
    where the file says NA, i.e. no child of the cluster has a result), `row`."""
    frame = (
        read_text_columns(path, ["v001", "dhs_year", "shstate", "child_6_59_tested_malaria"])
        .with_row_index("row", offset=2)
        .with_columns(pl.col("row").cast(pl.Int64))
    )
    out = frame.select(
        pl.col("dhs_year").cast(pl.Int64, strict=False).alias("survey_year"),
        pl.col("v001").cast(pl.Int64, strict=False).alias("cluster"),
        pl.col("shstate").alias("state"),
        pl.when(pl.col("child_6_59_tested_malaria") == "NA").then(None)
        .otherwise(pl.col("child_6_59_tested_malaria")).cast(pl.Float64, strict=False).alias("children"),
        "row",
        "child_6_59_tested_malaria",
    )
    checks = [
        (~pl.col("survey_year").is_in(list(SURVEY_YEARS)) | pl.col("survey_year").is_null(),
         f"dhs_year not one of {SURVEY_YEARS}"),
        (pl.col("cluster").is_null(), "v001 is not a whole number"),
        (pl.col("state").is_null() | (pl.col("state") == ""), "shstate is empty"),
        ((pl.col("children").is_null() & (pl.col("child_6_59_tested_malaria") != "NA"))
         | (pl.col("children") < 0) | (pl.col("children") != pl.col("children").round(0)),
         "child_6_59_tested_malaria is not a whole number >= 0"),
        (~pl.struct("survey_year", "cluster").is_first_distinct(), "cluster appears twice in one survey"),
    ]
    require_rows(path, out, checks)
    return out.drop("child_6_59_tested_malaria").with_columns(pl.col("children").cast(pl.Int64))


def read_cluster_positives(path: Path) -> pl.DataFrame:
    """survey_year, state, children, positives per urban cluster with a microscopy result.

    Used only for the intra-cluster correlation of positivity (pipeline.model.ranges):
    rows where either count is NA are dropped; a count that is not a whole number, or
    positives above children, is an input error.
    """
    frame = read_text_columns(path, ["dhs_year", "shstate", "child_6_59_tested_malaria", "positives"]).with_row_index(
        "row", offset=2
    )
    out = frame.filter(
        (pl.col("child_6_59_tested_malaria") != "NA") & (pl.col("positives") != "NA")
    ).select(
        pl.col("dhs_year").cast(pl.Int64, strict=False).alias("survey_year"),
        pl.col("shstate").alias("state"),
        pl.col("child_6_59_tested_malaria").cast(pl.Float64, strict=False).alias("children"),
        pl.col("positives").cast(pl.Float64, strict=False).alias("positives"),
        pl.col("row").cast(pl.Int64),
    )
    bad = out.filter(
        pl.col("survey_year").is_null() | pl.col("children").is_null() | pl.col("positives").is_null()
        | (pl.col("positives") > pl.col("children")) | (pl.col("positives") < 0)
    )
    if bad.height:
        raise InputError(path, "dhs_year, child_6_59_tested_malaria or positives not valid counts", row=int(bad["row"][0]))
    return out.filter(pl.col("children") > 0).drop("row")
