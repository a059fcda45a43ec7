"""Producer for /v1/transmission/states and /v1/transmission/lgas (SPEC 2.6-2.8, rule 6).

Model 4 (the published season rule whenever case records exist): each LGA's season is fitted to
routine case profiles (the archetype profiles and the dated LGA series) as harmonics of log cases,
with its rainfall climatology, latitude and dry months as covariates and partial pooling between
areas (pipeline.model.season_harmonics). In states with dated series the published season is the
whole-state fold that held the state out (cross-fitting). Every figure in `method.check` is from
folds that leave whole states out (pipeline.model.season_cv). Models 2 and 3 (a rainfall shape
shifted by a lag) are refitted in the same folds for comparison, and model 2's documented constants
are the fallback without any case record. docs/seasons.md has the reasoning.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from pipeline.cache import cached, code_of
from pipeline.datasets import survey_sample
from pipeline.datasets.base import BuildContext, Produced
from pipeline.errors import DatasetUnavailable
from pipeline.model import national_trend, ranges, season5, season_cv, season_harmonics
from pipeline.model.downscale import lga_climatology
from pipeline.model.seasons import (
    DRY_MONTH_MM,
    FLOOR_BOUNDS,
    INDEX_DECIMALS,
    AreaSeasonParams,
    area_index,
    best_months_share,
    circular_distance,
    dry_months,
    fit_table,
    high_share_of,
    peak_window,
    peak_window_share_of,
    season_centre,
    season_from_index,
    trough_to_peak,
)
from pipeline.sources import cases, dated_cases, rainfall, survey, temperature
from pipeline.sources.inputs import Inputs
from pipeline.sources.names import hbhi_lga_codes

if TYPE_CHECKING:
    from pipeline.geography import Geography

# Used only when every case record (archetype profiles and dated series) is absent from DATA_DIR:
# model 2's fit on the 22 archetype profiles of the 2026-11 data load, one floor everywhere
# (docs/seasons.md). With any records present the parameters are refitted on every build.
DEFAULT_PARAMS = AreaSeasonParams(lag_at_pivot=0.9, lag_per_dry_month=0.5, floor_at_pivot=0.77,
                                  floor_per_dry_month=0.0, lag_rule="linear")
Z_RANGE = ranges.Z_RANGE
SMALL_SAMPLE_CHILDREN = 100  # SPEC 2.7 / section 8
SURVEY_TEST = "microscopy"  # preferred wherever it exists; RDT only where a round has no microscopy
LAG_DECIMALS = 1
CENTRE_DECIMALS = 1
# Geopolitical zone -> band used to break the check down (north / middle belt / south).
BANDS = {
    "North West": "north", "North East": "north", "North Central": "middle_belt",
    "South West": "south", "South East": "south", "South South": "south",
}

RAINFALL_DECIMALS = 1
MODEL_5 = "model_5"
MODEL_6 = "model_6"
MODEL_7 = "model_7"
CASE_FITTED = (season_cv.MODEL_4, MODEL_5, MODEL_6, MODEL_7)  # rules whose index is fitted to cases, not built from rain
SHARE_DECIMALS = 4
CHECK_DECIMALS = 2

def description(p: AreaSeasonParams) -> str:
    """`method.description`: the rule with this release's constants."""
    return (
        "Expected monthly level of reported malaria cases, as a share of the peak month: "
        "index = floor + (1 - floor) x (rainfall climatology shifted later by the area's lag, scaled to peak 1). "
        f"Both depend on the area's dry months (months under 50 mm in the 1991-2020 CHIRPS climatology): "
        f"floor = {p.floor_at_pivot:.2f} {p.floor_per_dry_month:+.2f} x (dry months - 5), kept within "
        f"{FLOOR_BOUNDS[0]}-{FLOOR_BOUNDS[1]}; lag = {p.lag_at_pivot:.1f} {p.lag_per_dry_month:+.2f} x (dry months - 5) "
        "months, kept within -1 to 4 (fractional lags interpolate between months). Cases follow rain later, and "
        "the quiet months are quieter, where the dry season is long. The constants are fitted to 22 routine-data "
        "case profiles of LGA groups and to dated monthly case series of LGAs in seven states (fitting only; those "
        "rows are not published). Each season carries its own seasonal_floor and high_season_share_of_peak "
        "(where its rain-driven part reaches half its own peak): its high months are those at that share of the "
        "peak or more, and the high season is the run of high months holding the peak, carried across a single "
        "lower month. method.high_season_share_of_peak is the national season's. The check figures leave whole "
        "states out: every constant refitted without the state being scored."
    )

def description_model_4(f: season_harmonics.HarmonicFit) -> str:
    """`method.description` under model 4."""
    return (
        "Expected monthly level of reported malaria cases, as a share of the peak month, fitted to case records: "
        "each LGA's log profile is an annual plus a semi-annual harmonic whose four coefficients are a regression "
        "on the LGA's rainfall climatology (its own annual and semi-annual harmonics of log rain), latitude and dry "
        "months (months under 50 mm), plus the distance-weighted mean of the residuals of LGAs with dated case "
        f"series (range {f.range_km:.0f} km, shrunk toward the regression by {f.shrink:g}). The regression is fitted "
        "to 22 routine-data case profiles of LGA groups and to dated monthly case series of LGAs in seven states "
        "(fitting only; those rows are not published); the delay between rain and cases is learnt from the cases. "
        "A state's or the nation's season is the population-weighted mean of its LGAs'. seasonal_floor is the "
        "quietest month's share of the peak; high_season_share_of_peak is halfway between it and the peak; "
        "lag_months is how many months the season's centre lies after the rainfall climatology's. The check "
        "figures leave whole states out: nothing of the state scored (no LGA series, no group covering any of "
        "its population) is in the fit."
    )


CLASS_READ_FROM = {
    "method": "smoothed trough/peak",
    "archetype": "the archetype profile's smoothed trough/peak (season_class_trough_to_peak)",
    "larger": "the larger of the smoothed trough/peak and the archetype profile's (season_class_trough_to_peak)",
    "mean": "the mean of the smoothed trough/peak and the archetype profile's (season_class_trough_to_peak)",
}


def description_model_5(m5: season5.Published) -> str:
    """`method.description` under model 5."""
    what = {
        "latitude_band": "the latitude-band mean of the dated states' recorded seasons (log scale, each dated state "
                         f"weighted by exp(-|latitude difference| / {m5.hyper[0]:g} degrees))" if m5.hyper else "",
        "national_mean": "the mean of the dated states' recorded seasons (log scale, each state equally)",
        "archetype": "the LGA's archetype profile (NMEP routine incidence of its LGA group)",
        "model_4": "model 4 (harmonics of log cases regressed on rainfall, latitude and dry months, with the dated "
                   "LGAs' residuals pooled by distance)",
        "model_4_latitude_pooling": "model 4 with the dated LGAs' residuals pooled by latitude band",
    }.get(m5.resolved, m5.resolved)
    return (
        "Expected monthly level of reported malaria cases, as a share of the peak month (3-month smoothed), from "
        f"{what}. The method was chosen among model 4 and three references by nested whole-state cross-validation "
        "on the seven dated states (held-out state shape and timing); see /docs/validation.json. In the dated "
        "states every season is the one fitted without that state's own series. season_class (marked/moderate/weak, "
        f"{CLASS_READ_FROM.get(m5.class_source, m5.class_source)} < 0.50 / >= 0.70), peak_window (the months holding about 80 % of the probability of "
        "the peak, calibrated in the cross-validation), the season start/end and best-4-month errors are "
        "cross-validated on the development states; peak_month is null where the season is weak. LGAs carry their "
        "state's season (season_level \"state\") unless LGA deviations were shown to repeat across 2020-21 and "
        "2022-23 in the dated series. Dated series rows are used for fitting and validation only, never published."
    )


SURVEY_NOTE = (
    "Positivity in children 6-59 months, by microscopy wherever the round has it. A round or area "
    "with only an RDT figure is kept and labelled (`test`: RDT; `test_assumed` where the source does "
    "not say which test), because RDT reads higher than microscopy in the same children. clusters, children_tested and the 95% range are null where the source table does "
    "not give them, and small_sample is then null too (unknown, not false) unless a lower bound of "
    "100 or more children (children_tested_lower_bound) makes it false. 2010 has zone figures "
    "only, so no state entry for 2010."
)
RAINFALL_NOTE = (
    "typical_rainfall_mm is downscaled, not measured per LGA: the state's CHIRPS 1991-2020 monthly "
    "mean times the LGA's within-state ratio from the IDM/GSOD 2001-2016 LGA climatology "
    "(area-weighted LGA means reproduce the state value)."
)


# --- pure computation ------------------------------------------------------------------


