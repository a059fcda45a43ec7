"""The whole key flow in a real browser (Debian Chromium under Playwright): sign in with the
code the mailer captured, create a key, see it once, use it, revoke it, and the very next
API request answers 401 — on the local server with two workers and on the CloudFront adapter
against moto's DynamoDB. Both servers run as the real commands (`malaria-risk serve`,
`malaria-risk dashboard`) on ports the test chooses.

The dashboard is plain http://127.0.0.1 here, and its session cookie is the `__Host-` one
with Secure: Chromium treats loopback as a secure context, which the flow proves (it could
not stay signed in otherwise, and the cookie is checked).
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard.dynamodb import DynamoDBDashboardStore
from dashboard.mailer import FileMailer
from dashboard.service import Dashboard
from dashboard.store import SQLiteDashboardStore
from edge.stores.sqlite import SQLiteKeyStore
from tests.conftest import free_port, wait_until_up
from tests.edge.conftest import CREDS, endpoint  # noqa: F401  (the moto server fixture)
from tests.paths import REPO_ROOT
from tests.pipeline.site.screenshots import browser, chromium_path

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)")

ANN = "ann@ngo.example"
AXE = REPO_ROOT / "pipeline" / "site" / "node_modules" / "axe-core" / "axe.min.js"

ApiCheck = Callable[[str, str], tuple[int, str | None]]  # (key, path) -> (status, problem code)


def start(args: list[str], env: dict[str, str], url: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", *args], env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO_ROOT)
    wait_until_up(url, proc, args[0])
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Setup:
    def __init__(self, dash_url: str, mail: FileMailer, api: ApiCheck, cookies_secure: bool = True):
        self.dash_url = dash_url
        self.mail = mail
        self.api = api

    def code(self) -> str:
        for m in reversed(self.mail.messages()):
            if m["to"] == ANN:
                found = re.search(r"is ([A-Z0-9]{4}-[A-Z0-9]{4})", m["text"])
                if found:
                    return found.group(1)
        raise AssertionError("no code mailed")


def make_org(keys: Any, state: Any, mail: FileMailer) -> None:
    Dashboard(keys, state, mail).create_org("staff:test", "ngo", "Health NGO", ANN)


def dashboard_args(tmp: Path, port: int, store: str, api_url: str) -> list[str]:
    return ["dashboard", "--port", str(port), "--store", store, "--mailer", f"file:{tmp / 'mail.jsonl'}",
            "--api-url", api_url]


@pytest.fixture
def local(tmp_path: Path, release_root: Path) -> Iterator[Setup]:
    keys = tmp_path / "var" / "keys.sqlite"
    mail = FileMailer(tmp_path / "mail.jsonl")
    make_org(SQLiteKeyStore(keys), SQLiteDashboardStore(keys.with_name("dashboard.sqlite")), mail)
    api_port, dash_port = free_port(), free_port()
    api_url, dash_url = f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{dash_port}"
    api = start(["serve", "--root", str(release_root), "--port", str(api_port), "--workers", "2", "--keys", str(keys)],
                {}, api_url + "/v1/periods")
    dash = start(dashboard_args(tmp_path, dash_port, f"sqlite:{keys}", api_url), {}, dash_url + "/sign-in")
    client = httpx.Client(base_url=api_url, timeout=10)

    def check(key: str, path: str) -> tuple[int, str | None]:
        r = client.get(path, headers={"Authorization": f"Bearer {key}"})
        return r.status_code, (r.json().get("code") if r.status_code != 200 else None)

    try:
        yield Setup(dash_url, mail, check)
    finally:
        client.close()
        stop(dash)
        stop(api)


@pytest.fixture
def cloudfront(tmp_path: Path, release_root: Path, endpoint: str) -> Iterator[Setup]:  # noqa: F811
    from tests.edge.test_cloudfront import event_for, make_edge

    edges = make_edge(endpoint, release_root)
    edge = next(edges)
    edge.gate.clock = lambda: datetime.now(UTC)
    mail = FileMailer(tmp_path / "mail.jsonl")
    state = DynamoDBDashboardStore(edge.store.client, edge.store.prefix)  # production's pair of stores
    state.create_tables()
    make_org(edge.store, state, mail)
    dash_port = free_port()
    dash_url = f"http://127.0.0.1:{dash_port}"
    env = {**CREDS, "AWS_ENDPOINT_URL_DYNAMODB": endpoint, "MALARIA_RISK_REGION": "us-east-1"}
    dash = start(dashboard_args(tmp_path, dash_port, f"dynamodb:{edge.store.prefix}", "https://api.example.org"),
                 env, dash_url + "/sign-in")

    def check(key: str, path: str) -> tuple[int, str | None]:
        route, _, query = path.partition("?")
        out = edge.gate(copy.deepcopy(event_for(route, query, authorization=f"Bearer {key}")))
        if "status" not in out:  # the request went on to the origin: authorised
            return 200, None
        return int(out["status"]), json.loads(out["body"]).get("code")

    try:
        yield Setup(dash_url, mail, check)
    finally:
        stop(dash)
        next(edges, None)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


def axe_serious(page: Any) -> list[str]:
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [f"{v['id']}: {v['help']}" for v in result["violations"] if v["impact"] in ("serious", "critical")]


def flow(chromium: Any, setup: Setup, js: bool, width: int) -> None:
    context = chromium.new_context(java_script_enabled=js, viewport={"width": width, "height": 800}, bypass_csp=js)
    page = context.new_page()
    posted: list[dict[str, str]] = []
    page.on("response", lambda r: posted.append(r.headers) if r.request.method == "POST" and r.url.endswith("/keys/new") else None)
    checks: list[str] = []

    def inspect(what: str) -> None:
        if js:
            checks.extend(f"{what}: {v}" for v in axe_serious(page))
            overflow = page.evaluate("document.documentElement.scrollWidth")
            if width <= 400 and overflow > width:
                checks.append(f"{what}: {overflow}px wide at {width}px")

    page.goto(setup.dash_url + "/")
    assert page.url.endswith("/sign-in")
    inspect("sign-in")
    page.fill("#email", ANN)
    page.click("text=Email me a code")
    page.fill("#code", setup.code())
    page.click("button:has-text('Sign in')")
    assert page.url.endswith("/o/ngo/keys"), page.url
    cookies = {c["name"]: c for c in context.cookies()}
    assert cookies["__Host-session"]["secure"] and cookies["__Host-session"]["httpOnly"]
    inspect("keys")

    page.click("text=Create a key")
    inspect("new key")
    page.fill("#name", "reporting <b>dashboard</b>")
    page.check("input[name=scope][value=risk_scores]")
    page.check("input[name=kind][value=test]")
    page.click("button:has-text('Create the key')")
    key = page.input_value("#secret")
    assert re.fullmatch(r"svc_test_[A-Za-z0-9_-]{32}", key)
    assert posted and posted[-1]["cache-control"] == "no-store"
    inspect("created")

    assert setup.api(key, "/v1/risk/states") == (200, None)
    assert setup.api(key, "/v1/forecasts/states") == (403, "SCOPE_REQUIRED")

    page.reload()  # the browser sends the form again: the same form token makes no second key
    assert key not in page.content() and key[-12:] not in page.content()
    page.go_back()
    assert key not in page.content()

    page.goto(setup.dash_url + "/o/ngo/keys")
    assert page.locator(".card").count() == 1  # one key, however often the form was sent
    assert "reporting <b>dashboard</b>" in page.inner_text(".card h2")
    page.click(".card h2 a")
    inspect("key")
    assert page.inner_text(".last-used") == "today"
    page.click("text=Revoke…")
    page.click("button:has-text('Revoke the key')")
    assert page.inner_text("#status") == "revoked"
    assert setup.api(key, "/v1/risk/states")[0] == 401  # the very next request, no sleep
    assert checks == []
    context.close()


@pytest.mark.parametrize(("js", "width"), [(True, 1280), (False, 360)], ids=["js-1280", "no-js-360"])
def test_key_flow_on_the_local_server(chromium: Any, local: Setup, js: bool, width: int):
    flow(chromium, local, js, width)


def test_key_flow_on_the_cloudfront_adapter(chromium: Any, cloudfront: Setup):
    flow(chromium, cloudfront, True, 360)
