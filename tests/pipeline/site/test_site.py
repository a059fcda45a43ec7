"""The documentation site: rendered by the real renderer into a release, served by the
real server on loopback, and looked at by a real (headless) browser.

The release is the synthetic one from conftest with the real site producer in place
of its stand-in, over the repository's own docs/*.md, so whatever pages other people
have written are checked for dead links too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge.local.app import App
from edge.problems import CATALOGUE, PROBLEM_JSON
from edge.routes import DOWNLOAD_FILE, ROUTES
from edge.stores.sqlite import SQLiteKeyStore
from pipeline.datasets.base import BuildContext
from pipeline.release.render import render_release
from pipeline.site.pages import (
    GENERATED,
    OPERATOR_PAGES,
    SITE_DIR,
    SOURCES,
    markdown_page,
    produce,
    render_site,
    slugify,
)
from tests.conftest import NOW, LiveServer, synthetic_produced
from tests.paths import REPO_ROOT
from tests.small_geography import small_geo

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TEMPLATES = SITE_DIR / "templates"
CSS = (SITE_DIR / "static" / "style.css").read_bytes()


class Page(HTMLParser):
    """Links, element ids and visible text of one HTML document."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: list[str] = []
        self.text_parts: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"] or "")
        for name in ("href", "src"):
            if tag in ("a", "link", "img", "script") and a.get(name):
                self.links.append(a[name] or "")

    def handle_data(self, data: str) -> None:
        self.text_parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.text_parts).split())


# --- rendering, without a server ---------------------------------------------------------


FIXTURE_DOCS = {
    "api": "# API reference\n\n## Authentication\n\nSee [limits](limits.md#numbers).\n",
    "limits": "# Limits\n\n## Numbers\n\nText.\n\n## Numbers\n\nAgain.\n",
    "zeta": "# Zeta page\n\nA [report](../reports/hindcast.md), [model](./limits.md), "
            "<script>alert(1)</script> and [ext](https://example.org/x).\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
}


def test_every_markdown_file_becomes_a_page_and_api_md_feeds_the_api_page() -> None:
    files = render_site(FIXTURE_DOCS, TEMPLATES, CSS, "2026-11-22T10:00:00Z")
    assert "docs/zeta.html" in files
    assert "docs/api.html" in files and "docs/errors.html" in files and "docs/openapi.json" in files
    api = files["docs/api.html"][1].decode()
    assert "Authentication" in api  # the hand-written part is on the generated page
    assert files["docs/api.html"][0].startswith("text/html")
    # the analysts' nav lists the Markdown pages, known order first then alphabetical; operator
    # pages (limits) are listed in their own section, not among the analysts' pages
    files = render_site({**FIXTURE_DOCS, "geography": "# Geography\n"}, TEMPLATES, CSS, "2026-11-22T10:00:00Z")
    index = files["docs/index.html"][1].decode()
    assert index.index("/docs/geography.html") < index.index("/docs/zeta.html")
    assert "/docs/limits.html" not in index


def test_operator_documents_stay_in_the_repository() -> None:
    """The operator documents (limits here) are not pages of the site, nor linked from one: a
    public page's link to one is shown as text."""
    files = render_site(FIXTURE_DOCS, TEMPLATES, CSS, "2026-11-22T10:00:00Z")
    assert "docs/limits.html" not in files and "docs/zeta.html" in files and "docs/operating.html" not in files
    api = files["docs/api.html"][1].decode()
    assert "/docs/limits.html" not in Page(api).links and 'title="repository file limits.md#numbers"' in api


def test_markdown_links_headings_and_escaping() -> None:
    known = {"limits", "zeta", *GENERATED}
    page = markdown_page("zeta", FIXTURE_DOCS["zeta"], known)
    html = str(page.html)
    assert page.title == "Zeta page"
    assert 'href="/docs/limits.html"' in html  # ./limits.md → site page
    assert 'href="https://example.org/x"' in html
    assert "../reports/hindcast.md" not in Page(html).links  # not on the site: text, not a dead link
    assert 'class="repo-path"' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<table>" in html
    limits = markdown_page("limits", FIXTURE_DOCS["limits"], known)
    ids = [h.id for h in limits.headings]
    assert ids == ["limits", "numbers", "numbers-2"]  # unique and stable
    api = markdown_page("api", FIXTURE_DOCS["api"], known)
    assert 'href="/docs/limits.html#numbers"' in str(api.html)


