"""The key form says what each scope reads, downloads included, from the same rules the gate applies."""

from __future__ import annotations

import html

from edge.routes import ROUTES, SCOPES
from pipeline.datasets.downloads import download_scope_map

from .conftest import World

ANN = "ann@ngo.example"


def test_the_new_key_form_names_what_each_scope_opens_downloads_included(world: World, browser_for):
    world.service.create_org("staff:test", "ngo", "NGO", ANN)
    b = browser_for()
    b.sign_in(world, ANN)
    page = b.get("/o/ngo/keys/new")
    assert page.status_code == 200
    text = html.unescape(page.text)
    for scope in SCOPES:
        label = text[text.index(f'value="{scope}"'):]
        label = label[:label.index("</label>")]
        for route in ROUTES:
            assert (route.path in label) == (route.scope == scope) or f"{route.path}?" in label, (scope, route.path)
    # the sentence on downloads agrees with the rule the renderer records for the gate
    rule = download_scope_map()
    assert rule["risk_lga_month"] == ["risk_scores", "forecasts"] and rule["lga_outlines"] == ["lga_boundaries"]
    assert rule["malaria_risk_nigeria.zip"] == list(SCOPES)
    assert ("risk tables hold estimated and forecast months, so they need <code>risk_scores</code> and "
            "<code>forecasts</code>") in text
    assert "the outlines need <code>lga_boundaries</code>" in text and "zip needs all three" in text
