"""LGA air temperature climatology (IDM/GSOD 2001-2016, `climate/idm_lga_temperature_2001_2016/`).

Read for the model-6 season's thermal suitability: transmission needs warm enough months, and the
plateaus' wet seasons are cool. Keyed by the geography's `lga_code`; optional (None when absent).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError

LGA_TEMPERATURE = "climate/idm_lga_temperature_2001_2016/nga_lga_idm_temperature_humidity_climatology_2001_2016.csv"
SOURCE = ("IDM/EMOD climate inputs from GSOD weather stations, 2001-2016 (numalariamodeling/"
          "hbhi-nigeria-publication-2021, Apache-2.0)")


def read_lga_temperature(data_dir: Path) -> pl.DataFrame | None:
    """Long form: lga_code (str), month (1..12), temp_c; None when the file is absent."""
    path = Path(data_dir) / LGA_TEMPERATURE
    if not path.exists():
        return None
    df = pl.read_csv(path, infer_schema_length=0)
    cols = [f"temp_m{m:02d}_c" for m in range(1, 13)]
    missing = [c for c in ["lga_code", *cols] if c not in df.columns]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}")
    out = (df.select("lga_code", *cols)
           .unpivot(index="lga_code", on=cols, variable_name="m", value_name="temp_c")
           .with_columns(pl.col("m").str.slice(6, 2).cast(pl.Int64).alias("month"),
                         pl.col("temp_c").cast(pl.Float64, strict=False))
           .drop("m").sort("lga_code", "month"))
    bad = out.filter(pl.col("temp_c").is_null() | ~pl.col("temp_c").is_between(-10.0, 50.0))
    if bad.height:
        raise InputError(path, f"temperature of LGA {bad['lga_code'][0]} month {bad['month'][0]} is missing or "
                               "outside -10..50 °C")
    return out
