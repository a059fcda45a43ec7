"""Months after the last survey round say what their season reads, in one plain sentence and one
machine-readable field, the same in /v1/periods, the map page (also without JavaScript) and the bundle
(issue 41 item 5; docs/model-6-protocol.md)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from pipeline.datasets.risk import season_after_survey
from pipeline.model import terms
from tests.paths import needs_data


def test_the_field_follows_the_registered_check() -> None:
    typical = season_after_survey({"model_6": {"estimated_months": "typical_season",
                                               "recorded_rain": {"lga_gain": 0.004, "minimum_gain": 0.03}}})
    assert typical["source"] == "typical_season" and "typical season" in typical["description"]
    assert typical["recorded_rain_gain"] == 0.004 and typical["recorded_rain_minimum_gain"] == 0.03
    rain = season_after_survey({"model_6": {"estimated_months": "recorded_rain"}})
    assert season_after_survey({"model_7": {"estimated_months": "recorded_rain"}})["source"] == "recorded_rain"
    assert rain["source"] == "recorded_rain" and "recorded rain" in rain["description"]
    # without the dated series there is no check: the typical season, and no gain to quote
    assert season_after_survey({}) == {"source": "typical_season",
                                       "description": terms.season_after_survey_words("typical_season"),
                                       "recorded_rain_gain": None, "recorded_rain_minimum_gain": None}
    with pytest.raises(ValueError):
        terms.season_after_survey_words("a guess")


@pytest.mark.slow
@needs_data()
def test_periods_map_and_bundle_say_the_same(real_build: Path) -> None:
    root = (real_build / "current").resolve()
    periods = json.loads((root / "v1/periods.json").read_text())
    trans = json.loads((root / "v1/transmission/states.json").read_text())
    said = periods["season_after_survey"]
    assert said["source"] == trans["method"]["check"]["model_7"]["estimated_months"]
    assert said["description"] == terms.season_after_survey_words(said["source"])
    page = (root / "docs/map.html").read_text()
    # after the latest month's table (outside the script-only app and the <noscript>): read with and
    # without JavaScript
    at = page.index('id="season-after-survey"')
    assert at > page.index('<section id="latest"') > page.index("</noscript>")
    assert said["description"] in html.unescape(page[at:page.index("</p>", at)])
    readme = next(root.glob("downloads/**/README.md")).read_text()
    assert said["description"] in readme
    pkg = json.loads(next(root.glob("downloads/**/datapackage.json")).read_text())
    assert pkg["x-months"]["season_after_survey"]["source"] == said["source"]
