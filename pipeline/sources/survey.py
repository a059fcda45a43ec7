"""Survey malaria positivity in children 6-59 months, in one normalised schema.

Two inputs can supply it: the DHS API export (when the operator has loaded
`malaria/dhs_api_positivity_u5.json`, read by `pipeline.sources.dhs_api`) and the
assembled `malaria/survey_positivity_u5.csv` (malaria SOURCES.md §1). Both
return the same columns, so the risk model and the transmission producer do not care
which one was present:

survey_year Int64, survey Utf8, level Utf8 (national|residence|zone|state), area Utf8,
state_code Utf8 (null unless level=state), test Utf8 (microscopy|RDT), test_assumed
Boolean, positivity Float64 (share 0..1), low/high Float64 (95% range, share, null where
the source gives none), clusters Int64, children_tested Int64, source Utf8.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import polars as pl

from pipeline.errors import InputError
from pipeline.sources._csv import read_csv_text
from pipeline.sources.dhs_api import read_dhs_api_export
from pipeline.sources.names import STATE_NAME_VARIANTS, normalise
from pipeline.sources.survey_schema import LEVELS, SCHEMA

__all__ = ["DHS_API_JSON", "LEVELS", "SCHEMA", "SURVEY_CSV", "read_survey_csv", "read_survey_positivity"]

SURVEY_CSV = "malaria/survey_positivity_u5.csv"
DHS_API_JSON = "malaria/dhs_api_positivity_u5.json"

# The survey rounds the service describes (SPEC §8); a year outside them is a typo or a new round
# that the model and the docs do not know yet.
SURVEY_YEARS = (2010, 2015, 2018, 2021)
# States a round is known to lack in every test (malaria SOURCES.md §1: 2015 has no value for
# Borno or Lagos). Any other state missing from a round that has state rows means a cut or
# edited file, and the build stops rather than model that state from its neighbours unnoticed.
KNOWN_STATE_GAPS: dict[int, tuple[str, ...]] = {2015: ("Borno", "Lagos")}
CSV_COLUMNS = ("survey", "year", "level", "area", "zone", "test", "positivity_pct", "ci_low_pct", "ci_high_pct",
               "n_clusters", "n_tested", "n_tested_kind", "source", "note")
# Columns a file may omit: they carry nothing the reader uses.
OPTIONAL_COLUMNS = ("zone", "note")


def _state_lookup(state_codes: dict[str, str]) -> dict[str, str]:
    table = {normalise(k): v for k, v in state_codes.items()}
    for k, v in STATE_NAME_VARIANTS.items():
        if v in state_codes.values():
            table.setdefault(k, v)
    return table


def read_survey_positivity(data_dir: Path, state_codes: dict[str, str],
                           states: Collection[str] | None = None) -> pl.DataFrame:
    """Positivity rows in the normalised schema (see module docstring).

    `state_codes` maps state names to ISO suffix codes (built by the caller from
    geo.states); FCT/Abuja/Nasarawa spellings and stray spaces are handled here.
    `states`, the geography's state codes (default: every code in `state_codes`), are the
    states each round must cover.
    """
    api = Path(data_dir) / DHS_API_JSON
    if api.exists():
        return read_dhs_api_export(api, state_codes)
    return read_survey_csv(Path(data_dir) / SURVEY_CSV, state_codes, states)


def read_survey_csv(path: Path, state_codes: dict[str, str], states: Collection[str] | None = None) -> pl.DataFrame:
    """The assembled CSV; percentages become shares, 'RDT (assumed)' becomes test_assumed."""
    raw = read_csv_text(path)
    need = set(CSV_COLUMNS) - set(OPTIONAL_COLUMNS)
    if not need <= set(raw.columns):
        raise InputError(path, f"missing columns {sorted(need - set(raw.columns))}")
    unknown = [c for c in raw.columns if c not in CSV_COLUMNS]
    if unknown:
        # An unknown column is a changed layout (a renamed or shifted column) more often than
        # harmless extra information: reading on would silently use the wrong figures.
        raise InputError(path, f"unknown column(s) {', '.join(repr(c) for c in unknown)}; "
                               f"expected {', '.join(CSV_COLUMNS)}")
    raw = raw.with_row_index("row", offset=2).with_columns(pl.col(c).str.strip_chars() for c in ("level", "area", "test"))
    lookup = _state_lookup(state_codes)

    def num(c: str) -> pl.Expr:
        return pl.col(c).str.strip_chars().cast(pl.Float64, strict=False)

    df = raw.with_columns(
        pl.col("year").str.strip_chars().cast(pl.Int64, strict=False).alias("survey_year"),
        pl.col("test").str.to_lowercase().str.contains("assumed").alias("test_assumed"),
        pl.when(pl.col("test").str.to_lowercase().str.starts_with("micro"))
        .then(pl.lit("microscopy"))
        .when(pl.col("test").str.to_lowercase().str.starts_with("rdt"))
        .then(pl.lit("RDT"))
        .otherwise(None)
        .alias("test_norm"),
        (num("positivity_pct") / 100).alias("positivity"),
        (num("ci_low_pct") / 100).alias("low"),
        (num("ci_high_pct") / 100).alias("high"),
        num("n_clusters").cast(pl.Int64).alias("clusters"),
        # Only a head count is a number of children tested; a survey-weighted total is
        # not (the DHS API reader drops it for the same reason), so it stays out.
        pl.when(pl.col("n_tested_kind").str.strip_chars().str.to_lowercase() == "unweighted")
        .then(num("n_tested").cast(pl.Int64))
        .otherwise(None)
        .alias("children_tested"),
        pl.when(pl.col("level") == "state")
        .then(pl.col("area").map_elements(lambda s: lookup.get(normalise(s)), return_dtype=pl.Utf8))
        .otherwise(None)
        .alias("state_code"),
    )
    checks = [
        (pl.col("survey_year").is_null(), "year is not a whole number"),
        (~pl.col("level").is_in(LEVELS), f"level not one of {LEVELS}"),
        (pl.col("test_norm").is_null(), "test is neither microscopy nor RDT"),
        (pl.col("positivity").is_null() | (pl.col("positivity") < 0) | (pl.col("positivity") > 1), "positivity_pct missing or outside 0..100"),
        ((pl.col("level") == "state") & pl.col("state_code").is_null(), "unknown state name"),
        (pl.col("low") > pl.col("high"), "ci_low_pct above ci_high_pct"),
    ]
    checks.append((~pl.col("survey_year").is_in(SURVEY_YEARS), f"year is not a survey round {SURVEY_YEARS}"))
    for cond, reason in checks:
        bad = df.filter(cond)
        if bad.height:
            raise InputError(path, f"{reason}: {bad['area'][0]!r}", int(bad["row"][0]))
    _require_unique_rows(path, df)
    _require_state_coverage(path, df, state_codes, set(state_codes.values()) if states is None else set(states))
    return (
        df.select(
            "survey_year",
            pl.col("survey").str.strip_chars(),
            "level",
            "area",
            "state_code",
            pl.col("test_norm").alias("test"),
            "test_assumed",
            "positivity",
            "low",
            "high",
            "clusters",
            "children_tested",
            pl.col("source").str.strip_chars(),
        )
        .cast(pl.Schema(SCHEMA))
        .sort("survey_year", "level", "area", "test", "source")
    )


def _require_unique_rows(path: Path, df: pl.DataFrame) -> None:
    """One row per (round, level, area, test, source): a repeated row is a copy-paste slip, and two
    different values under one key would make the figure depend on the order of the file. The same
    area and test from two sources is allowed (the file documents such fill-ins row by row)."""
    key = ["survey_year", "level", "area_key", "test_norm", "source_key"]
    keyed = df.with_columns(
        pl.coalesce("state_code", pl.col("area").str.strip_chars().str.to_lowercase()).alias("area_key"),
        pl.col("source").str.strip_chars().alias("source_key"),
    )
    dup = (keyed.group_by(key).agg(pl.col("row").sort().alias("rows"), pl.len().alias("n"))
           .filter(pl.col("n") > 1).sort(pl.col("rows").list.get(1)))
    if dup.height:
        first = dup.row(0, named=True)
        a, b = first["rows"][:2]
        raise InputError(path, f"repeats row {a} ({first['survey_year']} {first['level']} {first['area_key']!r}, "
                               f"{first['test_norm']}, same source): keep one row per area, test and source", b)


def _require_state_coverage(path: Path, df: pl.DataFrame, state_codes: dict[str, str], expected: set[str]) -> None:
    """Every state in every round that has state rows, but for the gaps the sources document.

    A file cut at a line boundary parses cleanly; what gives it away is a round that stops part of
    the way through the states. A round absent as a whole is allowed (a data load from before it).
    """
    lookup = _state_lookup(state_codes)
    states = df.filter(pl.col("level") == "state")
    for year in sorted(set(states["survey_year"].to_list())):
        rows = states.filter(pl.col("survey_year") == year)
        gaps = {lookup.get(normalise(n)) for n in KNOWN_STATE_GAPS.get(year, ())}
        missing = sorted(expected - set(rows["state_code"].to_list()) - gaps)
        if missing:
            names = {v: k for k, v in state_codes.items()}
            shown = ", ".join(names.get(c, c) for c in missing[:5]) + (f" and {len(missing) - 5} more"
                                                                         if len(missing) > 5 else "")
            raise InputError(path, f"the {year} round has no row for {shown} (after its last state row: "
                                   "is the file complete?)", int(rows["row"].max()))  # type: ignore[arg-type]
