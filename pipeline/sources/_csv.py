"""Reading a CSV as text, so every later check can name the line of a bad value.

Parsing with inferred types would fail inside the CSV parser with a generic
message; reading text first lets each reader cast column by column and report
`file, row N: column X: 'abc' is not a number`.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from polars.datatypes import DataTypeClass

from pipeline.errors import InputError

# A column type as readers write it: `pl.Utf8` (a class) or `pl.List(pl.Utf8)` (an instance).
Dtype = pl.DataType | DataTypeClass


def read_text_columns(path: Path, columns: list[str]) -> pl.DataFrame:
    """The named columns of `path` as stripped text; header names are stripped too
    (some source files carry trailing spaces in them)."""
    if not path.is_file():
        raise InputError(path, "file not found")
    try:
        raw = pl.read_csv(path, infer_schema=False)
    except Exception as exc:  # polars raises several exception types for bad CSV
        raise InputError(path, f"not a readable CSV file: {exc}") from exc
    raw = raw.rename({c: c.strip() for c in raw.columns})
    missing = [c for c in columns if c not in raw.columns]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}; found {', '.join(raw.columns)}")
    return raw.select(columns).with_columns(pl.col(c).str.strip_chars() for c in columns)
