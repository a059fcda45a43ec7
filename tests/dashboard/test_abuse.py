"""Abuse over real HTTP on loopback: nobody can jam someone else's sign-in, use the dashboard
to mail strangers, or make it keep state for visitors who asked for nothing.

Client addresses are varied the way production sees them: the app runs as behind CloudFront
(the secret origin header set), and each test browser says its address in
`CloudFront-Viewer-Address`, so many networks can be played from one machine.
"""

from __future__ import annotations

import inspect
import json
import re
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from dashboard.app import create_app
from dashboard.service import CODES_PER_KNOWN_ADDRESS, MAIL_PER_CLIENT, Dashboard, Space
from dashboard.settings import DashboardSettings

from .conftest import Browser, DashServer, World

ANN, BOB = "ann@ngo.example", "bob@ngo.example"
SECRET = "origin-secret-for-tests"


@pytest.fixture
def orgs(world: World) -> World:
    s = world.service
    s.create_org("staff:test", "ngo", "Health NGO", ANN)
    now = world.clock().isoformat()
    s.store.ensure_account(BOB, now)
    s.store.set_role("ngo", BOB, "member", now)
    return world


@pytest.fixture
def cdn(orgs: World) -> Iterator[DashServer]:
    """The dashboard as production runs it: only requests with CloudFront's secret header get in."""
    settings = DashboardSettings(store=f"sqlite:{orgs.keys_path}", api_url="http://api.test", origin_secret=SECRET)
    with DashServer(create_app(orgs.service, settings)) as server:
        yield server


@pytest.fixture
def visitor(cdn: DashServer) -> Iterator[Any]:
    made: list[Browser] = []

    def make(address: str = "198.51.100.7") -> Browser:
        b = Browser(cdn.url)
        b.headers = {"x-origin-verify": SECRET, "cloudfront-viewer-address": f"{address}:50123"}
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def mails_to(world: World, email: str) -> int:
    return sum(m["to"] == email for m in world.mail.messages())


def ask_code(b: Browser, email: str) -> httpx.Response:
    b.get("/sign-in")
    return b.post("/sign-in", {"email": email})


def enter_code(b: Browser, email: str, code: str) -> httpx.Response:
    return b.post("/sign-in/code", {"email": email, "code": code}, follow=False)


def signed_in_to_keys(r: httpx.Response) -> bool:
    return r.status_code == 303 and r.headers["location"] == "/"


# -- 1. sign-in a stranger cannot jam --------------------------------------------------------------------
def test_wrong_guesses_in_another_browser_do_not_burn_your_code(orgs: World, visitor):
    ann = visitor("203.0.113.10")
    ask_code(ann, ANN)
    code = orgs.code_for(ANN)
    attacker = visitor("198.51.100.66")
    attacker.get("/sign-in")
    for _ in range(10):
        assert enter_code(attacker, ANN, "2222-2222").status_code == 400
    assert signed_in_to_keys(enter_code(ann, ANN, code))


def test_three_codes_and_five_wrong_guesses_no_longer_lock_anyone_out(orgs: World, visitor):
    """The reported attack: three codes asked for someone's address, five wrong ones sent."""
    attacker = visitor("198.51.100.66")
    for _ in range(3):
        ask_code(attacker, ANN)
    for _ in range(5):
        enter_code(attacker, ANN, "2222-2222")
    before = mails_to(orgs, ANN)
    ann = visitor("203.0.113.10")
    r = ask_code(ann, ANN)
    assert r.status_code == 200 and mails_to(orgs, ANN) == before + 1  # a code really went out
    assert signed_in_to_keys(enter_code(ann, ANN, orgs.code_for(ANN)))


def test_an_attacker_on_many_networks_cannot_stop_a_browser_that_signed_in_before(orgs: World, visitor):
    ann = visitor("203.0.113.10")
    ask_code(ann, ANN)
    assert signed_in_to_keys(enter_code(ann, ANN, orgs.code_for(ANN)))
    ann.get("/o/ngo/keys")
    ann.post("/sign-out", {})
    for i in range(2 * CODES_PER_KNOWN_ADDRESS):  # a new network and a new browser for every request
        ask_code(visitor(f"198.51.100.{i + 1}"), ANN)
    assert mails_to(orgs, ANN) == CODES_PER_KNOWN_ADDRESS  # Ann's first code and the attacker's: the address's ceiling
    newcomer = visitor("203.0.113.11")  # a browser Ann never signed in from meets the limit, stated plainly
    r = ask_code(newcomer, ANN)
    assert r.status_code == 429 and "You can ask again after" in r.text and "WAT" in r.text
    assert "a code is on its way" not in r.text.lower()
    before = mails_to(orgs, ANN)
    r = ask_code(ann, ANN)  # her own browser still gets its code
    assert r.status_code == 200 and mails_to(orgs, ANN) == before + 1
    assert signed_in_to_keys(enter_code(ann, ANN, orgs.code_for(ANN)))


