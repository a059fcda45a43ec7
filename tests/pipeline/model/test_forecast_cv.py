"""Protocol 2 of the season ratios (pipeline.model.forecast_cv) and the frozen rounds (pipeline.model.hub):
the scoring library against a hand-worked example, quantiles that are ordered and widen with horizon,
the weak-class fallback, the held-out state choosing nothing, and scoring an archived round against
synthetic later counts through the `malaria-risk score` command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
import scoringrules as sr
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pipeline.cli import main
from pipeline.model import forecast_cv as fc
from pipeline.model import hub, skill
from tests.pipeline.model.test_skill import random_groups, synthetic

# q10, q25, q50, q75, q90 and two observations, WIS worked by hand (Bracher et al. 2021):
# WIS = (0.5 |y - m| + 0.25 IS_0.5 + 0.1 IS_0.2) / 2.5, IS_a = (u - l) + 2/a (l - y)+ + 2/a (y - u)+
Q = np.array([-2.0, -1.0, 0.5, 1.0, 2.0])
HAND = {0.0: (0.5 * 0.5 + 0.25 * 2 + 0.1 * 4) / 2.5,  # inside both intervals: 0.46
        3.0: (0.5 * 2.5 + 0.25 * (2 + 4 * 2) + 0.1 * (4 + 10 * 1)) / 2.5}  # above both: 2.06


@pytest.mark.parametrize("y", sorted(HAND))
def test_wis_matches_the_hand_worked_example(y: float) -> None:
    assert fc.wis_values(np.array([y]), Q[None])[0] == pytest.approx(HAND[y])
    # CRPS from these five quantiles (scoringrules) equals the WIS with canonical weights
    assert float(sr.crps_quantile(np.array([y]), Q[None], np.array(fc.QUANTILE_LEVELS), backend="numpy")[0]) \
        == pytest.approx(HAND[y])
    # the residual form the scorecard uses: a translation of forecast and observation changes nothing
    assert fc.wis(np.array([[[y - 0.7]]]), (Q - 0.7)[None, None, :])[0, 0, 0] == pytest.approx(HAND[y])


def test_scoringrules_weighted_interval_score_is_not_used_where_it_is_wrong() -> None:
    """scoringrules 0.10.0 (numpy) adds 0.5 x median, not 0.5 x |y - median|: right only when they agree."""
    got = float(sr.weighted_interval_score(np.array([3.0]), np.array([0.5]), np.array([[-1.0, -2.0]]),
                                           np.array([[1.0, 2.0]]), np.array([0.5, 0.2]), backend="numpy"))
    assert got != pytest.approx(HAND[3.0])  # when this fails, the library is fixed: it may be used again


RESID = arrays(np.float64, (6, 30, 4), elements=st.floats(-3, 3))


@given(RESID, st.integers(0, 2**31 - 1))
@settings(max_examples=40, deadline=None)
def test_quantiles_are_ordered_and_widen_with_horizon(resid: np.ndarray, seed: int) -> None:
    classes, states = random_groups(seed)
    q = fc.calibrate(resid, classes, states)
    for cls in skill.CLASSES:
        assert np.all(np.diff(q[cls], axis=1) >= 0)  # q10 <= q25 <= ... <= q90 at every horizon
        assert np.all(np.diff(q[cls][:, [1, 0]], axis=0) <= 0) and np.all(np.diff(q[cls][:, [3, 4]], axis=0) >= 0)
    pub = fc.Published([fc.SIMPLEST] * 4, [{}] * 4, {c: [1.0] * 4 for c in skill.CLASSES}, [1] * 4,
                       {c: [(True, "")] * 4 for c in skill.CLASSES}, [False] * 4, q)
    index = np.linspace(0.4, 1.0, 12)[None, :]
    for r in fc.ratio_rows(index, [classes[0]], pub, decimals=12)[0]:
        vals = [r[f] for f in fc.QUANTILE_FIELDS]
        assert vals == sorted(vals) and r["low"] == r["q10"] and r["high"] == r["q90"]


@given(st.floats(0.1, 1.0), arrays(np.float64, 12, elements=st.floats(-1e-3, 1e-3)))
def test_a_flat_season_gives_ratios_near_one(level: float, wobble: np.ndarray) -> None:
    rows = fc.ratio_rows(level * (1 + wobble)[None, :], ["weak"], None)[0]
    assert all(abs(r["ratio"] - 1) < 0.01 for r in rows)


def test_conformal_order_statistic_holds_its_coverage() -> None:
    rng = np.random.default_rng(5)
    calib, test = rng.standard_t(4, 400), rng.standard_t(4, 20000)
    for p_lo, p_hi, want in ((0.25, 0.75, 0.5), (0.1, 0.9, 0.8)):
        lo, hi = fc.conformal_quantile(calib, p_lo), fc.conformal_quantile(calib, p_hi)
        assert abs(np.mean((test >= lo) & (test <= hi)) - want) < 0.05


@given(st.integers(0, 1000))
@settings(max_examples=5, deadline=None)
def test_weak_class_fallback_equals_persistence(seed: int) -> None:
    series, index = synthetic(seed, states=4, lgas=3)
    classes = np.array(["weak"] * len(series.codes))  # one class: 4 states, over 3 needed in the outer CV
    lv = fc.level_cv(series, index, classes, {})
    pub = fc.published(lv)
    # in every outer fold the training states hold 3 weak states: a class verdict; where it is false (and
    # only there) the held-out weak series are forecast by persistence exactly
    for s, v in lv.fold_verdicts.items():
        rows = series.state == s
        assert lv.fold_acting[s]["weak"] == [x[0] for x in v["weak"]]
        for k in range(4):
            pub_r, pers_r = lv.scored[fc.PUBLISHED].resid[rows, :, k], lv.scored["persistence"].resid[rows, :, k]
            if v["weak"][k][0] is False:
                np.testing.assert_array_equal(pub_r, pers_r)
            else:
                assert not np.array_equal(pub_r, pers_r, equal_nan=True)
    # the published table: a fallback horizon has ratio 1 and persistence's quantiles
    lone = fc.Published(pub.picks, pub.zone_skill, pub.alpha, pub.base_months,
                        {**pub.verdicts, "weak": [(None, "no evidence")] * 4}, [True] * 4, pub.q)
    for r in fc.ratio_rows(index[:1], ["weak"], lone)[0]:
        assert r["ratio"] == 1.0 and r["forecast"] == "persistence" and r["insufficient_skill"] is True


def test_a_class_with_too_few_states_gets_no_claim() -> None:
    series, index = synthetic(3, states=4, lgas=3)
    classes = np.where(series.state == "S0", "marked", "moderate")
    lv = fc.level_cv(series, index, classes, {})
    pub = fc.published(lv)
    assert all(v is None and "3 needed" in why for v, why in pub.verdicts["marked"])
    assert all(v is not None for v, _ in pub.verdicts["moderate"])
    rows = fc.ratio_rows(index[:1], ["marked"], pub)[0]
    assert all(r["insufficient_skill"] and r["beats_persistence"] is None for r in rows)


def test_a_held_out_states_data_chooses_nothing_in_its_own_fold() -> None:
    series, index = synthetic(2, states=5, lgas=4)
    classes = skill.class_of_index(index)
    zones = {"S0": "A", "S1": "A", "S2": "B", "S3": "C", "S4": "C"}
    rows = series.state == "S1"
    noisy = series.counts.copy()
    noisy[rows] = noisy[rows] * np.exp(np.random.default_rng(7).normal(0, 1.0, noisy[rows].shape))
    a = fc.level_cv(series, index, classes, zones)
    b = fc.level_cv(skill.CaseSeries(series.codes, series.state, noisy, series.first), index, classes, zones)
    assert a.fold_picks["S1"] == b.fold_picks["S1"] and a.fold_verdicts["S1"] == b.fold_verdicts["S1"]
    for m in ("published", "projected_alpha", "seasonal_adjustment_k"):
        np.testing.assert_array_equal(a.scored[m].q[rows], b.scored[m].q[rows])
    assert not np.array_equal(a.scored["published"].q[series.state == "S0"], b.scored["published"].q[series.state == "S0"])


def test_the_rule_needs_every_zone() -> None:
    """A candidate that wins in one zone by a lot and loses in another is not published."""
    n, T, H = 4, 10, 4
    zone = np.array(["A", "A", "B", "B"])
    simplest = np.ones((n, T, H))
    good = np.full((n, T, H), 0.5)
    mixed = np.broadcast_to(np.where((zone == "A")[:, None, None], 0.1, 1.01), (n, T, H))
    resids = {fc.SIMPLEST: simplest, **{f: simplest for f in fc.FREER}}
    assert fc.select({**resids, "projected_alpha": mixed}, zone)[0] == [fc.SIMPLEST] * 4
    assert fc.select({**resids, "seasonal_adjustment_k3": good}, zone)[0] == ["seasonal_adjustment_k3"] * 4


def test_score_command_scores_an_archived_round_against_later_counts(tmp_path: Path) -> None:
    """A round of two areas; later counts made so that one horizon falls inside every interval and one
    outside every one: coverage and the persistence skill follow from the construction."""
    recs = []
    for area, base in (("KN", 1.0), ("NG020001", 2.0)):
        for h in (1, 2):
            r = {"start_month": 10, "horizon": h, **{f: base * m for f, m in zip(
                fc.QUANTILE_FIELDS, (0.5, 0.8, 1.0, 1.25, 2.0), strict=True)}}
            recs.append((area, r))
    path = tmp_path / "round.csv"
    path.write_bytes(hub.render_round(hub.round_rows("2026-10", recs)))
    assert path.read_text().splitlines()[0] == ",".join(hub.COLUMNS)
    counts = tmp_path / "counts.csv"
    # origin 100 in both; h = 1: exactly the median (inside); h = 2: 10 x the median (outside every interval)
    counts.write_text("location,month,cases\nKN,2026-10,100\nNG020001,2026-10,100\nKN,2026-11,100\n"
                      "NG020001,2026-11,200\nKN,2026-12,1000\nNG020001,2026-12,2000\n")
    res = CliRunner().invoke(main, ["score", "--round", str(path), "--counts", str(counts)])
    assert res.exit_code == 0, res.output
    out = {e["months_ahead"]: e for e in orjson.loads(res.output)["horizons"]}
    assert out[1]["forecasts"] == 2 and out[1]["coverage_50"] == 1.0 and out[1]["coverage_80"] == 1.0
    # at the median: only the intervals' widths count, 2 x (0.1 log 2 + 0.25 log 1.25) / 2.5
    assert out[1]["wis_log"] == pytest.approx(2 * (0.1 * np.log(2) + 0.25 * np.log(1.25)) / 2.5, abs=1e-4)
    assert out[2]["coverage_80"] == 0.0
    # observed ratios 10 (KN) and 20 (the LGA); medians 1 and 2 miss by log 10 each, persistence (ratio 1)
    # by log 10 and log 20
    want = 1 - 2 * np.log(10) ** 2 / (np.log(10) ** 2 + np.log(20) ** 2)
    assert out[2]["skill_vs_persistence"] == pytest.approx(want, abs=1e-3)


@given(arrays(np.float64, 12, elements=st.floats(0.05, 1.0)), st.sampled_from(fc.ALPHA_GRID))
def test_published_ratios_compose_across_horizons(index: np.ndarray, alpha: float) -> None:
    """The h-month ratio from m is the (h-1)-month ratio from m times the 1-month ratio from m + h - 1."""
    q = {c: np.zeros((4, 5)) for c in skill.CLASSES}
    pub = fc.Published([fc.SIMPLEST] * 4, [{}] * 4, {c: [alpha] * 4 for c in skill.CLASSES}, [1] * 4,
                       {c: [(True, "")] * 4 for c in skill.CLASSES}, [False] * 4, q)
    rows = fc.ratio_rows(index[None, :], ["moderate"], pub, decimals=15)[0]
    r = {(x["start_month"] - 1, x["horizon"]): x["ratio"] for x in rows}
    for m in range(12):
        for h in (2, 3, 4):
            assert r[(m, h)] == pytest.approx(r[(m, h - 1)] * r[((m + h - 1) % 12, 1)], rel=1e-9)


def _resid(skill_by_state: dict[str, float], lgas: int = 3, T: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(method residuals, persistence residuals, state of each series) with a known skill per state:
    persistence errs by 1, the method by sqrt(1 - skill)."""
    state = np.repeat(list(skill_by_state), lgas)
    pers = np.ones((len(state), T, 4))
    method = pers * np.sqrt(1 - np.array([skill_by_state[s] for s in state]))[:, None, None]
    return method, pers, state


