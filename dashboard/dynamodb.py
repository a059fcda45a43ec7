"""Dashboard state on DynamoDB, for production (the same methods as `SQLiteDashboardStore`).

Two tables, created by `create_tables` (deploy/dashboard.py) with point-in-time recovery
and deletion protection:

- `<prefix>dashboard`, keys `pk`/`sk` (S), TTL on `ttl`: accounts (`account#E`/`account`),
  organisations (`org#O`/`org`, with an `admins` count), memberships written twice in one
  transaction (`org#O`/`member#E` and `account#E`/`org#O`), invitations (`invite#HASH`/`invite`
  and its open copy `org#O`/`invitation#ID`), sign-in codes (`code#E`/`<created_at>#<n>`),
  sessions (`session#HASH`/`session`), form tokens (`form#T`/`form`), access requests
  (`account#E`/`request#…` and the open copy `requests#open`/`…`), last-used days.
  Every lookup is a GetItem or a Query on one partition: no Scan.
- `<prefix>audit`, keys `pk` (`org#O` or `account#E`) / `sk` (`<at>#<seq>`): the audit log.
  Rows are written with a condition that nothing exists under that key, and the dashboard's
  role may only PutItem and Query this table (deploy/dashboard.py), so nothing can change or
  delete a row.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from datetime import datetime
from typing import Any

from edge.stores.dynamodb import DynamoDBCounter, client_from_env

from .service import DEVICE_DAYS

DAY = 86_400


def _epoch(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp())


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in item.items():
        if "S" in v:
            out[k] = v["S"]
        elif "N" in v:
            out[k] = int(v["N"])
        elif "NULL" in v:
            out[k] = None
    return out


def _av(value: Any) -> dict[str, Any]:
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        raise TypeError("no booleans in these items")
    if isinstance(value, int):
        return {"N": str(value)}
    return {"S": str(value)}


def _item(**fields: Any) -> dict[str, Any]:
    return {k: _av(v) for k, v in fields.items() if v is not None}


class DynamoDBDashboardStore:
    def __init__(self, client: Any, table_prefix: str):
        self.client = client
        self.table = f"{table_prefix}dashboard"
        self.audit_table = f"{table_prefix}audit"
        self._seq = secrets.randbelow(10**6)
        # sending budgets: the limiter's counter, its items in this table (`count#NAME`/`count`, TTL on `ttl`)
        self.counter = DynamoDBCounter((client, self.table), ttl="ttl",
                                       key=lambda name: {"pk": {"S": f"count#{name}"}, "sk": {"S": "count"}})

    @classmethod
    def from_env(cls, table_prefix: str) -> DynamoDBDashboardStore:
        return cls(client_from_env(), table_prefix)  # the key table's client and region setting

    # -- tables ------------------------------------------------------------------------------------
    def create_tables(self, billing: str = "PAY_PER_REQUEST") -> None:
        """Both tables, each with point-in-time recovery and deletion protection; repeatable."""
        existing = set(self.client.list_tables().get("TableNames", []))
        for name in (self.table, self.audit_table):
            if name not in existing:
                self.client.create_table(
                    TableName=name, BillingMode=billing, DeletionProtectionEnabled=True,
                    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                          {"AttributeName": "sk", "AttributeType": "S"}],
                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                )
            self.client.get_waiter("table_exists").wait(TableName=name)
            if not self.client.describe_table(TableName=name)["Table"].get("DeletionProtectionEnabled"):
                self.client.update_table(TableName=name, DeletionProtectionEnabled=True)
            backups = self.client.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
            if backups.get("PointInTimeRecoveryDescription", {}).get("PointInTimeRecoveryStatus") != "ENABLED":
                self.client.update_continuous_backups(
                    TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
        ttl = self.client.describe_time_to_live(TableName=self.table).get("TimeToLiveDescription", {})
        if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
            self.client.update_time_to_live(TableName=self.table,
                                            TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"})

    def require_tables(self) -> None:
        """Refuse, before any change, to work without the tables the audit rows go to (one line, the fix)."""
        existing = set(self.client.list_tables().get("TableNames", []))
        missing = [t for t in (self.table, self.audit_table) if t not in existing]
        if missing:
            from edge.errors import OperatorError

            raise OperatorError(f"table(s) {', '.join(missing)} do not exist: create them with "
                                f"`python deploy/dashboard.py tables --table-prefix {self.table[:-len('dashboard')]}`")

    # -- helpers -------------------------------------------------------------------------------------
    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        got = self.client.get_item(TableName=self.table, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True)
        return _plain(got["Item"]) if "Item" in got else None

    def _query(self, pk: str, prefix: str = "", forward: bool = True, table: str | None = None,
               limit: int | None = None) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": table or self.table, "ConsistentRead": True, "ScanIndexForward": forward,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)" if prefix else "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}, **({":p": {"S": prefix}} if prefix else {})},
        }
        if limit is not None:
            kwargs["Limit"] = limit
        out: list[dict[str, Any]] = []
        while True:
            page = self.client.query(**kwargs)
            out.extend(_plain(i) for i in page.get("Items", []))
            if "LastEvaluatedKey" not in page or (limit is not None and len(out) >= limit):
                return out[:limit] if limit is not None else out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _conditional(self, **kwargs: Any) -> bool:
        try:
            self.client.update_item(TableName=self.table, **kwargs)
            return True
        except self.client.exceptions.ConditionalCheckFailedException:
            return False

    def _put_new(self, item: dict[str, Any]) -> bool:
        try:
            self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
            return True
        except self.client.exceptions.ConditionalCheckFailedException:
            return False

    # -- accounts ------------------------------------------------------------------------------------
    def ensure_account(self, email: str, now: str) -> dict[str, Any]:
        self._put_new(_item(pk=f"account#{email}", sk="account", email=email, created_at=now))
        got = self.get_account(email)
        assert got is not None
        return got

    def get_account(self, email: str) -> dict[str, Any] | None:
        got = self._get(f"account#{email}", "account")
        if got is None:
            return None
        return {"email": email, "created_at": got["created_at"], "unlocked_at": got.get("unlocked_at"),
                "removed_at": got.get("removed_at")}

    def set_unlocked(self, email: str, at: str | None) -> None:
        key = {"pk": {"S": f"account#{email}"}, "sk": {"S": "account"}}
        if at is None:
            self.client.update_item(TableName=self.table, Key=key, UpdateExpression="REMOVE unlocked_at")
        else:
            self.client.update_item(TableName=self.table, Key=key, UpdateExpression="SET unlocked_at = :t",
                                    ExpressionAttributeValues={":t": {"S": at}})

    def set_removed(self, email: str, at: str) -> None:
        self.client.update_item(TableName=self.table, Key={"pk": {"S": f"account#{email}"}, "sk": {"S": "account"}},
                                UpdateExpression="SET removed_at = :t REMOVE unlocked_at",
                                ExpressionAttributeValues={":t": {"S": at}})
        for org in self.orgs_of(email):
            self.change_role_keeping_an_admin(org["org"], email, None, force=True)
        # sessions of a removed account are refused where they are read (the app checks the account)

    # -- organisations and memberships --------------------------------------------------------------------
    def create_org(self, org: str, name: str, now: str) -> bool:
        return self._put_new(_item(pk=f"org#{org}", sk="org", org=org, name=name, created_at=now, admins=0))

    def get_org(self, org: str) -> dict[str, Any] | None:
        got = self._get(f"org#{org}", "org")
        return None if got is None else {"org": org, "name": got["name"], "created_at": got["created_at"]}

    def orgs_of(self, email: str) -> list[dict[str, Any]]:
        rows = [{"org": r["sk"][len("org#"):], "name": r["name"], "role": r["role"]}
                for r in self._query(f"account#{email}", "org#")]
        return sorted(rows, key=lambda r: r["name"])

    def role(self, org: str, email: str) -> str | None:
        got = self._get(f"org#{org}", f"member#{email}")
        return None if got is None else str(got["role"])

    def members(self, org: str) -> list[dict[str, Any]]:
        return [{"email": r["sk"][len("member#"):], "role": r["role"], "since": r["since"]}
                for r in self._query(f"org#{org}", "member#")]

    def set_role(self, org: str, email: str, role: str, now: str) -> None:
        """A new membership (or a role change that needs no last-administrator check)."""
        current = self.role(org, email)
        if current == role:
            return
        name = (self.get_org(org) or {"name": org})["name"]
        delta = (role == "admin") - (current == "admin")
        self.client.transact_write_items(TransactItems=[
            {"Put": {"TableName": self.table, "Item": _item(pk=f"org#{org}", sk=f"member#{email}", role=role, since=now)}},
            {"Put": {"TableName": self.table, "Item": _item(pk=f"account#{email}", sk=f"org#{org}", role=role,
                                                              name=name)}},
            {"Update": {"TableName": self.table, "Key": {"pk": {"S": f"org#{org}"}, "sk": {"S": "org"}},
                        "UpdateExpression": "ADD admins :d", "ExpressionAttributeValues": {":d": {"N": str(delta)}}}},
        ])

    def change_role_keeping_an_admin(self, org: str, email: str, role: str | None, force: bool = False) -> bool:
        """One transaction: the membership's two items and the organisation's administrator count,
        with a condition that at least one administrator remains (unless `force`, for a removed account)."""
        current = self.role(org, email)
        if current is None:
            return True
        losing_admin = current == "admin" and role != "admin"
        org_key = {"pk": {"S": f"org#{org}"}, "sk": {"S": "org"}}
        count: dict[str, Any] = {"Update": {"TableName": self.table, "Key": org_key,
                                            "UpdateExpression": "ADD admins :d",
                                            "ExpressionAttributeValues": {":d": {"N": "-1" if losing_admin else str(int(role == "admin" and current != "admin"))}}}}
        if losing_admin and not force:
            count["Update"]["ConditionExpression"] = "admins > :one"
            count["Update"]["ExpressionAttributeValues"][":one"] = {"N": "1"}
        items: list[dict[str, Any]] = [count]
        member = {"pk": {"S": f"org#{org}"}, "sk": {"S": f"member#{email}"}}
        mirror = {"pk": {"S": f"account#{email}"}, "sk": {"S": f"org#{org}"}}
        if role is None:
            items += [{"Delete": {"TableName": self.table, "Key": member}},
                      {"Delete": {"TableName": self.table, "Key": mirror}}]
        else:
            for key in (member, mirror):
                items.append({"Update": {"TableName": self.table, "Key": key, "UpdateExpression": "SET #r = :r",
                                         "ExpressionAttributeNames": {"#r": "role"},
                                         "ExpressionAttributeValues": {":r": {"S": role}}}})
        try:
            self.client.transact_write_items(TransactItems=items)
            return True
        except self.client.exceptions.TransactionCanceledException:
            return False

    # -- invitations ---------------------------------------------------------------------------------------
    def add_invitation(self, inv: dict[str, Any]) -> None:
        ttl = _epoch(inv["expires_at"]) + DAY
        self.client.transact_write_items(TransactItems=[
            {"Put": {"TableName": self.table, "Item": _item(pk=f"invite#{inv['token_hash']}", sk="invite", ttl=ttl, **inv)}},
            {"Put": {"TableName": self.table, "Item": _item(pk=f"org#{inv['org']}", sk=f"invitation#{inv['id']}",
                                                              ttl=ttl, **inv)}},
            {"Put": {"TableName": self.table, "Item": _item(pk=f"invitee#{inv['email']}", sk=f"invitation#{inv['id']}",
                                                              ttl=ttl, **inv)}},
        ])

    def invitation_by_token(self, token_hash: str) -> dict[str, Any] | None:
        got = self._get(f"invite#{token_hash}", "invite")
        if got is None:
            return None
        got.setdefault("used_at", None)
        got.setdefault("cancelled_at", None)
        return got

    def use_invitation(self, inv: dict[str, Any], now: str) -> bool:
        """Single use: a conditional write, so only the first of two racing acceptances succeeds."""
        return self._close_invitation(inv["id"], now, "used_at", inv["org"])

    def _close_invitation(self, inv_id: str, now: str, attr: str, org: str) -> bool:
        inv = self._get(f"org#{org}", f"invitation#{inv_id}")
        if inv is None:
            return False
        ok = self._conditional(
            Key={"pk": {"S": f"invite#{inv['token_hash']}"}, "sk": {"S": "invite"}},
            UpdateExpression="SET #a = :now",
            ConditionExpression="attribute_not_exists(used_at) AND attribute_not_exists(cancelled_at)"
                                " AND expires_at > :now AND org = :org",
            ExpressionAttributeNames={"#a": attr},
            ExpressionAttributeValues={":now": {"S": now}, ":org": {"S": org}})
        if ok:
            self.client.delete_item(TableName=self.table, Key={"pk": {"S": f"org#{inv['org']}"},
                                                               "sk": {"S": f"invitation#{inv_id}"}})
            self.client.delete_item(TableName=self.table, Key={"pk": {"S": f"invitee#{inv['email']}"},
                                                               "sk": {"S": f"invitation#{inv_id}"}})
        return ok

    def invitations_to(self, email: str, now: str) -> list[dict[str, Any]]:
        """The live invitations sent to an address (its open copies `invitee#E`/`invitation#ID`)."""
        rows = [r for r in self._query(f"invitee#{email}", "invitation#") if r["expires_at"] > now]
        for r in rows:
            r.setdefault("used_at", None)
            r.setdefault("cancelled_at", None)
        return rows

    def cancel_invitations_from(self, org: str, inviter: str, now: str) -> int:
        """End every pending invitation `inviter` sent for `org` (they stop being an administrator)."""
        return sum(self._close_invitation(r["id"], now, "cancelled_at", org)
                   for r in self._query(f"org#{org}", "invitation#") if r["invited_by"] == inviter)

    def cancel_invitation(self, org: str, inv_id: str, now: str) -> bool:
        return self._close_invitation(inv_id, now, "cancelled_at", org)

    def pending_invitations(self, org: str, now: str) -> list[dict[str, Any]]:
        rows = [r for r in self._query(f"org#{org}", "invitation#") if r["expires_at"] > now]
        return [{k: r[k] for k in ("id", "email", "role", "invited_by", "created_at", "expires_at")}
                for r in sorted(rows, key=lambda r: r["created_at"])]

    # -- sign-in codes -------------------------------------------------------------------------------------
    def add_code(self, email: str, browser: str, code_hash: str, now: str, expires_at: str) -> None:
        """A new code replaces the earlier ones of the same browser for this address, and only those."""
        for r in self._query(f"code#{email}", ""):
            if r.get("used_at") is None and r.get("browser", "") == browser:
                self._conditional(Key={"pk": {"S": f"code#{email}"}, "sk": {"S": r["sk"]}},
                                  UpdateExpression="SET used_at = :t", ExpressionAttributeValues={":t": {"S": now}})
        self._seq += 1
        self.client.put_item(TableName=self.table, Item=_item(
            pk=f"code#{email}", sk=f"{now}#{self._seq:08d}{secrets.token_hex(2)}", code_hash=code_hash,
            browser=browser, created_at=now, expires_at=expires_at, tries=0, ttl=_epoch(expires_at) + 2 * 3600))

    def live_code(self, email: str, browser: str, now: str) -> dict[str, Any] | None:
        for r in self._query(f"code#{email}", "", forward=False, limit=20):
            if r.get("used_at") is None and r["expires_at"] > now and r.get("browser", "") == browser:
                return {**r, "id": f"{email}\x00{r['sk']}", "email": email}
        return None

    # -- browsers that signed in (device cookies) ----------------------------------------------------------
    def remember_device(self, browser: str, email: str, now: str) -> None:
        self.client.put_item(TableName=self.table, Item=_item(pk=f"device#{browser}", sk=email, last_seen=now,
                                                             ttl=_epoch(now) + DEVICE_DAYS * DAY))

    def known_device(self, browser: str, email: str, since: str) -> bool:
        got = self._get(f"device#{browser}", email)
        return got is not None and got["last_seen"] >= since

    # -- secrets ---------------------------------------------------------------------------------------------
    def secret(self, name: str) -> str:
        """A named random secret, made once per table (a conditional put: first writer wins)."""
        self._put_new(_item(pk="meta", sk=name, value=secrets.token_hex(32)))
        got = self._get("meta", name)
        assert got is not None
        return str(got["value"])

    def signing_secret(self) -> str:
        return self.secret("signing_secret")

    def signing_secrets(self) -> tuple[str, str | None]:
        """(current, previous), from one item: cookies are signed with the current one, accepted with either."""
        current = self.signing_secret()
        got = self._get("meta", "signing_secret")
        return current, None if got is None else got.get("previous")

    def rotate_signing_secret(self) -> None:
        """A new current secret, the current one kept as `previous`: one conditional write on the
        secret's own item, so two rotations at once cannot lose the secret cookies are signed with."""
        current = self.signing_secret()
        self._conditional(Key={"pk": {"S": "meta"}, "sk": {"S": "signing_secret"}},
                          UpdateExpression="SET #v = :new, previous = :old", ConditionExpression="#v = :old",
                          ExpressionAttributeNames={"#v": "value"},
                          ExpressionAttributeValues={":new": {"S": secrets.token_hex(32)}, ":old": {"S": current}})

    def spend_try(self, code_id: str, max_tries: int) -> bool:
        return self._conditional(Key=self._key_of_code(code_id), UpdateExpression="ADD tries :one",
                                 ConditionExpression="tries < :max AND attribute_not_exists(used_at)",
                                 ExpressionAttributeValues={":one": {"N": "1"}, ":max": {"N": str(max_tries)}})

    def use_code(self, code_id: str, now: str) -> bool:
        return self._conditional(Key=self._key_of_code(code_id), UpdateExpression="SET used_at = :t",
                                 ConditionExpression="attribute_not_exists(used_at)",
                                 ExpressionAttributeValues={":t": {"S": now}})

    def _key_of_code(self, code_id: str) -> dict[str, Any]:
        email, _, sk = code_id.partition("\x00")
        return {"pk": {"S": f"code#{email}"}, "sk": {"S": sk}}

    # -- sessions ---------------------------------------------------------------------------------------------
    def create_session(self, sid_hash: str, email: str | None, csrf: str, now: str,
                       verified_at: str | None = None) -> None:
        self.client.put_item(TableName=self.table, Item=_item(
            pk=f"session#{sid_hash}", sk="session", email=email, csrf=csrf, created_at=now, last_seen=now,
            verified_at=verified_at, ttl=_epoch(now) + 2 * DAY))

    def get_session(self, sid_hash: str) -> dict[str, Any] | None:
        got = self._get(f"session#{sid_hash}", "session")
        if got is None:
            return None
        return {"sid_hash": sid_hash, "email": got.get("email"), "csrf": got["csrf"], "created_at": got["created_at"],
                "last_seen": got["last_seen"], "verified_at": got.get("verified_at")}

    def touch_session(self, sid_hash: str, now: str) -> None:
        self._conditional(Key={"pk": {"S": f"session#{sid_hash}"}, "sk": {"S": "session"}},
                          UpdateExpression="SET last_seen = :t", ConditionExpression="attribute_exists(pk)",
                          ExpressionAttributeValues={":t": {"S": now}})

    def set_verified(self, sid_hash: str, now: str) -> None:
        self._conditional(Key={"pk": {"S": f"session#{sid_hash}"}, "sk": {"S": "session"}},
                          UpdateExpression="SET verified_at = :t", ConditionExpression="attribute_exists(pk)",
                          ExpressionAttributeValues={":t": {"S": now}})

    def delete_session(self, sid_hash: str) -> None:
        self.client.delete_item(TableName=self.table, Key={"pk": {"S": f"session#{sid_hash}"}, "sk": {"S": "session"}})

    def purge(self, *args: Any) -> dict[str, int]:
        """Nothing to do: sessions, codes, form tokens, device marks and budget windows carry a TTL
        and DynamoDB removes them."""
        return {}

    # -- forms submitted once ------------------------------------------------------------------------------------
    def claim_form(self, token: str, now: str) -> bool:
        return self._put_new(_item(pk=f"form#{token}", sk="form", created_at=now, ttl=_epoch(now) + 30 * DAY))

    def set_form_result(self, token: str, result: str) -> None:
        self.client.update_item(TableName=self.table, Key={"pk": {"S": f"form#{token}"}, "sk": {"S": "form"}},
                                UpdateExpression="SET #r = :r", ExpressionAttributeNames={"#r": "result"},
                                ExpressionAttributeValues={":r": {"S": result}})

    def form_result(self, token: str) -> str | None:
        got = self._get(f"form#{token}", "form")
        return None if got is None else got.get("result")

    # -- access requests ---------------------------------------------------------------------------------------------
    def add_access_request(self, email: str, reason: str, now: str) -> None:
        self._seq += 1
        sk = f"{now}#{self._seq:08d}"
        self.client.transact_write_items(TransactItems=[
            {"Put": {"TableName": self.table, "Item": _item(pk=f"account#{email}", sk=f"request#{sk}", email=email,
                                                              reason=reason, created_at=now)}},
            {"Put": {"TableName": self.table, "Item": _item(pk="requests#open", sk=f"{sk}#{email}", email=email,
                                                              reason=reason, created_at=now)}},
        ])

    def access_requests(self, email: str | None = None) -> list[dict[str, Any]]:
        if email is None:
            return [{"email": r["email"], "reason": r["reason"], "created_at": r["created_at"], "answered_at": None}
                    for r in self._query("requests#open")]
        return [{"email": email, "reason": r["reason"], "created_at": r["created_at"],
                 "answered_at": r.get("answered_at")} for r in self._query(f"account#{email}", "request#")]

    def answer_access_requests(self, email: str, now: str) -> None:
        for r in self._query("requests#open"):
            if r["email"] == email:
                self.client.delete_item(TableName=self.table, Key={"pk": {"S": "requests#open"}, "sk": {"S": r["sk"]}})
        for r in self._query(f"account#{email}", "request#"):
            if r.get("answered_at") is None:
                self.client.update_item(TableName=self.table, Key={"pk": {"S": f"account#{email}"}, "sk": {"S": r["sk"]}},
                                        UpdateExpression="SET answered_at = :t", ExpressionAttributeValues={":t": {"S": now}})

    # -- usage memory -----------------------------------------------------------------------------------------------------
    def remember_last_used(self, key_id: str, day: str) -> None:
        self._conditional(Key={"pk": {"S": f"lastused#{key_id}"}, "sk": {"S": "day"}}, UpdateExpression="SET #d = :d",
                          ConditionExpression="attribute_not_exists(#d) OR #d < :d",
                          ExpressionAttributeNames={"#d": "day"}, ExpressionAttributeValues={":d": {"S": day}})

    def last_used(self, key_id: str) -> str | None:
        got = self._get(f"lastused#{key_id}", "day")
        return None if got is None else got.get("day")

    # -- audit ------------------------------------------------------------------------------------------------------------
    def append_audit(self, at: str, actor: str, org: str | None, account: str | None, action: str,
                     target: str | None, detail: str) -> None:
        self._seq += 1
        pk = f"org#{org}" if org is not None else f"account#{account}" if account is not None else "service"
        sk = f"{at}#{time.time_ns():020d}{self._seq % 1000:03d}{secrets.token_hex(2)}"
        self.client.put_item(TableName=self.audit_table, ConditionExpression="attribute_not_exists(pk)",
                             Item=_item(pk=pk, sk=sk, at=at, actor=actor, org=org, account=account, action=action,
                                        target=target, detail=detail))

    # -- the key-change journal (dashboard.service.Dashboard._journaled) ---------------------------------------------
    def journal_open(self, entry_id: str, at: str, entry: str) -> None:
        self.client.put_item(TableName=self.table, Item=_item(pk="journal", sk=entry_id, created_at=at, entry=entry))

    def journal_pending(self) -> list[dict[str, Any]]:
        return [{"id": r["sk"], "created_at": r["created_at"], "entry": r["entry"]} for r in self._query("journal")]

    def journal_close(self, entry_id: str, audit: tuple[str, str, str | None, str | None, str, str | None, str] | None
                      ) -> bool:
        """Append the entry's audit row under a key made from the entry's id (a second closer's put
        finds it there and writes nothing), then remove the entry."""
        if self._get("journal", entry_id) is None:
            return False
        if audit is not None:
            at, actor, org, account, action, target, detail = audit
            pk = f"org#{org}" if org is not None else f"account#{account}" if account is not None else "service"
            with contextlib.suppress(self.client.exceptions.ConditionalCheckFailedException):  # written already
                self.client.put_item(TableName=self.audit_table, ConditionExpression="attribute_not_exists(pk)",
                                     Item=_item(pk=pk, sk=f"{at}#{entry_id}", at=at, actor=actor, org=org,
                                                account=account, action=action, target=target, detail=detail))
        self.client.delete_item(TableName=self.table, Key={"pk": {"S": "journal"}, "sk": {"S": entry_id}})
        return True

    def audit(self, *, org: str | None = None, account: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        if org is None and account is None:
            raise ValueError("the DynamoDB audit log is read per organisation or account")
        pk = f"org#{org}" if org is not None else f"account#{account}"
        rows = self._query(pk, "", forward=False, table=self.audit_table, limit=limit)
        return [{"seq": r["sk"], "at": r["at"], "actor": r["actor"], "org": r.get("org"), "account": r.get("account"),
                 "action": r["action"], "target": r.get("target"), "detail": r.get("detail", "")} for r in rows]
