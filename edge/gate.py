"""The gate: one pure decision from a request to a response or a file.

Every server calls this and only this: the local ASGI server, the CloudFront
viewer-request adapter, the tests. It does no I/O of its own; the key store, the
limiter and the release index are passed in, and the clock is an argument, so
every rule can be tested without a network or a sleep.

Order of checks (documented in docs/api.md and pinned by tests):

1. OPTIONS → CORS preflight (no key needed, any path).
2. Method other than GET/HEAD → 405 METHOD_NOT_ALLOWED.
3. Path not in the route table (exact match on the raw path; nothing is
   decoded or normalised, so `%2e%2e` or `//` never match) → 404 NOT_FOUND.
   `<path>.csv` of a route with a `format` parameter is that route with `format=csv`
   (a `format` in its query → 400 REPEATED_PARAMETER).
   Paths under `/v1/downloads/` are bundle files: they pass on to the key check
   and are resolved at step 8 (see `DOWNLOAD_FILE` in routes.py).
4. Key → 401 (missing, invalid, revoked, expired, owner removed, org suspended).
5. Limits → 429 (per-minute, then monthly allowance for live keys).
6. Scope → 403 SCOPE_REQUIRED.
7. Query string shape → 400 INVALID_QUERY / UNKNOWN_PARAMETER / REPEATED_PARAMETER.
8. Parameter values, in the route's parameter order → the SPEC's codes; then a value
   that needs a scope of its own (`include=forecasts` → `forecasts`) → 403 SCOPE_REQUIRED. For a
   bundle file: the release id must be the current or a kept release (else 404
   UNKNOWN_RELEASE) and the name one of its bundle files (else 404 UNKNOWN_FILE); then the
   key must hold every scope that release records for the file (else 403 SCOPE_REQUIRED
   naming the missing ones in `missing_scopes`; docs/downloads.md#scopes).
9. Dataset availability → e.g. 503 TRANSMISSION_DATA_UNAVAILABLE.
10. File → 200 (or 304 when If-None-Match matches), gzip when accepted and no `Range` is asked
    (ranges are of the identity bytes; the server or the CDN answers 206/416 from the file).
"""

# Annotations are evaluated, not postponed: a NamedTuple compiles each string annotation when the
# class is created, ~30 µs a field of the CDN function's cold start (docs/deploy.md#measurements).

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from .files import FileEntry, PinnedReleases, ReleaseIndex, ReleaseList
from .keys import KeyRecord, KeyStore, hash_key, looks_like_key
from .problems import BY_CODE, PROBLEM_JSON, problem_body
from .routes import (
    AFTER_HELD,
    BY_PATH,
    DOWNLOAD_FILE,
    PUBLIC_PREFIX,
    RELEASE_ID_RE,
    ROUTES,
    SCOPES,
    ParamError,
    Route,
    csv_alias,
    load_due,
)
from .security import API_HEADERS, DOCS_HEADERS

ALLOWED_METHODS = "GET, HEAD, OPTIONS"
ALLOW_HEADERS = "Authorization, x-api-key, If-None-Match, Accept-Encoding, Range, If-Range"
EXPOSE_HEADERS = "ETag, RateLimit, RateLimit-Policy, Retry-After, X-Release-Id, Content-Range, Accept-Ranges"
SUCCESS_CACHE = "private, max-age=300, must-revalidate"
LIST_CACHE = "private, max-age=60, must-revalidate"  # the release list changes with a publish or prune
ERROR_CACHE = "no-store"

Headers = list[tuple[str, str]]

STATUS_FOR_KEY = {
    "revoked": ("API_KEY_REVOKED", "This API key was revoked."),
    "expired": ("API_KEY_EXPIRED", "This API key has expired."),
    "owner_removed": ("ACCOUNT_REMOVED", "The account that owned this API key was removed."),
    "org_suspended": ("ORGANISATION_SUSPENDED", "The organisation that owns this API key is suspended."),
}


