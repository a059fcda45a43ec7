"""What a month carries: the evidence from the dated series, and the term it adopted.

Not a producer: the risk producer calls `month_evidence` before it scores (a term enters the
score only if the pre-registered test adopts it, docs/validation.md (f)), and the validation
report publishes the same evidence. Frames are turned into [LGA x month] matrices here; the
tests themselves are pure (pipeline.model.month_tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from pipeline.model import month_tests
from pipeline.model.downscale import lga_monthly, lga_ratios
from pipeline.sources.inputs import Inputs

RAIN_TERM = "b_rain_anomalies_lags_0_3"


@dataclass(frozen=True)
class MonthEvidence:
    lga_codes: list[str]  # the dated LGAs, in the rows' order
    rows: np.ndarray  # their rows in the season model's LGA order
    t0: int  # month index of column 0 (January of the first year)
    cases: np.ndarray  # [L, T] (never published)
    data: month_tests.MonthData  # out-of-sample seasons (each from the fold holding its state out)
    tests: dict[str, Any]
    rain_beta: np.ndarray | None  # coefficients of the rain term on all states, if adopted


def _month_of(period: pl.Expr) -> pl.Expr:
    return period.str.slice(0, 4).cast(pl.Int64) * 12 + period.str.slice(5, 2).cast(pl.Int64) - 1


def lga_recorded_rain(inputs: Inputs, geo: Any, lga_codes: list[str], t0: int, width: int) -> np.ndarray:
    """[L, width] recorded monthly rainfall of the LGAs from month index t0 (NaN where unrecorded):
    the state's CHIRPS month times the LGA's within-state ratio, as everywhere else."""
    rec = inputs.recorded_rainfall
    if rec.lga is not None:
        monthly = rec.lga.select("lga_code", "period", "rainfall_mm")
    else:
        monthly = lga_monthly(geo, rec.state.select("ocha_pcode", "period", "rainfall_mm"),
                              lga_ratios(geo, inputs.lga_climatology))
    pos = {c: i for i, c in enumerate(lga_codes)}
    m = (monthly.filter(pl.col("lga_code").is_in(lga_codes))
         .with_columns((_month_of(pl.col("period")) - t0).alias("col"))
         .filter(pl.col("col").is_between(0, width - 1)))
    out = np.full((len(lga_codes), width), np.nan)
    out[np.array([pos[c] for c in m["lga_code"].to_list()], dtype=int), m["col"].to_numpy()] = m["rainfall_mm"].to_numpy()
    return out


def case_matrix(dated: pl.DataFrame, lga_codes: list[str], t0: int, n: int) -> np.ndarray:
    pos = {c: i for i, c in enumerate(lga_codes)}
    out = np.full((len(lga_codes), n), np.nan)
    d = (dated.filter(pl.col("lga_code").is_in(lga_codes) & pl.col("cases").is_not_null())
         .with_columns((pl.col("year") * 12 + pl.col("month") - 1 - t0).alias("col"))
         .filter(pl.col("col").is_between(0, n - 1)))
    out[np.array([pos[c] for c in d["lga_code"].to_list()], dtype=int), d["col"].to_numpy()] = d["cases"].to_numpy()
    return out


def _data(inputs: Inputs, geo: Any, sm: Any, lgas: list[str], rows: np.ndarray, t0: int, cases: np.ndarray,
          index: np.ndarray, floor: np.ndarray, lag: np.ndarray) -> month_tests.MonthData:
    n = cases.shape[1]
    state_of = dict(zip(geo.lgas["lga_code"], geo.lgas["state_code"], strict=True))
    rain = lga_recorded_rain(inputs, geo, lgas, t0 - 12, n + 12)
    smc = inputs.smc_states
    smc_years = set() if smc is None else {(s, int(y)) for s, y, v in smc.iter_rows() if v > 0}
    campaigns: dict[str, list[int]] = {}
    for s, y in ([] if inputs.llin_campaigns is None else inputs.llin_campaigns.iter_rows()):
        campaigns.setdefault(s, []).append(int(y))
    return month_tests.month_data(cases, t0, np.array([state_of[c] for c in lgas]), index, floor, lag, rain,
                                  t0 - 12, sm.lga_rain[rows], smc_years, campaigns)


def month_evidence(inputs: Inputs, geo: Any, sm: Any) -> MonthEvidence | None:
    """Run the pre-registered tests on the dated series (None when it is absent) and, if the rain
    term is adopted, its coefficients fitted on every dated state with the published season."""
    dated = inputs.dated_cases
    if dated is None or sm.fit is None or sm.fit.dated is None:
        return None
    cv, rule = sm.fit.cv, sm.rule
    pos = {c: i for i, c in enumerate(sm.lga_codes)}
    lgas = sorted(c for c in set(dated["lga_code"].to_list()) if c in pos and np.isfinite(cv.area_floor[rule][pos[c]]))
    if not lgas:
        return None
    rows = np.array([pos[c] for c in lgas], dtype=int)
    first, last = dated["year"].cast(pl.Int64).min(), dated["year"].cast(pl.Int64).max()
    t0 = int(str(first)) * 12
    n = (int(str(last)) + 1) * 12 - t0
    cases = case_matrix(dated, lgas, t0, n)
    data = _data(inputs, geo, sm, lgas, rows, t0, cases, cv.area_index[rule][rows], cv.area_floor[rule][rows],
                 cv.area_lag[rule][rows])
    tests = month_tests.run_tests(data)
    beta = None
    if RAIN_TERM in tests["adopted"]:
        published = _data(inputs, geo, sm, lgas, rows, t0, cases, sm.lga_index[rows], sm.lga_floor[rows],
                          sm.lga_lag[rows])
        beta = month_tests.fit_all(published.anomalies, published.y - published.reference)
        tests[RAIN_TERM]["published_coefficients"] = [round(float(b), 4) for b in beta]
    return MonthEvidence(lgas, rows, t0, cases, data, tests, beta)


def rain_factor(inputs: Inputs, geo: Any, sm: Any, beta: np.ndarray, months: list[int]) -> np.ndarray:
    """[n_lga (season model order), len(months)] multiplier exp(sum_k beta_k r[t-k]) of the adopted
    rain term; 1 where a lagged month's rainfall is not recorded."""
    k_max = max(month_tests.ANOMALY_LAGS)
    t0 = min(months) - k_max
    width = max(months) - t0 + 1
    rain = lga_recorded_rain(inputs, geo, sm.lga_codes, t0, width)
    cal = np.arange(t0, t0 + width) % 12
    anom = np.log((rain + month_tests.RAIN_OFFSET_MM) / (sm.lga_rain[:, cal] + month_tests.RAIN_OFFSET_MM))
    anom = np.nan_to_num(anom, nan=0.0)  # an unrecorded month carries no anomaly
    cols = np.asarray(months) - t0
    total = sum(beta[i] * anom[:, cols - k] for i, k in enumerate(month_tests.ANOMALY_LAGS))
    return np.exp(total)
