"""Producer for /v1/periods, /v1/risk/* and /v1/forecasts/* (SPEC 2.1-2.4).

Reads which months have recorded rainfall (they define the estimated months), the survey
rounds and the seasonal index of every LGA (the transmission producer's fitted model),
runs the baseline model for every state over one monthly grid, multiplies by the season
and shapes the documents. Ordering within a report is highest score first; equal
(rounded) scores are ordered by state_code / lga_code ascending, so the order is total
and stable across builds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from pipeline import cache
from pipeline.datasets import months as month_terms
from pipeline.datasets.base import BuildContext, Produced
from pipeline.datasets.transmission import SeasonModel, season_model
from pipeline.errors import InputError
from pipeline.model import evidence as support
from pipeline.model import ranges, small_area, terms
from pipeline.model import risk as model
from pipeline.sources import urban_clusters
from pipeline.sources.inputs import Inputs
from pipeline.sources.names import state_code_for

if TYPE_CHECKING:
    from pipeline.geography import Geography

FIRST_PERIOD = "2018-01"
GRID_START = "2010-01"  # the first survey round with state or zone values
DECIMALS = 4
LGA_POSITIVITY_YEAR = 2018


def month_index(period: str) -> int:
    return int(period[:4]) * 12 + int(period[5:7]) - 1


def period_of(index: int) -> str:
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


@dataclass(frozen=True)
class ModelData:
    """Everything the model needs, as aligned arrays (rows = geo.lgas order)."""

    periods: list[str]  # consecutive recorded months from FIRST_PERIOD, oldest first
    provisional: np.ndarray  # [T] bool
    state_idx: np.ndarray  # [n_lga] index into state_codes
    state_codes: list[str]
    lga_codes: list[str]  # geo.lgas order
    zones: list[str]  # per state
    population: np.ndarray  # [n_lga] float
    is_urban: np.ndarray  # [n_lga] bool
    rounds: pl.DataFrame  # state_code, survey_year, positivity, test, children
    zone_rounds: pl.DataFrame  # area, survey_year, positivity (microscopy)
    urban_ratio: float
    urban_ratio_year: int
    lga_c: np.ndarray  # [n_lga, 12] seasonal index rescaled to mean 1
    state_c: np.ndarray  # [n_states, 12] population-weighted mean of its LGAs' c
    season: SeasonModel
    rain_factor: np.ndarray  # [n_lga, len(periods)] the adopted rain term's multiplier (1 without it)
    months: month_terms.MonthEvidence | None  # the pre-registered tests on the dated series, or None
    rain_source: str
    lga_positivity: pl.DataFrame | None  # NDHS 2018 per-LGA observations with lga_code, or None
    clusters: pl.DataFrame | None = None  # survey_year, state, children, positives per urban cluster
    lga_offsets: small_area.Offsets | None = None  # the small-area model's LGA offsets (None: urban split)
    lga_covariates: np.ndarray | None = None  # [n_lga, 2] SMALL_AREA_COVARIATES
    lga_adjacency: np.ndarray | None = None  # [n_lga, n_lga] bool, outlines touching


def state_monthly_codes(state: pl.DataFrame, geo: Geography) -> pl.DataFrame:
    out = state.join(geo.states.select("ocha_pcode", "state_code"), on="ocha_pcode", how="left")
    if out["state_code"].null_count():
        bad = sorted(out.filter(pl.col("state_code").is_null())["ocha_pcode"].unique())
        raise InputError("recorded rainfall", f"unknown state p-code(s) {bad}")
    return out


def recorded_months(state: pl.DataFrame, n_states: int) -> list[str]:
    """Consecutive months up to the last one recorded for EVERY state, from FIRST_PERIOD.

    A month missing for some state would make `last_estimated` claim a month that is
    not recorded everywhere, so the series is cut at the first such gap."""
    counts = state.group_by("period").agg(pl.col("state_code").n_unique().alias("n")).sort("period")
    full = counts.filter(pl.col("n") == n_states)["period"].to_list()
    if not full:
        raise InputError("recorded rainfall", "no month is recorded for every state")
    idx = sorted(month_index(p) for p in full)
    last = idx[-1]
    start = last
    have = set(idx)
    while start - 1 in have:
        start -= 1
    first = month_index(FIRST_PERIOD)
    if start > first:
        raise InputError(
            "recorded rainfall",
            f"recorded months for every state run only from {period_of(start)}; need {FIRST_PERIOD} onward",
        )
    return [period_of(i) for i in range(first, last + 1)]


def survey_children(rounds: pl.DataFrame, survey: pl.DataFrame, lga_pos: pl.DataFrame | None,
                    states: pl.DataFrame) -> pl.DataFrame:
    """Add `children` (tested, per state and round): the survey table's count where it has
    one, else the sum over the NDHS 2018 LGA file for 2018; null where unknown."""
    known = (
        survey.filter(pl.col("level") == "state", pl.col("children_tested").is_not_null())
        .group_by("state_code", "survey_year").agg(pl.col("children_tested").max().alias("n_table"))
    )
    out = rounds.join(known, on=["state_code", "survey_year"], how="left")
    if lga_pos is not None:
        codes = {n: state_code_for(n, states) for n in lga_pos["state"].unique()}
        per_state = (
            lga_pos.with_columns(pl.col("state").replace_strict(codes, default=None).alias("state_code"))
            .group_by("state_code").agg(pl.col("children").sum().alias("n_lga"))
            .with_columns(pl.lit(LGA_POSITIVITY_YEAR, dtype=pl.Int64).alias("survey_year"))
        )
        out = out.join(per_state, on=["state_code", "survey_year"], how="left")
    else:
        out = out.with_columns(pl.lit(None, dtype=pl.Int64).alias("n_lga"))
    return out.with_columns(pl.coalesce("n_table", "n_lga").cast(pl.Int64).alias("children")).drop("n_table", "n_lga")


def zone_rounds(survey: pl.DataFrame) -> pl.DataFrame:
    """Zone microscopy values (area, survey_year, positivity): used only to estimate the
    random-walk variance when the states have too few consecutive rounds."""
    return (
        survey.filter(pl.col("level") == "zone", pl.col("test") == model.PREFERRED_TEST)
        .group_by("area", "survey_year").agg(pl.col("positivity").mean())
        .sort("area", "survey_year")
    )


def load_model_data(data_dir: Path, geo: Geography, inputs: Inputs | None = None) -> ModelData:
    inputs = Inputs(data_dir, geo) if inputs is None else inputs
    rec = inputs.recorded_rainfall
    state = state_monthly_codes(rec.state, geo)
    periods = recorded_months(state, geo.states.height)
    prov = dict(state.filter(pl.col("period").is_in(periods)).group_by("period").agg(pl.col("provisional").any()).iter_rows())
    if rec.lga is not None:
        for p, v in rec.lga.filter(pl.col("period").is_in(periods)).group_by("period").agg(pl.col("provisional").any()).iter_rows():
            prov[p] = bool(prov.get(p, False) or v)
    provisional = np.array([bool(prov.get(p, False)) for p in periods])

    lgas = geo.lgas
    state_codes = geo.states["state_code"].to_list()
    survey = inputs.survey
    rounds = model.state_rounds(survey, state_codes)
    missing = sorted(set(state_codes) - set(rounds["state_code"]))
    if missing:
        raise InputError("survey positivity", f"no positivity for state(s) {missing}")
    try:
        ratio, ratio_year = model.urban_rural_ratio(survey)
    except ValueError as e:
        raise InputError("survey positivity", str(e)) from None
    lga_pos = inputs.lga_positivity
    rounds = survey_children(rounds, survey, lga_pos, geo.states)

    sm = season_model(Path(data_dir), geo, inputs)
    pos = {c: i for i, c in enumerate(sm.lga_codes)}
    rows = np.array([pos[c] for c in lgas["lga_code"].to_list()])
    lga_c = model.season_factor(sm.lga_index[rows])
    factor = np.ones((len(rows), len(periods)))
    s_pos = {c: i for i, c in enumerate(state_codes)}
    state_idx = lgas["state_code"].replace_strict(s_pos, return_dtype=pl.Int64).to_numpy()
    population = lgas["population"].cast(pl.Float64).to_numpy()
    state_c = model.aggregate(lga_c, state_idx, population, len(state_codes))
    if lga_pos is not None:
        from pipeline.sources.names import hbhi_lga_codes

        lga_pos = lga_pos.join(
            hbhi_lga_codes(lga_pos.select("lga", "state"), geo, source="NDHS 2018 LGA positivity"),
            on="lga", how="inner",
        )
    is_urban = lgas["is_urban"].to_numpy().astype(bool)
    x, adj = small_area_inputs(geo, is_urban) if lga_pos is not None else (None, None)
    md = ModelData(
        periods=periods,
        provisional=provisional,
        state_idx=state_idx,
        state_codes=state_codes,
        lga_codes=lgas["lga_code"].to_list(),
        zones=geo.states["zone"].to_list(),
        population=population,
        is_urban=lgas["is_urban"].to_numpy().astype(bool),
        rounds=rounds,
        zone_rounds=zone_rounds(survey),
        urban_ratio=ratio,
        urban_ratio_year=ratio_year,
        lga_c=lga_c,
        state_c=state_c,
        season=sm,
        rain_factor=factor,
        months=None,
        rain_source=rec.source,
        lga_positivity=lga_pos,
        clusters=_cluster_positives(Path(data_dir)),
        lga_offsets=_lga_offsets(geo, lga_pos, state_idx, x, adj),
        lga_covariates=x,
        lga_adjacency=adj,
    )
    return with_month_evidence(md, inputs, geo, rows)


def with_month_evidence(md: ModelData, inputs: Inputs, geo: Geography, rows: np.ndarray) -> ModelData:
    """Run the registered month-term test against the score without a term (the survey baseline of this
    model x the out-of-sample season) and, if a term passes, give the estimated months its multiplier."""
    sm = md.season
    last = month_index(md.periods[-1])
    base = fit_baseline(md, md.rounds, last + model.HORIZONS)
    s_pos = {c: i for i, c in enumerate(md.state_codes)}

    def baseline(states: list[str], months: np.ndarray) -> np.ndarray:
        centre, _, _ = model.baseline_range(base, np.clip(months, base.t0, base.t0 + base.mean.shape[1] - 1))
        return centre[[s_pos[s] for s in states]]

    evidence = month_terms.month_evidence(inputs, geo, sm, baseline)
    if evidence is None:
        return md
    factor = md.rain_factor
    if evidence.rain_beta is not None:
        term = evidence.tests["adopted"][0]
        factor = month_terms.rain_factor(inputs, geo, sm, term, evidence.rain_beta,
                                         [month_index(p) for p in md.periods])[rows]
    return replace(md, months=evidence, rain_factor=factor)


# covariates of the small-area model, in this order (pipeline.model.small_area)
SMALL_AREA_COVARIATES = ("urban", "log population density")


def small_area_inputs(geo: Geography, is_urban: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[n_lga, 2] covariates (urban, log density) and [n_lga, n_lga] adjacency, geo.lgas order."""
    density = geo.lgas["density_per_km2"].cast(pl.Float64).to_numpy()
    x = np.column_stack([is_urban.astype(float), np.log(np.maximum(density, 1e-3))])
    adj = small_area.adjacency([geo.outlines[c] for c in geo.lgas["lga_code"].to_list()])
    return x, adj


