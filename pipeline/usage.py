"""Per-key monthly totals, exported before the counters that hold them are removed.

Where the month's count lives, and when it goes (so the export runs first):

* at the edge (DynamoDB), attribute `cM_<YYYY-MM>` of each key's item, counted for every
  request a key's limits let through; removed by the key's first request two calendar months
  later (`edge.stores.dynamodb.Windows.expired`), so month M is readable until the end of M+1;
* on the local server, counter `M:<key id>:<YYYY-MM>` (live keys only: test keys have no
  monthly allowance there), which expires one day after the month ends
  (`edge.limits.MONTH_GRACE`) and is swept within a minute after that.

The scheduled `usage-export` job runs on days 1–7 of each month for the month before
(docs/monitoring.md#usage-exports); an export asked for after its counters expired is refused
rather than answered with zeros.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.errors import OperatorError

MONTH_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
FIELDS = ("month", "key_id", "name", "kind", "org", "owner", "requests", "complete")


def _month_index(month: str) -> int:
    return int(month[:4]) * 12 + int(month[5:7]) - 1


def check_month(month: str, now: datetime, edge: bool) -> bool:
    """Whether `month` is over (True) or still counting (False); raises when it cannot be exported."""
    from edge.limits import MONTH_GRACE, month_window

    if not MONTH_RE.fullmatch(month):
        raise OperatorError(f"--month {month!r} is not YYYY-MM")
    current = f"{now.year:04d}-{now.month:02d}"
    if month > current:
        raise OperatorError(f"{month} has not begun (it is {current})")
    if month == current:
        return False
    if edge:
        if _month_index(current) - _month_index(month) > 1:
            raise OperatorError(f"the edge's counters of {month} are removed two months on (kept for {current} and "
                             "the month before only); the export must run before then (docs/monitoring.md)")
        return True
    start = datetime(int(month[:4]), int(month[5:7]), 1, tzinfo=UTC)
    expires = month_window(start).ends_at + MONTH_GRACE
    if now.timestamp() >= expires:
        raise OperatorError(f"the local counters of {month} expired at "
                         f"{datetime.fromtimestamp(expires, UTC):%Y-%m-%d %H:%M} UTC (one day after the month); "
                         "export on the first day of the next month (docs/monitoring.md)")
    return True


def dynamodb_usage(client: Any, table: str, month: str) -> list[dict[str, Any]]:
    """Every key item's count of `month` (0 when it made no request)."""
    rows: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": table, "ConsistentRead": True,
        "ProjectionExpression": "pk, key_id, #n, kind, org, #o, #m",
        "ExpressionAttributeNames": {"#n": "name", "#o": "owner", "#m": f"cM_{month}"},
    }
    while True:
        page = client.scan(**kwargs)
        for item in page.get("Items", []):
            if not item["pk"]["S"].startswith("key#"):
                continue

            def s(name: str, item: dict[str, Any] = item) -> str | None:
                v = item.get(name)
                return None if v is None or "NULL" in v else str(v.get("S"))

            count = item.get(f"cM_{month}")
            rows.append({"key_id": s("key_id"), "name": s("name"), "kind": s("kind"), "org": s("org"),
                         "owner": s("owner"), "requests": int(count["N"]) if count else 0})
        if "LastEvaluatedKey" not in page:
            return rows
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def local_usage(store: Any, counter: Any, month: str, now: datetime) -> list[dict[str, Any]]:
    """Every key's count of `month` from the local counters; None for test keys (never counted)."""
    return [{"key_id": r["id"], "name": r["name"], "kind": r["kind"], "org": r["org"], "owner": r["owner"],
             "requests": counter.value(f"M:{r['id']}:{month}") if r["kind"] == "live" else None}
            for r in store.list(now)]


def usage_export(spec: str, month: str, now: datetime | None = None) -> list[dict[str, Any]]:
    """The rows of one month for the store named by `spec` (sqlite:PATH or dynamodb:PREFIX)."""
    from edge.stores import open_store

    now = now or datetime.now(UTC)
    edge = spec.startswith("dynamodb:")
    complete = check_month(month, now, edge)
    store, counter = open_store(spec)
    rows = (dynamodb_usage(store.client, store.keys_table, month) if edge  # type: ignore[attr-defined]
            else local_usage(store, counter, month, now))
    rows.sort(key=lambda r: (r["key_id"] or ""))
    return [{"month": month, **r, "complete": complete} for r in rows]


def render(rows: list[dict[str, Any]], fmt: str) -> str:
    """JSON as stored, or CSV through the operator exports' one writer (key names neutralised)."""
    from dashboard.operator_text import csv_text

    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    return csv_text(FIELDS, ([r[k] for k in FIELDS] for r in rows))


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
