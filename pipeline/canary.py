"""The canary: is the served API current, and does a sample of its routes answer?

Run on a schedule (docs/monitoring.md#the-schedule) against the public base URL with a key of
every scope, it asks what a client asks — `/v1/periods`, then one request per route family
built from the months it names, and the docs page — and fails when

* `/v1/periods` is stale: the newest estimated month ended more than `max_lag_days` ago (the
  data's publication lag plus the time a monthly load may take; default in docs/monitoring.md), or
* any sampled route answers anything but 200 with a parseable body (a 5xx from a damaged release
  file, a 404 for a month the pointer promised, a dependency outage, a timeout).

Its result is a small JSON document (`status.json`) for humans and the status link of the docs
site; the exit status and a one-line reason are for the scheduler. Standard library HTTP only:
the canary must not share a failure mode with the code it checks.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from typing import Any

DEFAULT_MAX_LAG_DAYS = 60
SAMPLE_STATE = "KN"
STATUS_FORMAT = 1
STATUS_CACHE = "public, max-age=60"


@dataclass
class Check:
    route: str  # path and query as asked
    status: int | None  # None: no HTTP answer (refused, timed out)
    ms: float
    ok: bool
    problem: str | None = None  # the problem code of an error answer, or what went wrong


@dataclass
class CanaryResult:
    ok: bool
    reason: str  # one line: "ok: …" or the first failure (+ how many more)
    checked_at: str
    base_url: str
    release_id: str | None = None
    last_estimated: str | None = None
    last_forecast: str | None = None
    lag_days: int | None = None
    max_lag_days: int = DEFAULT_MAX_LAG_DAYS
    checks: list[Check] = field(default_factory=list)

    def status_document(self) -> dict[str, Any]:
        return {"format": STATUS_FORMAT, **asdict(self)}


def month_end(month: str) -> date:
    """The last day of a YYYY-MM month."""
    year, m = int(month[:4]), int(month[5:7])
    first_next = date(year + (m == 12), m % 12 + 1, 1)
    return date.fromordinal(first_next.toordinal() - 1)


def _get(base_url: str, path: str, key: str | None, timeout: float) -> tuple[int | None, dict[str, str], bytes, float]:
    """(status, lower-case headers, body, ms); status None when there was no HTTP answer."""
    req = urllib.request.Request(base_url.rstrip("/") + path, headers={
        "User-Agent": "malaria-risk-canary", **({"Authorization": f"Bearer {key}"} if key else {})})
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, body, _ms(t)
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read(), _ms(t)
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", e)
        return None, {}, str(reason).encode(), _ms(t)


def _ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000, 1)


def _problem(status: int | None, body: bytes) -> str:
    if status is None:
        return f"no answer ({body.decode('utf-8', 'replace')[:120]})"
    try:
        code = json.loads(body).get("code")
    except (ValueError, AttributeError):
        code = None
    return str(code) if code else f"HTTP {status}"


def sample_routes(last_estimated: str, state: str = SAMPLE_STATE) -> list[tuple[str, bool]]:
    """(path with query, needs the key) for one route of each family, from the months the pointer names."""
    return [
        (f"/v1/risk/states?period={last_estimated}", True),
        (f"/v1/risk/lgas?state={state}&period={last_estimated}", True),
        ("/v1/forecasts/states?months=1", True),
        (f"/v1/forecasts/lgas?state={state}&months=1", True),
        ("/v1/context/states", True),
        (f"/v1/boundaries/lgas?state={state}", True),
        ("/v1/downloads", True),
        ("/docs/", False),
    ]


def run_canary(base_url: str, key: str, max_lag_days: int = DEFAULT_MAX_LAG_DAYS, today: date | None = None,
               state: str = SAMPLE_STATE, timeout: float = 10.0) -> CanaryResult:
    now = datetime.now(UTC)
    today = today or now.date()
    result = CanaryResult(False, "", now.strftime("%Y-%m-%dT%H:%M:%SZ"), base_url, max_lag_days=max_lag_days)
    failures: list[str] = []

    status, headers, body, ms = _get(base_url, "/v1/periods", key, timeout)
    periods: dict[str, Any] = {}
    if status == 200:
        try:
            periods = json.loads(body)
        except ValueError:
            periods = {}
    le = periods.get("last_estimated")
    good = status == 200 and isinstance(le, str) and len(le) == 7
    result.checks.append(Check("/v1/periods", status, ms, good, None if good else _problem(status, body)))
    result.release_id = headers.get("x-release-id")
    if not good:
        failures.append(f"/v1/periods answered {_problem(status, body)}")
    else:
        assert isinstance(le, str)
        result.last_estimated, result.last_forecast = le, periods.get("last_forecast")
        result.lag_days = (today - month_end(le)).days
        if result.lag_days > max_lag_days:
            failures.append(f"stale: /v1/periods says the newest estimated month is {le}, which ended "
                            f"{result.lag_days} days ago (limit {max_lag_days})")
        for path, keyed in sample_routes(le, state):
            status, _, body, ms = _get(base_url, path, key if keyed else None, timeout)
            ok = status == 200 and (not keyed or _parses(body))
            problem = None if ok else (_problem(status, body) if status != 200 else "unparseable body")
            result.checks.append(Check(path, status, ms, ok, problem))
            if not ok:
                failures.append(f"{path} answered {problem}")
    result.ok = not failures
    if failures:
        more = f" (+{len(failures) - 1} more in status.json)" if len(failures) > 1 else ""
        result.reason = failures[0] + more
    else:
        result.reason = (f"ok: release {result.release_id}, newest estimated month {result.last_estimated} "
                         f"({result.lag_days} days), {len(result.checks)} routes answered")
    return result


def _parses(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def status_bytes(result: CanaryResult) -> bytes:
    return json.dumps(result.status_document(), indent=2).encode() + b"\n"


def status_key(prefix: str) -> str:
    base = prefix.strip("/")
    return f"{base}/status/status.json" if base else "status/status.json"


def publish_status(result: CanaryResult, bucket: str, prefix: str = "", endpoint_url: str | None = None,
                   client: Any = None) -> str:
    """Put status.json (replaced each run; the bucket's versioning keeps the history); its s3:// URL."""
    from pipeline.publish.s3.client import make_client, s3_errors

    client = client or make_client(endpoint_url, max_attempts=3, connect_timeout=5, read_timeout=20)
    key = status_key(prefix)
    with s3_errors(client, bucket, f"write s3://{bucket}/{key}"):
        client.put_object(Bucket=bucket, Key=key, Body=status_bytes(result), ContentType="application/json",
                          CacheControl=STATUS_CACHE)
    return f"s3://{bucket}/{key}"
