"""Reader of the NDHS 2018 cluster counts per state (`malaria/ndhs2018_cluster_counts/`,
see its SOURCES.md).

The counts are of clusters holding at least one child aged 12-23 months (1,324 of
the survey's 1,389), so each is a lower bound of the survey's clusters in the state,
never the exact count.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.sources._csv import read_text_columns, require_rows

CLUSTERS_CSV = Path("malaria") / "ndhs2018_cluster_counts" / "ndhs2018_clusters_per_state.csv"
SURVEY_YEAR = 2018


def read_state_clusters(path: Path) -> pl.DataFrame:
    """Columns `state` (name as written), `clusters`, `urban_clusters`, `rural_clusters`, `row`."""
    cols = {"clusters_with_child_12_23m": "clusters", "urban_clusters": "urban_clusters", "rural_clusters": "rural_clusters"}
    frame = (
        read_text_columns(path, ["admin1", *cols])
        .with_row_index("row", offset=2)
        .with_columns(pl.col("row").cast(pl.Int64))
    )
    out = frame.select(
        pl.col("admin1").alias("state"),
        *(pl.col(c).cast(pl.Int64, strict=False).alias(n) for c, n in cols.items()),
        "row",
    )
    checks = [
        *((pl.col(n).is_null() | (pl.col(n) < 0), f"{c} is not a whole number >= 0") for c, n in cols.items()),
        (pl.col("clusters") != pl.col("urban_clusters") + pl.col("rural_clusters"),
         "clusters_with_child_12_23m is not urban_clusters + rural_clusters"),
        (~pl.col("state").is_first_distinct(), "state appears more than once"),
    ]
    require_rows(path, out, checks)
    return out
