"""Limit policy: per-minute limits for every key, a monthly allowance for live keys.

The SPEC (sections 5 and 8) fixes the shape — a per-minute limit shared by live and
test keys, a monthly allowance for live keys only, 429 when reached — and leaves the
numbers to us. Defaults and the reasons for them are in docs/limits.md.

Counting is a fixed window, keyed key × UTC calendar minute and key × UTC calendar
month. Each request increments its counters with one atomic read-modify-write in a
shared store (SQLite locally, DynamoDB at the edge) and is accepted iff the value that
increment *returned* is within the limit. Because every increment returns a distinct
value, exactly `limit` requests of a window are accepted however many processes race
for it — no read-then-write gap, no per-process memory to drift apart.

What counts (pinned by tests/test_limits.py):
- every request that passes authentication counts against the minute, whatever its
  answer (200, 304, 403, 4xx parameter errors, even a 429): the work to answer it was
  done, and a client looping on a bad parameter must be slowed like any other;
- 401s never count (there is no key to count against; an attacker must not be able to
  burn someone's allowance with a bad key);
- the monthly allowance counts live-key requests that the per-minute limit let through,
  so being throttled does not also eat the month; test keys never touch it.

This module is part of the edge bundle: standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple, Protocol

from .gate import LimitDecision
from .keys import KeyRecord

DEFAULT_PER_MINUTE = 60
DEFAULT_MONTHLY = 10_000

MINUTE_POLICY = "minute"
MONTH_POLICY = "month"

# counters live a little longer than their window so a straggler read never sees a
# vanished row mid-window; the stores delete (SQLite) or expire (DynamoDB TTL) after
MINUTE_TTL = 120
MONTH_GRACE = 86_400
# daily usage (what the dashboard shows: requests per day, this month, last used) is kept until a
# week after its month ends: "this month" is summed from days, and a key used every day takes
# at most ~38 slots of the counters file
DAY_GRACE = 7 * 86_400


def day_counter(key_id: str, day: str) -> str:
    """The counter name of a key's requests on one UTC day (YYYY-MM-DD); read by the dashboard."""
    return f"d:{key_id}:{day}"


class Counter(Protocol):
    """The one operation limits need from a store: atomically add one and say the new total.

    `name` identifies key × window; `expires_at` (epoch seconds) is when the row may be
    discarded. Implementations must make concurrent calls from any number of threads and
    processes return distinct consecutive values.
    """

    def incr(self, name: str, expires_at: int) -> int: ...

    def sweep(self, before: int) -> None:
        """Forget windows that expired before `before` (epoch s); a no-op where the store expires rows itself."""


class Window(NamedTuple):
    """One fixed window: which bucket `now` falls in, how long it is, when it ends."""

    policy: str
    bucket: str  # e.g. "29412345" (minute index) or "2026-11"
    length: int  # seconds in the window (a calendar month's real length)
    reset: int  # whole seconds until the window ends, at least 1
    ends_at: int  # epoch seconds of the window's end


