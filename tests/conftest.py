"""Shared fixtures: a small synthetic release, a real SQLite key store, a real server on loopback.

The synthetic release goes through the real renderer, so edge tests exercise the
same files, manifest and symlink switch that a real build produces; only the
documents' contents are small and made up (no figures are published from them).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import uvicorn
from hypothesis import settings

from edge.local.app import App
from edge.local.asgi import HARDENED
from edge.local.settings import DEFAULT_FRONT
from edge.routes import CSV, GEOJSON, INCLUDES
from edge.stores.sqlite import SQLiteKeyStore
from pipeline.datasets.base import Produced
from pipeline.datasets.downloads import BundleFile, bundle
from pipeline.release.render import render_release
from pipeline.site.plots import validation_plots
from tests.paths import DATA_DIR, REPO_ROOT

# helper processes, Ctrl-C, sharing between xdist workers, the real-data snapshot's report
pytest_plugins = ["tests.session"]

# Property tests check rules, not speed: on a shared 2-core machine a per-example deadline only
# makes them flaky (speed is measured by the benchmarks under bench/).
settings.register_profile("project", deadline=None)
settings.load_profile("project")

__all__ = ["DATA_DIR", "ROOT"]  # test modules import these from here or from tests.paths

ROOT = REPO_ROOT

STATES = ("KN", "LA")
ESTIMATED = ("2024-01", "2024-02")
FORECAST = ("2024-03", "2024-04", "2024-05", "2024-06")
LGAS = ("NG020001", "NG026001")
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def synthetic_produced(with_transmission: bool = True) -> list[Produced]:
    """One Produced per dataset covering exactly what the route table expects for the facts above."""
    geo = Produced(
        "geography",
        {"/v1/boundaries/lgas": {(s,): {"type": "FeatureCollection", "source": "test", "features": [], "state": s}
                                  for s in STATES}},
        facts={"states": list(STATES)},
    )
    context = Produced(
        "context",
        {
            "/v1/context/states": {(): {"source": {}, "states": [{"state_code": s} for s in STATES]}},
            "/v1/context/lgas": {(s,): {"state_code": s, "lgas": []} for s in STATES},
        },
    )
    risk = Produced(
        "risk",
        {
            "/v1/periods": {(): {"last_estimated": ESTIMATED[-1], "last_forecast": FORECAST[-1]}},
            "/v1/risk/states": {(p,): {"period": p, "kind": "estimated", "states": []} for p in ESTIMATED},
            "/v1/risk/lgas": {(s, p): {"period": p, "state_code": s, "lgas": []} for s in STATES for p in ESTIMATED},
            "/v1/forecasts/states": {(m,): {"forecasts": [{"period": f} for f in FORECAST[: int(m)]]}
                                     for m in "1234"},
            "/v1/forecasts/lgas": {(s, m): {"state_code": s, "forecasts": [{"period": f} for f in FORECAST[: int(m)]]}
                                   for s in STATES for m in "1234"},
        },
        facts={"estimated": list(ESTIMATED), "forecast": list(FORECAST)},
        model_version="test-1",
    )
    downloads = bundle(
        [BundleFile("gazetteer.csv", CSV, b"lga_code,lga,state_code\r\nNG020001,Ajingi,KN\r\n", "test table"),
         BundleFile("lga_outlines.geojson", GEOJSON, b'{"type":"FeatureCollection","features":[]}', "test outlines")],
        "2026-11-22T10:00:00Z", "test-1",
    )
    history = Produced(
        "history",
        {
            "/v1/risk/lgas/all": {(p,): {"period": p, "kind": "estimated", "lgas": []} for p in ESTIMATED},
            "/v1/history/states": {(s, i): {"state_code": s, "include": i, "months": []}
                                   for s in STATES for i in INCLUDES},
            "/v1/history/lgas": {(lga, i): {"lga_code": lga, "include": i, "months": []}
                                 for lga in LGAS for i in INCLUDES},
        },
        facts={"lgas": list(LGAS)},
    )
    site = Produced("site", {}, files={"docs/index.html": ("text/html; charset=utf-8", b"<h1>docs</h1>"),
                                       "docs/openapi.json": ("application/json", b"{}")})
    # the validation producer always ships its plots (empty ones say why), which the docs pages show
    # (and the ratios producer its scorecard plot, which the skill page shows)
    from pipeline.datasets.ratios import SKILL_PLOT
    from pipeline.site.plots import skill_plot

    validation = Produced("validation", {}, files={**{f"docs/figures/{name}": ("image/svg+xml", svg.encode())
                                                      for name, svg in validation_plots({}).items()},
                                                   SKILL_PLOT: ("image/svg+xml", skill_plot({}).encode())})
    smc = Produced(
        "smc",
        {
            "/v1/transmission/smc/states": {(): {"states": []}},
            "/v1/transmission/smc/lgas": {(s,): {"state_code": s, "lgas": []} for s in STATES},
        },
    )
    out = [geo, context, risk, downloads, site, validation, history, smc]
    if with_transmission:
        out.append(Produced(
            "transmission",
            {
                "/v1/transmission/states": {(): {"states": []}},
                "/v1/transmission/lgas": {(s,): {"state_code": s, "lgas": []} for s in STATES},
            },
        ))
        out.append(Produced(
            "ratios",
            {
                "/v1/transmission/ratios/states": {(): {"states": []}},
                "/v1/transmission/ratios/lgas": {(s,): {"state_code": s, "lgas": []} for s in STATES},
            },
        ))
    return out


@pytest.fixture(scope="session")
def real_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build from the real data per session, shared by every xdist worker (the first to ask
    builds it, the others wait on a file lock); tests that use it carry the `slow` mark and only
    read it."""
    from pipeline.build import build
    from tests.session import once

    return once(tmp_path_factory, "real-build", lambda out: build(DATA_DIR, out))