def _lga_offsets(geo: Geography, lga_pos: pl.DataFrame | None, state_idx: np.ndarray,
                 x: np.ndarray | None, adj: np.ndarray | None) -> small_area.Offsets | None:
    if lga_pos is None or x is None or adj is None or lga_pos.height < small_area.MIN_LGAS:
        return None
    row = {c: i for i, c in enumerate(geo.lgas["lga_code"].to_list())}
    obs_idx = np.array([row[c] for c in lga_pos["lga_code"].to_list()])
    return small_area.lga_offsets(lga_pos["positivity"].to_numpy(), lga_pos["children"].to_numpy().astype(float),
                                  obs_idx, x, state_idx, adj)


def _cluster_positives(data_dir: Path) -> pl.DataFrame | None:
    path = data_dir / urban_clusters.CLUSTERS_CSV
    return urban_clusters.read_cluster_positives(path) if path.exists() else None


def design_effects(md: ModelData, upto_year: int, years: list[int]) -> tuple[dict[int, float], float, float]:
    """Design effect per round and of a new survey, from the clusters of rounds <= upto_year
    only (so a held-out round never informs its own range): (per round, new survey, icc)."""
    cl = md.clusters
    if cl is None or cl.height == 0:
        return {int(y): 1.0 for y in years}, 1.0, 0.0
    cl = cl.filter(pl.col("survey_year") <= upto_year)
    if cl.height == 0:
        return {int(y): 1.0 for y in years}, 1.0, 0.0
    icc = ranges.cluster_icc(
        cl["children"].to_numpy(), cl["positives"].to_numpy(),
        (cl["survey_year"].cast(pl.Utf8) + "|" + cl["state"]).to_numpy(),
    )
    size = dict(cl.group_by("survey_year").agg(pl.col("children").mean()).iter_rows())
    per, new = ranges.round_design_effects(size, icc, [int(y) for y in years])
    return per, new, icc


