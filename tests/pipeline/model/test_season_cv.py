"""Model-3 season rules (floor and lag by dry months) and their leave-whole-state-out check."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.model import season_cv
from pipeline.model.seasons import (
    FLOOR_BOUNDS,
    GRID_FLOOR,
    AreaSeasonParams,
    area_index,
    dry_months,
    fit_area_params,
    fit_table,
    floor_grid_loss,
    high_share_of,
    rain_shape,
    rule_lag,
    season_of_area,
)

rain_rows = st.lists(st.floats(0.0, 500.0, allow_nan=False), min_size=12, max_size=12).filter(lambda r: max(r) > 1.0)
params = st.builds(
    AreaSeasonParams,
    lag_at_pivot=st.floats(-1.0, 2.5), lag_per_dry_month=st.floats(0.0, 0.6),
    floor_at_pivot=st.floats(0.3, 0.9), floor_per_dry_month=st.floats(-0.12, 0.04),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(rain_rows, min_size=1, max_size=5), params)
def test_index_in_range_floor_within_bounds_high_months_recomputable(rows, p) -> None:
    rain = np.array(rows)
    index, floor, lag = area_index(rain, p)
    assert np.all((floor >= FLOOR_BOUNDS[0]) & (floor <= FLOOR_BOUNDS[1]))
    assert np.all((lag >= -1.0) & (lag <= 4.0))
    # every month between the area's floor and its peak, the peak exactly 1 (3-decimal published index)
    assert np.all(index.max(axis=1) == 1.0)
    assert np.all(index >= np.round(floor, 3)[:, None] - 0.0005) and np.all(index <= 1.0)
    # the amplitude (1 - trough) never exceeds 1 - floor
    assert np.all(1 - index.min(axis=1) <= 1 - floor + 0.0005)
    for ix, f in zip(index, floor, strict=True):
        share = float(high_share_of(f))
        season = season_of_area(ix, f)
        assert list(season.high_months) == [m + 1 for m in range(12) if ix[m] >= share]
        assert share == round(f + (1 - f) / 2, 3)


@given(params)
def test_floor_falls_with_a_longer_dry_season_when_the_slope_is_negative(p) -> None:
    f = p.floors(np.arange(13))
    assert np.all(np.diff(f) <= 1e-12) if p.floor_per_dry_month <= 0 else np.all(np.diff(f) >= -1e-12)


def _rain(peak: int, dry: int) -> np.ndarray:
    """A one-peak rain profile with exactly `dry` months under 50 mm."""
    m = np.arange(12)
    d = np.minimum(np.abs(m - (peak - 1)), 12 - np.abs(m - (peak - 1)))
    order = np.argsort(d, kind="stable")
    rain = np.empty(12)
    rain[order] = np.linspace(300, 60, 12 - dry).tolist() + np.linspace(40, 5, dry).tolist()
    return rain


RAIN = np.array([_rain(8, 8), _rain(7, 3), _rain(9, 8), _rain(6, 2), _rain(8, 5), _rain(10, 6), _rain(7, 4)])


def test_fit_table_loss_equals_the_direct_formula() -> None:
    rng = np.random.default_rng(1)
    rec = rng.uniform(0.5, 1.5, (3, 12))
    w = np.zeros((3, len(RAIN)))
    w[0, :3], w[1, 3:5], w[2, 5:] = [1, 2, 1], [1, 1], [3, 1]
    table = fit_table(RAIN, w, rec, "linear")
    i, j, k, s = 5, 3, 17, 1
    from pipeline.model.seasons import GRID_LAG_AT_PIVOT, GRID_LAG_PER_DRY_MONTH

    lag = rule_lag("linear", GRID_LAG_AT_PIVOT[i], GRID_LAG_PER_DRY_MONTH[j], dry_months(RAIN))
    sh = (w / w.sum(axis=1, keepdims=True)) @ rain_shape(RAIN, lag)
    pred = GRID_FLOOR[k] + (1 - GRID_FLOOR[k]) * sh[s]
    r = rec[s] / rec[s].mean()
    assert np.isclose(table.loss[i, j, k, s], ((pred / pred.mean() - r) ** 2).sum())


def test_floor_grid_loss_equals_the_direct_formula() -> None:
    rng = np.random.default_rng(2)
    rec = rng.uniform(0.5, 1.5, (2, 12))
    w = np.zeros((2, len(RAIN)))
    w[0, :4], w[1, 4:] = [1, 1, 2, 1], [1, 2, 1]
    lag = rule_lag("linear", 1.0, 0.2, dry_months(RAIN))
    shape = rain_shape(RAIN, lag)
    loss = floor_grid_loss(shape, dry_months(RAIN), w, rec)
    from pipeline.model.seasons import GRID_FLOOR_AT_PIVOT, GRID_FLOOR_PER_DRY_MONTH

    a, b, s = 7, 4, 1
    f = np.clip(GRID_FLOOR_AT_PIVOT[a] + GRID_FLOOR_PER_DRY_MONTH[b] * (dry_months(RAIN) - 5), *FLOOR_BOUNDS)
    prof = (w[s] / w[s].sum()) @ (f[:, None] + (1 - f[:, None]) * shape)
    assert np.isclose(loss[a, b, s], ((prof / prof.mean() - rec[s] / rec[s].mean()) ** 2).sum())


def test_two_stage_fit_recovers_the_rule_that_made_the_records() -> None:
    truth = AreaSeasonParams(lag_at_pivot=1.0, lag_per_dry_month=0.2, floor_at_pivot=0.6, floor_per_dry_month=-0.05)
    rec, _, _ = area_index(RAIN, truth, rounded=False)
    w = np.eye(len(RAIN))
    table = fit_table(RAIN, w, rec * 40, "linear")
    p = fit_area_params(table, RAIN, w, rec * 40, np.ones(len(RAIN)), "linear")
    assert (p.lag_at_pivot, p.lag_per_dry_month) == (1.0, 0.2)
    assert (p.floor_at_pivot, p.floor_per_dry_month) == (0.6, -0.05)


def _series(rec: np.ndarray, states: list[str]) -> season_cv.Series:
    n = len(rec)
    return season_cv.Series([f"s{i}" for i in range(n)], ["lga"] * n, states, np.eye(n), rec, np.zeros(n), np.ones(n))


def test_leave_state_out_never_scores_a_state_with_constants_it_helped_fit() -> None:
    truth = AreaSeasonParams(1.0, 0.2, 0.6, -0.05)
    rec, _, _ = area_index(RAIN, truth, rounded=False)
    rec[6] = np.roll(rec[6], 6)  # state G's series peaks six months away from every rule's prediction
    states = list("AABBCCG")
    series = _series(rec, states)
    table = fit_table(RAIN, series.weights, rec, "linear")
    cv = season_cv.leave_state_out(table, RAIN, series, states, [], {})
    pred = cv.series_pred["model_3"]
    r = season_cv.per_profile(pred, rec)
    # the odd state is predicted by the others' fit, which is the truth: it scores badly ...
    assert r["correlation"][6] < 0 and r["centre_off"][6] > 4
    # ... and the others, predicted without their own state, are recovered once G is left out
    fold_a = next(f for f in cv.folds if f.state == "A").params["model_3"]
    assert fold_a != next(f for f in cv.folds if f.state == "G").params["model_3"]
    held_g = next(f for f in cv.folds if f.state == "G").params["model_3"]
    assert (held_g.floor_at_pivot, held_g.floor_per_dry_month) == (0.6, -0.05)


def test_dated_profiles_are_ratios_to_each_lga_year_mean() -> None:
    rows = []
    shape = np.array([1, 1, 1, 1, 1, 1, 2, 3, 3, 2, 1, 1], dtype=float)
    for lga, state, level in (("L1", "KE", 100.0), ("L2", "KE", 300.0), ("L3", "AK", 50.0)):
        for year, growth in ((2020, 1.0), (2021, 2.0)):
            for m in range(12):
                cases = level * growth * (shape[m] if state == "KE" else 1.0)
                rows.append({"lga_code": lga, "state_code": state, "year": year, "month": m + 1, "cases": cases})
    rows.append({"lga_code": "L4", "state_code": "AK", "year": 2020, "month": 1, "cases": 5.0})  # too few months
    d = season_cv.dated_profiles(pl.DataFrame(rows))
    assert d.lga_codes == ["L1", "L2", "L3"] and d.state_codes == ["AK", "KE"]
    # a level change between years and between LGAs does not change the shape
    assert np.allclose(d.lga[0], shape / shape.mean()) and np.allclose(d.lga[1], d.lga[0])
    assert np.allclose(d.lga[2], 1.0) and np.allclose(d.state[1], shape / shape.mean())
