"""The viewer-response function: the gate's per-request headers onto CloudFront's answer.

A viewer-request function cannot add headers to the response CloudFront later serves
from its cache, so `edge/cloudfront.py` carries them on the rewritten request as
`x-mr-*` headers and this function copies them onto the response. It also sets the
viewer's Cache-Control: the gate's choice for answers it authorised (release objects
sit in S3 with a year-long immutable Cache-Control meant for CloudFront alone) and
`no-store` for an error from the origin, and the security headers of edge/security.py
(the docs pages' strict CSP, or the API's). Kept apart from the viewer-request module so
this function's cold start imports nothing but the standard library's basics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .security import headers_for_key

# gate header (lower case) → the request header that carries it → the name viewers see
FORWARDED = {"ratelimit": "x-mr-ratelimit", "ratelimit-policy": "x-mr-ratelimit-policy",
             "x-release-id": "x-mr-release-id", "cache-control": "x-mr-cache-control"}
PUBLIC_NAMES = {"ratelimit": "RateLimit", "ratelimit-policy": "RateLimit-Policy", "x-release-id": "X-Release-Id",
                "cache-control": "Cache-Control"}
ORIGIN_ERROR_CACHE = "no-store"
FILE_KEY_HEADER = "x-mr-file-key"  # the file the gate answered with, when the URI names its stored object
DEFAULT_CACHE = "private, max-age=300, must-revalidate"  # the gate's choice for API answers, if none was carried


def viewer_response(event: Mapping[str, Any]) -> dict[str, Any]:
    """Copy the carried headers onto the response; origin errors are never cacheable by viewers."""
    cf = event["Records"][0]["cf"]
    request_headers = cf.get("request", {}).get("headers", {})
    response: dict[str, Any] = cf["response"]
    headers = response.setdefault("headers", {})
    if "x-mr-release-id" not in request_headers:
        return response  # not a request the gate rewrote: leave CloudFront's answer alone
    carried = request_headers.get(FILE_KEY_HEADER)
    key = carried[0]["value"] if carried else _file_key(cf.get("request", {}).get("uri", ""))
    for name, value in headers_for_key(key):
        headers[name.lower()] = [{"key": name, "value": value}]
    for public, fwd in FORWARDED.items():
        values = request_headers.get(fwd)
        if values:
            headers[public] = [{"key": PUBLIC_NAMES[public], "value": values[0]["value"]}]
    if "x-mr-cache-control" not in request_headers:
        headers["cache-control"] = [{"key": "Cache-Control", "value": DEFAULT_CACHE}]
    if str(response.get("status")) not in ("200", "206", "304"):
        headers["cache-control"] = [{"key": "Cache-Control", "value": ORIGIN_ERROR_CACHE}]
    return response


def _file_key(uri: str) -> str:
    """`/<prefix>/releases/<id>/<key>` (the gate's rewrite) → `<key>`."""
    _, sep, rest = uri.partition("/releases/")
    return rest.partition("/")[2] if sep else ""


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Lambda@Edge viewer-response entry point."""
    return viewer_response(event)
