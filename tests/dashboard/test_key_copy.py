"""A new key copies whole, in Debian Chromium at 360 and 1280 px, with and without JavaScript.

The page runs under the dashboard's own Content-Security-Policy (not bypassed): the copy button
comes from /static/copy.js, the one script the policy allows. Checked: the whole key is visible
in its field (scrollWidth <= clientWidth), a double-click selects all of it, the copy button puts
it on the clipboard, and with JavaScript off the field still shows the whole key and a
double-click still selects it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboard.conftest import DashServer, World
from tests.pipeline.site.screenshots import browser, chromium_path

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)")

ANN = "ann@ngo.example"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


def new_key_page(page: Any, dash: DashServer, world: World) -> str:
    page.goto(dash.url + "/sign-in")
    page.fill("#email", ANN)
    page.click("text=Email me a code")
    page.fill("#code", world.code_for(ANN))
    page.click("button:has-text('Sign in')")
    page.goto(dash.url + "/o/ngo/keys/new")
    page.fill("#name", "copy test")
    page.check("input[name=scope][value=risk_scores]")
    page.check("input[name=kind][value=live]")
    page.click("button:has-text('Create the key')")
    key = page.input_value("#secret")
    assert re.fullmatch(r"svc_live_[A-Za-z0-9]{32}", key), key
    return key


def whole_key_shown(page: Any) -> None:
    sizes = page.eval_on_selector("#secret", "e => [e.scrollWidth, e.clientWidth, "
                                  "e.getBoundingClientRect().right, document.documentElement.clientWidth]")
    scroll, client, right, viewport = sizes
    assert scroll <= client, f"the key field scrolls: {scroll} px of text in {client} px"
    assert right <= viewport, f"the key field ends at {right} px of a {viewport} px page"


def double_click_selects(page: Any, key: str) -> None:
    page.evaluate("() => { const e = document.getElementById('secret'); e.blur(); e.setSelectionRange(0, 0); }")
    box = page.locator("#secret").bounding_box()
    # well inside the random part, past the prefix's underscores
    page.mouse.dblclick(box["x"] + box["width"] * 0.7, box["y"] + box["height"] / 2)
    selected = page.evaluate("() => { const e = document.getElementById('secret'); "
                             "return e.value.substring(e.selectionStart, e.selectionEnd); }")
    assert selected == key, f"a double-click selected {selected!r}"


@pytest.mark.parametrize("width", [360, 1280])
@pytest.mark.parametrize("js", [True, False], ids=["js", "no-js"])
def test_the_new_key_copies_whole(chromium: Any, dash: DashServer, world: World, width: int, js: bool):
    world.service.create_org("staff:test", "ngo", "Health NGO", ANN)
    context = chromium.new_context(java_script_enabled=js, viewport={"width": width, "height": 800})
    if js:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=dash.url)
    page = context.new_page()
    errors: list[str] = []
    # a CSP refusal is a console error; a script fault a page error (the favicon's 404 is neither)
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    key = new_key_page(page, dash, world)
    whole_key_shown(page)
    double_click_selects(page, key)
    if js:
        page.evaluate("() => navigator.clipboard.writeText('something else')")
        page.click("#copy-key")
        page.wait_for_function("() => document.getElementById('copy-status').textContent.startsWith('Copied')")
        assert page.evaluate("() => navigator.clipboard.readText()") == key
        whole_key_shown(page)  # the button does not squeeze the field
    else:
        assert page.locator("#copy-key").count() == 0
    assert errors == []  # no CSP refusals of the script, no script errors
    context.close()