def wide(df: pl.DataFrame, key: str, value: str, keys: list[str]) -> np.ndarray:
    """(len(keys), 12) matrix of `value` by `key` and month, rows in the order of `keys`."""
    piv = (
        df.select(key, pl.col("month").cast(pl.Int64), value)
        .pivot(on="month", index=key, values=value, sort_columns=True)
    )
    months = [str(m) for m in range(1, 13)]
    if set(months) - set(piv.columns):
        raise ValueError(f"{value}: not every month present")
    order = pl.DataFrame({key: keys})
    mat = order.join(piv, on=key, how="left").select(months).to_numpy().astype(float)
    if np.isnan(mat).any():
        raise ValueError(f"{value}: missing values for some {key}")
    return mat


@dataclass(frozen=True)
class SeasonFit:
    """What the fit and its leave-state-out check used and found (kept for the validation report,
    never published as such: the dated profiles derive from rows that may not leave the build)."""

    series: season_cv.Series
    cv: season_cv.CrossValidated
    dated: season_cv.DatedProfiles | None
    state_of_area: list[str]
    zone_of_state: dict[str, str]


@dataclass(frozen=True)
class SeasonModel:
    """The fitted seasonal index for every LGA and state, with its cross-validated check."""

    params: AreaSeasonParams  # model 2/3 constants (used only when rule is not model 4)
    rule: str  # the adopted rule (season_cv.RULES or season_cv.MODEL_4)
    fitted_to: int  # case series the published parameters were fitted to (0: DEFAULT_PARAMS)
    lga_codes: list[str]  # sorted by code
    lga_rain: np.ndarray  # [n_lga, 12] mm
    lga_lag: np.ndarray  # [n_lga]
    lga_floor: np.ndarray  # [n_lga]
    lga_index: np.ndarray  # [n_lga, 12] published (rounded) index
    check: dict[str, Any]
    fit: SeasonFit | None = None
    harmonic: season_harmonics.HarmonicFit | None = None  # model 4's published fit
    lga_population: np.ndarray | None = None  # [n_lga] in lga_codes order
    # [n_lga] True where the published season is the fold that held the LGA's state out (states with
    # dated series: none of the state's own rows shapes its published figures)
    cross_fitted: np.ndarray | None = None
    # model 5 as published (None: no dated series, the fallback of docs/model-5-protocol.md)
    published5: season5.Published | None = None
    lga_level: np.ndarray | None = None  # [n_lga] "lga" | "state": what each LGA's index is

    def state_cross_fitted(self, state_codes: list[str], lga_state: list[str] | np.ndarray) -> list[bool]:
        """Per state: its published season is fitted without its own series (all its LGAs are)."""
        if self.cross_fitted is None:
            return [False] * len(state_codes)
        st = np.asarray(lga_state)
        return [bool(self.cross_fitted[st == c].any()) for c in state_codes]

    def season_sd(self, level: str) -> float:
        """Out-of-sample log sd of the season at `level` ("states" or "lgas"): what a range adds for
        not knowing the season's shape. Falls back to the archetype groups' error, then to 0 (no check)."""
        err = self.check.get("season_error") or {}
        for key in (level, "archetype_groups"):
            if key in err:
                return float(err[key]["log_sd"])
        return 0.0

    def archetype_aggregate(self, groups: list[str] | np.ndarray) -> list[np.ndarray | None]:
        """Per group (sorted codes, as `aggregate`): the population-weighted archetype index at the LGAs'
        published level, what a season class reads under protocol amendment 4; None without model 5."""
        g = np.asarray(groups)
        codes = sorted(set(g.tolist()))
        m5 = self.published5
        if m5 is None or m5.archetype_index is None:
            return [None] * len(codes)
        pop = self.lga_population if self.lga_population is not None else np.ones(len(g))
        return [season_cv.weighted_profile(m5.archetype_index[g == c], pop[g == c] / pop[g == c].sum())
                for c in codes]

    def archetype_rows(self) -> list[np.ndarray | None]:
        """Per LGA (lga_codes order): its archetype index at its published level, or None."""
        m5 = self.published5
        if m5 is None or m5.archetype_index is None:
            return [None] * len(self.lga_codes)
        return list(m5.archetype_index)

    def aggregate(self, groups: list[str] | np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """(group codes, index, floor, lag) of the population-weighted seasons of LGA groups (states, or one
        group for the nation): profiles scaled to mean 1, averaged, rescaled to peak 1 and rounded; the
        floor is the aggregate's quietest month, the lag the population-weighted mean of its LGAs'."""
        g = np.asarray(groups)
        codes = sorted(set(g.tolist()))
        pop = self.lga_population if self.lga_population is not None else np.ones(len(g))
        ix, fl, lg = [], [], []
        for c in codes:
            rows = g == c
            w = pop[rows] / pop[rows].sum()
            prof = season_cv.weighted_profile(self.lga_index[rows], w)
            ix.append(np.round(prof, INDEX_DECIMALS))
            fl.append(float(ix[-1].min()) if self.rule in CASE_FITTED else float(w @ self.lga_floor[rows]))
            lg.append(float(w @ self.lga_lag[rows]))
        return codes, np.array(ix), np.array(fl), np.array(lg)


WEAK_PEAK_REASON = ("weak season: the smoothed quietest month is at least 0.70 of the peak, so no month is "
                    "reliably the peak; see peak_window")


def season_of(index: np.ndarray, lag: float, floor: float, cross_fitted: bool = False,
              model5: dict[str, Any] | None = None) -> dict[str, Any]:
    """SPEC 2.6 season at the area's own high-season share, plus the additive centre, peak
    window, lag, floor and share (so a client recomputes high_months from the index), and whether
    the season was fitted without the area's state's own dated series (docs/seasons.md); with
    `model5`, its additive fields (class, calibrated peak window, errors, level), and `peak_month`
    null with `peak_month_null_reason` where the season is weak."""
    share = float(high_share_of(floor))
    s = season_from_index(index, share)
    m5 = model5 or {}
    weak = m5.get("season_class") == "weak"
    spec = s.to_json()
    if weak:
        spec["peak_month"] = None
    return {
        **spec,
        "season_centre_month": round(float(season_centre(index)[0]), CENTRE_DECIMALS),
        "peak_window": list(peak_window(index, float(peak_window_share_of(floor)))),
        "lag_months": round(float(lag), LAG_DECIMALS),
        "seasonal_floor": round(float(floor), INDEX_DECIMALS),
        "high_season_share_of_peak": share,
        "fitted_without_own_series": bool(cross_fitted),
        **({"peak_month_null_reason": WEAK_PEAK_REASON if weak else None, **m5} if model5 is not None else {}),
    }


def model5_fields(sm: SeasonModel, index: np.ndarray, level: str, key: str,
                  archetype_index: np.ndarray | None = None) -> dict[str, Any]:
    """Model 5's additive fields of one area (`key`: "states" or "lgas" calibration); fixed, uncalibrated
    half-widths and null errors without dated series. `archetype_index`: the area's archetype index at its
    published level, which the class reads when the class source chosen in the CV is not the method's own
    trough/peak (protocol amendment 4)."""
    m5 = sm.published5
    class_tp, margin = None, 0.0
    if m5 is not None and m5.protocol >= 6 and m5.class_correction:
        # model 6: the amplitude corrected by its out-of-sample bias; `marked` only past its typical error
        bias, margin = m5.class_correction[key]
        ix = np.asarray(index, dtype=float)
        class_tp = float(ix.min() / ix.max()) + bias
    elif m5 is not None and m5.class_source != "method" and archetype_index is not None:
        class_tp = m5.class_tp(index, archetype_index)
    return season5.area_fields(index, level, m5.half_width[key] if m5 else None, m5.errors[key] if m5 else None,
                               class_tp, margin)


def national_index(state_rain: np.ndarray, population: np.ndarray, p: AreaSeasonParams) -> tuple[np.ndarray, float, float]:
    """(index, lag, floor) of the nation: the population-weighted mean of the state indices,
    rescaled to peak 1.

    Indices, not millimetres, are weighted: a person in wet Bayelsa counts as much as one in
    dry Yobe, so the national season is the one most people live with. Its floor and lag are
    the population-weighted means of the states'.
    """
    w = np.asarray(population, dtype=float)
    ix, floor, lag = area_index(state_rain, p, rounded=False)
    prof = (ix * w[:, None]).sum(axis=0) / w.sum()
    prof = prof / prof.max()
    nfloor = float(np.average(floor, weights=w))
    return np.round(prof, INDEX_DECIMALS), float(np.average(lag, weights=w)), nfloor


def series_weights(lga_archetype: pl.DataFrame, lgas: pl.DataFrame, lga_codes: list[str],
                   series: list[str]) -> np.ndarray:
    """[n_series, n_lga]: population of each series' LGAs (0 elsewhere)."""
    pos = {c: i for i, c in enumerate(lga_codes)}
    pop = dict(zip(lgas["lga_code"], lgas["population"].cast(pl.Float64), strict=True))
    w = np.zeros((len(series), len(lga_codes)))
    sidx = {a: i for i, a in enumerate(series)}
    for code, arch in lga_archetype.select("lga_code", "archetype").iter_rows():
        if code in pos and arch in sidx:
            w[sidx[arch], pos[code]] = pop[code]
    return w


def empty_check() -> dict[str, Any]:
    """The check when its case records are absent: nothing compared, no figure invented."""
    return {
        "series": 0, "states": [], "median_correlation": None, "mean_months_off": None,
        "mean_months_peak_is_off": None,
        "cross_validation": "not run: the case records are absent from this data load",
        "lag_rule_cv_errors": {}, "lag_rules_chosen": [],
        "mean_centre_months_off": None, "mean_best_4_month_share_error": None,
        "mean_trough_to_peak_error": None, "recorded_median_trough_to_peak": None,
        "recorded_max_best_4_month_share": None, "by_band": {},
    }


def _round(v: float, d: int) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), d)


