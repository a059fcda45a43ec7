"""Protocols 2 and 3 of the season ratios (docs/skill-protocol.md): references, freer candidates, the
zone-wise selection rule (protocol 3: one rule for a single count, one for several past months), per-class
claims with the weak-class fallback, split-conformal quantiles and proper scores, all in doubly nested
whole-state cross-validation. Protocol 2's rule is kept as a scored method, so before and after are
measured on the same triples.

Why doubly nested: the rule that picks the published method, the per-class verdicts and the ranges are
themselves choices made from data, so inside each outer fold they are made from the training states'
own leave-one-state-out residuals only, and the held-out state is scored on what they chose. Pure:
arrays in, arrays and summaries out; nothing of a dated series leaves as a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scoringrules as sr

from pipeline.model.skill import (
    CLASSES,
    HORIZONS,
    INDEX_FLOOR,
    LEVEL_MONTHS,
    MIN_GROUP_RESIDUALS,
    MIN_GROUP_STATES,
    MIN_LEVEL_MONTHS,
    MONTHS,
    CaseSeries,
    _lagged,
    _window_mean,
)

QUANTILE_LEVELS = (0.1, 0.25, 0.5, 0.75, 0.9)
INTERVALS = ((0.5, 1, 3), (0.8, 0, 4))  # (coverage, index of lower, index of upper quantile)
ALPHA_GRID = (0.5, 0.75, 1.0, 1.25, 1.5)
K_GRID = (1, 2, 3)
MARGIN = 0.02  # a freer candidate must beat the simplest by this skill in every zone
MIN_CLASS_STATES = 3  # a per-class claim needs series of the class from this many states
SIMPLEST = "projected_a1"
FALLBACK_CLASS = "weak"
REFERENCES = ("persistence", "seasonal_naive", "flat", "seasonal_adjustment_k1", "seasonal_adjustment_k2",
              "seasonal_adjustment_k3", SIMPLEST)
ONE_COUNT = ("projected_alpha", "projected_alpha_class")  # protocol 3: the rule for a single count
SEVERAL_MONTHS = ("seasonal_adjustment_k", "seasonal_adjustment_k2", "seasonal_adjustment_k3")  # alpha 1, k months
FREER = ONE_COUNT + SEVERAL_MONTHS  # protocol 2: one rule over all five
PUBLISHED = "published"  # protocol 3, one count: the records' ratio and quantiles
SEVERAL = "published_several_months"  # protocol 3, a client given the last k months
PROTOCOL_2 = "protocol_2"  # protocol 2's rule as a procedure, scored in the same folds
RULES = (PUBLISHED, SEVERAL, PROTOCOL_2)


@dataclass(frozen=True)
class Family:
    """Variants [G, n, T, H] of one candidate's log forecast; `params` names each variant (alpha, k)."""

    variants: np.ndarray
    params: list[tuple[float, int]]
    per_class: bool = False


@dataclass(frozen=True)
class Candidates:
    target: np.ndarray  # [n, T, H] log c(t+h)
    valid: np.ndarray  # [n, T, H] every reference and candidate defined
    families: dict[str, Family]


