"""Reader for the NDHS 2018 microscopy positivity per LGA (malaria SOURCES.md §8,
`hbhi_lga_pfpr_2018/`): 653 LGAs with the children tested in each.

These LGA values rest on 1-108 children each; they are model inputs and checks
(children tested per state, the small-area comparison), never published as LGA
estimates.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError

LGA_POSITIVITY_2018 = "malaria/hbhi_lga_pfpr_2018/lga_2018_microscopy_with_state.csv"
SOURCE = (
    "NDHS 2018 microscopy positivity, children 6-59 months, per LGA with children tested "
    "(numalariamodeling/hbhi-nigeria-publication-2021, Apache-2.0; DHS Program microdata aggregate)"
)


def read_lga_positivity(data_dir: Path) -> pl.DataFrame | None:
    """lga (HBHI spelling), state (name), positivity (share), children (Int64); None when absent."""
    path = Path(data_dir) / LGA_POSITIVITY_2018
    if not path.exists():
        return None
    df = pl.read_csv(path, infer_schema_length=0)
    need = {"LGA", "p_test", "n", "State"}
    if not need <= set(df.columns):
        raise InputError(path, f"missing columns {sorted(need - set(df.columns))}")
    out = df.with_row_index("row", offset=2).select(
        "row",
        pl.col("LGA").str.strip_chars().alias("lga"),
        pl.col("State").str.strip_chars().alias("state"),
        pl.col("p_test").cast(pl.Float64, strict=False).alias("positivity"),
        pl.col("n").cast(pl.Float64, strict=False).round(0).cast(pl.Int64).alias("children"),
    )
    bad = out.filter(
        pl.col("positivity").is_null() | ~pl.col("positivity").is_between(0, 1)
        | pl.col("children").is_null() | (pl.col("children") < 1)
    )
    if bad.height:
        raise InputError(path, "positivity 0..1 and at least one child tested are required", int(bad["row"][0]))
    return out.drop("row")
