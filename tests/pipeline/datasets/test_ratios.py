"""The ratio producer on made-up seasons and counts: ratios come from the transmission documents of the
build, ranges and verdicts only where dated series exist (null without), and nothing of a series leaves."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import numpy as np
import orjson
import polars as pl

from pipeline.datasets import ratios
from pipeline.datasets.base import Produced
from pipeline.model import skill

STATES = {"AA": ["NG001001", "NG001002", "NG001003"], "BB": ["NG002001", "NG002002"], "CC": ["NG003001", "NG003002"]}
SEASON = [round(0.45 + 0.55 * (0.5 + 0.5 * np.cos(2 * np.pi * (m - 8) / 12)), 3) for m in range(12)]


def transmission() -> Produced:
    lgas = {(s,): {"state_code": s, "state": s.title(), "lgas": [{"lga_code": c, "lga": c, "seasonal_index": SEASON}
                                                                   for c in codes]}
            for s, codes in STATES.items()}
    states = {(): {"states": [{"state_code": s, "state": s.title(), "season": {"seasonal_index": SEASON}}
                              for s in STATES]}}
    return Produced("transmission", {"/v1/transmission/states": states, "/v1/transmission/lgas": lgas})


def dated(seed: int = 3) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for s, codes in STATES.items():
        for c in codes:
            level = rng.uniform(100, 900)
            for t in range(48):
                y, m = 2020 + t // 12, t % 12 + 1
                v = level * SEASON[m - 1] * float(np.exp(rng.normal(0, 0.1)))
                rows.append({"lga_code": c, "state_code": s, "year": y, "month": m,
                             "cases": None if rng.random() < 0.02 else round(v)})
    return pl.DataFrame(rows, schema={"lga_code": pl.String, "state_code": pl.String, "year": pl.Int64,
                                      "month": pl.Int64, "cases": pl.Float64})


def ctx(dated_cases: pl.DataFrame | None) -> Any:
    return SimpleNamespace(produced=[transmission()], inputs=SimpleNamespace(dated_cases=dated_cases))


def test_without_dated_series_the_ratios_are_published_with_null_ranges() -> None:
    out = ratios.produce(ctx(None))
    doc = out.documents[ratios.STATES_ROUTE][()]
    assert doc["method"]["cross_validated"] is False
    assert len(doc["states"]) == 3 * 48
    assert all(r["low"] is None and r["high"] is None and r["beats_persistence"] is None for r in doc["states"])
    expect = skill.ratios(np.array(SEASON), 1.0)[0]
    assert [r["ratio"] for r in doc["states"][:48]] == [round(float(v), 3) for v in expect.reshape(-1)]
    report = orjson.loads(out.files[ratios.SKILL_FILE][1])
    assert report["run"] is False and report["levels"] == {}


def test_with_dated_series_ranges_and_verdicts_come_from_the_folds_and_no_count_leaves() -> None:
    d = dated()
    out = ratios.produce(ctx(d))
    lg = out.documents[ratios.LGAS_ROUTE][("AA",)]["lgas"]
    assert len(lg) == 3 * 48 and all(r["low"] < r["ratio"] < r["high"] for r in lg)
    assert all(r["beats_persistence"] in (True, False) for r in lg)  # three states of this class: a verdict
    blob = b"".join(orjson.dumps(doc) for docs in out.documents.values() for doc in docs.values())
    blob += out.files[ratios.SKILL_FILE][1]
    counts = {int(v) for v in d["cases"].drop_nulls().to_list() if v >= 100}
    numbers = {int(x) for x in re.findall(rb"(?<![\d.])(\d{3,})(?![\d.])", blob)}
    assert len(counts & numbers) <= 5  # at most a chance coincidence (e.g. a count of forecasts), no series


def test_case_series_sums_states_only_where_every_lga_counted() -> None:
    d = dated()
    lgas, states = skill.case_series(d)
    assert lgas.counts.shape == (7, 48) and states.codes == ["AA", "BB", "CC"]
    aa = np.isin(np.array(lgas.codes), STATES["AA"])
    full = np.isfinite(lgas.counts[aa]).all(axis=0)
    np.testing.assert_allclose(states.counts[0][full], lgas.counts[aa][:, full].sum(axis=0))
    assert np.isnan(states.counts[0][~full]).all()