def fit_baseline(md: ModelData, rounds: pl.DataFrame, last_month: int, q_method: str | None = None,
                 use_design_effect: bool = True) -> model.Baseline:
    """The state baselines from `rounds` on the grid GRID_START..last_month.

    The random-walk variance comes from consecutive rounds of the same state; with fewer
    than MIN_PAIRS of them (a data load with one state round), from the zone rounds. How
    it is estimated (pipeline.model.ranges.Q_METHODS) is `q_method`, or, when None, chosen
    by the nested check on `rounds` alone (choose_q_method). `use_design_effect=False`
    gives Model 2's binomial sampling variance (the validation report's reference row).
    """
    t0 = month_index(GRID_START)
    upto = int(rounds["survey_year"].to_numpy().max())
    years = sorted({int(y) for y in rounds["survey_year"].to_list()} | {int(y) for y in md.zone_rounds["survey_year"]})
    deff, new_deff, _ = design_effects(md, upto, years) if use_design_effect else ({}, 1.0, 0.0)
    obs = model.observations(rounds, md.state_codes, md.state_c, t0, last_month, deff)
    d, v, yrs, ids = model.state_pair_intervals(obs)
    if d.size < model.MIN_PAIRS:
        d, v, yrs, ids = zone_pairs(md, upto, obs.typical_children, deff)
    method = q_method or choose_q_method(md, rounds)
    return model.smooth(obs, ranges.estimate_q(method, d, v, yrs, ids), new_deff, method)


@dataclass(frozen=True)
class RoundPrediction:
    """A held-out round predicted from earlier rounds: states scored, observed and
    predicted positivity (with the range), and z on the logit scale."""

    rows: list[int]
    observed: np.ndarray
    predicted: np.ndarray
    low: np.ndarray
    high: np.ndarray
    z: np.ndarray
    baseline: model.Baseline
    error: np.ndarray | None = None  # logit error y - m (uncalibrated), per row
    variance: np.ndarray | None = None  # predictive variance V = baseline + new survey + season, per row
    years: np.ndarray | None = None  # years from the state's last training round to the round predicted
    parts: np.ndarray | None = None  # [rows, 3] the parts of `variance`: baseline, new survey, season


def predict_round(md: ModelData, train: pl.DataFrame, target: pl.DataFrame, target_year: int,
                  q_method: str | None = None, use_design_effect: bool = True,
                  with_season_error: bool = True) -> RoundPrediction | None:
    """Predict `target` (one round) from `train` (earlier rounds); None if nothing to score."""
    have = set(train["state_code"]) & set(target["state_code"])
    if train.height == 0 or not have:
        return None
    mid = model.round_month(target_year)
    base = fit_baseline(md, train, mid + 2, q_method, use_design_effect)
    cols = np.array([mid]) - base.t0
    centre, low, high = model.baseline_range(base, np.array([mid]))
    cf = model.fieldwork_factor(md.state_c, target_year)
    rows = [i for i, c in enumerate(md.state_codes) if c in have]
    y_of = dict(zip(target["state_code"], target["positivity"], strict=False))
    y = np.array([y_of[md.state_codes[i]] for i in rows], dtype=float)
    m, v = base.mean[rows, cols[0]], base.var[rows, cols[0]]
    s2 = model.binomial_logit_var(model.expit(m), base.typical_children) * base.new_survey_deff
    sd_season = md.season.season_sd("states") if with_season_error else 0.0
    s3 = model.season_logit_var(model.expit(m), sd_season)
    total = v + s2 + s3
    err = model.logit(y / cf[rows]) - m
    z = ranges.z_scores(model.logit(y / cf[rows]), m, total)
    pred, lo, hi = (np.clip(x[rows, 0] * cf[rows], 0, 1) for x in (centre, low, high))
    wide = model.widen(model.Scores(pred, lo, hi), sd_season)
    last = dict(train.group_by("state_code").agg(pl.col("survey_year").max()).iter_rows())
    years = np.array([(mid - model.round_month(int(last[md.state_codes[i]]))) / 12.0 for i in rows])
    return RoundPrediction(rows, y, pred, wide.low, wide.high, z, base, err, total, years,
                           np.column_stack([v, s2, s3]))


