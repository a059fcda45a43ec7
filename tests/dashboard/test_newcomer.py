"""A newcomer's minute in a real browser (Debian Chromium under Playwright), from a fresh
`make run`-style start: the API and the dashboard run as the commands `make run` runs (the
dashboard with `--local-admin` and the console mailer), the code is read from the dashboard's
console, a key is made under Settings → API access, and the page's own Python snippet uses it
against the API over loopback, with Python's standard library only. At 360 px and 1280 px,
no page is wider than the screen.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import free_port, wait_until_up
from tests.paths import REPO_ROOT
from tests.pipeline.site.screenshots import browser, chromium_path

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)")


def make_var(name: str) -> str:
    """A default of the Makefile (`NAME ?= value`): the test signs in as `make run` says to."""
    found = re.search(rf"^{name} \?= (\S+)$", (REPO_ROOT / "Makefile").read_text(), re.M)
    assert found, name
    return found.group(1)


class Console:
    """A server started as `make run` starts it, with its stderr (the console mailer) kept."""

    def __init__(self, args: list[str], url: str):
        self.lines: list[str] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", *args], cwd=REPO_ROOT, env=dict(os.environ),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until_up(url, self.proc, args[0])
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.decode())

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + 10
        while not any(text in line for line in self.lines):
            assert time.monotonic() < deadline, "".join(self.lines)
            time.sleep(0.05)

    def code(self, after: int) -> str:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for line in self.lines[after:]:
                found = re.search(r"Your sign-in code: ([A-Z0-9]{4}-[A-Z0-9]{4})", line)
                if found:
                    return found.group(1)
            time.sleep(0.05)
        raise AssertionError("no code on the console:\n" + "".join(self.lines))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Started:
    def __init__(self, api_url: str, dash_url: str, dash: Console, admin: str):
        self.api_url, self.dash_url, self.dash, self.admin = api_url, dash_url, dash, admin


@pytest.fixture
def fresh_start(tmp_path: Path, release_root: Path) -> Iterator[Started]:
    keys = tmp_path / "var" / "keys.sqlite"  # nothing exists yet: no organisation, no account
    admin = make_var("DASH_ADMIN")
    api_port, dash_port = free_port(), free_port()
    api_url, dash_url = f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{dash_port}"
    api = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "serve", "--root", str(release_root), "--port",
                            str(api_port), "--keys", str(keys)], cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    wait_until_up(api_url + "/v1/periods", api, "serve")
    dash = Console(["dashboard", "--host", "127.0.0.1", "--port", str(dash_port), "--keys", str(keys), "--api-url",
                    api_url, "--local-admin", admin], dash_url + "/sign-in")
    try:
        dash.wait_for(f"as {admin}, administrator of the local organisation")
        yield Started(api_url, dash_url, dash, admin)
    finally:
        dash.stop()
        api.terminate()
        api.wait(timeout=10)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


@pytest.mark.parametrize("width", [360, 1280])
def test_from_make_run_to_a_key_used_against_the_api(chromium: Any, fresh_start: Started, width: int):
    context = chromium.new_context(viewport={"width": width, "height": 800})
    page = context.new_page()
    too_wide: list[str] = []

    def go(selector: str) -> None:
        # Each of these clicks loads a page; measuring before it has loaded reads no document.
        with page.expect_navigation():
            page.click(selector)

    def fits(what: str) -> None:
        page.wait_for_load_state("load")
        wide = page.evaluate("document.documentElement.scrollWidth")
        if wide > width:
            too_wide.append(f"{what}: {wide}px wide at {width}px")

    page.goto(fresh_start.dash_url + "/")
    fits("sign-in")
    page.fill("#email", fresh_start.admin)
    seen = len(fresh_start.dash.lines)
    go("text=Email me a code")
    fits("enter your code")
    page.fill("#code", fresh_start.dash.code(seen))
    go("button:has-text('Sign in')")
    assert page.url.endswith("/o/local/keys"), page.url
    assert "Settings → API access" in page.inner_text("h1")
    fits("API access")

    go("text=Create a key")
    fits("new key")
    page.fill("#name", "first try")
    page.check("input[name=scope][value=risk_scores]")
    go("button:has-text('Create the key')")
    key = page.input_value("#secret")
    assert re.fullmatch(r"svc_test_[A-Za-z0-9_-]{32}", key)
    fits("your new key")
    snippet = page.inner_text("pre:below(:text('Python'))")
    assert "svc_test_" in snippet and fresh_start.api_url in snippet
    ran = subprocess.run([sys.executable, "-S", "-c", snippet], capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr  # -S: no site-packages, the standard library alone
    assert ran.stdout.startswith("{")  # the API's JSON, printed
    assert httpx.get(fresh_start.api_url + "/v1/risk/states", headers={"Authorization": f"Bearer {key}"}).status_code == 200

    go("text=Done: see the key's page")
    fits("key")
    for path, what in (("/o/local/members", "members"), ("/o/local/audit", "audit log"),
                       (page.url.split("/o/local")[1] + "/roll", "roll"), (page.url.split("/o/local")[1] + "/revoke", "revoke")):
        page.goto(fresh_start.dash_url + ("/o/local" + path if not path.startswith("/o/") else path))
        assert page.locator("h1").count() == 1
        fits(what)
    page.goto(fresh_start.dash_url + "/o/local/members")
    page.fill("#invitee", "a.colleague.with.a.rather.long.address@ministry-of-health.example.org")
    go("button:has-text('Send the invitation')")
    assert "The invitation is sent." in page.inner_text("main")
    fits("members with an invitation")
    assert too_wide == []
    context.close()
