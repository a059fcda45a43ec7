"""The client's exceptions: one family, so a script can catch `ClientError` and know it is ours."""

from __future__ import annotations

import re
from typing import Any

# The service's details name HTTP routes ("use /v1/forecasts/lgas"); this client's users call
# methods, so a message names the method instead. Longest paths first (/v1/risk/lgas/all before
# /v1/risk/lgas).
METHODS = {
    "/v1/risk/lgas/all": "risk_lgas_all()",
    "/v1/risk/states": "risk_states()",
    "/v1/risk/lgas": "risk_lgas()",
    "/v1/forecasts/states": "forecasts_states()",
    "/v1/forecasts/lgas": "forecasts_lgas()",
    "/v1/history/states": "history_state()",
    "/v1/history/lgas": "history_lga()",
    "/v1/context/states": "context_states()",
    "/v1/context/lgas": "context_lgas()",
    "/v1/transmission/states": "transmission_states()",
    "/v1/transmission/lgas": "transmission_lgas()",
    "/v1/boundaries/lgas": "boundaries()",
    "/v1/periods": "periods()",
    "/v1/downloads": "downloads()",
    "/v1/releases": "releases()",
}
_ROUTE = re.compile("(?:" + "|".join(re.escape(p) for p in METHODS) + r")(?![\w/])")


def for_client(detail: str) -> str:
    """The service's detail with each route it names replaced by this client's method for it."""
    return _ROUTE.sub(lambda m: METHODS[m.group(0)], detail)


class ClientError(Exception):
    """Anything this client raises on purpose."""


class ApiError(ClientError):
    """The service answered with a problem document (RFC 9457): its status, code and detail.

    `detail` names this client's methods where the service's names an HTTP route (the service's own
    words stay in `problem["detail"]`); `suggestions` are the codes an unknown state or LGA most
    likely meant (the problem's `suggestions`, empty when there are none)."""

    def __init__(self, status: int, code: str | None, detail: str, problem: dict[str, Any] | None = None):
        detail = for_client(detail)
        super().__init__(f"{status} {code or ''}: {detail}".strip())
        self.status = status
        self.code = code
        self.detail = detail
        self.problem = problem or {}
        self.suggestions: list[dict[str, str]] = list(self.problem.get("suggestions") or [])


class RateLimited(ApiError):
    """429 after the client waited as long as it was allowed to (`max_wait`)."""

    def __init__(self, status: int, code: str | None, detail: str, problem: dict[str, Any] | None, retry_after: float):
        super().__init__(status, code, detail, problem)
        self.retry_after = retry_after


class MissingDependency(ClientError, ImportError):
    """A call needs an optional library that is not installed (frames, GeoDataFrames). Also an
    ImportError, so code that already guards the import keeps working; the message names the extra
    that installs it."""

    def __init__(self, module: str, extra: str, needed_for: str):
        super().__init__(f"{needed_for}: {module} is not installed; "
                         f"pip install 'malaria-risk-client[{extra}]' (or pass as_='json')")
        self.module = module
        self.extra = extra


class ChecksumError(ClientError):
    """A downloaded bundle file does not have the SHA-256 the release lists for it."""