@given(st.text(max_size=40))
def test_slugs_are_safe_anchors(text: str) -> None:
    s = slugify(text)
    assert s and all(c.isascii() and (c.isalnum() or c == "-") for c in s)
    assert not s.startswith("-") and not s.endswith("-")
    assert slugify(text) == s


@given(st.lists(st.sampled_from(["# A", "## A", "## a!", "### A-1", "text", "[x](y.md)", "[z](limits.md#q)",
                                  "<b>x</b>", "`code`", "## `x` y", "| a |\n|---|\n| b |"]), max_size=12))
def test_any_markdown_renders_with_unique_heading_ids(lines: list[str]) -> None:
    page = markdown_page("p", "\n\n".join(lines), {"limits", *GENERATED})
    ids = [h.id for h in page.headings]
    assert len(ids) == len(set(ids))
    parsed = Page(str(page.html))
    assert parsed.ids == ids  # every heading, and only headings, carry ids
    for href in parsed.links:  # links either leave the site or point at a page that exists
        assert href.startswith(("http", "#")) or href.split("#")[0] in {f"/docs/{s}.html" for s in ("limits", *GENERATED)}


def test_site_is_deterministic() -> None:
    a = render_site(FIXTURE_DOCS, TEMPLATES, CSS, "2026-11-22T10:00:00Z")
    b = render_site(dict(reversed(FIXTURE_DOCS.items())), TEMPLATES, CSS, "2026-11-22T10:00:00Z")
    assert a == b  # the release id hashes these bytes; a rebuild must be able to hard-link them


# --- served by the real server ----------------------------------------------------------


@pytest.fixture(scope="module")
def site_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    tmp = tmp_path_factory.mktemp("site")
    ctx = BuildContext(data_dir=tmp / "no-data", updated_at="2026-11-22T10:00:00Z", geography=small_geo())
    produced = [p for p in synthetic_produced() if p.dataset != "site"] + [produce(ctx)]
    render_release(tmp / "build", produced, ctx.updated_at)
    store = SQLiteKeyStore(tmp / "var" / "keys.sqlite")
    _, key = store.create("docs test", ["risk_scores", "forecasts", "lga_boundaries"], "test", now=NOW)
    with LiveServer(App(tmp / "build", store)) as server:
        yield server, key


def _crawl(base: str) -> dict[str, Page]:
    """Every page reachable from /docs/ by links on the site, each fetched once, no key sent."""
    pages: dict[str, Page] = {}
    todo = [base + "/docs/"]
    with httpx.Client(timeout=10) as client:
        while todo:
            url = todo.pop()
            if url in pages:
                continue
            r = client.get(url)
            assert r.status_code == 200, (url, r.status_code)
            if not r.headers["content-type"].startswith("text/html"):
                pages[url] = Page("")
                continue
            page = Page(r.text)
            pages[url] = page
            for href in page.links:
                target, _ = urldefrag(urljoin(url, href))
                if urlparse(target).netloc == urlparse(base).netloc and urlparse(target).path.startswith("/docs"):
                    todo.append(target)
    return pages


def test_every_link_and_anchor_on_the_site_resolves(site_server: tuple[LiveServer, str]) -> None:
    server, _ = site_server
    pages = _crawl(server.url)
    for md in (REPO_ROOT / "docs").glob("*.md"):  # every public Markdown file is reachable
        if md.stem in OPERATOR_PAGES:
            continue
        name = "api" if md.stem in GENERATED else md.stem
        assert f"{server.url}/docs/{name}.html" in pages
    for url, page in pages.items():
        assert len(page.ids) == len(set(page.ids)), (url, "duplicate ids")
        for href in page.links:
            target, frag = urldefrag(urljoin(url, href))
            if frag and target in pages:
                assert frag in pages[target].ids, (url, href)


