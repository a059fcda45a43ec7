"""Reader of the eHA/GRID3 LGA names (`admin/lgas.csv`, see the admin SOURCES.md).

The University of Washington small-area estimates name LGAs in the eHA/GRID3
spelling, which matches all 774 outline names within their state but not the OCHA
names the service publishes (33 differ). Joining through the eHA code the outlines
carry (Geography.lgas.eha_code) avoids a second alias table.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError
from pipeline.sources._csv import read_text_columns

LGAS_CSV = Path("admin") / "lgas.csv"


def read_eha_names(path: Path) -> pl.DataFrame:
    """Columns `eha_code`, `eha_name`, `state_code`, `row`."""
    frame = (
        read_text_columns(path, ["lga_code", "lga_name", "state_code"])
        .with_row_index("row", offset=2)
        .with_columns(pl.col("row").cast(pl.Int64))
        .rename({"lga_code": "eha_code", "lga_name": "eha_name"})
    )
    for col in ("eha_code", "eha_name", "state_code"):
        bad = frame.filter(pl.col(col).is_null() | (pl.col(col) == ""))
        if bad.height:
            raise InputError(path, f"{col} is empty", row=int(bad["row"][0]))
    dup = frame.filter(~pl.col("eha_code").is_first_distinct())
    if dup.height:
        raise InputError(path, f"lga_code {dup['eha_code'][0]} appears more than once", row=int(dup["row"][0]))
    return frame