def candidates(series: CaseSeries, index: np.ndarray, horizons: Sequence[int] = HORIZONS,
               extra_alphas: Sequence[float] = ()) -> Candidates:
    """Every reference and candidate of protocol 2 from each origin month (log forecasts)."""
    c = series.counts
    n, T = c.shape
    H = len(horizons)
    with np.errstate(divide="ignore", invalid="ignore"):
        logc = np.where(np.isfinite(c) & (c > 0), np.log(c), np.nan)
    li = np.log(np.clip(np.asarray(index, dtype=float), INDEX_FLOOR, None))
    cal = series.calendar
    li_t = li[:, cal]
    des = logc - li_t
    target = np.full((n, T, H), np.nan)
    li_ahead = np.empty((n, T, H))
    naive = np.full((n, T, H), np.nan)
    for k, h in enumerate(horizons):
        target[:, : T - h, k] = logc[:, h:]
        li_ahead[:, :, k] = li[:, (cal + h) % MONTHS]
        naive[:, :, k] = _lagged(logc, MONTHS - h)
    lr = li_ahead - li_t[:, :, None]
    pers = np.repeat(logc[:, :, None], H, axis=2)
    flat = np.repeat(_window_mean(logc, LEVEL_MONTHS, MIN_LEVEL_MONTHS)[:, :, None], H, axis=2)
    sa = {}
    for kb in K_GRID:
        base = np.where(np.isfinite(logc), _window_mean(des, kb, 1), np.nan)
        sa[kb] = base[:, :, None] + li_ahead

    def fixed(x: np.ndarray, a: float = 1.0, kb: int = 1) -> Family:
        return Family(x[None], [(a, kb)])

    alphas = sorted({*ALPHA_GRID, *extra_alphas})
    fams = {
        "persistence": fixed(pers, 0.0), "seasonal_naive": fixed(naive, np.nan, 0), "flat": fixed(flat, 0.0, 12),
        **{f"seasonal_adjustment_k{kb}": fixed(sa[kb], 1.0, kb) for kb in K_GRID},
        SIMPLEST: fixed(pers + lr),
        "projected_alpha": Family(np.stack([pers + a * lr for a in ALPHA_GRID]), [(a, 1) for a in ALPHA_GRID]),
        "projected_alpha_class": Family(np.stack([pers + a * lr for a in ALPHA_GRID]), [(a, 1) for a in ALPHA_GRID],
                                        per_class=True),
        "seasonal_adjustment_k": Family(np.stack([sa[kb] for kb in K_GRID]), [(1.0, kb) for kb in K_GRID]),
    }
    if extra_alphas:  # protocol 1's grid, for the "before" figures in the same folds
        fams["protocol_1"] = Family(np.stack([pers + a * lr for a in alphas]), [(a, 1) for a in alphas])
    valid = np.isfinite(target)
    for f in fams.values():
        valid &= np.isfinite(f.variants).all(axis=0)
    return Candidates(target, valid, fams)


# --- choosing a variant, and out-of-sample residuals ---------------------------------------


def _pooled_choice(err: np.ndarray, mask: np.ndarray) -> int:
    """The variant with the smallest MSE over the masked (series, origin) cells; err [G, n, T]."""
    if not mask.any():
        return 0
    return int(np.argmin([float(np.mean(e[mask] ** 2)) for e in err]))


def fit(fam: Family, target: np.ndarray, valid: np.ndarray, train: np.ndarray, classes: np.ndarray,
        state: np.ndarray) -> np.ndarray:
    """[n, H] variant index for every series, chosen on the `train` series (pooled MSE), per class for a
    per-class family (a class with series from fewer than 2 training states takes the pooled choice)."""
    n, _, H = target.shape
    out = np.zeros((n, H), dtype=int)
    if fam.variants.shape[0] == 1:
        return out
    for k in range(H):
        err = fam.variants[:, :, :, k] - target[None, :, :, k]
        mask = valid[:, :, k] & train[:, None]
        pooled = _pooled_choice(err, mask)
        out[:, k] = pooled
        if fam.per_class:
            for cls in CLASSES:
                rows = classes == cls
                cm = mask & rows[:, None]
                if len(set(state[cm.any(axis=1)].tolist())) >= MIN_GROUP_STATES:
                    out[rows, k] = _pooled_choice(err, cm)
    return out


def predict(fam: Family, idx: np.ndarray) -> np.ndarray:
    """[n, T, H] the forecast of each series with its chosen variant."""
    v = fam.variants  # [G, n, T, H]
    sel = np.broadcast_to(idx[None, :, None, :], (1, *v.shape[1:]))
    return np.take_along_axis(v, sel, axis=0)[0]


def oos(fam: Family, cand: Candidates, states: Sequence[str], state: np.ndarray, classes: np.ndarray
        ) -> np.ndarray:
    """Residuals (observed - forecast) of the series of `states`, each state's made with the variant chosen
    on the other states of `states` (leave-one-state-out); NaN elsewhere and outside the valid triples."""
    out = np.full(cand.target.shape, np.nan)
    for s in states:
        rest = np.isin(state, [x for x in states if x != s])
        mine = state == s
        r = cand.target - predict(fam, fit(fam, cand.target, cand.valid, rest, classes, state))
        out[mine] = np.where(cand.valid[mine], r[mine], np.nan)
    return out


# --- the rule, the verdicts, the quantiles -------------------------------------------------


def _mse(r: np.ndarray) -> float:
    r = r[np.isfinite(r)]
    return float(np.mean(r**2)) if r.size else np.nan


def zone_skill(resid: np.ndarray, ref: np.ndarray, zone: np.ndarray, k: int) -> dict[str, float]:
    """Skill of `resid` against `ref` at horizon k, pooled over the series of each zone present."""
    out = {}
    for z in sorted(set(zone[np.isfinite(resid[:, :, k]).any(axis=1)].tolist())):
        rows = zone == z
        mr, mf = _mse(resid[rows, :, k]), _mse(ref[rows, :, k])
        out[z] = 1 - mr / mf if mf > 0 else np.nan
    return out


