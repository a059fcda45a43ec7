"""The documentation site, rendered into every release under `docs/`.

The site ships inside the release it describes, so a reader can never see pages
for one data load next to the data of another. It depends only on the route
table, the problem catalogue and the Markdown files in the repository's `docs/`
folder; it needs no input data, so it can be built (and tested) without it.

Pages: `index.html`, `api.html` (docs/api.md followed by the reference generated
from the route table and the OpenAPI schemas), `errors.html` (the catalogue, one
anchor per code, which is where problem `type` URIs point), `attribution.html`,
`openapi.json`, and one page per other `docs/*.md` — a new Markdown file appears
on the next build without any change here. Links are absolute (`/docs/…`) because
the gate serves the site there and problem `type` URIs already assume it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import orjson
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from edge.problems import CATALOGUE, PROBLEM_JSON, TYPE_BASE
from edge.routes import PUBLIC_PREFIX, ROUTES, SCOPES, Route
from pipeline.datasets.base import BuildContext, Produced
from pipeline.settings import REPO_ROOT
from pipeline.site.figures import release_figures, substitute
from pipeline.site.openapi import (
    PATH_LEVEL_CODES,
    RESPONSE_SCHEMA,
    codes_for_route,
    openapi_document,
    param_schema,
    routes_for_code,
)

SITE_DIR = Path(__file__).resolve().parent  # templates/ and static/
HTML = "text/html; charset=utf-8"
CSS = "text/css; charset=utf-8"
BASE = "/" + PUBLIC_PREFIX  # "/docs/"

# Pages the site generates itself. A docs/<slug>.md with one of these names is not
# a page of its own: its text becomes the introduction of the generated page.
GENERATED = ("index", "api", "errors", "attribution")
# Reading order for the pages other helpers write; anything else follows alphabetically.
DOC_ORDER = ("geography", "context", "model", "seasons", "downloads", "limits", "deploy", "operations")


@dataclass(frozen=True)
class Source:
    """One credited data source; the facts come from the SOURCES.md files next to the data."""

    name: str
    provider: str
    used_for: str
    licence: str
    via: str
    note: str = ""


SOURCES: tuple[Source, ...] = (
    Source("LGA and state boundaries", "eHealth Africa / GRID3 Nigeria (eHA GeoServer layers, 2018–2019)",
           "LGA outlines, areas, representative points (/v1/boundaries/lgas, area_km2)",
           "CC BY 4.0 upstream (usual GRID3/eHA licence; not verified for this copy)",
           "repository Godskid89/nigeriadata, data/lga_admin_boundaries.rda and "
           "state_admin_boundaries.rda (commit 12c4a101)",
           "The copying repository states no licence. Credit eHealth Africa / GRID3."),
    Source("Common Operational Dataset, administrative boundaries (COD-AB) gazetteer",
           "OCHA, from OSGOF (Office of the Surveyor General of the Federation), edition 2019-04-17",
           "LGA codes (OCHA p-codes) and LGA names", "CC BY-IGO (as published on HDX, cod-ab-nga)",
           "repository haasinikellampalli-wq/DATASCI-112-Final---HC (commit 35cc5f91)"),
    Source("Bottom-up gridded population estimates for Nigeria, version 2.0",
           "WorldPop and the National Population Commission of Nigeria (aggregated to LGA by Geopode)",
           "population per LGA and state; population density behind the derived is_urban flag",
           "CC BY 4.0 (WorldPop)", "repository Oluwatobi-abu/nigeria-lga-population-density (commit a18938c7)",
           "Modelled estimates, not census counts; the reference year is not stated in the file."),
    Source("State names, ISO codes and geopolitical zones", "ropensci/naijR package data",
           "state names and zones", "GPL-3 package; the values are public facts",
           "repository ropensci/naijR, data/states_nigeria.rda (commit 7fed3840)"),
    Source("CHIRPS v2.0 rainfall, state means (dekadal)",
           "UCSB Climate Hazards Center, aggregated by WFP (HDX: Rainfall Indicators at Subnational Level)",
           "recorded monthly rainfall per state and its climatology",
           "CHIRPS: public domain; WFP/HDX indicators: CC BY-IGO. Credit WFP / CHIRPS (UCSB Climate Hazards "
           "Center)", "repository DavidWinrich101/virawatch, backend/data/chirps_weekly_nigeria.csv",
           "Months from about 2026-05 may be CHIRPS-preliminary."),
    Source("LGA rainfall climatology 2001–2016 (EMOD climate inputs from GSOD stations)",
           "Institute for Disease Modeling via the Nigeria HBHI modelling group (numalariamodeling)",
           "within-state shape of LGA rainfall (rescaled to state CHIRPS)", "Apache-2.0",
           "repository numalariamodeling/hbhi-nigeria-publication-2021 (commit dcc2f01e)"),
    Source("HBHI LGA model inputs: ITN use, case management, archetypes, routine-data seasonality",
           "numalariamodeling / Ozodiegwu et al., Malaria Journal 2023 (derived from DHS/MIS microdata and "
           "NMEP routine data)", "coverage context per LGA; independent seasonality check",
           "Apache-2.0", "repository numalariamodeling/hbhi-nigeria-publication-2021",
           "Model inputs assigned to all LGAs; LGAs without survey clusters inherit state or archetype values."),
    Source("DHS/MIS survey indicators (2010, 2015 MIS; 2018 DHS; 2021 MIS) and MAP-style incidence",
           "The DHS Program / NMIS tabulations and Malaria Atlas Project-style admin-1 incidence, as used in "
           "the WHO Nigeria Malaria Report 2022 (sepmein)",
           "survey positivity trends, net use and access; incidence for the external agreement check only",
           "Apache-2.0 (repository sepmein/nigeria_malaria_report_2022)",
           "repository sepmein/nigeria_malaria_report_2022 (commit 0982fb23)",
           "Incidence figures are modelled (MAP/WHO), not observations."),
    Source("2021 NMIS tabulations and ward walking time to primary health care",
           "Soe H Aung, MCDA Spatial DHS project (NMIS 2021 microdata; WorldPop v2.1; GRID3 facilities; MAP "
           "walking friction surface)", "2021 state survey figures; travel time to care", "MIT",
           "repository SoeHtutAung/MCDA-Spatial-DHS-Rshiny-Nigeria",
           "Travel time is walking time; the state mean uses band midpoints (an approximation)."),
    Source("Four 2018 state survey values", "AyeshaCamran/MalariaRiskXAI",
           "fills four 2018 state gaps (Lagos, Anambra, Imo)", "MIT (stated in the README)",
           "repository AyeshaCamran/MalariaRiskXAI, data/data_cleaned_merged.csv (commit 193cac51)",
           "Not verified against the NDHS report."),
)


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


def _format(route: Route) -> list[dict[str, Any]]:
    rows = []
    for p in route.params:
        schema = param_schema(p)
        if "enum" in schema:
            fmt = ", ".join(str(v) for v in schema["enum"])
        else:
            fmt = f"pattern {schema['pattern']}"
        default = {"last_estimated": "latest estimated month", None: ""}.get(p.default, p.default)
        rows.append({"name": p.name, "required": p.required, "format": fmt, "default": default,
                     "description": p.description})
    return rows


def endpoint_id(path: str) -> str:
    return "endpoint-" + slugify(path)


def _example_query(route: Route) -> str:
    required = [p for p in route.params if p.required]
    examples = {"state": "KN"}
    return "&".join(f"{p.name}={examples[p.kind]}" for p in required if p.kind in examples)


def _file_layout(route: Route) -> str:
    per = {"state": "state", "period": "estimated month", "months": "value of months (1–4)",
           "format": "format (JSON, CSV)"}
    if not route.params:
        return "one file"
    return "one file per " + " × ".join(per[p.kind] for p in route.params)


def endpoints() -> list[dict[str, Any]]:
    # codes that depend on the route (its parameters, dataset, scope) are listed first;
    # the ones every route shares (key, limits, query shape, release) are listed once more briefly
    specific = {c for r in ROUTES for c in r.errors} | {"SCOPE_REQUIRED"}
    out = []
    for r in ROUTES:
        q = _example_query(r)
        out.append({
            "path": r.path, "id": endpoint_id(r.path), "summary": r.summary,
            "scope": r.scope, "params": _format(r), "file_key": r.file_key, "content_type": r.content_type,
            "layout": _file_layout(r), "dataset": r.dataset, "schema": RESPONSE_SCHEMA[r.path],
            "errors": [p for p in codes_for_route(r) if p.code in specific],
            "common_errors": [p for p in codes_for_route(r) if p.code not in specific],
            "example": r.path + (f"?{q}" if q else ""),
            "unavailable": r.unavailable,
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


def render_site(
    markdown: Mapping[str, str],
    templates: Path,
    stylesheet: bytes,
    updated_at: str,
) -> dict[str, tuple[str, bytes]]:
    """Every file of the site, keyed by release key (`docs/…`), from Markdown texts keyed by slug."""
    doc_slugs = _ordered([s for s in markdown if s not in GENERATED])
    known = set(doc_slugs) | set(GENERATED)
    pages = {slug: markdown_page(slug, text, known) for slug, text in markdown.items()}
    env = _environment(templates)
    doc = openapi_document()
    nav = [{"href": f"{BASE}api.html", "title": "API reference", "slug": "api",
            "full": "API reference: authentication, endpoints, resources, errors"},
           {"href": f"{BASE}errors.html", "title": "Errors", "slug": "errors", "full": "Error catalogue"}]
    nav += [{"href": f"{BASE}{s}.html", "title": nav_title(s), "slug": s, "full": pages[s].title}
            for s in doc_slugs]
    nav += [{"href": f"{BASE}attribution.html", "title": "Data sources and licences", "slug": "attribution",
             "full": "Data sources and licences"}]
    common = {"nav": nav, "updated_at": updated_at, "scopes": SCOPES, "problem_json": PROBLEM_JSON}
    shared = {"endpoints": endpoints(), "catalogue": catalogue(), "sources": SOURCES}

    def intro(slug: str) -> Markup | None:
        return pages[slug].body if slug in pages else None

    files: dict[str, tuple[str, bytes]] = {}

    def put(name: str, template: str, **extra: Any) -> None:
        html = env.get_template(template).render(**common, **shared, current=name, **extra)
        files[f"{PUBLIC_PREFIX}{name}.html"] = (HTML, html.encode())

    put("index", "index.html", title="Malaria risk data service for Nigeria", intro=intro("index"))
    put("api", "api.html", title=pages["api"].title if "api" in pages else "API reference", intro=intro("api"),
        toc=pages["api"].headings if "api" in pages else (), schemas=schema_tables(doc))
    put("errors", "errors.html", title="Errors", intro=intro("errors"))
    put("attribution", "attribution.html", title="Data sources and licences", intro=intro("attribution"))
    for slug in doc_slugs:
        page = pages[slug]
        put(slug, "page.html", title=page.title, page=page)
    files[f"{PUBLIC_PREFIX}openapi.json"] = ("application/json", orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    files[f"{PUBLIC_PREFIX}style.css"] = (CSS, stylesheet)
    return files


def read_markdown(docs_dir: Path) -> dict[str, str]:
    """docs/*.md keyed by slug (file stem). Only flat files: the site has no sub-folders."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(docs_dir.glob("*.md"))}


def produce(ctx: BuildContext, docs_dir: Path = REPO_ROOT / "docs", site_dir: Path = SITE_DIR) -> Produced:
    figures = release_figures(ctx.produced)
    markdown = {slug: substitute(text, figures, slug) for slug, text in read_markdown(docs_dir).items()}
    files = render_site(
        markdown,
        site_dir / "templates",
        (site_dir / "static" / "style.css").read_bytes(),
        ctx.updated_at,
    )
    return Produced(dataset="site", documents={}, files=files)
