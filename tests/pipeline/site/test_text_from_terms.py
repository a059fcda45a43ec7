"""Text from one source: what a month's score is made of is generated from the model's declared terms
(pipeline.model.terms), and no published text names a term the score does not use."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from pipeline.datasets.base import BuildContext
from pipeline.datasets.base import Produced as P
from pipeline.model import terms
from pipeline.site.openapi import openapi_document
from pipeline.site.pages import produce
from tests.conftest import synthetic_produced
from tests.paths import needs_data
from tests.small_geography import small_geo

MONTHS = [{"period": "2021-12", "kind": "estimated", "provisional": False, "basis": terms.SURVEY_FIT},
          {"period": "2022-01", "kind": "estimated", "provisional": True, "basis": terms.AFTER_SURVEY},
          {"period": "2022-02", "kind": "forecast", "provisional": False, "basis": terms.AFTER_SURVEY}]


def _periods(adopted: tuple[str, ...]) -> dict:
    return {"last_estimated": "2022-01", "last_forecast": "2022-02", "months": MONTHS, "model_version": "test",
            "score_terms": [t.key for t in terms.terms(adopted)],
            "basis_descriptions": {b: terms.basis_words(b, adopted) for b in terms.BASES}}


def _site(adopted: tuple[str, ...]) -> dict[str, str]:
    produced = [p for p in synthetic_produced(with_transmission=False) if p.dataset != "risk"]
    produced.append(P("risk", {"/v1/periods": {(): _periods(adopted)}}))
    ctx = BuildContext(data_dir=Path("no-data"), updated_at="2026-11-22T10:00:00Z", geography=small_geo(),
                       produced=produced)
    files = produce(ctx).files
    return {k: data.decode() for k, (ctype, data) in files.items()
            if ctype.startswith(("text/html", "application/json", "text/javascript", "application/javascript"))}


def _plain(text: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", text).replace("&#39;", "'").replace("&amp;", "&").split())


def _named(files: dict[str, str], phrases: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(name, p) for name, text in files.items() for p in phrases if p.lower() in _plain(text).lower()]


@pytest.fixture(scope="module")
def plain_site() -> dict[str, str]:
    return _site(())


def test_no_published_text_names_a_term_the_score_does_not_use(plain_site: dict[str, str]) -> None:
    """Every built page, the OpenAPI document and the JSON the site ships, in a release without a month term."""
    assert any(k.endswith(".html") for k in plain_site) and "docs/openapi.json" in plain_site
    assert _named(plain_site, terms.unused_phrases(())) == []


def test_the_scan_finds_a_month_term_where_one_is_adopted() -> None:
    """The same scan fails where the release's score carries a term and the text then names it: it can fail."""
    adopted = ("t2_rain_lags_0_3",)
    site = _site(adopted)
    hits = _named(site, (terms.MONTH_TERMS["t2_rain_lags_0_3"].words,))
    assert any(name == "docs/openapi.json" for name, _ in hits) and any(name.endswith(".html") for name, _ in hits)
    # and a release without it must not carry those words
    assert _named(site, terms.unused_phrases(adopted)) == []


def test_openapi_and_the_api_reference_carry_the_generated_descriptions(plain_site: dict[str, str]) -> None:
    doc = orjson.loads(plain_site["docs/openapi.json"])
    op = doc["paths"]["/v1/periods"]["get"]
    assert op["description"].startswith(terms.periods_description())
    month = doc["components"]["schemas"]["Month"]["properties"]
    assert month["provisional"]["description"] == terms.provisional_words()
    assert month["basis"]["enum"] == list(terms.BASES)
    assert terms.made_of(terms.ESTIMATED) in _plain(plain_site["docs/api.html"])
    config = plain_site["docs/map.html"].split('id="map-config">', 1)[1].split("</script>", 1)[0]
    assert orjson.loads(config)["month_labels"] == terms.month_labels()
    assert openapi_document()["paths"]["/v1/periods"]["get"]["description"] == op["description"]


def test_every_month_term_of_the_registered_tests_is_declared() -> None:
    from pipeline.model.month_tests import TERMS

    assert set(TERMS) == set(terms.MONTH_TERMS)
    for k in TERMS:  # each adopted term shows in what an estimated month is made of, never in a forecast
        assert terms.MONTH_TERMS[k].words in terms.made_of(terms.ESTIMATED, (k,))
        assert terms.MONTH_TERMS[k].words not in terms.made_of(terms.FORECAST, (k,))


@needs_data()
def test_the_real_release_names_no_unused_term(real_build: Path) -> None:
    """Every built page, the OpenAPI document and the JSON descriptions of a real build."""
    root = real_build / "current"
    if not root.exists():
        root = real_build
    periods = next(iter(sorted(root.rglob("v1/periods.json"))), None)
    assert periods is not None
    adopted = terms.adopted_from(orjson.loads(periods.read_bytes()).get("score_terms"))
    files = {str(p): p.read_text(encoding="utf-8") for p in root.rglob("docs/*") if p.suffix in (".html", ".json")}
    files[str(periods)] = periods.read_text(encoding="utf-8")
    assert len(files) > 10
    assert _named(files, terms.unused_phrases(adopted)) == []
