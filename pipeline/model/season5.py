"""Model-5 seasons: candidate methods compared by nested whole-state cross-validation, with season
strength, a calibrated peak window and an LGA detail rule (docs/model-5-protocol.md, docs/seasons.md).

Pure numpy: arrays in, arrays out. Every candidate maps a set of training dated states to a
12-month profile for every LGA; `nested_cv` chooses hyperparameters and the method inside each
outer fold (leave one dated state out) by an inner leave-one-state-out over the remaining states,
and scores every candidate, the selection and the published method on the outer left-out state.
Nothing of a left-out state enters its fold: its recorded profiles, its split-half statistics and
(for the model-4 fits) every archetype group covering it are out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.model import season_harmonics as H
from pipeline.model.seasons import MONTHS, season_centre, season_from_index

METHODS = ("model_4", "national_mean", "latitude_band", "archetype", "model_4_latitude_pooling")
REFERENCES = ("national_mean", "latitude_band", "archetype")
GRID_BAND_DEG = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
GRID_LAT_RANGE_DEG = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
GRID_SHRINK = H.GRID_SHRINK
MAX_EXTEND = 3
MIN_EFFECTIVE_STATES = 2.0  # amendment 1(a): no LGA's kernel may be one state's recorded profile
WEAK_TROUGH_TO_PEAK = 0.70
MARKED_TROUGH_TO_PEAK = 0.50
CLASSES = ("marked", "moderate", "weak")
WINDOW_PROBABILITY = 0.8
MIN_CLASS_UNITS = 5
FALLBACK_HALF_WIDTH = {"marked": 1, "moderate": 2, "weak": 6}
SPLIT_MIN_MEDIAN_R = 0.30
SPLIT_MIN_SHARE_POSITIVE = 0.65
BEST_WINDOW = 4
INDEX_DECIMALS = 3
MAX_MEAN_SIGNED_PEAK_ERROR = 0.5  # months: beyond it the season is systematically late or early (amendment 2)
# amendment 4: what the season class is read from, chosen in the nested CV (ties: the earlier)
CLASS_SOURCES = ("method", "archetype", "larger", "mean")

Hyper = tuple[float, ...]

# --- model 6 (docs/model-6-protocol.md) ---
RAIN_FITTED = ("rain_kernel", "rain_kernel_no_temperature", "rain_blend", "rain_onset")
RAIN_METHODS = ("rain_crude", *RAIN_FITTED)
# the candidates in the protocols' order of complexity (simplest first): the selection rule's order
COMPLEXITY = ("archetype", "national_mean", "rain_crude", "latitude_band", "rain_kernel", "rain_onset", "rain_blend",
              "model_4")
METHODS_6 = ("archetype", "national_mean", "rain_crude", "latitude_band", "rain_kernel", "rain_blend", "model_4")
ABLATIONS_6 = ("rain_kernel_no_temperature",)  # scored in the same folds, never selectable
# --- model 7 (docs/model-7-protocol.md): borrowed seasons are references only ---
METHODS_7 = ("archetype", "national_mean", "rain_crude", "latitude_band", "rain_kernel", "rain_onset", "model_4")
PUBLISHABLE_7 = ("rain_kernel", "rain_onset", "model_4")
SELECTION_MARGIN = 0.05  # a more complex candidate must lower the inner loss by more than this
RECORDED_RAIN_MIN_GAIN = 0.03  # item 5: recorded-rain months must beat the climatology by this in median r


# --- season rules on profiles ---------------------------------------------------------------------

def smooth3(profiles: np.ndarray) -> np.ndarray:
    """Circular 3-month running mean."""
    p = np.atleast_2d(np.asarray(profiles, dtype=float))
    return (np.roll(p, 1, axis=1) + p + np.roll(p, -1, axis=1)) / 3


def published_index(profiles: np.ndarray) -> np.ndarray:
    """[n, 12] smoothed profile scaled to peak 1, rounded to the published precision."""
    s = smooth3(profiles)
    return np.round(s / s.max(axis=1, keepdims=True), INDEX_DECIMALS)


def trough_to_peak(profiles: np.ndarray) -> np.ndarray:
    p = np.atleast_2d(profiles)
    return p.min(axis=1) / p.max(axis=1)


def season_class(tp: np.ndarray | float, marked_margin: np.ndarray | float = 0.0) -> np.ndarray:
    """marked (< 0.50), moderate, weak (>= 0.70) from the smoothed trough/peak ratio. Model 6 calls a
    season marked only with evidence: its amplitude plus `marked_margin` (the amplitude's typical
    out-of-sample error) still under 0.50."""
    t = np.asarray(tp, dtype=float)
    return np.where(t >= WEAK_TROUGH_TO_PEAK, "weak",
                    np.where(t + np.asarray(marked_margin, dtype=float) < MARKED_TROUGH_TO_PEAK, "marked", "moderate"))


def class_amplitudes(tp_method: np.ndarray, tp_archetype: np.ndarray | None) -> dict[str, np.ndarray]:
    """Amendment 4's candidate class amplitudes: the method's smoothed trough/peak, the archetype
    profile's, the larger (a class is "marked" only if both agree) and their mean. Only the method's
    without archetype profiles."""
    m = np.asarray(tp_method, dtype=float)
    if tp_archetype is None:
        return {"method": m}
    a = np.asarray(tp_archetype, dtype=float)
    return {"method": m, "archetype": a, "larger": np.maximum(m, a), "mean": (m + a) / 2}


def class_amplitude(source: str, tp_method: np.ndarray | float, tp_archetype: np.ndarray | float | None
                    ) -> np.ndarray:
    """The amplitude `source` (one of CLASS_SOURCES) reads from the two trough/peak ratios."""
    amps = class_amplitudes(np.asarray(tp_method, dtype=float),
                            None if tp_archetype is None else np.asarray(tp_archetype, dtype=float))
    if source not in amps:
        raise ValueError(f"class source {source!r} needs archetype profiles" if source in CLASS_SOURCES
                         else f"unknown class source {source!r}")
    return amps[source]


def weak_balanced_accuracy(flag: np.ndarray, truth: np.ndarray) -> float:
    """Mean of the share of truly weak units flagged weak and of the other units not flagged (the shares
    that are defined)."""
    f, t = np.asarray(flag, dtype=bool), np.asarray(truth, dtype=bool)
    rates = [float(f[t].mean())] if t.any() else []
    rates += [float((~f[~t]).mean())] if (~t).any() else []
    return float(np.mean(rates)) if rates else float("nan")


def choose_class_source(amps: dict[str, np.ndarray], recorded_tp: np.ndarray) -> tuple[str, dict[str, float]]:
    """(source, balanced accuracy per source) of the weak flag against the recorded weak flag; ties (1e-12)
    to the earlier of CLASS_SOURCES, so the method's own reading stays unless another does strictly better."""
    truth = np.asarray(recorded_tp, dtype=float) >= WEAK_TROUGH_TO_PEAK
    scores = {c: weak_balanced_accuracy(amps[c] >= WEAK_TROUGH_TO_PEAK, truth) for c in CLASS_SOURCES if c in amps}
    best = min(scores, key=lambda c: (-round(np.nan_to_num(scores[c], nan=-1.0), 12), CLASS_SOURCES.index(c)))
    return best, scores