def test_acting_verdicts_and_the_fallback_follow_protocol_3() -> None:
    """A class without a verdict follows the verdict pooled over classes; persistence replaces the weak
    class only where that acting verdict is false; protocol 2 replaced it wherever it was not true."""
    cls = np.array(["weak", "moderate"])
    for claim, pooled, p3, p2 in ((None, True, False, True), (None, False, True, True), (True, False, False, False),
                                  (False, True, True, True), (None, None, False, True)):
        v = {"weak": [(claim, "")] * 4, "moderate": [(True, "")] * 4, "marked": [(None, "")] * 4}
        fb3 = fc.fallback_mask(v, cls, pooled=[(pooled, "")] * 4)
        fb2 = fc.fallback_mask(v, cls)
        assert fb3[0].tolist() == [p3] * 4 and fb2[0].tolist() == [p2] * 4
        assert not fb3[1].any() and not fb2[1].any()  # only the weak class ever falls back
        assert fc.acting(v, [(pooled, "")] * 4)["weak"] == [claim if claim is not None else pooled] * 4


def test_a_class_from_two_training_states_takes_the_verdict_pooled_over_classes() -> None:
    """Six training states; the weak class in two of them, where the method loses to persistence; the
    others gain: the weak class gets no verdict of its own, and the pooled one (true) is what it follows."""
    method, pers, state = _resid({"A": -0.3, "B": -0.3, "C": 0.4, "D": 0.4, "E": 0.4, "F": 0.4})
    cls = np.where(np.isin(state, ["A", "B"]), "weak", "moderate")
    v = fc.verdicts(method, pers, cls, state)
    pooled = fc.pooled_verdicts(method, pers, state)
    assert all(x is None and "2 states; 3 needed" in why for x, why in v["weak"])
    assert all(x is True for x, _ in v["moderate"]) and all(x is True for x, _ in pooled)
    assert fc.acting(v, pooled)["weak"] == [True] * 4
    assert not fc.fallback_mask(v, cls, pooled=pooled).any()
    # the same two states' loss, now with a third weak state that loses too: a class verdict, false
    method, pers, state = _resid({"A": -0.3, "B": -0.3, "C": -0.3, "D": 0.4, "E": 0.4, "F": 0.4})
    cls = np.where(np.isin(state, ["A", "B", "C"]), "weak", "moderate")
    v = fc.verdicts(method, pers, cls, state)
    assert [x for x, _ in v["weak"]] == [False] * 4
    assert fc.fallback_mask(v, cls, pooled=fc.pooled_verdicts(method, pers, state))[state == "A"].all()