@dataclass(frozen=True)
class RangeCheck:
    """Every state-round predicted from the state's earlier rounds, with the range calibration judged
    by leaving whole states out (ranges.cross_validated_z; folds: CALIBRATION_FOLDS)."""

    predicted_round: np.ndarray  # [n] survey year predicted
    state_rows: np.ndarray  # [n] index into md.state_codes
    error: np.ndarray  # [n] logit error before calibration
    variance: np.ndarray  # [n] predictive variance before calibration (season error included)
    years: np.ndarray  # [n] years since the state's last training round
    z_before: np.ndarray  # [n] uncalibrated z
    z_after: np.ndarray  # [n] z with the constants of the fold that held the state out
    folds: dict[str, ranges.Calibration]  # by "round|zone"
    published: ranges.Calibration  # fitted on every state of the latest round: what the published range uses
    z_pooled: np.ndarray  # [n] the alternative that lost: one set of constants for every round (out of sample)
    # the registered check of the drift (docs/range-protocol.md §1); None when too few rounds to run it (no drift)
    drift: ranges.DriftCheck | None = None

    @property
    def drift_applied(self) -> bool:
        return self.drift is not None and self.drift.applied


# Calibration folds: the states of one geopolitical zone at a time (neighbouring states share drift
# and survey teams, so holding out a single state would let its neighbours speak for it). Fixed
# before any calibration figure was seen.
CALIBRATION_FOLDS = "geopolitical zone"


def range_check(md: ModelData, rounds: pl.DataFrame | None = None) -> RangeCheck | None:
    """Predict every round that has an earlier state round (from those earlier rounds only) and
    calibrate the range across states; None when no round can be predicted."""
    rounds = md.rounds if rounds is None else rounds
    years = sorted({int(y) for y in rounds["survey_year"].to_list()})
    parts = []
    for target in years[1:]:
        pr = predict_round(md, rounds.filter(pl.col("survey_year") < target),
                           rounds.filter(pl.col("survey_year") == target), target)
        if pr is not None and pr.error is not None and pr.variance is not None and pr.years is not None:
            parts.append((np.full(len(pr.rows), target), np.array(pr.rows), pr.error, pr.variance, pr.years, pr.z))
    if not parts:
        return None
    yr, rows, e, v, dt, z0 = (np.concatenate(x) for x in zip(*parts, strict=True))
    dc = drift_check(yr, e, v, dt)
    with_drift = dc is not None and dc.applied
    fold = np.array(md.zones)[rows]
    z1, folds = ranges.cross_validated_z(e, v, dt, fold, yr, with_drift)
    pooled, _ = ranges.cross_validated_z(e, v, dt, fold, with_drift=with_drift)
    latest = yr == yr.max()
    return RangeCheck(yr, rows, e, v, dt, z0, z1, folds,
                      ranges.fit_calibration(e[latest], v[latest], dt[latest], with_drift), pooled, dc)


def drift_check(predicted_round: np.ndarray, e: np.ndarray, v: np.ndarray, years: np.ndarray
                ) -> ranges.DriftCheck | None:
    """The registered check of the drift (docs/range-protocol.md §1): a build without the newest round
    would publish the calibration fitted on the round before it (each round is predicted from earlier
    rounds only, so those rows are that build's own); it predicts the newest round with that drift and with
    the level held. None when fewer than two rounds can be predicted (fewer than three state rounds)."""
    years_predicted = sorted({int(y) for y in predicted_round.tolist()})
    if len(years_predicted) < 2:
        return None
    newest, before = years_predicted[-1], years_predicted[-2]
    tr, te = predicted_round == before, predicted_round == newest
    return ranges.drift_check(e[te], v[te], years[te], ranges.fit_calibration(e[tr], v[tr], years[tr]),
                              ranges.fit_calibration(e[tr], v[tr], years[tr], with_drift=False), newest)


def calibrated(base: model.Baseline, cal: ranges.Calibration, md: ModelData, rounds: pl.DataFrame) -> model.Baseline:
    """The baseline with the range calibration: drift after each state's last round, variance scaled."""
    last = dict(rounds.group_by("state_code").agg(pl.col("survey_year").max()).iter_rows())
    last_round = np.array([model.round_month(int(last[c])) if c in last else base.t0 for c in md.state_codes])
    return replace(base, drift_per_year=cal.drift_per_year, var_scale=cal.var_scale, last_round=last_round)


def inner_var_z(md: ModelData, rounds: pl.DataFrame, q_method: str) -> list[float]:
    """var(z) of every round of `rounds` predicted from its earlier rounds with `q_method`."""
    years = sorted({int(y) for y in rounds["survey_year"].to_list()})
    out = []
    for target in years[1:]:
        pr = predict_round(md, rounds.filter(pl.col("survey_year") < target),
                           rounds.filter(pl.col("survey_year") == target), target, q_method)
        cal = ranges.calibration(pr.z) if pr is not None else {"var_z": None}
        if cal["var_z"]:
            out.append(float(cal["var_z"]))
    return out


def choose_q_method(md: ModelData, rounds: pl.DataFrame) -> str:
    """Nested choice of how Q is estimated, from `rounds` only (never a later round)."""
    return ranges.choose_method({m: inner_var_z(md, rounds, m) for m in ranges.Q_METHODS})