def circular_error(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b in months, short way round, in [-6, 6)."""
    return H.signed_month_difference(a, b)


def peak_window(peak_month: int | Sequence[int], half_width: int) -> list[int]:
    """Months (1-12, calendar order) within `half_width` months of the peak month(s), circularly. Months
    tied at the published (rounded) peak are all peaks: which one the rounding favours is not knowledge."""
    k = int(min(max(half_width, 0), MONTHS // 2))
    peaks = [peak_month] if isinstance(peak_month, (int, np.integer)) else list(peak_month)
    return sorted({((p - 1 + d) % MONTHS) + 1 for p in peaks for d in range(-k, k + 1)})


def half_widths(errors: np.ndarray, classes: np.ndarray, p: float = WINDOW_PROBABILITY,
                min_units: int = MIN_CLASS_UNITS, strict: bool = False) -> dict[str, int]:
    """Smallest k per class with at least share p of |peak error| <= k; a class with fewer than
    `min_units` units is pooled with the flatter classes (then with all); non-decreasing from marked to
    weak, so the window never narrows as the season flattens."""
    e = np.abs(np.asarray(errors, dtype=float))
    c = np.asarray(classes)
    out: dict[str, int] = {}
    for i, cl in enumerate(CLASSES):
        sel = np.isin(c, CLASSES[i:])
        if (c == cl).sum() >= min_units:
            sel = c == cl
        if sel.sum() < min_units:
            sel = np.ones(len(c), dtype=bool)
        if sel.sum() == 0:
            out[cl] = FALLBACK_HALF_WIDTH[cl]
            continue
        ks = np.arange(MONTHS // 2 + 1)
        share = (e[sel][None, :] <= ks[:, None]).mean(axis=1)
        out[cl] = int(ks[np.argmax(share >= p)]) if (share >= p).any() else MONTHS // 2
    run = -1 if strict else 0
    for cl in CLASSES:
        # model 6: strictly wider for each flatter class (capped at the whole year)
        run = min(max(run + 1 if strict else run, out[cl]), MONTHS // 2)
        out[cl] = run
    return out


def start_end(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Season start and end months (1-12) at halfway between each profile's trough and peak."""
    st, en = [], []
    for row in np.atleast_2d(index):
        r = np.round(row / row.max(), 3)
        s = season_from_index(r, float(r.min() + (1 - r.min()) / 2))
        st.append(s.season_start_month)
        en.append(s.season_end_month)
    return np.array(st), np.array(en)


def best_window(profiles: np.ndarray, k: int = BEST_WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """(start month 1-12, share of the year) of the k consecutive months (circular) with most cases."""
    p = np.atleast_2d(np.asarray(profiles, dtype=float))
    sums = np.stack([np.roll(p, -j, axis=1) for j in range(k)]).sum(axis=0)
    start = sums.argmax(axis=1)
    return start + 1, sums.max(axis=1) / p.sum(axis=1)


def pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.atleast_2d(a) - np.atleast_2d(a).mean(axis=1, keepdims=True)
    b = np.atleast_2d(b) - np.atleast_2d(b).mean(axis=1, keepdims=True)
    d = np.sqrt((a**2).sum(axis=1) * (b**2).sum(axis=1))
    return np.where(d > 0, (a * b).sum(axis=1) / np.where(d > 0, d, 1.0), np.nan)


def inner_loss(pred: np.ndarray, rec: np.ndarray, amplitude: bool = False) -> np.ndarray:
    """The protocol's criterion per profile: (1 - shape r) + |centre error| / 6; model 6 adds
    |smoothed trough/peak error| (`amplitude`), because model 5's seasons came out too peaked."""
    r = pearson_rows(pred, rec)
    c = np.abs(circular_error(season_centre(pred), season_centre(rec)))
    out = (1 - np.nan_to_num(r, nan=0.0)) + c / 6
    if amplitude:
        out = out + np.abs(trough_to_peak(smooth3(pred)) - trough_to_peak(smooth3(rec)))
    return out


# --- split halves ---------------------------------------------------------------------------------

def split_half_r(dev1: np.ndarray, dev2: np.ndarray) -> np.ndarray:
    """Per LGA: r between its deviation from its state in one half and in the other (NaN if missing)."""
    ok = np.isfinite(dev1).all(axis=1) & np.isfinite(dev2).all(axis=1)
    out = np.full(len(dev1), np.nan)
    if ok.any():
        out[ok] = pearson_rows(dev1[ok], dev2[ok])
    return out


def deviations_repeat(r: np.ndarray) -> dict[str, Any]:
    """The protocol's test on a group's split-half r: median >= 0.30 and share r > 0 >= 0.65."""
    r = np.asarray(r, dtype=float)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return {"lgas": 0, "median_r": None, "share_positive": None, "repeats": False}
    med, pos = float(np.median(r)), float((r > 0).mean())
    return {"lgas": int(r.size), "median_r": round(med, 2), "share_positive": round(pos, 2),
            "repeats": bool(med >= SPLIT_MIN_MEDIAN_R and pos >= SPLIT_MIN_SHARE_POSITIVE)}


def level_rule(state_class: dict[str, str], lga_state: np.ndarray, lga_r: np.ndarray,
               states: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per season class: does an LGA's deviation from its state repeat across halves, judged on the
    dated LGAs of `states` only (grouped by their state's recorded class)."""
    out = {}
    for cl in CLASSES:
        members = [s for s in states if state_class.get(s) == cl]
        out[cl] = deviations_repeat(lga_r[np.isin(lga_state, members)])
    return out


# --- data -----------------------------------------------------------------------------------------

@dataclass
class Data:
    """Everything the model-5 candidates and their check need (areas = the 774 LGAs, sorted by code)."""

    area_state: np.ndarray  # [n] state code
    area_lat: np.ndarray  # [n]
    area_pop: np.ndarray  # [n]
    arch_profile: np.ndarray | None  # [n, 12] the LGA's archetype profile (mean 1), NaN rows: none
    dated_states: list[str]
    rec_state: np.ndarray  # [S, 12] recorded state profiles (mean 1)
    rec_area: np.ndarray  # [L] area row of each dated LGA
    rec_lga: np.ndarray  # [L, 12] recorded LGA profiles (mean 1)
    rec_lga_state: np.ndarray  # [L]
    cases: np.ndarray  # [L, T] monthly cases (NaN: missing)
    cal: np.ndarray  # [T] calendar month 0-11 of each column
    split_r: np.ndarray  # [L] split-half r of the LGA's deviation from its state
    m4: Callable[[frozenset[str], str, Hyper], np.ndarray] | None = None  # (train, kind, hyper) -> [n, 12]
    m4_choose: Callable[[frozenset[str]], Hyper] | None = None
    # model 6 (docs/model-6-protocol.md): each LGA's own rain and temperature climatologies, and which
    # protocol's loss, selection rule and class rule apply
    area_rain: np.ndarray | None = None  # [n, 12] mm
    area_temp: np.ndarray | None = None  # [n, 12] degrees C
    # [n, MAX_LAG + T] each LGA's recorded rain of the dated months and the months before them (the
    # state's CHIRPS total times the LGA's downscaling ratio); column MAX_LAG + t is case column t
    area_rain_months: np.ndarray | None = None
    # model 7: [n, 12] share of the climatology years whose rains began in each month (the state's dekadal
    # onset), and [n, MAX_LAG + T] 1 in each dated year's own onset month (columns as area_rain_months)
    area_onset: np.ndarray | None = None
    area_onset_months: np.ndarray | None = None
    protocol: int = 5
    _cache: dict[Any, Any] = field(default_factory=dict)

    @property
    def state_lat(self) -> np.ndarray:
        out = []
        for s in self.dated_states:
            rows = self.area_state == s
            out.append(float(np.average(self.area_lat[rows], weights=self.area_pop[rows])))
        return np.array(out)

    def state_profile(self, prof: np.ndarray, state: str) -> np.ndarray:
        """Population-weighted mean of a state's LGA profiles (each scaled to mean 1)."""
        rows = self.area_state == state
        m = prof[rows] / prof[rows].mean(axis=1, keepdims=True)
        w = self.area_pop[rows] / self.area_pop[rows].sum()
        return w @ m

    def recorded_class(self) -> dict[str, str]:
        return {s: str(season_class(trough_to_peak(smooth3(self.rec_state[i])))[0])
                for i, s in enumerate(self.dated_states)}


def _kernel(d: Data, train: frozenset[str], bw: float | None) -> np.ndarray:
    """[n, S_train] weights of the training states for every LGA (uniform when bw is None)."""
    idx = [i for i, s in enumerate(d.dated_states) if s in train]
    if bw is None:
        return np.ones((len(d.area_lat), len(idx)))
    lat = d.state_lat[idx]
    return np.exp(-np.abs(d.area_lat[:, None] - lat[None, :]) / bw)


def effective_states(w: np.ndarray) -> np.ndarray:
    return w.sum(axis=1) ** 2 / (w**2).sum(axis=1)


def admissible(d: Data, method: str, train: frozenset[str], hyper: Hyper) -> bool:
    """Amendment 1(a): a profile-reference kernel must mix at least MIN_EFFECTIVE_STATES states everywhere."""
    if method == "national_mean":
        return len(train) >= MIN_EFFECTIVE_STATES
    if method == "latitude_band":
        return bool(effective_states(_kernel(d, train, hyper[0])).min() >= MIN_EFFECTIVE_STATES - 1e-9)
    return True


def predict(d: Data, method: str, train: frozenset[str], hyper: Hyper = ()) -> np.ndarray:
    """[n, 12] positive profiles of every LGA from training dated states `train`."""
    key = (method, train, () if method == "model_4" or method in RAIN_METHODS else hyper)
    if key in d._cache:
        return d._cache[key]
    idx = [i for i, s in enumerate(d.dated_states) if s in train]
    logs = np.log(d.rec_state[idx])
    if method in ("national_mean", "latitude_band"):
        w = _kernel(d, train, hyper[0] if method == "latitude_band" else None)
        out = np.exp((w @ logs) / w.sum(axis=1, keepdims=True))
    elif method == "archetype":
        if d.arch_profile is None:
            raise ValueError("no archetype profiles")
        out = d.arch_profile.copy()
        miss = ~np.isfinite(out).all(axis=1)
        if miss.any():
            ok = ~miss
            out[miss] = np.exp(np.average(np.log(out[ok]), axis=0, weights=d.area_pop[ok]))
    elif method == "model_4":
        if d.m4 is None or d.m4_choose is None:
            raise ValueError("model 4 is not available")
        out = d.m4(train, "distance", d.m4_choose(train))
    elif method == "model_4_latitude_pooling":
        if d.m4 is None:
            raise ValueError("model 4 is not available")
        out = d.m4(train, "latitude", hyper)
    elif method in RAIN_METHODS:
        out = _rain_predict(d, method, train)
    else:
        raise ValueError(f"unknown method {method!r}")
    d._cache[key] = out
    return out


def _suitability(d: Data, method: str) -> np.ndarray:
    from pipeline.model import season6

    if d.area_rain is None:
        raise ValueError("model 6's rain candidates need every area's rain climatology")
    if method == "rain_kernel_no_temperature" or d.area_temp is None:
        return np.ones_like(d.area_rain)
    key = ("suitability",)
    if key not in d._cache:
        d._cache[key] = season6.thermal_suitability(d.area_temp)
    return d._cache[key]


def _rain_fit(d: Data, method: str, train: frozenset[str]) -> Any:
    """The rain kernel's four constants learned on the training states' recorded state profiles (cached;
    `rain_blend` shares `rain_kernel`'s fit)."""
    from pipeline.model import season6

    base = method if method in ("rain_kernel_no_temperature", "rain_onset") else "rain_kernel"
    key = ("rainfit", base, train)
    if key not in d._cache:
        states = [s for s in d.dated_states if s in train]
        groups = []
        for st in states:
            rows = np.flatnonzero(d.area_state == st)
            groups.append((rows, d.area_pop[rows]))
        rec = d.rec_state[[d.dated_states.index(st) for st in states]]
        assert d.area_rain is not None
        if base == "rain_onset":
            d._cache[key] = season6.fit_onset(d.area_rain, _suitability(d, base), _onset(d), groups, rec)
        else:
            d._cache[key] = season6.fit(d.area_rain, _suitability(d, base), groups, rec)
    return d._cache[key]


def _onset(d: Data) -> np.ndarray:
    if d.area_onset is None:
        raise ValueError("model 7's rain_onset needs every area's onset climatology")
    return d.area_onset


def _rain_predict(d: Data, method: str, train: frozenset[str]) -> np.ndarray:
    from pipeline.model import season6

    assert d.area_rain is not None
    if method == "rain_crude":
        return season6.crude(d.area_rain)
    kf = _rain_fit(d, method, train)
    if method == "rain_onset":
        return season6.onset_profiles(d.area_rain, _suitability(d, method), _onset(d), *kf.params)
    out = season6.profiles(d.area_rain, _suitability(d, method), *kf.params)
    if method == "rain_blend":
        # a case-fitted correction, shrunk halfway, only in training states (their own series)
        out = out.copy()
        for st in sorted(train):
            rows = d.area_state == st
            rec = d.rec_state[d.dated_states.index(st)]
            sp = d.state_profile(out, st)
            corr = np.exp(0.5 * (np.log(rec / rec.mean()) - np.log(sp / sp.mean())))
            out[rows] = out[rows] * corr[None, :]
    return out


def grids(method: str) -> list[tuple[float, ...]]:
    if method == "latitude_band":
        return [GRID_BAND_DEG]
    if method == "model_4_latitude_pooling":
        return [GRID_LAT_RANGE_DEG, GRID_SHRINK]
    return []


@dataclass(frozen=True)
class Tuned:
    method: str
    hyper: Hyper
    loss: float  # mean inner loss
    at_grid_edge: bool


def fold_loss(d: Data, method: str, train: frozenset[str], hyper: Hyper) -> float:
    """Mean inner loss of a method over leave-one-state-out within `train`."""
    losses = []
    for h in sorted(train):
        inner = train - {h}
        if not admissible(d, method, inner, hyper):
            return np.inf
        prof = predict(d, method, inner, hyper)
        i = d.dated_states.index(h)
        losses.append(float(inner_loss(d.state_profile(prof, h)[None], d.rec_state[i][None], d.protocol >= 6)[0]))
    return float(np.mean(losses)) if losses else np.inf


def fold_bias(d: Data, method: str, train: frozenset[str], hyper: Hyper) -> float:
    """Mean signed peak error (months) of the inner left-out states: model 6's admissibility."""
    key = ("bias", method, train, hyper)
    if key not in d._cache:
        errs: list[float] = []
        for h in sorted(train):
            inner = train - {h}
            if not admissible(d, method, inner, hyper):
                errs = []
                break
            prof = predict(d, method, inner, hyper)
            i = d.dated_states.index(h)
            errs.append(float(peak_errors(d.state_profile(prof, h)[None], d.rec_state[i][None])[0]))
        d._cache[key] = float(np.mean(errs)) if errs else np.inf
    return float(d._cache[key])


def tune(d: Data, method: str, train: frozenset[str]) -> Tuned:
    """Hyperparameters by the inner criterion, with the protocol's grid extension at an edge (cached)."""
    key = ("tune", method, train)
    if key in d._cache:
        return d._cache[key]
    out = _tune(d, method, train)
    d._cache[key] = out
    return out


def _tune(d: Data, method: str, train: frozenset[str]) -> Tuned:
    g = [list(x) for x in grids(method)]
    if method == "model_4" and d.m4_choose is not None:
        # model 4 as it is: its own pooling choice on the training states, reported with its grid edges
        hp = d.m4_choose(train)
        edge = hp[0] in (H.GRID_RANGE_KM[0], H.GRID_RANGE_KM[-1]) or hp[1] in (GRID_SHRINK[0], GRID_SHRINK[-1])
        return Tuned(method, hp, fold_loss(d, method, train, ()), bool(edge))
    if method in RAIN_FITTED:
        kf = _rain_fit(d, method, train)
        return Tuned(method, kf.params, fold_loss(d, method, train, ()), kf.at_grid_edge)
    if not g:
        return Tuned(method, (), fold_loss(d, method, train, ()), False)
    scores: dict[Hyper, float] = {}
    extended = [0] * len(g)
    while True:
        mesh = np.array(np.meshgrid(*g, indexing="ij")).reshape(len(g), -1).T
        for pt in mesh:
            hp = tuple(float(v) for v in pt)
            if hp not in scores:
                scores[hp] = fold_loss(d, method, train, hp)
        finite = {k: v for k, v in scores.items() if np.isfinite(v)}
        if not finite:
            return Tuned(method, tuple(x[0] for x in g), np.inf, False)
        best = min(finite, key=lambda k: (round(finite[k], 12), k))
        moved = False
        for j in range(len(g)):
            if best[j] == g[j][0] and extended[j] < MAX_EXTEND:
                g[j].insert(0, g[j][0] / 2)
                extended[j] += 1
                moved = True
            elif best[j] == g[j][-1] and extended[j] < MAX_EXTEND:
                g[j].append(g[j][-1] * 2)
                extended[j] += 1
                moved = True
        if not moved:
            # an edge of the grid as extended; the lowest admissible value of a constrained kernel
            # (amendment 1(a)) is the constraint's bound, not a grid edge
            edge = any(best[j] in (g[j][0], g[j][-1]) for j in range(len(g)))
            return Tuned(method, best, finite[best], edge)


def select(d: Data, train: frozenset[str], methods: Sequence[str]) -> tuple[dict[str, Tuned], str]:
    """Every method tuned on `train`, and the one with the least inner loss (ties: METHODS order)."""
    key = ("select", tuple(methods), train)
    if key in d._cache:
        return d._cache[key]
    tuned = {m: tune(d, m, train) for m in methods}
    if d.protocol >= 6:
        # model 7: the rule chooses among the publishable candidates only; the others are references
        pool = [m for m in methods if m in PUBLISHABLE_7] if d.protocol >= 7 else list(methods)
        best = simplest_within_margin(pool, {m: tuned[m].loss for m in pool},
                                      {m: fold_bias(d, m, train, tuned[m].hyper) for m in pool})
    else:
        best = min(methods, key=lambda m: (round(tuned[m].loss, 12), METHODS.index(m)))
    d._cache[key] = (tuned, best)
    return tuned, best


def simplest_within_margin(methods: Sequence[str], loss: dict[str, float], bias: dict[str, float]) -> str:
    """Model 6's selection rule: among candidates whose inner mean signed peak error is within 0.5 month
    (all, if none is), the simplest (COMPLEXITY order) whose loss is at most the least loss + MARGIN."""
    ok = [m for m in methods if np.isfinite(loss[m]) and abs(bias[m]) <= MAX_MEAN_SIGNED_PEAK_ERROR]
    pool = ok or [m for m in methods if np.isfinite(loss[m])] or list(methods)
    best = min(loss[m] for m in pool)
    order = sorted(pool, key=lambda m: (COMPLEXITY.index(m) if m in COMPLEXITY else len(COMPLEXITY), m))
    return next(m for m in order if loss[m] <= best + SELECTION_MARGIN + 1e-12)


# --- published profiles at state and LGA level -------------------------------------------------------

def with_level(d: Data, prof: np.ndarray, rule: dict[str, dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(profiles as published at LGA level, [n] level "lga"/"state"): an LGA keeps its own profile only
    where its state's predicted class is a class whose deviations repeat; otherwise its state's."""
    out = prof / prof.mean(axis=1, keepdims=True)
    level = np.full(len(out), "state", dtype=object)
    for s in np.unique(d.area_state):
        rows = d.area_state == s
        sp = d.state_profile(prof, s)
        cl = str(season_class(trough_to_peak(smooth3(sp)))[0])
        if rule.get(cl, {}).get("repeats"):
            level[rows] = "lga"
        else:
            out[rows] = sp
    return out, level


def at_level(d: Data, prof: np.ndarray, level: np.ndarray) -> np.ndarray:
    """[n, 12] profiles (mean 1) as each LGA reads them at its `level`: its own where "lga", else its
    state's population-weighted profile."""
    out = prof / prof.mean(axis=1, keepdims=True)
    lvl = np.asarray(level)
    for s in np.unique(d.area_state[lvl != "lga"]):
        rows = (d.area_state == s) & (lvl != "lga")
        out[rows] = d.state_profile(prof, s)
    return out


def archetype_tp(d: Data, level: np.ndarray) -> np.ndarray | None:
    """[n] the archetype profile's smoothed trough/peak at each LGA's published level (amendment 4 (ii));
    None without archetype profiles. The archetype profile uses no dated series."""
    if d.arch_profile is None:
        return None
    return trough_to_peak(smooth3(at_level(d, predict(d, "archetype", frozenset()), level)))


def peak_errors(pred: np.ndarray, rec: np.ndarray) -> np.ndarray:
    return circular_error(smooth3(pred).argmax(axis=1), smooth3(rec).argmax(axis=1))


# --- metrics ----------------------------------------------------------------------------------------

def month_to_month_r(prof: np.ndarray, cases: np.ndarray, cal: np.ndarray) -> np.ndarray:
    """Per row: r of recorded log(c_t / c_{t-1}) with predicted log(s(m_t) / s(m_{t-1})): the profile read
    month by month is a dated prediction."""
    return dated_month_to_month_r(np.asarray(prof, dtype=float)[:, cal], cases)


def state_cases(d: Data) -> np.ndarray:
    """[S, T] each dated state's month as the mean of its LGAs' cases over their own means (at least half)."""
    out = np.full((len(d.dated_states), d.cases.shape[1]), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        norm = d.cases / np.nanmean(d.cases, axis=1, keepdims=True)
    for i, s in enumerate(d.dated_states):
        rows = d.rec_lga_state == s
        n = np.isfinite(norm[rows]).sum(axis=0)
        m = np.where(n > 0, np.nansum(np.nan_to_num(norm[rows], nan=0.0), axis=0) / np.maximum(n, 1), np.nan)
        out[i] = np.where(n >= max(1, rows.sum() / 2), m, np.nan)
    return out


@dataclass
class OuterResult:
    """Out-of-sample predictions of one method (or the selection) over the outer folds."""

    state_pred: np.ndarray  # [S, 12] published (smoothed) state profile
    lga_pred: np.ndarray  # [L, 12] published LGA profile
    lga_level: np.ndarray  # [L]
    state_k: np.ndarray  # [S] window half-width used
    lga_k: np.ndarray  # [L]
    chosen: list[dict[str, Any]]  # per fold: method, hyper, at_grid_edge
    area_pred: np.ndarray | None = None  # [n, 12] every LGA of each left-out state, as published at LGA level
    area_level: np.ndarray | None = None  # [n]
    # amendment 4: per class source (and "chosen": the source each fold picks), the outer units' predicted
    # classes and window half-widths calibrated by those classes: (state class, LGA class, state k, LGA k)
    by_source: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    class_source: list[dict[str, Any]] = field(default_factory=list)  # per fold: source picked, inner scores


@dataclass
class InnerUnits:
    """Inner-fold (leave-one-state-out within a training set) left-out units of what a chooser picks:
    peak errors, and the candidate class amplitudes (amendment 4) with the recorded smoothed trough/peak."""

    state_error: np.ndarray  # [S']
    lga_error: np.ndarray  # [L']
    state_amps: dict[str, np.ndarray]  # source -> [S']
    lga_amps: dict[str, np.ndarray]  # source -> [L']
    lga_recorded_tp: np.ndarray  # [L']
    state_recorded_tp: np.ndarray = field(default_factory=lambda: np.zeros(0))  # [S']

    def classes(self, source: str) -> tuple[np.ndarray, np.ndarray]:
        return season_class(self.state_amps[source]), season_class(self.lga_amps[source])

    def amplitude_error(self) -> dict[str, tuple[float, float]]:
        """Model 6: per level, (mean recorded - predicted smoothed trough/peak, mean absolute error) of the
        inner left-out units: the class's bias correction and its evidence margin for `marked`."""
        out = {}
        for lvl, pred, rec in (("states", self.state_amps["method"], self.state_recorded_tp),
                               ("lgas", self.lga_amps["method"], self.lga_recorded_tp)):
            e = np.asarray(rec, dtype=float) - np.asarray(pred, dtype=float)
            e = e[np.isfinite(e)]
            out[lvl] = (float(e.mean()), float(np.abs(e).mean())) if e.size else (0.0, 0.0)
        return out

    def classes6(self, corr: dict[str, tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
        (bs, ms), (bl, ml) = corr["states"], corr["lgas"]
        return (season_class(self.state_amps["method"] + bs, ms), season_class(self.lga_amps["method"] + bl, ml))

    def source(self) -> tuple[str, dict[str, float]]:
        """Amendment 4's choice: balanced accuracy of the LGAs' weak flag (ties: CLASS_SOURCES order)."""
        return choose_class_source(self.lga_amps, self.lga_recorded_tp)


def _inner_units(d: Data, method_of: Callable[[frozenset[str]], tuple[str, Hyper]], train: frozenset[str]
                 ) -> InnerUnits:
    """Inner (leave-one-state-out within `train`) peak errors and class amplitudes, states and LGAs, of
    what `method_of` chooses on each inner training set (window calibration, class source choice)."""
    se, le, s_m, s_a, l_m, l_a, l_r, s_r = [], [], [], [], [], [], [], []
    rclass = d.recorded_class()
    for h in sorted(train):
        inner = train - {h}
        m, hp = method_of(inner)
        prof = predict(d, m, inner, hp)
        rule = level_rule(rclass, d.rec_lga_state, d.split_r, sorted(inner))
        lp, level = with_level(d, prof, rule)
        atp = archetype_tp(d, level)
        i = d.dated_states.index(h)
        sp = d.state_profile(prof, h)
        se.append(float(peak_errors(sp[None], d.rec_state[i][None])[0]))
        s_m.append(float(trough_to_peak(smooth3(sp))[0]))
        s_r.append(float(trough_to_peak(smooth3(d.rec_state[i]))[0]))
        rows = d.rec_lga_state == h
        area = d.rec_area[rows]
        pl_ = lp[area]
        le.extend(peak_errors(pl_, d.rec_lga[rows]).tolist())
        l_m.extend(trough_to_peak(smooth3(pl_)).tolist())
        l_r.extend(trough_to_peak(smooth3(d.rec_lga[rows])).tolist())
        if atp is not None:
            s_a.append(state_archetype_tp(d, h))
            l_a.extend(atp[area].tolist())
    has_a = d.arch_profile is not None
    return InnerUnits(np.array(se), np.array(le), class_amplitudes(np.array(s_m), np.array(s_a) if has_a else None),
                      class_amplitudes(np.array(l_m), np.array(l_a) if has_a else None), np.array(l_r), np.array(s_r))


def state_archetype_tp(d: Data, state: str) -> float:
    """A state's archetype smoothed trough/peak: its population-weighted archetype profile."""
    return float(trough_to_peak(smooth3(d.state_profile(predict(d, "archetype", frozenset()), state)))[0])


def outer(d: Data, methods: Sequence[str]) -> dict[str, OuterResult]:
    """Nested whole-state CV: every method (hyperparameters tuned inside) and the selection, scored on
    each outer left-out state; the window half-widths calibrated on the inner folds of that fold."""
    S, L = len(d.dated_states), len(d.rec_lga)
    names = [*methods, "selection"]
    n = len(d.area_state)
    res = {m: OuterResult(np.full((S, MONTHS), np.nan), np.full((L, MONTHS), np.nan), np.full(L, "", dtype=object),
                          np.zeros(S, dtype=int), np.zeros(L, dtype=int), [], np.full((n, MONTHS), np.nan),
                          np.full(n, "", dtype=object)) for m in names}
    rclass = d.recorded_class()
    all_states = frozenset(d.dated_states)
    selectable = [m for m in methods if m not in ABLATIONS_6]
    for i, g in enumerate(d.dated_states):
        train = all_states - {g}
        tuned, best = select(d, train, selectable)
        tuned = dict(tuned)
        for m in methods:
            if m not in tuned:
                tuned[m] = tune(d, m, train)
        rule = level_rule(rclass, d.rec_lga_state, d.split_r, sorted(train))
        rows = d.rec_lga_state == g
        for name in names:
            m = best if name == "selection" else name
            hp = tuned[m].hyper
            prof = predict(d, m, train, hp)
            lp, level = with_level(d, prof, rule)
            sp = d.state_profile(prof, g)
            r = res[name]
            r.state_pred[i] = sp
            r.lga_pred[rows] = lp[d.rec_area[rows]]
            r.lga_level[rows] = level[d.rec_area[rows]]
            mine = d.area_state == g
            assert r.area_pred is not None and r.area_level is not None
            r.area_pred[mine], r.area_level[mine] = lp[mine], level[mine]
            if name == "selection":
                chooser: Callable[[frozenset[str]], tuple[str, Hyper]] = _selector(d, selectable)
            else:
                chooser = _fixed(d, m)
            units = _inner_units(d, chooser, train)
            if d.protocol >= 6:
                _outer_class6(d, r, units, i, rows, sp, g)
                r.chosen.append({"left_out": g, "method": m, "hyper": list(hp),
                                 "at_grid_edge": tuned[m].at_grid_edge, "inner_loss": round(tuned[m].loss, 4)})
                continue
            src, scores = units.source()
            atp = archetype_tp(d, level)
            amps_s = class_amplitudes(trough_to_peak(smooth3(sp)),
                                      None if atp is None else np.array([state_archetype_tp(d, g)]))
            amps_l = class_amplitudes(trough_to_peak(smooth3(r.lga_pred[rows])),
                                      None if atp is None else atp[d.rec_area[rows]])
            for c in [*amps_s, "chosen"]:
                cs = src if c == "chosen" else c
                inner_s, inner_l = units.classes(cs)
                ks, kl = half_widths(units.state_error, inner_s), half_widths(units.lga_error, inner_l)
                ocs, ocl = str(season_class(amps_s[cs])[0]), season_class(amps_l[cs])
                b = r.by_source.setdefault(c, (np.full(S, "", dtype=object), np.full(L, "", dtype=object),
                                               np.zeros(S, dtype=int), np.zeros(L, dtype=int)))
                b[0][i], b[1][rows], b[2][i], b[3][rows] = ocs, ocl, ks[ocs], [kl[x] for x in ocl]
            r.state_k[i], r.lga_k[rows] = r.by_source["chosen"][2][i], r.by_source["chosen"][3][rows]
            r.class_source.append({"left_out": g, "source": src,
                                   "inner_weak_balanced_accuracy": {c: _r(v, 4) for c, v in scores.items()}})
            r.chosen.append({"left_out": g, "method": m, "hyper": list(hp), "at_grid_edge": tuned[m].at_grid_edge,
                             "inner_loss": round(tuned[m].loss, 4)})
    return res


def _outer_class6(d: Data, r: OuterResult, units: InnerUnits, i: int, rows: np.ndarray, sp: np.ndarray,
                  g: str) -> None:
    """Model 6's class of an outer left-out state and its LGAs: the amplitude corrected by the inner folds'
    bias, `marked` only past the inner mean absolute error; windows calibrated on the inner classes the
    same rule gives, strictly wider for flatter classes."""
    S, L = len(d.dated_states), len(d.rec_lga)
    corr = units.amplitude_error()
    inner_s, inner_l = units.classes6(corr)
    ks = half_widths(units.state_error, inner_s, strict=True)
    kl = half_widths(units.lga_error, inner_l, strict=True)
    (bs, ms), (bl, ml) = corr["states"], corr["lgas"]
    ocs = str(season_class(trough_to_peak(smooth3(sp))[0] + bs, ms))
    ocl = season_class(trough_to_peak(smooth3(r.lga_pred[rows])) + bl, ml)
    b = r.by_source.setdefault("chosen", (np.full(S, "", dtype=object), np.full(L, "", dtype=object),
                                          np.zeros(S, dtype=int), np.zeros(L, dtype=int)))
    b[0][i], b[1][rows], b[2][i], b[3][rows] = ocs, ocl, ks[ocs], [kl[x] for x in ocl]
    r.state_k[i], r.lga_k[rows] = b[2][i], b[3][rows]
    r.class_source.append({"left_out": g, "source": "bias_corrected",
                           "amplitude_bias": {k: round(v[0], 3) for k, v in corr.items()},
                           "amplitude_mean_abs_error": {k: round(v[1], 3) for k, v in corr.items()}})


def dated_month_to_month_r(series: np.ndarray, cases: np.ndarray) -> np.ndarray:
    """Per row: r of recorded log(c_t / c_{t-1}) with the dated prediction's log(s_t / s_{t-1})."""
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(cases[:, 1:] / cases[:, :-1])
        yhat = np.log(series[:, 1:] / series[:, :-1])
    out = np.full(len(cases), np.nan)
    for i in range(len(cases)):  # a row's 47 pairs: a vector op each
        ok = np.isfinite(y[i]) & np.isfinite(yhat[i])
        if ok.sum() >= 3:
            out[i] = pearson_rows(y[i][ok][None], yhat[i][ok][None])[0]
    return out


def recorded_rain_check(d: Data, method: str = "rain_kernel") -> dict[str, Any] | None:
    """Protocol item 5: the rain-driven candidate scored twice in the outer folds with the same constants,
    (a) driven by each month's recorded rain, (b) by the rain climatology; median month-to-month r over the
    left-out states' dated LGAs (and their states). None without the dated months' rain."""
    from pipeline.model import season6

    if d.area_rain is None or d.area_rain_months is None:
        return None
    if method == "rain_onset" and d.area_onset_months is None:
        return None
    suit = _suitability(d, method)
    lag = season6.MAX_LAG
    suit_t = np.concatenate([suit[:, (d.cal[0] - lag + np.arange(lag)) % MONTHS], suit[:, d.cal]], axis=1)
    ra, rb = np.full(len(d.rec_lga), np.nan), np.full(len(d.rec_lga), np.nan)
    sa, sb = np.full(len(d.dated_states), np.nan), np.full(len(d.dated_states), np.nan)
    sc_all = state_cases(d)
    for i, g in enumerate(d.dated_states):
        train = frozenset(d.dated_states) - {g}
        kf = _rain_fit(d, method, train)
        rows = d.rec_lga_state == g
        area = d.rec_area[rows]
        dated = _dated(d, method, area, suit_t, suit, kf.params)[:, lag:]
        clim = predict(d, method, train)[area]
        # both read the same months: a month the recorded-rain series cannot give (model 7's kernel reads the
        # month after; the last dated month has none) is left out of the climatology's score too
        cases = np.where(np.isfinite(dated), d.cases[rows], np.nan)
        ra[rows] = dated_month_to_month_r(dated, cases)
        rb[rows] = month_to_month_r(clim, cases, d.cal)
        # the state (its month as state_cases makes it) against the population-weighted prediction
        mine = np.flatnonzero(d.area_state == g)
        w = d.area_pop[mine] / d.area_pop[mine].sum()
        all_dated = _dated(d, method, mine, suit_t, suit, kf.params)[:, lag:]
        all_clim = predict(d, method, train)[mine]
        sd = (w @ all_dated)[None]
        sc = np.where(np.isfinite(sd), sc_all[i][None], np.nan)
        sa[i] = dated_month_to_month_r(sd, sc)[0]
        sb[i] = month_to_month_r((w @ all_clim)[None], sc, d.cal)[0]
    med = {k: _r(float(np.nanmedian(v))) for k, v in (("lga_recorded", ra), ("lga_climatology", rb),
                                                        ("state_recorded", sa), ("state_climatology", sb))}
    gain = None if med["lga_recorded"] is None or med["lga_climatology"] is None else \
        round(float(np.nanmedian(ra)) - float(np.nanmedian(rb)), 3)
    return {"method": method, "median_month_to_month_r": med, "lga_gain": gain,
            "minimum_gain": RECORDED_RAIN_MIN_GAIN, "lgas": int(np.isfinite(ra).sum()),
            "adopted": bool(gain is not None and gain >= RECORDED_RAIN_MIN_GAIN)}


def _dated(d: Data, method: str, rows: np.ndarray, suit_t: np.ndarray, suit: np.ndarray, params: Hyper
           ) -> np.ndarray:
    """[rows, MAX_LAG + T] a rain candidate driven by the dated months' recorded rain (and, for
    `rain_onset`, each year's own onset month)."""
    from pipeline.model import season6

    assert d.area_rain is not None and d.area_rain_months is not None
    if method == "rain_onset":
        assert d.area_onset_months is not None
        return season6.onset_dated_series(d.area_rain_months[rows], suit_t[rows], d.area_onset_months[rows],
                                          d.area_rain[rows], suit[rows], _onset(d)[rows], *params)
    return season6.dated_series(d.area_rain_months[rows], suit_t[rows], d.area_rain[rows], suit[rows], *params)


def rain_check_method(d: Data, resolved: str) -> str:
    """The candidate item 5's check reads: the published one if rain-driven, else model 6's `rain_kernel`
    or model 7's `rain_onset`."""
    if d.protocol >= 7:
        return resolved if resolved in ("rain_kernel", "rain_onset") else "rain_onset"
    return "rain_kernel"


def _fixed(d: Data, method: str) -> Callable[[frozenset[str]], tuple[str, Hyper]]:
    return lambda train: (method, tune(d, method, train).hyper)


def _selector(d: Data, methods: Sequence[str]) -> Callable[[frozenset[str]], tuple[str, Hyper]]:
    def f(train: frozenset[str]) -> tuple[str, Hyper]:
        tuned, best = select(d, train, methods)
        return best, tuned[best].hyper
    return f


def _r(v: float | None, n: int = 2) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), n)


def summarise(d: Data, r: OuterResult) -> dict[str, Any]:
    """The aim figures of one method's outer folds (summaries only: no profile, no series)."""
    rec_s, rec_l = d.rec_state, d.rec_lga
    st_sm, lg_sm = smooth3(r.state_pred), smooth3(r.lga_pred)
    rs_tp, rl_tp = trough_to_peak(smooth3(rec_s)), trough_to_peak(smooth3(rec_l))
    rs_cl = season_class(rs_tp)
    if "chosen" in r.by_source:  # amendment 4: the class each outer fold's chosen source gives
        ps_cl, pl_cl = r.by_source["chosen"][0], r.by_source["chosen"][1]
    else:
        ps_cl, pl_cl = season_class(trough_to_peak(st_sm)), season_class(trough_to_peak(lg_sm))
    pe_s, pe_l = peak_errors(r.state_pred, rec_s), peak_errors(r.lga_pred, rec_l)
    marked = rs_cl == "marked"
    ss, se = start_end(st_sm)
    rss, rse = start_end(smooth3(rec_s))
    ls, le = start_end(lg_sm)
    rls, rle = start_end(smooth3(rec_l))
    b_s, b_sh = best_window(st_sm)
    rb_s, rb_sh = best_window(smooth3(rec_s))
    bl_s, bl_sh = best_window(lg_sm)
    rbl_s, rbl_sh = best_window(smooth3(rec_l))
    m2m_s = month_to_month_r(st_sm, state_cases(d), d.cal)
    m2m_l = month_to_month_r(lg_sm, d.cases, d.cal)
    weak_s, weak_l = rs_tp >= WEAK_TROUGH_TO_PEAK, rl_tp >= WEAK_TROUGH_TO_PEAK

    def share(a: np.ndarray) -> float | None:
        return _r(float(a.mean()), 3) if a.size else None

    return {
        "states": {
            "profiles": len(rec_s),
            "median_shape_r": _r(float(np.nanmedian(pearson_rows(st_sm, rec_s)))),
            "peak_within_1_month": int((np.abs(pe_s) <= 1).sum()),
            "marked_states": int(marked.sum()),
            "marked_peak_within_1_month": int((np.abs(pe_s[marked]) <= 1).sum()),
            "not_weak_states": int((rs_cl != "weak").sum()),
            "not_weak_peak_within_1_month": int((np.abs(pe_s[rs_cl != "weak"]) <= 1).sum()),
            "mean_signed_peak_error": _r(float(pe_s.mean())),
            "mean_abs_peak_error": _r(float(np.abs(pe_s).mean())),
            "median_month_to_month_r": _r(float(np.nanmedian(m2m_s))),
            "mean_trough_to_peak_error": _r(float(np.abs(trough_to_peak(st_sm) - rs_tp).mean()), 3),
            "mean_signed_trough_to_peak_error": _r(float((trough_to_peak(st_sm) - rs_tp).mean()), 3),
            "recorded_weak": int(weak_s.sum()),
            "recorded_weak_flagged_weak": int((ps_cl[weak_s] == "weak").sum()),
            "class_agrees": int((ps_cl == rs_cl).sum()),
            "peak_window_coverage": share(np.abs(pe_s) <= r.state_k),
            "mean_peak_window_months": _r(float((2 * r.state_k + 1).clip(max=MONTHS).mean()), 1),
            "mean_abs_start_error": _r(float(np.abs(circular_error(ss, rss)).mean())),
            "mean_abs_end_error": _r(float(np.abs(circular_error(se, rse)).mean())),
            "mean_abs_best_4_start_error": _r(float(np.abs(circular_error(b_s, rb_s)).mean())),
            "mean_best_4_share_error": _r(float(np.abs(b_sh - rb_sh).mean()), 3),
        },
        "lgas": {
            "profiles": len(rec_l),
            "median_shape_r": _r(float(np.nanmedian(pearson_rows(lg_sm, rec_l)))),
            "peak_within_1_month": int((np.abs(pe_l) <= 1).sum()),
            "median_month_to_month_r": _r(float(np.nanmedian(m2m_l))),
            "mean_trough_to_peak_error": _r(float(np.abs(trough_to_peak(lg_sm) - rl_tp).mean()), 3),
            "recorded_weak": int(weak_l.sum()),
            "recorded_weak_flagged_weak": int((pl_cl[weak_l] == "weak").sum()),
            "peak_window_coverage": share(np.abs(pe_l) <= r.lga_k),
            "mean_peak_window_months": _r(float((2 * r.lga_k + 1).clip(max=MONTHS).mean()), 1),
            "published_at_lga_level": int((r.lga_level == "lga").sum()),
            "mean_abs_start_error": _r(float(np.abs(circular_error(ls, rls)).mean())),
            "mean_abs_end_error": _r(float(np.abs(circular_error(le, rle)).mean())),
            "mean_abs_best_4_start_error": _r(float(np.abs(circular_error(bl_s, rbl_s)).mean())),
            "mean_best_4_share_error": _r(float(np.abs(bl_sh - rbl_sh).mean()), 3),
        },
        "mean_outer_loss": _r(float(inner_loss(r.state_pred, rec_s).mean()), 4),
        "class_sources": {c: class_figures(b, rs_tp, rl_tp, pe_s, pe_l) for c, b in r.by_source.items()},
        "class_source_per_fold": r.class_source,
    }


def class_figures(b: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], rs_tp: np.ndarray, rl_tp: np.ndarray,
                  pe_s: np.ndarray, pe_l: np.ndarray) -> dict[str, dict[str, Any]]:
    """Amendment 4's outer figures of one class source: weak flags (hits and false alarms) and the
    coverage of the windows calibrated by its classes."""
    out = {}
    for lvl, cl, k, tp, pe in (("states", b[0], b[2], rs_tp, pe_s), ("lgas", b[1], b[3], rl_tp, pe_l)):
        weak = tp >= WEAK_TROUGH_TO_PEAK
        out[lvl] = {"recorded_weak": int(weak.sum()), "recorded_weak_flagged_weak": int((cl[weak] == "weak").sum()),
                    "recorded_not_weak": int((~weak).sum()),
                    "recorded_not_weak_flagged_weak": int((cl[~weak] == "weak").sum()),
                    "class_agrees": int((cl == season_class(tp)).sum()),
                    "peak_window_coverage": _r(float((np.abs(pe) <= k).mean()), 3) if len(pe) else None,
                    "mean_peak_window_months": _r(float((2 * k + 1).clip(max=MONTHS).mean()), 1) if len(k) else None}
    return out


# --- model 4 as a candidate (and model 4 pooled by latitude band) ----------------------------------

def model4_engine(series: Any, areas: Any, units: H.Units, std: H.Standardiser, dated_states: Sequence[str]
                  ) -> tuple[Callable[[frozenset[str], str, Hyper], np.ndarray], Callable[[frozenset[str]], Hyper]]:
    """(predict, choose): model 4's fit on the series of the training dated states (a left-out state's
    dated LGAs and every archetype covering any of its population dropped, as model 4's check does),
    predicting every area; pooling by great-circle distance (km) or by latitude difference (degrees)."""
    from pipeline.model.season_cv import held_out_rows

    held = {s: held_out_rows(series, areas.state, s) for s in dated_states}
    base: dict[frozenset[str], tuple[np.ndarray, H.HarmonicFit]] = {}
    chosen: dict[frozenset[str], Hyper] = {}
    design = std.design(areas.x)

    def keep_of(train: frozenset[str]) -> np.ndarray:
        keep = np.ones(len(units.theta), dtype=bool)
        for s in dated_states:
            if s not in train:
                keep &= ~held[s]
        return keep

    def fit_of(train: frozenset[str]) -> tuple[np.ndarray, H.HarmonicFit]:
        if train not in base:
            f = H.fit(units, std, keep_of(train), 1.0, 1.0)
            base[train] = (design @ f.coef, f)
        return base[train]

    def predict(train: frozenset[str], kind: str, hyper: Hyper) -> np.ndarray:
        theta, f = fit_of(train)
        if len(f.source_resid):
            if kind == "distance":
                dist = H.distances_km(areas.xy, f.source_xy)
            else:
                dist = np.abs(areas.xy[:, 1][:, None] - f.source_xy[:, 1][None, :])
            theta = theta + H.pooled_residual(dist, f.source_resid, f.source_weight, hyper[0], hyper[1])
        return H.profiles(theta)

    def choose(train: frozenset[str]) -> Hyper:
        if train not in chosen:
            chosen[train] = tuple(float(v) for v in H.choose_pooling(units, std, keep_of(train)))
        return chosen[train]

    return predict, choose


# --- inputs from the dated series (in-build only) ---------------------------------------------------

HALVES = ((2020, 2021), (2022, 2023))
MIN_MONTHS_IN_YEAR = 9


def half_profiles(dated: Any, lga_codes: Sequence[str], years: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """([L, 12] LGA profiles of one half (mean 1, NaN rows where a calendar month has no usable year),
    [L] mean monthly cases of the half) for `lga_codes` in that order."""
    import polars as pl

    d = dated.filter(pl.col("cases").is_not_null() & pl.col("year").is_between(*years))
    ym = (d.group_by("lga_code", "year").agg(pl.len().alias("n"), pl.col("cases").mean().alias("ym"))
          .filter(pl.col("n") >= MIN_MONTHS_IN_YEAR))
    r = (d.join(ym, on=["lga_code", "year"], how="inner").with_columns((pl.col("cases") / pl.col("ym")).alias("ratio"))
         .group_by("lga_code", "month").agg(pl.col("ratio").mean()))
    pos = {c: i for i, c in enumerate(lga_codes)}
    out = np.full((len(lga_codes), MONTHS), np.nan)
    for code, month, ratio in r.iter_rows():
        if code in pos:
            out[pos[code], int(month) - 1] = ratio
    means = np.full(len(lga_codes), np.nan)
    for code, m in ym.group_by("lga_code").agg(pl.col("ym").mean()).iter_rows():
        if code in pos:
            means[pos[code]] = m
    ok = np.isfinite(out).all(axis=1)
    out[ok] = out[ok] / out[ok].mean(axis=1, keepdims=True)
    out[~ok] = np.nan
    return out, means


def split_half_deviation_r(dated: Any, lga_codes: Sequence[str], lga_state: np.ndarray) -> np.ndarray:
    """[L] r between an LGA's log deviation from its state's profile in 2020-21 and in 2022-23."""
    devs = []
    for years in HALVES:
        prof, means = half_profiles(dated, lga_codes, years)
        dev = np.full(prof.shape, np.nan)
        for s in np.unique(lga_state):
            rows = (lga_state == s) & np.isfinite(prof).all(axis=1) & np.isfinite(means)
            if rows.sum() < 2:
                continue
            sp = (means[rows][:, None] * prof[rows]).sum(axis=0)
            sp = sp / sp.mean()
            with np.errstate(divide="ignore", invalid="ignore"):
                dev[rows] = np.log(prof[rows]) - np.log(sp)[None, :]
        devs.append(dev)
    return split_half_r(devs[0], devs[1])


def case_matrix(dated: Any, lga_codes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """([L, T] monthly cases, NaN where missing, [T] calendar month 0-11), months in time order."""
    import polars as pl

    d = dated.with_columns((pl.col("year") * 100 + pl.col("month")).alias("ym"))
    months = sorted(set(d["ym"].to_list()))
    wide = (pl.DataFrame({"lga_code": list(lga_codes)})
            .join(d.pivot(on="ym", index="lga_code", values="cases", sort_columns=True), on="lga_code", how="left"))
    out = wide.select([pl.col(str(m)).cast(pl.Float64) for m in months]).to_numpy().astype(float)
    return out, np.array([m % 100 - 1 for m in months])


# --- what the release publishes ---------------------------------------------------------------------

@dataclass
class Published:
    """Model 5 as released: the method the outer folds favour, its profiles and calibrated uncertainty."""

    method: str  # the published method (a candidate, or "selection" resolved to `resolved`)
    resolved: str
    hyper: Hyper
    at_grid_edge: bool
    lga_profile: np.ndarray  # [n, 12] smoothed, peak 1, unrounded: what every LGA publishes
    level: np.ndarray  # [n] "lga" | "state"
    cross: np.ndarray  # [n] bool: from the outer fold that held the LGA's state out
    state_out: np.ndarray  # [S, 12] outer-fold state profiles of the published method (smoothed, peak 1)
    lga_out: np.ndarray  # [L, 12]
    half_width: dict[str, dict[str, int]]  # level -> class -> k
    errors: dict[str, dict[str, float | None]]  # level -> mean abs start/end/best-4 errors
    summaries: dict[str, dict[str, Any]]  # method -> aim figures (outer folds)
    chosen: dict[str, list[dict[str, Any]]]  # method -> per outer fold choice
    split_half: dict[str, Any]
    publishable: list[str] = field(default_factory=list)  # methods within the peak-bias limit (amendment 2)
    # amendment 4: the class amplitude's source picked on all dated states, its inner scores, and the
    # archetype index (smoothed, peak 1) at each LGA's published level that sources (ii)-(iv) read
    class_source: str = "method"
    class_scores: dict[str, float | None] = field(default_factory=dict)
    archetype_index: np.ndarray | None = None  # [n, 12]
    # model 6: the protocol, and per level (mean recorded - predicted trough/peak, mean absolute error) of
    # the inner folds on all dated states: the class's bias correction and evidence margin for `marked`
    protocol: int = 5
    class_correction: dict[str, tuple[float, float]] = field(default_factory=dict)
    recorded_rain: dict[str, Any] | None = None  # protocol item 5's check (model 6)
    release_parameters: dict[str, Any] = field(default_factory=dict)  # model 6: each candidate's on all states

    def class_tp(self, index: np.ndarray, archetype_index: np.ndarray | None) -> float:
        """The class amplitude of one published (smoothed) index, with its archetype index at the same level."""
        ix = np.asarray(index, dtype=float)
        a = None if archetype_index is None else float(trough_to_peak(np.asarray(archetype_index, dtype=float))[0])
        return float(class_amplitude(self.class_source, float(ix.min() / ix.max()), a))


def publish(d: Data, methods: Sequence[str] = METHODS) -> Published:
    """Nested CV, the selection rule (least outer mean loss; ties: METHODS order, the selection last),
    the release fit on every dated state, cross-fitting for the dated states, calibrated windows."""
    if d.protocol >= 6 and methods is METHODS:
        methods = (*(METHODS_7 if d.protocol >= 7 else METHODS_6), *ABLATIONS_6)
    usable = [m for m in methods if _usable(d, m)]
    res = outer(d, usable)
    summaries = {m: summarise(d, r) for m, r in res.items()}
    order = [*usable, "selection"]
    # amendment 2: a systematic lag (|mean signed state peak error| > 0.5 month) is a defect, not publishable
    ok = [m for m in order if abs(summaries[m]["states"]["mean_signed_peak_error"] or 0.0) <= MAX_MEAN_SIGNED_PEAK_ERROR]
    if d.protocol >= 6:
        # model 6: what the registered rule picks on all seven states, whatever the outer figures say
        method = "selection"
        usable = [m for m in usable if m not in ABLATIONS_6]
    else:
        method = min(ok or order, key=lambda m: (summaries[m]["mean_outer_loss"], order.index(m)))
    everything = frozenset(d.dated_states)
    if method == "selection":
        tuned, resolved = select(d, everything, usable)
        t = tuned[resolved]
    else:
        resolved, t = method, tune(d, method, everything)
    prof = predict(d, resolved, everything, t.hyper)
    rclass = d.recorded_class()
    rule = level_rule(rclass, d.rec_lga_state, d.split_r, d.dated_states)
    lp, level = with_level(d, prof, rule)
    r = res[method]
    assert r.area_pred is not None and r.area_level is not None
    cross = np.isfinite(r.area_pred).all(axis=1)
    lp[cross], level[cross] = r.area_pred[cross], r.area_level[cross]
    sm = smooth3(lp)
    st_sm, lg_sm = smooth3(r.state_pred), smooth3(r.lga_pred)
    # amendment 4: the class source the inner procedure picks on all dated states; windows by its classes
    chooser = _selector(d, usable) if method == "selection" else _fixed(d, method)
    release_units = _inner_units(d, chooser, everything)
    correction: dict[str, tuple[float, float]] = {}
    scores: dict[str, float]
    if d.protocol >= 6:  # model 6: one class rule, the amplitude's bias corrected (no source to choose)
        source, scores = "bias_corrected", {}
        correction = release_units.amplitude_error()
        o_s, o_l = r.by_source["chosen"][0], r.by_source["chosen"][1]
    else:
        source, scores = release_units.source()
        if source in r.by_source:
            o_s, o_l = r.by_source[source][0], r.by_source[source][1]
        else:
            o_s, o_l = season_class(trough_to_peak(st_sm)), season_class(trough_to_peak(lg_sm))
    strict = d.protocol >= 6
    hw = {"states": half_widths(peak_errors(r.state_pred, d.rec_state), o_s, strict=strict),
          "lgas": half_widths(peak_errors(r.lga_pred, d.rec_lga), o_l, strict=strict)}
    arch_ix = None
    if d.arch_profile is not None:
        a = smooth3(at_level(d, predict(d, "archetype", frozenset()), level))
        arch_ix = a / a.max(axis=1, keepdims=True)
    errors = {lvl: {"season_start": summaries[method][lvl]["mean_abs_start_error"],
                    "season_end": summaries[method][lvl]["mean_abs_end_error"],
                    "best_4_months_start": summaries[method][lvl]["mean_abs_best_4_start_error"],
                    "best_4_months_share": summaries[method][lvl]["mean_best_4_share_error"]}
              for lvl in ("states", "lgas")}
    split = {"rule": rule, "by_state": {s: deviations_repeat(d.split_r[d.rec_lga_state == s]) for s in d.dated_states},
             "recorded_class": rclass}
    return Published(method, resolved, t.hyper, t.at_grid_edge, sm / sm.max(axis=1, keepdims=True), level, cross,
                     st_sm / st_sm.max(axis=1, keepdims=True), lg_sm / lg_sm.max(axis=1, keepdims=True), hw, errors,
                     summaries, {m: x.chosen for m, x in res.items()}, split, ok, source,
                     {c: _r(v, 4) for c, v in scores.items()}, arch_ix, d.protocol, correction,
                     recorded_rain_check(d, rain_check_method(d, resolved)) if d.protocol >= 6 else None,
                     {m: {"parameters": list(x.hyper), "at_grid_edge": x.at_grid_edge, "inner_loss": _r(x.loss, 4),
                          "inner_mean_signed_peak_error": _r(fold_bias(d, m, everything, x.hyper))}
                      for m, x in tuned.items()} if d.protocol >= 6 and method == "selection" else {})


def _usable(d: Data, m: str) -> bool:
    """A candidate whose inputs this build has."""
    return not ((m == "archetype" and d.arch_profile is None) or (m.startswith("model_4") and d.m4 is None)
                or (m in RAIN_METHODS and d.area_rain is None) or (m == "rain_onset" and d.area_onset is None))


def held_out_index(d: Data, method: str, states_left_out: Sequence[str]) -> np.ndarray:
    """[n, 12] the published index (smoothed, peak 1, unrounded) of every LGA as a fold that leaves
    `states_left_out` out would publish it: `method`'s hyperparameters tuned and the LGA detail rule
    decided on the remaining dated states only. For checks built on the season (e.g. season ratios)."""
    train = frozenset(d.dated_states) - set(states_left_out)
    methods = [m for m in (METHODS_7 if d.protocol >= 7 else METHODS_6 if d.protocol >= 6 else METHODS)
               if _usable(d, m)]
    if method == "selection":
        tuned, m = select(d, train, methods)
        hp = tuned[m].hyper
    else:
        m, hp = method, tune(d, method, train).hyper
    prof = predict(d, m, train, hp)
    lp, _ = with_level(d, prof, level_rule(d.recorded_class(), d.rec_lga_state, d.split_r, sorted(train)))
    sm = smooth3(lp)
    return sm / sm.max(axis=1, keepdims=True)


def area_fields(index: np.ndarray, level: str, half_width: dict[str, int] | None,
                errors: dict[str, float | None] | None, class_tp: float | None = None,
                marked_margin: float = 0.0) -> dict[str, Any]:
    """Model 5's additive season fields of one area from its published (smoothed) index; `class_tp`: the
    amplitude its class is read from where that is not the index's own trough/peak (amendment 4)."""
    ix = np.asarray(index, dtype=float)
    tp = float(ix.min() / ix.max())
    ctp = tp if class_tp is None else float(class_tp)
    cl = str(season_class(ctp, marked_margin))
    peaks = [int(m) + 1 for m in np.flatnonzero(ix == ix.max())]
    calibrated = half_width is not None
    k = (half_width or FALLBACK_HALF_WIDTH)[cl]
    b_start, b_share = best_window(ix[None])
    err = errors or {}
    return {
        "season_class": cl,
        "season_trough_to_peak": round(tp, 2),
        "peak_window": peak_window(peaks, k),
        "peak_window_probability": WINDOW_PROBABILITY,
        "peak_window_calibrated": calibrated,
        "season_start_error_months": err.get("season_start"),
        "season_end_error_months": err.get("season_end"),
        "best_4_months_start_month": int(b_start[0]),
        "best_4_months_share": round(float(b_share[0]), 3),
        "best_4_months_start_error_months": err.get("best_4_months_start"),
        "best_4_months_share_error": err.get("best_4_months_share"),
        "season_level": level,
        # always present (one schema): the index's own trough/peak unless the class reads another (amendment 4)
        "season_class_trough_to_peak": round(ctp, 2),
    }