def select(resids: Mapping[str, np.ndarray], zone: np.ndarray, horizons: Sequence[int] = HORIZONS,
           freer: Sequence[str] = FREER) -> tuple[list[str], list[dict[str, dict[str, float]]]]:
    """Per horizon, the registered rule: a freer candidate only if it beats the simplest by MARGIN in every
    zone with series (largest smallest-zone skill among those that do); else the simplest."""
    picks, detail = [], []
    for k in range(len(horizons)):
        zs = {name: zone_skill(resids[name], resids[SIMPLEST], zone, k) for name in freer}
        ok = {name: min(v.values()) for name, v in zs.items() if v and all(x >= MARGIN for x in v.values())}
        picks.append(max(ok, key=lambda x: ok[x]) if ok else SIMPLEST)
        detail.append(zs)
    return picks, detail


Verdict = tuple[bool | None, str]


def _verdict(method: np.ndarray, pers: np.ndarray, ok: np.ndarray, state: np.ndarray) -> Verdict:
    """One verdict over the `ok` triples [n, T] of one horizon: pooled skill > 0 and more than half of the
    states there with a skill > 0; None with the reason below MIN_CLASS_STATES states."""
    states = sorted(set(state[ok.any(axis=1)].tolist()))
    if len(states) < MIN_CLASS_STATES:
        return None, f"series of the class from {len(states)} states; {MIN_CLASS_STATES} needed"
    pooled = 1 - float(np.mean(method[ok] ** 2)) / float(np.mean(pers[ok] ** 2))
    wins = sum(int(np.mean(method[ok & (state == s)[:, None]] ** 2) < np.mean(pers[ok & (state == s)[:, None]] ** 2))
               for s in states)
    return bool(pooled > 0 and 2 * wins > len(states)), \
        f"pooled skill {pooled:+.3f} over {len(states)} states, {wins} of them above 0"


def verdicts(method: np.ndarray, pers: np.ndarray, classes: np.ndarray, state: np.ndarray,
             horizons: Sequence[int] = HORIZONS) -> dict[str, list[Verdict]]:
    """Per class, per horizon: (beats_persistence, reason) from out-of-sample residuals of both (the class
    verdict; None where the class's series in this pool come from fewer than MIN_CLASS_STATES states)."""
    both = np.isfinite(method) & np.isfinite(pers)
    return {cls: [_verdict(method[:, :, k], pers[:, :, k], both[:, :, k] & (classes == cls)[:, None], state)
                  for k in range(len(horizons))] for cls in CLASSES}


def pooled_verdicts(method: np.ndarray, pers: np.ndarray, state: np.ndarray, horizons: Sequence[int] = HORIZONS
                    ) -> list[Verdict]:
    """Per horizon: the verdict pooled over classes (protocol 3, change 1), every series of the pool."""
    both = np.isfinite(method) & np.isfinite(pers)
    return [_verdict(method[:, :, k], pers[:, :, k], both[:, :, k], state) for k in range(len(horizons))]


def acting(v: Mapping[str, list[Verdict]], pooled: Sequence[Verdict]) -> dict[str, list[bool | None]]:
    """Per class and horizon, the verdict the forecast follows: the class's where it has one, else the
    verdict pooled over classes (protocol 3, change 1)."""
    return {c: [x[0] if x[0] is not None else pooled[k][0] for k, x in enumerate(vs)] for c, vs in v.items()}


def fallback_mask(v: Mapping[str, list[Verdict]], classes: np.ndarray, horizons: Sequence[int] = HORIZONS,
                  pooled: Sequence[Verdict] | None = None) -> np.ndarray:
    """[n, H] True where the series' class is the fallback class and persistence replaces its forecast:
    protocol 2 (no `pooled`) where the class verdict is not true; protocol 3 only where the acting verdict
    is false (a missing verdict never causes it)."""
    if pooled is None:
        bad = np.array([v[FALLBACK_CLASS][k][0] is not True for k in range(len(horizons))])
    else:
        bad = np.array([a is False for a in acting(v, pooled)[FALLBACK_CLASS]])
    return (classes == FALLBACK_CLASS)[:, None] & bad[None, :]


def base_of(pick: str, fam: Family, idx: np.ndarray) -> int:
    """The k of a several-months pick (1 for the simplest); idx: [n] its chosen variants at that horizon."""
    if pick == SIMPLEST:
        return 1
    return int(fam.params[int(idx[0]) if idx.size else 0][1])


