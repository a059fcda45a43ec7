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
# Fewer LGAs with survey data than this and the model is not fitted (the urban split is used).
MIN_LGAS = 30
RIDGE = 1e-6
FH_ITERATIONS = 12
SIGMA2_MIN = 1e-3


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
    gamma: np.ndarray  # [F, 2] coefficients of the two neighbour terms (spatial_terms)
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
    beta, sigma2, r = _wls(xc, e, v, keep)
    shrunk = r * sigma2[:, None] / (sigma2[:, None] + v[None, :]) * keep
    gamma = np.zeros((keep.shape[0], 2))
    if use_neighbours:
        # second pass: covariates and the two neighbour terms together
        sp = spatial_terms(level, shrunk, keep, adj)
        coef, sigma2, _ = _wls(np.concatenate([xc, sp], axis=-1), e, v, keep)
        beta, gamma = coef[:, :k], coef[:, k:]
    return Fit(beta, sigma2, gamma, level, xbar, shrunk)


def _wls(z: np.ndarray, e: np.ndarray, v: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per fold: coefficients of e on z ([F, n, k]) by weighted least squares with weights
    1/(v + sigma2), alternating with sigma2 from the Fay-Herriot moment equation."""
    k = z.shape[-1]
    sigma2 = np.full(keep.shape[0], 0.1)
    coef = np.zeros((keep.shape[0], k))
    r = e
    m = keep.sum(axis=1)
    for _ in range(FH_ITERATIONS):
        w = keep / (v[None, :] + sigma2[:, None])
        wz = w[..., None] * z
        coef = np.linalg.solve(np.matmul(wz.transpose(0, 2, 1), z) + RIDGE * np.eye(k), (wz * e[..., None]).sum(axis=1)[..., None])[..., 0]
        r = e - (z * coef[:, None, :]).sum(axis=-1)
        # Fay-Herriot (1979) moment equation sum r^2 / (v + sigma2) = m - k, one fixed-point
        # step per round: precise LGAs count more than the 1-child ones
        sigma2 = np.maximum(sigma2 + ((w * r**2).sum(axis=1) - (m - k)) / w.sum(axis=1), SIGMA2_MIN)
    return coef, sigma2, r


def spatial_terms(level: np.ndarray, shrunk: np.ndarray, keep: np.ndarray, adj: np.ndarray) -> np.ndarray:
    """[F, n, 2]: the mean shrunk residual of an LGA's kept neighbours, and how much higher
    their states' levels are than its own (0 for both where it has no kept neighbour)."""
    count = neighbour_count(keep, adj)
    has = count > 0
    nbr = neighbour_mean(shrunk, keep, adj, count)
    ldiff = np.where(has, neighbour_mean(level * keep, keep, adj, count) - level, 0.0)
    return np.stack([nbr, ldiff], axis=-1)


def _neighbour_sum(values: np.ndarray, adj: np.ndarray) -> np.ndarray:
    """[F, n]: sum of values[F, n] over each LGA's neighbours, from the edge list (a few
    neighbours each: far cheaper than a dense [n, n] product)."""
    a, b = np.nonzero(adj)
    out = np.zeros(values.shape)
    if a.size == 0:
        return out
    nodes, starts = np.unique(a, return_index=True)  # np.nonzero returns rows in order
    vt = np.ascontiguousarray(values.T)  # [n, F]: gather and reduce whole rows
    out[:, nodes] = np.add.reduceat(vt[b], starts, axis=0).T
    return out


def neighbour_count(keep: np.ndarray, adj: np.ndarray) -> np.ndarray:
    return _neighbour_sum(np.asarray(keep, dtype=float), adj)


def neighbour_mean(resid: np.ndarray, keep: np.ndarray, adj: np.ndarray, count: np.ndarray | None = None) -> np.ndarray:
    """[F, n]: mean of the kept neighbours' values (0 where an LGA has none)."""
    num = _neighbour_sum(resid * keep, adj)
    den = neighbour_count(keep, adj) if count is None else count
    return np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)


def predict(f: Fit, x: np.ndarray, keep: np.ndarray, adj: np.ndarray) -> np.ndarray:
    """[F, n] logit predictions from covariates, state level and neighbours only (no own value)."""
    xc = x[None, :, :] - f.xbar
    sp = spatial_terms(f.level, f.resid, np.asarray(keep, dtype=float), adj)
    return f.level + (xc * f.beta[:, None, :]).sum(axis=-1) + (sp * f.gamma[:, None, :]).sum(axis=-1)


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


# --- the published LGA offsets ---------------------------------------------------------------


