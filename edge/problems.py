"""Every error the service can answer, as RFC 9457 problem details with a stable `code`.

One catalogue for the gate, the docs and the OpenAPI document. Clients branch on
`code` (never on `title` or `detail`, which are for people). The SPEC fixes the
codes of sections 5 and 7; the 401, 429 and request-shape codes are ours and are
documented from this table.
"""

# Annotations are evaluated, not postponed: a NamedTuple compiles each string annotation when the
# class is created, ~30 µs a field of the CDN function's cold start (docs/deploy.md#measurements).

import json
from typing import NamedTuple

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "/docs/errors.html#"  # relative reference (RFC 9457 §3.1.1) to the docs page, one anchor per code


class Problem(NamedTuple):
    code: str
    status: int
    title: str
    when: str  # the condition, for the docs


CATALOGUE: tuple[Problem, ...] = (
    # authentication (ours: the SPEC leaves the 401 codes open)
    Problem("API_KEY_MISSING", 401, "API key required",
            "No `Authorization: Bearer` or `x-api-key` header was sent."),
    Problem("API_KEY_INVALID", 401, "API key not recognised",
            "The key is malformed (wrong prefix or characters) or no such key exists."),
    Problem("API_KEY_EXPIRED", 401, "API key expired", "The key's chosen expiry date has passed."),
    Problem("API_KEY_REVOKED", 401, "API key revoked", "The key was revoked; revocation is immediate."),
    Problem("ACCOUNT_REMOVED", 401, "Key owner removed", "The account that owns the key was removed."),
    Problem("ORGANISATION_SUSPENDED", 401, "Organisation suspended",
            "The organisation that owns the key is suspended."),
    # authorisation (SPEC)
    Problem("SCOPE_REQUIRED", 403, "Scope required", "The key lacks the endpoint's scope."),
    # limits (ours: the SPEC says 429 and leaves the codes open)
    Problem("RATE_LIMITED", 429, "Per-minute limit reached",
            "The key made more requests this minute than its per-minute limit."),
    Problem("MONTHLY_ALLOWANCE_EXHAUSTED", 429, "Monthly allowance used up",
            "A live key used up its monthly allowance (calendar month, UTC)."),
    # request shape (ours)
    Problem("NOT_FOUND", 404, "No such endpoint", "The path is not one of the documented endpoints."),
    Problem("METHOD_NOT_ALLOWED", 405, "Method not allowed", "Only GET, HEAD and OPTIONS are served."),
    Problem("UNKNOWN_PARAMETER", 400, "Unknown query parameter",
            "The query string names a parameter the endpoint does not take."),
    Problem("REPEATED_PARAMETER", 400, "Repeated query parameter", "A parameter appears more than once."),
    Problem("INVALID_QUERY", 400, "Malformed query string",
            "The query string is not valid percent-encoded UTF-8, or holds control characters."),
    # parameter values (SPEC section 7)
    Problem("INVALID_PERIOD", 400, "Invalid period", "`period` is not of the form YYYY-MM."),
    Problem("FORECAST_PERIOD", 400, "Period is a forecast month",
            "`period` is a forecast month; use the forecast endpoints."),
    Problem("PERIOD_NOT_AVAILABLE", 404, "Period not available",
            "`period` is outside the months the data covers. For a later month the detail names the latest "
            "estimated month and how far the forecasts reach, and, once every forecast month has passed, that "
            "the next data load is due."),
    Problem("UNKNOWN_STATE", 404, "Unknown state", "`state` is missing or is not a valid state code."),
    Problem("INVALID_MONTHS", 400, "Invalid months", "`months` is not a whole number from 1 to 4."),
    # history parameters (ours)
    Problem("UNKNOWN_LGA", 404, "Unknown LGA",
            "`lga` is missing or is not an LGA code of the release (OCHA p-code, NG + 6 digits)."),
    Problem("INVALID_INCLUDE", 400, "Invalid include", "`include` is given with a value other than `forecasts`."),
    # formats and downloads (ours)
    Problem("INVALID_FORMAT", 400, "Invalid format", "`format` is neither `json` nor `csv`."),
    Problem("UNKNOWN_RELEASE", 404, "Release not kept",
            "The download path names a release id this service does not keep (never built, or pruned)."),
    Problem("UNKNOWN_FILE", 404, "No such download",
            "The download path names no file of that release's bundle (see /v1/downloads for the names)."),
    Problem("RANGE_NOT_SATISFIABLE", 416, "Range not satisfiable",
            "The `Range` header asks for bytes past the end of the file (`Content-Range` gives its size)."),
    # data availability (SPEC)
    Problem("TRANSMISSION_DATA_UNAVAILABLE", 503, "Transmission data unavailable",
            "Transmission data has not been loaded on the server."),
    # the edge's dependencies (ours)
    Problem("TEMPORARILY_UNAVAILABLE", 503, "Temporarily unavailable",
            "A store the service needs to decide (the key store, the limit counters or the release pointer) "
            "did not answer in time or is being repaired; nothing was counted against the key. Retry after "
            "the `Retry-After` seconds."),
    # our own fault
    Problem("RELEASE_INCOMPLETE", 500, "Release incomplete",
            "The published release lacks a file the route table expects (a build defect; report it)."),
)

BY_CODE: dict[str, Problem] = {p.code: p for p in CATALOGUE}


def problem_body(code: str, detail: str, instance: str | None = None, **extra: object) -> bytes:
    """Serialise one problem. The standard library's json keeps the edge bundle dependency-free."""
    p = BY_CODE[code]
    doc: dict[str, object] = {
        "type": TYPE_BASE + code,
        "title": p.title,
        "status": p.status,
        "code": code,
        "detail": detail,
    }
    if instance is not None:
        doc["instance"] = instance
    doc.update(extra)
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
