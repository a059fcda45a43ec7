"""The DynamoDB key store's holder side, on moto's server: an organisation's or a researcher's
keys are listed through sparse indexes (no Scan), revocation is a conditional write that
another holder cannot pass, and the edge's one UpdateItem records the usage the dashboard shows."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from dashboard.usage import EdgeItemUsage
from edge.keys import AdminError, hash_key
from edge.stores.dynamodb import (
    DAY_ATTR,
    DAYS_KEPT,
    LAST_USED_ATTR,
    ORG_INDEX,
    OWNER_INDEX,
    DynamoDBKeyStore,
)
from tests.conftest import NOW

from .conftest import boto_client as client
from .test_dynamodb import edge_accounts

_n = iter(range(10_000))


class Calls:
    """Every DynamoDB operation the client sends, by name (botocore's own event hook)."""

    def __init__(self, c: Any):
        self.names: list[str] = []
        c.meta.events.register("before-call.dynamodb.*", self._record)

    def _record(self, model: Any, **_: Any) -> None:
        self.names.append(model.name)


@pytest.fixture
def ddb(endpoint: str) -> DynamoDBKeyStore:
    store = DynamoDBKeyStore(client(endpoint), f"h{next(_n)}-")
    store.create_tables()
    return store


def test_holders_are_listed_and_changed_without_a_scan(ddb: DynamoDBKeyStore):
    calls = Calls(ddb.client)
    a, _ = ddb.create("a", ["risk_scores"], "live", org="ngo", now=NOW, created_by="ann@ngo.example")
    b, _ = ddb.create("b", ["forecasts"], "test", org="ngo", now=NOW + timedelta(seconds=1))
    ddb.create("c", ["risk_scores"], "test", org="other", now=NOW)
    r, _ = ddb.create("r", ["risk_scores"], "test", owner="ada@uni.example", now=NOW)
    rows = ddb.list_for(org="ngo", now=NOW)
    assert [x["id"] for x in rows] == [b, a]  # newest first
    assert rows[1]["created_by"] == "ann@ngo.example" and rows[1]["owner"] is None and rows[1]["hint"].startswith("svc_live_…")
    assert [x["id"] for x in ddb.list_for(owner="ada@uni.example", now=NOW)] == [r]
    ddb.set_org_suspended("ngo", True, NOW)
    ddb.remove_account("ada@uni.example", NOW)
    ddb.revoke(a, NOW, org="ngo")
    assert ddb.get(a, org="ngo", now=NOW)["status"] == "revoked"
    assert "Scan" not in calls.names and "Query" in calls.names


def test_revoke_is_conditional_on_the_holder(ddb: DynamoDBKeyStore):
    kid, key = ddb.create("theirs", ["risk_scores"], "live", org="other", now=NOW)
    own, own_key = ddb.create("own", ["risk_scores"], "live", owner="ada@uni.example", now=NOW)
    for holder in ({"org": "ngo"}, {"owner": "ada@uni.example"}):
        with pytest.raises(AdminError, match="no key"):
            ddb.revoke(kid, NOW, **holder)
    with pytest.raises(AdminError):
        ddb.revoke(own, NOW, org="ngo")
    assert ddb.get(kid, org="ngo") is None and ddb.get(own, owner="bo@x.example") is None
    assert not ddb.lookup(hash_key(key)).revoked and not ddb.lookup(hash_key(own_key)).revoked
    ddb.revoke(own, NOW, owner="ada@uni.example")
    assert ddb.lookup(hash_key(own_key)).revoked


def test_roll_shortens_expiry_but_never_lengthens_it(ddb: DynamoDBKeyStore):
    kid, key = ddb.create("k", ["risk_scores"], "live", org="ngo", expires_on="2099-01-01", now=NOW)
    with pytest.raises(AdminError):
        ddb.shorten_expiry(kid, "2099-02-01", org="ngo")
    with pytest.raises(AdminError):
        ddb.shorten_expiry(kid, "2098-01-01", org="other")
    ddb.shorten_expiry(kid, "2098-01-01", org="ngo")
    assert ddb.lookup(hash_key(key)).expires_on == "2098-01-01"


def test_an_older_table_gains_the_holder_indexes(endpoint: str):
    c = client(endpoint)
    prefix = f"old{next(_n)}-"
    c.create_table(TableName=f"{prefix}keys", BillingMode="PAY_PER_REQUEST",
                   AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                         {"AttributeName": "key_id", "AttributeType": "S"}],
                   KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                   GlobalSecondaryIndexes=[{"IndexName": "by_id", "KeySchema": [{"AttributeName": "key_id", "KeyType": "HASH"}],
                                            "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    store = DynamoDBKeyStore(c, prefix)
    store.create_tables()
    names = {i["IndexName"] for i in c.describe_table(TableName=f"{prefix}keys")["Table"]["GlobalSecondaryIndexes"]}
    assert names == {"by_id", ORG_INDEX, OWNER_INDEX}
    kid, _ = store.create("k", ["risk_scores"], "test", org="ngo", now=NOW)
    assert [r["id"] for r in store.list_for(org="ngo", now=NOW)] == [kid]


def test_the_one_update_records_usage_for_the_dashboard(ddb: DynamoDBKeyStore, endpoint: str):
    kid, key = ddb.create("k", ["risk_scores"], "test", org="ngo", now=NOW)
    accounts = edge_accounts(endpoint, ddb)
    n = 5
    for _ in range(n):
        assert accounts.authorise(hash_key(key), NOW, time.monotonic() + 3).refused is None
    usage = EdgeItemUsage(ddb).read(kid, NOW)
    assert usage.month == n and usage.last_used == NOW.date().isoformat() and usage.days[0] == (NOW.date().isoformat(), n)
    # day counters older than the kept days are dropped by later updates, so the item stays small
    later = NOW + timedelta(days=DAYS_KEPT + 1)
    accounts.authorise(hash_key(key), later, time.monotonic() + 3)
    accounts.authorise(hash_key(key), later, time.monotonic() + 3)
    item = ddb.usage_item(kid)
    days = sorted(a for a in item if a.startswith(DAY_ATTR))
    assert days == [DAY_ATTR + later.date().isoformat()] and item[LAST_USED_ATTR]["S"] == later.date().isoformat()
