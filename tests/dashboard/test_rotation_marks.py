"""A member's "signed in here before" mark outlives rotations of the cookie-signing secret, and the
429 text says only what is true (real HTTP on loopback, real SQLite, the real rotate command).

Reported: after two rotations every member lost the mark, while the 429 answer still told them
their own browser would work."""

from __future__ import annotations

import html

import httpx
from click.testing import CliRunner

from dashboard.app import create_app
from dashboard.service import CODES_PER_ADDRESS, CODES_PER_KNOWN_ADDRESS
from dashboard.settings import DashboardSettings
from pipeline.cli import main

from .conftest import Browser, DashServer, World

ANN = "ann@ngo.example"


def rotate(world: World) -> None:
    r = CliRunner().invoke(main, ["dashboard", "rotate-secret", "--keys", str(world.keys_path)])
    assert r.exit_code == 0, r.output


def started(world: World) -> DashServer:
    """A dashboard process started now (it reads the signing secrets at start)."""
    return DashServer(create_app(world.service, DashboardSettings(store=f"sqlite:{world.keys_path}",
                                                                  api_url="http://api.test")))


def ask(b: Browser, email: str) -> httpx.Response:
    b.get("/sign-in")
    return b.post("/sign-in", {"email": email})


def test_a_browser_used_between_rotations_keeps_its_mark_and_the_429_text_is_true(world: World):
    world.service.create_org("staff:test", "ngo", "Health NGO", ANN)
    with started(world) as dash:
        ann = Browser(dash.url)
        ann.sign_in(world, ANN)  # her browser now carries the mark for her address
    rotate(world)
    with started(world) as dash:
        ann.base, ann.client = dash.url, httpx.Client(base_url=dash.url, timeout=10, follow_redirects=False)
        ann.get("/sign-in")  # she uses the dashboard once between the rotations
    rotate(world)
    with started(world) as dash:
        ann.base, ann.client = dash.url, httpx.Client(base_url=dash.url, timeout=10, follow_redirects=False)
        for _ in range(CODES_PER_KNOWN_ADDRESS + CODES_PER_ADDRESS):  # a stranger uses up her address's hour
            ask(Browser(dash.url), ANN)
        stranger = ask(Browser(dash.url), ANN)
        assert stranger.status_code == 429
        before = sum(m["to"] == ANN for m in world.mail.messages())
        r = ask(ann, ANN)  # her own browser, two rotations later: still recognised, still mailed
        assert r.status_code == 200 and sum(m["to"] == ANN for m in world.mail.messages()) == before + 1
        text = " ".join(html.unescape(stranger.text).split())  # what the 429 promised, and no more
        assert "unless the dashboard's signing secret was replaced twice since that browser last opened it" in text
        ann.close()