def test_failed_sign_ins_are_logged_and_shown_to_the_owner(orgs: World, visitor, capfd):
    attacker = visitor("198.51.100.66")
    ask_code(attacker, ANN)
    enter_code(attacker, ANN, "2222-2222")
    events = [json.loads(line) for line in capfd.readouterr().err.splitlines() if line.startswith("{")]
    assert any(e["event"] == "dashboard.sign_in_failed" and e["reason"] == "wrong_code" for e in events)
    ann = visitor("203.0.113.10")
    ask_code(ann, ANN)
    enter_code(ann, ANN, orgs.code_for(ANN))
    own = ann.get("/me/audit").text
    assert "sign in failed" in own and "reason=wrong_code" in own
    org_log = ann.get("/o/ngo/audit").text  # the organisation's log shows sign-ins, as it says
    assert "Every change and sign-in" in org_log and re.search(r"<strong>sign in</strong> " + re.escape(ANN), org_log)


# -- 2. no mail cannon ---------------------------------------------------------------------------------------
def test_one_client_cannot_mail_two_hundred_addresses(orgs: World, visitor):
    answers = [ask_code(visitor("198.51.100.66"), f"person{i}@example.org").status_code for i in range(200)]
    assert len(orgs.mail.messages()) == MAIL_PER_CLIENT
    assert answers.count(200) == MAIL_PER_CLIENT and answers.count(429) == 200 - MAIL_PER_CLIENT


def test_the_service_budget_caps_every_client_and_tells_the_operator(world: World, tmp_path, capfd):
    service = Dashboard(world.keys, world.store, world.mail, "http://dashboard.test", clock=world.clock,
                        **supported(Dashboard, mail_per_hour=25))
    service.create_org("staff:test", "ngo", "Health NGO", ANN)
    settings = DashboardSettings(store=f"sqlite:{world.keys_path}", origin_secret=SECRET)
    with DashServer(create_app(service, settings)) as server:
        for i in range(40):  # forty networks, one address each
            b = Browser(server.url)
            b.headers = {"x-origin-verify": SECRET, "cloudfront-viewer-address": f"198.51.{i}.9:443"}
            ask_code(b, f"person{i}@example.org")
        assert len(world.mail.messages()) == 25
        events = [json.loads(line) for line in capfd.readouterr().err.splitlines() if line.startswith("{")]
        assert sum(e["event"] == "dashboard.mail_budget_exhausted" for e in events) == 15
        assert {e.get("budget") for e in events if e["event"] == "dashboard.mail_budget_exhausted"} == {"unknown"}
    sent = len(world.mail.messages())  # an invitation draws on the known addresses' pool, which the flood left whole
    service.invite(ANN, Space("org", "ngo"), "new@example.org", "member", world.clock().isoformat())
    assert len(world.mail.messages()) == sent + 1 and len(service.store.pending_invitations("ngo", "")) == 1


# -- 3. bounded anonymous state ------------------------------------------------------------------------------------
def test_cookieless_visits_leave_no_rows(orgs: World, dash: DashServer):
    db = sqlite3.connect(orgs.store.path)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]

    def rows() -> int:
        return sum(db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables)

    before = rows()
    with httpx.Client(base_url=dash.url) as client:  # keeps no cookies between requests
        for _ in range(2000):
            assert client.get("/sign-in", headers={"cookie": ""}).status_code == 200
            client.cookies.clear()
    assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0
    assert rows() == before


# -- 4. invitations, messages, roll, HSTS, equal work ---------------------------------------------------------------
@pytest.mark.parametrize("how", ["removed", "demoted"])
def test_an_invitation_dies_with_its_inviters_rights(orgs: World, how: str):
    s = orgs.service
    now = orgs.clock().isoformat()
    s.store.set_role("ngo", BOB, "admin", now)
    s.invite(ANN, Space("org", "ngo"), "ann.private@example.org", "admin", now)
    token = orgs.link_for("ann.private@example.org", "/invitations/").rsplit("/", 1)[1]
    if how == "removed":
        s.remove_account("staff:test", ANN)
    else:
        s.set_role(BOB, Space("org", "ngo"), ANN, "member", now)
    assert s.members(BOB, Space("org", "ngo"))["invitations"] == []
    with pytest.raises(Exception, match="no longer valid"):
        s.accept_invitation("ann.private@example.org", token)
    assert s.store.role("ngo", "ann.private@example.org") is None


