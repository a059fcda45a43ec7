"""LGAs that differ for a reason: an area-level (Fay-Herriot) model of LGA positivity on the
logit scale with covariates and a neighbour term, fitted to the NDHS 2018 LGA microscopy
(docs/model.md, "LGAs").

For LGA j of state s, with y_j = logit of its (lightly smoothed) observed positivity and
v_j its sampling variance (binomial x the survey's design effect):

    y_j = level_s + beta . (x_j - xbar_s) + gamma * nbr_j + u_j + e_j,   u_j ~ N(0, sigma2)

x = (urban, log population density), centred on the state's children-weighted mean so that
the state level stays the state's; nbr_j = mean of the shrunk residuals of j's observed
neighbours (LGAs whose outlines touch), the neighbour-mean form of a conditional
autoregressive term. beta by weighted least squares (weights 1/(v + sigma2)), sigma2 by the
method of moments, gamma by weighted least squares of the residual on nbr.

Validation is leave-one-LGA-out with EVERY quantity refitted without the held-out LGA: state
levels, centring means, beta, sigma2, the neighbours' residuals and gamma. All folds are
computed at once as [fold, LGA] matrices (a few hundred LGAs: ~0.5 M entries).

Pure numpy: arrays in, arrays out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# Positivity is smoothed by (positives + 0.5) / (children + 1) before the logit, so LGAs
# with 0 of 3 or 5 of 5 have a finite logit and a finite sampling variance.
HALF = 0.5
RIDGE = 1e-6


def adjacency(geometries: Any, tolerance: float = 1e-3) -> np.ndarray:
    """[n, n] bool: outlines within `tolerance` degrees of each other (touching, after the
    outlines were simplified separately), no self-neighbours. One STRtree query for all."""
    import shapely

    geoms = np.asarray(geometries, dtype=object)
    tree = shapely.STRtree(geoms)
    a, b = tree.query(geoms, predicate="dwithin", distance=tolerance)
    adj = np.zeros((geoms.size, geoms.size), dtype=bool)
    adj[a, b] = True
    adj[b, a] = True
    np.fill_diagonal(adj, False)
    return adj


def logit_obs(p: np.ndarray, n: np.ndarray, deff: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Smoothed logit of an observed share and its sampling variance."""
    n = np.asarray(n, dtype=float)
    ps = (np.asarray(p) * n + HALF) / (n + 2 * HALF)
    return np.log(ps / (1 - ps)), deff / ((n + 2 * HALF) * ps * (1 - ps))


@dataclass(frozen=True)
class Fit:
    """One fit per row (fold); the published fit is the single row with nothing held out."""

    beta: np.ndarray  # [F, k]
    sigma2: np.ndarray  # [F]
    gamma: np.ndarray  # [F]
    level: np.ndarray  # [F, n] logit level of each LGA's state, from the LGAs kept in the fold
    xbar: np.ndarray  # [F, n, k] the state centring means
    resid: np.ndarray  # [F, n] shrunk residuals against the LGA's own state level (0 where not kept)


def _state_sums(values: np.ndarray, keep: np.ndarray, state: np.ndarray, n_states: int) -> np.ndarray:
    """[F, n_states] sums of values[F, n] over kept LGAs of each state (matrix product)."""
    onehot = np.zeros((state.size, n_states))
    onehot[np.arange(state.size), state] = 1.0
    return (values * keep) @ onehot


