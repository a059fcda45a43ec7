"""Security headers: one definition for the local server (the gate) and the CDN (the viewer-response function).

The documentation pages are where users paste their key, so they get a strict
Content-Security-Policy: scripts, styles, images and API calls from the page's own origin
only (the map's Leaflet and Chart.js ship inside the release, under `docs/vendor/`; the map
draws no tiles from elsewhere), no inline script or style, and no framing by any site
(`frame-ancestors 'none'`, with X-Frame-Options for older browsers). API answers are data,
never documents: their policy allows nothing and sandboxes whatever renders them.
Both carry `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`.

Imports nothing: the viewer-response function's cold start pays only for these constants.
"""

DOCS_PREFIX = "docs/"  # the docs site's file keys (edge.routes.PUBLIC_PREFIX; a test keeps them equal)

DOCS_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; "
            "frame-ancestors 'none'")
API_CSP = "default-src 'none'; frame-ancestors 'none'; sandbox"

_COMMON = (("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"))
DOCS_HEADERS: tuple[tuple[str, str], ...] = (("Content-Security-Policy", DOCS_CSP), ("X-Frame-Options", "DENY"),
                                             *_COMMON)
API_HEADERS: tuple[tuple[str, str], ...] = (("Content-Security-Policy", API_CSP), *_COMMON)


def headers_for_key(key: str) -> tuple[tuple[str, str], ...]:
    """The headers for a release file key (`docs/…` is the documentation site, anything else the API)."""
    return DOCS_HEADERS if key.startswith(DOCS_PREFIX) else API_HEADERS