def zone_pairs(md: ModelData, upto_year: int, typical: float, deff: dict[int, float] | None = None,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Consecutive-round differences of zone logits up to `upto_year` (with interval ids);
    a zone's sample is taken as its number of states times a state's."""
    zr = md.zone_rounds.filter(pl.col("survey_year") <= upto_year)
    per_zone = {z: md.zones.count(z) for z in set(md.zones)}
    f = deff or {}
    d, v, yrs, ids = [], [], [], []
    for (zone,), g in zr.group_by("area", maintain_order=True):
        y = g["survey_year"].to_numpy()
        p = g["positivity"].to_numpy()
        if len(y) < 2:
            continue
        z = model.logit(p)
        var = model.binomial_logit_var(p, typical * max(per_zone.get(zone, 1), 1))
        var = var * np.array([f.get(int(t), 1.0) for t in y])
        d += list(np.diff(z))
        v += list(var[1:] + var[:-1])
        yrs += list(np.diff(y).astype(float))
        ids += list(y[:-1].astype(np.int64) * 10000 + y[1:])
    return np.array(d), np.array(v), np.array(yrs), np.array(ids, dtype=np.int64)


_SHIFTED: dict[str, np.ndarray] = {}  # the last shift_to_mean, by the digest of its arguments


def _shift_to_mean(state_logit: np.ndarray, delta: np.ndarray, weight: np.ndarray, state_idx: np.ndarray,
                   target: np.ndarray) -> np.ndarray:
    """`small_area.shift_to_mean`, solved once for the same arguments: the scores and the rank ranges
    of a run shift the same logits (60 bisection steps over every LGA and month each)."""
    args = (state_logit, delta, weight, state_idx, target)
    h = hashlib.sha256()
    for a in args:
        arr = np.ascontiguousarray(a)
        h.update(f"{arr.dtype}{arr.shape}".encode())
        h.update(arr.tobytes())
    key = h.hexdigest()
    hit = _SHIFTED.get(key)
    if hit is None:
        hit = small_area.shift_to_mean(state_logit, delta, weight, state_idx, target)
        _SHIFTED.clear()
        _SHIFTED[key] = hit
    return hit.copy()


def _column_keys(common: tuple[np.ndarray, ...], columns: tuple[np.ndarray, ...]) -> list[str]:
    """Per column of the `columns` arrays ([rows, T] each), a digest of that column and of `common`."""
    h = hashlib.sha256()
    for a in common:
        arr = np.ascontiguousarray(a)
        h.update(f"{arr.dtype}{arr.shape}".encode() + arr.tobytes())
    keys = []
    for j in range(columns[0].shape[1]):
        k = h.copy()
        for a in columns:
            k.update(np.ascontiguousarray(a[:, j], dtype=float).tobytes())
        keys.append(k.hexdigest())
    return keys


def lga_scores(md: ModelData, base: model.Baseline, months: list[int]) -> tuple[model.Scores, model.Scores]:
    """LGA scores for month indices: the state baseline range spread over its LGAs x the LGA's c x, in
    an estimated month, the adopted rain term's multiplier (forecast months: 1, no rain forecast).

    With the small-area offsets (md.lga_offsets) each LGA sits at its offset from the
    state on the logit scale, shifted so the state's population-weighted mean stays the
    state's baseline; its range adds the offset's own variance. Without them (no LGA survey
    file in the data load) the urban split. Returns (published LGA scores, the same without
    the LGA variance: what the state's own range aggregates from).
    """
    centre, low, high = model.baseline_range(base, np.array(months))
    c = md.lga_c[:, [m % 12 for m in months]]
    col = {month_index(p): j for j, p in enumerate(md.periods)}
    f = np.stack([md.rain_factor[:, col[m]] if m in col else np.ones(len(md.lga_codes)) for m in months], axis=1)
    c = c * f
    off = md.lga_offsets
    if off is None:
        split = [model.urban_split(x, md.population, md.is_urban, md.state_idx, md.urban_ratio) for x in (centre, low, high)]
        s = model.scores(split[0], split[1], split[2], c)
        return s, s
    ls = model.logit(centre)
    sd_state = ((model.logit(high) - ls) / model.Z_RANGE)[md.state_idx]
    lg = _shift_to_mean(ls, off.delta, md.population, md.state_idx, np.clip(centre, model.EPS, 1 - model.EPS))
    sd_lga = np.sqrt(sd_state**2 + off.var[:, None])
    mid = model.expit(lg)
    published = model.scores(mid, model.expit(lg - model.Z_RANGE * sd_lga), model.expit(lg + model.Z_RANGE * sd_lga), c)
    state_only = model.scores(mid, model.expit(lg - model.Z_RANGE * sd_state), model.expit(lg + model.Z_RANGE * sd_state), c)
    return published, state_only


def lga_rank_ranges(md: ModelData, base: model.Baseline, months: list[int], season_sd: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """[n_lga, len(months)] 80 % range of each LGA's rank within its state (pipeline.model.evidence):
    the state's baseline and the season error drawn once per state, the LGA's offset once per LGA."""
    centre, _, high = model.baseline_range(base, np.array(months))
    c = md.lga_c[:, [m % 12 for m in months]]
    col = {month_index(p): j for j, p in enumerate(md.periods)}
    f = np.stack([md.rain_factor[:, col[m]] if m in col else np.ones(len(md.lga_codes)) for m in months], axis=1)
    ls = model.logit(centre)
    sd_state = ((model.logit(high) - ls) / model.Z_RANGE)[md.state_idx]
    off = md.lga_offsets
    if off is None:
        lg = model.logit(model.urban_split(centre, md.population, md.is_urban, md.state_idx, md.urban_ratio))
        own = np.zeros(len(md.lga_codes))
    else:
        lg = _shift_to_mean(ls, off.delta, md.population, md.state_idx, np.clip(centre, model.EPS, 1 - model.EPS))
        own = np.sqrt(off.var)
    shared = np.sqrt(sd_state**2 + model.season_logit_var(model.expit(lg), season_sd))
    factor = c * f
    if not lg.shape[1]:
        return support.rank_ranges(lg, shared, own, factor, md.state_idx)
    # a month's ranges are a function of its own column and of what every column shares (the states'
    # rows, the LGAs' own sd, the draws: `support.rank_ranges` draws the same numbers whatever the
    # columns), so the months a new month leaves alone are kept from the previous build (cache.columns)
    keys = _column_keys((np.asarray(md.state_idx, dtype=np.int64), np.asarray(own, dtype=float)),
                        (lg, shared, factor))

    def compute(cols: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        low, high = support.rank_ranges(lg[:, cols], shared[:, cols], own, factor[:, cols], md.state_idx)
        return [(low[:, k], high[:, k]) for k in range(len(cols))]

    got = cache.columns("lga-rank-ranges", cache.code_of("pipeline.model.evidence"), keys, compute)
    return (np.stack([g[0] for g in got], axis=1).astype(np.int64, copy=False),
            np.stack([g[1] for g in got], axis=1).astype(np.int64, copy=False))


def lga_evidence(md: ModelData) -> dict[str, np.ndarray]:
    """Per LGA (geo.lgas order): survey children by round in its own clusters, the weight of its own
    children in its offset, and the evidence level (pipeline.model.evidence)."""
    n = len(md.lga_codes)
    children = np.zeros(n, dtype=np.int64)
    lp = md.lga_positivity
    known = lp is not None
    if lp is not None:
        row = {c: i for i, c in enumerate(md.lga_codes)}
        idx = np.array([row[c] for c in lp["lga_code"].to_list()], dtype=np.int64)
        np.add.at(children, idx, lp["children"].to_numpy().astype(np.int64))
    off = md.lga_offsets
    weight = support.own_weight(off.var, off.sigma2) if off is not None else np.zeros(n)
    return {"children_2018": children if known else np.full(n, -1), "weight": weight,
            "level": support.evidence_levels(weight)}


@dataclass(frozen=True)
class RiskResult:
    estimated: list[str]
    forecast: list[str]
    lga: model.Scores  # [n_lga, len(estimated)]
    lga_fc: model.Scores  # [n_lga, HORIZONS]
    state: model.Scores  # [n_states, len(estimated)]
    state_fc: model.Scores
    provisional: dict[str, bool]
    baseline: model.Baseline
    model_version: str = model.MODEL_VERSION
    range_check: RangeCheck | None = None
    lga_rank_low: np.ndarray | None = None  # [n_lga, len(estimated) + HORIZONS] before `contain`
    lga_rank_high: np.ndarray | None = None
    # per state: chance that a random ranking falls inside its LGAs' published rank ranges, and whether the
    # ranges beat it by the registered margin (pipeline.model.evidence; docs/range-protocol.md §2)
    rank_random_inclusion: np.ndarray | None = None
    rank_ranges_published: np.ndarray | None = None
    state_codes: tuple[str, ...] = ()  # the order of the per-state arrays above (md.state_codes)
    lga_evidence: dict[str, np.ndarray] | None = None
    adopted_terms: tuple[str, ...] = ()  # month terms in the score (pipeline.model.terms.MONTH_TERMS)
    last_survey_month: int | None = None  # month index of the last fieldwork month of the newest round


def run_model(md: ModelData, rounds: pl.DataFrame | None = None) -> RiskResult:
    """Estimate every month from FIRST_PERIOD to the last recorded one and forecast the
    HORIZONS months after it."""
    rounds = md.rounds if rounds is None else rounds
    last = month_index(md.periods[-1])
    est_m = [month_index(p) for p in md.periods]
    fc_m = [last + h for h in range(1, model.HORIZONS + 1)]
    check = range_check(md, rounds)
    cal = check.published if check is not None else ranges.Calibration()
    base = calibrated(fit_baseline(md, rounds, fc_m[-1]), cal, md, rounds)
    scale = float(np.sqrt(cal.var_scale))  # the season error is part of the calibrated variance
    both, for_states = lga_scores(md, base, est_m + fc_m)
    both = model.widen(both, md.season.season_sd("lgas") * scale)
    k = len(est_m)
    est = model.Scores(both.score[:, :k], both.low[:, :k], both.high[:, :k])
    fc = model.Scores(both.score[:, k:], both.low[:, k:], both.high[:, k:])
    n_states = len(md.state_codes)

    def agg(s: model.Scores, cols: slice) -> model.Scores:
        return model.Scores(*(model.aggregate(x[:, cols], md.state_idx, md.population, n_states)
                              for x in (s.score, s.low, s.high)))

    sd_state = md.season.season_sd("states") * scale
    rank_low, rank_high = lga_rank_ranges(md, base, est_m + fc_m, md.season.season_sd("lgas") * scale)
    # the ranges as published (widened to the rank of the rounded scores), judged against a random ranking
    inclusion = support.random_inclusion(
        *support.contain(support.ranks(np.round(both.score, DECIMALS), md.state_idx), rank_low, rank_high),
        md.state_idx, n_states)
    return RiskResult(
        estimated=md.periods,
        forecast=[period_of(m) for m in fc_m],
        lga=est,
        lga_fc=fc,
        state=model.widen(agg(for_states, slice(0, k)), sd_state),
        state_fc=model.widen(agg(for_states, slice(k, None)), sd_state),
        provisional={p: bool(v) for p, v in zip(md.periods, md.provisional, strict=True)},
        baseline=base,
        model_version=model_version(md),
        range_check=check,
        lga_rank_low=rank_low,
        lga_rank_high=rank_high,
        rank_random_inclusion=inclusion,
        rank_ranges_published=support.rank_ranges_published(inclusion),
        state_codes=tuple(md.state_codes),
        lga_evidence=lga_evidence(md),
        adopted_terms=adopted_terms(md),
        last_survey_month=last_survey_month(rounds),
    )


# --- documents -----------------------------------------------------------------------------


def _rounded(s: model.Scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    score = np.round(s.score, DECIMALS)
    # rounding each end outward keeps low <= score <= high after rounding
    low = np.minimum(np.round(s.low, DECIMALS), score)
    high = np.maximum(np.round(s.high, DECIMALS), score)
    return score, low, high


def _records(static: list[tuple[dict[str, Any], dict[str, Any]]], s: model.Scores,
             rank_range: tuple[np.ndarray, np.ndarray] | None = None,
             rank_range_withheld: bool = False) -> list[list[dict[str, Any]]]:
    """Per column (month), the records of all rows in highest-first order.

    `static` must be sorted by code: the stable sort on -score then keeps code
    order among ties. With `rank_range` ([rows, columns] low and high ends of the drawn rank
    range), each record also gets its rank in that order and the range, widened to hold it, or,
    `rank_range_withheld`, null ends and the reason (docs/range-protocol.md §2)."""
    score, low, high = _rounded(s)
    lvl = model.levels(score)
    order = np.argsort(-score, axis=0, kind="stable")
    sc, lo, hi, lv = score.T.tolist(), low.T.tolist(), high.T.tolist(), lvl.T.tolist()
    if rank_range is not None:
        rank = support.ranks(score, np.zeros(score.shape[0], dtype=np.int64))  # the order below, as ranks
        r_lo, r_hi = support.contain(rank, rank_range[0], rank_range[1])
        rk, rl, rh = rank.T.tolist(), r_lo.T.tolist(), r_hi.T.tolist()
    out = []
    for j in range(score.shape[1]):
        col = []
        for i in order[:, j].tolist():
            rec = {**static[i][0], "score": sc[j][i], "score_low": lo[j][i], "score_high": hi[j][i], "level": lv[j][i], **static[i][1]}
            if rank_range is not None:
                if rank_range_withheld:
                    rec.update(rank=rk[j][i], rank_low=None, rank_high=None, rank_range_withheld=support.RANK_RANGE_WITHHELD)
                else:
                    rec.update(rank=rk[j][i], rank_low=rl[j][i], rank_high=rh[j][i], rank_range_withheld=None)
            col.append(rec)
        out.append(col)
    return out


def _evidence_fields(res: RiskResult, rows: np.ndarray) -> list[dict[str, Any]]:
    """The evidence fields of the LGAs at `rows` (additive; docs/model.md, "Evidence and rank ranges")."""
    ev = res.lga_evidence
    if ev is None:
        return [{} for _ in rows]
    ch = ev["children_2018"][rows].tolist()
    lv = ev["level"][rows].tolist()
    band = support.children_bands(np.asarray(ch)).tolist()
    # the weight itself is not published: across a state's LGAs it follows their children counts (r > 0.97),
    # which may not be published per LGA (the release audit would find it); its level and the band may
    return [{"evidence": lv[k], "survey_children_2018_band": band[k]} for k in range(len(rows))]


def season_after_survey(check: dict[str, Any]) -> dict[str, Any]:
    """/v1/periods `season_after_survey` (additive): what the season factor of a month after the newest
    survey round is, machine-readably, with its plain sentence and the check that decided it."""
    m6 = check.get("model_7") or check.get("model_6") or {}
    source = m6.get("estimated_months") or terms.TYPICAL_SEASON
    rr = m6.get("recorded_rain") or {}
    return {"source": source, "description": terms.season_after_survey_words(source),
            "recorded_rain_gain": rr.get("lga_gain"), "recorded_rain_minimum_gain": rr.get("minimum_gain")}


def build_documents(geo: Geography, res: RiskResult, updated_at: str,
                    season_check: dict[str, Any] | None = None) -> dict[str, dict[tuple[str, ...], Any]]:
    states = geo.states.sort("state_code")
    lgas = geo.lgas
    state_static = [
        ({"state_code": r["state_code"], "state": r["state"], "zone": r["zone"]}, {"lgas": int(r["lgas"]), "population": int(r["population"])})
        for r in states.iter_rows(named=True)
    ]
    docs: dict[str, dict[tuple[str, ...], Any]] = {
        "/v1/periods": {},
        "/v1/risk/states": {},
        "/v1/risk/lgas": {},
        "/v1/forecasts/states": {},
        "/v1/forecasts/lgas": {},
    }
    months = [{"period": p, "kind": "estimated", "provisional": res.provisional[p], "basis": basis(res, p),
               **month_end(p, updated_at)} for p in res.estimated]
    months += [{"period": p, "kind": "forecast", "provisional": False, "basis": basis(res, p),
                **month_end(p, updated_at)} for p in res.forecast]
    docs["/v1/periods"][()] = {
        "last_estimated": res.estimated[-1],
        "last_forecast": res.forecast[-1],
        "months": months,
        "updated_at": updated_at,
        "model_version": res.model_version,
        "score_range_level": model.RANGE_LEVEL,
        "kind_descriptions": terms.kind_descriptions(res.adopted_terms),
        "all_passed_at_release": all(m["passed_at_release"] for m in months),
        "score_terms": [t.key for t in terms.terms(res.adopted_terms)],
        "basis_descriptions": {b: terms.basis_words(b, res.adopted_terms) for b in terms.BASES},
        "drift_after_last_survey": drift_after_last_survey(res),
        "season_after_survey": season_after_survey(season_check or {}),
    }
    st_est = _records(state_static, res.state)
    for j, p in enumerate(res.estimated):
        docs["/v1/risk/states"][(p,)] = {"period": p, "kind": "estimated", "states": st_est[j], "basis": basis(res, p)}
    st_fc = _records(state_static, res.state_fc)
    for h in range(1, model.HORIZONS + 1):
        docs["/v1/forecasts/states"][(str(h),)] = {
            "forecasts": [{"period": res.forecast[k], "kind": "forecast", "states": st_fc[k],
                           "basis": basis(res, res.forecast[k])} for k in range(h)]
        }
    state_names = dict(zip(states["state_code"], states["state"], strict=True))
    state_row = {c: i for i, c in enumerate(res.state_codes)} if res.state_codes else {}
    rows = np.arange(lgas.height)
    for code in states["state_code"].to_list():
        sel = rows[(lgas["state_code"] == code).to_numpy()]
        sub = lgas[sel]
        static = [
            ({"lga_code": r["lga_code"], "lga": r["lga"]},
             {"is_urban": bool(r["is_urban"]), "population": int(r["population"]), **e})
            for r, e in zip(sub.iter_rows(named=True), _evidence_fields(res, sel), strict=True)
        ]
        k_est = len(res.estimated)
        rr_est = rr_fc = None
        if res.lga_rank_low is not None and res.lga_rank_high is not None:
            rr_est = (res.lga_rank_low[sel, :k_est], res.lga_rank_high[sel, :k_est])
            rr_fc = (res.lga_rank_low[sel, k_est:], res.lga_rank_high[sel, k_est:])
        withheld = res.rank_ranges_published is not None and not bool(res.rank_ranges_published[state_row[code]])
        est = _records(static, model.Scores(res.lga.score[sel], res.lga.low[sel], res.lga.high[sel]), rr_est, withheld)
        for j, p in enumerate(res.estimated):
            docs["/v1/risk/lgas"][(code, p)] = {
                "period": p, "kind": "estimated", "state_code": code, "state": state_names[code], "lgas": est[j],
                "basis": basis(res, p),
            }
        fc = _records(static, model.Scores(res.lga_fc.score[sel], res.lga_fc.low[sel], res.lga_fc.high[sel]), rr_fc,
                      withheld)
        for h in range(1, model.HORIZONS + 1):
            docs["/v1/forecasts/lgas"][(code, str(h))] = {
                "forecasts": [
                    {"period": res.forecast[k], "kind": "forecast", "state_code": code, "state": state_names[code],
                     "lgas": fc[k], "basis": basis(res, res.forecast[k])}
                    for k in range(h)
                ]
            }
    return docs


def drift_after_last_survey(res: RiskResult) -> dict[str, Any]:
    """Whether the baseline moves after each state's last round, and by how much per year (logit): only
    where the drift passed its registered check (docs/range-protocol.md §1); otherwise the level holds."""
    applied = res.range_check is not None and res.range_check.drift_applied
    return {"applied": applied, "logit_per_year": round(float(res.baseline.drift_per_year), 4) if applied else 0.0}


def adopted_terms(md: ModelData) -> tuple[str, ...]:
    """The month terms the registered tests adopted in this build (none: baseline x season)."""
    return tuple((md.months.tests.get("adopted") if md.months is not None else None) or ())


def last_survey_month(rounds: pl.DataFrame) -> int | None:
    """Month index of the last fieldwork month of the newest round (the `basis` boundary)."""
    if rounds.height == 0:
        return None
    year = int(rounds["survey_year"].cast(pl.Int64).to_numpy().max())
    return year * 12 + max(model.FIELDWORK_MONTHS.get(year, (12,))) - 1


def basis(res: RiskResult, period: str) -> str:
    """`survey_fit` for a month up to the newest round's fieldwork, `baseline_x_season` after it."""
    last = res.last_survey_month
    return terms.AFTER_SURVEY if last is None or month_index(period) > last else terms.SURVEY_FIT


def month_end(period: str, updated_at: str) -> dict[str, Any]:
    """`month_end` (the month's last day) and `passed_at_release` (whether it had ended when the data were
    loaded): a client compares `month_end` with its own today; a forecast month may be past already."""
    year, month = int(period[:4]), int(period[5:7])
    end = (date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1)).isoformat()
    return {"month_end": end, "passed_at_release": end < updated_at[:10]}


def model_version(md: ModelData) -> str:
    """4.0 (baseline x season) unless a month term passed its registered test (4.1)."""
    adopted = (md.months.tests.get("adopted") if md.months is not None else None) or []
    return model.MODEL_VERSION_WITH_MONTH_TERM if adopted else model.MODEL_VERSION


def model_run(ctx: BuildContext) -> tuple[ModelData, RiskResult]:
    """The model's data and run for this build, computed once (the validation report reuses them)."""
    if "risk" not in ctx.runs:
        md = load_model_data(ctx.data_dir, ctx.geography, ctx.inputs)
        ctx.runs["risk"] = (md, run_model(md))
    md, res = ctx.runs["risk"]
    return md, res


def produce(ctx: BuildContext) -> Produced:
    md, res = model_run(ctx)
    docs = build_documents(ctx.geography, res, ctx.updated_at, md.season.check)
    return Produced(
        dataset="risk",
        documents=docs,
        facts={"estimated": res.estimated, "forecast": res.forecast},
        model_version=res.model_version,
    )
