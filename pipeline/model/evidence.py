"""What each LGA's score rests on: its own survey children, an evidence level, and how sure its
place within its state is (docs/model.md, "Evidence and rank ranges").

* Evidence. The children of the LGA's own survey clusters, as a band (CHILDREN_BANDS). The LGA's offset from its state (pipeline.model.small_area) is a Fay-Herriot estimate:
  its own survey children enter with the weight w = sigma2 / (sigma2 + v) (v their sampling
  variance), the rest is borrowed from covariates, neighbours and the state. `evidence_levels`
  names w with the fixed EVIDENCE_THRESHOLDS.
* Rank ranges. The score's uncertainty has a part shared by every LGA of a state (the state's
  survey baseline and the season error, which move all its LGAs together) and a part of the LGA's
  own (the variance of its offset). `rank_ranges` draws both, seeded, ranks the LGAs of each state
  in every draw, and gives the RANGE_LEVEL (80 %) range of each LGA's rank. Two LGAs whose own
  parts overlap get overlapping rank ranges: the order between them is noise.

Pure numpy: arrays in, arrays out; no loop over LGAs or months.
"""

from __future__ import annotations

import numpy as np

# Evidence levels by the weight of the LGA's own survey children in its offset (0..1):
# "direct": its own children carry at least half of it; "some": they enter, with less;
# "borrowed": none of its own (covariates, neighbours and its state only).
EVIDENCE_THRESHOLDS: tuple[tuple[float, str], ...] = ((0.5, "direct"), (0.0, "some"))
BORROWED = "borrowed"
EVIDENCE_LEVELS = ("direct", "some", BORROWED)
# Children of the LGA's own survey clusters, published only as a band: the exact count per LGA stays inside
# the pipeline (malaria SOURCES.md §8: the NDHS 2018 LGA file is a model input, not for publication per LGA;
# the release audit checks no per-LGA run of it is published). Lower bounds, highest first.
CHILDREN_BANDS: tuple[tuple[int, str], ...] = ((50, "50+"), (25, "25-49"), (10, "10-24"), (1, "1-9"), (0, "none"))
RANGE_LEVEL = 0.8
RANK_DRAWS = 200
RANK_SEED = 20260531
# A state's rank ranges are published only where they beat a random ranking (docs/range-protocol.md §2): the
# chance that a uniformly random ranking falls inside them, averaged over the state's LGAs and the release's
# months, must be at least RANK_MARGIN below their coverage (the nominal RANGE_LEVEL: no out-of-sample coverage
# of LGA ranks exists). Registered before any figure was computed.
RANK_MARGIN = 0.25
RANK_RANDOM_INCLUSION_MAX = RANGE_LEVEL - RANK_MARGIN
RANK_RANGE_WITHHELD = "survey_cannot_rank_lgas_of_state"


def own_weight(offset_var: np.ndarray, sigma2: float) -> np.ndarray:
    """w = sigma2 / (sigma2 + v) recovered from the offset's variance sigma2 v / (sigma2 + v)
    (= sigma2 (1 - w)); 0 for an LGA without survey children (variance sigma2)."""
    if sigma2 <= 0:
        return np.zeros(np.shape(offset_var))
    return np.clip(1.0 - np.asarray(offset_var, dtype=float) / sigma2, 0.0, 1.0)


def evidence_levels(weight: np.ndarray) -> np.ndarray:
    """Level names for own-data weights (EVIDENCE_THRESHOLDS, strictly above the lower bound of "some")."""
    w = np.asarray(weight, dtype=float)
    out = np.full(w.shape, BORROWED, dtype=object)
    out[w > EVIDENCE_THRESHOLDS[1][0]] = EVIDENCE_THRESHOLDS[1][1]
    out[w >= EVIDENCE_THRESHOLDS[0][0]] = EVIDENCE_THRESHOLDS[0][1]
    return out


def children_bands(children: np.ndarray) -> np.ndarray:
    """Band names (CHILDREN_BANDS) for counts of children; None where the count is unknown (negative)."""
    n = np.asarray(children)
    out = np.full(n.shape, None, dtype=object)
    for bound, name in reversed(CHILDREN_BANDS):
        out[n >= bound] = name
    return out