def test_no_page_prints_text_taken_from_its_address(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    planted = "Your account is compromised call 555 0100"
    kid, _ = orgs.service.create_key(ANN, Space("org", "ngo"), "k", ["risk_scores"], "test", None, "t1")
    for path in ("/o/ngo/members?error=", "/o/ngo/members?done=", f"/o/ngo/keys/{kid}?done=", "/sign-in?next=",
                 "/sign-in/confirm?code=ABCD&email="):
        page = b.get(path + planted.replace(" ", "+"))
        assert "compromised" not in page.text, path


def test_a_roll_keeps_the_old_key_for_thirty_days_at_most(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    kid, _ = orgs.service.create_key(ANN, Space("org", "ngo"), "k", ["risk_scores"], "test", None, "t1")
    page = b.get(f"/o/ngo/keys/{kid}/roll").text
    token = re.search(r'name="form_token" value="([^"]+)"', page)
    assert token
    r = b.post(f"/o/ngo/keys/{kid}/roll", {"until": "2099-12-31", "form_token": token.group(1)})
    assert r.status_code == 400 and "30 days at most" in r.text
    assert orgs.keys.get(kid, org="ngo", now=orgs.clock())["expires_on"] is None
    assert len(orgs.keys.list_for(org="ngo")) == 1


def test_every_answer_has_hsts(dash: DashServer):
    with httpx.Client(base_url=dash.url) as client:
        for path in ("/sign-in", "/static/dashboard.css", "/nowhere"):
            assert client.get(path).headers["strict-transport-security"].startswith("max-age=")


def supported(fn: Any, **kwargs: Any) -> dict[str, Any]:
    """The keyword arguments `fn` takes (so this file also runs against the dashboard before these
    rules, where each test fails on what it checks, not on a signature)."""
    return {k: v for k, v in kwargs.items() if k in inspect.signature(fn).parameters}


class Recorder:
    """Wraps a store or mailer and notes which of its methods are called, in order."""

    def __init__(self, inner: Any, log: list[str], name: str):
        self._inner, self._log, self._name = inner, log, name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        if not callable(value):
            return Recorder(value, self._log, f"{self._name}.{attr}") if attr == "counter" else value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._log.append(f"{self._name}.{attr}")
            return value(*args, **kwargs)
        return call


def test_every_address_state_does_the_same_work(orgs: World):
    """Unknown, removed and active addresses: the same store operations and one mail each, so the
    answer's timing cannot tell them apart (checked by what is done, not by a clock)."""
    s = orgs.service
    s.store.ensure_account("gone@ngo.example", orgs.clock().isoformat())
    s.remove_account("staff:test", "gone@ngo.example")
    work = {}
    for email in ("nobody@nowhere.example", "gone@ngo.example", ANN):
        log: list[str] = []
        traced = Dashboard(s.keys, Recorder(s.store, log, "store"), Recorder(s.mailer, log, "mail"), clock=orgs.clock)
        traced.request_code(email, **supported(traced.request_code, browser=f"b-{email}", client="198.51.100.1"))
        work[email] = log
    assert work["nobody@nowhere.example"] == work["gone@ngo.example"] == work[ANN]
    assert work[ANN].count("mail.send") == 1 and "store.add_code" in work[ANN]


# -- 8. small things a newcomer met ----------------------------------------------------------------------------------
def test_a_member_opening_a_revoke_address_gets_the_reason_not_a_button(orgs: World, browser_for):
    kid, _ = orgs.service.create_key(ANN, Space("org", "ngo"), "k", ["risk_scores"], "test", None, "t1")
    b = browser_for()
    b.sign_in(orgs, BOB)
    for action in ("revoke", "roll"):
        r = b.get(f"/o/ngo/keys/{kid}/{action}")
        assert r.status_code == 403 and "administrators" in r.text and "<button" not in r.text.split("</header>")[1]


def test_role_changes_are_confirmed_on_the_page(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    b.get("/o/ngo/members")
    r = b.post("/o/ngo/members/role", {"email": BOB, "role": "admin"})
    assert r.status_code == 200 and "The role is changed." in r.text
    assert orgs.service.store.role("ngo", BOB) == "admin"


def test_the_date_fields_make_no_format_claim_and_settings_are_named(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    page = b.get("/o/ngo/keys/new").text
    assert 'type="date"' in page and "YYYY" not in page
    keys = b.get("/o/ngo/settings")
    assert keys.url.path == "/o/ngo/keys" and "Settings → API access" in keys.text
    assert re.search(r'aria-label="Settings".*API access.*Members.*Audit log', keys.text, re.S)


def test_codes_running_out_are_stated(orgs: World, visitor):
    b = visitor("203.0.113.10")
    orgs.clock.t += timedelta(seconds=1)
    answers = [ask_code(b, ANN) for _ in range(6)]
    assert [r.status_code for r in answers] == [200] * 5 + [429]
    assert "This browser has asked for as many codes as it may this hour" in answers[-1].text