def base_months_mask(alpha: np.ndarray, fb: np.ndarray, base: Sequence[int]) -> np.ndarray:
    """[n, H] where a record carries the k-month base (protocol 3, change 2): k > 1 at horizon h and the
    series' forecast is the alpha = 1 ratio, without the fallback, at h and at horizons 1..k-1 (so the
    clients' I(m)/I(m-j), the published j-month ratio from month m-j, is exact)."""
    plain = (alpha == 1.0) & ~fb
    out = np.zeros(plain.shape, dtype=bool)
    for k, kb in enumerate(base):
        if kb > 1:
            out[:, k] = plain[:, k] & plain[:, : kb - 1].all(axis=1)
    return out


def compose(resids: Mapping[str, np.ndarray], picks: Sequence[str], fb: np.ndarray | None) -> np.ndarray:
    """The published method's residuals: the pick per horizon, persistence where the fallback holds."""
    out = np.stack([resids[p][:, :, k] for k, p in enumerate(picks)], axis=-1)
    if fb is not None:
        out = np.where(fb[:, None, :], resids["persistence"], out)
    return out


def conformal_quantile(r: np.ndarray, p: float) -> float:
    """Split-conformal order statistic at level p: the ceil((n+1)p)-th smallest for p >= 0.5, the
    floor((n+1)p)-th for p < 0.5 (clamped to the sample), so intervals hold at least their coverage."""
    s = np.sort(r)
    n = s.size
    j = int(np.ceil((n + 1) * p)) if p >= 0.5 else int(np.floor((n + 1) * p))
    return float(s[min(max(j, 1), n) - 1])


def calibrate(resid: np.ndarray, classes: np.ndarray, state: np.ndarray, horizons: Sequence[int] = HORIZONS
              ) -> dict[str, np.ndarray]:
    """Per class: [H, 5] residual quantiles (QUANTILE_LEVELS) from a calibration pool of out-of-sample
    residuals; a group short of residuals or states takes the horizon's pool; sorted across levels and
    widening with horizon."""
    out = {}
    H = len(horizons)
    for cls in CLASSES:
        q = np.full((H, len(QUANTILE_LEVELS)), np.nan)
        for k in range(H):
            rows = classes == cls
            r = resid[rows, :, k]
            ok = np.isfinite(r)
            n_states = len(set(state[rows][ok.any(axis=1)].tolist()))
            vals = r[ok]
            if vals.size < MIN_GROUP_RESIDUALS or n_states < MIN_GROUP_STATES:
                allr = resid[:, :, k]
                vals = allr[np.isfinite(allr)]
            if vals.size:
                q[k] = np.sort([conformal_quantile(vals, p) for p in QUANTILE_LEVELS])
        if np.isfinite(q).all():
            lo, hi = q[:, :2], q[:, 3:]
            q[:, :2] = np.minimum.accumulate(lo, axis=0)
            q[:, 3:] = np.maximum.accumulate(hi, axis=0)
        out[cls] = q
    return out


def quantiles_of(q: Mapping[str, np.ndarray], classes: np.ndarray) -> np.ndarray:
    """[n, H, 5] each series' quantiles by its class."""
    return np.stack([q[c] for c in classes]) if len(classes) else np.zeros((0, len(HORIZONS), 5))


def wis_values(obs: np.ndarray, q: np.ndarray) -> np.ndarray:
    """WIS of observations [N] against their five quantiles [N, 5] (QUANTILE_LEVELS), canonical weights:
    the sum of the quantile (pinball) scores over (K + 1/2), K = 2 intervals (Bracher et al. 2021).
    Built on scoringrules.quantile_score: its weighted_interval_score (0.10.0, numpy backend) adds
    w_median x median instead of w_median x |obs - median| (tests/pipeline/model/test_forecast_cv.py)."""
    total = sum(np.asarray(sr.quantile_score(obs, q[:, i], lv, backend="numpy"))
                for i, lv in enumerate(QUANTILE_LEVELS))
    return np.asarray(total) / (len(INTERVALS) + 0.5)


def wis(resid: np.ndarray, q: np.ndarray) -> np.ndarray:
    """WIS of each residual [n, T, H] against the series' residual quantiles [n, H, 5] (log scale; a
    translation of forecast and observation leaves it unchanged). NaN where the residual is."""
    qb = np.broadcast_to(q[:, None, :, :], (*resid.shape, len(QUANTILE_LEVELS)))
    ok = np.isfinite(resid)
    out = np.full(resid.shape, np.nan)
    if ok.any():
        out[ok] = wis_values(resid[ok], qb[ok])
    return out