# The gate's value types are NamedTuples and a plain class rather than dataclasses: creating a
# dataclass compiles each of its methods (~0.3–0.9 ms of CPU per class, and the dataclasses
# module itself ~8 ms to import), which a 128 MB Lambda instance stretches about fourteenfold
# on every cold start (docs/deploy.md#measurements).


class Request(NamedTuple):
    method: str
    path: str  # raw, still percent-encoded
    query: str  # raw query string without '?'
    headers: Mapping[str, str]  # lower-case names


class Response:
    """An answer: a generated body, or a file of the release (`file_key`). Mutable: the gate adds
    limit headers and the key id after deciding."""

    __slots__ = ("status", "headers", "body", "file_key", "key_id", "release_id", "extra")

    def __init__(self, status: int, headers: Headers, body: bytes | None = None, file_key: str | None = None,
                 key_id: str | None = None, release_id: str | None = None, extra: dict[str, Any] | None = None):
        self.status = status
        self.headers = headers
        self.body = body  # set for generated answers (errors, preflight)
        self.file_key = file_key  # set when the answer is a release file
        self.key_id = key_id  # who asked, for logs and limits
        self.release_id = release_id  # the release `file_key` lies in, when not the current one
        self.extra: dict[str, Any] = {} if extra is None else extra

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, n) for n in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is Response and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        return "Response(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"


class LimitDecision(NamedTuple):
    allowed: bool
    headers: Headers
    code: str | None = None  # RATE_LIMITED | MONTHLY_ALLOWANCE_EXHAUSTED
    detail: str = ""
    retry_after: int | None = None


class Limiter(Protocol):
    def hit(self, record: KeyRecord, now: datetime) -> LimitDecision: ...


def cors_headers() -> Headers:
    return [("Access-Control-Allow-Origin", "*"), ("Access-Control-Expose-Headers", EXPOSE_HEADERS)]


def error(code: str, detail: str, path: str, extra_headers: Headers | None = None, **members: object) -> Response:
    p = BY_CODE[code]
    headers = [("Content-Type", PROBLEM_JSON), ("Cache-Control", ERROR_CACHE), *cors_headers(), *API_HEADERS]
    if extra_headers:
        headers.extend(extra_headers)
    return Response(p.status, headers, problem_body(code, detail, instance=path, **members), extra={"problem": code})


def preflight() -> Response:
    return Response(
        204,
        [
            ("Access-Control-Allow-Origin", "*"),
            ("Access-Control-Allow-Methods", ALLOWED_METHODS),
            ("Access-Control-Allow-Headers", ALLOW_HEADERS),
            ("Access-Control-Max-Age", "86400"),
            ("Cache-Control", "public, max-age=86400"),
        ],
        b"",
    )


