"""What a month carries: the evidence from the dated series, and the term it adopted.

Not a producer: the risk producer calls `month_evidence` before it scores (a term enters the
score only if the registered test adopts it, docs/validation.md (g)), and the validation
report publishes the same evidence. Frames are turned into [LGA x month] matrices here; the
tests themselves are pure (pipeline.model.month_tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from pipeline.model import month_tests
from pipeline.model.downscale import lga_monthly, lga_ratios
from pipeline.sources.inputs import Inputs


@dataclass(frozen=True)
class MonthEvidence:
    lga_codes: list[str]  # the dated LGAs, in the rows' order
    rows: np.ndarray  # their rows in the season model's LGA order
    t0: int  # month index of column 0 (January of the first year)
    cases: np.ndarray  # [L, T] (never published)
    data: month_tests.MonthData  # out-of-sample seasons (each from the fold holding its state out)
    tests: dict[str, Any]
    rain_beta: np.ndarray | None  # coefficients of the adopted term on all states, if any


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


def month_evidence(inputs: Inputs, geo: Any, sm: Any, baseline: Callable[[list[str], np.ndarray], np.ndarray]
                   ) -> MonthEvidence | None:
    """Run the registered tests on the dated series (None when it is absent). `baseline(states, months)`
    gives the survey baseline [len(states), len(months)] the score would use. The reference is that
    baseline times each LGA's season from the fold that held its state out."""
    dated = inputs.dated_cases
    if dated is None or sm.fit is None or sm.fit.dated is None:
        return None
    cv, rule = sm.fit.cv, sm.rule
    pos = {c: i for i, c in enumerate(sm.lga_codes)}
    oos = cv.area_index[rule]
    lgas = sorted(c for c in set(dated["lga_code"].to_list()) if c in pos and np.isfinite(oos[pos[c]]).all())
    if not lgas:
        return None
    rows = np.array([pos[c] for c in lgas], dtype=int)
    first, last = dated["year"].cast(pl.Int64).min(), dated["year"].cast(pl.Int64).max()
    t0 = int(str(first)) * 12
    n = (int(str(last)) + 1) * 12 - t0
    cases = case_matrix(dated, lgas, t0, n)
    state_of = dict(zip(geo.lgas["lga_code"], geo.lgas["state_code"], strict=True))
    states = np.array([state_of[c] for c in lgas])
    months = np.arange(t0, t0 + n)
    base = baseline(states.tolist(), months)
    season = oos[rows][:, months % 12]
    reference = np.log(base * season / oos[rows].mean(axis=1, keepdims=True))
    data = month_tests.MonthData(t0, cases, reference, *_features(inputs, geo, sm, lgas, rows, t0, n), states)
    tests = month_tests.run_tests(data)
    beta = None
    if tests["adopted"]:
        term = tests["adopted"][0]
        # the published coefficients: fitted on every dated state, against the published season
        published = np.log(base * sm.lga_index[rows][:, months % 12] / sm.lga_index[rows].mean(axis=1, keepdims=True))
        y_ref, _ = month_tests.transforms(published, np.isfinite(cases), t0)
        beta = month_tests.fit_all(data.features[term], month_tests.outcome(cases) - y_ref)
        tests[term]["published_coefficients"] = [round(float(b), 4) for b in beta]
    return MonthEvidence(lgas, rows, t0, cases, data, tests, beta)


def _features(inputs: Inputs, geo: Any, sm: Any, lgas: list[str], rows: np.ndarray, t0: int, n: int
              ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rain = lga_recorded_rain(inputs, geo, lgas, t0 - 12, n + 12)
    clim = sm.lga_rain[rows][:, np.arange(t0 - 12, t0 + n) % 12]
    return month_tests.term_features(rain, clim, 12, n), month_tests.dry_months_mask(clim, 12, n)


def rain_factor(inputs: Inputs, geo: Any, sm: Any, term: str, beta: np.ndarray, months: list[int]) -> np.ndarray:
    """[n_lga (season model order), len(months)] multiplier exp(sum_k beta_k f_k) of the adopted term;
    1 where a lagged month's rainfall is not recorded."""
    t0 = min(months) - 12
    width = max(months) - t0 + 1
    rain = lga_recorded_rain(inputs, geo, sm.lga_codes, t0, width)
    clim = sm.lga_rain[:, np.arange(t0, t0 + width) % 12]
    f = month_tests.term_features(rain, clim, 12, width - 12)[term]
    cols = np.asarray(months) - t0 - 12
    return np.exp(np.einsum("k,klt->lt", beta, np.nan_to_num(f[:, :, cols], nan=0.0)))
