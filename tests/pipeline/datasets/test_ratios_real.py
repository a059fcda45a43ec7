"""Season ratios and the scorecard in a release built from the real data: the ratios equal those
recomputed from the published seasonal index, the ranges hold their promises, the clients' projection
of a known count is the documented formula (offline from the bundle and over HTTP), and the scorecard
is summaries only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.model import skill
from tests.paths import data_marks

pytestmark = data_marks("malaria/dhis2_lga_monthly_2020_2023")


def _json(root: Path, key: str) -> dict:
    return json.loads((root / "current" / key).read_text())


def test_release_ratios_equal_those_recomputed_from_the_published_index(real_build: Path) -> None:
    states_doc = _json(real_build, "v1/transmission/states.json")
    ratios_doc = _json(real_build, "v1/transmission/ratios/states.json")
    alpha = ratios_doc["method"]["alpha_by_class"]
    assert ratios_doc["method"]["cross_validated"] is True
    by_state = {(r["state_code"], r["start_month"], r["horizon"]): r for r in ratios_doc["states"]}
    assert len(by_state) == 37 * 12 * 4
    checked = 0
    for s in states_doc["states"]:
        ix = np.array(s["season"]["seasonal_index"])
        a = alpha[skill.season_class(s["season"])]
        for m in range(12):
            for h in range(1, 5):
                r = by_state[(s["state_code"], m + 1, h)]
                exact = 1.0 if r["forecast"] == "persistence" else float((ix[(m + h) % 12] / ix[m]) ** a[h - 1])
                # a 3-decimal rounding of the exact ratio (a tie such as 0.922 / 0.8 = 1.1525 may go either way
                # in floating point)
                assert abs(r["ratio"] - exact) <= 0.0005 + 1e-9 and r["ratio"] == round(r["ratio"], 3)
                checked += 1
    codes = [p.stem for p in (real_build / "current" / "v1" / "transmission" / "lgas").glob("*.json")]
    for code in codes:
        seasons = {r["lga_code"]: r for r in _json(real_build, f"v1/transmission/lgas/{code}.json")["lgas"]}
        recs = _json(real_build, f"v1/transmission/ratios/lgas/{code}.json")["lgas"]
        assert len(recs) == 48 * len(seasons)
        assert [r["lga_code"] for r in recs[::48]] == list(seasons)  # the season route's (alphabetical) order
        for r in recs:
            ix = seasons[r["lga_code"]]["seasonal_index"]
            m, h = r["start_month"] - 1, r["horizon"]
            a = alpha[r["season_class"]][h - 1]
            exact = 1.0 if r["forecast"] == "persistence" else float((ix[(m + h) % 12] / ix[m]) ** a)
            assert abs(r["ratio"] - exact) <= 0.0005 + 1e-9 and r["ratio"] == round(r["ratio"], 3)
            assert r["season_class"] == skill.season_class(seasons[r["lga_code"]])
            checked += 1
    assert checked > 774 * 48


def test_ranges_hold_the_ratio_and_widen_with_horizon(real_build: Path) -> None:
    recs = _json(real_build, "v1/transmission/ratios/lgas/KN.json")["lgas"]
    assert all(r["low"] < r["ratio"] < r["high"] for r in recs)
    assert all(isinstance(r["beats_persistence"], bool) or r["beats_persistence"] is None for r in recs)
    by = {}
    for r in recs:
        by.setdefault((r["lga_code"], r["start_month"]), []).append(np.log(r["high"]) - np.log(r["low"]))
    for widths in by.values():
        assert all(b >= a - 2e-3 for a, b in zip(widths, widths[1:], strict=False))


def test_the_scorecard_is_summaries_of_nested_cv_over_seven_states(real_build: Path) -> None:
    report = _json(real_build, "docs/skill.json")
    assert report["run"] is True
    lgas = report["levels"]["lgas"]
    assert lgas["states"] == 7 and lgas["series"] >= 150
    assert [h["months_ahead"] for h in lgas["horizons"]] == [1, 2, 3, 4]
    for h in lgas["horizons"]:
        methods = h["all"]["methods"]
        for m in ("published", "projected_a1", "persistence", "seasonal_naive", "flat", "seasonal_adjustment_k3",
                  "protocol_1"):
            e = methods[m]
            assert e["skill_vs_persistence"] is not None
            assert 0 <= e["coverage_50"] <= e["coverage_80"] <= 1 and e["wis"] > 0
        assert methods["persistence"]["skill_vs_persistence"] == 0.0
        assert len(h["by_state"]) == 7 and h["all"]["forecasts"] == sum(e["forecasts"] for e in h["by_state"].values())
    # every row names the data and model version that made it; protocol 1's figures stay beside
    assert report["rows"] and all(r["data"] == report["data"]["digest"] and r["model"] for r in report["rows"])
    assert report["protocol_1"]["run"] is True and {a["which"] for a in report["protocol_1"]["aims"]} == {"before", "after"}
    assert [a["months_ahead"] for a in report["aims"]] == [1, 2, 3, 4]
    # a class claim needs series from three states: the marked class has none among the dated seven
    ev = report["published"]["lgas"]["evidence"]
    assert all((e["beats_persistence"] is None) == ("3 needed" in e["reason"]) for c in ev.values() for e in c)
    # protocol 3: persistence replaces the weak class only where its acting verdict is false (its own, or
    # the one pooled over classes when it has none); protocol 2's rule is scored beside on the same triples
    for level, pub in report["published"].items():
        pooled = {e["months_ahead"]: e["beats_persistence"] for e in pub["pooled_over_classes"]}
        for c, es in pub["evidence"].items():
            for e in es:
                acting = e["beats_persistence"] if e["beats_persistence"] is not None else pooled[e["months_ahead"]]
                assert (e["forecast"] == "persistence") == (c == "weak" and acting is False), (level, c, e)
        assert {(x["season_class"], x["months_ahead"]) for x in pub["insufficient_skill"]} == {
            (c, e["months_ahead"]) for c, es in pub["evidence"].items() for e in es if e["beats_persistence"] is not True}
    for h in lgas["horizons"]:
        m = h["all"]["methods"]
        assert m["protocol_2"]["mse"] is not None
        assert m["published_several_months"]["coverage_80"] is not None
    text = json.dumps(report)
    assert "NG0" not in text  # no LGA named with a figure


def test_the_release_archives_its_round_in_the_hub_layout(real_build: Path) -> None:
    from pipeline.model import hub

    rounds = sorted((real_build / "current" / hub.HUB_DIR).glob("*.csv"))
    assert len(rounds) == 1
    rows = hub.read_round(rounds[0].read_text())
    assert {r["output_type_id"] for r in rows} == {"0.1", "0.25", "0.5", "0.75", "0.9"}
    assert {int(r["horizon"]) for r in rows} == {1, 2, 3, 4}
    assert len({r["location"] for r in rows}) > 700 and all(float(r["value"]) > 0 for r in rows)


def test_projection_of_a_known_count_is_the_documented_formula_offline(real_build: Path) -> None:
    from malaria_risk_client import ClientError, project_counts
    from malaria_risk_client._project import whole_cases

    bundle = real_build / "current" / "downloads"
    recs = [r for r in _json(real_build, "v1/transmission/ratios/lgas/KN.json")["lgas"]]
    code = recs[0]["lga_code"]
    mine = {r["horizon"]: r for r in recs if r["lga_code"] == code and r["start_month"] == 11}
    for source in (bundle, bundle / "malaria_risk_nigeria.zip"):
        out = project_counts(code, "2024-11", 1234, bundle=source)
        assert [p["period"] for p in out["projections"]] == ["2024-12", "2025-01", "2025-02", "2025-03"]
        for p in out["projections"]:
            r = mine[p["horizon"]]
            if r["beats_persistence"] is True:
                assert p["status"] == "ok"
                assert (p["expected"], p["low"], p["high"]) == (whole_cases(1234 * r["ratio"]), whole_cases(1234 * r["low"]),
                                                                whole_cases(1234 * r["high"]))
                assert p["quantiles"]["q50"] == whole_cases(1234 * r["q50"])
            else:
                assert p["status"] == "insufficient_skill" and p["expected"] is None
    with pytest.raises(ClientError, match="^project_counts: "):
        project_counts(code, "2024-11", -1, bundle=bundle)
    with pytest.raises(ClientError, match="^project_counts: .*not in the bundle"):
        project_counts("NG999999", "2024-11", 10, bundle=bundle)
