"""The dashboard over real HTTP on loopback: pages, and the attacks it must turn away.
Each attack test checks that nothing changed (no key made, revoked or shown, no member added)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from dashboard.app import create_app
from dashboard.service import Space
from edge.keys import hash_key

from .conftest import Browser, DashServer, World

ANN, BOB, CY = "ann@ngo.example", "bob@ngo.example", "cy@other.example"


@pytest.fixture
def orgs(world: World) -> World:
    s = world.service
    s.create_org("staff:test", "ngo", "Health <b>NGO</b>", ANN)
    s.create_org("staff:test", "other", "Other", CY)
    now = world.clock().isoformat()
    s.store.ensure_account(BOB, now)
    s.store.set_role("ngo", BOB, "member", now)
    return world


def form_token(html: str) -> str:
    found = re.search(r'name="form_token" value="([^"]+)"', html)
    assert found
    return found.group(1)


def create_via_page(b: Browser, base: str, name: str, scopes: list[str], kind: str = "test") -> httpx.Response:
    page = b.get(f"{base}/keys/new")
    assert page.status_code == 200, page.text
    return b.post(f"{base}/keys/new", [("name", name), *[("scope", s) for s in scopes], ("kind", kind),
                                       ("form_token", form_token(page.text))])


def shown_key(html: str) -> str:
    found = re.search(r"(svc_(?:live|test)_[A-Za-z0-9_-]{32})", html)
    assert found, "no key on the page"
    return found.group(1)


def keys_of(world: World, org: str) -> list[dict]:
    return world.keys.list_for(org=org)


def test_create_shows_the_key_once_with_ready_lines(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    r = create_via_page(b, "/o/ngo", "reporting", ["risk_scores", "forecasts"])
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    key = shown_key(r.text)
    assert f'curl -H "Authorization: Bearer {key}" "http://api.test/v1/risk/states"' in r.text
    assert "req_auth_bearer_token" in r.text and "urllib.request.urlopen" in r.text and "requests" not in r.text
    record = orgs.keys.lookup(hash_key(key))
    assert record is not None and record.org == "ngo" and record.owner is None
    # the list and the key's page show its hint, never the key
    listing = b.get("/o/ngo/keys")
    assert key not in listing.text and f"svc_test_…{key[-4:]}" in listing.text and "reporting" in listing.text
    detail = b.get(f"/o/ngo/keys/{record.id}")
    assert key not in detail.text and ANN in detail.text


def test_double_submit_makes_one_key_and_offers_roll(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    page = b.get("/o/ngo/keys/new")
    token, csrf = form_token(page.text), b.csrf(page.text)
    data = [("name", "twice"), ("scope", "risk_scores"), ("kind", "test"), ("form_token", token)]
    first = b.post("/o/ngo/keys/new", data, csrf=csrf)
    second = b.post("/o/ngo/keys/new", data, csrf=csrf)
    shown_key(first.text)
    assert "already sent" in second.text and "svc_test_" not in second.text and "/roll" in second.text
    assert len(keys_of(orgs, "ngo")) == 1


def test_revoke_behind_a_confirmation(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    key = shown_key(create_via_page(b, "/o/ngo", "k", ["risk_scores"]).text)
    kid = orgs.keys.lookup(hash_key(key)).id
    confirm = b.get(f"/o/ngo/keys/{kid}/revoke")
    assert "cannot be undone" in confirm.text and orgs.keys.lookup(hash_key(key)).revoked is False
    done = b.post(f"/o/ngo/keys/{kid}/revoke", {})
    assert done.status_code == 200 and "revoked" in done.text
    assert orgs.keys.lookup(hash_key(key)).revoked is True


@pytest.mark.parametrize("headers", [
    {"sec-fetch-site": "cross-site"},
    {"sec-fetch-site": "same-site"},
    {"sec-fetch-site": "", "origin": "http://evil.example"},
])
def test_cross_site_posts_are_refused(orgs: World, browser_for, headers: dict[str, str]):
    b = browser_for()
    b.sign_in(orgs, ANN)
    page = b.get("/o/ngo/keys/new")
    extra = {k: v for k, v in headers.items() if v}
    if "sec-fetch-site" not in extra:  # an older browser: no Sec-Fetch-Site, a foreign Origin
        b.client.headers.pop("sec-fetch-site", None)
    hdrs = b._headers({"content-type": "application/x-www-form-urlencoded", **extra})
    body = f"name=x&scope=risk_scores&kind=test&form_token={form_token(page.text)}&csrf={b.csrf(page.text)}"
    r = b.client.post("/o/ngo/keys/new", content=body, headers=hdrs)
    assert r.status_code == 403
    assert keys_of(orgs, "ngo") == []


def test_missing_or_wrong_token_is_refused(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    page = b.get("/o/ngo/keys/new")
    data = [("name", "x"), ("scope", "risk_scores"), ("kind", "test"), ("form_token", form_token(page.text))]
    assert b.post("/o/ngo/keys/new", data, csrf=None).status_code == 403
    assert b.post("/o/ngo/keys/new", data, csrf="forged").status_code == 403
    other = browser_for()  # a token from another session is no good either
    other.sign_in(orgs, CY)
    assert b.post("/o/ngo/keys/new", data, csrf=other.csrf()).status_code == 403
    assert keys_of(orgs, "ngo") == []


def test_other_organisations_keys_are_404(orgs: World, browser_for):
    kid, key = orgs.service.create_key(CY, Space("org", "other"), "theirs", ["risk_scores"], "test", None, "t")
    b = browser_for()
    b.sign_in(orgs, ANN)
    for path in (f"/o/ngo/keys/{kid}", f"/o/ngo/keys/{kid}/revoke", f"/o/other/keys/{kid}", "/o/other/keys",
                 f"/o/ngo/keys/{kid}/roll", "/o/other/audit", "/o/other/members"):
        assert b.get(path).status_code == 404, path
    b.get("/o/ngo/keys")
    for path in (f"/o/ngo/keys/{kid}/revoke", f"/o/other/keys/{kid}/revoke"):
        assert b.post(path, {}).status_code == 404, path
    assert orgs.keys.lookup(hash_key(key)).revoked is False


def test_a_member_cannot_create_revoke_or_invite(orgs: World, browser_for):
    kid, key = orgs.service.create_key(ANN, Space("org", "ngo"), "k", ["risk_scores"], "test", None, "t")
    b = browser_for()
    b.sign_in(orgs, BOB)
    assert "k" in b.get("/o/ngo/keys").text
    assert b.get("/o/ngo/keys/new").status_code == 403
    b.get("/o/ngo/keys")
    r = b.post("/o/ngo/keys/new", [("name", "mine"), ("scope", "risk_scores"), ("kind", "test"), ("form_token", "t2")])
    assert r.status_code == 403
    assert b.post(f"/o/ngo/keys/{kid}/revoke", {}).status_code == 403
    assert b.post("/o/ngo/members/invite", {"email": "eve@x.example", "role": "admin"}).status_code == 403
    assert b.post("/o/ngo/members/role", {"email": ANN, "role": "remove"}).status_code == 403
    assert [k["id"] for k in keys_of(orgs, "ngo")] == [kid] and orgs.keys.lookup(hash_key(key)).revoked is False
    assert orgs.store.pending_invitations("ngo", orgs.clock().isoformat()) == []
    assert orgs.store.role("ngo", ANN) == "admin"


def test_session_fixation_fails(orgs: World, dash: DashServer, browser_for):
    attacker = browser_for()
    attacker.get("/sign-in")  # an anonymous session the attacker knows
    planted = attacker.sid
    victim = browser_for()
    victim.sid = planted  # planted in the victim's browser
    victim.get("/sign-in")
    victim.sign_in(orgs, ANN)
    assert victim.sid != planted
    r = attacker.get("/o/ngo/keys", follow=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/sign-in")


def test_replay_after_sign_out_fails(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    old = b.sid
    b.get("/o/ngo/keys")
    out = b.post("/sign-out", {}, follow=False)
    assert out.status_code == 303 and "max-age=0" in out.headers["set-cookie"].lower()
    replay = browser_for()
    replay.sid = old
    r = replay.get("/o/ngo/keys", follow=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/sign-in")


def test_sessions_time_out(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    assert b.get("/o/ngo/keys", follow=False).status_code == 200
    orgs.clock.t += timedelta(minutes=31)
    assert b.get("/o/ngo/keys", follow=False).status_code == 303  # idle
    b.sign_in(orgs, ANN)
    for _ in range(25):  # active all along, but past the absolute limit
        orgs.clock.t += timedelta(minutes=29)
        r = b.get("/o/ngo/keys", follow=False)
    assert r.status_code == 303


def test_cookie_is_host_prefixed_secure_httponly_lax(orgs: World, browser_for):
    b = browser_for()
    first = b.get("/sign-in").headers.get_list("set-cookie")
    assert [c.split("=")[0] for c in first] == ["__Host-browser"]  # a signed id, no session yet
    b.post("/sign-in", {"email": ANN})
    r = b.post("/sign-in/code", {"email": ANN, "code": orgs.code_for(ANN)}, follow=False)
    session = [c for c in r.headers.get_list("set-cookie") if c.startswith("__Host-session=")]
    for cookie in (first[0], session[0]):
        low = cookie.lower()
        assert "secure" in low and "httponly" in low and "samesite=lax" in low and "path=/" in low
        assert "domain" not in low


def test_code_guessing_locks_out_over_http(orgs: World, browser_for):
    b = browser_for()
    b.get("/sign-in")
    b.post("/sign-in", {"email": ANN})
    right = orgs.code_for(ANN)
    for _ in range(5):
        assert b.post("/sign-in/code", {"email": ANN, "code": "2222-2222"}).status_code == 400
    r = b.post("/sign-in/code", {"email": ANN, "code": right}, follow=False)
    assert r.status_code == 400 and b.get("/o/ngo/keys", follow=False).status_code == 303


def test_known_and_unknown_addresses_get_identical_answers(orgs: World, browser_for):
    answers = []
    for email in (ANN, "nobody@nowhere.example"):
        b = browser_for()
        b.get("/sign-in")
        r = b.post("/sign-in", {"email": email})
        answers.append((r.status_code, r.text.replace(b.csrf(r.text), "TOKEN").replace(email, "EMAIL"),
                        sorted(k for k in r.headers if k != "date" and k != "content-length")))
    assert answers[0] == answers[1]


def test_names_with_script_stay_inert(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    evil = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
    create_via_page(b, "/o/ngo", evil, ["risk_scores"])
    page = b.get("/o/ngo/keys")
    assert "<script>alert(1)" not in page.text and "<img src=x" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text and "Health &lt;b&gt;NGO&lt;/b&gt;" in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    # one script, from this origin only (the new-key page's copy button): nothing inline, nothing elsewhere
    assert "script-src 'self';" in csp and "unsafe" not in csp
    assert page.headers["x-content-type-options"] == "nosniff" and page.headers["referrer-policy"] == "no-referrer"
    csv_text = b.get("/o/ngo/audit.csv").text
    assert "key_created" in csv_text


def test_audit_csv_neutralises_formulas(orgs: World, browser_for):
    import csv

    b = browser_for()
    b.sign_in(orgs, "=1+2@odd.example")  # an address may start with '='; a spreadsheet must not compute it
    rows = list(csv.reader(b.get("/me/audit.csv").text.splitlines()))
    assert rows[0] == ["seq", "at_utc", "at_wat", "actor", "action", "target", "detail"]
    assert [(r[3], r[4]) for r in rows[1:]] == [("'=1+2@odd.example", "sign_in")]


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"])
def test_open_redirects_are_refused(orgs: World, browser_for, target: str):
    b = browser_for()
    b.get(f"/sign-in?next={target}")
    b.post("/sign-in", {"email": ANN, "next": target})
    r = b.post("/sign-in/code", {"email": ANN, "code": orgs.code_for(ANN), "next": target}, follow=False)
    assert r.status_code == 303 and r.headers["location"] == "/"


def test_next_after_sign_in_returns_to_the_page(orgs: World, browser_for):
    b = browser_for()
    first = b.get("/o/ngo/members", follow=False)
    assert first.headers["location"] == "/sign-in?next=/o/ngo/members"
    b.get(first.headers["location"])
    b.post("/sign-in", {"email": ANN, "next": "/o/ngo/members"})
    r = b.post("/sign-in/code", {"email": ANN, "code": orgs.code_for(ANN), "next": "/o/ngo/members"}, follow=False)
    assert r.headers["location"] == "/o/ngo/members"


def test_oversized_forms_are_413(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    page = b.get("/o/ngo/keys/new")
    r = b.post("/o/ngo/keys/new", [("name", "x" * 20_000), ("scope", "risk_scores"), ("kind", "test"),
                                   ("form_token", form_token(page.text))], csrf=b.csrf(page.text))
    assert r.status_code == 413
    # a body that lies about its length is cut off at the cap all the same
    def chunks():
        yield b"name=y&scope=risk_scores&kind=test&csrf=" + b.csrf(page.text).encode() + b"&pad="
        for _ in range(100):
            yield b"z" * 1024
    r = b.client.post("/o/ngo/keys/new", content=chunks(), headers=b._headers({
        "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin"}))
    assert r.status_code == 413
    assert keys_of(orgs, "ngo") == []


def test_members_and_invitations(orgs: World, browser_for):
    admin = browser_for()
    admin.sign_in(orgs, ANN)
    admin.get("/o/ngo/members")
    r = admin.post("/o/ngo/members/invite", {"email": "eve@ngo.example", "role": "member"})
    assert r.status_code == 200 and "eve@ngo.example" in r.text
    link = orgs.link_for("eve@ngo.example", "/invitations/")
    eve = browser_for()
    path = "/" + link.split("/", 3)[3]
    assert eve.get(path, follow=False).status_code == 303  # sign in first
    eve.sign_in(orgs, "eve@ngo.example")
    page = eve.get(path)
    assert "Join Health &lt;b&gt;NGO&lt;/b&gt;" in page.text
    joined = eve.post(path, {})
    assert joined.status_code == 200 and orgs.store.role("ngo", "eve@ngo.example") == "member"
    assert eve.post(path, {}).status_code == 404  # single use


def test_researcher_requests_access_then_creates_keys(world: World, browser_for):
    b = browser_for()
    b.sign_in(world, "ada@uni.example")
    page = b.get("/me/keys")
    assert "not unlocked" in page.text
    b.get("/me/request-access")
    r = b.post("/me/request-access", {"reason": "PhD on seasonality of malaria in Kano"})
    assert "with the service team" in r.text
    world.service.set_unlocked("staff:test", "ada@uni.example", True)
    key = shown_key(create_via_page(b, "/me", "thesis", ["forecasts"]).text)
    record = world.keys.lookup(hash_key(key))
    assert record.owner == "ada@uni.example" and record.org is None


def test_live_key_asks_for_a_fresh_code_and_keeps_the_form(orgs: World, browser_for):
    b = browser_for()
    b.sign_in(orgs, ANN)
    orgs.clock.t += timedelta(minutes=11)
    page = b.get("/o/ngo/keys/new")
    asked = b.post("/o/ngo/keys/new", [("name", "live one"), ("scope", "risk_scores"), ("kind", "live"),
                                       ("expires", "2099-01-31"), ("form_token", form_token(page.text))])
    assert asked.status_code == 200 and "We have emailed a code" in asked.text
    assert keys_of(orgs, "ngo") == []
    r = b.post("/o/ngo/keys/new", [("code", "2222-2222")] + hidden_fields(asked.text))
    assert r.status_code == 400 and "not valid" in r.text and keys_of(orgs, "ngo") == []
    r = b.post("/o/ngo/keys/new", [("code", orgs.code_for(ANN))] + hidden_fields(r.text))
    key = shown_key(r.text)  # the code step ends with the key, not with an empty form
    assert key.startswith("svc_live_")
    [row] = keys_of(orgs, "ngo")
    assert row["name"] == "live one" and row["scopes"] == "risk_scores" and row["expires_on"] == "2099-01-31"


def hidden_fields(html: str) -> list[tuple[str, str]]:
    """The carried fields of the page's first form, without its CSRF token (post adds it)."""
    main = html[html.index("<main>"):]
    form = main[main.index("<form"):main.index("</form>")]
    return [(k, v.replace("&amp;", "&")) for k, v in re.findall(r'type="hidden" name="([^"]+)" value="([^"]*)"', form)
            if k != "csrf"]


