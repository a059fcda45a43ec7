"""Keys and limit counters on DynamoDB: the store the CDN edge reads.

Same interfaces as the SQLite pair — `lookup` for the gate, the admin methods for
`malaria-risk keys/orgs/accounts --store dynamodb:PREFIX`, and `incr` for limits — so
the gate cannot tell them apart. The admin side takes a boto3 client (the CLI has it);
the edge side (`EdgeAccounts`) speaks the JSON protocol through `edge.aws`, standard
library only.

Tables (created by deploy/aws.py):

- `<prefix>keys`, partition key `pk` (S). Three item kinds: `key#<sha256>` (a key: id,
  name, kind, scopes, expiry, revocation, owner, org, limits, hint, and the flags
  `owner_removed_at` / `org_suspended_at` copied from its owner and org), `org#<org>`
  (suspended_at) and `account#<account>` (removed_at). A sparse global secondary index
  `by_id` on `key_id` finds a key by id for `keys revoke`; sparse indexes `by_org` (an
  organisation's keys: `org`, `created_at`) and `by_owner` (a researcher's own keys: `owner`,
  `created_at`) list a holder's keys without reading the table. They project the key's
  descriptive attributes only, never its counters, so counting a request never writes an index.
- `<prefix>counters`, partition key `name` (S), `n` (N), TTL attribute `expires_at`:
  the counters of the local server when it runs on DynamoDB (`DynamoDBCounter`).

At the edge an authorised request costs **one** call: a conditional `UpdateItem` on the
key's own item that adds one to its minute and month counters (attributes
`cm_<minute index>` and `cM_<YYYY-MM>`) only if the key is active and both counters are
under their limits, returning the whole item (`ALL_NEW`) — or, when the condition fails,
the item as it was (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), which says why:
no such key, revoked, expired, owner removed, org suspended, minute or month used up.
DynamoDB applies conditional updates of one item one after another, so exactly `limit`
requests of a window are accepted across every edge location. Old windows are removed
by later updates of the same item (see `EdgeAccounts`). Design notes: docs/deploy.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from ..keys import PREFIXES, AdminError, KeyRecord, hash_key, key_id_of, new_key, validate_new_key
from ..routes import SCOPES

if TYPE_CHECKING:
    from ..gate import LimitDecision

ID_INDEX = "by_id"
ORG_INDEX = "by_org"
OWNER_INDEX = "by_owner"
# what the holder indexes carry: everything a key list shows, nothing a request changes
LISTED = ["key_id", "name", "kind", "scopes", "expires_on", "revoked_at", "owner", "org", "prefix", "last4",
          "created_by", "owner_removed_at", "org_suspended_at"]


def _holder_index(name: str, attr: str) -> dict[str, Any]:
    return {"IndexName": name,
            "KeySchema": [{"AttributeName": attr, "KeyType": "HASH"}, {"AttributeName": "created_at", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": LISTED}}


def _s(item: Mapping[str, Any], name: str) -> str | None:
    v = item.get(name)
    return None if v is None or "NULL" in v else v.get("S")


def _n(item: Mapping[str, Any], name: str) -> int | None:
    v = item.get(name)
    return None if v is None or "NULL" in v else int(v["N"])


def record_from_item(item: Mapping[str, Any]) -> KeyRecord:
    """A key item (with its copied owner/org flags) as the gate's KeyRecord."""
    scopes = _s(item, "scopes") or ""
    return KeyRecord(
        id=_s(item, "key_id") or "", name=_s(item, "name") or "", kind=_s(item, "kind") or "test",
        scopes=tuple(scopes.split()), revoked=_s(item, "revoked_at") is not None,
        expires_on=_s(item, "expires_on"), owner=_s(item, "owner"), org=_s(item, "org"),
        owner_removed=_s(item, "owner_removed_at") is not None,
        org_suspended=_s(item, "org_suspended_at") is not None,
        per_minute=_n(item, "per_minute"), monthly=_n(item, "monthly"),
    )


def client_from_env() -> Any:
    """A boto3 DynamoDB client for the CLI and the dashboard: region from $MALARIA_RISK_REGION
    (the one region setting, no silent default: edge/settings.py), endpoint from
    AWS_ENDPOINT_URL_DYNAMODB if set."""
    import boto3

    from ..settings import home_region

    kwargs: dict[str, Any] = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    return boto3.client("dynamodb", region_name=home_region(), **kwargs)