def seed_fit_cache(real_build: Path, cache_dir: Path) -> Path:
    """The session build's fits as a new fit cache (`cache_dir`, e.g. a build root's `cache`), for a
    test of something other than fitting: a build that reuses documents or lacks an input, a
    producer's documents from the real data. Each fit is keyed by the content of its inputs and
    code (pipeline.cache), so whatever a test's inputs change is fitted again and the rest (about
    10 CPU s a build) is fitted once per session. Hard links: an entry is replaced, never written
    in place, and a test's new entries land in its own folder. Not for tests of fitting from nothing
    (tests/pipeline/release/test_store.py's reproducibility) nor for
    a test that compares a fit it makes with the published one (that would compare the fit with itself)."""
    from pipeline.build import CACHE_DIR
    from pipeline.cache import LOCAL_DIR

    source = real_build / CACHE_DIR
    for entry in [*source.glob("*.pickle"), *(source / LOCAL_DIR).glob("*.pickle")]:
        into = cache_dir / entry.relative_to(source)
        into.parent.mkdir(parents=True, exist_ok=True)
        os.link(entry, into)
    return cache_dir


@contextlib.contextmanager
def fits_of(real_build: Path, folder: Path) -> Iterator[Path]:
    """`seed_fit_cache` into `folder`, active for the block (what a build does with its root's cache)."""
    from pipeline import cache

    with cache.use(seed_fit_cache(real_build, folder)):
        yield folder


@pytest.fixture
def real_fits(real_build: Path, tmp_path: Path) -> Iterator[Path]:
    """The session build's fits, active for one test (`fits_of`)."""
    with fits_of(real_build, tmp_path / "fits") as folder:
        yield folder


@pytest.fixture
def release_root(tmp_path: Path) -> Path:
    root = tmp_path / "build"
    render_release(root, synthetic_produced(), "2026-11-22T10:00:00Z")
    return root


@pytest.fixture
def store(tmp_path: Path) -> SQLiteKeyStore:
    return SQLiteKeyStore(tmp_path / "var" / "keys.sqlite")


@pytest.fixture
def all_scopes_key(store: SQLiteKeyStore) -> str:
    _, key = store.create("all", ["risk_scores", "forecasts", "lga_boundaries"], "test", now=NOW)
    return key


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(url: str, proc, what: str, timeout: float = 30) -> None:
    """Poll `url` until a subprocess server answers; fail with its stderr if it dies or stalls."""
    import subprocess

    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                err = proc.stderr.read().decode() if proc.stderr not in (None, subprocess.DEVNULL) else ""
                raise RuntimeError(f"{what} did not start: {err}") from None
            time.sleep(0.1)


class LiveServer:
    """A real HTTP server on 127.0.0.1 in a thread, serving an App; stopped on exit.

    `front` is "direct" (httptools on uvloop calling the App, edge/local/direct.py, the
    default front) or "uvicorn" (the same App as ASGI, on uvicorn's h11 protocol).
    """

    def __init__(self, app: App, front: str = DEFAULT_FRONT, stall_window: float | None = None,
                 min_rate: float | None = None, send_buffer: int | None = None):
        self.app = app
        self.front = front
        # the direct front's write-stall bound, shortened by tests that would otherwise wait a minute
        self.stall = {k: v for k, v in (("stall_window", stall_window), ("min_rate", min_rate),
                                        ("send_buffer", send_buffer)) if v is not None}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.started = threading.Event()
        if front == "uvicorn":
            config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False,
                                    **HARDENED)
            self.server = uvicorn.Server(config)
            self.thread = threading.Thread(target=self.server.run, daemon=True)
        else:
            self.thread = threading.Thread(target=self._run_direct, daemon=True)

    def _run_direct(self) -> None:
        import asyncio

        import uvloop

        from edge.local.direct import listening_socket, serve_socket

        sock = listening_socket("127.0.0.1", self.port)

        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self.stop = self.loop.create_future()
            await serve_socket(self.app, sock, self.stop, ready=self.started.set, **self.stall)

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())
        sock.close()

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not (self.server.started if self.front == "uvicorn" else self.started.is_set()):
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.front == "uvicorn":
            self.server.should_exit = True
        else:
            self.loop.call_soon_threadsafe(lambda: self.stop.done() or self.stop.set_result(None))
        self.thread.join(timeout=10)


@pytest.fixture(params=["direct", "uvicorn"])
def front(request: pytest.FixtureRequest) -> str:
    """Every test that uses `live` runs against both HTTP fronts."""
    return request.param


@pytest.fixture
def live(release_root: Path, store: SQLiteKeyStore, front: str) -> Iterator[LiveServer]:
    with LiveServer(App(release_root, store), front) as server:
        yield server


@pytest.fixture
def client(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=10) as c:
        yield c