def crps(resid: np.ndarray, q: np.ndarray) -> np.ndarray:
    """CRPS approximated from the five quantiles (scoringrules.crps_quantile), as `wis`."""
    qb = np.broadcast_to(q[:, None, :, :], (*resid.shape, len(QUANTILE_LEVELS)))
    ok = np.isfinite(resid)
    out = np.full(resid.shape, np.nan)
    if ok.any():
        out[ok] = np.asarray(sr.crps_quantile(resid[ok], qb[ok], np.array(QUANTILE_LEVELS), backend="numpy"))
    return out


def inside(resid: np.ndarray, q: np.ndarray, lo: int, hi: int) -> np.ndarray:
    qb = q[:, None, :, :]
    with np.errstate(invalid="ignore"):
        return (resid >= qb[..., lo]) & (resid <= qb[..., hi])


# --- the doubly nested CV of one level -----------------------------------------------------


@dataclass
class Scored:
    """One method's held-out residuals, calibrated quantiles and scores over every outer fold."""

    resid: np.ndarray  # [n, T, H]
    q: np.ndarray  # [n, H, 5] residual quantiles applied to each series (from its fold's training states)
    wis: np.ndarray
    crps: np.ndarray


@dataclass
class LevelResult:
    series: CaseSeries
    classes: np.ndarray
    zone: np.ndarray
    cand: Candidates
    scored: dict[str, Scored]
    fold_picks: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # held-out state -> rule -> picks
    fold_verdicts: dict[str, dict[str, list[Verdict]]] = field(default_factory=dict)  # class verdicts of the pool
    fold_acting: dict[str, dict[str, list[bool | None]]] = field(default_factory=dict)  # what the forecast followed
    outer: dict[str, np.ndarray] = field(default_factory=dict)  # every family's outer residuals


def _score(resid: np.ndarray, q: np.ndarray) -> Scored:
    return Scored(resid, q, wis(resid, q), crps(resid, q))


@dataclass(frozen=True)
class Rules:
    """What the registered rules chose from one verdict pool (a fold's inner residuals, or all seven
    states' outer residuals), and how each rule's forecast is put together from a family's residuals."""

    picks: dict[str, list[str]]  # rule (RULES) -> pick per horizon
    verdicts: dict[str, list[Verdict]]  # protocol 3: class verdicts of the one-count pick
    pooled: list[Verdict]  # protocol 3: the verdicts pooled over classes
    fallback: np.ndarray  # [n, H] protocol 3's fallback
    fallback_2: np.ndarray  # [n, H] protocol 2's
    alpha: np.ndarray  # [n, H] the one-count pick's alpha of each series
    base: list[int]  # the several-months pick's k per horizon (1: the simplest)
    several: np.ndarray  # [n, H] the series whose record carries the k-month base

    def compose(self, rule: str, resids: Mapping[str, np.ndarray]) -> np.ndarray:
        one = compose(resids, self.picks[PUBLISHED], self.fallback)
        if rule == PUBLISHED:
            return one
        if rule == PROTOCOL_2:
            return compose(resids, self.picks[PROTOCOL_2], self.fallback_2)
        k_pick = compose(resids, self.picks[SEVERAL], None)
        return np.where(self.several[:, None, :], k_pick, one)


def rules(pool: Mapping[str, np.ndarray], fits: Mapping[str, np.ndarray], cand: Candidates, cls: np.ndarray,
          st: np.ndarray, zone: np.ndarray, given: Mapping[str, list[str]] | None = None,
          horizons: Sequence[int] = HORIZONS) -> Rules:
    """Protocol 3's two rules (one count, several months) and protocol 2's, their verdicts and fallbacks,
    from the residuals of a pool; `fits` [n, H] the variant of each series every family was fitted to
    (the parameters the forecasts use); `given` the picks made at another level."""
    freer = {PUBLISHED: ONE_COUNT, SEVERAL: SEVERAL_MONTHS, PROTOCOL_2: FREER}
    picks = {r: list(given[r]) if given is not None and r in given else select(pool, zone, horizons, f)[0]
             for r, f in freer.items()}
    pers = pool["persistence"]
    v = verdicts(compose(pool, picks[PUBLISHED], None), pers, cls, st, horizons)
    pooled = pooled_verdicts(compose(pool, picks[PUBLISHED], None), pers, st, horizons)
    fb = fallback_mask(v, cls, horizons, pooled)
    v2 = verdicts(compose(pool, picks[PROTOCOL_2], None), pers, cls, st, horizons)
    n = len(cls)
    alpha = np.ones((n, len(horizons)))
    for k, pk in enumerate(picks[PUBLISHED]):
        alpha[:, k] = np.asarray([a for a, _ in cand.families[pk].params])[fits[pk][:, k]]
    base = [base_of(pk, cand.families[pk], fits[pk][:, k]) for k, pk in enumerate(picks[SEVERAL])]
    return Rules(picks, v, pooled, fb, fallback_mask(v2, cls, horizons), alpha, base,
                 base_months_mask(alpha, fb, base))


