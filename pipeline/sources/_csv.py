"""Reading a CSV as text, so every later check can name the line of a bad value.

Parsing with inferred types would fail inside the CSV parser with a generic
message; reading text first lets each reader cast column by column and report
`file, row N: column X: 'abc' is not a number`.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl
from polars.datatypes import DataTypeClass

from pipeline.errors import InputError

# A column type as readers write it: `pl.Utf8` (a class) or `pl.List(pl.Utf8)` (an instance).
Dtype = pl.DataType | DataTypeClass


def read_csv_text(path: Path) -> pl.DataFrame:
    """Every column of `path` as text, or an InputError naming the file (and the row, where
    there is one) for a missing, empty, non-UTF-8 or unparseable file."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found")
    raw_bytes = path.read_bytes()
    if not raw_bytes.strip():
        raise InputError(path, "the file is empty (expected a header row and data rows)")
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw_bytes.count(b"\n", 0, e.start) + 1
        column = e.start - (raw_bytes.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError(path, f"not UTF-8: byte 0x{raw_bytes[e.start]:02x} at character {column} "
                               "(save the file as UTF-8)", line) from None
    _require_whole_rows(path, text)
    try:
        raw = pl.read_csv(raw_bytes, infer_schema=False)
    except Exception as exc:  # polars raises several exception types for bad CSV
        raise InputError(path, f"not a readable CSV file: {str(exc).splitlines()[0]}") from None
    if raw.height == 0:
        raise InputError(path, "no data rows under the header")
    return raw


def _require_whole_rows(path: Path, text: str) -> None:
    """Every record has as many fields as the header. The CSV parser would fill a short record
    with nulls, so a file cut off mid-row (an interrupted copy or download) would read as data
    with missing values; the csv module counts fields with the same quoting rules."""
    rows = csv.reader(io.StringIO(text, newline=""))
    header = next(rows, [])
    for fields in rows:
        if fields and len(fields) != len(header):
            raise InputError(path, f"{len(fields)} fields where the header has {len(header)} "
                                   "(a row cut short or with a stray separator: is the file complete?)",
                             rows.line_num)


def read_text_columns(path: Path, columns: list[str]) -> pl.DataFrame:
    """The named columns of `path` as stripped text; header names are stripped too
    (some source files carry trailing spaces in them)."""
    raw = read_csv_text(path)
    raw = raw.rename({c: c.strip().lstrip("\ufeff").strip() for c in raw.columns})
    missing = [c for c in columns if c not in raw.columns]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}; found {', '.join(raw.columns)}")
    return raw.select(columns).with_columns(pl.col(c).str.strip_chars() for c in columns)


def require_rows(path: Path, frame: pl.DataFrame, checks: list[tuple[pl.Expr, str]]) -> None:
    """The first of `checks` (condition of a bad row, reason) that a row meets fails the file, naming the
    row (the frame's `row` column, the CSV line)."""
    for cond, reason in checks:
        bad = frame.filter(cond)
        if bad.height:
            raise InputError(path, reason, row=int(bad["row"][0]))
