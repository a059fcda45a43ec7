"""The documentation site, rendered into every release under `docs/`.

The site ships inside the release it describes, so a reader can never see pages
for one data load next to the data of another. It depends only on the route
table, the problem catalogue and the Markdown files in the repository's `docs/`
folder; it needs no input data, so it can be built (and tested) without it.

Pages: `index.html`, `api.html` (docs/api.md followed by the reference generated
from the route table and the OpenAPI schemas), `errors.html` (the catalogue, one
anchor per code, which is where problem `type` URIs point), `attribution.html`,
`openapi.json`, and one page per other `docs/*.md` — a new Markdown file appears
on the next build without any change here — except the operator documents
(OPERATOR_PAGES), which stay in the repository and are never published. Links are absolute (`/docs/…`) because
the gate serves the site there and problem `type` URIs already assume it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import markdown_it
import orjson
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from edge.problems import CATALOGUE, PROBLEM_JSON, TYPE_BASE
from edge.routes import (
    BUNDLE_ZIP,
    CSV_SUFFIX,
    DOWNLOAD_FILE,
    INCLUDE_NONE,
    PUBLIC_PREFIX,
    ROUTES,
    SCOPES,
    Param,
    Route,
)
from pipeline import cache
from pipeline.attribution import SOURCES, licence_table
from pipeline.datasets.base import BuildContext, Produced, Rendered
from pipeline.errors import SiteError
from pipeline.model import terms
from pipeline.settings import DEFAULT_DASHBOARD_URL, REPO_ROOT
from pipeline.site.figures import FRESHNESS, NOT_IN_RELEASE, release_figures, substitute
from pipeline.site.latest import Latest, latest_month
from pipeline.site.openapi import (
    PATH_LEVEL_CODES,
    RESPONSE_SCHEMA,
    codes_for_route,
    openapi_document,
    param_schema,
    routes_for_code,
)
from pipeline.site.stated import settings_figures

SITE_DIR = Path(__file__).resolve().parent  # templates/ and static/
HTML = "text/html; charset=utf-8"
CSS = "text/css; charset=utf-8"
BASE = "/" + PUBLIC_PREFIX  # "/docs/"

# Pages the site generates itself. A docs/<slug>.md with one of these names is not
# a page of its own: its text becomes the introduction of the generated page.
GENERATED = ("index", "api", "errors", "attribution", "map", "state-codes")
# Reading order of the Markdown pages; anything else follows alphabetically.
DOC_ORDER = ("quickstart", "keys", "geography", "context", "model", "seasons", "rate-limits", "downloads")
# Documents for the people who run the service: they stay Markdown in the repository's docs/ and are
# not published with the release (a reader of the API needs none of them; an attacker gets no map of
# the infrastructure). A public page's link to one is shown as text.
OPERATOR_PAGES = ("architecture", "operations", "data-load", "deploy", "monitoring", "runbook", "limits", "dashboard",
                  "local-releases")
SITE_NAME = "Malaria risk data service for Nigeria"  # the landing page's title, and every other title's suffix
# Pages named in the menu's row; the others are behind its "More pages" disclosure (base.html)
PRIMARY_NAV = ("quickstart", "map", "api")
JS = "text/javascript; charset=utf-8"
PNG = "image/png"
# Front-end libraries, from pipeline/site/node_modules (npm ci, pinned by package-lock.json):
# (package, file inside the package) -> release key under docs/vendor/.
VENDOR_FILES: tuple[tuple[str, str, str], ...] = (
    ("leaflet", "dist/leaflet.js", "leaflet/leaflet.js"),
    ("leaflet", "dist/leaflet.css", "leaflet/leaflet.css"),
    ("leaflet", "dist/images/layers.png", "leaflet/images/layers.png"),
    ("leaflet", "dist/images/layers-2x.png", "leaflet/images/layers-2x.png"),
    ("leaflet", "LICENSE", "leaflet/LICENSE.txt"),
    ("chart.js", "dist/chart.umd.js", "chart.js/chart.umd.js"),
    ("chart.js", "LICENSE.md", "chart.js/LICENSE.txt"),
)
# ColorBrewer YlOrRd, 5 classes: sequential, and distinguishable with the common colour-vision
# deficiencies; one colour per risk level, lowest first.
LEVEL_COLOURS = ("#ffffb2", "#fecc5c", "#fd8d3c", "#f03b20", "#bd0026")



# --- Markdown ----------------------------------------------------------------------


@dataclass(frozen=True)
class Heading:
    level: int
    id: str
    text: str


@dataclass(frozen=True)
class MarkdownPage:
    slug: str
    title: str
    html: Markup
    headings: tuple[Heading, ...]
    body: Markup  # without the title heading, for pages whose template prints the title itself


_SLUG_STRIP = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """Heading ids: lower case, runs of anything else become one '-'; stable across builds."""
    return _SLUG_STRIP.sub("-", text.lower()).strip("-") or "section"


def _md() -> MarkdownIt:
    # Raw HTML in Markdown is escaped: the pages carry no script or markup nobody reviewed.
    return MarkdownIt("commonmark", {"html": False, "typographer": False}).enable(["table", "strikethrough"])


_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _rewrite_link(href: str, known: set[str]) -> str | None:
    """Where a Markdown link should point on the site, or None when it leads nowhere on it.

    `model.md#x` and `./model.md` become `/docs/model.html#x`; absolute URLs, fragments
    and `/`-paths are kept; other relative paths (repository files such as
    `../reports/x.md`) are not part of the site, so they are shown as text rather
    than as links that would 404.
    """
    if _SCHEME.match(href) or href.startswith(("/", "#")):
        return href
    path, _, frag = href.partition("#")
    name = path.removeprefix("./").removeprefix("docs/")
    if "/" not in name and name.endswith(".md") and name[:-3] in known:
        return f"{BASE}{name[:-3]}.html" + (f"#{frag}" if frag else "")
    if "/" not in name and name.endswith(".html") and name[:-5] in known:
        return f"{BASE}{name}" + (f"#{frag}" if frag else "")
    return None


def markdown_page(slug: str, text: str, known: set[str]) -> MarkdownPage:
    """Render one Markdown file; the first level-1 heading is the page title."""
    md = _md()
    tokens = md.parse(text)
    headings: list[Heading] = []
    used: dict[str, int] = {}
    title = ""
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            inline = tokens[i + 1]
            plain = "".join(c.content for c in (inline.children or []) if c.type in ("text", "code_inline"))
            base = slugify(plain)
            n = used.get(base, 0)
            used[base] = n + 1
            hid = base if n == 0 else f"{base}-{n + 1}"
            tok.attrSet("id", hid)
            level = int(tok.tag[1])
            headings.append(Heading(level, hid, plain))
            if level == 1 and not title:
                title = plain
        if tok.type == "inline":
            _rewrite_inline(tok.children or [], known)
    html = md.renderer.render(tokens, md.options, {})
    body = html
    if tokens and tokens[0].type == "heading_open" and tokens[0].tag == "h1":
        close = next(i for i, t in enumerate(tokens) if t.type == "heading_close")
        body = md.renderer.render(tokens[close + 1 :], md.options, {})
    return MarkdownPage(slug, title or nav_title(slug), Markup(html), tuple(headings), Markup(body))


def _kept_page(slug: str, text: str, known: set[str]) -> MarkdownPage:
    """`markdown_page`, kept between builds of a root by its text, the pages it may link to, this
    module and the parser's version (pipeline.cache): most pages read the same in a new month."""
    return cache.call(f"page-{slug}", cache.code_of("pipeline.site.pages"), _page_of, slug, text,
                      tuple(sorted(known)), markdown_it.__version__, local=True)


