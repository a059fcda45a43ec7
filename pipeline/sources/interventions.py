"""Readers of intervention timing used only by the pre-registered month tests (docs/validation.md (f)).

* SMC treatments per state, year and cycle (`malaria/who_smc_state_2013_2021/`, WHO/NMEP via
  sepmein/nigeria_malaria_report_2022, Apache-2.0). 2019 is 0 for every state in the source:
  missing, not none, so 2019 rows are dropped here.
* Year of each state's previous and most recent LLIN mass campaign
  (`sepmein_nga_report_2022/2023-04-10-nga_itn_campaign.csv`, Apache-2.0; header and state names
  carry trailing spaces).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError
from pipeline.sources._csv import read_text_columns
from pipeline.sources.names import state_code_for

SMC_STATE = "malaria/who_smc_state_2013_2021/2023-04-09-nga_smc.csv"
LLIN_CAMPAIGNS = "malaria/sepmein_nga_report_2022/2023-04-10-nga_itn_campaign.csv"
SMC_MISSING_YEARS = (2019,)


def _codes(path: Path, names: pl.Series, states: pl.DataFrame) -> dict[str, str]:
    codes = {n: state_code_for(n.strip(), states) for n in names.unique().to_list()}
    unknown = sorted(k for k, v in codes.items() if v is None)
    if unknown:
        raise InputError(path, f"unknown state name(s) {unknown}")
    return {k: v for k, v in codes.items() if v is not None}


def read_smc_states(data_dir: Path, states: pl.DataFrame) -> pl.DataFrame | None:
    """state_code, year, treatments (summed over cycles) for state-years in the file; None when absent."""
    cycles = read_smc_state_cycles(data_dir, states)
    if cycles is None:
        return None
    return cycles.group_by("state_code", "year").agg(pl.col("treatments").sum()).sort("state_code", "year")


def read_llin_campaigns(data_dir: Path, states: pl.DataFrame) -> pl.DataFrame | None:
    """state_code, year (one row per listed campaign: previous and most recent); None when absent."""
    path = Path(data_dir) / LLIN_CAMPAIGNS
    if not path.exists():
        return None
    raw = read_text_columns(path, ["adm1", "year_previous_itn_campaign", "year_most_recent_itn_campaign"])
    codes = _codes(path, raw["adm1"], states)
    df = raw.select(
        pl.col("adm1").replace_strict(codes).alias("state_code"),
        pl.concat_list(pl.col("year_previous_itn_campaign").cast(pl.Int64, strict=False),
                       pl.col("year_most_recent_itn_campaign").cast(pl.Int64, strict=False)).alias("year"),
    ).explode("year")
    if df["year"].null_count():
        raise InputError(path, "campaign years must be whole numbers")
    return df.unique().sort("state_code", "year")


SMC_LGA_ROUNDS = "malaria/hbhi_smc_lga_2013_2019/smc_lga_year_summary_2013_2019.csv"
SMC_STATE_SOURCE = ("WHO/NMEP SMC treatments per state and cycle 2013-2021 (sepmein/nigeria_malaria_report_2022, "
                    "Apache-2.0); 2019 missing in the source")
SMC_LGA_SOURCE = ("HBHI Nigeria SMC rounds per LGA 2013-2019 (numalariamodeling/hbhi-nigeria-publication-2021, "
                  "Apache-2.0); round dates approximate (model day)")


def read_smc_state_cycles(data_dir: Path, states: pl.DataFrame) -> pl.DataFrame | None:
    """state_code, year, cycle (1..4), treatments: one row per state, year and cycle in the file
    (2019, missing in the source, dropped); None when absent."""
    path = Path(data_dir) / SMC_STATE
    if not path.exists():
        return None
    raw = read_text_columns(path, ["adm1", "year", "name", "value"])
    codes = _codes(path, raw["adm1"], states)
    df = raw.select(
        pl.col("adm1").replace_strict(codes).alias("state_code"),
        pl.col("year").cast(pl.Int64, strict=False),
        pl.col("name").str.extract(r"^smc(\d)_num$").cast(pl.Int64, strict=False).alias("cycle"),
        pl.col("value").cast(pl.Float64, strict=False).alias("treatments"),
    )
    if df["year"].null_count() or df["treatments"].null_count() or df["cycle"].null_count():
        raise InputError(path, "year and value must be numbers and name smc<N>_num")
    return df.filter(~pl.col("year").is_in(SMC_MISSING_YEARS)).sort("state_code", "year", "cycle")


def read_smc_lga_rounds(data_dir: Path, lgas: pl.DataFrame) -> pl.DataFrame | None:
    """lga_code (the geography's), state_code, year, n_rounds, first_round (date), last_round (date):
    one row per LGA and year with SMC in 2013-2019; None when absent. `lgas` is the geography's
    LGA table (lga_code, eha_code): the file is keyed by the eHA code."""
    path = Path(data_dir) / SMC_LGA_ROUNDS
    if not path.exists():
        return None
    raw = read_text_columns(path, ["lga_code", "state_code", "year", "n_rounds", "first_round_date",
                                   "last_round_date"])
    eha = dict(zip(lgas["eha_code"].cast(pl.Utf8).to_list(), lgas["lga_code"].to_list(), strict=True))
    df = raw.select(
        pl.col("lga_code").replace_strict(eha, default=None).alias("lga_code"),
        pl.col("lga_code").alias("eha_code"),
        "state_code",
        pl.col("year").cast(pl.Int64, strict=False),
        pl.col("n_rounds").cast(pl.Int64, strict=False),
        pl.col("first_round_date").str.to_date("%Y-%m-%d", strict=False).alias("first_round"),
        pl.col("last_round_date").str.to_date("%Y-%m-%d", strict=False).alias("last_round"),
    )
    unknown = df.filter(pl.col("lga_code").is_null())
    if unknown.height:
        raise InputError(path, f"eHA LGA code(s) not in the geography: {unknown['eha_code'].unique().to_list()[:5]}")
    if df["year"].null_count() or df["first_round"].null_count() or df["n_rounds"].null_count():
        raise InputError(path, "year, n_rounds and round dates must be numbers and YYYY-MM-DD dates")
    return df.drop("eha_code").sort("lga_code", "year")