def test_no_full_key_in_any_store_or_log(orgs: World, browser_for, tmp_path: Path, capfd):
    b = browser_for()
    b.sign_in(orgs, ANN)
    keys = [shown_key(create_via_page(b, "/o/ngo", f"k{i}", ["risk_scores"]).text) for i in range(2)]
    kid = orgs.keys.lookup(hash_key(keys[0])).id
    b.get(f"/o/ngo/keys/{kid}/roll")
    page = b.last.text
    keys.append(shown_key(b.post(f"/o/ngo/keys/{kid}/roll", {"until": (orgs.clock().date() + timedelta(days=2)).isoformat(),
                                                              "form_token": form_token(page)}).text))
    b.get("/o/ngo/audit")
    b.get("/o/ngo/audit.csv")
    out, err = capfd.readouterr()
    haystack = [out.encode(), err.encode()]
    for f in tmp_path.rglob("*"):
        if f.is_file():
            haystack.append(f.read_bytes())
    for key in keys:
        for blob in haystack:
            assert key.encode() not in blob and key[9:].encode() not in blob


def test_abandoned_sessions_are_forgotten_on_a_schedule(orgs: World, settings, browser_for):
    import sqlite3

    from .conftest import Browser, DashServer

    b = browser_for()
    b.sign_in(orgs, ANN)
    db = sqlite3.connect(orgs.store.path)
    assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
    orgs.clock.t += timedelta(minutes=31)
    with DashServer(create_app(orgs.service, settings)) as server:  # its periodic purge runs at start
        assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0  # nobody signed in
        assert Browser(server.url).get("/sign-in").status_code == 200


