"""Reader of the MAP-style admin-1 incidence table (malaria SOURCES.md §2, sepmein_nga_report_2022).

Modelled by others, and used only as an external check in the validation report: nothing in
`pipeline/model/` or `pipeline/datasets/` reads it, so it can never become a model input.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError
from pipeline.sources.names import state_code_for

INCIDENCE = "malaria/sepmein_nga_report_2022/2023-04-05-incidence_rate_all_age_table_Nigeria_admin1_2000-2023.csv"


def read_incidence(data_dir: Path, states: pl.DataFrame) -> pl.DataFrame | None:
    """state_code, year, incidence (cases per person-year, `rmean`); None when absent."""
    path = Path(data_dir) / INCIDENCE
    if not path.exists():
        return None
    df = pl.read_csv(path)
    codes = {n: state_code_for(n, states) for n in df["Name"].unique()}
    if None in codes.values():
        raise InputError(path, f"unknown state name(s) {[k for k, v in codes.items() if v is None]}")
    return df.select(
        pl.col("Name").replace_strict(codes).alias("state_code"),
        pl.col("Year").cast(pl.Int64).alias("year"),
        pl.col("incidence_rate_all_age_rmean").cast(pl.Float64).alias("incidence"),
    )