def test_problem_type_uris_point_at_an_anchor(site_server: tuple[LiveServer, str]) -> None:
    server, key = site_server
    with httpx.Client(base_url=server.url, timeout=10) as c:
        r = c.get("/v1/risk/lgas", params={"state": "kn"}, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 404 and r.headers["content-type"] == PROBLEM_JSON
        body = r.json()
        page_url, frag = urldefrag(urljoin(server.url + "/v1/risk/lgas", body["type"]))
        page = c.get(page_url)
        assert page.status_code == 200
        assert frag == body["code"] and frag in Page(page.text).ids
        errors = Page(c.get("/docs/errors.html").text)
        assert {p.code for p in CATALOGUE} <= set(errors.ids)


def test_openapi_json_is_served(site_server: tuple[LiveServer, str]) -> None:
    server, _ = site_server
    r = httpx.get(server.url + "/docs/openapi.json", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert set(orjson.loads(r.content)["paths"]) == {route.path for route in ROUTES} | {DOWNLOAD_FILE.path} | {
        route.path + ".csv" for route in ROUTES if route.param("format") is not None}


# --- looked at by a browser --------------------------------------------------------------


def _chromium(*args: str) -> str:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package `chromium`)")
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=90, check=True,
        )
    return out.stdout


def test_browser_renders_index_and_api_with_every_route_and_code(site_server: tuple[LiveServer, str]) -> None:
    server, _ = site_server
    index = Page(_chromium("--dump-dom", server.url + "/docs/"))
    api = Page(_chromium("--dump-dom", server.url + "/docs/api.html"))
    for route in ROUTES:
        assert route.path in index.text
        assert route.path in api.text
        assert route.file_key in api.text
    for p in CATALOGUE:
        assert p.code in api.ids  # the anchor problem `type` URIs use
    assert "Order of checks" in api.text and "Versioning and compatibility" in api.text


def test_browser_renders_attribution(site_server: tuple[LiveServer, str]) -> None:
    server, _ = site_server
    page = Page(_chromium("--dump-dom", server.url + "/docs/attribution.html"))
    for licence in ("CC BY 4.0", "CC BY-IGO", "public domain", "Apache-2.0", "MIT"):
        assert licence in page.text
    for provider in ("eHealth Africa", "GRID3", "OCHA", "WorldPop", "CHIRPS", "WFP", "numalariamodeling",
                     "sepmein", "DHS"):
        assert provider in page.text
    for source in SOURCES:  # every credited source has its row, with where the copy came from
        assert source.name in page.text and source.via in page.text


def test_browser_screenshot(site_server: tuple[LiveServer, str], tmp_path: Path) -> None:
    server, _ = site_server
    shot = tmp_path / "api.png"
    _chromium(f"--screenshot={shot}", "--window-size=1280,1600", "--hide-scrollbars", server.url + "/docs/api.html")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a blank page compresses far smaller


