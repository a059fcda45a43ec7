"""Which scopes a key needs to download each bundle file: the one rule, read by the bundle producer
(pipeline.datasets.downloads), the renderer (through it), the OpenAPI document and the site
(pipeline.site), without any of them importing the bundle producer. Route table only."""

from __future__ import annotations

from collections.abc import Iterable

from edge.routes import BUNDLE_ZIP, BY_PATH, SCOPES

ZIP_NAME = BUNDLE_ZIP

# Which endpoints each table and outline file is made from (the documents `tables` and `outline_files`
# read), and so which scopes a key needs to download it: the union of those routes' scopes in the
# route table. The one rule for a bundle file's scopes; the renderer records them in the manifest
# (and the publisher in the pointer), where the edge reads them (docs/downloads.md#scopes).
# risk tables mix estimated and forecast months, so they need both scopes.
TABLE_ROUTES: dict[str, tuple[str, ...]] = {
    "risk_lga_month": ("/v1/risk/lgas", "/v1/forecasts/lgas"),
    "risk_state_month": ("/v1/risk/states", "/v1/forecasts/states"),
    "context_lga": ("/v1/context/lgas",),
    "context_state": ("/v1/context/states",),
    "transmission_lga_month": ("/v1/transmission/lgas",),
    "transmission_state_month": ("/v1/transmission/states",),
    "survey_trend": ("/v1/transmission/states",),
    "season_ratio_lga": ("/v1/transmission/ratios/lgas",),
    "season_ratio_state": ("/v1/transmission/ratios/states",),
    "smc_lga": ("/v1/transmission/smc/lgas",),
    "smc_state": ("/v1/transmission/smc/states",),
    # codes and names, population, area and urban class: the fields /v1/context/lgas serves
    "gazetteer": ("/v1/context/lgas",),
    "lga_outlines": ("/v1/boundaries/lgas",),
    "state_outlines": ("/v1/boundaries/lgas",),  # dissolved from the LGA outlines
}
# Files that describe the bundle (names, columns, checksums, licences) and hold no row of any table:
# any valid key may read them, as it may read the /v1/downloads index that lists them.
DESCRIPTION_FILES = ("datapackage.json", "README.md", "SHA256SUMS")


def scopes_of_routes(paths: Iterable[str]) -> tuple[str, ...]:
    """The scopes the route table gives these endpoints, in the table's scope order."""
    wanted = {BY_PATH[p].scope for p in paths}
    return tuple(s for s in SCOPES if s in wanted)


def scopes_for(name: str, contents: Iterable[tuple[str, ...]] = ()) -> tuple[str, ...]:
    """The scopes a bundle file needs: its table's (by stem), none for a description file, the union
    of `contents` for the zip; a file this rule does not know needs every scope (fail closed)."""
    if name in DESCRIPTION_FILES:
        return ()
    if name == ZIP_NAME:
        held = {s for c in contents for s in c}
        return tuple(s for s in SCOPES if s in held) if contents else SCOPES
    stem = name.split(".", 1)[0]
    return scopes_of_routes(TABLE_ROUTES[stem]) if stem in TABLE_ROUTES else SCOPES


def download_scope_map() -> dict[str, list[str]]:
    """File stem (or name) -> the scopes it needs, for the OpenAPI document and the docs (the rule above)."""
    out = {stem: list(scopes_of_routes(paths)) for stem, paths in TABLE_ROUTES.items()}
    out.update({name: [] for name in DESCRIPTION_FILES})
    out[ZIP_NAME] = list(SCOPES)
    return out


def download_scope_text() -> str:
    """The rule in one paragraph: which files need which scopes."""
    by_scopes: dict[tuple[str, ...], list[str]] = {}
    for stem, scopes in download_scope_map().items():
        by_scopes.setdefault(tuple(scopes), []).append(f"`{stem}`")
    def both(items: list[str]) -> str:
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

    parts = [f"{', '.join(names)}: {both([f'`{s}`' for s in scopes]) if scopes else 'any valid key'}"
             for scopes, names in by_scopes.items()]
    return "What each file needs (by file name, before the extension): " + "; ".join(parts) + "."
