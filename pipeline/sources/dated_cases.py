"""Reader of the dated monthly LGA case series (malaria SOURCES.md §9).

`malaria/dhis2_lga_monthly_2020_2023/`: monthly confirmed malaria cases for every LGA of seven
states (one file of six states, one of Oyo; every `lga_monthly_malaria_*_2020_2023.csv` of the
folder is read, so a state added the same way needs no code), 2020-01 to 2023-12, an NHMIS/DHIS2 export with **no stated licence**. It is used for
fitting and validation inside the pipeline only: no row of it may appear in a release
(pipeline/release/audit.py compares every release file with it, however rescaled: `malaria-risk audit`
and tests/pipeline/test_release_audit.py).
Only statistics derived from it (fitted constants, correlations, errors) leave this process.

The count used is `confirmed_uncomplicated`: `clinically_diagnosed` is blank in about half the
rows and blank cannot be told from zero. Rows the source flags (`tpr_gt_100`, a data-entry error;
`low_vs_lga_year_median`, a probable reporting gap) and months with zero confirmed cases are kept
as missing (`cases` null), as the folder's SOURCES.md advises for shape estimates.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError
from pipeline.sources._csv import read_text_columns

DATED_DIR = "malaria/dhis2_lga_monthly_2020_2023"
# The folder: every file of it that matches the patterns below is read (its SOURCES.md asks for that).
DATED_LGA_CASES = DATED_DIR
LGA_PATTERN = "lga_monthly_malaria_*_2020_2023.csv"
STATE_PATTERN = "state_monthly_malaria_*_2020_2023.csv"
DATED_CASES_SOURCE = (
    "NHMIS/DHIS2 monthly confirmed malaria cases per LGA, seven states, 2020-2023 "
    "(export in dagbashingu/malaria_rainfall_project; no licence stated: used for fitting and "
    "validation only, rows never published)"
)
COLUMNS = ["lga_code", "state_code", "year", "month", "confirmed_uncomplicated", "flag"]


def dated_files(data_dir: Path, pattern: str = LGA_PATTERN) -> list[Path]:
    """The folder's files matching `pattern`, in name order (so every reader sees one order)."""
    folder = Path(data_dir) / DATED_DIR
    return sorted(folder.glob(pattern)) if folder.is_dir() else []


def read_raw_dated(data_dir: Path, pattern: str = LGA_PATTERN) -> pl.DataFrame | None:
    """Every matching file as text columns, stacked, with `file` (name) and `row` (its line); None when none.

    For the readers that need the file's own columns (the release audit, the tests' leak probes)."""
    files = dated_files(data_dir, pattern)
    if not files:
        return None
    return pl.concat(
        [pl.read_csv(f, infer_schema_length=0).with_row_index("row", offset=2).with_columns(pl.lit(f.name).alias("file"))
         for f in files],
        how="diagonal",
    )


def read_dated_lga_cases(data_dir: Path) -> pl.DataFrame | None:
    """lga_code, state_code, year, month, cases (Float64, null where missing); None when absent.

    Stops on a malformed month, a duplicate LGA-month (within or across files) or a negative
    count, because each would move a season or an anomaly silently.
    """
    files = dated_files(data_dir)
    if not files:
        return None
    raw = pl.concat([read_text_columns(f, COLUMNS).with_row_index("row", offset=2)
                     .with_columns(pl.lit(str(f)).alias("path")) for f in files])
    df = raw.with_columns(
        pl.col("year").cast(pl.Int64, strict=False),
        pl.col("month").cast(pl.Int64, strict=False),
        pl.col("confirmed_uncomplicated").cast(pl.Float64, strict=False).alias("count"),
    )
    bad = df.filter(pl.col("year").is_null() | pl.col("month").is_null() | ~pl.col("month").is_between(1, 12)
                    | pl.col("lga_code").is_null() | (pl.col("lga_code") == ""))
    if bad.height:
        raise InputError(bad["path"][0], "lga_code, year and month 1..12 are required", int(bad["row"][0]))
    neg = df.filter(pl.col("count") < 0)
    if neg.height:
        raise InputError(neg["path"][0], f"negative confirmed_uncomplicated {neg['count'][0]}", int(neg["row"][0]))
    dup = df.filter(pl.struct("lga_code", "year", "month").is_duplicated())
    if dup.height:
        raise InputError(dup["path"][0],
                         f"LGA-month listed twice: {dup['lga_code'][0]} {dup['year'][0]}-{dup['month'][0]:02d}",
                         int(dup["row"][0]))
    flagged = pl.col("flag").is_not_null() & (pl.col("flag") != "")
    return (
        df.select(
            "lga_code", "state_code", "year", "month",
            pl.when(flagged | pl.col("count").is_null() | (pl.col("count") <= 0))
            .then(None).otherwise(pl.col("count")).alias("cases"),
        )
        .sort("lga_code", "year", "month")
    )


def with_geography_codes(dated: pl.DataFrame, lgas: pl.DataFrame) -> pl.DataFrame:
    """Replace the file's eHA `lga_code` by the geography's code; an unknown code stops the build."""
    codes = lgas.select(pl.col("eha_code").alias("_eha"), pl.col("lga_code").alias("_code"))
    out = dated.join(codes, left_on="lga_code", right_on="_eha", how="left")
    if out["_code"].null_count():
        bad = sorted(out.filter(pl.col("_code").is_null())["lga_code"].unique().to_list())
        raise InputError(DATED_LGA_CASES, f"lga_code(s) not in the geography: {bad[:5]}")
    return out.drop("lga_code").rename({"_code": "lga_code"}).select(dated.columns).sort("lga_code", "year", "month")