def _opt_round(v: float | None, d: int) -> float | None:
    return None if v is None else round(float(v), d)


def survey_entries(rows: pl.DataFrame, with_residence: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    """SPEC 2.7 entries, one per survey year present in `rows` (already one area, one test).

    `with_residence`: rows with `area` urban/rural for national entries; absent figures
    are null. small_sample is null when children_tested is unknown.
    """
    out: list[dict[str, Any]] = []
    res: dict[tuple[int, str, str], float] = {}
    if with_residence is not None:
        res = {(y, a, t): v for y, a, t, v in
               with_residence.select("survey_year", "area", "test", "positivity").iter_rows()}
    for r in rows.sort("survey_year").iter_rows(named=True):
        n = r["children_tested"]
        e: dict[str, Any] = {
            "survey_year": r["survey_year"],
            "positivity": round(r["positivity"], SHARE_DECIMALS),
            "low": _opt_round(r["low"], SHARE_DECIMALS),
            "high": _opt_round(r["high"], SHARE_DECIMALS),
            "clusters": r["clusters"],
            "children_tested": n,
            "small_sample": None if n is None else n < SMALL_SAMPLE_CHILDREN,
        }
        if with_residence is not None:
            # urban and rural only from the same test as the national figure
            e["urban"] = _opt_round(res.get((r["survey_year"], "urban", r["test"])), SHARE_DECIMALS)
            e["rural"] = _opt_round(res.get((r["survey_year"], "rural", r["test"])), SHARE_DECIMALS)
        e["survey"] = r["survey"]
        e["test"] = r["test"]
        e["test_assumed"] = bool(r["test_assumed"])
        e["source"] = r["source"]
        out.append(e)
    return out


def one_row_per_round(survey_rows: pl.DataFrame, test: str = SURVEY_TEST) -> pl.DataFrame:
    """One row per (year, level, area): `test` where the round has it, else the other test.

    Microscopy is used wherever it exists; a round that published only an RDT figure for
    an area is kept rather than dropped, and its entry says `"test": "RDT"` so a reader
    never compares the two tests unawares (RDT reads higher: it stays positive for weeks
    after treatment). Among rows of the same test the one carrying more of
    interval/clusters/children tested wins, then the first by source name.
    """
    filled = (
        pl.col("low").is_not_null().cast(pl.Int8)
        + pl.col("high").is_not_null().cast(pl.Int8)
        + pl.col("clusters").is_not_null().cast(pl.Int8)
        + pl.col("children_tested").is_not_null().cast(pl.Int8)
    )
    return (
        survey_rows.with_columns((pl.col("test") != test).cast(pl.Int8).alias("_other"), filled.alias("_filled"))
        .sort(["survey_year", "level", "area", "_other", "_filled", "source"],
              descending=[False, False, False, False, True, False])
        .unique(subset=["survey_year", "level", "area"], keep="first", maintain_order=True)
        .drop("_other", "_filled")
    )


def survey_trends(
    survey_rows: pl.DataFrame, zone_population: dict[str, float] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """National trend (with urban/rural) and per-state trends keyed by state_code.

    The national trend is the microscopy series of pipeline.model.national_trend (one test
    only; a round without a national figure gets its zones' population-weighted mean,
    labelled `derived`); `national_survey_trends` gives both series.
    """
    rows = one_row_per_round(survey_rows)
    national = national_survey_trends(survey_rows, zone_population or {})[SURVEY_TEST]
    states = {
        code: survey_entries(part)
        for (code,), part in rows.filter(pl.col("level") == "state").group_by("state_code", maintain_order=True)
    }
    return national, states


def national_survey_trends(survey_rows: pl.DataFrame, zone_population: dict[str, float]) -> dict[str, list[dict[str, Any]]]:
    """Per test (microscopy, RDT): that test's national entries, each with urban/rural of the
    same test and the additive `derived`, `derived_from` and `test_note` fields."""
    nat = national_trend.consistent_rows(survey_rows, zone_population)
    residence = nat.filter(pl.col("level") == "residence")
    out = {}
    for test in national_trend.TESTS:
        part = one_row_per_round(national_trend.series(nat, test), test)
        extra = {r["survey_year"]: r for r in part.iter_rows(named=True)}
        entries = survey_entries(part, residence)
        out[test] = [
            {**e, "derived": bool(extra[e["survey_year"]]["derived"]),
             "derived_from": extra[e["survey_year"]]["derived_from"],
             "test_note": extra[e["survey_year"]]["test_note"]}
            for e in entries
        ]
    return out


# --- producer ----------------------------------------------------------------------------


def _inputs_present(data_dir: Path) -> list[str]:
    """Missing transmission inputs (relative paths); empty when all are there."""
    missing = [f for f in (rainfall.CHIRPS_CLIMATOLOGY, rainfall.LGA_CLIMATOLOGY) if not (data_dir / f).exists()]
    if not (data_dir / survey.SURVEY_CSV).exists() and not (data_dir / survey.DHS_API_JSON).exists():
        missing.append(f"{survey.SURVEY_CSV} (or {survey.DHS_API_JSON})")
    return missing


CLIMATOLOGY_YEARS = (1991, 2020)


def state_climatology(data_dir: Path) -> pl.DataFrame:
    """ocha_pcode, month, rainfall_mm: the CHIRPS 1991-2020 climatology file, or, when a data
    load lacks it, the same mean computed from the recorded monthly CHIRPS series (all its
    years if it does not cover 1991-2020), so the risk score keeps its season."""
    if (Path(data_dir) / rainfall.CHIRPS_CLIMATOLOGY).exists():
        return rainfall.read_state_chirps_climatology(data_dir)
    rec = rainfall.read_recorded_rainfall(data_dir).state.with_columns(
        pl.col("period").str.slice(0, 4).cast(pl.Int64).alias("year"),
        pl.col("period").str.slice(5, 2).cast(pl.Int64).alias("month"),
    )
    base = rec.filter(pl.col("year").is_between(*CLIMATOLOGY_YEARS))
    base = base if base.height else rec
    return base.group_by("ocha_pcode", "month").agg(pl.col("rainfall_mm").mean()).sort("ocha_pcode", "month")


_MEMO: list[tuple[tuple[Any, ...], Any, SeasonModel]] = []  # at most one (key, geography, model)


def _memo_key(data_dir: Path) -> tuple[Any, ...]:
    """The inputs' paths with size and modification time: a changed file is a new fit."""
    files = (rainfall.CHIRPS_CLIMATOLOGY, rainfall.LGA_CLIMATOLOGY, cases.ARCHETYPE_PROFILES, cases.LGA_ARCHETYPES,
             temperature.LGA_TEMPERATURE,
             *(str(f.relative_to(data_dir)) for f in dated_cases.dated_files(Path(data_dir))))
    out: list[Any] = [str(Path(data_dir).resolve())]
    for f in files:
        path = Path(data_dir) / f
        st = path.stat() if path.exists() else None
        out.append((f, st.st_size, st.st_mtime_ns) if st else (f, None))
    return tuple(out)


def rain_delay(index: np.ndarray, rain: np.ndarray) -> np.ndarray:
    """Months the season's centre lies after the rainfall climatology's (signed, -6 to 6): what
    `lag_months` reports under model 4, where the delay is learnt from cases rather than set."""
    return season_harmonics.signed_month_difference(season_centre(index), season_centre(rain))


def season_model(data_dir: Path, geo: Any, inputs: Inputs | None = None) -> SeasonModel:
    """Fit (or, without any case records, take DEFAULT_PARAMS) and apply the seasonal index to every LGA.

    The risk producer multiplies its baseline by this same index, so the fit is memoised
    per data directory and geography for the one build that asks twice.
    """
    inputs = Inputs(data_dir, geo) if inputs is None else inputs
    # model 6's recorded-rain check reads the recorded rain of the dated months: those rows, not the file,
    # are part of the key, so a new month of rainfall does not refit while a revised dated month does
    rain_key = dated_rain_digest(inputs)
    key = (*_memo_key(data_dir), rain_key)
    if _MEMO and _MEMO[0][0] == key and _MEMO[0][1] is geo:
        return _MEMO[0][2]
    # kept between builds by the content of what the fit reads (pipeline.cache): a new month of
    # recorded rainfall does not refit it unless the climatology has to come from that series
    reads = [f for f, *_ in key[1:-1]] + ["admin"]
    if not (Path(data_dir) / rainfall.CHIRPS_CLIMATOLOGY).exists():
        reads.append("rainfall")
    model = cached("season-model", Path(data_dir), reads,
                   code_of("pipeline.model", "pipeline.sources", "pipeline.geography", __name__),
                   lambda: _fit_season_model(Path(data_dir), geo, inputs), extra=rain_key)
    _MEMO[:] = [(key, geo, model)]
    return model


def _fit_season_model(data_dir: Path, geo: Any, inputs: Inputs | None) -> SeasonModel:
    inputs = Inputs(data_dir, geo) if inputs is None else inputs
    lgas = geo.lgas.sort("lga_code")
    lga_codes = lgas["lga_code"].to_list()
    state_clim = inputs.state_climatology if inputs.state_climatology is not None else state_climatology(data_dir)
    lga_clim = lga_climatology(geo, state_clim, inputs.lga_climatology)
    lga_rain = wide(lga_clim, "lga_code", "rainfall_mm", lga_codes)
    params, rule, fitted_to, check, sfit, harmonic = DEFAULT_PARAMS, "model_2", 0, empty_check(), None, None
    m5 = None
    if inputs.archetype_profiles is not None or inputs.dated_cases is not None:
        fitted = run_check(inputs, geo, lga_codes, lga_rain, state_clim)
        if fitted is not None:
            params, rule, check, sfit, harmonic, m5 = fitted
            fitted_to = check["series"]
    pop = lgas["population"].cast(pl.Float64).to_numpy()
    cross = np.zeros(len(lga_codes), dtype=bool)
    level = np.full(len(lga_codes), "state", dtype=object)
    if m5 is not None:
        index, cross, level = np.round(m5.lga_profile, INDEX_DECIMALS), m5.cross, m5.level
        floor = index.min(axis=1)
        lag = rain_delay(index, lga_rain)
    elif harmonic is not None:
        # no dated series: model 4's archetype-only fit, each LGA at its state's season (no LGA detail is
        # claimed without a split-half test), smoothed as model 5 publishes (docs/model-5-protocol.md)
        areas = area_data(geo, lga_codes, lga_rain)
        prof = season_harmonics.profiles(harmonic.predict(areas.x, areas.xy))
        index = season5.published_index(state_level(prof, areas.state, pop))
        floor = index.min(axis=1)
        lag = rain_delay(index, lga_rain)
    else:
        index, floor, lag = area_index(lga_rain, params)
        level[:] = "lga"
    return SeasonModel(params, rule, fitted_to, lga_codes, lga_rain, lag, floor, index, check, sfit, harmonic, pop,
                       cross, m5, level)


def state_level(prof: np.ndarray, area_state: np.ndarray, pop: np.ndarray) -> np.ndarray:
    """[n, 12] each LGA's row replaced by its state's population-weighted profile (rows scaled to mean 1)."""
    m = prof / prof.mean(axis=1, keepdims=True)
    out = np.empty_like(m)
    for s in np.unique(area_state):
        rows = area_state == s
        out[rows] = (pop[rows] / pop[rows].sum()) @ m[rows]
    return out


def held_out_index(data_dir: Path, geo: Any, states_left_out: list[str]) -> np.ndarray | None:
    """[n_lga, 12] (LGAs sorted by code) the published model-5/6 index as a fold leaving `states_left_out`
    out would publish it: method as released, its hyperparameters and the LGA detail rule chosen on the
    remaining dated states only (for checks built on the season, e.g. season ratios). None without
    dated series or when model 5 is not the published rule."""
    sm = season_model(data_dir, geo)
    if sm.published5 is None or sm.fit is None:
        return None
    inputs = Inputs(data_dir, geo)
    d = _season5_data_for(inputs, geo, sm)
    return None if d is None else season5.held_out_index(d, sm.published5.method, states_left_out)


def _season5_data_for(inputs: Inputs, geo: Any, sm: SeasonModel) -> season5.Data | None:
    assert sm.fit is not None
    areas = area_data(geo, sm.lga_codes, sm.lga_rain)
    units = season_cv.harmonic_units(sm.fit.series, areas, dated_data_weight(inputs.dated_cases))
    std = season_harmonics.Standardiser.of(areas.x)
    dated_states = list(sm.fit.dated.state_codes) if sm.fit.dated is not None else []
    d = season5_data(inputs, sm.fit.series, sm.fit.dated, areas, units, std, dated_states, sm.lga_codes)
    if d is not None and sm.published5 is not None and sm.published5.protocol >= 6:
        state_clim = inputs.state_climatology if inputs.state_climatology is not None else state_climatology(inputs.data_dir)
        (with_model_7 if sm.published5.protocol >= 7 else with_model_6)(d, inputs, geo, sm.lga_codes, sm.lga_rain,
                                                                         state_clim)
    return d


def with_model_6(d: season5.Data, inputs: Inputs, geo: Geography, lga_codes: list[str], lga_rain: np.ndarray,
                 state_clim: pl.DataFrame) -> season5.Data:
    """Model 6 (docs/model-6-protocol.md): the rain-driven candidates read every LGA's own rain and
    temperature climatologies and, for the recorded-rain check, the dated months' rain."""
    d.area_rain, d.area_temp, d.protocol = lga_rain, lga_temperature(inputs, lga_codes, lga_rain), 6
    d.area_rain_months = dated_area_rain(inputs, geo, lga_codes, lga_rain,
                                         state_rain_matrix(state_clim, geo.states.sort("state_code")))
    return d


def with_model_7(d: season5.Data, inputs: Inputs, geo: Geography, lga_codes: list[str], lga_rain: np.ndarray,
                 state_clim: pl.DataFrame) -> season5.Data:
    """Model 7 (docs/model-7-protocol.md): model 6's inputs, and the rains' onset of every LGA's state (its
    climatology for the season, each dated year's own for the recorded-rain check). Without the dekadal
    rainfall `rain_onset` is not a candidate."""
    with_model_6(d, inputs, geo, lga_codes, lga_rain, state_clim)
    d.protocol = 7
    seasons = state_rain_seasons(inputs, geo)
    if seasons is not None:
        d.area_onset, d.area_onset_months = area_onsets(seasons, geo, inputs)
    return d


ONSET_CLIMATE_YEARS = (1991, 2020)  # the climatology period of the published typical_rainfall_mm


def state_rain_seasons(inputs: Inputs, geo: Geography) -> pl.DataFrame | None:
    """Each state's rain season per year from its dekadal CHIRPS (rain_season.dekadal_rain_seasons, keyed
    by state_code); None without the dekadal file."""
    from pipeline.model import rain_season

    dek = inputs.state_dekadal
    return None if dek is None else rain_season.state_dekadal_seasons(dek, geo.states)[1]


def area_onsets(seasons: pl.DataFrame, geo: Geography, inputs: Inputs) -> tuple[np.ndarray, np.ndarray | None]:
    """([n, 12] share of each LGA's state's complete climatology years whose rains began in each calendar
    month, [n, MAX_LAG + T] 1 in the calendar month of each dated year's onset, as dated_area_rain's
    columns; None without dated series)."""

    states = geo.states.sort("state_code")["state_code"].to_list()
    lstate = geo.lgas.sort("lga_code")["state_code"].to_list()
    y0, y1 = ONSET_CLIMATE_YEARS
    clim = seasons.filter(pl.col("complete") & pl.col("year").is_between(y0, y1))
    n_years = clim.group_by("area").len()
    counts = (clim.filter(pl.col("onset_month").is_not_null()).group_by("area", "onset_month").len()
              .join(n_years.rename({"len": "n"}), on="area").with_columns((pl.col("len") / pl.col("n")).alias("share")))
    srow = {c: i for i, c in enumerate(states)}
    shares = np.zeros((len(states), 12))
    keep = counts.filter(pl.col("area").is_in(states))
    shares[[srow[a] for a in keep["area"].to_list()], (keep["onset_month"].to_numpy() - 1)] = keep["share"].to_numpy()
    rows = [srow[c] for c in lstate]
    if inputs.dated_cases is None or inputs.dated_cases.height == 0:
        return shares[rows], None
    periods = kernel_periods(dated_months(inputs.dated_cases))
    col = {p: k for k, p in enumerate(periods)}
    on = seasons.filter(pl.col("onset_date").is_not_null() & pl.col("area").is_in(states)).select(
        "area", pl.col("onset_date").dt.strftime("%Y-%m").alias("p")).filter(pl.col("p").is_in(periods))
    months = np.zeros((len(states), len(periods)))
    months[[srow[a] for a in on["area"].to_list()], [col[p] for p in on["p"].to_list()]] = 1.0
    return shares[rows], months[rows]


def cross_fitted_index(index: np.ndarray, sfit: SeasonFit, area_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index, cross-fitted rows): in every state with dated series, each LGA's published index is
    the one of the whole-state fold that held that state out (its LGA series, every archetype group
    covering it and the pooling constants' choice all without it), as the check already fitted it.
    So no row of a state's own dated series shapes a published figure of that state; the series enter
    only through coefficients pooled over the other states. Other states keep the full fit."""
    dated = set(sfit.dated.state_codes) if sfit.dated is not None else set()
    held = sfit.cv.area_index.get(season_cv.MODEL_4)
    rows = np.isin(area_state, sorted(dated))
    if held is None or not rows.any():
        return index, np.zeros(len(index), dtype=bool)
    rows &= np.isfinite(held).all(axis=1)
    out = index.copy()
    out[rows] = np.round(held[rows], INDEX_DECIMALS)
    return out, rows


def produce(ctx: BuildContext) -> Produced:
    data_dir = Path(ctx.data_dir)
    missing = _inputs_present(data_dir)
    if missing:
        raise DatasetUnavailable(f"transmission inputs absent: {', '.join(missing)}")
    geo = ctx.geography
    states = geo.states.sort("state_code")
    lgas = geo.lgas.sort("lga_code")
    sm = season_model(data_dir, geo, ctx.inputs)
    p = sm.params

    state_rain = state_rain_matrix(ctx.inputs.state_climatology, states)
    pop = states["population"].cast(pl.Float64).to_numpy()
    if sm.rule in CASE_FITTED or sm.harmonic is not None:
        area_state = lgas["state_code"].to_numpy()
        codes, state_index, state_floor, _ = sm.aggregate(area_state)
        assert codes == states["state_code"].to_list()
        state_lag = rain_delay(state_index, state_rain)
        _, nat, nat_f, nat_l = sm.aggregate(np.full(len(area_state), "NG"))
        nat_ix, nat_floor, nat_lag = nat[0], float(nat_f[0]), float(np.average(state_lag, weights=pop))
    else:
        state_index, state_floor, state_lag = area_index(state_rain, p)
        nat_ix, nat_lag, nat_floor = national_index(state_rain, pop, p)
    lga_state = lgas["state_code"].to_numpy()
    state_arch = dict(zip(sorted(set(lga_state.tolist())), sm.archetype_aggregate(lga_state), strict=True))
    nat_arch = sm.archetype_aggregate(np.full(len(lga_state), "NG"))[0]
    national = season_of(nat_ix, nat_lag, nat_floor,
                         model5=model5_fields(sm, nat_ix, "national", "states", nat_arch))
    lga_codes = sm.lga_codes

    state_names = dict(zip(states["state_code"], states["state"], strict=True))
    survey_rows = ctx.inputs.survey
    zone_pop = {z: float(v) for z, v in states.group_by("zone").agg(pl.col("population").sum()).iter_rows()}
    nat_series = national_survey_trends(survey_rows, zone_pop)
    nat_trend, state_trends = nat_series[SURVEY_TEST], survey_trends(survey_rows, zone_pop)[1]
    # survey sample (pipeline/datasets/survey_sample.py): additive lower bounds, small_sample where certain
    bounds = survey_sample.read_bounds(data_dir, states)
    nat_rdt, _ = survey_sample.attach(nat_series["RDT"], {}, bounds)
    nat_trend, state_trends = survey_sample.attach(nat_trend, state_trends, bounds)

    sources = {
        "rainfall": rainfall.CHIRPS_SOURCE,
        "lga_rainfall_shape": rainfall.LGA_CLIM_SOURCE,
        "check_cases": cases.CASES_SOURCE,
        "fit_dated_cases": dated_cases.DATED_CASES_SOURCE,
        "surveys": sorted(set(survey_rows["source"].to_list())),
        "survey_note": SURVEY_NOTE,
        "survey_sample": survey_sample.source_block(),
    }
    states_doc = {
        "method": {
            "cases_follow_rain_by_months": round(float(np.average(state_lag, weights=pop)), LAG_DECIMALS),
            "high_season_share_of_peak": national["high_season_share_of_peak"],
            "description": (description_model_5(sm.published5) if sm.published5 is not None
                            else description(p) if sm.harmonic is None else description_model_4(sm.harmonic)),
            "check": sm.check,
            "seasonal_floor": national["seasonal_floor"],
            **({} if sm.harmonic is not None else {
                "floor_at_5_dry_months": p.floor_at_pivot,
                "floor_per_dry_month": p.floor_per_dry_month,
                "floor_bounds": list(FLOOR_BOUNDS),
                "lag_at_5_dry_months": p.lag_at_pivot,
                "lag_per_dry_month": p.lag_per_dry_month,
                "lag_rule": p.lag_rule,
            }),
            **({"season_model": sm.harmonic.to_json()} if sm.harmonic is not None else {}),
            "season_rule": sm.rule,
            "dry_month_below_mm": DRY_MONTH_MM,
            "peak_window_probability": season5.WINDOW_PROBABILITY,
            "peak_window_half_width_months": (sm.published5.half_width if sm.published5 is not None
                                              else {"uncalibrated": season5.FALLBACK_HALF_WIDTH}),
            "season_class_thresholds": {"weak_trough_to_peak_at_least": season5.WEAK_TROUGH_TO_PEAK,
                                        "marked_trough_to_peak_below": season5.MARKED_TROUGH_TO_PEAK},
            "parameters_fitted_to_series": sm.fitted_to,
        },
        "national": {"season": national, "survey_trend": nat_trend, "survey_trend_rdt": nat_rdt},
        "states": [
            {
                "state_code": code,
                "state": name,
                "zone": zone,
                "season": season_of(ix, lag, floor, cf, model5_fields(sm, ix, "state", "states", state_arch.get(code))),
                "survey_trend": state_trends.get(code, []),
            }
            for code, name, zone, ix, lag, floor, cf in zip(
                states["state_code"], states["state"], states["zone"], state_index, state_lag, state_floor,
                sm.state_cross_fitted(states["state_code"].to_list(), lgas["state_code"].to_list()), strict=True
            )
        ],
        "source": sources,
    }

    by_code = {
        code: {"lga_code": code, **season_of(ix, lag, floor, cf, model5_fields(sm, ix, str(lv), "lgas", ax)),
               "typical_rainfall_mm": [round(float(v), RAINFALL_DECIMALS) for v in rain]}
        for code, ix, lag, floor, rain, cf, lv, ax in zip(
            lga_codes, sm.lga_index, sm.lga_lag, sm.lga_floor, sm.lga_rain,
            sm.cross_fitted if sm.cross_fitted is not None else np.zeros(len(lga_codes), dtype=bool),
            sm.lga_level if sm.lga_level is not None else np.full(len(lga_codes), "lga"), sm.archetype_rows(),
            strict=True)
    }
    names = dict(zip(lgas["lga_code"], lgas["lga"], strict=True))
    order = lgas.sort(pl.col("lga").str.to_lowercase(), "lga_code").select("lga_code", "state_code")
    lga_docs: dict[tuple[str, ...], Any] = {}
    for (code,), part in order.group_by("state_code", maintain_order=True):
        lga_docs[(code,)] = {
            "state_code": code,
            "state": state_names[code],
            "lgas": [_lga_record(by_code[c], names[c]) for c in part["lga_code"]],
            "source": {"rainfall": rainfall.CHIRPS_SOURCE, "lga_rainfall_shape": rainfall.LGA_CLIM_SOURCE, "note": RAINFALL_NOTE},
        }
    for code in states["state_code"]:
        lga_docs.setdefault((code,), {"state_code": code, "state": state_names[code], "lgas": []})
    return Produced(
        dataset="transmission",
        documents={"/v1/transmission/states": {(): states_doc}, "/v1/transmission/lgas": lga_docs},
    )


def _lga_record(rec: dict[str, Any], name: str) -> dict[str, Any]:
    """SPEC 2.8 field order: lga_code, lga, then the season, then typical rainfall."""
    return {"lga_code": rec["lga_code"], "lga": name, **{k: v for k, v in rec.items() if k != "lga_code"}}


def state_rain_matrix(state_clim: pl.DataFrame | None, states: pl.DataFrame) -> np.ndarray:
    """[n_states, 12] CHIRPS climatology in the order of `states`."""
    if state_clim is None:
        raise DatasetUnavailable(f"transmission inputs absent: {rainfall.CHIRPS_CLIMATOLOGY}")
    if "state_code" not in state_clim.columns:
        state_clim = state_clim.join(states.select("ocha_pcode", "state_code"), on="ocha_pcode", how="inner")
    return wide(state_clim, "state_code", "rainfall_mm", states["state_code"].to_list())


def archetype_series(inputs: Inputs, geo: Geography, lga_codes: list[str]) -> tuple[list[str], np.ndarray, np.ndarray, list[str]]:
    """(names, weights [n, n_lga], recorded [n, 12], home state) of the archetype profiles present."""
    if inputs.archetype_profiles is None or inputs.lga_archetypes is None:
        return [], np.zeros((0, len(lga_codes))), np.zeros((0, 12)), []
    recorded = inputs.archetype_profiles
    arche = inputs.lga_archetypes
    arche = arche.join(hbhi_lga_codes(arche, geo, source=cases.LGA_ARCHETYPES), on="lga", how="inner")
    names = sorted(set(recorded["archetype"]))
    w_all = series_weights(arche, geo.lgas, lga_codes, names)
    names = [a for a, w in zip(names, w_all, strict=True) if w.sum() > 0]
    if not names:
        return [], np.zeros((0, len(lga_codes))), np.zeros((0, 12)), []
    weights = series_weights(arche, geo.lgas, lga_codes, names)
    rec = wide(recorded.filter(pl.col("archetype").is_in(names)), "archetype", "incidence", names)
    state_of = geo.lgas.sort("lga_code")["state_code"].to_list()
    home = []
    for w in weights:
        by_state: dict[str, float] = {}
        for i in np.flatnonzero(w):
            by_state[state_of[i]] = by_state.get(state_of[i], 0.0) + float(w[i])
        home.append(max(sorted(by_state), key=lambda s: by_state[s]))
    return names, weights, rec, home


def area_data(geo: Geography, lga_codes: list[str], lga_rain: np.ndarray) -> season_cv.AreaData:
    """Covariates, coordinates, population and state of every LGA, in `lga_codes` order."""
    lgas = geo.lgas.sort("lga_code")
    assert lgas["lga_code"].to_list() == lga_codes
    xy = lgas.select("rep_lon", "rep_lat").to_numpy().astype(float)
    x = season_harmonics.rain_covariates(lga_rain, xy[:, 1], dry_months(lga_rain))
    return season_cv.AreaData(x, xy, lgas["population"].cast(pl.Float64).to_numpy(),
                              np.array(lgas["state_code"].to_list()))


def dated_data_weight(dated_cases: pl.DataFrame | None) -> dict[str, float]:
    """Share of its months each dated LGA has a usable count for (its weight when residuals are pooled)."""
    if dated_cases is None:
        return {}
    d = dated_cases.group_by("lga_code").agg(pl.col("cases").is_not_null().mean().alias("w"))
    return dict(d.iter_rows())


def run_check(
    inputs: Inputs, geo: Geography, lga_codes: list[str], lga_rain: np.ndarray, state_clim: pl.DataFrame,
) -> tuple[AreaSeasonParams, str, dict[str, Any], SeasonFit, season_harmonics.HarmonicFit,
            season5.Published | None] | None:
    """Fit the season models to the case records and check them leaving whole states out.

    Returns (model-3 constants, adopted rule, `check`, what the check used, model 4's published fit),
    or None when no usable series exists. Model 4 (case harmonics, partially pooled) is published;
    models 2 and 3 are refitted in the same folds as the comparison the check reports.
    """
    names, weights, rec, home = archetype_series(inputs, geo, lga_codes)
    dated = None
    if inputs.dated_cases is not None:
        dated = season_cv.dated_profiles(inputs.dated_cases)
        if not dated.lga_codes:
            dated = None
    series = season_cv.series_table(names, weights, rec, home, dated, lga_codes)
    if not series.names:
        return None
    state_of = geo.lgas.sort("lga_code")["state_code"].to_list()
    states = geo.states.sort("state_code")
    zone_of = dict(zip(states["state_code"], states["zone"], strict=True))
    state_rain = state_rain_matrix(state_clim, states)
    srow = {c: i for i, c in enumerate(states["state_code"].to_list())}
    dated_states = [s for s in (dated.state_codes if dated else []) if s in srow]
    table = fit_table(lga_rain, series.weights, series.recorded, "linear")
    cv = season_cv.leave_state_out(table, lga_rain, series, state_of, dated_states,
                                   {s: state_rain[srow[s]] for s in dated_states})
    areas = area_data(geo, lga_codes, lga_rain)
    units = season_cv.harmonic_units(series, areas, dated_data_weight(inputs.dated_cases))
    std = season_harmonics.Standardiser.of(areas.x)
    cv = season_cv.harmonic_leave_state_out(series, areas, units, std, dated_states, cv)
    rules = (*season_cv.RULES, season_cv.MODEL_4)
    sq = {r: round(season_cv.squared_error(cv.series_pred[r], series.recorded, series.weight_joint), 4) for r in rules}
    rule = season_cv.MODEL_4
    params = season_cv.fit(table, lga_rain, series, "model_3")
    everything = np.ones(len(series.names), dtype=bool)
    rk, sh = season_harmonics.choose_pooling(units, std, everything)
    harmonic = season_harmonics.fit(units, std, everything, rk, sh)
    d5 = season5_data(inputs, series, dated, areas, units, std, dated_states, lga_codes)
    if d5 is not None:
        with_model_7(d5, inputs, geo, lga_codes, lga_rain, state_clim)
    m5 = season5.publish(d5) if d5 is not None else None
    if m5 is not None and d5 is not None:
        rule = MODEL_7 if m5.protocol >= 7 else MODEL_6 if m5.protocol >= 6 else MODEL_5
        cv = with_model_5(cv, series, m5, d5, lga_codes, rule)
        sq[rule] = round(season_cv.squared_error(cv.series_pred[rule], series.recorded, series.weight_joint), 4)
    sfit = SeasonFit(series, cv, dated, state_of, zone_of)
    names_of = dict(zip(states["state_code"], states["state"], strict=True))
    check = build_check(sfit, rule, sq, dated_states, names_of)
    if m5 is not None:
        check["model_5"] = model_5_check(m5, names_of)
        if m5.protocol >= 6:
            check[f"model_{m5.protocol}"] = season_protocol_check(m5)
    return params, rule, check, sfit, harmonic, m5


def with_model_5(cv: season_cv.CrossValidated, series: season_cv.Series, m5: season5.Published, d: season5.Data,
                 lga_codes: list[str], key: str = MODEL_5) -> season_cv.CrossValidated:
    """Model 5's out-of-sample predictions added to `cv` under MODEL_5: the dated LGAs' and states' from the
    outer folds; the archetype groups' from the published LGA seasons (cross-fitted in the dated states; out of
    sample for the references built on the dated series only, which never see an archetype profile)."""
    S = series.recorded.shape[0]
    pub = m5.lga_profile
    w = series.weights / series.weights.sum(axis=1, keepdims=True)
    pred = season_cv.weighted_profile(pub, w) if S else np.zeros((0, 12))
    pos = {c: i for i, c in enumerate(lga_codes)}
    out_row = {int(a): k for k, a in enumerate(d.rec_area)}
    for i, (name, kind) in enumerate(zip(series.names, series.kind, strict=True)):
        if kind == "lga" and pos.get(name) in out_row:
            pred[i] = m5.lga_out[out_row[pos[name]]]
    ai = np.full(pub.shape, np.nan)
    ai[m5.cross] = np.round(pub[m5.cross], INDEX_DECIMALS)
    return season_cv.CrossValidated(
        cv.folds, {**cv.series_pred, key: pred}, {**cv.series_floor, key: pred.min(axis=1)},
        {**cv.state_pred, key: m5.state_out}, {**cv.area_floor, key: ai.min(axis=1)},
        {**cv.area_lag, key: np.full(len(pub), np.nan)}, {**cv.area_index, key: ai})


def model_5_check(m5: season5.Published, names: dict[str, str]) -> dict[str, Any]:
    """`method.check.model_5`: the nested whole-state cross-validation's summaries (no profile, no series)."""
    return {
        "cross_validation": "nested whole-state cross-validation on the seven dated (development) states: outer "
                            "folds leave one state out; inside each, an inner leave-one-state-out over the other "
                            "six chooses hyperparameters and method (docs/model-5-protocol.md)",
        "published_method": m5.method,
        "selection_rule": "least outer-fold mean loss ((1 - shape r) + |centre error| / 6, left-out states) among "
                          "the methods whose mean signed state peak error is within 0.5 month (protocol amendment 2)",
        "publishable_methods": m5.publishable,
        "release_method": m5.resolved,
        "release_hyperparameters": list(m5.hyper),
        "release_at_grid_edge": m5.at_grid_edge,
        "methods": m5.summaries,
        "chosen_per_fold": {m: [{**c, "left_out": names.get(c["left_out"], c["left_out"])} for c in v]
                            for m, v in m5.chosen.items()},
        "peak_window_half_width_months": m5.half_width,
        "cross_validated_errors": m5.errors,
        "split_half": {"rule": m5.split_half["rule"],
                       "by_state": {names.get(k, k): v for k, v in m5.split_half["by_state"].items()},
                       "recorded_class": {names.get(k, k): v for k, v in m5.split_half["recorded_class"].items()},
                       "minimum_effect": {"median_r": season5.SPLIT_MIN_MEDIAN_R,
                                          "share_positive": season5.SPLIT_MIN_SHARE_POSITIVE}},
        "class_thresholds": {"weak_trough_to_peak_at_least": season5.WEAK_TROUGH_TO_PEAK,
                             "marked_trough_to_peak_below": season5.MARKED_TROUGH_TO_PEAK},
        "class_source": {
            "rule": "protocol amendment 4: the amplitude the class is read from is chosen in the nested CV among "
                    "the published method's smoothed trough/peak (method), the archetype profile's (archetype), "
                    "the larger of the two (larger) and their mean (mean), by the balanced accuracy of the weak "
                    "flag on the inner left-out states' dated LGAs; ties to method",
            "candidates": list(season5.CLASS_SOURCES),
            "release": m5.class_source,
            "release_inner_weak_balanced_accuracy": m5.class_scores,
        },
    }


def dated_rain_digest(inputs: Inputs) -> str:
    """SHA-256 of the recorded state rainfall up to the last dated month (what the recorded-rain check
    reads); empty without dated series."""
    import hashlib

    if inputs.dated_cases is None or inputs.dated_cases.height == 0:
        return ""
    last = dated_months(inputs.dated_cases)[-1]
    rows = (inputs.recorded_rainfall.state.filter(pl.col("period") <= f"{last // 100:04d}-{last % 100:02d}")
            .select("ocha_pcode", "period", "rainfall_mm").sort("ocha_pcode", "period"))
    h = hashlib.sha256(rows.write_csv().encode())
    dek = inputs.state_dekadal
    if dek is not None:
        # model 7's onsets: the climatology years and every season year of the dated months (a season year
        # may run two dekads into the next calendar year); later dekads do not refit
        end = f"{last // 100 + 2:04d}-01-01"
        h.update(dek.filter(pl.col("dekad_start").cast(pl.Utf8) < end)
                 .select("ocha_pcode", "dekad_start", "rain_mm", "provisional").sort("ocha_pcode", "dekad_start")
                 .write_csv().encode())
    return h.hexdigest()


def dated_months(dated_cases: pl.DataFrame) -> list[int]:
    """The dated series' months as YYYYMM, in time order (the columns of season5.case_matrix)."""
    return sorted(set((dated_cases["year"] * 100 + dated_cases["month"]).to_list()))


def kernel_periods(yms: list[int]) -> list[str]:
    """YYYY-MM of the MAX_LAG months before the first dated month and of the months after it, as many as
    the dated months: the columns the rain kernel reads over the dated series."""
    from pipeline.model import season6

    first = yms[0] // 100 * 12 + yms[0] % 100 - 1 - season6.MAX_LAG
    return [f"{(first + k) // 12:04d}-{(first + k) % 12 + 1:02d}" for k in range(season6.MAX_LAG + len(yms))]


def dated_area_rain(inputs: Inputs, geo: Geography, lga_codes: list[str], lga_rain: np.ndarray,
                    state_clim: np.ndarray) -> np.ndarray | None:
    """[n, MAX_LAG + T] each LGA's recorded rain over the dated months and the MAX_LAG months before them:
    its state's recorded monthly total times the LGA's downscaling ratio of that calendar month (LGA
    rainfall after 2016 does not exist). None if a month is missing or there are no dated series."""
    from pipeline.model import season6

    if inputs.dated_cases is None or inputs.dated_cases.height == 0:
        return None
    yms = dated_months(inputs.dated_cases)
    periods = kernel_periods(yms)
    if [p for p in periods[season6.MAX_LAG:]] != [f"{m // 100:04d}-{m % 100:02d}" for m in yms]:
        return None  # the dated months are not one unbroken run
    states = geo.states.sort("state_code")
    rec = (inputs.recorded_rainfall.state.filter(pl.col("period").is_in(periods))
           .join(states.select("ocha_pcode", "state_code"), on="ocha_pcode", how="inner"))
    piv = rec.pivot(on="period", index="state_code", values="rainfall_mm", sort_columns=True)
    if set(periods) - set(piv.columns):
        return None
    srain = (pl.DataFrame({"state_code": states["state_code"].to_list()}).join(piv, on="state_code", how="left")
             .select(periods).to_numpy().astype(float))
    if np.isnan(srain).any():
        return None
    srow = {c: i for i, c in enumerate(states["state_code"].to_list())}
    lstate = [srow[c] for c in geo.lgas.sort("lga_code")["state_code"].to_list()]
    cal = np.array([int(p[5:7]) - 1 for p in periods])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(state_clim[lstate] > 0, lga_rain / np.where(state_clim[lstate] > 0, state_clim[lstate], 1), 1.0)
    return srain[lstate] * ratio[:, cal]


def lga_temperature(inputs: Inputs, lga_codes: list[str], lga_rain: np.ndarray) -> np.ndarray | None:
    """[n, 12] LGA air temperature climatology in `lga_codes` order; None when the file is absent. An
    LGA missing from the file takes its state's mean (none on the shared data: all 774 are there)."""
    t = inputs.lga_temperature
    if t is None:
        return None
    geo = inputs.geography
    assert geo is not None
    # the file is keyed by the eHA LGA code; the geography's lga_code is the OCHA p-code
    piv = (t.rename({"lga_code": "eha_code"})
           .pivot(on="month", index="eha_code", values="temp_c", sort_columns=True))
    months = [str(m) for m in range(1, 13)]
    codes = geo.lgas.select("lga_code", pl.col("eha_code").cast(pl.Utf8))
    out = (pl.DataFrame({"lga_code": lga_codes}).join(codes, on="lga_code", how="left")
           .join(piv, on="eha_code", how="left").select(months).to_numpy().astype(float))
    if np.isnan(out).any():
        state = np.array(geo.lgas.sort("lga_code")["state_code"].to_list())
        for st in np.unique(state[np.isnan(out).any(axis=1)]):
            rows = state == st
            ok = rows & ~np.isnan(out).any(axis=1)
            fill = out[ok].mean(axis=0) if ok.any() else np.nanmean(out, axis=0)
            out[rows & np.isnan(out).any(axis=1)] = fill
    return out


def season_protocol_check(m6: season5.Published) -> dict[str, Any]:
    """`method.check.model_6` (model 7: `method.check.model_7`): what the protocol (docs/model-6-protocol.md,
    docs/model-7-protocol.md) adds to the nested check in `model_5`: the candidates in the rule's order,
    those it may publish, the rule, what it picked and with which constants, the class correction, and
    protocol item 5's recorded-rain check. Summaries and constants only."""
    corr = m6.class_correction
    seven = m6.protocol >= 7
    candidates = season5.METHODS_7 if seven else season5.METHODS_6
    return {
        "protocol": f"docs/model-{m6.protocol}-protocol.md (committed before any model-{m6.protocol} result)",
        "candidates_in_order_of_complexity": list(candidates),
        "publishable": list(season5.PUBLISHABLE_7 if seven else candidates),
        "ablations": list(season5.ABLATIONS_6),
        "selection_rule": ("among the publishable candidates " if seven else "among candidates ")
                          + "whose inner mean signed state peak error is within 0.5 month, the "
                          "simplest whose inner loss ((1 - shape r) + |centre error| / 6 + |trough/peak error|) "
                          f"is at most the least + {season5.SELECTION_MARGIN}",
        "selection_margin": season5.SELECTION_MARGIN,
        "release_method": m6.resolved,
        "release_parameters": list(m6.hyper),
        "release_at_grid_edge": m6.at_grid_edge,
        "candidates_on_all_dated_states": m6.release_parameters,
        "rain_kernel_parameters": ["h: half-saturation rain (mm/month)", "mu: lag (months)", "sigma: lag spread (months)",
                                   "b: background cases (share of the mean)"],
        **({"rain_onset_parameters": ["h: half-saturation rain (mm/month)", "mu: lag (months, from -1)",
                                      "omega: weight of the rains' onset pulse", "b: background cases (share of the mean)"],
            "rain_onset_fixed": {"sigma": 1.0, "onset": "AGRHYMET / FEWS NET start of season on each state's dekadal "
                                 "CHIRPS, share of complete years 1991-2020 by calendar month"}} if seven else {}),
        "thermal_suitability": "relative R0(T) of P. falciparum in Anopheles, Mordecai et al. (2013), Ecology Letters "
                               "16: 22-30, doi:10.1111/ele.12015",
        "class_correction": {lvl: {"amplitude_bias": round(b, 3), "marked_margin": round(m, 3)}
                             for lvl, (b, m) in corr.items()},
        "recorded_rain": m6.recorded_rain,
        "estimated_months": ("recorded_rain" if (m6.recorded_rain or {}).get("adopted")
                             and m6.resolved in season5.RAIN_METHODS else "typical_season"),
    }


def season5_data(inputs: Inputs, series: season_cv.Series, dated: season_cv.DatedProfiles | None,
                 areas: season_cv.AreaData, units: season_harmonics.Units, std: season_harmonics.Standardiser,
                 dated_states: list[str], lga_codes: list[str]) -> season5.Data | None:
    """What model 5's candidates and nested check need; None without dated series (nothing to validate)."""
    if dated is None or inputs.dated_cases is None or len(dated_states) < 3:
        return None
    pos = {c: i for i, c in enumerate(lga_codes)}
    keep = [i for i, c in enumerate(dated.lga_codes) if c in pos and dated.lga_state[i] in dated_states]
    codes = [dated.lga_codes[i] for i in keep]
    lstate = np.array([dated.lga_state[i] for i in keep])
    arch = None
    kind = np.array(series.kind)
    if (kind == "archetype").any():
        w, rec = series.weights[kind == "archetype"], series.recorded[kind == "archetype"]
        arch = np.full((len(lga_codes), season5.MONTHS), np.nan)
        has = w.sum(axis=0) > 0
        arch[has] = (rec / rec.mean(axis=1, keepdims=True))[w[:, has].argmax(axis=0)]
    cases_m, cal = season5.case_matrix(inputs.dated_cases, codes)
    srow = [dated.state_codes.index(s) for s in dated_states]
    m4, choose = season5.model4_engine(series, areas, units, std, dated_states)
    return season5.Data(
        area_state=areas.state, area_lat=areas.xy[:, 1], area_pop=areas.population, arch_profile=arch,
        dated_states=list(dated_states), rec_state=dated.state[srow],
        rec_area=np.array([pos[c] for c in codes]), rec_lga=dated.lga[keep], rec_lga_state=lstate,
        cases=cases_m, cal=cal, split_r=season5.split_half_deviation_r(inputs.dated_cases, codes, lstate),
        m4=m4, m4_choose=choose)


def _season_offsets(pred: np.ndarray, rec: np.ndarray, floors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Months off (mean of start and end) and peak month off, season rules at the prediction's share."""
    start, peak = [], []
    for pr, rc, f in zip(pred, rec / rec.max(axis=1, keepdims=True), floors, strict=True):
        share = float(high_share_of(f))
        a, b = season_from_index(np.round(pr, 3), share), season_from_index(np.round(rc, 3), share)
        start.append((circular_distance(a.season_start_month, b.season_start_month)
                      + circular_distance(a.season_end_month, b.season_end_month)) / 2)
        peak.append(circular_distance(a.peak_month, b.peak_month))
    return np.array(start, dtype=float), np.array(peak, dtype=float)


def build_check(sfit: SeasonFit, rule: str, sq: dict[str, float], dated_states: list[str],
                state_names: dict[str, str]) -> dict[str, Any]:
    """`method.check`: SPEC's fields for the adopted rule over every series, then, additive, each
    measure by level (archetype groups, dated states, dated LGAs), by zone and by rule."""
    s, cv = sfit.series, sfit.cv
    pred = cv.series_pred[rule]
    months_off, peak_off = _season_offsets(pred, s.recorded, cv.series_floor[rule])
    allsum = season_cv.summarise(pred, s.recorded)
    kinds = np.array(s.kind)
    zones = np.array([sfit.zone_of_state.get(st, "") for st in s.state])
    bands = np.array([BANDS.get(z, "middle_belt") for z in zones])

    def level(rows: np.ndarray, preds: dict[str, np.ndarray], recorded: np.ndarray, zone: np.ndarray) -> dict[str, Any]:
        out: dict[str, Any] = {r: season_cv.summarise(preds[r][rows], recorded[rows]) for r in preds}
        out["by_zone"] = {
            z: {r: season_cv.summarise(preds[r][rows[zone[rows] == z]], recorded[rows[zone[rows] == z]])
                for r in preds}
            for z in sorted(set(zone[rows].tolist()))
        }
        return out

    levels: dict[str, Any] = {}
    for k, name in (("archetype", "archetype_groups"), ("lga", "dated_lgas")):
        rows = np.flatnonzero(kinds == k)
        if rows.size:
            levels[name] = level(rows, cv.series_pred, s.recorded, zones)
    if dated_states and sfit.dated is not None:
        st_rec = np.array([sfit.dated.state[sfit.dated.state_codes.index(c)] for c in dated_states])
        st_zone = np.array([sfit.zone_of_state.get(c, "") for c in dated_states])
        levels["dated_states"] = level(np.arange(len(dated_states)), cv.state_pred, st_rec, st_zone)

    def summary(rows: np.ndarray) -> dict[str, Any]:
        return season_cv.summarise(pred[rows], s.recorded[rows])

    checked_states = sorted({state_names.get(c, c) for c in s.state})
    return {
        "series": len(s.names),
        "states": checked_states,
        "median_correlation": allsum["median_correlation"],
        "mean_months_off": _round(float(months_off.mean()), CHECK_DECIMALS),
        "mean_months_peak_is_off": _round(float(peak_off.mean()), CHECK_DECIMALS),
        "cross_validation": "leave one whole state out: its dated LGA series and the archetype profiles whose "
                            "population lies mostly in it are left out, every constant refitted on the rest, and "
                            "the held-out profiles predicted",
        "season_rule": rule,
        "season_rule_cv_squared_error": sq,
        "folds": len(cv.folds),
        "archetype_series": int((kinds == "archetype").sum()),
        "dated_lga_series": int((kinds == "lga").sum()),
        "dated_states": [state_names.get(c, c) for c in dated_states],
        "mean_centre_months_off": allsum["mean_centre_months_off"],
        "mean_best_4_month_share_error": allsum["mean_best_4_month_share_error"],
        "mean_trough_to_peak_error": allsum["mean_trough_to_peak_error"],
        "recorded_median_trough_to_peak": _round(float(np.median(trough_to_peak(s.recorded))), CHECK_DECIMALS),
        "recorded_max_best_4_month_share": _round(float(best_months_share(s.recorded).max()), CHECK_DECIMALS),
        "by_band": {b: summary(np.flatnonzero(bands == b)) for b in ("north", "middle_belt", "south")
                    if (bands == b).any()},
        "levels": levels,
        "timing": timing_check(sfit, dated_states),
        "season_error": season_error_check(sfit, rule, dated_states),
    }


def season_error_check(sfit: SeasonFit, rule: str, dated_states: list[str]) -> dict[str, Any]:
    """The adopted rule's out-of-sample season error at state and LGA level (dated series) and, where no
    dated series exists, over the archetype groups: the sd the ranges carry and their coverage by month."""
    s, cv, dated = sfit.series, sfit.cv, sfit.dated
    kind, st = np.array(s.kind), np.array(s.state)
    out: dict[str, Any] = {}
    if dated is not None and dated_states:
        rec = np.array([dated.state[dated.state_codes.index(c)] for c in dated_states])
        out["states"] = season_cv.season_error(season_cv.log_residuals(cv.state_pred[rule], rec),
                                               np.array(dated_states), Z_RANGE)
    for k, name in (("lga", "lgas"), ("archetype", "archetype_groups")):
        rows = np.flatnonzero(kind == k)
        if rows.size:
            out[name] = season_cv.season_error(season_cv.log_residuals(cv.series_pred[rule][rows], s.recorded[rows]),
                                               st[rows], Z_RANGE)
    return out


def timing_check(sfit: SeasonFit, dated_states: list[str]) -> dict[str, Any]:
    """Timing per left-out dated state, at state and LGA level, for every rule (summaries only)."""
    s, cv, dated = sfit.series, sfit.cv, sfit.dated
    if dated is None or not dated_states:
        return {}
    st_rec = np.array([dated.state[dated.state_codes.index(c)] for c in dated_states])
    lga_rows = {c: np.flatnonzero((np.array(s.kind) == "lga") & (np.array(s.state) == c)) for c in dated_states}
    all_rows = np.concatenate(list(lga_rows.values()))
    out: dict[str, Any] = {}
    for rule in cv.state_pred:
        t_state = season_cv.timing(cv.state_pred[rule], st_rec)
        t_lga = season_cv.timing(cv.series_pred[rule][all_rows], s.recorded[all_rows])
        by_state = {}
        for k, c in enumerate(dated_states):
            rows = lga_rows[c]
            one = {m: _round(float(v[k]), CHECK_DECIMALS) for m, v in t_state.items()}
            by_state[c] = {"state": one,
                           "lgas": season_cv.timing_summary(season_cv.timing(cv.series_pred[rule][rows], s.recorded[rows]))}
        out[rule] = {"states": season_cv.timing_summary(t_state), "lgas": season_cv.timing_summary(t_lga),
                     "by_state": by_state}
    return out
