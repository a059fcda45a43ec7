"""Each bundle CSV reads with the right column types under the defaults of the tools analysts use:
polars, pandas, duckdb, and R's read.csv and readr where they are installed. The Parquet file of the
same table is the reference. On a synthetic risk table long enough to show the old fault (more than
100 estimated months before the first forecast row: polars typed `horizon` as text) and on the real
bundle.

What no CSV reader can type is allowed, and said in docs/downloads.md: a column empty in every row
(no value to infer from; such as the LGA-only net-use intervals in context_state), pandas' missing
values in an integer column (floats holding whole numbers) and in a boolean one (objects holding
True/False), and a code made only of digits (`eha_code`) read as a number where no value has a
leading zero, so nothing is lost; and R's `read.csv`, which takes `TRUE`/`FALSE` for logicals but not
the bundle's `true`/`false` (the same in every CSV of the service; readr takes both).
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import duckdb
import orjson
import pandas as pd
import polars as pl
import pytest

from pipeline.datasets import downloads as d
from tests.paths import needs_data

R_SCRIPT = r"""
args <- commandArgs(trailingOnly = TRUE)
df <- read.csv(args[[1]])
cat(paste(names(df), sapply(df, function(x) class(x)[[1]]), sep = "\t"), sep = "\n")
if (requireNamespace("readr", quietly = TRUE)) {
  r <- readr::read_csv(args[[1]], show_col_types = FALSE, progress = FALSE)
  cat(paste0("readr:", names(r), "\t", sapply(r, function(x) class(x)[[1]])), sep = "\n")
}
"""


def kind(dtype: object) -> str:
    s = str(dtype).lower()
    if "bool" in s or s == "logical":
        return "bool"
    if "int" in s:
        return "int"
    if any(w in s for w in ("float", "double", "numeric", "decimal")):
        return "float"
    return "str"


def read_kinds(csv: Path) -> dict[str, dict[str, str]]:
    """Column → kind, for every tool that is here, each with its defaults."""
    out: dict[str, dict[str, str]] = {}
    out["polars"] = {c: kind(t) for c, t in pl.read_csv(csv).schema.items()}
    pdf = pd.read_csv(csv)
    out["pandas"] = {}
    for c in pdf.columns:
        k = kind(pdf[c].dtype)
        present = pdf[c].dropna()
        if k == "str" and len(present) and all(isinstance(v, bool) for v in present):
            k = "bool"  # pandas has no missing value in a bool column by default: objects holding True/False
        if k == "float" and len(present) and bool((present == present.round()).all()):
            k = "float-whole"  # missing values in an integer column: floats holding whole numbers
        out["pandas"][c] = k
    rel = duckdb.read_csv(str(csv))
    out["duckdb"] = {c: kind(t) for c, t in zip(rel.columns, rel.dtypes, strict=True)}
    if shutil.which("Rscript"):
        done = subprocess.run(["Rscript", "-e", R_SCRIPT, str(csv)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        for line in done.stdout.splitlines():
            col, cls = line.split("\t")
            tool = "readr" if col.startswith("readr:") else "read.csv"
            out.setdefault(tool, {})[col.removeprefix("readr:")] = kind(cls)
    return out


def mismatches(csv: Path, reference: pl.DataFrame | dict[str, str]) -> list[str]:
    """What each tool, with its defaults, reads otherwise than `reference` types it (a frame, or column ->
    kind): none but what no CSV reader can (docs/downloads.md)."""
    wrong = []
    raw = pl.read_csv(csv, infer_schema=False)
    wants = reference if isinstance(reference, dict) else {c: kind(t) for c, t in reference.schema.items()}
    for tool, kinds in read_kinds(csv).items():
        if list(kinds) != list(wants):
            wrong.append(f"{csv.name}: {tool} reads the columns {list(kinds)}, not {list(wants)}")
            continue
        for col, want in wants.items():
            got = kinds[col]
            if raw[col].null_count() == raw.height:
                wrong.append(f"{csv.name}: {col} is empty in every row: no reader can type it")
                continue
            if got == want or (want == "float" and got == "float-whole"):
                continue
            if want == "int" and got in ("float", "float-whole") and tool in ("pandas", "readr"):
                continue  # readr reads every number as double; pandas floats an integer column with gaps
            if want == "str" and got in ("int", "float") and not raw[col].drop_nulls().str.starts_with("0").any():
                continue  # a code of digits only, with no leading zero: read as a number, nothing lost
            if tool == "read.csv" and want == "bool" and got == "str":
                continue  # R's read.csv knows TRUE/FALSE, not the bundle's true/false (docs/downloads.md)
            wrong.append(f"{csv.name}: {tool} reads {col} as {got}, not {want}")
    return wrong


PERIODS_LONG = [f"{y}-{m:02d}" for y in range(2012, 2023) for m in range(1, 13)]  # 132 estimated months


def test_a_long_risk_table_reads_typed_in_every_tool(tmp_path: Path):
    periods = {"last_estimated": PERIODS_LONG[-1],
               "months": [{"period": p, "kind": "estimated", "provisional": p == PERIODS_LONG[-1]}
                          for p in PERIODS_LONG]
               + [{"period": f"2023-0{h}", "kind": "forecast", "provisional": False} for h in range(1, 5)]}

    def lga(code: str, score: float) -> dict:
        return {"lga_code": code, "lga": code.lower(), "score": score, "score_low": score / 2, "score_high": score * 2,
                "level": "low", "is_urban": False, "population": 10}

    estimates = [{"period": p, "kind": "estimated", "state_code": "KN", "state": "Kano",
                  "lgas": [lga("NG020001", 0.1), lga("NG020002", 0.2)]} for p in PERIODS_LONG]
    forecasts = {"forecasts": [{"period": f"2023-0{h}", "kind": "forecast", "state_code": "KN", "state": "Kano",
                                "lgas": [lga("NG020001", 0.3), lga("NG020002", 0.4)]} for h in range(1, 5)]}
    df = d.risk_table(estimates, [forecasts], periods, "risk_lga_month")
    csv = tmp_path / "risk_lga_month.csv"
    csv.write_bytes(d.csv_bytes(df))
    assert mismatches(csv, df) == []
    # the fault this guards against: the same rows oldest first leave `horizon` untyped for polars
    old_order = tmp_path / "oldest_first.csv"
    old_order.write_bytes(d.csv_bytes(df.sort("lga_code", "period")))
    assert pl.read_csv(old_order).schema["horizon"] == pl.String


@needs_data()
@pytest.mark.parametrize("stem", sorted(d.LEAD))
def test_every_bundle_csv_reads_typed_in_every_tool(real_build: Path, stem: str):
    downloads = real_build / "current" / "downloads"
    assert mismatches(downloads / f"{stem}.csv", pl.read_parquet(downloads / f"{stem}.parquet")) == []


# Table Schema types -> the kinds above (a yearmonth is text in every reader)
PACKAGE_KINDS = {"integer": "int", "number": "float", "boolean": "bool", "string": "str", "yearmonth": "str"}


@pytest.fixture(scope="module")
def unzipped(real_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle as a reader gets it: the zip, unpacked where they are."""
    out = tmp_path_factory.mktemp("unzipped")
    with zipfile.ZipFile(real_build / "current" / "downloads" / d.ZIP_NAME) as z:
        z.extractall(out)
    folders = list(out.iterdir())
    assert len(folders) == 1 and folders[0].is_dir(), folders  # one folder, not 27 files where it is unpacked
    assert folders[0].name.startswith(d.PACKAGE_NAME + "-")
    return folders[0]