def _page_of(slug: str, text: str, known: tuple[str, ...], _parser: str) -> MarkdownPage:
    return markdown_page(slug, text, set(known))


def nav_title(slug: str) -> str:
    """Navigation uses the short file name ("Seasons"); the page itself shows its full title."""
    return slug.replace("-", " ").replace("_", " ").capitalize()


def _rewrite_inline(children: list[Token], known: set[str]) -> None:
    stack: list[Token] = []
    for child in children:
        if child.type == "link_open":
            href = str(child.attrGet("href") or "")
            target = _rewrite_link(href, known)
            if target is None:
                child.tag = "span"
                child.attrs = {"class": "repo-path", "title": f"repository file {href}"}
            else:
                child.attrSet("href", target)
            stack.append(child)
        elif child.type == "link_close" and stack:
            child.tag = stack.pop().tag


# --- the reference, generated -----------------------------------------------------


FORMAT_IN_WORDS = {
    "state": f"two capital letters, one of the state codes listed in [State codes]({BASE}state-codes.html) "
             "(e.g. `KN` for Kano, `FC` for the Federal Capital Territory)",
    "period": "a month written year-month with four and two digits, e.g. `2024-07`; an estimated month "
              "(forecast months are read from the forecast endpoints)",
    "lga": "an LGA code: NG and six digits (the OCHA p-code, `lga_code` in every LGA record and in the "
           "gazetteer), e.g. `NG020001`",
    "include": "`forecasts`, or leave it out",
}


