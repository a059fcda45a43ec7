"""Usage the dashboard shows: this month's requests, requests per day, the last day used.

The gate records them in the write it already makes per request: locally the limiter's
day counters (`edge.limits.day_counter`, in the counters file beside the key store), at
the CDN attributes on the key's own DynamoDB item (`cM_<month>`, `cd_<day>`, `last_used`,
set by the one conditional UpdateItem). Days are UTC days, as the allowance's month is the
UTC calendar month.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from edge.limits import day_counter

DAYS_SHOWN = 7
LOOK_BACK_DAYS = 38  # the counters keep days until a week after their month (edge.limits.DAY_GRACE)


class Usage(NamedTuple):
    month: int  # requests this UTC calendar month
    last_used: str | None  # YYYY-MM-DD (UTC) of the last counted request
    days: tuple[tuple[str, int], ...]  # the last DAYS_SHOWN days, newest first


class CounterUsage:
    """The local server's day counters (MappedCounter or SQLiteCounter, read with `value`).

    `counter` may be a function that opens them: they are then opened on the first read, so key
    administration from the command line never touches the counters file (it works whatever state
    that file is in; the server rebuilds a damaged one)."""

    def __init__(self, counter: Any):
        self._counter = counter

    @property
    def counter(self) -> Any:
        if callable(self._counter) and not hasattr(self._counter, "value"):
            self._counter = self._counter()
        return self._counter

    def read(self, key_id: str, now: datetime) -> Usage:
        today = now.astimezone(UTC).date()
        counts: dict[str, int] = {}
        last_used = None
        for back in range(LOOK_BACK_DAYS):
            day = (today - timedelta(days=back)).isoformat()
            n = self.counter.value(day_counter(key_id, day))
            counts[day] = n
            if n and last_used is None:
                last_used = day
            if back >= today.day - 1 and back >= DAYS_SHOWN and last_used is not None:
                break
        month = sum(n for d, n in counts.items() if d[:7] == today.isoformat()[:7])
        days = tuple((d, counts.get(d, 0)) for d in ((today - timedelta(days=b)).isoformat() for b in range(DAYS_SHOWN)))
        return Usage(month, last_used, days)


class EdgeItemUsage:
    """The counters the CDN function keeps on each key's DynamoDB item (edge.stores.dynamodb)."""

    def __init__(self, store: Any):
        self.store = store

    def read(self, key_id: str, now: datetime) -> Usage:
        from edge.stores.dynamodb import DAY_ATTR, LAST_USED_ATTR, MONTH_ATTR

        item = self.store.usage_item(key_id) or {}

        def n(attr: str) -> int:
            v = item.get(attr)
            return int(v["N"]) if v and "N" in v else 0

        today = now.astimezone(UTC).date()
        last = item.get(LAST_USED_ATTR, {}).get("S")
        days = tuple((d, n(DAY_ATTR + d)) for d in ((today - timedelta(days=b)).isoformat() for b in range(DAYS_SHOWN)))
        return Usage(n(f"{MONTH_ATTR}{today.isoformat()[:7]}"), last, days)
