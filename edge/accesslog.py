"""One structured JSON line per edge decision, written the same way by both runtimes.

The local server (`edge/local/app.py`) and the CloudFront adapter (`edge/cloudfront.py`)
hand every answer to `AccessLog.record`; nothing else formats a request log line, so a
CloudWatch metric filter written for one runtime matches the other (docs/monitoring.md).

A line never holds the API key, a header or the query string: the key is identified by
its id (`key_…`), the path by its route in the route table (`/v1/risk/lgas`), so a
path made up by a client cannot put arbitrary text into the logs, and the number of
distinct routes stays small enough to graph. Problem answers are always written;
successful ones (status < 400) are written one in `ok_every` (1: all, 0: none), each
carrying `sample` = `ok_every` so a count of logged successes times `sample` estimates
the real count.

Part of the edge bundle: standard library only, and only modules the CDN function has
already loaded (`json`, `time`), so the cold start pays nothing to import it.
"""

# Annotations are evaluated, not postponed, like the rest of the bundle's cold path.

import json
import time
from collections.abc import Callable

from .gate import Response
from .routes import BY_PATH, DOWNLOAD_FILE, PUBLIC_PREFIX

Sink = Callable[[str], None]
DEFAULT_OK_EVERY = 1  # successes logged one in N; problems always
EVENT = "edge_decision"
METHODS = frozenset(("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"))


def route_label(path: str) -> str:
    """The route-table path a request went to, or a small fixed label: never request text."""
    if path in BY_PATH:
        return path
    if path.startswith(DOWNLOAD_FILE.prefix):
        return DOWNLOAD_FILE.path
    if path in ("/", "/docs") or path.startswith("/" + PUBLIC_PREFIX):
        return "/docs/"
    return "other"


class AccessLog:
    """Formats and writes decision lines to `sink` (one call per line, no newline)."""

    __slots__ = ("sink", "ok_every", "runtime", "_ok_seen")

    def __init__(self, sink: Sink, ok_every: int = DEFAULT_OK_EVERY, runtime: str = "local"):
        if ok_every < 0:
            raise ValueError("ok_every must be 0 (no successes) or a whole number ≥ 1")
        self.sink = sink
        self.ok_every = ok_every
        self.runtime = runtime
        self._ok_seen = 0

    def line(self, method: str, path: str, resp: Response, release_id: str | None, latency_ms: float,
             sample: int = 1) -> str:
        """The JSON text of one decision (compact, keys in a fixed order)."""
        method = method.upper()
        return json.dumps({
            "event": EVENT,
            "time": round(time.time(), 3),
            "runtime": self.runtime,
            "method": method if method in METHODS else "other",
            "route": route_label(path),
            "status": resp.status,
            "problem": resp.extra.get("problem"),
            "key_id": resp.key_id,
            "release": resp.release_id or release_id,
            "latency_ms": round(latency_ms, 3),
            "sample": sample,
        }, separators=(",", ":"))

    def record(self, method: str, path: str, resp: Response, release_id: str | None, started: float) -> str | None:
        """Write the decision for `resp` if it is a problem or its success is sampled; `started` is the
        `time.perf_counter()` reading taken when the request arrived. Returns the line written, if any."""
        sample = 1
        if resp.status < 400:
            if self.ok_every == 0:
                return None
            self._ok_seen += 1
            if (self._ok_seen - 1) % self.ok_every:
                return None
            sample = self.ok_every
        text = self.line(method, path, resp, release_id, (time.perf_counter() - started) * 1000.0, sample)
        self.sink(text)
        return text


def event_line(event: str, **fields: object) -> str:
    """A non-request line (a dependency failure, a pointer refresh kept) in the same JSON shape."""
    return json.dumps({"event": event, "time": round(time.time(), 3), **fields}, separators=(",", ":"),
                      default=str)