def level_cv(series: CaseSeries, index: np.ndarray, classes: Sequence[str], zones: Mapping[str, str],
             picks_by_fold: Mapping[str, Mapping[str, list[str]]] | None = None, horizons: Sequence[int] = HORIZONS,
             extra_alphas: Sequence[float] = ()) -> LevelResult:
    """Doubly nested leave-one-state-out of every family and of the registered rules at one level.

    `picks_by_fold`: the rules' picks per held-out state made at another level (the state level uses the
    LGA level's); without it the rules are applied here."""
    cand = candidates(series, index, horizons, extra_alphas)
    cls = np.asarray(classes)
    st = series.state
    zone = np.array([zones.get(s, s) for s in st.tolist()])
    states = sorted(set(st.tolist()))
    n, T, H = cand.target.shape
    names = [*cand.families, *RULES]
    res = {m: np.full((n, T, H), np.nan) for m in names}
    qs = {m: np.full((n, H, len(QUANTILE_LEVELS)), np.nan) for m in names}
    out = LevelResult(series, cls, zone, cand, {})
    for s in states:
        train = [x for x in states if x != s]
        rows = st == s
        tr = np.isin(st, train)
        inner = {name: oos(f, cand, train, st, cls) for name, f in cand.families.items()}
        held, fits = {}, {}
        for name, f in cand.families.items():
            fits[name] = fit(f, cand.target, cand.valid, tr, cls, st)
            r = cand.target - predict(f, fits[name])
            held[name] = np.where(cand.valid, r, np.nan)
            res[name][rows] = held[name][rows]
            qs[name][rows] = quantiles_of(calibrate(inner[name], cls, st, horizons), cls[rows])
        ru = rules(inner, fits, cand, cls, st, zone, None if picks_by_fold is None else picks_by_fold[s], horizons)
        for rule in RULES:
            res[rule][rows] = ru.compose(rule, held)[rows]
        # the several-months forecast is issued with the one-count quantiles the records carry
        q_one = quantiles_of(calibrate(ru.compose(PUBLISHED, inner), cls, st, horizons), cls[rows])
        qs[PUBLISHED][rows] = qs[SEVERAL][rows] = q_one
        qs[PROTOCOL_2][rows] = quantiles_of(calibrate(ru.compose(PROTOCOL_2, inner), cls, st, horizons), cls[rows])
        out.fold_picks[s] = ru.picks
        out.fold_verdicts[s] = ru.verdicts
        out.fold_acting[s] = acting(ru.verdicts, ru.pooled)
    out.scored = {m: _score(res[m], qs[m]) for m in names}
    out.outer = {name: oos(f, cand, states, st, cls) for name, f in cand.families.items()}
    return out


# --- what is published (the rule on every state's outer residuals) ---------------------------


@dataclass(frozen=True)
class Published:
    picks: list[str]  # per horizon: the one-count rule's pick (the records' ratio and quantiles)
    zone_skill: list[dict[str, dict[str, float]]]
    alpha: dict[str, list[float]]  # class -> per horizon (1 where the pick has no alpha)
    base_months: list[int]  # per horizon: the several-months rule's k (1: the simplest)
    verdicts: dict[str, list[Verdict]]  # class verdicts (None: fewer than MIN_CLASS_STATES states)
    fallback: list[bool]  # per horizon: the fallback class takes persistence
    q: dict[str, np.ndarray]  # class -> [H, 5] residual quantiles
    pooled: list[Verdict] = field(default_factory=list)  # per horizon: the verdict pooled over classes
    picks_several_months: list[str] = field(default_factory=list)
    zone_skill_several_months: list[dict[str, dict[str, float]]] = field(default_factory=list)


