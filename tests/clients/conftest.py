"""Servers the client packages are tested against: the real build on loopback, and a second server
over the same build whose keys allow one request a minute, with a clock two seconds before a minute
ends, so a client meets a real 429 and must wait about two seconds for the next minute."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from edge.limits import Limiter, MemoryCounter
from edge.local.app import App
from edge.stores.sqlite import SQLiteKeyStore
from tests.conftest import LiveServer


class LateInTheMinute:
    """Server time: 12:00:58 at the first request, then running with the real clock."""

    def __init__(self) -> None:
        self.anchor: float | None = None

    def __call__(self) -> datetime:
        if self.anchor is None:
            self.anchor = time.monotonic()
        return datetime(2026, 11, 23, 12, 0, 58, tzinfo=UTC) + timedelta(seconds=time.monotonic() - self.anchor)


@dataclass
class Servers:
    url: str
    key: str
    narrow_key: str  # risk_scores only: no forecasts, no outlines
    store: SQLiteKeyStore
    build: Path


@dataclass
class Limited:
    url: str
    key: str


@pytest.fixture(scope="module")
def servers(real_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    store = SQLiteKeyStore(tmp_path_factory.mktemp("keys") / "keys.sqlite")
    _, key = store.create("client", ["risk_scores", "forecasts", "lga_boundaries"], "test")
    _, narrow = store.create("narrow", ["risk_scores"], "test")
    with LiveServer(App(real_build, store)) as live:
        yield Servers(live.url, key, narrow, store, real_build)


@pytest.fixture
def limited(servers: Servers) -> Iterator[Limited]:
    """A fresh limited server per test: its clock starts two seconds before a minute ends."""
    _, key = servers.store.create("limited", ["risk_scores", "forecasts", "lga_boundaries"], "test")
    app = App(servers.build, servers.store, Limiter(MemoryCounter(), per_minute=1), clock=LateInTheMinute())
    with LiveServer(app) as slow:
        yield Limited(slow.url, key)