def test_a_fold_with_two_weak_training_states_forecasts_by_the_pooled_verdict() -> None:
    """Three weak states of six: holding one out leaves two weak training states inside the fold (no class
    verdict there), yet the published claim, counted over the outer folds, has its three states."""
    series, index = synthetic(4, states=6, lgas=3)
    classes = np.where(np.isin(series.state, ["S0", "S1", "S2"]), "weak", "moderate")
    lv = fc.level_cv(series, index, classes, {})
    for s in ("S0", "S1", "S2"):
        assert all(x is None for x, _ in lv.fold_verdicts[s]["weak"])  # two training states: no class verdict
        assert lv.fold_acting[s]["weak"] == [True] * 4  # the season is real: the pooled verdict holds
        rows = series.state == s
        # so the held-out weak series are projected (protocol 2 fell back to persistence here)
        np.testing.assert_array_equal(lv.scored[fc.PUBLISHED].resid[rows], lv.scored[fc.SIMPLEST].resid[rows])
        np.testing.assert_array_equal(lv.scored[fc.PROTOCOL_2].resid[rows], lv.scored["persistence"].resid[rows])
    pub = fc.published(lv)
    assert all(x is not None for x, _ in pub.verdicts["weak"])  # three states over the outer folds: a claim


def test_a_class_from_fewer_than_three_states_is_null_but_projected_when_the_pooled_verdict_holds() -> None:
    series, index = synthetic(6, states=5, lgas=3)
    classes = np.where(np.isin(series.state, ["S0", "S1"]), "weak", "moderate")
    pub = fc.published(fc.level_cv(series, index, classes, {}))
    assert all(x is None for x, _ in pub.verdicts["weak"]) and [x for x, _ in pub.pooled] == [True] * 4
    assert pub.fallback == [False] * 4
    ev = fc.evidence(pub)["weak"]
    assert all("pooled over classes: true" in e["reason"] and e["forecast"] == "projected" for e in ev)
    rows = fc.ratio_rows(index[:1], ["weak"], pub)[0]
    assert all(r["insufficient_skill"] and r["forecast"] == "projected" for r in rows)
    assert any(r["ratio"] != 1.0 for r in rows)