@needs_data()
def test_every_bundle_table_reads_as_datapackage_declares(unzipped: Path):
    """Each CSV of the unpacked zip, read with the defaults of pandas, polars and duckdb (and R where it is
    here), has the columns, in order, and the types datapackage.json declares; no column is empty in every row."""
    package = orjson.loads((unzipped / "datapackage.json").read_bytes())
    tables = [r for r in package["resources"] if r["path"].endswith(".csv")]
    assert {r["name"] for r in tables} == set(d.LEAD)
    wrong: list[str] = []
    for res in tables:
        wrong += mismatches(unzipped / res["path"], {f["name"]: PACKAGE_KINDS[f["type"]] for f in res["schema"]["fields"]})
    assert wrong == []
    # what was left out is said, and was empty
    left = package["x-columns-left-out"]
    for table, cols in left.items():
        assert not set(cols) & {f["name"] for r in tables if r["name"] == table for f in r["schema"]["fields"]}
        assert all(f"`{c}`" in (unzipped / "README.md").read_text() for c in cols)


@needs_data()
@pytest.mark.parametrize("stem", ["transmission_state_month", "survey_trend"])
def test_national_rows_and_nasarawa_stay_apart_under_pandas_defaults(unzipped: Path, stem: str):
    df = pd.read_csv(unzipped / f"{stem}.csv")
    national = df[df["area_type"] == "national"]
    assert len(national) and (national["state_code"] == d.NATIONAL_CODE).all() and (national["state"] == "Nigeria").all()
    # pandas takes Nasarawa's `NA` for missing: those rows, and only those, are Nasarawa's
    missing = df[df["state_code"].isna()]
    assert len(missing) and set(missing["state"]) == {"Nasarawa"}
    kept = pd.read_csv(unzipped / f"{stem}.csv", keep_default_na=False, na_values=[""])
    assert set(kept.loc[kept["state"] == "Nasarawa", "state_code"]) == {"NA"}


@needs_data()
def test_the_bundle_says_which_months_have_passed_and_what_each_kind_is(unzipped: Path, real_build: Path):
    from pipeline.model import terms

    package = orjson.loads((unzipped / "datapackage.json").read_bytes())
    periods = orjson.loads((real_build / "current" / "v1" / "periods.json").read_bytes())
    months = package["x-months"]
    assert months["months"] == [{k: m[k] for k in ("period", "kind", "basis", "month_end", "passed_at_release")}
                                for m in periods["months"]]
    assert months["kind_descriptions"] == periods["kind_descriptions"]
    adopted = terms.adopted_from(periods["score_terms"])
    assert set(months["kind_descriptions"]) == set(terms.KINDS)
    assert months["kind_descriptions"]["forecast"] == terms.kind_words("forecast", adopted)
    loaded = periods["updated_at"][:10]
    assert [m["passed_at_release"] for m in months["months"]] == [m["month_end"] < loaded for m in months["months"]]
    assert months["all_passed_at_release"] == all(m["passed_at_release"] for m in months["months"])
    readme = (unzipped / "README.md").read_text()
    assert "## Months" in readme and months["kind_descriptions"]["estimated"] in readme
