"""The client's exceptions: one family, so a script can catch `ClientError` and know it is ours."""

from __future__ import annotations

from typing import Any


class ClientError(Exception):
    """Anything this client raises on purpose."""


class ApiError(ClientError):
    """The service answered with a problem document (RFC 9457): its status, code and detail."""

    def __init__(self, status: int, code: str | None, detail: str, problem: dict[str, Any] | None = None):
        super().__init__(f"{status} {code or ''}: {detail}".strip())
        self.status = status
        self.code = code
        self.detail = detail
        self.problem = problem or {}


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
