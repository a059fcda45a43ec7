"""The dashboard on loopback: real SQLite key and dashboard stores, a file mailer the tests
read codes from, uvicorn in a thread on a port the test chooses, and a client that keeps
the `__Host-` cookie itself (an HTTP client drops Secure cookies on plain http; browsers
treat 127.0.0.1 as a secure context, see tests/dashboard/test_browser.py)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import uvicorn

from dashboard.app import create_app
from dashboard.mailer import FileMailer
from dashboard.service import Dashboard
from dashboard.settings import DashboardSettings
from dashboard.store import SQLiteDashboardStore
from dashboard.usage import CounterUsage
from edge.stores.counters import SQLiteCounter
from edge.stores.sqlite import SQLiteKeyStore
from tests.conftest import free_port


class Clock:
    """A settable clock: timeouts are tested by moving it, never by sleeping."""

    def __init__(self, now: datetime | None = None):
        self.t = now or datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.t


class World:
    """Key store, dashboard store, mailer and clock; SQLite unless DynamoDB stores are given."""

    def __init__(self, tmp: Path, clock: Clock | None = None, keys: Any = None, store: Any = None):
        self.tmp = tmp
        self.keys_path = tmp / "var" / "keys.sqlite"
        self.keys = keys if keys is not None else SQLiteKeyStore(self.keys_path)
        self.counters_path = tmp / "var" / "keys.counters.sqlite"
        self.counter = SQLiteCounter(self.counters_path)
        self.store = store if store is not None else SQLiteDashboardStore(tmp / "var" / "dashboard.sqlite")
        self.mail = FileMailer(tmp / "mail.jsonl")
        self.clock = clock or Clock()
        self.service = Dashboard(self.keys, self.store, self.mail, "http://dashboard.test", clock=self.clock,
                                 usage=CounterUsage(self.counter))

    def code_for(self, email: str) -> str:
        """The code in the newest mail to `email`."""
        for m in reversed(self.mail.messages()):
            if m["to"] == email:
                found = re.search(r"is ([A-Z0-9]{4}-[A-Z0-9]{4})", m["text"])
                assert found, m
                return found.group(1)
        raise AssertionError(f"no mail to {email}")

    def link_for(self, email: str, what: str) -> str:
        for m in reversed(self.mail.messages()):
            if m["to"] == email:
                found = re.search(r"(http\S*" + re.escape(what) + r"\S*)", m["text"])
                if found:
                    return found.group(1)
        raise AssertionError(f"no {what} link to {email}")


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


class DashServer:
    def __init__(self, app: Any):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> DashServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("dashboard did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def settings(world: World) -> DashboardSettings:
    return DashboardSettings(store=f"sqlite:{world.keys_path}", api_url="http://api.test")


@pytest.fixture
def dash(world: World, settings: DashboardSettings) -> Iterator[DashServer]:
    with DashServer(create_app(world.service, settings)) as server:
        yield server


class Browser:
    """An HTTP client that behaves like a same-origin browser: it keeps its cookies (Secure or
    not: the session and the signed browser id), sends Sec-Fetch-Site: same-origin with its forms,
    and reads CSRF tokens."""

    def __init__(self, base: str, cookie_name: str = "__Host-session"):
        self.base = base
        self.cookie_name = cookie_name
        self.cookies: dict[str, str] = {}
        self.headers: dict[str, str] = {}  # sent with every request (e.g. the address CloudFront reports)
        self.client = httpx.Client(base_url=base, timeout=10, follow_redirects=False)
        self.last: httpx.Response | None = None

    @property
    def sid(self) -> str | None:
        return self.cookies.get(self.cookie_name)

    @sid.setter
    def sid(self, value: str | None) -> None:
        if value is None:
            self.cookies.pop(self.cookie_name, None)
        else:
            self.cookies[self.cookie_name] = value

    def _remember(self, r: httpx.Response) -> httpx.Response:
        for header in r.headers.get_list("set-cookie"):
            c = SimpleCookie()
            c.load(header)
            for name, morsel in c.items():
                if morsel.value and morsel["max-age"] != "0":
                    self.cookies[name] = morsel.value
                else:
                    self.cookies.pop(name, None)
        self.last = r
        return r

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        h = {"cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}
        return {**h, **self.headers, **(extra or {})}

    def get(self, path: str, follow: bool = True) -> httpx.Response:
        r = self._remember(self.client.get(path, headers=self._headers()))
        while follow and r.status_code in (302, 303):
            r = self._remember(self.client.get(r.headers["location"], headers=self._headers()))
        return r

    def csrf(self, html: str | None = None) -> str:
        html = html if html is not None else (self.last.text if self.last is not None else "")
        found = re.search(r'name="csrf" value="([^"]+)"', html)
        assert found, "no csrf token on the page"
        return found.group(1)

    def post(self, path: str, data: dict[str, Any] | list[tuple[str, str]], follow: bool = True,
             csrf: str | None = "auto", headers: dict[str, str] | None = None) -> httpx.Response:
        pairs = list(data.items()) if isinstance(data, dict) else list(data)
        if csrf == "auto":
            csrf = self.csrf()
        if csrf is not None:
            pairs.append(("csrf", csrf))
        hdrs = self._headers({"sec-fetch-site": "same-origin",
                              "content-type": "application/x-www-form-urlencoded", **(headers or {})})
        r = self._remember(self.client.post(path, content=urlencode(pairs), headers=hdrs))
        while follow and r.status_code in (302, 303):
            r = self._remember(self.client.get(r.headers["location"], headers=self._headers()))
        return r

    def sign_in(self, world: World, email: str) -> httpx.Response:
        self.get("/sign-in")
        self.post("/sign-in", {"email": email})
        return self.post("/sign-in/code", {"email": email, "code": world.code_for(email)})

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def browser_for(dash: DashServer) -> Iterator[Any]:
    made: list[Browser] = []

    def make() -> Browser:
        b = Browser(dash.url)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()
