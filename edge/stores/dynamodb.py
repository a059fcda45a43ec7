"""Keys and limit counters on DynamoDB: the store the CDN edge reads.

Same interfaces as the SQLite pair — `lookup` for the gate, the admin methods for
`malaria-risk keys/orgs/accounts --store dynamodb:PREFIX`, and `incr` for limits — so
the gate cannot tell them apart.

Two tables (created by deploy/aws.py):

- `<prefix>keys`, partition key `pk` (S). One table, three item kinds:
  `key#<sha256>` (a key: id, name, kind, scopes, expiry, revocation, owner, org,
  limits, hint), `org#<org>` (suspended_at) and `account#<account>` (removed_at).
  A sparse global secondary index `by_id` on `key_id` finds a key by id for
  `keys revoke`. A lookup is one strongly consistent GetItem, plus one BatchGetItem
  for the owner and org when the key has them.
- `<prefix>counters`, partition key `name` (S), `n` (N), and a TTL attribute
  `expires_at` (epoch seconds). An increment is one UpdateItem `ADD n :one` with
  ReturnValues=UPDATED_NEW: DynamoDB applies concurrent ADDs one after another and
  returns each caller its own new value, which is what makes limits exact across every
  edge location at once. TTL deletion is lazy (it may lag by hours), which is harmless
  because a window's name contains its minute or month and is never reused.

Only boto3 (present in the Lambda runtime); the client is passed in so tests can aim it
at a loopback endpoint.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from ..keys import PREFIXES, AdminError, KeyRecord, hash_key, new_key, validate_new_key
from ..routes import SCOPES

ID_INDEX = "by_id"


def _s(item: dict[str, Any], name: str) -> str | None:
    v = item.get(name)
    return None if v is None or "NULL" in v else v.get("S")


def _n(item: dict[str, Any], name: str) -> int | None:
    v = item.get(name)
    return None if v is None or "NULL" in v else int(v["N"])


class DynamoDBKeyStore:
    def __init__(self, client: Any, table_prefix: str):
        self.client = client
        self.prefix = table_prefix
        self.keys_table = f"{table_prefix}keys"
        self.counters_table_name = f"{table_prefix}counters"

    @classmethod
    def from_env(cls, table_prefix: str) -> DynamoDBKeyStore:
        """For the CLI: region and endpoint from the usual AWS variables (AWS_ENDPOINT_URL_DYNAMODB too)."""
        import boto3

        kwargs: dict[str, Any] = {}
        endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
        if endpoint:
            kwargs["endpoint_url"] = endpoint
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        return cls(boto3.client("dynamodb", region_name=region, **kwargs), table_prefix)

    @property
    def counters_table(self) -> tuple[Any, str]:
        return self.client, self.counters_table_name

    # -- tables (used by deploy/aws.py and the tests) -----------------------------------
    def create_tables(self, billing: str = "PAY_PER_REQUEST") -> None:
        existing = set(self.client.list_tables().get("TableNames", []))
        if self.keys_table not in existing:
            self.client.create_table(
                TableName=self.keys_table,
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                      {"AttributeName": "key_id", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                GlobalSecondaryIndexes=[{
                    "IndexName": ID_INDEX,
                    "KeySchema": [{"AttributeName": "key_id", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }],
                BillingMode=billing,
            )
        if self.counters_table_name not in existing:
            self.client.create_table(
                TableName=self.counters_table_name,
                AttributeDefinitions=[{"AttributeName": "name", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "name", "KeyType": "HASH"}],
                BillingMode=billing,
            )
        for table in (self.keys_table, self.counters_table_name):
            self.client.get_waiter("table_exists").wait(TableName=table)
        self.client.update_time_to_live(
            TableName=self.counters_table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
        )

    # -- read side (the gate) -------------------------------------------------------------
    def lookup(self, key_hash: str) -> KeyRecord | None:
        got = self.client.get_item(TableName=self.keys_table, Key={"pk": {"S": f"key#{key_hash}"}},
                                   ConsistentRead=True)
        item = got.get("Item")
        if item is None:
            return None
        owner, org = _s(item, "owner"), _s(item, "org")
        wanted = []
        if owner:
            wanted.append({"pk": {"S": f"account#{owner}"}})
        if org:
            wanted.append({"pk": {"S": f"org#{org}"}})
        removed = suspended = False
        if wanted:
            res = self.client.batch_get_item(RequestItems={self.keys_table: {"Keys": wanted, "ConsistentRead": True}})
            for p in res.get("Responses", {}).get(self.keys_table, []):
                pk = p["pk"]["S"]
                if pk.startswith("account#") and _s(p, "removed_at"):
                    removed = True
                if pk.startswith("org#") and _s(p, "suspended_at"):
                    suspended = True
        scopes = _s(item, "scopes") or ""
        return KeyRecord(
            id=_s(item, "key_id") or "", name=_s(item, "name") or "", kind=_s(item, "kind") or "test",
            scopes=tuple(scopes.split()), revoked=_s(item, "revoked_at") is not None,
            expires_on=_s(item, "expires_on"), owner=owner, org=org,
            owner_removed=removed, org_suspended=suspended,
            per_minute=_n(item, "per_minute"), monthly=_n(item, "monthly"),
        )

    # -- admin side -------------------------------------------------------------------------
    def create(self, name: str, scopes: list[str], kind: str = "test", expires_on: str | None = None,
               owner: str | None = None, org: str | None = None, per_minute: int | None = None,
               monthly: int | None = None, now: datetime | None = None) -> tuple[str, str]:
        """Same rules and messages as SQLiteKeyStore.create; the key itself is never stored."""
        now = now or datetime.now(UTC)
        validate_new_key(name, scopes, kind, expires_on, per_minute, monthly, now, SCOPES)
        if owner is not None and self._flag(f"account#{owner}", "removed_at"):
            raise AdminError(f"account {owner!r} was removed; it cannot own new keys")
        key = new_key(kind)
        digest = hash_key(key)
        kid = "key_" + digest[:10]
        item: dict[str, Any] = {
            "pk": {"S": f"key#{digest}"}, "key_id": {"S": kid}, "name": {"S": name}, "kind": {"S": kind},
            "scopes": {"S": " ".join(sorted(set(scopes)))}, "created_at": {"S": now.isoformat(timespec="seconds")},
            "prefix": {"S": PREFIXES[kind]}, "last4": {"S": key[-4:]},
        }
        for attr, value in (("expires_on", expires_on), ("owner", owner), ("org", org)):
            if value is not None:
                item[attr] = {"S": value}
        for attr, num in (("per_minute", per_minute), ("monthly", monthly)):
            if num is not None:
                item[attr] = {"N": str(num)}
        self.client.put_item(TableName=self.keys_table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        return kid, key

    def _flag(self, pk: str, attr: str) -> bool:
        item = self.client.get_item(TableName=self.keys_table, Key={"pk": {"S": pk}}, ConsistentRead=True).get("Item")
        return item is not None and _s(item, attr) is not None

    def _key_items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.keys_table, "ConsistentRead": True}
        while True:
            page = self.client.scan(**kwargs)
            items.extend(i for i in page.get("Items", []) if i["pk"]["S"].startswith("key#"))
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def list(self, now: datetime | None = None) -> list[dict]:
        now = now or datetime.now(UTC)
        rows = []
        for item in sorted(self._key_items(), key=lambda i: (_s(i, "created_at") or "", _s(i, "key_id") or "")):
            record = self.lookup(item["pk"]["S"][len("key#"):])
            assert record is not None
            rows.append({
                "id": record.id, "name": record.name, "kind": record.kind, "scopes": _s(item, "scopes") or "",
                "status": record.status(now), "owner": record.owner, "org": record.org,
                "expires_on": record.expires_on, "hint": f"{_s(item, 'prefix')}…{_s(item, 'last4')}",
            })
        return rows

    def revoke(self, key_id: str, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        found = self.client.query(TableName=self.keys_table, IndexName=ID_INDEX,
                                  KeyConditionExpression="key_id = :k",
                                  ExpressionAttributeValues={":k": {"S": key_id}}).get("Items", [])
        if not found:
            raise AdminError(f"no key with id {key_id!r} (see `keys list`)")
        for item in found:
            self.client.update_item(
                TableName=self.keys_table, Key={"pk": item["pk"]},
                UpdateExpression="SET revoked_at = if_not_exists(revoked_at, :t)",
                ExpressionAttributeValues={":t": {"S": now.isoformat(timespec="seconds")}},
            )

    def _owns_keys(self, attr: str, value: str) -> bool:
        return any(_s(i, attr) == value for i in self._key_items())

    def set_org_suspended(self, org: str, suspended: bool, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        known = self._owns_keys("org", org) or self.client.get_item(
            TableName=self.keys_table, Key={"pk": {"S": f"org#{org}"}}).get("Item") is not None
        if not known:
            raise AdminError(f"no organisation {org!r} owns any key")
        if suspended:
            self.client.put_item(TableName=self.keys_table, Item={
                "pk": {"S": f"org#{org}"}, "suspended_at": {"S": now.isoformat(timespec="seconds")}})
        else:
            self.client.put_item(TableName=self.keys_table, Item={"pk": {"S": f"org#{org}"}})

    def remove_account(self, account: str, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        if not self._owns_keys("owner", account):
            raise AdminError(f"no account {account!r} owns any key")
        self.client.put_item(TableName=self.keys_table, Item={
            "pk": {"S": f"account#{account}"}, "removed_at": {"S": now.isoformat(timespec="seconds")}})


class DynamoDBCounter:
    """`incr` as one atomic UpdateItem ADD; TTL on `expires_at` clears old windows."""

    def __init__(self, table: tuple[Any, str]):
        self.client, self.table = table

    def incr(self, name: str, expires_at: int) -> int:
        got = self.client.update_item(
            TableName=self.table, Key={"name": {"S": name}},
            UpdateExpression="ADD n :one SET expires_at = :e",
            ExpressionAttributeValues={":one": {"N": "1"}, ":e": {"N": str(expires_at)}},
            ReturnValues="UPDATED_NEW",
        )
        return int(got["Attributes"]["n"]["N"])

    def sweep(self, before: int) -> None:
        """DynamoDB's TTL deletes expired windows itself."""
