"""A release built from the real data, served on loopback with a real key: what the browser
tests, the docs examples and the generated client run against."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from edge.local.app import App
from edge.stores.sqlite import SQLiteKeyStore
from tests.conftest import LiveServer
from tests.pipeline.site.screenshots import browser


@dataclass(frozen=True)
class RealSite:
    url: str
    key: str  # all scopes
    narrow_key: str  # risk_scores only
    root: Path


@pytest.fixture(scope="package")
def real_site(real_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSite]:
    """The session's real build (tests/conftest.py), read only, behind this package's own server and keys."""
    tmp = tmp_path_factory.mktemp("real-site")
    store = SQLiteKeyStore(tmp / "var" / "keys.sqlite")
    _, key = store.create("site tests", ["risk_scores", "forecasts", "lga_boundaries"], "test")
    _, narrow = store.create("site tests, one scope", ["risk_scores"], "test")
    with LiveServer(App(real_build, store)) as server:
        yield RealSite(server.url, key, narrow, real_build)


@pytest.fixture(scope="package")
def chromium() -> Iterator[Any]:
    """One headless Chromium for every browser test of the site."""
    with browser() as b:
        yield b
