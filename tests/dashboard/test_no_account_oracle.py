"""Asking for sign-in codes does not tell whether an address has an account: the same requests for
a member's address and for an address nobody has get the same statuses and texts, over real HTTP
(the app as behind CloudFront, each request from the network it names), and the same store work.

Reported: known and unknown addresses had different budgets (20 and 5 an hour), so mailing an
address six times from two networks told which it was (200 against 429)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from dashboard.app import create_app
from dashboard.service import Dashboard
from dashboard.settings import DashboardSettings

from .conftest import Browser, DashServer, World
from .test_abuse import Recorder, supported

SECRET = "origin-secret-for-tests"
MEMBER, NOBODY = "ann@ngo.example", "zed@ngo.example"


@pytest.fixture
def cdn(world: World) -> Iterator[DashServer]:
    world.service.create_org("staff:test", "ngo", "Health NGO", MEMBER)
    settings = DashboardSettings(store=f"sqlite:{world.keys_path}", api_url="http://api.test", origin_secret=SECRET)
    with DashServer(create_app(world.service, settings)) as server:
        yield server


def probe(url: str, email: str, networks: list[str]) -> list[tuple[int, str]]:
    """One new browser per request, from each network in turn: (status, the page's main text)."""
    out = []
    for net in networks:
        b = Browser(url)
        b.headers = {"x-origin-verify": SECRET, "cloudfront-viewer-address": f"{net}:443"}
        b.get("/sign-in")
        r = b.post("/sign-in", {"email": email})
        main = re.search(r"<main.*?</main>", r.text, re.S)
        text = re.sub(r"\s+", " ", main.group(0) if main else r.text).replace(email, "ADDRESS")
        text = re.sub(r'value="[^"]{20,}"', 'value="TOKEN"', text)
        out.append((r.status_code, text))
        b.close()
    return out


def test_the_reported_probe_answers_a_member_and_nobody_alike(world: World, cdn: DashServer):
    networks = ["198.51.100.1"] * 6 + [f"198.51.100.{i}" for i in range(2, 10)]  # six from one, then others
    member = probe(cdn.url, MEMBER, networks)
    nobody = probe(cdn.url, NOBODY, [n.replace("198.51.100.", "203.0.113.") for n in networks])
    assert [s for s, _ in member] == [s for s, _ in nobody]
    assert [t for _, t in member] == [t for _, t in nobody]
    # what differs is only what reaches the inbox, which the asker does not see
    assert sum(m["to"] == NOBODY for m in world.mail.messages()) < sum(m["to"] == MEMBER for m in world.mail.messages())


def test_a_held_code_does_the_same_store_work_as_a_sent_one(world: World):
    s = world.service
    s.create_org("staff:test", "ngo", "Health NGO", MEMBER)
    for i in range(5):  # nobody's address has had its hour from five networks; the member's has room
        for email in (NOBODY, MEMBER):
            s.request_code(email, browser=f"pre-{email}-{i}", client=f"198.51.100.{i}")
    work: dict[str, list[str]] = {}
    for email in (NOBODY, MEMBER):
        log: list[str] = []
        traced = Dashboard(s.keys, Recorder(s.store, log, "store"), Recorder(s.mailer, log, "mail"), clock=world.clock)
        try:
            traced.request_code(email, **supported(traced.request_code, browser=f"b-{email}", client="203.0.113.9"))
        except Exception as e:  # the held code (older code: a refusal, which the other test sees)
            log.append(type(e).__name__)
        work[email] = [op for op in log if op.startswith("store.")]
    assert work[NOBODY] == work[MEMBER]
    assert "store.add_code" in work[NOBODY]
