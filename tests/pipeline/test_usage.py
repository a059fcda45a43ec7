"""`malaria-risk keys usage-export`: per-key monthly totals from the counters the limits keep.

Counted the real way: the local server's limiter over the shared counters file, and at the
edge the very UpdateItem the CDN function sends (edge.stores.dynamodb.authorise_request)
against moto's DynamoDB.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from edge.keys import hash_key
from edge.limits import Limiter
from edge.local.app import App
from edge.stores import open_store
from pipeline.cli import main
from pipeline.errors import OperatorError
from pipeline.usage import check_month, usage_export

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def test_local_totals_per_key_and_month(tmp_path: Path, release_root: Path):
    spec = f"sqlite:{tmp_path / 'var' / 'keys.sqlite'}"
    store, counter = open_store(spec)
    a_id, a = store.create("a", ["risk_scores"], "live", now=NOW)
    b_id, b = store.create("b", ["risk_scores"], "live", org="ngo", now=NOW)
    t_id, t = store.create("t", ["risk_scores"], "test", now=NOW)
    app = App(release_root, store, Limiter(counter), clock=lambda: NOW)
    for key, n in ((a, 3), (b, 2), (t, 4)):
        for _ in range(n):
            assert app.respond("GET", "/v1/periods", "", {"authorization": f"Bearer {key}"})[0].status == 200
    rows = {r["key_id"]: r for r in usage_export(spec, "2026-11", NOW)}
    assert {k: r["requests"] for k, r in rows.items()} == {a_id: 3, b_id: 2, t_id: None}  # test keys: not counted
    assert rows[b_id]["org"] == "ngo" and rows[a_id]["complete"] is False  # the month is still running

    out = tmp_path / "usage.csv"
    res = CliRunner().invoke(main, ["keys", "usage-export", "--store", spec, "--month", "2026-11", "--out", str(out)])
    assert res.exit_code == 0, res.output
    table = list(csv.DictReader(io.StringIO(out.read_text())))
    assert {r["key_id"]: r["requests"] for r in table} == {a_id: "3", b_id: "2", t_id: ""}
    assert a not in out.read_text()  # ids, never keys
    res = CliRunner().invoke(main, ["keys", "usage-export", "--store", spec, "--month", "2026-11",
                                    "--format", "json"])
    assert {r["key_id"]: r["requests"] for r in json.loads(res.stdout)} == {a_id: 3, b_id: 2, t_id: None}


def test_months_whose_counters_are_gone_are_refused_not_zero():
    # local: the month's counter expires a day after the month ends
    assert check_month("2026-10", datetime(2026, 11, 1, 23, 59, tzinfo=UTC), edge=False) is True
    with pytest.raises(OperatorError, match="expired at 2026-11-02"):
        check_month("2026-10", datetime(2026, 11, 2, 0, 1, tzinfo=UTC), edge=False)
    # edge: kept through the month after
    assert check_month("2026-10", datetime(2026, 11, 30, 23, 0, tzinfo=UTC), edge=True) is True
    with pytest.raises(OperatorError, match="removed two months on"):
        check_month("2026-10", datetime(2026, 12, 1, 0, 1, tzinfo=UTC), edge=True)
    for bad in ("2026-13", "26-11", "2026-12"):
        with pytest.raises(OperatorError):
            check_month(bad, NOW, edge=True)


def test_edge_totals_from_dynamodb(monkeypatch: pytest.MonkeyPatch):
    import boto3

    from edge.stores.dynamodb import DynamoDBKeyStore, Windows, authorise_request
    from tests.edge.conftest import CREDS, start_moto

    proc, url = start_moto()
    try:
        for k, v in CREDS.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", url)
        monkeypatch.setenv("MALARIA_RISK_REGION", "eu-west-1")
        ddb = boto3.client("dynamodb", endpoint_url=url, region_name="eu-west-1")
        store = DynamoDBKeyStore(ddb, "use-")
        store.create_tables()
        a_id, a = store.create("a", ["risk_scores"], "live", now=NOW)
        t_id, t = store.create("t", ["risk_scores"], "test", now=NOW)
        idle_id, _ = store.create("idle", ["risk_scores"], "live", now=NOW)
        october = datetime(2026, 10, 31, 23, 0, tzinfo=UTC)
        for key, n, when in ((a, 2, october), (a, 5, NOW), (t, 3, NOW)):
            for _ in range(n):
                ddb.update_item(**authorise_request(store.keys_table, hash_key(key), Windows.at(when), 60, 10_000))
        spec = "dynamodb:use-"
        now_rows = {r["key_id"]: r["requests"] for r in usage_export(spec, "2026-11", NOW)}
        assert now_rows == {a_id: 5, t_id: 3, idle_id: 0}
        assert {r["key_id"]: r["requests"] for r in usage_export(spec, "2026-10", NOW)} == {a_id: 2, t_id: 0,
                                                                                              idle_id: 0}
        res = CliRunner().invoke(main, ["keys", "usage-export", "--store", spec, "--month", "2026-09"])
        assert res.exit_code == 1 and "removed two months on" in res.output and "Traceback" not in res.output
    finally:
        proc.terminate()
        proc.wait(timeout=10)