def minute_window(now: datetime) -> Window:
    ts = now.timestamp()
    index = int(ts // 60)
    ends = (index + 1) * 60
    return Window(MINUTE_POLICY, str(index), 60, max(1, _ceil(ends - ts)), ends)


def month_window(now: datetime) -> Window:
    now = now.astimezone(UTC)
    ends, length = _month_bounds(now.year, now.month)
    return Window(MONTH_POLICY, f"{now.year:04d}-{now.month:02d}", length,
                  max(1, _ceil(ends - now.timestamp())), ends)


@lru_cache(maxsize=64)
def _month_bounds(year: int, month: int) -> tuple[int, int]:
    """(epoch end, length in s) of a calendar month; cached because it sits on the hot path."""
    import calendar  # here, not at the top: it imports `locale`, a cost the edge's cold start need not pay

    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    days = calendar.monthrange(year, month)[1]
    assert int((end - start).total_seconds()) == days * 86_400
    return int(end.timestamp()), days * 86_400


def _ceil(x: float) -> int:
    i = int(x)
    return i if i == x else i + 1


# --- header formatting (IETF httpapi RateLimit header fields draft, -08 and later) ----------
#
# RateLimit-Policy: a Structured Fields List of policies, each a String naming it with
#   parameters q (quota, in requests) and w (window, seconds).
# RateLimit: a List of the same policy names with r (remaining quota) and t (seconds until
#   the window resets). A policy we did not evaluate on this request is simply left out.


def format_policy(items: Sequence[tuple[str, int, int]]) -> str:
    """`[(name, quota, window_seconds)]` → the RateLimit-Policy field value."""
    return ", ".join(f'"{name}";q={q};w={w}' for name, q, w in items)


@lru_cache(maxsize=1024)
def _policy_field(per_minute: int, monthly: int | None, month_length: int) -> str:
    """The RateLimit-Policy value changes only with the key's limits and the month: format it once."""
    if monthly is None:
        return format_policy([(MINUTE_POLICY, per_minute, 60)])
    return format_policy([(MINUTE_POLICY, per_minute, 60), (MONTH_POLICY, monthly, month_length)])


class _Tick(NamedTuple):
    """Everything about `now` the limiter needs, computed once per wall-clock second.

    Resets are whole seconds rounded up, `ceil(end - now)`, which for any instant inside
    second `s` equals `end - s`: so one tick serves every request of that second exactly.
    """

    second: int
    minute_bucket: str
    minute_ends: int
    minute_reset: int
    month_bucket: str
    month_ends: int
    month_length: int
    month_reset: int
    day: str  # YYYY-MM-DD (UTC): the usage counter's bucket


def _tick(second: int) -> _Tick:
    index = second // 60
    minute_ends = (index + 1) * 60
    day = datetime.fromtimestamp(second, UTC)
    month_ends, month_length = _month_bounds(day.year, day.month)
    return _Tick(second, str(index), minute_ends, max(1, minute_ends - second),
                 f"{day.year:04d}-{day.month:02d}", month_ends, month_length, max(1, month_ends - second),
                 day.date().isoformat())


class Limiter:
    """Fixed-window limits over a shared `Counter`; the gate's `limiter.hit` hook.

    The clock is the gate's `now` argument, so month and minute boundaries are tested
    by passing instants, never by sleeping. The windows of `now` are derived once per
    second (`_Tick`) and the RateLimit-Policy text once per limits × month, because on
    the local server this method ran on every request and its date arithmetic and
    formatting cost more than the gate's other checks together. Same values, same
    windows as `minute_window` / `month_window` (tests pin both).

    A counter may offer `incr_pair(first, first_expires, first_limit, second, second_expires)`
    (the minute, then the month only if the minute allowed it — the same two steps, under
    one lock); otherwise two `incr` calls are made, which is what DynamoDB does.
    """

    def __init__(self, counter: Counter, per_minute: int = DEFAULT_PER_MINUTE,
                 monthly: int = DEFAULT_MONTHLY):
        self.counter = counter
        self.per_minute = per_minute
        self.monthly = monthly
        self._swept_minute = ""
        self._last: _Tick | None = None
        self._pair = getattr(counter, "incr_pair", None)

    def hit(self, record: KeyRecord, now: datetime) -> LimitDecision:
        second = math.floor(now.timestamp())
        tick = self._last
        if tick is None or tick.second != second:
            tick = self._last = _tick(second)  # one tuple, replaced whole: safe to share across threads
        per_minute = record.per_minute if record.per_minute is not None else self.per_minute
        monthly = None
        if record.kind == "live":
            monthly = record.monthly if record.monthly is not None else self.monthly
        policy_header = ("RateLimit-Policy", _policy_field(per_minute, monthly, tick.month_length))

        if tick.minute_bucket != self._swept_minute:  # once per minute per process; a benign race
            self._swept_minute = tick.minute_bucket
            self.counter.sweep(int(now.timestamp()))
        minute_name = f"m:{record.id}:{tick.minute_bucket}"
        minute_expires = tick.minute_ends + MINUTE_TTL
        day_name = day_counter(record.id, tick.day)
        day_expires = tick.month_ends + DAY_GRACE
        day_counted = False
        if monthly is not None and self._pair is not None:
            used, used_month = self._pair(minute_name, minute_expires, per_minute,
                                          f"M:{record.id}:{tick.month_bucket}", tick.month_ends + MONTH_GRACE)
        elif self._pair is not None:  # a test key: the day's count rides in the minute's transaction
            used, day_used = self._pair(minute_name, minute_expires, per_minute, day_name, day_expires)
            used_month, day_counted = None, day_used is not None
        else:
            used = self.counter.incr(minute_name, minute_expires)
            used_month = None
        if used > per_minute:
            return _minute_refused(policy_header, per_minute, tick)
        if not day_counted:  # usage the dashboard shows: every request the minute let through
            self.counter.incr(day_name, day_expires)
        if monthly is None:
            return _allowed(policy_header, per_minute, used, None, 0, tick)
        if used_month is None:
            used_month = self.counter.incr(f"M:{record.id}:{tick.month_bucket}", tick.month_ends + MONTH_GRACE)
        if used_month > monthly:
            return _month_refused(policy_header, per_minute, used, monthly, tick)
        return _allowed(policy_header, per_minute, used, monthly, used_month, tick)


def _minute_refused(policy_header: tuple[str, str], per_minute: int, tick: _Tick) -> LimitDecision:
    return LimitDecision(
        False, [policy_header, ("RateLimit", f'"minute";r=0;t={tick.minute_reset}')], "RATE_LIMITED",
        f"This key's limit of {per_minute} requests per minute is reached; "
        f"retry in {tick.minute_reset} s (the window is the UTC calendar minute).",
        tick.minute_reset,
    )


def _month_refused(policy_header: tuple[str, str], per_minute: int, used: int, monthly: int,
                   tick: _Tick) -> LimitDecision:
    return LimitDecision(
        False,
        [policy_header, ("RateLimit", f'"minute";r={max(0, per_minute - used)};t={tick.minute_reset}, '
                                      f'"month";r=0;t={tick.month_reset}')],
        "MONTHLY_ALLOWANCE_EXHAUSTED",
        f"This live key's monthly allowance of {monthly} requests is used up until "
        f"{datetime.fromtimestamp(tick.month_ends, UTC):%Y-%m-%d} 00:00 UTC. "
        "Test keys do not count toward the allowance.",
        tick.month_reset,
    )


def _allowed(policy_header: tuple[str, str], per_minute: int, used: int, monthly: int | None, used_month: int,
             tick: _Tick) -> LimitDecision:
    minute = f'"minute";r={max(0, per_minute - used)};t={tick.minute_reset}'
    if monthly is None:
        return LimitDecision(True, [policy_header, ("RateLimit", minute)])
    return LimitDecision(True, [policy_header, ("RateLimit", f'{minute}, "month";r={max(0, monthly - used_month)};'
                                                             f't={tick.month_reset}')])


def decision_from_counts(record: KeyRecord, now: datetime, default_per_minute: int, default_monthly: int,
                         used: int, used_month: int, refused: str | None) -> LimitDecision:
    """The decision when the store itself counted only within the limits (the edge's conditional update).

    `refused` is "minute" or "month" when the store refused to count, and `used` /
    `used_month` are then the totals as they stood; otherwise the new totals. Same
    policies, headers and problem texts as `Limiter.hit`.
    """
    tick = _tick(math.floor(now.timestamp()))
    per_minute = record.per_minute if record.per_minute is not None else default_per_minute
    monthly = None
    if record.kind == "live":
        monthly = record.monthly if record.monthly is not None else default_monthly
    policy_header = ("RateLimit-Policy", _policy_field(per_minute, monthly, tick.month_length))
    if refused == "minute":
        return _minute_refused(policy_header, per_minute, tick)
    if monthly is None:
        return _allowed(policy_header, per_minute, used, None, 0, tick)
    if refused == "month":
        return _month_refused(policy_header, per_minute, used, monthly, tick)
    return _allowed(policy_header, per_minute, used, monthly, used_month, tick)


class MemoryCounter:
    """A counter for one process (tests, the gate micro-benchmark). Not for several workers."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._n: dict[str, int] = {}

    def incr(self, name: str, expires_at: int) -> int:
        with self._lock:
            n = self._n.get(name, 0) + 1
            self._n[name] = n
            return n

    def sweep(self, before: int) -> None:
        """Windows are never reused (the bucket is in the name), so keeping them is harmless here."""