def test_racing_submissions_of_one_form_make_one_key(orgs: World, browser_for):
    from concurrent.futures import ThreadPoolExecutor

    b = browser_for()
    b.sign_in(orgs, ANN)
    page = b.get("/o/ngo/keys/new")
    body = urlencode([("name", "raced"), ("scope", "risk_scores"), ("kind", "test"),
                      ("form_token", form_token(page.text)), ("csrf", b.csrf(page.text))])
    headers = b._headers({"content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin"})

    def submit(_: int) -> str:
        with httpx.Client(base_url=b.base, timeout=30) as c:
            return c.post("/o/ngo/keys/new", content=body, headers=headers).text

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(submit, range(8)))
    shown = [a for a in answers if re.search(r"svc_test_[A-Za-z0-9_-]{32}", a)]
    assert len(shown) == 1 and sum("already sent" in a for a in answers) == 7
    assert [k["name"] for k in keys_of(orgs, "ngo")] == ["raced"]


def test_pages_are_small_for_slow_connections(orgs: World, browser_for):
    """Every page and the one stylesheet stay small: no scripts, no fonts, no images."""
    b = browser_for()
    b.sign_in(orgs, ANN)
    for i in range(10):
        orgs.service.create_key(ANN, Space("org", "ngo"), f"key number {i}", ["risk_scores", "forecasts"], "test",
                                None, f"t{i}")
    sizes = {path: len(b.get(path).content) for path in ("/o/ngo/keys", "/o/ngo/keys/new", "/o/ngo/members",
                                                         "/o/ngo/audit", "/static/dashboard.css")}
    assert all(n < 20_000 for n in sizes.values()), sizes
    assert "<script" not in b.get("/o/ngo/keys").text