def ranks(score: np.ndarray, group: np.ndarray) -> np.ndarray:
    """[n, T] rank of each row within its group per column: 1 = highest score; ties by row order
    (rows must be in the order the documents break ties in)."""
    score = np.asarray(score, dtype=float)
    group = np.asarray(group)
    out = np.empty(score.shape, dtype=np.int64)
    for g in np.unique(group):
        rows = np.flatnonzero(group == g)
        order = np.argsort(-score[rows], axis=0, kind="stable")
        r = np.empty_like(order)
        np.put_along_axis(r, order, np.arange(1, rows.size + 1)[:, None], axis=0)
        out[rows] = r
    return out


def rank_ranges(centre: np.ndarray, sd_shared: np.ndarray, sd_own: np.ndarray, factor: np.ndarray,
                group: np.ndarray, draws: int = RANK_DRAWS, seed: int = RANK_SEED,
                level: float = RANGE_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """[n, T] lower and upper end of the `level` range of each row's rank within its group.

    centre: [n, T] logit of the level before the month factor; sd_shared: [n, T] logit sd shared by
    the rows of a group (one normal draw per group and draw); sd_own: [n] logit sd of the row's own
    part (one draw per row and draw, the same in every column: an LGA's offset does not change
    from month to month); factor: [n, T] the multiplier after the logit (season x month term).
    Drawn per group, [draws, rows, T] at a time."""
    centre, sd_shared, factor = (np.asarray(a, dtype=float) for a in (centre, sd_shared, factor))
    sd_own = np.asarray(sd_own, dtype=float)
    group = np.asarray(group)
    rng = np.random.default_rng(seed)
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
    low = np.empty(centre.shape, dtype=np.int64)
    high = np.empty(centre.shape, dtype=np.int64)
    for g in np.unique(group):  # one vectorised block per state (at most a few dozen LGAs)
        rows = np.flatnonzero(group == g)
        shared = rng.standard_normal((draws, 1, 1))
        own = rng.standard_normal((draws, rows.size, 1))
        x = centre[rows][None] + sd_shared[rows][None] * shared + sd_own[rows][None, :, None] * own
        s = 1.0 / (1.0 + np.exp(-x)) * factor[rows][None]
        order = np.argsort(-s, axis=1)
        r = np.empty(order.shape, dtype=np.int16)
        np.put_along_axis(r, order, np.arange(1, rows.size + 1, dtype=np.int16)[None, :, None], axis=1)
        r.sort(axis=0)  # the draws of each (row, column) in order: the range is read off by position
        low[rows] = r[int(np.floor(lo_q * (draws - 1)))]
        high[rows] = r[int(np.ceil(hi_q * (draws - 1)))]
    return low, high


def contain(rank: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The published rank (from the rounded, tie-broken scores) always lies in its range: a draw
    quantile can miss it by one where scores tie, so each end is widened to it."""
    return np.minimum(low, rank), np.maximum(high, rank)


def random_inclusion(low: np.ndarray, high: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """[n_groups] chance that a uniformly random ranking of a group's rows puts a row inside its range
    [low, high] ([n, T]), exactly (high - low + 1) / n for a group of n rows, averaged over the group's rows
    and the columns; NaN for a group without rows."""
    group = np.asarray(group)
    n = np.bincount(group, minlength=n_groups).astype(float)
    width = (np.asarray(high, dtype=float) - np.asarray(low, dtype=float) + 1.0).mean(axis=1)
    per_row = width / n[group]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(group, weights=per_row, minlength=n_groups) / n


def rank_ranges_published(inclusion: np.ndarray) -> np.ndarray:
    """Which groups' ranges beat a random ranking by the registered margin (NaN: never)."""
    p = np.asarray(inclusion, dtype=float)
    return np.isfinite(p) & (p <= RANK_RANDOM_INCLUSION_MAX + 1e-12)
