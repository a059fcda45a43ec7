"""The last administrator's refusal: a sentence, shown on the members page after a See Other (POST,
redirect, GET), never at the form's POST address."""

from __future__ import annotations

import pytest

from dashboard.service import LAST_ADMIN_TEXT

from .conftest import World

ANN, BOB = "ann@ngo.example", "bob@ngo.example"


@pytest.fixture
def org(world: World) -> World:
    world.service.create_org("staff:test", "ngo", "Health NGO", ANN)
    now = world.clock().isoformat()
    world.service.store.ensure_account(BOB, now)
    world.service.store.set_role("ngo", BOB, "member", now)
    return world


@pytest.mark.parametrize("role", ["member", "remove"])
def test_the_last_administrator_is_refused_on_the_members_page(org: World, browser_for, role: str):
    b = browser_for()
    b.sign_in(org, ANN)
    b.get("/o/ngo/members")
    r = b.post("/o/ngo/members/role", {"email": ANN, "role": role}, follow=False)
    assert r.status_code == 303 and r.headers["location"] == "/o/ngo/members?refused=last_admin"
    page = b.get(r.headers["location"])
    assert page.status_code == 200 and page.url.path == "/o/ngo/members"
    assert LAST_ADMIN_TEXT in page.text and 'class="error" role="alert"' in page.text
    assert LAST_ADMIN_TEXT[0].isupper() and LAST_ADMIN_TEXT.endswith(".")
    assert org.service.store.role("ngo", ANN) == "admin"


def test_a_refusal_code_shows_only_its_own_text(org: World, browser_for):
    """The message comes from a table chosen by a code: text put in the address is never shown."""
    b = browser_for()
    b.sign_in(org, ANN)
    page = b.get("/o/ngo/members?refused=<b>you+are+hacked</b>")
    assert page.status_code == 200 and "hacked" not in page.text and LAST_ADMIN_TEXT not in page.text