def fit(
    y: np.ndarray, v: np.ndarray, n: np.ndarray, x: np.ndarray, state: np.ndarray, adj: np.ndarray, keep: np.ndarray,
    use_neighbours: bool = True,
) -> Fit:
    """Fit the model once per row of `keep` ([F, n] bool: the LGAs each fit may use).

    y, v, n: [n] logit, sampling variance, children; x: [n, k] covariates; state: [n] int;
    adj: [n, n] neighbours among these n LGAs.
    """
    keep = np.asarray(keep, dtype=float)
    n_states = int(state.max()) + 1
    tot_n = _state_sums(np.broadcast_to(n, keep.shape), keep, state, n_states)
    p_obs = 1 / (1 + np.exp(-y))
    tot_np = _state_sums(np.broadcast_to(n * p_obs, keep.shape), keep, state, n_states)
    lvl_p = np.clip(tot_np / np.where(tot_n > 0, tot_n, 1), 0.005, 0.995)
    level = np.log(lvl_p / (1 - lvl_p))[:, state]  # [F, n]
    k = x.shape[1]
    xbar = np.stack(
        [_state_sums(np.broadcast_to(n * x[:, c], keep.shape), keep, state, n_states)
         / np.where(tot_n > 0, tot_n, 1) for c in range(k)], axis=-1,
    )[:, state, :]  # [F, n, k]
    xc = x[None, :, :] - xbar
    e = y[None, :] - level
    sigma2 = np.full(keep.shape[0], 0.1)
    beta = np.zeros((keep.shape[0], k))
    for _ in range(3):  # WLS for beta given sigma2, then sigma2 by moments: a few rounds converge
        w = keep / (v[None, :] + sigma2[:, None])
        wx = w[..., None] * xc
        xtwx = np.matmul(wx.transpose(0, 2, 1), xc) + RIDGE * np.eye(k)
        xtwe = (wx * e[..., None]).sum(axis=1)
        beta = np.linalg.solve(xtwx, xtwe[..., None])[..., 0]
        r = e - (xc * beta[:, None, :]).sum(axis=-1)
        m = keep.sum(axis=1)
        sigma2 = np.maximum(((r**2 - v[None, :]) * keep).sum(axis=1) / np.maximum(m - k, 1), 1e-4)
    shrunk = r * sigma2[:, None] / (sigma2[:, None] + v[None, :]) * keep
    gamma = np.zeros(keep.shape[0])
    if use_neighbours:
        nbr = neighbour_mean(shrunk, keep, adj)
        has = keep * (adj.astype(float) @ keep.T).T.clip(0, 1)  # kept LGAs with a kept neighbour
        w = has / (v[None, :] + sigma2[:, None])
        gamma = (w * r * nbr).sum(axis=1) / np.maximum((w * nbr**2).sum(axis=1), 1e-12)
    return Fit(beta, sigma2, gamma, level, xbar, shrunk)


def neighbour_mean(resid: np.ndarray, keep: np.ndarray, adj: np.ndarray) -> np.ndarray:
    """[F, n]: mean of the kept neighbours' residuals (0 where an LGA has none)."""
    a = adj.astype(float)
    num = resid @ a.T
    den = keep @ a.T
    return np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)


def neighbour_count(keep: np.ndarray, adj: np.ndarray) -> np.ndarray:
    return np.asarray(keep, dtype=float) @ adj.astype(float).T


def predict(f: Fit, x: np.ndarray, keep: np.ndarray, adj: np.ndarray) -> np.ndarray:
    """[F, n] logit predictions from covariates, state level and neighbours only (no own value)."""
    xc = x[None, :, :] - f.xbar
    nbr = neighbour_mean(f.resid, np.asarray(keep, dtype=float), adj)
    return f.level + (xc * f.beta[:, None, :]).sum(axis=-1) + f.gamma[:, None] * nbr


def leave_one_out(
    y: np.ndarray, v: np.ndarray, n: np.ndarray, x: np.ndarray, state: np.ndarray, adj: np.ndarray,
    use_neighbours: bool = True,
) -> np.ndarray:
    """[n] logit prediction of each LGA from a fit on all the others."""
    m = y.size
    keep = ~np.eye(m, dtype=bool)
    f = fit(y, v, n, x, state, adj, keep, use_neighbours)
    return np.diag(predict(f, x, keep, adj))


def binomial_deviance(p: np.ndarray, q: np.ndarray, n: np.ndarray) -> float:
    """n-weighted binomial deviance of observed shares p against predictions q, per child."""
    q = np.clip(q, 1e-4, 1 - 1e-4)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(p > 0, p * np.log(p / q), 0.0)
        b = np.where(p < 1, (1 - p) * np.log((1 - p) / (1 - q)), 0.0)
    return float(2 * (n * (a + b)).sum() / n.sum())


def validation_figures(p: np.ndarray, n: np.ndarray, x: np.ndarray, state: np.ndarray, adj: np.ndarray,
                       deff: float = 1.0) -> dict[str, Any]:
    """Leave-one-LGA-out deviance of the small-area model, with and without the neighbour term."""
    y, v = logit_obs(p, n, deff)
    out: dict[str, Any] = {}
    for name, nb in (("small_area", True), ("small_area_no_neighbours", False)):
        pred = 1 / (1 + np.exp(-leave_one_out(y, v, n, x, state, adj, nb)))
        out[f"deviance_{name}"] = round(binomial_deviance(p, pred, n), 4)
    return out
