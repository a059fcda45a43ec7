"""The one list of credited sources: complete entries for the third-pass sources, and the
same facts on the sources page and in the Markdown a README reuses."""

from __future__ import annotations

import html

import pytest

from pipeline import attribution
from pipeline.site.pages import SITE_DIR, render_site

NEW = ("map_irs_2022", "uw_sae_itn", "hbhi_pfpr_lga_2018", "ndhs2018_clusters", "numalaria_urban_clusters")


def test_keys_unique_and_new_sources_complete() -> None:
    keys = [s.key for s in attribution.SOURCES]
    assert len(keys) == len(set(keys))
    for k in NEW:
        s = attribution.source(k)
        assert s.licence and s.citation and s.via and s.provider and s.used_for, k
    assert "CC BY 4.0" in attribution.source("map_irs_2022").licence
    assert "none stated" in attribution.source("uw_sae_itn").licence  # said, not guessed
    with pytest.raises(KeyError):
        attribution.source("nope")


def test_json_and_credit_line() -> None:
    j = attribution.source("map_irs_2022").to_json()
    assert list(j) == list(attribution.FIELDS) and j["key"] == "map_irs_2022"
    assert attribution.credit("uw_sae_itn").endswith(f"Licence: {attribution.source('uw_sae_itn').licence}.")


def test_markdown_table_for_readmes() -> None:
    fake = attribution.Source("k", "A | B", "p", "u", "l", "v", citation="line1\nline2")
    table = attribution.markdown_table((fake,))
    assert "A \\| B" in table and "line1 line2" in table
    full = attribution.markdown_table()
    assert full.count("\n") == len(attribution.SOURCES) + 2
    for s in attribution.SOURCES:
        assert s.name.replace("|", "\\|") in full


def test_sources_page_lists_every_source_with_its_citation() -> None:
    files = render_site({}, SITE_DIR / "templates", (SITE_DIR / "static" / "style.css").read_bytes(),
                        "2026-11-22T10:00:00Z")
    page = html.unescape(files["docs/attribution.html"][1].decode())
    for s in attribution.SOURCES:
        assert s.name in page and s.licence in page and s.citation in page