def _format(route: Route) -> list[dict[str, Any]]:
    """Parameter formats in words; the exact patterns are in the OpenAPI document."""
    rows = []
    for p in route.params:
        schema = param_schema(p)
        if p.kind in FORMAT_IN_WORDS:
            fmt = FORMAT_IN_WORDS[p.kind]
        elif "enum" in schema and schema.get("type") == "integer":
            fmt = "a whole number: " + ", ".join(str(v) for v in schema["enum"])
        elif "enum" in schema:
            fmt = "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
        else:
            fmt = f"matching `{schema['pattern']}`"
        default = {"last_estimated": "latest estimated month", None: ""}.get(p.default, p.default)
        rows.append({"name": p.name, "required": p.required, "format": fmt, "default": default,
                     "description": p.description})
    return rows


def endpoint_id(path: str) -> str:
    return "endpoint-" + slugify(path)


def _example_query(route: Route) -> str:
    required = [p for p in route.params if p.required]
    examples = {"state": "KN", "lga": "NG020001"}
    return "&".join(f"{p.name}={examples[p.kind]}" for p in required if p.kind in examples)


def _file_layout(route: Route) -> str:
    per = {"state": "state", "period": "estimated month", "months": "value of months (1–4)",
           "format": "format (JSON, CSV)", "lga": "LGA", "include": "include (estimated months only, with forecasts)"}
    if route.beside_pointer:
        return "one file beside the release pointer (not in any release), rewritten at each publish and prune"
    if not route.params:
        return "one file in each release"
    return "one file per " + " × ".join(per[p.kind] for p in route.params) + " in each release"


EXAMPLE_ITEMS = 2  # list items kept in an example response


