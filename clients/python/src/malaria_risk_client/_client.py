"""The client: one `Client` per base URL and key, answers as dicts or data frames.

Design (see README.md): every table is read from the service's CSV form, the same document as the
JSON, with the reader options the service documents (codes stay text, so Nasarawa's `NA` is not
read as missing); answers are revalidated with their ETag, so a script run twice downloads what
changed only; a 429 (or a 503 with `Retry-After`) is waited out as the server says, up to
`max_wait` seconds per request.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from ._errors import ApiError, ChecksumError, ClientError, MissingDependency, RateLimited
from ._project import area_kind, check_inputs, parse_month, project_export, projection

__all__ = ["Client"]

# Columns that are identifiers: always text, never a number or a missing value.
CODE_COLUMNS = ("state_code", "lga_code", "eha_code", "admin1_pcode", "admin2_pcode", "release_id")
ENV_KEY = "MALARIA_RISK_API_KEY"
ENV_URL = "MALARIA_RISK_BASE_URL"
_RATELIMIT_RESET = re.compile(r"(?:^|[;,\s])t=(\d+)")
_FRAMES = ("auto", "polars", "pandas", "json")
# optional libraries and the extra of this package that installs each
EXTRAS = {"polars": "polars", "pandas": "pandas", "geopandas": "geo"}


class Client:
    """A session with the service.

    `frames` picks what table methods return: "polars", "pandas", "json" (the parsed JSON
    answer), or "auto" (polars if installed, else pandas). Each table method also takes `as_`
    to choose per call. `cache_dir` keeps answers and their ETags between runs (default: in
    memory only). `sleep` is how the client waits (replace it to log or to cap waits).
    """

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, frames: str = "auto",
                 max_wait: float = 90.0, retries: int = 3, timeout: float = 60.0,
                 cache_dir: str | os.PathLike[str] | None = None, sleep: Callable[[float], None] = time.sleep,
                 http: httpx.Client | None = None) -> None:
        base_url = base_url or os.environ.get(ENV_URL)
        api_key = api_key or os.environ.get(ENV_KEY)
        if not base_url:
            raise ClientError(f"no base URL: pass base_url or set {ENV_URL}")
        if not api_key:
            raise ClientError(f"no API key: pass api_key or set {ENV_KEY} (keys start svc_live_ or svc_test_)")
        if frames not in _FRAMES:
            raise ClientError(f"frames must be one of {', '.join(_FRAMES)}")
        self.base_url = base_url.rstrip("/")
        self.frames = frames
        self.max_wait = max_wait
        self.retries = retries
        self.sleep = sleep
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._memory: dict[str, tuple[str, bytes]] = {}
        self._own_http = http is None
        self.http = http or httpx.Client(timeout=timeout, follow_redirects=False)
        self._headers = {"Authorization": f"Bearer {api_key}", "User-Agent": "malaria-risk-client-python/0.1"}
        self.stats = {"requests": 0, "not_modified": 0, "waited_seconds": 0.0}

    # --- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        if self._own_http:
            self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- index and JSON-only answers -----------------------------------------------------------

    def periods(self) -> dict[str, Any]:
        """Months available, latest estimated and forecast month, model version."""
        return self._json("/v1/periods")

    def releases(self) -> dict[str, Any]:
        """The releases the service keeps, newest first, each with its pinned bundle path."""
        return self._json("/v1/releases")

    def downloads(self) -> dict[str, Any]:
        """The current release's bundle files with sizes and SHA-256."""
        return self._json("/v1/downloads")

    def transmission_states(self) -> dict[str, Any]:
        """Seasons and survey trends, national and per state (nested: JSON only)."""
        return self._json("/v1/transmission/states")

    # --- tables -----------------------------------------------------------------------------

    def risk_states(self, period: str | None = None, *, as_: str | None = None) -> Any:
        return self._table("/v1/risk/states", {"period": period}, as_)

    def risk_lgas(self, state: str, period: str | None = None, *, as_: str | None = None) -> Any:
        return self._table("/v1/risk/lgas", {"state": state, "period": period}, as_)

    def risk_lgas_all(self, period: str | None = None, *, as_: str | None = None) -> Any:
        """All 774 LGAs of one month in one call."""
        return self._table("/v1/risk/lgas/all", {"period": period}, as_)

    def history_state(self, state: str, *, forecasts: bool = False, as_: str | None = None) -> Any:
        """Every month of one state (oldest first); `forecasts=True` adds the forecast months
        (the key needs the `forecasts` scope). Filter dates client-side: the whole history is small."""
        return self._table("/v1/history/states", {"state": state, "include": "forecasts" if forecasts else None}, as_)

    def history_lga(self, lga_code: str, *, forecasts: bool = False, as_: str | None = None) -> Any:
        """Every month of one LGA, by its `lga_code` (oldest first)."""
        return self._table("/v1/history/lgas", {"lga": lga_code, "include": "forecasts" if forecasts else None}, as_)

    def forecasts_states(self, months: int = 4, *, as_: str | None = None) -> Any:
        return self._table("/v1/forecasts/states", {"months": months}, as_)

    def forecasts_lgas(self, state: str, months: int = 4, *, as_: str | None = None) -> Any:
        return self._table("/v1/forecasts/lgas", {"state": state, "months": months}, as_)

    def context_states(self, *, as_: str | None = None) -> Any:
        return self._table("/v1/context/states", {}, as_)

    def context_lgas(self, state: str, *, as_: str | None = None) -> Any:
        return self._table("/v1/context/lgas", {"state": state}, as_)

    def transmission_lgas(self, state: str, *, as_: str | None = None) -> Any:
        return self._table("/v1/transmission/lgas", {"state": state}, as_)

    def smc(self, state: str | None = None, *, as_: str | None = None) -> Any:
        """Seasonal malaria chemoprevention planning by Nigeria's rainfall rule: every state, or with
        `state` (e.g. "KN") every LGA of that state. One row per area: eligible, margin, years passed,
        onset, first_cycle_month, cycles, children treated per cycle in the last campaign (docs/smc.md)."""
        if state is None:
            return self._table("/v1/transmission/smc/states", {}, as_)
        return self._table("/v1/transmission/smc/lgas", {"state": state}, as_)

    def boundaries(self, state: str, *, as_: str = "geojson") -> Any:
        """LGA outlines of a state: the GeoJSON dict, or a GeoDataFrame with `as_="geopandas"`."""
        doc = self._json("/v1/boundaries/lgas", {"state": state})
        if as_ == "geojson":
            return doc
        if as_ == "geopandas":
            gpd = optional("geopandas", "as_='geopandas'")
            return gpd.GeoDataFrame.from_features(doc["features"], crs="EPSG:4326")
        raise ClientError("as_ must be 'geojson' or 'geopandas'")

    def ratios_states(self, *, as_: str | None = None) -> Any:
        """Season ratios of every state (start month x horizon 1-4), with 80 % ranges."""
        return self._table("/v1/transmission/ratios/states", {}, as_)

    def ratios_lgas(self, state: str, *, as_: str | None = None) -> Any:
        """Season ratios of every LGA of a state."""
        return self._table("/v1/transmission/ratios/lgas", {"state": state}, as_)

    def project_counts(self, area: str | None = None, month: Any = None, cases: Any = None, horizons: int = 4, *,
                       state: str | None = None, dhis2: str | Path | bytes | None = None) -> dict[str, Any]:
        """Project a count you have: `cases` confirmed in `area` (state code or lga_code) in `month`
        ('YYYY-MM' or 1-12), over the next 1-`horizons` months, with 80 % ranges. Each month is
        `insufficient_skill` (no number) where the service's cross-validation found projected counts did
        not beat the count carried forward for areas like this one. For an LGA, `state` saves one lookup.
        Offline, use `malaria_risk_client.project_counts(..., bundle=...)`.

        With `dhis2` (a DHIS2 analytics export: JSON, or CSV long or pivot, of "Confirmed uncomplicated
        malaria"), every org unit is matched to a code (as the API's suggestions) and projected."""
        fn = "project_counts"
        if dhis2 is not None:
            return self._project_export(dhis2, month, horizons)
        if area is None or month is None or cases is None:
            raise ClientError(f"{fn}: give area, month and cases, or a DHIS2 export (dhis2=...)")
        kind = area_kind(area, fn)
        parse_month(month, fn)
        check_inputs(cases, horizons, fn)
        if kind == "state":
            rows = [r for r in self._json("/v1/transmission/ratios/states")["states"] if r["state_code"] == area]
        else:
            if state is None:
                found = [r["state_code"] for r in self._json("/v1/risk/lgas/all")["lgas"] if r["lga_code"] == area]
                if not found:
                    raise ClientError(f"{fn}: LGA {area!r} is not in this release")
                state = found[0]
            rows = [r for r in self._json("/v1/transmission/ratios/lgas", {"state": state})["lgas"]
                    if r["lga_code"] == area]
        if not rows:
            raise ClientError(f"{fn}: area {area!r} has no season ratios in this release"
                              + (f" (is it in state {state}?)" if kind == "lga" else ""))
        return projection(rows, area, month, cases, horizons, fn)

    def _project_export(self, export: str | Path | bytes, month: Any, horizons: int) -> dict[str, Any]:
        lgas = [{"lga_code": r["lga_code"], "lga": r["lga"], "state_code": r["state_code"]}
                for r in self._json("/v1/risk/lgas/all")["lgas"]]
        st_rows = self._json("/v1/transmission/ratios/states")["states"]
        states = {r["state_code"]: r["state"] for r in st_rows}
        state_of = {r["lga_code"]: r["state_code"] for r in lgas}
        by_state: dict[str, list[dict[str, Any]]] = {}

        def ratios_of(code: str) -> list[Mapping[str, Any]]:
            if code in states:
                return [r for r in st_rows if r["state_code"] == code]
            s = state_of[code]
            if s not in by_state:
                by_state[s] = self._json("/v1/transmission/ratios/lgas", {"state": s})["lgas"]
            return [r for r in by_state[s] if r["lga_code"] == code]

        return project_export(export, lgas, states, ratios_of, month, horizons)

    # --- bundles -------------------------------------------------------------------------------

    def download(self, name: str, dest: str | os.PathLike[str] = ".", *, release_id: str | None = None) -> Path:
        """Save one bundle file into folder `dest` after checking its SHA-256 against the release's
        own `SHA256SUMS`; nothing is left at the destination when the check fails.

        `release_id` pins an older kept release (see `releases()`); default: the current one.
        """
        rid = release_id or self.downloads()["release_id"]
        sums = self._raw(f"/v1/downloads/{rid}/SHA256SUMS", {}).decode("utf-8")
        expected = {line.split()[1].lstrip("*"): line.split()[0] for line in sums.splitlines() if line.strip()}
        if name not in expected:
            raise ClientError(f"release {rid} has no bundle file {name!r}; it has {', '.join(sorted(expected))}")
        folder = Path(dest)
        folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
        try:
            with os.fdopen(fd, "wb") as out:
                resp = self._send("GET", f"/v1/downloads/{rid}/{name}", {}, stream=True)
                try:
                    self._raise_for(resp)
                    for chunk in resp.iter_bytes(1 << 16):
                        digest.update(chunk)
                        out.write(chunk)
                finally:
                    resp.close()
            if digest.hexdigest() != expected[name]:
                raise ChecksumError(f"{name} of release {rid}: SHA-256 {digest.hexdigest()}, the release lists "
                                    f"{expected[name]}; the file was not kept")
            target = folder / name
            os.replace(tmp, target)
            return target
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # --- plumbing ------------------------------------------------------------------------------

    def _table(self, path: str, params: Mapping[str, Any], as_: str | None) -> Any:
        kind = self._frames(as_)
        if kind == "json":
            return self._json(path, params)
        body = self._raw(path, {**params, "format": "csv"})
        return read_csv(body, kind)

    def _frames(self, as_: str | None) -> str:
        kind = as_ or self.frames
        if kind not in _FRAMES:
            raise ClientError(f"as_ must be one of {', '.join(_FRAMES)}")
        if kind == "json":
            return kind
        if kind != "auto":
            optional(kind, f"frames={kind!r}")  # before the request: a missing library costs no download
            return kind
        for mod in ("polars", "pandas"):
            try:
                optional(mod, "frames")
                return mod
            except MissingDependency:
                continue
        raise MissingDependency("polars or pandas", "polars", "data frames")

    def _json(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return json.loads(self._raw(path, params or {}))

    def _raw(self, path: str, params: Mapping[str, Any]) -> bytes:
        """The answer's bytes, revalidated with the cached ETag when there is one."""
        query = {k: str(v) for k, v in params.items() if v is not None}
        cache_key = path + "?" + "&".join(f"{k}={v}" for k, v in sorted(query.items()))
        cached = self._cached(cache_key)
        headers = {"If-None-Match": cached[0]} if cached else {}
        resp = self._send("GET", path, query, headers=headers)
        if resp.status_code == 304 and cached:
            self.stats["not_modified"] += 1
            return cached[1]
        self._raise_for(resp)
        etag = resp.headers.get("etag")
        if etag:
            self._store(cache_key, etag, resp.content)
        return resp.content

    def _send(self, method: str, path: str, query: Mapping[str, str], *, headers: Mapping[str, str] | None = None,
              stream: bool = False) -> Any:
        """One request, repeated after the wait the server asks for on 429 (and 503 with Retry-After)."""
        waited = 0.0
        for attempt in range(self.retries + 1):
            req = self.http.build_request(method, self.base_url + path, params=query,
                                          headers={**self._headers, **(headers or {})})
            self.stats["requests"] += 1
            resp = self.http.send(req, stream=stream)
            if resp.status_code not in (429, 503):
                return resp if stream else _read(resp)
            wait = retry_after(resp.headers)
            if resp.status_code == 503 and wait is None:
                return resp if stream else _read(resp)
            if stream:
                resp.read()
                resp.close()
            if wait is None:
                wait = 1.0
            if attempt == self.retries or waited + wait > self.max_wait:
                problem = _problem(resp)
                raise RateLimited(resp.status_code, problem.get("code"), problem.get("detail", resp.reason_phrase),
                                  problem, wait)
            self.sleep(wait)
            waited += wait
            self.stats["waited_seconds"] += wait
        raise AssertionError("unreachable")

    def _raise_for(self, resp: httpx.Response) -> None:
        if resp.status_code < 400:
            return
        if not resp.is_closed:
            resp.read()
        problem = _problem(resp)
        raise ApiError(resp.status_code, problem.get("code"), problem.get("detail") or resp.reason_phrase, problem)

    def _cached(self, key: str) -> tuple[str, bytes] | None:
        if key in self._memory:
            return self._memory[key]
        if self.cache_dir is None:
            return None
        base = self.cache_dir / hashlib.sha256(key.encode()).hexdigest()
        try:
            entry = (base.with_suffix(".etag").read_text(), base.with_suffix(".body").read_bytes())
        except OSError:
            return None
        self._memory[key] = entry
        return entry

    def _store(self, key: str, etag: str, body: bytes) -> None:
        self._memory[key] = (etag, body)
        if self.cache_dir is None:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        base = self.cache_dir / hashlib.sha256(key.encode()).hexdigest()
        for suffix, data in ((".body", body), (".etag", etag.encode())):
            tmp = base.with_suffix(suffix + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, base.with_suffix(suffix))


def _read(resp: httpx.Response) -> httpx.Response:
    resp.read()
    return resp


def _problem(resp: httpx.Response) -> dict[str, Any]:
    try:
        doc = resp.json()
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait: `Retry-After` (seconds), else the reset `t=` of the `RateLimit` header."""
    value = headers.get("retry-after")
    if value is not None and value.strip().isdigit():
        return float(value.strip())
    m = _RATELIMIT_RESET.search(headers.get("ratelimit", ""))
    return float(m.group(1)) if m else None


def optional(module: str, needed_for: str) -> Any:
    """An optional library, or `MissingDependency` naming the extra that installs it: a missing
    library is one of the client's own errors, never a bare ModuleNotFoundError."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(module, EXTRAS[module], needed_for) from None


def read_csv(body: bytes, kind: str) -> Any:
    """A CSV answer as a frame, read with the options the service documents: only an empty cell
    is missing (Nasarawa's state code `NA` stays text) and code columns are always text."""
    header = body.split(b"\n", 1)[0].decode("utf-8").split(",")
    codes = [c for c in CODE_COLUMNS if c in header]
    if kind == "polars":
        pl = optional("polars", "frames='polars'")
        return pl.read_csv(io.BytesIO(body), infer_schema_length=None, null_values=[""],
                           schema_overrides={c: pl.String for c in codes})
    pd = optional("pandas", "frames='pandas'")
    return pd.read_csv(io.BytesIO(body), keep_default_na=False, na_values=[""], dtype={c: str for c in codes})
