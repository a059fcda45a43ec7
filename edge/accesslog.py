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
already loaded (`json`, `re`, `time`), so the cold start pays nothing to import it.
"""

# Annotations are evaluated, not postponed, like the rest of the bundle's cold path.

import json
import re
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
        """The JSON text of one decision (compact, keys in a fixed order).

        Formatted by hand rather than by `json.dumps`, which cost as much as the whole decision
        it describes (~12 µs against ~20 µs on the local server): every string here is a route
        label, a problem code, a key or release id, whose characters need no escaping, and any
        that would is escaped by `json.dumps` after all (`_str`); tests compare with json."""
        method = method.upper()
        problem = resp.extra.get("problem")
        return (f'{{"event":"{EVENT}","time":{time.time():.3f},"runtime":{_str(self.runtime)},'
                f'"method":"{method if method in METHODS else "other"}","route":{_str(route_label(path))},'
                f'"status":{int(resp.status)},"problem":{_str(problem)},"key_id":{_str(resp.key_id)},'
                f'"release":{_str(resp.release_id or release_id)},"latency_ms":{latency_ms:.3f},'
                f'"sample":{int(sample)}}}')

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


_PLAIN = re.compile(r"[A-Za-z0-9_.:{}/ -]*")  # characters a JSON string holds as they are


_QUOTED: dict[object, str] = {None: "null"}  # the few ids and labels of a process, quoted once


def _str(value: object) -> str:
    quoted = _QUOTED.get(value)
    if quoted is None:
        text = str(value)
        quoted = f'"{text}"' if _PLAIN.fullmatch(text) else json.dumps(text)
        if len(_QUOTED) >= 4096:
            _QUOTED.clear()
            _QUOTED[None] = "null"
        _QUOTED[value] = quoted
    return quoted


def event_line(event: str, **fields: object) -> str:
    """A non-request line (a dependency failure, a pointer refresh kept) in the same JSON shape."""
    return json.dumps({"event": event, "time": round(time.time(), 3), **fields}, separators=(",", ":"),
                      default=str)