@dataclass(frozen=True)
class Offsets:
    """Each LGA's logit offset from its state, and the variance of that offset."""

    delta: np.ndarray  # [n_all]
    var: np.ndarray  # [n_all]
    observed: np.ndarray  # [n_all] bool: the LGA has survey data (its own data enter, shrunk)
    beta: np.ndarray  # covariate coefficients
    gamma: np.ndarray  # neighbour-term coefficients
    sigma2: float


def lga_offsets(
    p: np.ndarray, n: np.ndarray, obs_idx: np.ndarray, x_all: np.ndarray, state_all: np.ndarray, adj_all: np.ndarray,
) -> Offsets:
    """Fit on the observed LGAs (rows `obs_idx` of the full list) and give every LGA its offset.

    For an LGA with survey data: covariates + neighbour terms + its own residual shrunk by
    sigma2 / (sigma2 + v) (the Fay-Herriot estimate); without: covariates and neighbours
    only. Offsets are relative to the LGA's state level in the same survey, so only
    differences within a state are carried over to the published baseline.
    """
    n_all = x_all.shape[0]
    y, v = logit_obs(p, n)
    x, st = x_all[obs_idx], state_all[obs_idx]
    adj = adj_all[np.ix_(obs_idx, obs_idx)]
    keep = np.ones((1, obs_idx.size), dtype=bool)
    f = fit(y, v, n, x, st, adj, keep)
    sigma2 = float(f.sigma2[0])
    # state levels and centring means of the observed LGAs, spread to every LGA
    n_states = int(state_all.max()) + 1
    level_s = np.zeros(n_states)
    xbar_s = np.zeros((n_states, x.shape[1]))
    level_s[st] = f.level[0]
    xbar_s[st] = f.xbar[0]
    has_state = np.zeros(n_states, dtype=bool)
    has_state[st] = True
    # neighbour terms from the observed LGAs only (the residuals they were fitted on)
    resid_all = np.zeros((1, n_all))
    resid_all[0, obs_idx] = f.resid[0]
    kept_all = np.zeros((1, n_all))
    kept_all[0, obs_idx] = 1.0
    level_all = np.where(has_state, level_s, 0.0)[state_all][None, :]
    sp = spatial_terms(level_all, resid_all, kept_all, adj_all)[0]
    xc = x_all - xbar_s[state_all]
    synthetic = xc @ f.beta[0] + sp @ f.gamma[0]
    observed = np.zeros(n_all, dtype=bool)
    observed[obs_idx] = True
    own = np.zeros(n_all)
    var = np.full(n_all, sigma2)
    r = y - f.level[0] - synthetic[obs_idx]
    share = sigma2 / (sigma2 + v)
    own[obs_idx] = share * r
    var[obs_idx] = sigma2 * v / (sigma2 + v)
    return Offsets(synthetic + own, var, observed, f.beta[0], f.gamma[0], sigma2)


def shift_to_mean(state_logit: np.ndarray, delta: np.ndarray, weight: np.ndarray, state_idx: np.ndarray,
                  target: np.ndarray, iterations: int = 60) -> np.ndarray:
    """[n_lga, T] LGA logits logit(B_s) + delta - c_s, with c_s ([n_states, T]) solved so the
    weight-averaged LGA values of each state equal `target` ([n_states, T]).

    The weighted mean falls monotonically as c grows, so bisection always converges (Newton
    can cycle on the logistic curve); 60 halvings of a width of 80 leave < 1e-16.
    """
    n_states = state_logit.shape[0]
    onehot = np.zeros((n_states, delta.size))
    onehot[state_idx, np.arange(delta.size)] = weight
    wsum = onehot.sum(axis=1, keepdims=True)
    lo = np.full(state_logit.shape, -40.0)
    hi = np.full(state_logit.shape, 40.0)
    base = state_logit[state_idx] + delta[:, None]
    for _ in range(iterations):
        c = (lo + hi) / 2
        mean = onehot @ (1 / (1 + np.exp(-(base - c[state_idx])))) / wsum
        too_high = mean > target
        lo = np.where(too_high, c, lo)
        hi = np.where(too_high, hi, c)
    return base - ((lo + hi) / 2)[state_idx]


def published_figures(o: Offsets, names: list[str]) -> dict[str, Any]:
    """The fitted constants of the published model, for the validation JSON."""
    return {
        "covariates": dict(zip(names, (round(float(b), 4) for b in o.beta), strict=True)),
        "neighbour_residual_coefficient": round(float(o.gamma[0]), 4),
        "neighbour_state_level_coefficient": round(float(o.gamma[1]), 4),
        "between_lga_variance_logit": round(o.sigma2, 4),
        "lgas_with_survey_data": int(o.observed.sum()),
        "lgas_from_covariates_and_neighbours": int((~o.observed).sum()),
        "offset_sd_logit": round(float(np.std(o.delta)), 4),
    }
