"""The small-area LGA model (pipeline.model.small_area) on synthetic grids where the truth is
known: it recovers a spatial effect and a covariate effect, and its leave-one-out prediction
of an LGA never uses that LGA's own value."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from pipeline.model import small_area

SIDE = 18


def _grid(seed: int, spatial: float, urban_effect: float = 0.0, n_children: int = 40):
    """SIDE x SIDE square LGAs in four states (quadrants); the true logit is the state level,
    plus `spatial` x a smooth field, plus the urban effect, plus a little independent noise."""
    rng = np.random.default_rng(seed)
    i, j = np.divmod(np.arange(SIDE * SIDE), SIDE)
    state = (i >= SIDE // 2) * 2 + (j >= SIDE // 2)
    level = np.array([-1.2, -0.6, -0.9, -0.3])[state]
    field = np.sin(i / 3.0) + np.cos(j / 2.5)
    urban = (rng.random(i.size) < 0.2).astype(float)
    truth = level + spatial * field + urban_effect * urban + rng.normal(0, 0.1, i.size)
    n = rng.integers(n_children // 2, n_children * 2, i.size).astype(float)
    p = rng.binomial(n.astype(int), 1 / (1 + np.exp(-truth))) / n
    boxes = [shapely.box(b, a, b + 1, a + 1) for a, b in zip(i, j, strict=True)]
    adj = small_area.adjacency(boxes)
    density = np.exp(rng.normal(5, 1, i.size))
    x = np.column_stack([urban, np.log(density)])
    return p, n, x, state, adj, truth


def test_adjacency_of_touching_outlines():
    boxes = [shapely.box(0, 0, 1, 1), shapely.box(1, 0, 2, 1), shapely.box(5, 5, 6, 6), shapely.box(0, 1, 1, 2)]
    adj = small_area.adjacency(boxes)
    assert adj[0, 1] and adj[1, 0] and adj[0, 3] and adj[1, 3]  # edges and a shared corner
    assert not adj[2].any() and not adj.diagonal().any()


def test_recovers_a_spatial_effect():
    p, n, x, state, adj, _ = _grid(1, spatial=0.8)
    figs = small_area.validation_figures(p, n, x, state, adj)
    assert figs["deviance_small_area"] < figs["deviance_small_area_no_neighbours"] - 0.01
    # without a spatial field the neighbour term has nothing to find: no real gain
    p0, n0, x0, s0, a0, _ = _grid(1, spatial=0.0)
    flat = small_area.validation_figures(p0, n0, x0, s0, a0)
    assert flat["deviance_small_area"] > flat["deviance_small_area_no_neighbours"] - 0.003
    y, v = small_area.logit_obs(p, n)
    f = small_area.fit(y, v, n, x, state, adj, np.ones((1, p.size), dtype=bool))
    assert f.gamma[0, 0] > 0.3  # neighbours' residuals predict an LGA's


def test_recovers_a_covariate_effect():
    p, n, x, state, adj, _ = _grid(4, spatial=0.0, urban_effect=-1.0, n_children=80)
    y, v = small_area.logit_obs(p, n)
    f = small_area.fit(y, v, n, x, state, adj, np.ones((1, p.size), dtype=bool), use_neighbours=False)
    assert f.beta[0, 0] == pytest.approx(-1.0, abs=0.2)
    assert abs(f.beta[0, 1]) < 0.1  # density has no effect in this truth


def test_leave_one_out_never_sees_the_held_out_value():
    p, n, x, state, adj, _ = _grid(2, spatial=0.8)
    y, v = small_area.logit_obs(p, n)
    base = small_area.leave_one_out(y, v, n, x, state, adj)
    k = 100
    p2 = p.copy()
    p2[k] = 1.0 - p[k]  # the held-out LGA's own value turned upside down
    y2, v2 = small_area.logit_obs(p2, n)
    moved = small_area.leave_one_out(y2, v2, n, x, state, adj)
    assert moved[k] == pytest.approx(base[k], abs=1e-9)
    # the other LGAs' folds did use it: their predictions move
    assert np.abs(moved - base).max() > 1e-4


def test_offsets_for_lgas_without_data_come_from_covariates_and_neighbours():
    p, n, x, state, adj, truth = _grid(3, spatial=0.8)
    rng = np.random.default_rng(0)
    obs_idx = np.sort(rng.choice(p.size, int(p.size * 0.8), replace=False))
    off = small_area.lga_offsets(p[obs_idx], n[obs_idx], obs_idx, x, state, adj)
    missing = np.setdiff1d(np.arange(p.size), obs_idx)
    assert off.observed.sum() == obs_idx.size and not off.observed[missing].any()
    # unobserved LGAs: the full between-LGA variance; observed ones less (their own data)
    assert np.all(off.var[missing] == pytest.approx(off.sigma2))
    assert np.all(off.var[obs_idx] < off.sigma2)
    # the offsets of unobserved LGAs follow the truth's within-state pattern
    within = truth - np.array([truth[state == s].mean() for s in range(4)])[state]
    assert np.corrcoef(off.delta[missing], within[missing])[0, 1] > 0.5


def test_shift_to_mean_keeps_each_states_weighted_mean():
    rng = np.random.default_rng(7)
    state_idx = np.array([0, 0, 0, 1, 1])
    delta = rng.normal(0, 1, 5)
    w = rng.random(5) + 0.1
    target = np.array([[0.3, 0.05, 0.9], [0.5, 0.2, 0.01]])
    lg = small_area.shift_to_mean(np.log(target / (1 - target)), delta, w, state_idx, target)
    pr = 1 / (1 + np.exp(-lg))
    for s in (0, 1):
        m = state_idx == s
        assert np.allclose((w[m, None] * pr[m]).sum(0) / w[m].sum(), target[s], atol=1e-8)
    # the order of LGAs within a state is that of their offsets
    assert np.argsort(lg[:3, 0]).tolist() == np.argsort(delta[:3]).tolist()