def _bearer(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The presented key, or an error detail when the headers are contradictory or malformed."""
    auth = headers.get("authorization")
    xkey = headers.get("x-api-key")
    bearer = None
    if auth is not None:
        scheme, _, token = auth.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None, "The Authorization header must be `Bearer <API_KEY>`."
        bearer = token.strip()
    if xkey is not None:
        xkey = xkey.strip()
    if bearer is not None and xkey is not None and bearer != xkey:
        return None, "Authorization and x-api-key carry different keys; send one."
    return bearer if bearer is not None else xkey, None


def authenticate(req: Request, keys: KeyStore, now: datetime) -> KeyRecord | Response:
    key, problem = _bearer(req.headers)
    if problem is not None:
        return error("API_KEY_INVALID", problem, req.path)
    if key is None:
        return error(
            "API_KEY_MISSING",
            "Send your key as `Authorization: Bearer <API_KEY>` (or `x-api-key: <API_KEY>`).",
            req.path,
            [("WWW-Authenticate", 'Bearer realm="malaria-risk"')],
        )
    if not looks_like_key(key):
        return error(
            "API_KEY_INVALID",
            "That is not an API key: keys start with svc_live_ or svc_test_ followed by 32 characters.",
            req.path,
            [("WWW-Authenticate", 'Bearer realm="malaria-risk", error="invalid_token"')],
        )
    record = keys.lookup(hash_key(key))
    if record is None:
        return error("API_KEY_INVALID", "No such API key.", req.path,
                     [("WWW-Authenticate", 'Bearer realm="malaria-risk", error="invalid_token"')])
    status = record.status(now)
    if status != "active":
        code, detail = STATUS_FOR_KEY[status]
        return error(code, detail, req.path,
                     [("WWW-Authenticate", 'Bearer realm="malaria-risk", error="invalid_token"')])
    return record


def parse_query(raw: str, route: Route, path: str) -> dict[str, str] | Response:
    """Strictly parse the query string: valid UTF-8, no control characters, known names, once each."""
    parsed = _parse_query(raw, route)
    if isinstance(parsed, tuple):
        code, detail, members = parsed
        return error(code, detail, path, None, **members)
    return parsed


def _parse_query(raw: str, route: Route) -> dict[str, str] | tuple[str, str, dict[str, str]]:
    """parse_query's rules; a refusal is (code, detail, problem members) so it can be remembered."""
    values: dict[str, str] = {}
    if not raw:
        return values
    for part in raw.split("&"):
        if part == "":
            continue
        name_raw, sep, value_raw = part.partition("=")
        try:
            name = _decode(name_raw)
            value = _decode(value_raw) if sep else ""
        except ValueError as e:
            return "INVALID_QUERY", str(e), {}
        if route.param(name) is None:
            known = ", ".join(p.name for p in route.params) or "none"
            shown = name if len(name) <= 30 else name[:30] + "…"
            return ("UNKNOWN_PARAMETER", f"`{shown}` is not a parameter of {route.path} (it takes: {known}).",
                    {"parameter": shown})
        if name in values:
            return "REPEATED_PARAMETER", f"`{name}` is given more than once; give it once.", {"parameter": name}
        values[name] = value
    return values


def _decode(s: str) -> str:
    if "%" not in s and s.isascii():
        # the common case, without the byte round trip: for ASCII, "printable" is exactly
        # "no control character" (0x00–0x1F, 0x7F), the rule the general path applies
        text = s.replace("+", " ")
        if text.isprintable():
            return text
        raise ValueError("The query string holds control characters (such as NUL).")
    # '%' must introduce two hex digits; unquote would otherwise pass a stray '%' through
    i = s.find("%")
    while i != -1:
        h = s[i + 1 : i + 3]
        if len(h) != 2 or any(c not in "0123456789abcdefABCDEF" for c in h):
            raise ValueError("The query string has a '%' that is not followed by two hex digits.")
        i = s.find("%", i + 1)
    # imported here: the CDN function's cold start need not import urllib.parse
    from urllib.parse import unquote_to_bytes

    try:
        text = unquote_to_bytes(s.replace("+", " ")).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("The query string is not valid UTF-8 once percent-decoded.") from e
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ValueError("The query string holds control characters (such as NUL).")
    return text


def _etag_matches(if_none_match: str, *etags: str | None) -> bool:
    """Weak comparison (RFC 9110 §13.1.2): W/ prefixes are ignored, `*` matches anything."""
    candidates = {e for e in etags if e}
    for tag in if_none_match.split(","):
        tag = tag.strip()
        if tag == "*":
            return True
        if tag.startswith("W/"):
            tag = tag[2:]
        if tag in candidates:
            return True
    return False


def _accepts_gzip(accept_encoding: str | None) -> bool:
    """True when gzip (or `*`) is listed with a non-zero quality value."""
    if not accept_encoding:
        return False
    for item in accept_encoding.split(","):
        coding, *params = (x.strip() for x in item.split(";"))
        if coding.lower() not in ("gzip", "*"):
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0:
            return True
    return False


def handle(
    req: Request,
    now: datetime,
    keys: KeyStore,
    release: ReleaseIndex,
    limiter: Limiter | None = None,
    pinned: PinnedReleases | None = None,
) -> Response:
    method = req.method.upper()
    if method == "OPTIONS":
        return preflight()
    if method not in ("GET", "HEAD"):
        return error("METHOD_NOT_ALLOWED", f"{method} is not served; the API is read-only (GET, HEAD).",
                     req.path, [("Allow", ALLOWED_METHODS)])

    route = BY_PATH.get(req.path)
    if route is None and (alias := csv_alias(req.path)) is not None:
        # a `format` of the client's own then reads as given twice (400 REPEATED_PARAMETER, at step 7)
        route, req = alias, req._replace(query=(req.query + "&" if req.query else "") + "format=csv")
    if route is None and (req.path.startswith("/" + PUBLIC_PREFIX) or req.path in ("/", "/docs")):
        return _public(req, release)
    download = route is None and req.path.startswith(DOWNLOAD_FILE.prefix)
    if route is None and not download:
        return error("NOT_FOUND", "No endpoint at this path; see /docs/api.html for the list.", req.path)

    who = authenticate(req, keys, now)
    if isinstance(who, Response):
        return who
    record: KeyRecord = who

    limit_headers: Headers = []
    if limiter is not None:
        decision = limiter.hit(record, now)
        limit_headers = list(decision.headers)
        if not decision.allowed:
            assert decision.code is not None
            extra = list(limit_headers)
            if decision.retry_after is not None:
                extra.append(("Retry-After", str(decision.retry_after)))
            resp = error(decision.code, decision.detail, req.path, extra)
            resp.key_id = record.id
            return resp

    if route is None:
        resp = _download(req, release, pinned, record)
    elif route.beside_pointer:
        resp = _release_list(req, route, release, pinned)
    else:
        resp = _authorised(req, route, record, release, now)
    resp.headers.extend(limit_headers)
    resp.key_id = record.id
    return resp


def _public(req: Request, release: ReleaseIndex) -> Response:
    """The docs site: keyless, exact manifest lookup, `/docs/` and `/docs/x/` mean their index.html.

    `/` and `/docs` redirect to `/docs/`, where a newcomer finds what the service is and how to get a key.
    """
    if req.path in ("/", "/docs"):
        return Response(301, [("Location", "/" + PUBLIC_PREFIX), ("Cache-Control", "public, max-age=300"),
                              ("Content-Type", "text/plain; charset=utf-8"), *cors_headers(), *DOCS_HEADERS],
                        b"See /" + PUBLIC_PREFIX.encode() + b"\n")
    key = req.path.lstrip("/")
    if key == "docs" or key.endswith("/"):
        key = key.rstrip("/") + "/index.html"
    entry = release.entry(key)
    if entry is None:
        return error("NOT_FOUND", "No such documentation page.", req.path)
    use_gzip = _use_gzip(req, entry)
    headers: Headers = [
        ("ETag", (entry.gzip_etag if use_gzip else None) or entry.etag), ("Cache-Control", "public, max-age=300"),
        ("Vary", "Accept-Encoding"), ("X-Release-Id", release.release_id), *cors_headers(), *DOCS_HEADERS,
    ]
    inm = req.headers.get("if-none-match")
    if inm is not None and _etag_matches(inm, entry.etag, entry.gzip_etag):
        return Response(304, headers)
    headers.append(("Content-Type", entry.content_type))
    if use_gzip:
        headers.append(("Content-Encoding", "gzip"))
        return Response(200, headers, file_key=entry.gzip_key)
    return Response(200, headers, file_key=key)


# Steps 7–9 and the file lookup depend only on (route, raw query, release), not on the key,
# and a client asks the same few URLs over and over: their outcome is remembered for the
# release being served. One (release, memo) pair, replaced whole when another release object
# is passed (identity, not equality: a new manifest is always a new object), bounded so a
# stream of distinct queries costs what it cost without the memo.
_Outcome = tuple[str, FileEntry, str | None] | tuple[None, str, str, dict[str, Any]]
_MEMO: tuple[object, dict[tuple[str, str], _Outcome]] = (None, {})
_MEMO_MAX = 4096


def _resolve(req: Request, route: Route, release: ReleaseIndex,
             now: datetime | None = None) -> tuple[str, FileEntry, str | None] | Response:
    global _MEMO
    owner, memo = _MEMO
    if owner is not release:
        memo = {}
        _MEMO = (release, memo)
    ck = (route.path, req.query)
    outcome = memo.get(ck)
    if outcome is None:
        outcome = _resolve_uncached(req.query, route, release)
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        memo[ck] = outcome
    if outcome[0] is None:
        _, code, detail, members = outcome
        if now is not None and AFTER_HELD in detail and load_due(release.facts, now.strftime("%Y-%m")):
            # said at request time, never remembered: the same query is not stale before the month passes
            detail += (f" Every forecast month of this release has passed (today is {now:%Y-%m-%d}): "
                       "the next data load is due.")
        return error(code, detail, req.path, None, **members)
    return outcome


def _resolve_uncached(query: str, route: Route, release: ReleaseIndex) -> _Outcome:
    """(file key, entry, scope a value needs), or (None, code, detail, problem members) in the gate's
    order of checks. The value's scope is checked by the caller: the outcome is remembered for every key."""
    parsed = _parse_query(query, route)
    if isinstance(parsed, tuple):
        if parsed[0] == "UNKNOWN_PARAMETER":
            parsed = _taken_elsewhere(parsed, query, route, release)
        return None, *parsed

    facts = release.facts
    values: dict[str, str] = {}
    for p in route.params:
        try:
            values[p.name] = p.validate(parsed.get(p.name), facts)
        except ParamError as e:
            raw = parsed.get(p.name)
            if raw is not None and e.code in SUGGESTING:
                return None, *_with_suggestions(e, raw, release)
            return None, e.code, e.detail, {"parameter": e.param}

    if route.dataset not in facts.available:
        if route.unavailable is not None:
            _, code = route.unavailable
            return None, code, f"The {route.dataset} data is not loaded in release {release.release_id}.", {}
        return None, "RELEASE_INCOMPLETE", f"Release {release.release_id} has no {route.dataset} data.", {}

    value_scope = next((s for p in route.params if p.value_scopes and (s := p.scope_for(values[p.name]))), None)
    key = route.key(values)
    entry = release.entry(key)
    if entry is None:
        return None, "RELEASE_INCOMPLETE", f"Release {release.release_id} lacks {key}.", {}
    return key, entry, value_scope


SUGGESTING = ("UNKNOWN_STATE", "UNKNOWN_LGA")


def _taken_elsewhere(problem: tuple[str, str, dict[str, Any]], query: str, route: Route,
                     release: ReleaseIndex) -> tuple[str, str, dict[str, Any]]:
    """A parameter this route does not take but another does (`lga` on /v1/risk/lgas): the detail points
    to that route with a query it would answer, the value as given or, for an LGA given by name, its code
    (`/v1/history/lgas?lga=NG020006`). Code, status and members stay UNKNOWN_PARAMETER's."""
    code, detail, members = problem
    name = str(members.get("parameter", ""))
    others = [r for r in ROUTES if r is not route and r.param(name) is not None]
    if not others:
        return problem
    given: dict[str, str] = {}
    for part in query.split("&"):
        key, _, value = part.partition("=")
        try:
            given.setdefault(_decode(key), _decode(value))
        except ValueError:
            continue
    # a route needing nothing the query lacks, else the first that takes it
    target = next((r for r in others if all(p.name in given for p in r.params if p.required)), others[0])
    value = given.get(name, "")
    if name == "lga" and value:
        from .names import suggest

        loader = getattr(release, "names", None)
        found = suggest("UNKNOWN_LGA", value, loader() if loader is not None else None)
        if len(found) == 1:
            value = found[0]["lga_code"]
    shown = value if 0 < len(value) <= 30 else "…"
    example = f"{target.path}?{name}={shown}"
    extra = "".join(f"&{p.name}={given[p.name]}" for p in target.params
                    if p.name != name and p.required and p.name in given and len(given[p.name]) <= 30)
    takes = ", ".join(f"`{r.path}`" for r in others)
    return code, f"{detail} {takes} {'takes' if len(others) == 1 else 'take'} it: try `{example}{extra}`.", members


def _with_suggestions(e: ParamError, raw: str, release: ReleaseIndex) -> tuple[str, str, dict[str, Any]]:
    """An unknown state or LGA: the codes a name (or a near spelling of one) means, in `detail` and in
    the problem's `suggestions` member. The names index is the release's own (`names()`, loaded on
    first use); a release without one (older, or unreadable at the moment) answers as before."""
    from .names import sentence, suggest

    loader = getattr(release, "names", None)
    found = suggest(e.code, raw, loader() if loader is not None else None)
    members: dict[str, Any] = {"parameter": e.param}
    if not found:
        return e.code, e.detail, members
    members["suggestions"] = found
    detail = e.detail
    if "upper case" not in detail:  # the case hint already names the code
        first, _, rest = detail.partition(". ")
        detail = f"{first}. {sentence(e.code, found)}" + (f" {rest}" if rest else "")
    return e.code, detail, members


def _authorised(req: Request, route: Route, record: KeyRecord, release: ReleaseIndex,
                now: datetime | None = None) -> Response:
    if route.scope is not None and route.scope not in record.scopes:
        return error("SCOPE_REQUIRED", f"This key lacks the `{route.scope}` scope that {route.path} needs.",
                     req.path, required_scope=route.scope, missing_scopes=[route.scope])

    resolved = _resolve(req, route, release, now)
    if isinstance(resolved, Response):
        return resolved
    key, entry, value_scope = resolved
    if value_scope is not None and value_scope not in record.scopes:
        return error("SCOPE_REQUIRED", f"This key lacks the `{value_scope}` scope that {route.path} needs for "
                     "the forecast months; leave out `include` for the estimated months.",
                     req.path, required_scope=value_scope, missing_scopes=[value_scope])
    return _file(req, key, entry, release.release_id)


def _download(req: Request, current: ReleaseIndex, pinned: PinnedReleases | None, record: KeyRecord) -> Response:
    """A bundle file of the current or a kept release; never a key built from unvetted text.

    The file's scopes are the ones its release records (`FileEntry.scopes`, which the pipeline
    derives from the route table); a file whose release records none needs every scope."""
    if any(part for part in req.query.split("&")):
        return error("UNKNOWN_PARAMETER", f"{DOWNLOAD_FILE.path} takes no query parameters.", req.path)
    parsed = DOWNLOAD_FILE.parse(req.path)
    if parsed is None:
        first = req.path[len(DOWNLOAD_FILE.prefix):].split("/", 1)[0]
        if not RELEASE_ID_RE.fullmatch(first):
            return error("UNKNOWN_RELEASE", "The path does not name a release id (such as "
                         f"{current.release_id}); /v1/downloads lists the current release's files.", req.path)
        return error("UNKNOWN_FILE", "The path does not name a bundle file; /v1/downloads lists them.", req.path)
    release_id, name = parsed
    target: ReleaseIndex | None = current
    if release_id != current.release_id:
        target = pinned.pinned(release_id) if pinned is not None else None
    if target is None:
        return error("UNKNOWN_RELEASE", f"Release {release_id} is not kept here (never built, or pruned); "
                     f"the current release is {current.release_id}.", req.path)
    key = DOWNLOAD_FILE.key(name)
    entry = target.entry(key)
    if entry is None:
        return error("UNKNOWN_FILE", f"Release {release_id} has no download named `{_shown(name)}`; "
                     "/v1/downloads lists the current release's files.", req.path)
    needs = entry.scopes if entry.scopes is not None else SCOPES
    missing = [s for s in needs if s not in record.scopes]
    if missing:
        named = ", ".join(f"`{s}`" for s in missing)
        return error("SCOPE_REQUIRED", f"This key lacks the {named} scope{'s' if len(missing) > 1 else ''} that "
                     f"`{_shown(name)}` needs (it holds data of {', '.join(needs)}); /v1/downloads lists "
                     "what each file needs.", req.path, required_scope=missing[0], missing_scopes=missing)
    resp = _file(req, key, entry, target.release_id)
    if target is not current:
        resp.release_id = target.release_id
    return resp


def _release_list(req: Request, route: Route, current: ReleaseIndex, pinned: PinnedReleases | None) -> Response:
    """The list of kept releases, from beside the pointer (`release_list()` of the release source).

    Generated (a body, not a file key): it lies outside every release. Without a list the
    answer is a 503, never a list that leaves out releases a client may have cited.
    """
    parsed = _parse_query(req.query, route)
    if isinstance(parsed, tuple):
        code, detail, members = parsed
        return error(code, detail, req.path, None, **members)
    source = getattr(pinned, "release_list", None)
    listing: ReleaseList | None = source() if source is not None else None
    if listing is None:
        return error("TEMPORARILY_UNAVAILABLE", "The list of kept releases is not available right now; "
                     f"the current release is {current.release_id}.", req.path, [("Retry-After", "60")])
    headers: Headers = [("ETag", listing.etag), ("Cache-Control", LIST_CACHE), ("X-Release-Id", current.release_id),
                        *cors_headers(), *API_HEADERS]
    inm = req.headers.get("if-none-match")
    if inm is not None and _etag_matches(inm, listing.etag):
        return Response(304, headers)
    headers.append(("Content-Type", route.content_type))
    return Response(200, headers, listing.body)


def _use_gzip(req: Request, entry: FileEntry) -> bool:
    """The precompressed copy when the client accepts gzip, except for a `Range` request: ranges are
    always of the identity bytes (the size, SHA-256 and offsets the manifest and a resuming client
    know), here and at the CDN alike (docs/limits.md#downloads)."""
    return (entry.gzip_key is not None and "range" not in req.headers
            and _accepts_gzip(req.headers.get("accept-encoding")))


def _shown(text: str, limit: int = 40) -> str:
    """A short, printable prefix of client text for a problem's detail (never the whole of a long name)."""
    shown = "".join(c if " " < c < "\x7f" and c != "`" else "?" for c in text[:limit])
    return shown + "…" if len(text) > limit else shown


def _file(req: Request, key: str, entry: FileEntry, release_id: str) -> Response:
    use_gzip = _use_gzip(req, entry)
    etag = entry.gzip_etag if use_gzip else entry.etag
    headers: Headers = [
        ("ETag", etag or entry.etag),
        ("Cache-Control", SUCCESS_CACHE),
        ("Vary", "Accept-Encoding"),
        ("X-Release-Id", release_id),
        *cors_headers(),
        *API_HEADERS,
    ]
    inm = req.headers.get("if-none-match")
    if inm is not None and _etag_matches(inm, entry.etag, entry.gzip_etag):
        return Response(304, headers)
    headers.append(("Content-Type", entry.content_type))
    if use_gzip:
        headers.append(("Content-Encoding", "gzip"))
        return Response(200, headers, file_key=entry.gzip_key)
    return Response(200, headers, file_key=key)
