"""The risk model: survey baseline x seasonal index -> score 0..1, with an 80 % predictive range.

Everything here is numpy over whole [area x month] matrices, deterministic, and takes
and returns arrays; reading files and shaping documents live elsewhere
(pipeline/sources, pipeline/datasets/risk.py). docs/model.md has the formulas with the
reason for every constant; the constants below are the single source.

    score[a,t] = B[a,t] x c[a, month(t)] x f[a,t]   clipped to [0, 1]

* c is the area's seasonal index (pipeline.model.seasons) rescaled to mean 1 over the
  year: rainfall shapes *when* in the year, the surveys say *how much*.
* f is the recorded-rainfall term, where the pre-registered test on the dated case series
  adopted it (docs/validation.md (f)): exp(sum_k beta_k r[a, t-k]), r the log rain anomaly at
  lags 0-3; 1 in forecast months and when the test did not adopt it.
* B is the baseline from the surveys: a local-level (random-walk) model on the logit
  scale per state, observed by each survey round with binomial sampling error, after
  dividing the round's value by the mean of c over its fieldwork months (a survey in
  the high season reads higher than the year's mean). Smoothed (Kalman filter and
  smoother) over a monthly grid; after the last round the variance grows by Q per year
  and the mean moves by the calibrated drift per year (pipeline.model.ranges.Calibration).
* score_low / score_high: the RANGE_LEVEL (80 %) predictive range of what a survey of
  the state would measure in that month: the baseline's variance plus a new survey's
  sampling variance plus the season error, on the logit scale, times the calibrated
  variance scale, times c.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import polars as pl

# 4.0: baseline x season (no month term passed its registered test); 4.1 would carry a month term.
MODEL_VERSION = "survey-season/7.0.0"
MODEL_VERSION_WITH_MONTH_TERM = "survey-season-rain/7.1.0"
RANGE_LEVEL = 0.8
Z_RANGE = NormalDist().inv_cdf(0.5 + RANGE_LEVEL / 2)  # 1.2816
# Levels follow the WHO malaria-elimination framework (2017) transmission strata on
# parasite prevalence: very low < 1 %, low 1-10 %, moderate 10-35 %, high >= 35 %;
# "high" is split at 50 %, the hyperendemic bound of the Metselaar-Van Thiel (1959)
# endemicity classes, so the fifth level marks the most intense transmission.
LEVEL_THRESHOLDS: tuple[tuple[float, str], ...] = (
    (0.01, "very_low"),
    (0.10, "low"),
    (0.35, "moderate"),
    (0.50, "high"),
)
TOP_LEVEL = "very_high"
HORIZONS = 4
# Months in which each round's children were tested (NMIS 2010/2015 and NDHS 2018: the
# interview months of the urban clusters in malaria/numalaria_urban_clusters/; NMIS 2021:
# October-December, its report). A round is placed at the middle of its fieldwork.
FIELDWORK_MONTHS: dict[int, tuple[int, ...]] = {
    2010: (10, 11, 12),
    2015: (10, 11),
    2018: (8, 9, 10, 11, 12),
    2021: (10, 11, 12),
}
# Children tested per state where a round gives no count: the NMIS 2015 design (9 clusters
# per state) at roughly 17 children per cluster. Used only when no per-state count is
# known for any round; otherwise the median known count is used.
ASSUMED_CHILDREN = 150
# Fewest consecutive-round pairs of states to estimate the random-walk variance from
# states; with fewer (a data load with one state round) zone rounds are used.
MIN_PAIRS = 5
# Lower bound of the random-walk variance (logit scale, per year): never a range that
# claims the baseline cannot move.
Q_MIN = 0.01
# Diffuse start of the random walk (logit scale).
PRIOR_VAR = 10.0
# Positivity is kept inside [EPS, 1 - EPS] before taking logits.
EPS = 0.005


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, EPS, 1 - EPS)
    return np.log(p / (1 - p))


def expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def binomial_logit_var(p: np.ndarray, n: np.ndarray | float) -> np.ndarray:
    """Sampling variance of logit(positivity) from n children (delta method)."""
    p = np.clip(p, 0.01, 0.99)
    return 1.0 / (np.asarray(n, dtype=float) * p * (1 - p))


def season_factor(index: np.ndarray) -> np.ndarray:
    """c: the seasonal index rescaled to mean 1 over the year, per row."""
    idx = np.asarray(index, dtype=float)
    return idx / idx.mean(axis=-1, keepdims=True)


def levels(score: np.ndarray) -> np.ndarray:
    """Map scores to level names with the fixed LEVEL_THRESHOLDS."""
    bounds = np.array([b for b, _ in LEVEL_THRESHOLDS])
    names = np.array([n for _, n in LEVEL_THRESHOLDS] + [TOP_LEVEL], dtype=object)
    return names[np.searchsorted(bounds, score, side="right")]


def round_month(year: int) -> int:
    """Month index (year*12 + month-1) of the middle of a round's fieldwork."""
    months = FIELDWORK_MONTHS.get(int(year), (6,))
    return int(year) * 12 + months[(len(months) - 1) // 2] - 1


def fieldwork_factor(c: np.ndarray, year: int) -> np.ndarray:
    """Mean of c ([..., 12]) over a round's fieldwork months."""
    months = np.array(FIELDWORK_MONTHS.get(int(year), tuple(range(1, 13)))) - 1
    return np.asarray(c)[..., months].mean(axis=-1)


@dataclass(frozen=True)
class Observations:
    """Survey rounds on the state x month grid (NaN where no round)."""

    z: np.ndarray  # [n_states, T] logit of the de-seasonalised positivity
    var: np.ndarray  # [n_states, T] its sampling variance
    t0: int  # month index of column 0
    typical_children: float  # children a new state survey would test


def observations(
    rounds: pl.DataFrame, state_codes: list[str], c_state: np.ndarray, t0: int, t1: int,
    design_effects: Mapping[int, float] | None = None,
) -> Observations:
    """Place each round (state_code, survey_year, positivity, children) on the grid t0..t1.

    The positivity is divided by the mean of the state's c over the fieldwork months,
    so what enters the baseline is the annual-mean level the round implies. The sampling
    variance is binomial times the round's design effect (pipeline.model.ranges; 1 where
    none is given).
    """
    deff = design_effects or {}
    n_states, width = len(state_codes), t1 - t0 + 1
    z = np.full((n_states, width), np.nan)
    var = np.full((n_states, width), np.nan)
    known = rounds["children"].drop_nulls().to_numpy() if "children" in rounds.columns else np.array([])
    typical = float(np.median(known)) if known.size else float(ASSUMED_CHILDREN)
    pos = {c: i for i, c in enumerate(state_codes)}
    for r in rounds.iter_rows(named=True):  # one entry per state round (about 100)
        i = pos.get(r["state_code"])
        col = round_month(r["survey_year"]) - t0
        if i is None or not 0 <= col < width:
            continue
        p = float(r["positivity"]) / float(fieldwork_factor(c_state[i], r["survey_year"]))
        n = r.get("children") or typical
        z[i, col] = float(logit(np.array(p)))
        var[i, col] = float(binomial_logit_var(np.array(p), n)) * float(deff.get(int(r["survey_year"]), 1.0))
    return Observations(z, var, t0, typical)


def random_walk_variance(pairs_d: np.ndarray, pairs_var: np.ndarray, pairs_years: np.ndarray) -> float:
    """Method-of-moments random-walk variance per year: E[d^2] = Q * years + v1 + v2."""
    if pairs_d.size == 0:
        return Q_MIN
    q = float((pairs_d**2 - pairs_var).sum() / pairs_years.sum())
    return max(Q_MIN, q)


def state_pairs(obs: Observations) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Differences, summed sampling variances and years between consecutive rounds of each state."""
    d, v, yrs, _ = state_pair_intervals(obs)
    return d, v, yrs


def state_pair_intervals(obs: Observations) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """state_pairs plus an interval id per pair (the two rounds' columns), so that the
    national drift of each interval can be told from the states' own moves."""
    d, v, yrs, ids = [], [], [], []
    width = obs.z.shape[1]
    for zrow, vrow in zip(obs.z, obs.var, strict=True):
        cols = np.flatnonzero(np.isfinite(zrow))
        d += list(np.diff(zrow[cols]))
        v += list(vrow[cols][1:] + vrow[cols][:-1])
        yrs += list(np.diff(cols) / 12.0)
        ids += list(cols[:-1] * width + cols[1:])
    return np.array(d), np.array(v), np.array(yrs), np.array(ids, dtype=np.int64)


@dataclass(frozen=True)
class Baseline:
    mean: np.ndarray  # [n_states, T] smoothed logit baseline
    var: np.ndarray  # [n_states, T] its variance
    t0: int
    q: float  # random-walk variance per year
    typical_children: float
    new_survey_deff: float = 1.0  # design effect of a new state survey (pipeline.model.ranges)
    q_method: str = "pooled"
    # the range calibration (pipeline.model.ranges.Calibration): a drift of the logit mean per year
    # after each state's last round (last_round: its month index, per state), and a scale of the
    # predictive variance; the defaults leave the smoothed baseline as it is
    drift_per_year: float = 0.0
    var_scale: float = 1.0
    last_round: np.ndarray | None = None


def smooth(obs: Observations, q_year: float, new_survey_deff: float = 1.0, q_method: str = "pooled") -> Baseline:
    """Kalman filter and RTS smoother of a random walk, all states at once.

    Loops over months (one vector operation per month for every state); months without
    a round only add Q/12 to the variance, so after the last round the mean holds and the
    variance grows linearly with time.
    """
    n, width = obs.z.shape
    q = q_year / 12.0
    mf = np.empty((n, width))
    vf = np.empty((n, width))
    m, v = np.zeros(n), np.full(n, PRIOR_VAR)
    for t in range(width):
        if t:
            v = v + q
        has = np.isfinite(obs.z[:, t])
        if has.any():
            k = np.where(has, v / (v + np.where(has, obs.var[:, t], 1.0)), 0.0)
            m = np.where(has, m + k * (np.nan_to_num(obs.z[:, t]) - m), m)
            v = np.where(has, (1 - k) * v, v)
        mf[:, t], vf[:, t] = m, v
    ms, vs = mf.copy(), vf.copy()
    for t in range(width - 2, -1, -1):
        vp = vf[:, t] + q
        g = vf[:, t] / vp
        ms[:, t] = mf[:, t] + g * (ms[:, t + 1] - mf[:, t])
        vs[:, t] = vf[:, t] + g**2 * (vs[:, t + 1] - vp)
    return Baseline(ms, vs, obs.t0, q_year, obs.typical_children, new_survey_deff, q_method)


@dataclass(frozen=True)
class Scores:
    score: np.ndarray
    low: np.ndarray
    high: np.ndarray


def baseline_range(b: Baseline, months: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """State baseline (median, low, high of what a survey would measure, before the season) at month indices."""
    cols = np.asarray(months) - b.t0
    m, v = b.mean[:, cols], b.var[:, cols]
    if b.drift_per_year and b.last_round is not None:
        after = np.maximum(np.asarray(months)[None, :] - np.asarray(b.last_round)[:, None], 0) / 12.0
        m = m + b.drift_per_year * after
    centre = expit(m)
    sd = np.sqrt(b.var_scale * (v + binomial_logit_var(centre, b.typical_children) * b.new_survey_deff))
    return centre, expit(m - Z_RANGE * sd), expit(m + Z_RANGE * sd)


def season_logit_var(p: np.ndarray, log_sd: float) -> np.ndarray:
    """Logit-scale variance of a level whose season factor is off by a log error of sd `log_sd`:
    d logit(p e^e) / de = 1 / (1 - p) at e = 0."""
    return (float(log_sd) / np.clip(1.0 - np.asarray(p, dtype=float), EPS, 1.0)) ** 2


def widen(s: Scores, log_sd: float) -> Scores:
    """The range with the season-shape error added: the logit half-width of each side combined in
    quadrature with the season's (score unchanged, so low <= score <= high still holds)."""
    if log_sd <= 0:
        return s
    mid = np.clip(s.score, EPS, 1 - EPS)
    lm = logit(mid)
    extra = season_logit_var(mid, log_sd)
    sd_lo = (lm - logit(np.clip(s.low, EPS, 1 - EPS))) / Z_RANGE
    sd_hi = (logit(np.clip(s.high, EPS, 1 - EPS)) - lm) / Z_RANGE
    low = expit(lm - Z_RANGE * np.sqrt(np.maximum(sd_lo, 0) ** 2 + extra))
    high = expit(lm + Z_RANGE * np.sqrt(np.maximum(sd_hi, 0) ** 2 + extra))
    return Scores(score=s.score, low=np.minimum(low, s.low), high=np.maximum(high, s.high))


def scores(base: np.ndarray, low: np.ndarray, high: np.ndarray, c: np.ndarray) -> Scores:
    """score = B x c, clipped to [0, 1]; low <= score <= high because B_low <= B <= B_high and c > 0."""
    return Scores(
        score=np.clip(base * c, 0.0, 1.0), low=np.clip(low * c, 0.0, 1.0), high=np.clip(high * c, 0.0, 1.0)
    )


def urban_split(
    state_baseline: np.ndarray, pop: np.ndarray, is_urban: np.ndarray, state_idx: np.ndarray, urban_ratio: float
) -> np.ndarray:
    """Per-LGA baseline: urban LGAs at `urban_ratio` x the rural level of their state,
    the rural level chosen so the state's population-weighted mean is unchanged.

    state_baseline: [n_states, ...]; returns [n_lgas, ...].
    """
    n_states = state_baseline.shape[0]
    shape = (-1,) + (1,) * (state_baseline.ndim - 1)
    w_urban = np.bincount(state_idx, weights=pop * is_urban, minlength=n_states).reshape(shape)
    w_all = np.bincount(state_idx, weights=pop, minlength=n_states).reshape(shape)
    w_rural = w_all - w_urban
    b = np.clip(state_baseline, 0.0, 1.0)
    rural = np.minimum(b * w_all / (w_rural + urban_ratio * w_urban), 1.0)
    # If the rural level would pass 1 (a mostly urban state with a very high baseline),
    # rural is capped and urban takes the rest, so the state mean is still preserved.
    with np.errstate(divide="ignore", invalid="ignore"):
        urban = np.where(
            rural >= 1.0, (b * w_all - w_rural) / np.where(w_urban > 0, w_urban, 1.0), urban_ratio * rural
        )
    return np.clip(np.where(is_urban.reshape(shape), urban[state_idx], rural[state_idx]), 0.0, 1.0)


def aggregate(values: np.ndarray, group_idx: np.ndarray, weights: np.ndarray, n_groups: int) -> np.ndarray:
    """Weighted mean of rows of `values` ([n, ...]) per group: state = population-weighted LGAs."""
    onehot = np.zeros((n_groups, values.shape[0]))
    onehot[group_idx, np.arange(values.shape[0])] = weights
    totals = onehot.sum(axis=1, keepdims=True)
    flat = values.reshape(values.shape[0], -1)
    return (onehot @ flat / totals).reshape((n_groups,) + values.shape[1:])


# --- baseline endemicity from survey positivity -------------------------------------------

PREFERRED_TEST = "microscopy"


def urban_rural_ratio(survey: pl.DataFrame) -> tuple[float, int]:
    """Urban / rural positivity of the latest round that has both (microscopy preferred).

    Returns (ratio, survey_year). Raises ValueError when no round has the split.
    """
    res = survey.filter(pl.col("level") == "residence")
    for test in (PREFERRED_TEST, "RDT"):
        t = res.filter(pl.col("test") == test)
        years = sorted(set(t.filter(pl.col("area") == "urban")["survey_year"]) & set(t.filter(pl.col("area") == "rural")["survey_year"]))
        if years:
            y = years[-1]
            u = float(np.mean(t.filter((pl.col("survey_year") == y) & (pl.col("area") == "urban"))["positivity"].to_numpy()))
            r = float(np.mean(t.filter((pl.col("survey_year") == y) & (pl.col("area") == "rural"))["positivity"].to_numpy()))
            if r > 0:
                return u / r, int(y)
    raise ValueError("no survey round with both urban and rural positivity")


def state_rounds(survey: pl.DataFrame, state_codes: list[str]) -> pl.DataFrame:
    """state_code, survey_year, positivity, test: one value per state and round.

    Microscopy where the round has it for the state (it measures current infection;
    RDTs stay positive for weeks after treatment, HRP2 persistence); otherwise the
    RDT value scaled by that round's median microscopy/RDT ratio across states.
    Where a round has two rows for one state and test (the 2018 paper re-analysis and
    the DHS table), the DHS table (a file source, not a "page:" transcription) wins.
    """
    st = (
        survey.filter(pl.col("level") == "state", pl.col("state_code").is_in(state_codes))
        .with_columns(pl.col("source").str.starts_with("page:").alias("_page"))
        .sort("_page")
        .unique(subset=["survey_year", "state_code", "test"], keep="first", maintain_order=True)
    )
    micro = st.filter(pl.col("test") == PREFERRED_TEST).select("state_code", "survey_year", pl.col("positivity").alias("m"))
    rdt = st.filter(pl.col("test") == "RDT").select("state_code", "survey_year", pl.col("positivity").alias("r"))
    both = micro.join(rdt, on=["state_code", "survey_year"], how="full", coalesce=True)
    ratio = both.filter(pl.col("m").is_not_null() & (pl.col("r") > 0)).group_by("survey_year").agg(
        (pl.col("m") / pl.col("r")).median().alias("k")
    )
    return (
        both.join(ratio, on="survey_year", how="left")
        .with_columns(
            pl.when(pl.col("m").is_not_null()).then(pl.col("m")).otherwise(pl.col("r") * pl.col("k")).alias("positivity"),
            pl.when(pl.col("m").is_not_null()).then(pl.lit("microscopy")).otherwise(pl.lit("RDT scaled")).alias("test"),
        )
        .filter(pl.col("positivity").is_not_null())
        .select("state_code", "survey_year", "positivity", "test")
        .sort("state_code", "survey_year")
    )


