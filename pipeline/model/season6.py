"""Model-6 seasons: the season predicted from each area's own rain and temperature (docs/model-6-protocol.md).

Cases follow the rains with a delay set by mosquito breeding and parasite development, and temperature
limits transmission on the plateaus. Rain and temperature are observed in every area, while case records
exist in seven states: a season built from the area's own climate with four constants shared by all
states can transfer where per-state case fits did not. Pure numpy: arrays in, arrays out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import product

import numpy as np

MONTHS = 12
MAX_LAG = 5  # months of rain a month's cases can still reflect (the kernel's support)

# The protocol's grids; mu = 0 and b = 0 are bounds of the model (no cases before the rain that drives
# them, no negative background), not grid edges.
GRID_H_MM = (12.5, 25.0, 50.0, 100.0, 200.0, 400.0)
GRID_MU = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
GRID_SIGMA = (0.5, 1.0, 2.0)
GRID_B = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
MAX_EXTEND = 3
CRUDE_FLOOR = 0.5

# Model 7's `rain_onset` (docs/model-7-protocol.md): the kernel may start one month before the monthly
# total (mu = -1 is a bound of the model), the spread is fixed, and the onset pulse has weight omega >= 0.
ONSET_LAG_MIN = -1
ONSET_SIGMA = 1.0
GRID_MU_ONSET = (-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
GRID_OMEGA = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


def _r0(t: np.ndarray) -> np.ndarray:
    """Mordecai et al. (2013)'s R0(T) up to a constant: sqrt(a² bc exp(-mu/PDR) EFD pEA MDR / mu³), mu =
    -ln p; each trait clipped at 0 outside its thermal limits (their fitted Brière and quadratic curves)."""
    eps = 1e-12
    a = np.clip(0.000203 * t * (t - 11.7) * np.sqrt(np.clip(42.3 - t, 0, None)), 0, None)
    bc = np.clip(-0.54 * t**2 + 25.2 * t - 206, 0, None)
    p = np.clip(-0.000828 * t**2 + 0.0367 * t + 0.522, eps, 1 - eps)
    pdr = np.clip(0.000111 * t * (t - 14.7) * np.sqrt(np.clip(34.4 - t, 0, None)), 0, None)
    pea = np.clip(-0.00924 * t**2 + 0.453 * t - 4.77, 0, None)
    mdr = np.clip(0.000111 * t * (t - 14.7) * np.sqrt(np.clip(34.0 - t, 0, None)), 0, None)
    efd = np.clip(-0.153 * t**2 + 8.61 * t - 97.7, 0, None)
    mu = -np.log(p)
    ok = (a > 0) & (bc > 0) & (pdr > 0) & (pea > 0) & (mdr > 0) & (efd > 0) & (t > 0)
    out = np.zeros_like(t)
    out[ok] = np.sqrt(a[ok] ** 2 * bc[ok] * np.exp(-mu[ok] / pdr[ok]) * efd[ok] * pea[ok] * mdr[ok] / mu[ok] ** 3)
    return out


_R0_PEAK = float(_r0(np.linspace(10.0, 40.0, 30001)).max())


def thermal_suitability(temp_c: np.ndarray) -> np.ndarray:
    """Relative R0 of P. falciparum in Anopheles at mean temperature T, peak 1 (Mordecai et al. 2013,
    Ecology Letters 16: 22-30, doi:10.1111/ele.12015): 0 below about 16 °C and above about 34 °C, optimum
    near 25 °C. It limits transmission where the wet season is cool (the plateaus) or the dry season hot."""
    return _r0(np.asarray(temp_c, dtype=float)) / _R0_PEAK


def lag_weights(mu: float, sigma: float, lo: int = 0) -> np.ndarray:
    """[MAX_LAG + 1 - lo] weights of the rain j = lo..MAX_LAG months back: a Gaussian bump at lag mu,
    spread sigma (lo < 0: the kernel also reads the month after, model 7's onset kernel)."""
    j = np.arange(lo, MAX_LAG + 1, dtype=float)
    w = np.exp(-((j - mu) ** 2) / (2 * sigma**2))
    return w / w.sum()


def drive(rain: np.ndarray, suit: np.ndarray, h: float) -> np.ndarray:
    """[n, T] what each month's rain and temperature offer mosquitoes: saturating rain times R0(T)."""
    r = np.clip(np.asarray(rain, dtype=float), 0, None)
    return r / (r + h) * suit


def lagged(u: np.ndarray, mu: float, sigma: float, circular: bool = True) -> np.ndarray:
    """[n, T] the drive carried forward by the lag kernel; circular for a climatology (12 months), else the
    first MAX_LAG months of a dated series are NaN (their past is not in the series)."""
    w = lag_weights(mu, sigma)
    out = np.zeros_like(u, dtype=float)
    if circular:
        for j, wj in enumerate(w):
            out += wj * np.roll(u, j, axis=1)
        return out
    out[:] = np.nan
    T = u.shape[1]
    acc = np.zeros((u.shape[0], T - MAX_LAG))
    for j, wj in enumerate(w):
        acc += wj * u[:, MAX_LAG - j:T - j]
    out[:, MAX_LAG:] = acc
    return out


def profiles(rain: np.ndarray, suit: np.ndarray, h: float, mu: float, sigma: float, b: float) -> np.ndarray:
    """[n, 12] expected cases per month (mean 1 + b before scaling) of areas with rain climatology `rain`
    and thermal suitability `suit` ([n, 12] each): b + v / mean(v)."""
    v = lagged(drive(rain, suit, h), mu, sigma)
    m = v.mean(axis=1, keepdims=True)
    p = b + v / np.where(m > 0, m, 1.0)
    return _mean_one(p)


def _mean_one(p: np.ndarray) -> np.ndarray:
    """Rows scaled to mean 1; a row with nothing at all (no rain, or never warm enough) is flat."""
    m = p.mean(axis=1, keepdims=True)
    return np.where(m > 0, p / np.where(m > 0, m, 1.0), 1.0)


def dated_series(rain: np.ndarray, suit: np.ndarray, clim_rain: np.ndarray, clim_suit: np.ndarray, h: float,
                 mu: float, sigma: float, b: float) -> np.ndarray:
    """[n, T] expected cases month by month from each month's recorded rain ([n, T], the first MAX_LAG
    months only feed the kernel and come out NaN), on the climatology's scale (so a wet year gives more
    than a dry one): b + v_t / mean(v of the climatology)."""
    v = lagged(drive(rain, suit, h), mu, sigma, circular=False)
    vc = lagged(drive(clim_rain, clim_suit, h), mu, sigma)
    m = vc.mean(axis=1, keepdims=True)
    return b + v / np.where(m > 0, m, 1.0)


def crude(rain: np.ndarray) -> np.ndarray:
    """The crude reference: rain over the month and the two before it, scaled to mean 1, floored at 0.5."""
    r = np.asarray(rain, dtype=float)
    r3 = (r + np.roll(r, 1, axis=1) + np.roll(r, 2, axis=1)) / 3
    m = r3.mean(axis=1, keepdims=True)
    return _mean_one(np.maximum(r3 / np.where(m > 0, m, 1.0), CRUDE_FLOOR))


@dataclass(frozen=True)
class KernelFit:
    h: float
    mu: float
    sigma: float
    b: float
    loss: float
    at_grid_edge: bool

    @property
    def params(self) -> tuple[float, float, float, float]:
        return (self.h, self.mu, self.sigma, self.b)


def smooth_log(p: np.ndarray) -> np.ndarray:
    """Log of the 3-month circular mean, centred (the fitting scale: shape, timing and amplitude)."""
    s = (np.roll(p, 1, axis=-1) + p + np.roll(p, -1, axis=-1)) / 3
    s = np.log(np.clip(s, 1e-9, None))
    return s - s.mean(axis=-1, keepdims=True)


def lag_matrix(mu: float, sigma: float, lo: int = 0) -> np.ndarray:
    """[12, 12] the circular lag kernel as a matrix: v = u @ L, L[m, (m + j) % 12] = w_j."""
    out = np.zeros((MONTHS, MONTHS))
    m = np.arange(MONTHS)
    for j, wj in zip(range(lo, MAX_LAG + 1), lag_weights(mu, sigma, lo), strict=True):
        out[m, (m + j) % MONTHS] += wj
    return out


def _grid_scores(u: np.ndarray, kernels: np.ndarray, W: np.ndarray, bs: np.ndarray, target: np.ndarray
                 ) -> np.ndarray:
    """[k, b] the fitting loss of every lag kernel and background at once, for one h: with each row's drive
    scaled to mean 1, the profile b + v/mean(v) rescaled to mean 1 is (b + v')/(b + 1); the states' smoothed
    log profiles, centred, lose the constant 1/(b + 1), so only log(b + smooth(W v')) is needed."""
    v = np.einsum("rm,kmn->krn", u, kernels)
    m = v.mean(axis=2, keepdims=True)
    vn = np.where(m > 0, v / np.where(m > 0, m, 1.0), 1.0)  # a row with nothing is flat, as profiles() has it
    sv = np.einsum("sr,krn->ksn", W, vn)
    sm = (np.roll(sv, 1, axis=-1) + sv + np.roll(sv, -1, axis=-1)) / 3
    lg = np.log(np.clip(bs[:, None, None, None] + sm[None], 1e-9, None))  # [b, k, s, 12]
    lg = lg - lg.mean(axis=-1, keepdims=True)
    return ((lg - target[None, None]) ** 2).mean(axis=(2, 3)).T


def _state_weights(groups: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """(the rows any state uses, [states, rows] each state's population weights over them, summing to 1)."""
    rows = np.unique(np.concatenate([g[0] for g in groups]))
    pos = {int(r): k for k, r in enumerate(rows)}
    W = np.zeros((len(groups), len(rows)))
    for i, (idx, w) in enumerate(groups):
        W[i, [pos[int(r)] for r in idx]] = np.asarray(w, dtype=float) / np.sum(w)
    return rows, W


def _search(grids: list[list[float]], down: tuple[int, ...], drive_axes: tuple[int, ...],
            kernel_axes: tuple[int, ...], drive_of: Callable[..., np.ndarray],
            kernel_of: Callable[..., np.ndarray], W: np.ndarray, target: np.ndarray
            ) -> tuple[tuple[float, ...], float, bool]:
    """(best constants, loss, at a grid edge) of a four-constant season on its grid, the last constant the
    background b: every drive (one per combination of the drive axes' values) scored against every lag
    kernel (one per combination of the kernel axes') and background at once. A best value at the last
    grid value extends that axis upward (axis 1, the lag: +0.5 month; others x2), at the first value of an
    axis in `down` downward (/2), at most MAX_EXTEND times per axis; the other first values are bounds
    of the model, not edges."""
    scores: dict[tuple[float, ...], float] = {}
    extended = [0] * len(grids)
    while True:
        kpts = list(product(*(grids[a] for a in kernel_axes)))
        kernels = np.stack([kernel_of(*kp) for kp in kpts])  # [k, 12, 12]
        bs = np.array(grids[3], dtype=float)
        for dp in product(*(grids[a] for a in drive_axes)):
            def key(kp: tuple[float, ...], b: float, dp: tuple[float, ...] = dp) -> tuple[float, ...]:
                p = [0.0] * 4
                for ax, v in (*zip(drive_axes, dp, strict=True), *zip(kernel_axes, kp, strict=True), (3, b)):
                    p[ax] = v
                return tuple(p)
            if all(key(kp, b) in scores for kp in kpts for b in grids[3]):
                continue
            sc = _grid_scores(drive_of(*dp), kernels, W, bs, target)  # [k, b]
            for k, kp in enumerate(kpts):
                for j, b in enumerate(grids[3]):
                    scores.setdefault(key(kp, b), float(sc[k, j]))
        best = min(scores, key=lambda k: (round(scores[k], 12), k))
        moved = False
        for j, g in enumerate(grids):
            if best[j] == g[-1] and extended[j] < MAX_EXTEND:
                g.append(g[-1] + 0.5 if j == 1 else g[-1] * 2)
                extended[j] += 1
                moved = True
            elif best[j] == g[0] and j in down and extended[j] < MAX_EXTEND:
                g.insert(0, g[0] / 2)
                extended[j] += 1
                moved = True
        if not moved:
            edge = any(best[j] == g[-1] for j, g in enumerate(grids)) or any(best[j] == grids[j][0] for j in down)
            return best, scores[best], bool(edge)


def fit(rain: np.ndarray, suit: np.ndarray, groups: list[tuple[np.ndarray, np.ndarray]],
        recorded: np.ndarray) -> KernelFit:
    """The four constants that make the training states' predicted profiles closest to their recorded
    ones (mean squared difference of smoothed log profiles, each state equally), on the protocol's grid,
    extended at an edge at most MAX_EXTEND times (h and sigma also downward). `groups[i]` = (row indices
    into rain/suit of state i's LGAs, their population weights); `recorded[i]` its recorded profile."""
    rows, W = _state_weights(groups)
    R, S = rain[rows], suit[rows]
    best, loss, edge = _search([list(GRID_H_MM), list(GRID_MU), list(GRID_SIGMA), list(GRID_B)], (0, 2), (0,), (1, 2),
                               lambda h: drive(R, S, h), lag_matrix, W, smooth_log(np.asarray(recorded, dtype=float)))
    return KernelFit(best[0], best[1], best[2], best[3], loss=loss, at_grid_edge=edge)


# --- model 7: the rains' onset (docs/model-7-protocol.md) ----------------------------------------------

def onset_drive(rain: np.ndarray, suit: np.ndarray, onset: np.ndarray, h: float, omega: float) -> np.ndarray:
    """[n, T] the drive with the first rains' pulse: S(T) * (R / (R + h) + omega * O), O the share of years
    whose rains began in that month (or, for a dated series, 1 in the year's own onset month)."""
    r = np.clip(np.asarray(rain, dtype=float), 0, None)
    return (r / (r + h) + omega * np.asarray(onset, dtype=float)) * suit


def onset_profiles(rain: np.ndarray, suit: np.ndarray, onset: np.ndarray, h: float, mu: float, omega: float,
                   b: float) -> np.ndarray:
    """[n, 12] `rain_onset`'s profiles (mean 1): b + v / mean(v), v the onset drive through the lag kernel
    of spread ONSET_SIGMA whose support starts ONSET_LAG_MIN months back."""
    v = onset_drive(rain, suit, onset, h, omega) @ lag_matrix(mu, ONSET_SIGMA, ONSET_LAG_MIN)
    m = v.mean(axis=1, keepdims=True)
    return _mean_one(b + v / np.where(m > 0, m, 1.0))


def onset_dated_series(rain: np.ndarray, suit: np.ndarray, onset: np.ndarray, clim_rain: np.ndarray,
                       clim_suit: np.ndarray, clim_onset: np.ndarray, h: float, mu: float, omega: float,
                       b: float) -> np.ndarray:
    """[n, T] `rain_onset` month by month from recorded rain and each year's own onset month ([n, T]
    each): the first MAX_LAG months only feed the kernel, and the last -ONSET_LAG_MIN months lack the
    month after, so both come out NaN; on the climatology's scale, as `dated_series`."""
    u = onset_drive(rain, suit, onset, h, omega)
    w = lag_weights(mu, ONSET_SIGMA, ONSET_LAG_MIN)
    T = u.shape[1]
    out = np.full(u.shape, np.nan)
    stop = T + ONSET_LAG_MIN
    acc = np.zeros((u.shape[0], stop - MAX_LAG))
    for j, wj in zip(range(ONSET_LAG_MIN, MAX_LAG + 1), w, strict=True):
        acc += wj * u[:, MAX_LAG - j:stop - j]
    vc = onset_drive(clim_rain, clim_suit, clim_onset, h, omega) @ lag_matrix(mu, ONSET_SIGMA, ONSET_LAG_MIN)
    m = vc.mean(axis=1, keepdims=True)
    out[:, MAX_LAG:stop] = b + acc / np.where(m > 0, m, 1.0)
    return out


@dataclass(frozen=True)
class OnsetFit:
    h: float
    mu: float
    omega: float
    b: float
    loss: float
    at_grid_edge: bool

    @property
    def params(self) -> tuple[float, float, float, float]:
        return (self.h, self.mu, self.omega, self.b)


def fit_onset(rain: np.ndarray, suit: np.ndarray, onset: np.ndarray, groups: list[tuple[np.ndarray, np.ndarray]],
              recorded: np.ndarray) -> OnsetFit:
    """`rain_onset`'s four constants (h, mu, omega, b) by the same criterion as `fit`, on the model-7 grid:
    h extends both ways, mu, omega and b upward only (their lower ends are bounds of the model)."""
    rows, W = _state_weights(groups)
    R, S, On = rain[rows], suit[rows], onset[rows]
    best, loss, edge = _search([list(GRID_H_MM), list(GRID_MU_ONSET), list(GRID_OMEGA), list(GRID_B)], (0,), (0, 2),
                               (1,), lambda h, om: onset_drive(R, S, On, h, om),
                               lambda mu: lag_matrix(mu, ONSET_SIGMA, ONSET_LAG_MIN), W,
                               smooth_log(np.asarray(recorded, dtype=float)))
    return OnsetFit(best[0], best[1], best[2], best[3], loss=loss, at_grid_edge=edge)