class DynamoDBKeyStore:
    def __init__(self, client: Any, table_prefix: str):
        self.client = client
        self.prefix = table_prefix
        self.keys_table = f"{table_prefix}keys"
        self.counters_table_name = f"{table_prefix}counters"

    @classmethod
    def from_env(cls, table_prefix: str) -> DynamoDBKeyStore:
        from ..settings import SettingsError

        try:
            return cls(client_from_env(), table_prefix)
        except SettingsError as e:
            raise AdminError(str(e)) from None

    @property
    def counters_table(self) -> tuple[Any, str]:
        return self.client, self.counters_table_name

    # -- tables (used by deploy/aws.py and the tests) -----------------------------------
    def create_tables(self, billing: str = "PAY_PER_REQUEST") -> None:
        existing = set(self.client.list_tables().get("TableNames", []))
        if self.keys_table not in existing:
            self.client.create_table(
                TableName=self.keys_table,
                AttributeDefinitions=self._attribute_definitions(),
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                GlobalSecondaryIndexes=[{
                    "IndexName": ID_INDEX,
                    "KeySchema": [{"AttributeName": "key_id", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }, _holder_index(ORG_INDEX, "org"), _holder_index(OWNER_INDEX, "owner")],
                BillingMode=billing,
            )
        else:
            self._add_holder_indexes()
        if self.counters_table_name not in existing:
            self.client.create_table(
                TableName=self.counters_table_name,
                AttributeDefinitions=[{"AttributeName": "name", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "name", "KeyType": "HASH"}],
                BillingMode=billing,
            )
        for table in (self.keys_table, self.counters_table_name):
            self.client.get_waiter("table_exists").wait(TableName=table)
        # describe before update: DynamoDB rejects enabling TTL that is already enabled
        ttl = self.client.describe_time_to_live(TableName=self.counters_table_name).get("TimeToLiveDescription", {})
        if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
            self.client.update_time_to_live(
                TableName=self.counters_table_name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
            )
        elif ttl.get("AttributeName") != "expires_at":
            raise AdminError(f"{self.counters_table_name} has TTL on {ttl.get('AttributeName')!r}, "
                             "not expires_at; fix it by hand")

    @staticmethod
    def _attribute_definitions() -> list[dict[str, str]]:
        return [{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "key_id", "org", "owner", "created_at")]

    def _add_holder_indexes(self) -> None:
        """A keys table made before the holder indexes gains them (one index per update, as DynamoDB requires)."""
        for name, attr in ((ORG_INDEX, "org"), (OWNER_INDEX, "owner")):
            table = self.client.describe_table(TableName=self.keys_table)["Table"]
            if any(i["IndexName"] == name for i in table.get("GlobalSecondaryIndexes", [])):
                continue
            self.client.update_table(TableName=self.keys_table, AttributeDefinitions=self._attribute_definitions(),
                                     GlobalSecondaryIndexUpdates=[{"Create": _holder_index(name, attr)}])
            self.client.get_waiter("table_exists").wait(TableName=self.keys_table)

    # -- read side (the gate) -------------------------------------------------------------
    def lookup(self, key_hash: str) -> KeyRecord | None:
        """One strongly consistent GetItem: owner and org flags are copied onto the key item."""
        got = self.client.get_item(TableName=self.keys_table, Key={"pk": {"S": f"key#{key_hash}"}},
                                   ConsistentRead=True)
        item = got.get("Item")
        return None if item is None else record_from_item(item)

    # -- admin side -------------------------------------------------------------------------
    def create(self, name: str, scopes: list[str], kind: str = "test", expires_on: str | None = None,
               owner: str | None = None, org: str | None = None, per_minute: int | None = None,
               monthly: int | None = None, now: datetime | None = None,
               created_by: str | None = None, key: str | None = None) -> tuple[str, str]:
        """Same rules and messages as SQLiteKeyStore.create; the key itself is never stored."""
        now = now or datetime.now(UTC)
        validate_new_key(name, scopes, kind, expires_on, per_minute, monthly, now, SCOPES)
        if owner is not None and self._flag(f"account#{owner}", "removed_at"):
            raise AdminError(f"account {owner!r} was removed; it cannot own new keys")
        key = key or new_key(kind)
        digest = hash_key(key)
        kid = key_id_of(key)
        item: dict[str, Any] = {
            "pk": {"S": f"key#{digest}"}, "key_id": {"S": kid}, "name": {"S": name}, "kind": {"S": kind},
            "scopes": {"S": " ".join(sorted(set(scopes)))}, "created_at": {"S": now.isoformat(timespec="seconds")},
            "prefix": {"S": PREFIXES[kind]}, "last4": {"S": key[-4:]},
        }
        for attr, value in (("expires_on", expires_on), ("owner", owner), ("org", org), ("created_by", created_by)):
            if value is not None:
                item[attr] = {"S": value}
        for attr, num in (("per_minute", per_minute), ("monthly", monthly)):
            if num is not None:
                item[attr] = {"N": str(num)}
        if org is not None:
            suspended = self._attr(f"org#{org}", "suspended_at")
            if suspended is not None:
                item["org_suspended_at"] = {"S": suspended}
        self.client.put_item(TableName=self.keys_table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        return kid, key

    def _flag(self, pk: str, attr: str) -> bool:
        return self._attr(pk, attr) is not None

    def _attr(self, pk: str, attr: str) -> str | None:
        item = self.client.get_item(TableName=self.keys_table, Key={"pk": {"S": pk}}, ConsistentRead=True).get("Item")
        return None if item is None else _s(item, attr)

    def _copy_flag(self, attr: str, value: str, flag: str, stamp: str | None) -> None:
        """Set (or clear) `flag` on every key whose `attr` is `value`: the edge reads only the key item."""
        for item in self._holder_items(attr, value):
            if stamp is None:
                self.client.update_item(TableName=self.keys_table, Key={"pk": item["pk"]},
                                        UpdateExpression="REMOVE #f", ExpressionAttributeNames={"#f": flag})
            else:
                self.client.update_item(TableName=self.keys_table, Key={"pk": item["pk"]},
                                        UpdateExpression="SET #f = if_not_exists(#f, :t)",
                                        ExpressionAttributeNames={"#f": flag},
                                        ExpressionAttributeValues={":t": {"S": stamp}})

    def _key_items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.keys_table, "ConsistentRead": True}
        while True:
            page = self.client.scan(**kwargs)
            items.extend(i for i in page.get("Items", []) if i["pk"]["S"].startswith("key#"))
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _holder_items(self, attr: str, value: str) -> list[dict[str, Any]]:
        """Every key item of one organisation (`attr` "org") or owner, newest first, through its sparse index."""
        index = ORG_INDEX if attr == "org" else OWNER_INDEX
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.keys_table, "IndexName": index, "ScanIndexForward": False,
                                  "KeyConditionExpression": "#h = :v", "ExpressionAttributeNames": {"#h": attr},
                                  "ExpressionAttributeValues": {":v": {"S": value}}}
        while True:
            page = self.client.query(**kwargs)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def list_for(self, *, org: str | None = None, owner: str | None = None,
                 now: datetime | None = None) -> list[dict[str, Any]]:
        """An organisation's keys, or an account's own keys (not its organisations'), newest first.

        Read from an index, which is eventually consistent: a key created a moment ago may be
        missing for a moment, which is why the dashboard shows a new key from the create call.
        """
        now = now or datetime.now(UTC)
        if org is not None:
            items = self._holder_items("org", org)
        elif owner is not None:
            items = [i for i in self._holder_items("owner", owner) if _s(i, "org") is None]
        else:
            raise AdminError("list_for needs an organisation or an owner")
        return [_row(i, now) for i in items]

    def get(self, key_id: str, *, org: str | None = None, owner: str | None = None,
            now: datetime | None = None) -> dict[str, Any] | None:
        """One key's row, strongly consistent, or None when there is none or it is not the holder's."""
        item = self._item_by_id(key_id)
        if item is None or not _held_by(item, org, owner):
            return None
        return _row(item, now or datetime.now(UTC))

    def _item_by_id(self, key_id: str) -> dict[str, Any] | None:
        found = self.client.query(TableName=self.keys_table, IndexName=ID_INDEX,
                                  KeyConditionExpression="key_id = :k",
                                  ExpressionAttributeValues={":k": {"S": key_id}}).get("Items", [])
        if not found:
            return None
        item: dict[str, Any] | None = self.client.get_item(TableName=self.keys_table, Key={"pk": found[0]["pk"]},
                                                           ConsistentRead=True).get("Item")
        return item

    def usage_item(self, key_id: str) -> dict[str, Any] | None:
        """The key's whole item, with the counters the edge keeps on it (see `usage_from_item`)."""
        return self._item_by_id(key_id)

    def list(self, now: datetime | None = None) -> list[dict[str, Any]]:
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

    def revoke(self, key_id: str, now: datetime | None = None, *, org: str | None = None,
               owner: str | None = None) -> None:
        """Revoke a key; with `org` (or `owner`) a conditional write that touches only that holder's key,
        so an id of someone else's key answers exactly like an unknown one."""
        now = now or datetime.now(UTC)
        found = self.client.query(TableName=self.keys_table, IndexName=ID_INDEX,
                                  KeyConditionExpression="key_id = :k",
                                  ExpressionAttributeValues={":k": {"S": key_id}}).get("Items", [])
        if not found:
            raise AdminError(f"no key with id {key_id!r} (see `keys list`)")
        condition, names, values = _holder_condition(org, owner)
        for item in found:
            try:
                self.client.update_item(
                    TableName=self.keys_table, Key={"pk": item["pk"]},
                    UpdateExpression="SET revoked_at = if_not_exists(revoked_at, :t)",
                    ConditionExpression=condition, **({"ExpressionAttributeNames": names} if names else {}),
                    ExpressionAttributeValues={":t": {"S": now.isoformat(timespec="seconds")}, **values},
                )
            except self.client.exceptions.ConditionalCheckFailedException:
                raise AdminError(f"no key with id {key_id!r} (see `keys list`)") from None

    def shorten_expiry(self, key_id: str, expires_on: str, *, org: str | None = None,
                       owner: str | None = None) -> None:
        """Bring a key's expiry forward (a roll's grace period), never later than it was; conditional like revoke."""
        item = self._item_by_id(key_id)
        if item is None:
            raise AdminError(f"no key with id {key_id!r} (see `keys list`)")
        condition, names, values = _holder_condition(org, owner)
        try:
            self.client.update_item(
                TableName=self.keys_table, Key={"pk": item["pk"]}, UpdateExpression="SET #ex = :e",
                ConditionExpression=condition + " AND attribute_not_exists(revoked_at)"
                                                " AND (attribute_not_exists(#ex) OR #ex >= :e)",
                ExpressionAttributeNames={**names, "#ex": "expires_on"},
                ExpressionAttributeValues={":e": {"S": expires_on}, **values},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            raise AdminError(f"key {key_id!r} cannot be given an expiry of {expires_on}") from None

    def _owns_keys(self, attr: str, value: str) -> bool:
        return bool(self._holder_items(attr, value))

    def set_org_suspended(self, org: str, suspended: bool, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        known = self._owns_keys("org", org) or self.client.get_item(
            TableName=self.keys_table, Key={"pk": {"S": f"org#{org}"}}).get("Item") is not None
        if not known:
            raise AdminError(f"no organisation {org!r} owns any key")
        stamp = now.isoformat(timespec="seconds")
        if suspended:
            self.client.put_item(TableName=self.keys_table, Item={
                "pk": {"S": f"org#{org}"}, "suspended_at": {"S": stamp}})
        else:
            self.client.put_item(TableName=self.keys_table, Item={"pk": {"S": f"org#{org}"}})
        self._copy_flag("org", org, "org_suspended_at", stamp if suspended else None)

    def remove_account(self, account: str, now: datetime | None = None, *, require_keys: bool = True) -> None:
        now = now or datetime.now(UTC)
        if require_keys and not self._owns_keys("owner", account):
            raise AdminError(f"no account {account!r} owns any key")
        stamp = now.isoformat(timespec="seconds")
        self.client.put_item(TableName=self.keys_table, Item={
            "pk": {"S": f"account#{account}"}, "removed_at": {"S": stamp}})
        self._copy_flag("owner", account, "owner_removed_at", stamp)


def _holder_condition(org: str | None, owner: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The condition that limits a write to one holder's key (none: any existing key, the operator)."""
    if org is not None:
        return "#org = :holder", {"#org": "org"}, {":holder": {"S": org}}
    if owner is not None:
        return ("#owner = :holder AND attribute_not_exists(#org)", {"#owner": "owner", "#org": "org"},
                {":holder": {"S": owner}})
    return "attribute_exists(pk)", {}, {}


def _held_by(item: Mapping[str, Any], org: str | None, owner: str | None) -> bool:
    if org is not None:
        return _s(item, "org") == org
    if owner is not None:
        return _s(item, "owner") == owner and _s(item, "org") is None
    return True


def _row(item: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """A key item (or its index projection) as the row the dashboard and `keys list` show."""
    record = record_from_item(item)
    return {
        "id": record.id, "name": record.name, "kind": record.kind, "scopes": _s(item, "scopes") or "",
        "status": record.status(now), "owner": record.owner, "org": record.org, "expires_on": record.expires_on,
        "hint": f"{_s(item, 'prefix')}…{_s(item, 'last4')}", "created_at": _s(item, "created_at"),
        "created_by": _s(item, "created_by"), "revoked_at": _s(item, "revoked_at"),
    }


class DynamoDBCounter:
    """`incr` as one atomic UpdateItem ADD; TTL on `expires_at` clears old windows.

    `key` maps a counter's name to its item key and `ttl` names the table's TTL attribute, so
    a table with another key schema (the dashboard's `pk`/`sk`, TTL on `ttl`) can hold counters too.
    """

    def __init__(self, table: tuple[Any, str], key: Callable[[str], dict[str, Any]] | None = None,
                 ttl: str = "expires_at"):
        self.client, self.table = table
        self.key = key or (lambda name: {"name": {"S": name}})
        self.ttl = ttl

    def incr(self, name: str, expires_at: int) -> int:
        got = self.client.update_item(
            TableName=self.table, Key=self.key(name),
            UpdateExpression="ADD n :one SET #ttl = :e", ExpressionAttributeNames={"#ttl": self.ttl},
            ExpressionAttributeValues={":one": {"N": "1"}, ":e": {"N": str(expires_at)}},
            ReturnValues="UPDATED_NEW",
        )
        return int(got["Attributes"]["n"]["N"])

    def value(self, name: str) -> int:
        """The current count (0 if none); for the operator's commands, not the hot path."""
        item = self.client.get_item(TableName=self.table, Key=self.key(name), ConsistentRead=True).get("Item", {})
        return int(item["n"]["N"]) if "n" in item else 0

    def sweep(self, before: int) -> None:
        """DynamoDB's TTL deletes expired windows itself."""


# --- the edge: key status, revocation and both counters in one conditional UpdateItem -------

MINUTE_ATTR = "cm_"  # + minute index since the epoch
MONTH_ATTR = "cM_"  # + YYYY-MM
DAY_ATTR = "cd_"  # + YYYY-MM-DD: requests counted that day (the dashboard's usage), kept DAYS_KEPT days
LAST_USED_ATTR = "last_used"  # YYYY-MM-DD (UTC) of the last counted request
DAYS_KEPT = 8
_ACTIVE_AND_UNDER = (
    "attribute_exists(#pk) AND attribute_not_exists(#rv) AND attribute_not_exists(#or)"
    " AND attribute_not_exists(#os) AND (attribute_not_exists(#ex) OR #ex > :today)"
    " AND (attribute_not_exists(#m) OR (attribute_exists(#pm) AND #m < #pm)"
    " OR (attribute_not_exists(#pm) AND #m < :dpm))"
    " AND (#kind <> :live OR attribute_not_exists(#M) OR (attribute_exists(#mo) AND #M < #mo)"
    " OR (attribute_not_exists(#mo) AND #M < :dmo))"
)
_NAMES = {"#pk": "pk", "#rv": "revoked_at", "#or": "owner_removed_at", "#os": "org_suspended_at",
          "#ex": "expires_on", "#pm": "per_minute", "#kind": "kind", "#mo": "monthly"}
MAX_REMOVALS = 16  # stale window attributes dropped per update; keeps the expression small


class Windows:
    """The counter attribute names of `now`, and the newest names that are safe to delete.

    The window before the current one is kept: an instance whose clock is a little
    behind may still be counting it. Anything older is never counted again.
    """

    __slots__ = ("minute", "month", "minute_index", "month_key", "today", "day", "oldest_day")

    def __init__(self, minute: str, month: str, minute_index: int, month_key: str, today: str,
                 oldest_day: str = ""):
        self.minute = minute
        self.month = month
        self.minute_index = minute_index
        self.month_key = month_key
        self.today = today
        self.day = f"{DAY_ATTR}{today}"
        self.oldest_day = oldest_day  # the oldest day whose count is kept

    @classmethod
    def at(cls, now: datetime) -> Windows:
        now = now.astimezone(UTC)
        index = int(now.timestamp() // 60)
        month = f"{now.year:04d}-{now.month:02d}"
        oldest = (now - timedelta(days=DAYS_KEPT - 1)).date().isoformat()
        return cls(f"{MINUTE_ATTR}{index}", f"{MONTH_ATTR}{month}", index, month, now.date().isoformat(), oldest)

    @property
    def expired(self) -> tuple[str, str, str]:
        """The window before the previous one, of each kind, and the day before the oldest kept: never
        counted again, always safe to drop."""
        year, month = int(self.month_key[:4]), int(self.month_key[5:])
        back = year * 12 + month - 1 - 2
        day = (datetime.fromisoformat(self.today) - timedelta(days=DAYS_KEPT)).date().isoformat()
        return (f"{MINUTE_ATTR}{self.minute_index - 2}", f"{MONTH_ATTR}{back // 12:04d}-{back % 12 + 1:02d}",
                f"{DAY_ATTR}{day}")

    def stale(self, name: str) -> bool:
        if name.startswith(DAY_ATTR):
            return name[len(DAY_ATTR):] < self.oldest_day
        if name.startswith(MINUTE_ATTR):
            try:
                return int(name[len(MINUTE_ATTR):]) < self.minute_index - 1
            except ValueError:
                return False
        if name.startswith(MONTH_ATTR):
            year, month = int(self.month_key[:4]), int(self.month_key[5:])
            previous = f"{year - (month == 1):04d}-{(month - 2) % 12 + 1:02d}"
            return name[len(MONTH_ATTR):] < previous
        return False


def authorise_request(table: str, key_hash: str, windows: Windows, per_minute: int, monthly: int,
                      remove: tuple[str, ...] = ()) -> dict[str, Any]:
    """The UpdateItem that counts one request iff the key is active and under both limits."""
    names = dict(_NAMES, **{"#m": windows.minute, "#M": windows.month, "#d": windows.day, "#lu": LAST_USED_ATTR})
    update = "ADD #m :one, #M :one, #d :one SET #lu = :today"
    if remove:
        placeholders = []
        for i, name in enumerate(remove[:MAX_REMOVALS]):
            names[f"#x{i}"] = name
            placeholders.append(f"#x{i}")
        update += " REMOVE " + ", ".join(placeholders)
    return {
        "TableName": table,
        "Key": {"pk": {"S": f"key#{key_hash}"}},
        "UpdateExpression": update,
        "ConditionExpression": _ACTIVE_AND_UNDER,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {
            ":one": {"N": "1"}, ":today": {"S": windows.today}, ":live": {"S": "live"},
            ":dpm": {"N": str(per_minute)}, ":dmo": {"N": str(monthly)},
        },
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


class Outcome(NamedTuple):
    """What one UpdateItem said about a key and its windows.

    `refused` is None (counted: `minute`/`month` are the new totals), "key" (no such key
    or not active: nothing counted), "minute" or "month" (a limit is used up: nothing
    counted, `minute`/`month` are the totals as they stand).
    """

    record: KeyRecord | None
    minute: int
    month: int
    refused: str | None
    stale: tuple[str, ...]


def read_outcome(item: Mapping[str, Any] | None, windows: Windows, counted: bool, now: datetime,
                 per_minute: int, monthly: int) -> Outcome:
    """Interpret the item DynamoDB returned: ALL_NEW when `counted`, else ALL_OLD (None: no item)."""
    if item is None:
        return Outcome(None, 0, 0, "key", ())
    record = record_from_item(item)
    minute = _n(item, windows.minute) or 0
    month = _n(item, windows.month) or 0
    stale = tuple(name for name in item if windows.stale(name))
    if counted:
        return Outcome(record, minute, month, None, stale)
    if record.status(now) != "active":
        return Outcome(record, minute, month, "key", stale)
    if minute >= (record.per_minute if record.per_minute is not None else per_minute):
        return Outcome(record, minute, month, "minute", stale)
    if record.kind == "live" and month >= (record.monthly if record.monthly is not None else monthly):
        return Outcome(record, minute, month, "month", stale)
    raise ValueError(f"the condition on key {record.id} failed for no reason its item shows")


Call = Callable[[str, Mapping[str, Any], float], dict[str, Any]]  # (operation, request, deadline) → response


class EdgeAccounts:
    """Keys and limits for the edge: one conditional UpdateItem per authorised request.

    `for_request(now, deadline)` gives the gate a per-request object that is both its
    key store (`lookup`) and its limiter (`hit`): `lookup` makes the call, `hit` reads
    the counts it returned. Refusals of the key itself (unknown, revoked, expired, owner
    removed, org suspended) are remembered per instance for `refusal_ttl` seconds, so a
    flood of made-up keys costs DynamoDB one call per key per 2 s; an active key is
    never cached, so revocation takes effect on the very next request.
    """

    def __init__(self, call: Call, table_prefix: str, per_minute: int, monthly: int,
                 refusal_ttl: float = 2.0, clock: Callable[[], float] = time.monotonic, max_items: int = 5000):
        self.call = call
        self.table = f"{table_prefix}keys"
        self.per_minute = per_minute
        self.monthly = monthly
        self.refusal_ttl = refusal_ttl
        self.clock = clock
        self.max_items = max_items
        self._refused: dict[str, tuple[float, KeyRecord | None]] = {}
        self._stale: dict[str, tuple[str, ...]] = {}

    def for_request(self, now: datetime, deadline: float) -> tuple[RequestAccount, RequestAccount]:
        """(key store, limiter) for the gate: one object, so `hit` sees what `lookup` was told."""
        account = RequestAccount(self, now, deadline)
        return account, account

    def authorise(self, key_hash: str, now: datetime, deadline: float) -> Outcome:
        t = self.clock()
        hit = self._refused.get(key_hash)
        if hit is not None and t - hit[0] < self.refusal_ttl:
            return Outcome(hit[1], 0, 0, "key", ())
        windows = Windows.at(now)
        remove = tuple(dict.fromkeys((*windows.expired, *self._stale.pop(key_hash, ()))))
        request = authorise_request(self.table, key_hash, windows, self.per_minute, self.monthly, remove)
        from ..aws import AWSError  # the edge's client; imported here so admin use never needs it

        try:
            got = self.call("UpdateItem", request, deadline)
            outcome = read_outcome(got.get("Attributes"), windows, True, now, self.per_minute, self.monthly)
        except AWSError as e:
            if e.code != "ConditionalCheckFailedException":
                raise
            outcome = read_outcome(e.body.get("Item"), windows, False, now, self.per_minute, self.monthly)
        if len(self._stale) >= self.max_items:
            self._stale.clear()
        if outcome.stale:
            self._stale[key_hash] = outcome.stale
        if outcome.refused == "key":
            if len(self._refused) >= self.max_items:
                self._refused.clear()
            self._refused[key_hash] = (t, outcome.record)
        return outcome


class RequestAccount:
    """One request's view: the gate's KeyStore and Limiter, backed by one UpdateItem."""

    def __init__(self, accounts: EdgeAccounts, now: datetime, deadline: float):
        self.accounts = accounts
        self.now = now
        self.deadline = deadline
        self.outcome: Outcome | None = None

    def lookup(self, key_hash: str) -> KeyRecord | None:
        self.outcome = self.accounts.authorise(key_hash, self.now, self.deadline)
        return self.outcome.record

    def hit(self, record: KeyRecord, now: datetime) -> LimitDecision:
        from ..limits import decision_from_counts

        outcome = self.outcome
        assert outcome is not None and outcome.record is not None, "hit() before a successful lookup()"
        return decision_from_counts(record, now, self.accounts.per_minute, self.accounts.monthly,
                                    outcome.minute, outcome.month, outcome.refused)
