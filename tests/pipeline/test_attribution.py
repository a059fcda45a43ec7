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


# --- the licence table -----------------------------------------------------------------------------------


def test_the_licence_table_has_a_row_for_every_route_bundle_file_and_figure() -> None:
    from edge.routes import DOWNLOAD_FILE, ROUTES
    from pipeline.datasets.downloads import TABLE_TITLES

    names = {a.name for a in attribution.artefacts()}
    assert {r.path for r in ROUTES} | {DOWNLOAD_FILE.path} <= names  # driven by the route table
    stems = {n.split(".")[0] for n in names if not n.startswith("/")}
    assert set(TABLE_TITLES) | {"lga_outlines", "state_outlines"} <= stems
    assert {"docs/validation", "docs/figures/*"} <= stems
    used = {k for a in attribution.artefacts() for k in a.sources}
    assert used == {s.key for s in attribution.SOURCES}  # every credited source is behind some artefact


def test_a_restricted_source_is_never_passed_on_and_its_terms_follow() -> None:
    restricted = {s.key for s in attribution.SOURCES if s.terms == attribution.SUMMARY_ONLY}
    assert restricted == {"dhis2_lga_cases"}
    for a in attribution.artefacts():
        assert not restricted & set(a.passed_on), a.name
    with pytest.raises(ValueError, match="summary statistics"):
        attribution.artefact_terms(attribution.Artefact("x", "route", passed_on=("dhis2_lga_cases",)))
    derived = attribution.artefact_terms(attribution.Artefact("x", "route", derived=("chirps",)))
    assert derived.startswith("CC BY 4.0") and "keep" not in derived
    mixed = attribution.artefact_terms(attribution.Artefact("x", "route", ("population",), ("uw_sae_itn",)))
    assert "CC BY 4.0" in mixed and "no licence stated" in mixed and "none is granted" in mixed
    only_rows = attribution.artefact_terms(attribution.Artefact("x", "route", passed_on=("boundaries",)))
    assert "CC BY 4.0 for the service" not in only_rows  # no CC BY claim over a source's own rows


def test_a_resource_licenses_its_own_figures_and_names_the_sources_terms() -> None:
    lic = attribution.resource_licences(attribution.Artefact("x", "bundle file", ("chirps",),
                                                             ("population", "uw_sae_itn", "ndhs2018_clusters")))
    assert [entry["name"] for entry in lic] == ["CC-BY-4.0", "CC-BY-4.0", "other-closed", "other-at"]
    assert "values from" in lic[1]["title"] and "no licence granted" in lic[2]["title"]
    outlines = attribution.resource_licences(attribution.Artefact("x", "bundle file", (), ("boundaries",)))
    assert [entry["name"] for entry in outlines] == ["other-at"]  # the source's rows only: no CC BY claim


def test_the_sources_page_shows_the_licence_table() -> None:
    files = render_site({}, SITE_DIR / "templates", (SITE_DIR / "static" / "style.css").read_bytes(),
                        "2026-11-22T10:00:00Z")
    page = html.unescape(files["docs/attribution.html"][1].decode())
    assert 'id="licence-table"' in page
    for row in attribution.licence_table():
        assert str(row["artefact"]) in page and str(row["terms"]) in page


def test_the_bundle_package_states_licences_and_sources_per_resource() -> None:
    import orjson
    import polars as pl

    from pipeline.datasets import downloads as d

    frames = {"risk_lga_month": pl.DataFrame({"lga_code": ["NG020001"], "period": ["2024-01"]}),
              "context_lga": pl.DataFrame({"lga_code": ["NG020001"], "itn_use": [0.5]})}
    outline = orjson.dumps({"type": "FeatureCollection", "features": []})
    files = d.table_files(frames) + [d.BundleFile(f"{stem}.{ext}", d.CSV, outline, stem)
                                     for stem in ("lga_outlines", "state_outlines") for ext in ("geojson", "parquet")]
    pkg = d.datapackage("r1", "m-1", "2026-11-22T10:00:00Z", frames, files, {})
    by_name = {r["name"]: r for r in pkg["resources"]}
    context = by_name["context_lga"]
    assert context["licenses"][0]["name"] == "CC-BY-4.0"
    itn = attribution.source("uw_sae_itn")
    entry = next(s for s in context["sources"] if s["title"].startswith(itn.name))
    assert entry["x-use"] == "values passed on unchanged" and entry["x-terms"] == attribution.NONE_STATED
    assert any("no licence granted" in lic["title"] for lic in context["licenses"])
    risk = by_name["risk_lga_month"]
    assert not any(s["title"].startswith(itn.name) for s in risk["sources"])
    dhis2 = next(s for s in risk["sources"] if s["title"].startswith(attribution.source("dhis2_lga_cases").name))
    assert dhis2["x-use"] == "summary statistics only"
    assert by_name["lga_outlines-geojson"]["licenses"][0]["name"] != "CC-BY-4.0"
    # the package's licences and sources are exactly the union of its resources'
    union = {(lic["name"], lic["title"]) for r in pkg["resources"] for lic in r["licenses"] if "path" not in lic}
    assert pkg["licenses"][0]["path"] == attribution.DERIVED_LICENCE["path"]
    assert {(lic["name"], lic["title"]) for lic in pkg["licenses"][1:]} == union
    assert any(lic["name"] == "CC-BY-4.0" and "WorldPop" in lic["title"] for lic in pkg["licenses"][1:])
    assert len(pkg["sources"]) == len({s["title"] for r in pkg["resources"] for s in r["sources"]})