def test_root_redirects_to_the_docs_and_docs_are_served_gzip(site_server: tuple[LiveServer, str]) -> None:
    server, _ = site_server
    with httpx.Client(base_url=server.url, timeout=10) as c:
        for path in ("/", "/docs"):
            r = c.get(path)
            assert r.status_code == 301 and r.headers["location"] == "/docs/", path
        landing = c.get("/", follow_redirects=True)
        assert landing.status_code == 200 and str(landing.url) == server.url + "/docs/"
        assert "Getting a key" in landing.text
        plain = c.get("/docs/api.html", headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers
        zipped = c.get("/docs/api.html", headers={"Accept-Encoding": "gzip"})
        assert zipped.headers["content-encoding"] == "gzip" and zipped.headers["vary"] == "Accept-Encoding"
        assert zipped.text == plain.text  # httpx decodes: the same page
        assert int(zipped.headers["content-length"]) < len(plain.content) / 3
        assert zipped.headers["etag"] != plain.headers["etag"]  # two representations, two validators
        for etag in (plain.headers["etag"], zipped.headers["etag"]):
            again = c.get("/docs/api.html", headers={"Accept-Encoding": "gzip", "If-None-Match": etag})
            assert again.status_code == 304
        # the vendored libraries are part of the release, served like any page
        js = c.get("/docs/vendor/leaflet/leaflet.js", headers={"Accept-Encoding": "gzip"})
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert js.headers["content-encoding"] == "gzip"


def test_api_page_gives_parameters_in_words_example_responses_and_error_causes() -> None:
    geo = small_geo()
    ctx = BuildContext(data_dir=Path("no-data"), updated_at="2026-11-22T10:00:00Z", geography=geo,
                       produced=synthetic_produced(with_transmission=False))
    files = produce(ctx).files
    api = Page(files["docs/api.html"][1].decode())
    assert "^[A-Z]{2}$" not in api.text and "two capital letters" in api.text  # words, not a pattern
    # an example response cut from the documents the release ships (the synthetic Kano risk report)
    assert '"state_code": "KN"' in api.text
    for p in CATALOGUE:  # every code is explained with its cause
        assert p.when.split("`")[0][:30] in api.text, p.code
    # the state-codes table is the build's geography: every state with its name and OCHA p-code
    codes = Page(files["docs/state-codes.html"][1].decode())
    for row in geo.states.iter_rows(named=True):
        assert f"{row['state_code']} {row['state']} {row['ocha_pcode']}" in codes.text
        assert f"state-{row['state_code']}" in codes.ids
    openapi = orjson.loads(files["docs/openapi.json"][1])
    assert openapi["components"]["schemas"]["StateCode"]["enum"] == sorted(geo.states["state_code"])
    assert "built without its geography" in Page(render_site(FIXTURE_DOCS, TEMPLATES, CSS, "2026-11-22T10:00:00Z")
                                                 ["docs/state-codes.html"][1].decode()).text


# Public pages allowed to mention the SPEC while being rewritten (each must still mention it, so the
# list only shrinks); empty now that every public page states the rules in its own words.
SPEC_NOT_YET_REWRITTEN: frozenset[str] = frozenset()


def test_public_pages_do_not_speak_of_the_internal_spec() -> None:
    """The interface contract is an internal document: public pages state its rules in their own words.

    Operator documents may cite it: they stay in the repository and are not published.
    """
    ctx = BuildContext(data_dir=Path("no-data"), updated_at="2026-11-22T10:00:00Z", geography=small_geo(),
                       produced=synthetic_produced(with_transmission=False))
    files = produce(ctx).files
    operator = {f"docs/{slug}.html" for slug in OPERATOR_PAGES}
    public = {name: body.decode() for name, (ctype, body) in files.items()
              if (ctype.startswith("text/html") or name == "docs/openapi.json") and name not in operator}
    assert "docs/api.html" in public and "docs/seasons.html" in public and "docs/limits.html" not in public
    speaking = {name for name, text in public.items() if re.search(r"\bSPEC\b", text)}
    assert speaking <= SPEC_NOT_YET_REWRITTEN, sorted(speaking - SPEC_NOT_YET_REWRITTEN)
    rewritten = sorted(SPEC_NOT_YET_REWRITTEN - speaking)
    assert not rewritten, f"rewritten: drop {rewritten} from SPEC_NOT_YET_REWRITTEN"


def test_cut_keeps_the_first_items_of_every_list() -> None:
    from pipeline.site.pages import cut

    value = {"a": [1, 2, 3], "b": {"c": [[1, 2, 3], [4]]}, "d": "x"}
    assert cut(value) == ({"a": [1, 2], "b": {"c": [[1, 2], [4]]}, "d": "x"}, True)
    assert cut({"a": [1]}) == ({"a": [1]}, False)


def test_redirect_and_gzip_docs_on_the_direct_front(site_server: tuple[LiveServer, str]) -> None:
    server, _ = site_server
    with LiveServer(server.app, "direct") as direct, httpx.Client(base_url=direct.url, timeout=10) as c:
        r = c.get("/")
        assert r.status_code == 301 and r.headers["location"] == "/docs/"
        zipped = c.get("/docs/", headers={"Accept-Encoding": "gzip"})
        assert zipped.status_code == 200 and zipped.headers["content-encoding"] == "gzip"
        assert "Getting a key" in zipped.text


def test_every_example_query_is_one_the_gate_accepts() -> None:
    """An example request on the API page validates: no file-key spelling (e.g. `include=estimated`)
    leaks into a query a reader would copy."""
    from edge.gate import _parse_query
    from edge.routes import BY_PATH
    from pipeline.release.render import merge_facts
    from pipeline.site.pages import examples_from

    produced = synthetic_produced()
    facts, _ = merge_facts(produced)
    examples = examples_from(produced)
    assert "/v1/history/lgas" in examples and "/v1/risk/lgas/all" in examples
    for path, (query, _, _) in examples.items():
        route = BY_PATH[path]
        parsed = _parse_query(query, route)
        assert isinstance(parsed, dict), (path, query, parsed)
        for p in route.params:
            p.validate(parsed.get(p.name), facts)  # raises ParamError on a bad example
    assert "include" not in examples["/v1/history/lgas"][0]