def cut(value: Any, items: int = EXAMPLE_ITEMS) -> tuple[Any, bool]:
    """A response shortened for reading: every list keeps its first `items` entries.

    Returns the shortened value and whether anything was cut, so the page can say so.
    """
    if isinstance(value, list):
        kept = [cut(v, items) for v in value[:items]]
        return [v for v, _ in kept], len(value) > items or any(c for _, c in kept)
    if isinstance(value, dict):
        pairs = {k: cut(v, items) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    return value, False


def examples_from(produced: Iterable[Produced]) -> dict[str, tuple[str, str, bool]]:
    """Per route path: (query, response text, was cut) taken from the documents this release ships.

    The example is the Kano document where a state is asked (the first state otherwise)
    and the latest estimated month where a period is, so the page shows what a reader's
    first request returns.
    """
    docs = _documents(produced)
    out: dict[str, tuple[str, str, bool]] = {}
    for route in ROUTES:
        documents = docs.get(route.path)
        if not documents:
            continue
        keys = sorted(documents)
        # documents are keyed by the route's parameters other than `format` (JSON is the example)
        params = [p for p in route.params if p.kind != "format"]

        def score(k: tuple[str, ...], params: list[Param] = params) -> tuple[int, ...]:
            values = dict(zip([p.name for p in params], k, strict=False))
            return (values.get("state") != "KN", not values.get("lga", "NG020").startswith("NG020"),
                    -int(values.get("months", "0") == "1"))

        key = sorted(keys, key=score)[0]
        if params and params[-1].kind == "period":
            key = max(k for k in keys if k[:-1] == key[:-1])  # the latest month
        # a value the file key spells but the query leaves out (`include` absent = estimated months only)
        query = "&".join(f"{p.name}={v}" for p, v in zip(params, key, strict=False)
                         if not (p.kind == "include" and v == INCLUDE_NONE))
        doc = documents[key]
        shown, was_cut = cut(orjson.loads(doc.json) if isinstance(doc, Rendered) else doc)  # already bytes
        out[route.path] = (query, orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode(), was_cut)
    return out


def endpoints(examples: Mapping[str, tuple[str, str, bool]] | None = None,
              adopted: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    # codes that depend on the route (its parameters, dataset, scope) are listed first;
    # the ones every route shares (key, limits, query shape, release) are listed once more briefly
    specific = {c for r in ROUTES for c in r.errors} | {"SCOPE_REQUIRED"}
    out = []
    for r in ROUTES:
        q = _example_query(r)
        example = (examples or {}).get(r.path)
        if example is not None and example[0]:
            q = example[0]
        out.append({
            "path": r.path, "id": endpoint_id(r.path),
            "summary": " ".join(x for x in (r.summary, terms.route_description(r.path, adopted)) if x),
            "scope": r.scope, "params": _format(r), "file_key": r.file_key, "content_type": r.content_type,
            "layout": _file_layout(r), "dataset": r.dataset, "schema": RESPONSE_SCHEMA[r.path],
            "errors": [p for p in codes_for_route(r) if p.code in specific],
            "common_errors": [p for p in codes_for_route(r) if p.code not in specific],
            "example": r.path + (f"?{q}" if q else ""),
            "response": example[1] if example else None,
            "response_cut": example[2] if example else False,
            "unavailable": r.unavailable,
            "csv_path": r.path + CSV_SUFFIX if r.param("format") is not None else None,
        })
    from pipeline.site.openapi import (
        _codes,  # the download route's codes, as the OpenAPI document lists them
    )

    codes = _codes(None, DOWNLOAD_FILE.errors)
    out.append({
        "path": DOWNLOAD_FILE.path, "id": endpoint_id(DOWNLOAD_FILE.path), "summary": DOWNLOAD_FILE.summary,
        "scope": None, "file_key": DOWNLOAD_FILE.key_prefix + "{name}", "content_type": "the file's own type",
        "layout": "the bundle files of each release, addressed by path segments (no query parameters)",
        "dataset": "downloads", "schema": None,
        "params": [
            {"name": "release_id", "required": True, "format": "in the path: a release id such as the "
             "`release_id` of /v1/downloads or one listed by /v1/releases", "default": "",
             "description": "The current release or an earlier one still kept."},
            {"name": "name", "required": True, "format": "in the path: a file name listed by /v1/downloads",
             "default": "", "description": f"A bundle file, e.g. `{BUNDLE_ZIP}` or `risk_lga_month.csv`."},
        ],
        "errors": [p for p in codes if p.code in DOWNLOAD_FILE.errors],
        "common_errors": [p for p in codes if p.code not in DOWNLOAD_FILE.errors],
        "example": DOWNLOAD_FILE.path_for("$RELEASE_ID", BUNDLE_ZIP),
        "response": None, "response_cut": False, "unavailable": None, "csv_path": None,
    })
    return out


def _type_of(schema: Mapping[str, Any]) -> tuple[str, str | None]:
    """A readable type and, for references, the schema it links to."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return name, name
    if schema.get("type") == "array":
        items = schema.get("items", {})
        inner, link = _type_of(items)
        n = f"[{schema['minItems']}]" if schema.get("minItems") == schema.get("maxItems") and "minItems" in schema \
            else "[]"
        return inner + n, link
    t = schema.get("type", "object")
    text = " or ".join(t) if isinstance(t, list) else t
    if "enum" in schema:
        text += ": " + ", ".join(f"{v}" for v in schema["enum"])
    elif "const" in schema:
        text += f": {schema['const']}"
    return text, None


def schema_tables(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, schema in doc["components"]["schemas"].items():
        required = set(schema.get("required", ()))
        fields = []
        for field, sub in schema.get("properties", {}).items():
            text, link = _type_of(sub)
            fields.append({"name": field, "type": text, "link": link, "required": field in required,
                           "description": sub.get("description", "")})
        out.append({"name": name, "id": f"schema-{name}", "description": schema.get("description", ""),
                    "fields": fields})
    return out


def catalogue() -> list[dict[str, Any]]:
    rows = []
    for p in CATALOGUE:
        example = {"type": TYPE_BASE + p.code, "title": p.title, "status": p.status, "code": p.code,
                   "detail": p.when, "instance": "/v1/…"}
        routes = routes_for_code(p.code)
        missing = [r.path for r in ROUTES if r.path not in routes]
        if p.code in PATH_LEVEL_CODES:
            where = "any request"
        elif not missing:
            where = "every endpoint"
        elif len(missing) <= 2:
            where = "every endpoint except " + ", ".join(f"`{m}`" for m in missing)
        else:
            where = ", ".join(f"`{r}`" for r in routes)
        rows.append({
            "code": p.code, "status": p.status, "title": p.title, "when": p.when, "where": where,
            "example": orjson.dumps(example, option=orjson.OPT_INDENT_2).decode(),
        })
    return rows


# --- the site ---------------------------------------------------------------------


def _environment(templates: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,  # a typo in a template fails the build, not the reader
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
    env.globals["BASE"] = BASE
    inline = _md()
    env.filters["md_inline"] = lambda text: Markup(inline.renderInline(str(text)))
    return env


def _ordered(slugs: list[str]) -> list[str]:
    known = [s for s in DOC_ORDER if s in slugs]
    return known + sorted(s for s in slugs if s not in DOC_ORDER)


@dataclass(frozen=True)
class StateRow:
    """One row of the state-codes table, from the geography of the release."""

    code: str
    name: str
    admin1_pcode: str
    zone: str
    lgas: int


def level_bands() -> list[dict[str, Any]]:
    """The risk levels with their score ranges and colours, from the model's own thresholds."""
    from pipeline.model.risk import LEVEL_THRESHOLDS, TOP_LEVEL

    bands = []
    lower = 0.0
    for (upper, level), colour in zip(LEVEL_THRESHOLDS, LEVEL_COLOURS, strict=False):
        bands.append({"level": level, "label": level.replace("_", " "), "colour": colour, "lower": lower,
                      "upper": upper, "range": f"{lower:.2f} to under {upper:.2f}"})
        lower = upper
    bands.append({"level": TOP_LEVEL, "label": TOP_LEVEL.replace("_", " "), "colour": LEVEL_COLOURS[-1],
                  "lower": lower, "upper": 1.0, "range": f"{lower:.2f} to 1"})
    return bands


def render_site(
    markdown: Mapping[str, str],
    templates: Path,
    stylesheet: bytes,
    updated_at: str,
    *,
    assets: Mapping[str, tuple[str, bytes]] | None = None,
    examples: Mapping[str, tuple[str, str, bool]] | None = None,
    states: Sequence[StateRow] = (),
    dashboard_url: str = DEFAULT_DASHBOARD_URL,
    facts: Mapping[str, Any] | None = None,
    latest: Latest | None = None,
    season_after_survey: str | None = None,
) -> dict[str, tuple[str, bytes]]:
    """Every file of the site, keyed by release key (`docs/…`), from Markdown texts keyed by slug.

    `assets` are further files served as they are (the map's script, the vendored
    libraries), keyed relative to `docs/`; `examples` are example responses per route
    path; `states` fill the state-codes table and the `state` enum of the OpenAPI document; `latest`, the
    latest estimated month, is printed by the map page (every state) and one page per state (its LGAs).
    """
    markdown = {slug: text for slug, text in markdown.items() if slug not in OPERATOR_PAGES}
    slugs = [s for s in markdown if s not in GENERATED]
    doc_slugs = _ordered(slugs)
    known = set(slugs) | set(GENERATED)
    pages = {slug: _kept_page(slug, text, known) for slug, text in markdown.items()}
    env = _environment(templates)
    # the month terms in this release's score (its /v1/periods `score_terms`): the words of what a month is
    # made of come from the model's declared terms (pipeline.model.terms)
    adopted = terms.adopted_from(str((facts or {}).get("model.score_terms") or "").split(","))
    doc = openapi_document(states=tuple(r.code for r in states), adopted=adopted)

    def item(slug: str, title: str, full: str | None = None) -> dict[str, str]:
        return {"href": f"{BASE}{slug}.html", "title": title, "slug": slug, "full": full or title}

    def md_item(slug: str) -> dict[str, str]:
        return item(slug, nav_title(slug), pages[slug].title)

    head = [md_item(s) for s in doc_slugs if s == "quickstart"]
    nav = [*head, item("map", "Risk map", "Risk map: LGA risk by month, score over time, seasonality and survey charts"),
           item("api", "API reference", "API reference: authentication, endpoints, example responses, errors"),
           item("errors", "Errors", "Error catalogue"), item("state-codes", "State codes", "State codes")]
    nav += [md_item(s) for s in doc_slugs if s != "quickstart"]
    nav += [item("attribution", "Data sources and licences")]
    # how old the data are (figures.FRESHNESS); absent facts read as not in this release
    shown_facts: dict[str, Any] = {name: (facts or {}).get(name, NOT_IN_RELEASE) for name in FRESHNESS}
    common = {"site_name": SITE_NAME, "primary_nav": PRIMARY_NAV, "updated_at": updated_at, "scopes": SCOPES, "problem_json": PROBLEM_JSON, "example_items": EXAMPLE_ITEMS,
              "analyst_nav": nav, "dashboard_url": dashboard_url,
              "facts": shown_facts}
    shared = {"endpoints": endpoints(examples, adopted), "catalogue": catalogue(), "sources": SOURCES,
              "licence_table": licence_table()}

    def intro(slug: str) -> Markup | None:
        return pages[slug].body if slug in pages else None

    files: dict[str, tuple[str, bytes]] = {}

    def put(name: str, template: str, **extra: Any) -> None:
        html = env.get_template(template).render(**common, **shared, current=name, nav=nav, **extra)
        files[f"{PUBLIC_PREFIX}{name}.html"] = (HTML, html.encode())

    put("index", "index.html", title=SITE_NAME, intro=intro("index"))
    put("api", "api.html", title=pages["api"].title if "api" in pages else "API reference", intro=intro("api"),
        toc=pages["api"].headings if "api" in pages else (), schemas=schema_tables(doc))
    put("errors", "errors.html", title="Errors", intro=intro("errors"))
    put("attribution", "attribution.html", title="Data sources and licences", intro=intro("attribution"))
    levels = level_bands()
    last_forecast = str(shown_facts["data.last_forecast"])
    month_words = ""
    if latest is not None and latest.basis in terms.BASES:
        month_words = f"{latest.period} is {terms.basis_words(latest.basis, adopted)}."
    month_words = month_words[:1].upper() + month_words[1:]
    page_facts = {"latest": latest, "month_words": month_words, "season_after_survey": season_after_survey,
                  "passed_at_release": bool(re.fullmatch(r"\d{4}-\d{2}", last_forecast)) and updated_at[:7] > last_forecast}
    put("map", "map.html", title="Risk map", levels=levels, **page_facts,
        map_config=Markup(orjson.dumps({"levels": levels, "base": BASE, "last_estimated": shown_facts["data.last_estimated"],
                                        "last_forecast": shown_facts["data.last_forecast"],
                                        "month_labels": terms.month_labels(adopted)})
                          .decode().replace("<", "\\u003c")))
    if latest is not None:  # one page per state: its LGAs in the latest month, linked from the map page's table
        for row in latest.states:
            if row["state_code"] in latest.lgas:
                put(f"map/{row['state_code']}", "map_state.html", title=f"Risk in {row['state']}'s LGAs, {latest.period}",
                    state=row, rows=latest.lgas[row["state_code"]], **page_facts)
    put("state-codes", "state_codes.html", title="State codes", intro=intro("state-codes"), states=states)
    for slug in doc_slugs:
        put(slug, "page.html", title=pages[slug].title, page=pages[slug])
    files[f"{PUBLIC_PREFIX}openapi.json"] = ("application/json", orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    files[f"{PUBLIC_PREFIX}style.css"] = (CSS, stylesheet + swatch_rules(levels))
    for name, (ctype, data) in (assets or {}).items():
        files[f"{PUBLIC_PREFIX}{name}"] = (ctype, data)
    for key, (ctype, data) in files.items():
        if ctype == HTML:
            check_prose(key, data.decode())
    return files


_NOT_PROSE = re.compile(r"<(script|pre|code|style)\b.*?</\1>", re.S | re.I)
_TAGS = re.compile(r"<[^>]+>")
_UNFILLED = re.compile(r"\{\{|\}\}|\{%|%\}")
# `nan` anywhere; `None` unless English begins with it ("None is ShareAlike", "None beyond …")
_PYTHON_BLANK = re.compile(r"\b(?:nan|NaN)\b|\bNone\b(?! [a-z])")


def prose(html: str) -> str:
    """The text a reader reads: tags, scripts, styles and code left out."""
    return _TAGS.sub(" ", _NOT_PROSE.sub(" ", html))


def check_prose(key: str, html: str) -> None:
    """A page whose prose shows template syntax or a Python blank (`None`, `nan`) is not published."""
    text = prose(html)
    for pattern, what in ((_UNFILLED, "an unfilled template placeholder"), (_PYTHON_BLANK, "a Python blank")):
        m = pattern.search(text)
        if m:
            raise SiteError(f"{key} shows {what} {m.group(0)!r} in its text: "
                            f"…{' '.join(text[max(0, m.start() - 60):m.end() + 60].split())}…")


def swatch_rules(levels: list[dict[str, Any]]) -> bytes:
    """The legend's colours as classes of the stylesheet: the pages' CSP allows no inline style."""
    rules = [f".swatch-{lv['level']} {{ background: {lv['colour']}; }}" for lv in levels]
    rules.append(".swatch-none { background: #d9dee7; }")
    return ("\n/* risk levels (generated from the model's thresholds, pipeline/site/pages.py) */\n"
            + "\n".join(rules) + "\n").encode()


def _content_type(name: str) -> str:
    return {".js": JS, ".css": CSS, ".png": PNG}.get(Path(name).suffix, "text/plain; charset=utf-8")


def site_assets(site_dir: Path = SITE_DIR) -> dict[str, tuple[str, bytes]]:
    """The map's script and the pinned front-end libraries, keyed under `docs/`.

    The libraries come from `node_modules` as `npm ci` installed them from the lock
    file; the release carries its own copy, so the site works offline and links to no
    other host.
    """
    modules = site_dir / "node_modules"
    out: dict[str, tuple[str, bytes]] = {name: (JS, (site_dir / "static" / name).read_bytes())
                                         for name in ("map.js", "freshness.js", "project.js", "smc.js")}
    for package, inner, key in VENDOR_FILES:
        path = modules / package / inner
        if not path.is_file():
            raise SiteError(f"{path} is missing: the site's front-end libraries are not installed. "
                            f"Run `make site-libs` (npm ci in {site_dir}).")
        out[f"vendor/{key}"] = (_content_type(key), path.read_bytes())
    return out


def state_rows(geography: Any) -> list[StateRow]:
    """The state-codes table from the build's geography; empty when the build has none."""
    if geography is None:
        return []
    states = geography.states.sort("state_code")
    return [StateRow(r["state_code"], r["state"], r["ocha_pcode"], r["zone"], int(r["lgas"]))
            for r in states.iter_rows(named=True)]


def _documents(produced: Iterable[Produced]) -> dict[str, dict[tuple[str, ...], Any]]:
    out: dict[str, dict[tuple[str, ...], Any]] = {}
    for p in produced:
        for path, by_key in p.documents.items():
            out.setdefault(path, {}).update(by_key)
    return out


def read_markdown(docs_dir: Path) -> dict[str, str]:
    """docs/*.md keyed by slug (file stem). Only flat files: the site has no sub-folders."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(docs_dir.glob("*.md"))}


def produce(ctx: BuildContext, docs_dir: Path = REPO_ROOT / "docs", site_dir: Path = SITE_DIR) -> Produced:
    figures = {**release_figures(ctx.produced), **settings_figures(), "site.dashboard_url": ctx.dashboard_url}
    markdown = {slug: substitute(text, figures, slug) for slug, text in read_markdown(docs_dir).items()
                if slug not in OPERATOR_PAGES}
    files = render_site(
        markdown,
        site_dir / "templates",
        (site_dir / "static" / "style.css").read_bytes(),
        ctx.updated_at,
        assets=site_assets(site_dir),
        examples=examples_from(ctx.produced),
        states=state_rows(ctx.geography),
        dashboard_url=ctx.dashboard_url,
        facts={name: figures[name] for name in FRESHNESS},
        latest=latest_month(_documents(ctx.produced), level_bands()),
        season_after_survey=((_documents(ctx.produced).get("/v1/periods") or {}).get(()) or {})
        .get("season_after_survey", {}).get("description"),
    )
    return Produced(dataset="site", documents={}, files=files)