def published(lv: LevelResult, picks: Mapping[str, list[str]] | None = None, horizons: Sequence[int] = HORIZONS
              ) -> Published:
    """The rules, the parameters, the verdicts and the quantiles on all seven states (outer residuals);
    `picks` the rules' picks made at another level (the state level takes the LGA level's)."""
    cand, cls, st = lv.cand, lv.classes, lv.series.state
    every = np.ones(len(cls), dtype=bool)
    fits = {name: fit(f, cand.target, cand.valid, every, cls, st) for name, f in cand.families.items()}
    ru = rules(lv.outer, fits, cand, cls, st, lv.zone, picks, horizons)
    if picks is None:
        detail = select(lv.outer, lv.zone, horizons, ONE_COUNT)[1]
        detail_k = select(lv.outer, lv.zone, horizons, SEVERAL_MONTHS)[1]
    else:
        detail = detail_k = [{} for _ in horizons]
    alpha = {c: [1.0] * len(horizons) for c in CLASSES}
    for k, p in enumerate(ru.picks[PUBLISHED]):
        f = cand.families[p]
        pooled_idx = fit(Family(f.variants, f.params), cand.target, cand.valid, every, cls, st)
        for c in CLASSES:
            rows = np.flatnonzero(cls == c)
            i = int(fits[p][rows[0], k]) if rows.size else int(pooled_idx[0, k]) if len(cls) else 0
            alpha[c][k] = float(f.params[i][0])
    v = ru.verdicts
    fb = ru.fallback
    q = calibrate(ru.compose(PUBLISHED, lv.outer), cls, st, horizons)
    fbk = [a is False for a in acting(v, ru.pooled)[FALLBACK_CLASS]]
    if any(fbk):  # the fallback class's quantiles are persistence's of that class
        qp = calibrate(np.where(fb[:, None, :], lv.outer["persistence"], np.nan), cls, st, horizons)
        for j in np.flatnonzero(fbk):
            q[FALLBACK_CLASS][j] = qp[FALLBACK_CLASS][j]
        for c in CLASSES:
            q[c][:, :2] = np.minimum.accumulate(q[c][:, :2], axis=0)
            q[c][:, 3:] = np.maximum.accumulate(q[c][:, 3:], axis=0)
    return Published(list(ru.picks[PUBLISHED]), detail, alpha, ru.base, v, fbk, q, ru.pooled,
                     list(ru.picks[SEVERAL]), detail_k)


# --- scorecard rows ------------------------------------------------------------------------


def _r(v: float, d: int = 3) -> float | None:
    return None if not np.isfinite(v) else round(float(v), d)


def summary(lv: LevelResult, rows: np.ndarray, k: int, refs: Sequence[str] = ("persistence", "seasonal_naive", "flat",
            "seasonal_adjustment_k3", SIMPLEST)) -> dict[str, Any]:
    """Every method's scores over the masked series at horizon k (all methods on the same triples)."""
    v = lv.cand.valid[:, :, k] & rows[:, None]
    for sc in lv.scored.values():
        v &= np.isfinite(sc.resid[:, :, k])
    entry: dict[str, Any] = {"series": int(v.any(axis=1).sum()), "origins": int(v.any(axis=0).sum()),
                             "forecasts": int(v.sum())}
    if not v.any():
        return entry
    mse = {m: float(np.mean(sc.resid[:, :, k][v] ** 2)) for m, sc in lv.scored.items()}
    mw = {m: float(np.mean(sc.wis[:, :, k][v])) for m, sc in lv.scored.items()}
    methods = {}
    for m, sc in lv.scored.items():
        e: dict[str, Any] = {"mse": _r(mse[m], 4), "wis": _r(mw[m], 4),
                             "crps": _r(float(np.mean(sc.crps[:, :, k][v])), 4)}
        for ref in refs:
            e[f"skill_vs_{ref}"] = _r(1 - mse[m] / mse[ref]) if mse[ref] > 0 else None
        e["relative_wis_vs_persistence"] = _r(mw[m] / mw["persistence"]) if mw["persistence"] > 0 else None
        for cov, lo, hi in INTERVALS:
            e[f"coverage_{int(cov * 100)}"] = _r(float(inside(sc.resid, sc.q, lo, hi)[:, :, k][v].mean()))
        methods[m] = e
    entry["methods"] = methods
    return entry


def scorecard(lv: LevelResult, horizons: Sequence[int] = HORIZONS) -> dict[str, Any]:
    """Rows by horizon: pooled, by season class and by held-out state (summaries only)."""
    st = lv.series.state
    every = np.ones(len(st), dtype=bool)
    rows = []
    for k, h in enumerate(horizons):
        by_class = {c: summary(lv, lv.classes == c, k) for c in CLASSES if (lv.classes == c).any()}
        by_state = {s: summary(lv, st == s, k) for s in sorted(set(st.tolist()))}
        rows.append({"months_ahead": h, "all": summary(lv, every, k), "by_season_class": by_class,
                     "by_state": by_state})
    return {"series": len(lv.series.codes), "states": len(set(st.tolist())), "horizons": rows,
            "rule_picks_by_fold": {s: p for s, p in sorted(lv.fold_picks.items())}}