def test_the_k_month_base_only_where_the_record_is_the_plain_season_ratio() -> None:
    alpha = np.ones((3, 4))
    fb = np.zeros((3, 4), dtype=bool)
    alpha[1, 1] = 1.25  # series 1: alpha != 1 at h = 2
    fb[2, 0] = True  # series 2: persistence at h = 1
    got = fc.base_months_mask(alpha, fb, [1, 2, 3, 3])
    assert got[0].tolist() == [False, True, True, True]
    assert got[1].tolist() == [False, False, False, False]  # h = 2 itself, and h = 3-4 need the 2-month ratio
    assert got[2].tolist() == [False, False, False, False]  # every k > 1 needs the 1-month ratio


def test_several_months_scores_the_k_month_base_with_the_one_count_quantiles() -> None:
    series, index = synthetic(8, states=5, lgas=3)
    lv = fc.level_cv(series, index, skill.class_of_index(index), {})
    sev, one = lv.scored[fc.SEVERAL], lv.scored[fc.PUBLISHED]
    np.testing.assert_array_equal(sev.q, one.q)
    for s, picks in lv.fold_picks.items():
        rows = series.state == s
        for k, p in enumerate(picks[fc.SEVERAL]):
            want = lv.scored[p].resid[rows, :, k] if p != fc.SIMPLEST else one.resid[rows, :, k]
            np.testing.assert_array_equal(sev.resid[rows, :, k], want)
