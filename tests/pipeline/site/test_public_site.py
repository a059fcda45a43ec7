"""Two audiences, two places: the public site ships with the release and holds only what a user of
the API needs; the operator documents stay Markdown in the repository. Every public page stays
small enough for a slow connection, and the site sends a reader to the key dashboard for a key."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from pipeline.datasets.base import BuildContext
from pipeline.settings import BuildSettings
from pipeline.site.pages import OPERATOR_PAGES, produce
from tests.conftest import synthetic_produced
from tests.paths import REPO_ROOT
from tests.small_geography import small_geo

MAX_COMPRESSED = 60 * 1024
PUBLIC = {"smc", "rain-season",  # SMC planning by Nigeria's rule, and the rain-season definitions it rests on
          "index", "quickstart", "keys", "api", "errors", "rate-limits", "downloads", "map", "model", "seasons",
          "validation", "geography", "context", "survey", "attribution", "changelog", "releases", "state-codes",
          # the scorecard of projected counts and the pre-registered protocols: public, so anyone can
          # check that the published figures follow the method fixed before they were computed
          "skill", "skill-protocol", "model-5-protocol", "model-6-protocol", "model-7-protocol", "range-protocol"}
DASHBOARD = "https://keys.example.org"


@pytest.fixture(scope="module")
def site() -> dict[str, tuple[str, bytes]]:
    ctx = BuildContext(data_dir=Path("no-data"), updated_at="2026-11-22T10:00:00Z", geography=small_geo(),
                       produced=synthetic_produced(with_transmission=False), dashboard_url=DASHBOARD)
    return produce(ctx).files


def test_the_public_site_is_the_users_pages_and_no_operator_page(site: dict[str, tuple[str, bytes]]) -> None:
    pages = {k.removeprefix("docs/").removesuffix(".html") for k in site if k.endswith(".html")}
    assert pages == PUBLIC
    operator = {p.stem for p in (REPO_ROOT / "docs").glob("*.md")} & set(OPERATOR_PAGES)
    assert operator >= {"deploy", "operations", "runbook", "monitoring", "data-load", "local-releases", "limits",
                        "dashboard", "architecture"}  # they stay in the repository
    for name, (_, body) in site.items():
        if name.endswith(".html"):
            text = body.decode()
            for slug in OPERATOR_PAGES:
                assert f"/docs/{slug}.html" not in text, (name, slug)
            assert "/docs/operating.html" not in text


def test_one_page_per_topic() -> None:
    """No two documents for one topic (as `operating` once stood beside `operations`)."""
    stems = {p.stem for p in (REPO_ROOT / "docs").glob("*.md")}
    assert "operating" not in stems
    assert not (REPO_ROOT / "pipeline" / "site" / "templates" / "operating.html").exists()


def test_every_public_page_is_at_most_60_kb_compressed(site: dict[str, tuple[str, bytes]]) -> None:
    sizes = {k: len(gzip.compress(body, 9)) for k, (ctype, body) in site.items() if ctype.startswith("text/html")}
    assert sizes and max(sizes.values()) <= MAX_COMPRESSED, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


def test_the_pages_send_a_reader_to_the_key_dashboard(site: dict[str, tuple[str, bytes]]) -> None:
    for name in ("docs/index.html", "docs/keys.html", "docs/quickstart.html", "docs/map.html"):
        text = site[name][1].decode()
        assert f'href="{DASHBOARD}' in text and "Get a key" in text, name
    for name in ("docs/index.html", "docs/keys.html", "docs/quickstart.html"):
        assert "Settings → API access" in site[name][1].decode(), name


def test_the_dashboard_address_is_a_setting_with_the_local_default() -> None:
    assert BuildSettings.from_env({}).dashboard_url == "http://127.0.0.1:8090"
    assert BuildSettings.from_env({"DASHBOARD_URL": "https://keys.example.org/"}).dashboard_url == DASHBOARD
    from pipeline.errors import OperatorError

    with pytest.raises(OperatorError, match="DASHBOARD_URL"):
        BuildSettings.from_env({"DASHBOARD_URL": "keys.example.org"})
