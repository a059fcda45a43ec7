"""The history producer on the risk producer's own documents (small synthetic data directory):
a history month is the very record of that month's report, areas and months are complete and
in order, and the whole-country month is every LGA of every state's report, highest first."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import orjson
import pytest

from edge.routes import INCLUDE_FORECASTS, INCLUDE_NONE
from pipeline.datasets import history, risk
from pipeline.datasets.base import BuildContext, Produced, Rendered
from pipeline.errors import DatasetUnavailable
from pipeline.release import tabular
from tests.pipeline.datasets.test_risk_documents import write_data_dir
from tests.small_geography import small_geo

MONTH = ["period", "kind", "score", "score_low", "score_high", "level", "provisional", "basis"]
LGA_MONTH = [*MONTH, "rank", "rank_low", "rank_high", "rank_range_withheld"]
LGA_HEAD = ["lga_code", "lga", "state_code", "state", "is_urban", "evidence", "survey_children_2018_band"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = write_data_dir(tmp_path_factory.mktemp("data"))
    ctx = BuildContext(data_dir=root, updated_at="2019-07-02T10:00:00Z", geography=small_geo())
    ctx.produced.append(risk.produce(ctx))
    h = history.produce(ctx)
    # the producer hands over response bytes (tabular.rendered); the tests read the documents back,
    # and check each CSV is what the renderer would have made of the document
    for route, docs in h.documents.items():
        for key, done in docs.items():
            assert isinstance(done, Rendered)
            doc = orjson.loads(done.json)
            assert done.csv == tabular.to_csv(doc), (route, key)
            docs[key] = doc
    return ctx.produced[0], h


def _same(rec: dict, month: dict) -> bool:
    """The month holds the record's score fields unchanged."""
    shared = [k for k in ("score", "score_low", "score_high", "level") if k in rec]
    return len(shared) == 4 and all(rec[k] == month[k] for k in shared)


def test_facts_and_keys(built):
    r, h = built
    geo = small_geo()
    codes = sorted(geo.lgas["lga_code"].to_list())
    assert h.dataset == "history" and h.facts == {"lgas": codes}
    states = sorted(geo.states["state_code"].to_list())
    includes = (INCLUDE_NONE, INCLUDE_FORECASTS)
    assert set(h.documents[history.STATES_ROUTE]) == {(s, i) for s in states for i in includes}
    assert set(h.documents[history.LGAS_ROUTE]) == {(c, i) for c in codes for i in includes}
    assert set(h.documents[history.ALL_LGAS_ROUTE]) == {(p,) for p in r.facts["estimated"]}


def test_lga_history_is_the_monthly_records(built):
    r, h = built
    est, fc = r.facts["estimated"], r.facts["forecast"]
    provisional = {m["period"]: m["provisional"] for m in r.documents["/v1/periods"][()]["months"]}
    for (code, include), doc in h.documents[history.LGAS_ROUTE].items():
        state = doc["state_code"]
        assert list(doc) == [*LGA_HEAD, "months"]
        periods = [m["period"] for m in doc["months"]]
        assert periods == (est if include == INCLUDE_NONE else est + fc)  # oldest first, forecasts after
        for m in doc["months"]:
            assert list(m) == LGA_MONTH
            if m["kind"] == "estimated":
                report = r.documents["/v1/risk/lgas"][(state, m["period"])]
                assert report["state"] == doc["state"]
                assert m["provisional"] == provisional[m["period"]]
            else:
                report = next(f for f in r.documents["/v1/forecasts/lgas"][(state, "4")]["forecasts"]
                              if f["period"] == m["period"])
                assert m["provisional"] is False
            rec = next(x for x in report["lgas"] if x["lga_code"] == code)
            assert _same(rec, m) and rec["lga"] == doc["lga"]
            assert rec["is_urban"] == doc["is_urban"] and rec["evidence"] == doc["evidence"]
            assert (m["rank"], m["rank_low"], m["rank_high"], m["basis"]) == (
                rec["rank"], rec["rank_low"], rec["rank_high"], report["basis"])


def test_state_history_is_the_monthly_records(built):
    r, h = built
    for (code, include), doc in h.documents[history.STATES_ROUTE].items():
        assert list(doc) == ["state_code", "state", "zone", "months"]
        kinds = [m["kind"] for m in doc["months"]]
        assert kinds == sorted(kinds, key=lambda k: k == "forecast")
        assert ("forecast" in kinds) == (include == INCLUDE_FORECASTS)
        for m in doc["months"]:
            if m["kind"] == "estimated":
                records = r.documents["/v1/risk/states"][(m["period"],)]["states"]
            else:
                records = next(f for f in r.documents["/v1/forecasts/states"][("4",)]["forecasts"]
                               if f["period"] == m["period"])["states"]
            rec = next(x for x in records if x["state_code"] == code)
            assert _same(rec, m) and rec["zone"] == doc["zone"]


def test_whole_country_month_is_every_state_report_merged(built):
    r, h = built
    for (period,), doc in h.documents[history.ALL_LGAS_ROUTE].items():
        assert doc["period"] == period and doc["kind"] == "estimated"
        assert list(doc) == ["period", "kind", "lgas", "basis"]
        expected = []
        for (state, p), report in r.documents["/v1/risk/lgas"].items():
            if p == period:
                expected += [{**{k: v for k, v in rec.items() if k in ("lga_code", "lga")},
                              "state_code": state, "state": report["state"],
                              **{k: v for k, v in rec.items() if k not in ("lga_code", "lga")}} for rec in report["lgas"]]
        assert sorted(doc["lgas"], key=lambda x: x["lga_code"]) == sorted(expected, key=lambda x: x["lga_code"])
        assert [list(x) for x in doc["lgas"]] == [list(x) for x in expected]  # field order as served
        order = [(-x["score"], x["lga_code"]) for x in doc["lgas"]]
        assert order == sorted(order)


def test_history_csv_has_one_row_per_month(built):
    _, h = built
    doc = h.documents[history.LGAS_ROUTE][(h.facts["lgas"][0], INCLUDE_FORECASTS)]
    rows = list(csv.DictReader(io.StringIO(tabular.to_csv(doc).decode())))
    assert len(rows) == len(doc["months"])
    assert list(rows[0]) == [*LGA_HEAD, *LGA_MONTH]
    assert [r["period"] for r in rows] == [m["period"] for m in doc["months"]]
    assert all(r["lga_code"] == doc["lga_code"] for r in rows)
    assert float(rows[-1]["score"]) == doc["months"][-1]["score"]


def test_without_the_risk_documents_the_routes_are_unavailable():
    ctx = BuildContext(data_dir=Path("no-data-needed"), updated_at="2019-07-02T10:00:00Z", geography=small_geo(),
                       produced=[Produced("geography", {})])
    with pytest.raises(DatasetUnavailable):
        history.produce(ctx)