# --- the published table -------------------------------------------------------------------

QUANTILE_FIELDS = ("q10", "q25", "q50", "q75", "q90")


def ratio_rows(index: np.ndarray, classes: Sequence[str], pub: Published | None,
               horizons: Sequence[int] = HORIZONS, decimals: int = 3) -> list[list[dict[str, Any]]]:
    """Per area: one record per start month and horizon, from its published index.

    ratio = (I(m+h) / I(m)) ** alpha[class][h], or 1 where the fallback class takes persistence; the
    quantiles q10..q90 = ratio x exp(residual quantile) (low, high = q10, q90); null without a scorecard."""
    ix = np.clip(np.atleast_2d(np.asarray(index, dtype=float)), INDEX_FLOOR, None)
    hs = np.asarray(horizons)
    H = len(hs)
    cls_arr = np.asarray(list(classes), dtype=object)
    n = len(cls_arr)
    # [n, 12, H] every area's ratio at once: alpha and the fallback per class and horizon, then the
    # quantiles as ratio x exp(residual quantile); the records are only written out below
    alpha = np.ones((n, H))
    fb = np.zeros((n, H), dtype=bool)
    qexp = np.full((n, H, len(QUANTILE_FIELDS)), np.nan)
    base = np.ones((n, H), dtype=int)
    if pub is not None:
        for c in set(cls_arr.tolist()):
            rows = cls_arr == c
            alpha[rows] = pub.alpha[c]
            fb[rows] = [c == FALLBACK_CLASS and f for f in pub.fallback]
            qc = np.asarray(pub.q[c], dtype=float)
            ok = np.isfinite(qc).all(axis=1)
            qexp[np.ix_(rows, ok)] = np.exp(qc[ok])
        base = np.where(base_months_mask(alpha, fb, pub.base_months), np.asarray(pub.base_months)[None, :], 1)
    m = np.arange(MONTHS)
    future = ix[:, (m[:, None] + hs[None, :]) % MONTHS]  # [n, 12, H]
    val = np.where(fb[:, None, :], 1.0, (future / ix[:, :, None]) ** alpha[:, None, :])
    ratio = np.round(val, decimals).tolist()
    quant = np.round(val[..., None] * qexp[:, None, :, :], decimals)
    has_q = np.isfinite(qexp).all(axis=2)  # [n, H]
    quant_l = quant.tolist()
    out = []
    for i in range(n):
        cls = cls_arr[i]
        recs = []
        for mm in range(MONTHS):
            for k, h in enumerate(horizons):
                qv: list[float | None] = quant_l[i][mm][k] if has_q[i, k] else [None] * len(QUANTILE_FIELDS)
                beats = None if pub is None else pub.verdicts[cls][k][0]
                recs.append({"start_month": mm + 1, "horizon": int(h), "ratio": ratio[i][mm][k],
                             "low": qv[0], "high": qv[-1], **dict(zip(QUANTILE_FIELDS, qv, strict=True)),
                             "beats_persistence": beats, "insufficient_skill": beats is not True,
                             "forecast": "persistence" if fb[i, k] else "projected",
                             "base_months": int(base[i, k])})
        out.append(recs)
    return out


def evidence(pub: Published, horizons: Sequence[int] = HORIZONS) -> dict[str, list[dict[str, Any]]]:
    """The verdicts with their reasons, per class and horizon (the method block of the ratio documents):
    where the class has no verdict, the reason says which verdict pooled over classes the forecast follows."""
    out: dict[str, list[dict[str, Any]]] = {}
    for c in CLASSES:
        rows = []
        for k, h in enumerate(horizons):
            claim, why = pub.verdicts[c][k]
            if claim is None and k < len(pub.pooled):
                pv, pwhy = pub.pooled[k]
                why += f"; forecast by the verdict pooled over classes: {_word(pv)} ({pwhy})"
            rows.append({"months_ahead": h, "beats_persistence": claim, "reason": why,
                         "forecast": "persistence" if c == FALLBACK_CLASS and pub.fallback[k] else "projected"})
        out[c] = rows
    return out


def _word(v: bool | None) -> str:
    return "null" if v is None else str(v).lower()
