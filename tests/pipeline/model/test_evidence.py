"""Evidence behind each LGA score and the 80 % rank range within its state (pipeline.model.evidence)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pipeline.datasets import risk
from pipeline.model import evidence, small_area

# --- evidence counts from a synthetic fixture ----------------------------------------------------------


def _fixture_md(with_file: bool = True) -> SimpleNamespace:
    """Six LGAs of two states; the LGA file has children for four of them (one LGA twice: two rows of
    clusters must add up), and a small-area fit gives their offsets."""
    codes = ["NG001001", "NG001002", "NG001003", "NG002001", "NG002002", "NG002003"]
    lp = pl.DataFrame({"lga_code": ["NG001001", "NG001002", "NG002001", "NG002001", "NG002003"],
                       "children": [40, 3, 10, 5, 1], "positivity": [0.3, 0.0, 0.5, 0.4, 1.0]})
    n = np.zeros(len(codes))
    np.add.at(n, [codes.index(c) for c in lp["lga_code"]], lp["children"].to_numpy())
    obs = np.flatnonzero(n > 0)
    sigma2 = 0.3
    v = 1.0 / ((n[obs] + 1) * 0.2)  # a sampling variance that falls with the children
    var = np.full(len(codes), sigma2)
    var[obs] = sigma2 * v / (sigma2 + v)
    off = small_area.Offsets(np.zeros(len(codes)), var, n > 0, np.zeros(2), np.zeros(2), sigma2)
    return SimpleNamespace(lga_codes=codes, lga_positivity=lp if with_file else None,
                           lga_offsets=off if with_file else None), n, sigma2, v, obs


def test_evidence_counts_the_children_of_each_lga_and_names_the_weight() -> None:
    md, n, sigma2, v, obs = _fixture_md()
    ev = risk.lga_evidence(md)  # type: ignore[arg-type]
    assert ev["children_2018"].tolist() == [40, 3, 0, 15, 0, 1]
    w = np.zeros(len(n))
    w[obs] = sigma2 / (sigma2 + v)
    np.testing.assert_allclose(ev["weight"], w)
    # weight >= 0.5: direct; above 0: some; 0 (no children of its own): borrowed
    expected = np.where(w >= 0.5, "direct", np.where(w > 0, "some", "borrowed"))
    assert ev["level"].tolist() == expected.tolist()
    assert {"direct", "some", "borrowed"} == set(ev["level"].tolist())  # the fixture reaches every level


def test_without_the_lga_file_every_lga_is_borrowed_and_its_count_unknown() -> None:
    md, *_ = _fixture_md(with_file=False)
    ev = risk.lga_evidence(md)  # type: ignore[arg-type]
    assert (ev["children_2018"] == -1).all() and (ev["weight"] == 0).all()
    assert set(ev["level"].tolist()) == {"borrowed"}


def test_children_are_published_only_as_bands() -> None:
    assert evidence.children_bands(np.array([-1, 0, 1, 9, 10, 24, 25, 49, 50, 108])).tolist() == [
        None, "none", "1-9", "1-9", "10-24", "10-24", "25-49", "25-49", "50+", "50+"]


def test_evidence_levels_at_the_thresholds() -> None:
    assert evidence.evidence_levels(np.array([0.0, 1e-9, 0.4999, 0.5, 1.0])).tolist() == [
        "borrowed", "some", "some", "direct", "direct"]


# --- rank ranges from draws: properties ----------------------------------------------------------------


@st.composite
def states(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 12))
    t = draw(st.integers(1, 4))
    group = np.sort(draw(arrays(np.int64, n, elements=st.integers(0, 2))))
    centre = draw(arrays(np.float64, (n, t), elements=st.floats(-4, 2)))
    shared = draw(arrays(np.float64, (n, t), elements=st.floats(0, 1)))
    own = draw(arrays(np.float64, n, elements=st.floats(0, 1.5)))
    factor = draw(arrays(np.float64, (n, t), elements=st.floats(0.3, 2.0)))
    return centre, shared, own, factor, group


@settings(max_examples=60, deadline=None)
@given(states())
def test_published_rank_lies_inside_its_range_within_one_to_n(case: tuple) -> None:
    centre, shared, own, factor, group = case
    low, high = evidence.rank_ranges(centre, shared, own, factor, group, draws=60, seed=1)
    score = 1 / (1 + np.exp(-centre)) * factor
    rank = evidence.ranks(score, group)
    lo, hi = evidence.contain(rank, low, high)
    size = np.bincount(group)[group][:, None]
    assert (lo >= 1).all() and (lo <= rank).all() and (rank <= hi).all() and (hi <= size).all()
    # ranks within a group are a permutation of 1..n in every column
    for g in np.unique(group):
        rows = group == g
        assert (np.sort(rank[rows], axis=0) == np.arange(1, rows.sum() + 1)[:, None]).all()


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 15), st.floats(0.05, 0.6))
def test_overlapping_draws_give_wider_rank_ranges(n: int, gap: float) -> None:
    """LGAs spaced `gap` apart on the logit scale: with little own uncertainty each keeps its place; with
    an own sd several times the gap their draws overlap and the ranges widen."""
    centre = (np.arange(n)[::-1] * gap - 1.0)[:, None]
    group = np.zeros(n, dtype=np.int64)
    factor = np.ones((n, 1))
    shared = np.full((n, 1), 0.3)
    narrow = evidence.rank_ranges(centre, shared, np.full(n, gap / 50), factor, group, draws=100)
    wide = evidence.rank_ranges(centre, shared, np.full(n, gap * 4), factor, group, draws=100)
    width_narrow = (narrow[1] - narrow[0]).mean()
    width_wide = (wide[1] - wide[0]).mean()
    assert width_narrow == 0  # well separated: the rank is certain (a shared move changes no order)
    assert width_wide > width_narrow and width_wide >= 2


@settings(max_examples=40, deadline=None)
@given(states(), st.data())
def test_a_columns_ranges_are_the_same_whatever_columns_are_drawn_with(case: tuple, data: st.DataObject) -> None:
    """What lets a build keep the ranges of the months a new month leaves alone (pipeline.datasets.risk,
    cache.columns): the ranges of any subset of the columns are those columns of the ranges of all."""
    centre, shared, own, factor, group = case
    cols = data.draw(st.lists(st.integers(0, centre.shape[1] - 1), min_size=1, unique=True))
    low, high = evidence.rank_ranges(centre, shared, own, factor, group, draws=60, seed=3)
    sub_low, sub_high = evidence.rank_ranges(centre[:, cols], shared[:, cols], own, factor[:, cols], group,
                                             draws=60, seed=3)
    assert (sub_low == low[:, cols]).all() and (sub_high == high[:, cols]).all()


def test_rank_ranges_are_seeded() -> None:
    rng = np.random.default_rng(5)
    centre, shared = rng.normal(size=(8, 3)), np.full((8, 3), 0.2)
    own, factor, group = np.full(8, 0.4), np.ones((8, 3)), np.repeat([0, 1], 4)
    a = evidence.rank_ranges(centre, shared, own, factor, group)
    b = evidence.rank_ranges(centre, shared, own, factor, group)
    assert all((x == y).all() for x, y in zip(a, b, strict=True))


# --- rank ranges against a random ranking (docs/range-protocol.md §2) ----------------------------------


@settings(max_examples=60, deadline=None)
@given(states())
def test_random_inclusion_is_the_exact_chance_a_random_ranking_falls_inside(case: tuple) -> None:
    """(hi - lo + 1) / n per LGA, averaged over the state's LGAs and months: checked against counting, for
    every LGA, how many of the n equally likely ranks fall inside its range."""
    centre, shared, own, factor, group = case
    low, high = evidence.rank_ranges(centre, shared, own, factor, group, draws=40, seed=2)
    n_groups = int(group.max()) + 1
    p = evidence.random_inclusion(low, high, group, n_groups)
    for g in range(n_groups):
        rows = np.flatnonzero(group == g)
        if rows.size == 0:
            assert np.isnan(p[g])
            continue
        ranks = np.arange(1, rows.size + 1)[None, None, :]
        inside = (ranks >= low[rows][..., None]) & (ranks <= high[rows][..., None])
        assert p[g] == pytest.approx(inside.mean())
    assert ((p[np.isfinite(p)] > 0) & (p[np.isfinite(p)] <= 1)).all()


def test_ranges_are_published_only_where_they_beat_a_random_ranking_by_the_margin() -> None:
    # state 0: 10 LGAs each pinned to its own rank (inclusion 0.1); state 1: every range the whole state (1.0);
    # state 2: ranges of width 5 of 10 (0.5, inside the margin); state 3: width 6 of 10 (0.6, outside)
    group = np.repeat(np.arange(4), 10)
    lo = np.concatenate([np.arange(1, 11), np.ones(10), np.ones(10), np.ones(10)])[:, None].astype(int)
    hi = np.concatenate([np.arange(1, 11), np.full(10, 10), np.full(10, 5), np.full(10, 6)])[:, None].astype(int)
    p = evidence.random_inclusion(lo, hi, group, 4)
    np.testing.assert_allclose(p, [0.1, 1.0, 0.5, 0.6])
    assert evidence.rank_ranges_published(p).tolist() == [True, False, True, False]
    assert pytest.approx(evidence.RANGE_LEVEL - evidence.RANK_MARGIN) == evidence.RANK_RANDOM_INCLUSION_MAX
    # a state with a single LGA can never be ranked
    assert not evidence.rank_ranges_published(evidence.random_inclusion(np.ones((1, 2), int), np.ones((1, 2), int),
                                                                        np.zeros(1, int), 1))[0]
