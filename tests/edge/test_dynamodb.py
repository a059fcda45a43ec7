"""The DynamoDB key store and counters against a DynamoDB endpoint on 127.0.0.1.

The endpoint is moto's server mode started as a subprocess (`moto_server -H 127.0.0.1`):
it speaks the real wire protocol through boto3, so request shapes, expressions, the
GSI, BatchGetItem and ReturnValues are exercised; what moto cannot show is real
DynamoDB's latency, throttling and TTL timing (see docs/limits.md).
The same endpoint serves S3, so the edge adapter is also run end to end here: pointer
and manifest read from a bucket, keys and counters from DynamoDB.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from edge.aws import Credentials, DynamoDB
from edge.gate import Request, handle
from edge.keys import AdminError, hash_key
from edge.limits import Limiter
from edge.release import LocalReleases
from edge.stores.dynamodb import DynamoDBCounter, DynamoDBKeyStore, EdgeAccounts
from pipeline.cli import main as cli
from tests.conftest import NOW

from .conftest import CREDS
from .conftest import boto_client as client

_n = iter(range(10_000))


@pytest.fixture
def ddb_store(endpoint: str) -> DynamoDBKeyStore:
    store = DynamoDBKeyStore(client(endpoint), f"t{next(_n)}-")
    store.create_tables()
    return store


def test_tables_have_the_documented_shape_and_creation_is_repeatable(ddb_store: DynamoDBKeyStore):
    c = ddb_store.client
    keys = c.describe_table(TableName=ddb_store.keys_table)["Table"]
    assert keys["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert keys["GlobalSecondaryIndexes"][0]["IndexName"] == "by_id"
    ttl = c.describe_time_to_live(TableName=ddb_store.counters_table_name)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "expires_at" and ttl["TimeToLiveStatus"] in ("ENABLED", "ENABLING")
    ddb_store.create_tables()  # a second run describes first and changes nothing
    assert c.describe_time_to_live(TableName=ddb_store.counters_table_name)["TimeToLiveDescription"] == ttl


def test_lookup_and_every_401_state(ddb_store: DynamoDBKeyStore):
    kid, key = ddb_store.create("d", ["risk_scores", "forecasts"], "live", expires_on="2026-12-01",
                                owner="ann", org="ngo", per_minute=5, monthly=9, now=NOW)
    rec = ddb_store.lookup(hash_key(key))
    assert rec is not None and rec.id == kid and rec.kind == "live"
    assert rec.scopes == ("forecasts", "risk_scores") and rec.per_minute == 5 and rec.monthly == 9
    assert rec.status(NOW) == "active" and rec.status(NOW + timedelta(days=10)) == "expired"
    assert ddb_store.lookup(hash_key("svc_live_" + "x" * 32)) is None
    ddb_store.set_org_suspended("ngo", True)
    assert ddb_store.lookup(hash_key(key)).status(NOW) == "org_suspended"
    ddb_store.set_org_suspended("ngo", False)
    assert ddb_store.lookup(hash_key(key)).status(NOW) == "active"
    ddb_store.remove_account("ann")
    assert ddb_store.lookup(hash_key(key)).status(NOW) == "owner_removed"
    ddb_store.revoke(kid)
    assert ddb_store.lookup(hash_key(key)).status(NOW) == "revoked"
    with pytest.raises(AdminError):
        ddb_store.revoke("key_nope")
    with pytest.raises(AdminError):
        ddb_store.create("x", ["bogus"], "live")
    with pytest.raises(AdminError):
        ddb_store.create("x", ["risk_scores"], "live", owner="ann")  # removed accounts own nothing new


def test_key_is_stored_only_as_its_hash(ddb_store: DynamoDBKeyStore):
    _, key = ddb_store.create("h", ["risk_scores"], "test", now=NOW)
    dump = orjson.dumps(ddb_store.client.scan(TableName=ddb_store.keys_table)["Items"]).decode()
    assert key not in dump and key[-4:] in dump and hash_key(key) in dump
    rows = ddb_store.list(NOW)
    assert len(rows) == 1 and rows[0]["hint"] == f"svc_test_…{key[-4:]}"


def test_counter_returns_each_caller_its_own_value(ddb_store: DynamoDBKeyStore, endpoint: str):
    """Four independent clients, interleaved: each increment returns the next value, TTL set.

    Exactness under *simultaneous* requests is DynamoDB's guarantee (UpdateItem is atomic
    per item); moto's server is not atomic under concurrent threads — we saw it lose an
    update with 8 threads — so that part cannot be tested here (docs/deploy.md says so).
    """
    counters = [DynamoDBCounter((client(endpoint), ddb_store.counters_table_name)) for _ in range(4)]
    got = [counters[i % 4].incr("w", 2_000_000_000) for i in range(40)]
    assert got == list(range(1, 41))
    item = ddb_store.client.get_item(TableName=ddb_store.counters_table_name, Key={"name": {"S": "w"}})["Item"]
    assert item["expires_at"] == {"N": "2000000000"} and item["n"] == {"N": "40"}
    assert DynamoDBCounter(ddb_store.counters_table).incr("other", 5) == 1  # windows are counted apart


def test_gate_with_dynamodb_limits(ddb_store: DynamoDBKeyStore, release_root: Path):
    release = LocalReleases(release_root).current()
    lim = Limiter(DynamoDBCounter(ddb_store.counters_table))
    _, key = ddb_store.create("g", ["risk_scores"], "live", per_minute=3, monthly=100, now=NOW)
    req = Request("GET", "/v1/periods", "", {"authorization": f"Bearer {key}"})
    statuses = [handle(req, NOW, ddb_store, release, lim).status for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]


def test_cli_against_dynamodb(endpoint: str, monkeypatch: pytest.MonkeyPatch):
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.delenv("MALARIA_RISK_REGION", raising=False)
    prefix = f"cli{next(_n)}-"
    unset = CliRunner().invoke(cli, ["keys", "list", "--store", f"dynamodb:{prefix}"])
    assert unset.exit_code == 1 and "MALARIA_RISK_REGION" in unset.output  # no silent us-east-1
    assert "Traceback" not in unset.output
    monkeypatch.setenv("MALARIA_RISK_REGION", "us-east-1")
    DynamoDBKeyStore(client(endpoint), prefix).create_tables()
    spec = f"dynamodb:{prefix}"
    runner = CliRunner()
    # staff changes are audited in the dashboard's tables: without them nothing is changed
    refused = runner.invoke(cli, ["keys", "create", "--store", spec, "--name", "c", "--scope", "risk_scores"])
    assert refused.exit_code == 1 and "deploy/dashboard.py tables" in refused.output
    assert DynamoDBKeyStore(client(endpoint), prefix).list_for(org="ngo") == []
    from dashboard.dynamodb import DynamoDBDashboardStore

    DynamoDBDashboardStore(client(endpoint), prefix).create_tables()
    made = runner.invoke(cli, ["keys", "create", "--store", spec, "--name", "c", "--scope", "risk_scores",
                               "--org", "ngo"])
    assert made.exit_code == 0, made.output
    key = made.stdout.strip().splitlines()[-1]
    listed = runner.invoke(cli, ["keys", "list", "--store", spec])
    kid = listed.stdout.split("\t")[0]
    assert listed.exit_code == 0 and key not in listed.stdout and kid.startswith("key_")
    assert runner.invoke(cli, ["orgs", "suspend", "ngo", "--store", spec]).exit_code == 0
    store = DynamoDBKeyStore(client(endpoint), prefix)
    assert store.lookup(hash_key(key)).org_suspended
    assert runner.invoke(cli, ["keys", "revoke", kid, "--store", spec]).exit_code == 0
    assert store.lookup(hash_key(key)).revoked
    bad = runner.invoke(cli, ["keys", "revoke", "key_nothing", "--store", spec])
    assert bad.exit_code != 0 and "no key with id" in bad.output
    audit = DynamoDBDashboardStore(client(endpoint), prefix).audit(org="ngo")
    assert [r["action"] for r in audit] == ["key_revoked", "org_suspended", "key_created"]


def edge_accounts(endpoint: str, store: DynamoDBKeyStore, per_minute: int = 60, monthly: int = 10_000) -> EdgeAccounts:
    creds = Credentials(CREDS["AWS_ACCESS_KEY_ID"], CREDS["AWS_SECRET_ACCESS_KEY"])
    return EdgeAccounts(DynamoDB("us-east-1", lambda: creds, endpoint), store.prefix, per_minute, monthly)


def test_flags_are_copied_onto_keys_for_the_one_call(ddb_store: DynamoDBKeyStore, endpoint: str):
    """Suspension and removal reach existing keys; a key made for a suspended org starts suspended."""
    _, before = ddb_store.create("a", ["risk_scores"], "live", org="ngo", owner="bo", now=NOW)
    ddb_store.set_org_suspended("ngo", True)
    _, after = ddb_store.create("b", ["risk_scores"], "live", org="ngo", now=NOW)
    accounts = edge_accounts(endpoint, ddb_store)
    for key in (before, after):
        out = accounts.authorise(hash_key(key), NOW, time.monotonic() + 3)
        assert out.refused == "key" and out.record is not None and out.record.status(NOW) == "org_suspended"
    ddb_store.set_org_suspended("ngo", False)
    accounts.refusal_ttl = 0
    assert accounts.authorise(hash_key(after), NOW, time.monotonic() + 3).refused is None
    ddb_store.remove_account("bo")
    assert accounts.authorise(hash_key(before), NOW, time.monotonic() + 3).record.status(NOW) == "owner_removed"


def test_one_call_counts_exactly_the_limit_across_clients(ddb_store: DynamoDBKeyStore, endpoint: str):
    """Four function instances, interleaved: exactly `limit` requests of a window are counted.

    Simultaneous exactness rests on DynamoDB applying conditional updates of one item one
    after another; moto's server is not atomic under concurrent threads, so it is not shown here.
    """
    _, key = ddb_store.create("x", ["risk_scores"], "live", per_minute=7, monthly=10, now=NOW)
    instances = [edge_accounts(endpoint, ddb_store) for _ in range(4)]
    outcomes = [instances[i % 4].authorise(hash_key(key), NOW, time.monotonic() + 3) for i in range(12)]
    assert [o.minute for o in outcomes if o.refused is None] == list(range(1, 8))
    assert [o.refused for o in outcomes[7:]] == ["minute"] * 5
    later = NOW + timedelta(minutes=1)
    rest = [instances[i % 4].authorise(hash_key(key), later, time.monotonic() + 3) for i in range(5)]
    assert [o.refused for o in rest] == [None, None, None, "month", "month"]  # 7 + 3 = the month's 10
    assert [o.month for o in rest[:3]] == [8, 9, 10]
