"""The dashboard as an ASGI application (Starlette): server-rendered pages, no JavaScript.

Security in one place, for every request:
- `SecurityHeaders` (outermost): CSP limited to this origin with `frame-ancestors 'none'`,
  `nosniff`, `Referrer-Policy: no-referrer`, `Cache-Control: no-store` (every page is
  private); in production, a request without CloudFront's secret origin header gets 403.
- sessions live in the dashboard store; the browser holds only a random id in a
  `__Host-` cookie (Secure, HttpOnly, SameSite=Lax, Path=/). A new id at sign-in (no
  fixation), idle and absolute timeouts, deleted at sign-out (no replay).
- every POST passes `_guard`: a same-origin `Sec-Fetch-Site` (or, from browsers that do not
  send it, a matching `Origin`) and the session's synchronizer token; its body is capped
  (413) and parsed by `urllib.parse.parse_qsl`.
- jinja2 autoescaping for everything a user typed (key and organisation names, reasons).
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import re
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from edge.limits import DEFAULT_MONTHLY
from edge.routes import SCOPES

from .service import (
    AlreadySubmitted,
    Dashboard,
    DashboardError,
    Forbidden,
    NeedsFreshCode,
    NotFound,
    Space,
)
from .settings import MAX_BODY, DashboardSettings

HERE = Path(__file__).parent
WAT = timedelta(hours=1)  # West Africa Time, UTC+1 all year
SAFE_NEXT = re.compile(r"^/(?!/)[A-Za-z0-9/_.\-]{0,200}$")
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
ORIGIN_HEADER = "x-origin-verify"

Scope = MutableMapping[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class SecurityHeaders:
    """Adds the headers above to every response; refuses requests that bypassed CloudFront."""

    def __init__(self, app: ASGI, origin_secret: str = ""):
        self.app = app
        self.origin_secret = origin_secret.encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.origin_secret:
            got = dict(scope["headers"]).get(ORIGIN_HEADER.encode(), b"")
            if not hmac.compare_digest(got, self.origin_secret):
                await PlainTextResponse("Forbidden", 403)(scope, receive, send)
                return

        async def wrapped(message: Any) -> None:
            if message["type"] == "http.response.start":
                names = {h[0].lower() for h in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in HEADERS if h[0] not in names)]
            await send(message)

        await self.app(scope, receive, wrapped)


class Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _sid_hash(sid: str) -> str:
    return hashlib.sha256(sid.encode()).hexdigest()


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="seconds")


def wat(value: str | None, with_time: bool = True) -> str:
    """An ISO instant (UTC) as West Africa Time, e.g. `22 Nov 2026, 13:05 WAT`."""
    if not value:
        return "—"
    t = datetime.fromisoformat(value)
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    t = t.astimezone(UTC) + WAT
    return f"{t.day} {t:%b %Y}, {t:%H:%M} WAT" if with_time else f"{t.day} {t:%b %Y}"


def expiry_text(expires_on: str | None) -> str:
    """A key stops at 00:00 UTC of its expiry day: 01:00 WAT that day."""
    if not expires_on:
        return "never"
    return wat(expires_on + "T00:00:00+00:00")


def day_text(day: str | None, today: date) -> str:
    if not day:
        return "never"
    d = date.fromisoformat(day)
    if d == today:
        return "today"
    if d == today - timedelta(days=1):
        return "yesterday"
    return f"{d.day} {d:%b %Y}"


def month_reset(now: datetime) -> str:
    """When this month's allowance starts again: 00:00 UTC on the 1st (01:00 WAT)."""
    n = now.astimezone(UTC)
    first = datetime(n.year + (n.month == 12), n.month % 12 + 1, 1, tzinfo=UTC)
    return wat(_iso(first))


def example_path(scopes: str) -> str:
    s = scopes.split()
    if "risk_scores" in s:
        return "/v1/risk/states"
    if "forecasts" in s:
        return "/v1/forecasts/states"
    return "/v1/boundaries/lgas?state=KN"


class DashboardApp:
    """The routes and their handlers, over one Dashboard service."""

    def __init__(self, service: Dashboard, settings: DashboardSettings):
        self.service = service
        self.settings = settings
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                                      autoescape=True, undefined=jinja2.StrictUndefined)
        self.env.filters["wat"] = wat
        self.env.filters["expiry"] = expiry_text
        self.css = (HERE / "static" / "dashboard.css").read_bytes()

    # -- plumbing ------------------------------------------------------------------------------
    def routes(self) -> list[Route]:
        r = Route
        out = [
            r("/", self.home), r("/static/dashboard.css", self.stylesheet),
            r("/sign-in", self.sign_in_page), r("/sign-in", self.sign_in_send, methods=["POST"]),
            r("/sign-in/confirm", self.sign_in_confirm_page), r("/sign-in/code", self.sign_in_code, methods=["POST"]),
            r("/sign-out", self.sign_out, methods=["POST"]),
            r("/confirm-identity", self.reauth_page), r("/confirm-identity", self.reauth, methods=["POST"]),
            r("/confirm-identity/send", self.reauth_send, methods=["POST"]),
            r("/invitations/{token}", self.invitation_page), r("/invitations/{token}", self.invitation_accept,
                                                               methods=["POST"]),
            r("/me/request-access", self.request_access_page),
            r("/me/request-access", self.request_access, methods=["POST"]),
            r("/o/{org}/members", self.members_page),
            r("/o/{org}/members/invite", self.invite, methods=["POST"]),
            r("/o/{org}/members/role", self.change_role, methods=["POST"]),
            r("/o/{org}/invitations/{inv}/cancel", self.cancel_invitation, methods=["POST"]),
        ]
        for prefix in ("/o/{org}", "/me"):
            out += [
                r(prefix + "/keys", self.keys_page), r(prefix + "/keys/new", self.new_key_page),
                r(prefix + "/keys/new", self.create_key, methods=["POST"]),
                r(prefix + "/keys/{kid}", self.key_page),
                r(prefix + "/keys/{kid}/revoke", self.revoke_page),
                r(prefix + "/keys/{kid}/revoke", self.revoke, methods=["POST"]),
                r(prefix + "/keys/{kid}/roll", self.roll_page),
                r(prefix + "/keys/{kid}/roll", self.roll, methods=["POST"]),
                r(prefix + "/audit", self.audit_page), r(prefix + "/audit.csv", self.audit_csv),
            ]
        return out

    def origin(self, request: Request) -> str:
        return self.settings.base_url.rstrip("/") or f"{request.url.scheme}://{request.url.netloc}"

    def session(self, request: Request) -> dict[str, Any] | None:
        sid = request.cookies.get(self.settings.cookie_name)
        if not sid or len(sid) > 100:
            return None
        h = _sid_hash(sid)
        s = self.service.store.get_session(h)
        if s is None:
            return None
        now = self.service.now()
        if (now - datetime.fromisoformat(s["created_at"]) > timedelta(hours=self.settings.absolute_hours)
                or now - datetime.fromisoformat(s["last_seen"]) > timedelta(minutes=self.settings.idle_minutes)):
            self.service.store.delete_session(h)
            return None
        if now - datetime.fromisoformat(s["last_seen"]) > timedelta(seconds=60):
            self.service.store.touch_session(h, _iso(now))
        if s["email"] is not None:
            account = self.service.store.get_account(s["email"])
            if account is None or account["removed_at"] is not None:
                self.service.store.delete_session(h)
                return None
        return {**s, "hash": h}

    def new_session(self, email: str | None, verified: bool = False) -> tuple[str, dict[str, Any]]:
        sid = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(24)
        now = _iso(self.service.now())
        self.service.store.create_session(_sid_hash(sid), email, csrf, now, now if verified else None)
        return sid, {"hash": _sid_hash(sid), "email": email, "csrf": csrf, "verified_at": now if verified else None}

    def set_cookie(self, response: Response, sid: str) -> None:
        response.set_cookie(self.settings.cookie_name, sid, path="/", secure=self.settings.secure_cookie,
                            httponly=True, samesite="lax", max_age=self.settings.absolute_hours * 3600)

    def render(self, request: Request, template: str, session: dict[str, Any] | None, status: int = 200,
               **context: Any) -> HTMLResponse:
        email = session["email"] if session else None
        spaces = self.service.spaces(email) if email else []
        html = self.env.get_template(template).render(
            csrf=session["csrf"] if session else "", email=email, spaces=spaces, scopes=SCOPES, **context)
        return HTMLResponse(html, status)

    def page(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        """A page with forms for someone who may not be signed in: makes an anonymous session if needed."""
        s = self.session(request)
        sid = None
        if s is None:
            sid, s = self.new_session(None)
        response = self.render(request, template, s, status, **context)
        if sid is not None:
            self.set_cookie(response, sid)
        return response

    async def form(self, request: Request, session: dict[str, Any] | None) -> list[tuple[str, str]]:
        """The POST body as pairs, after the size cap and the cross-site checks."""
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            raise Refused(413, "That form is larger than any form of this site.")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                raise Refused(413, "That form is larger than any form of this site.")
        site = request.headers.get("sec-fetch-site")
        origin = request.headers.get("origin")
        if site is not None and site != "same-origin":
            raise Refused(403, "Forms of this site can only be sent from its own pages.")
        if site is None and origin is not None and origin != self.origin(request):
            raise Refused(403, "Forms of this site can only be sent from its own pages.")
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype != "application/x-www-form-urlencoded":
            raise Refused(415, "Forms are sent as application/x-www-form-urlencoded.")
        try:
            pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=40)
        except (UnicodeDecodeError, ValueError):
            raise Refused(400, "That form could not be read.") from None
        token = next((v for k, v in pairs if k == "csrf"), "")
        if session is None or not token or not hmac.compare_digest(token.encode(), session["csrf"].encode()):
            raise Refused(403, "This form has expired or did not come from this site: reload the page and try again.")
        return pairs

    def refused(self, request: Request, e: Refused) -> HTMLResponse:
        return self.render(request, "message.html", None, e.status, title="Refused", message=str(e))

    def signed_in(self, request: Request) -> dict[str, Any]:
        s = self.session(request)
        if s is None or s["email"] is None:
            raise _SignIn(request.url.path)
        return s

    @staticmethod
    def space(request: Request, s: dict[str, Any]) -> Space:
        org = request.path_params.get("org")
        return Space("org", org) if org is not None else Space("me", s["email"])

    @staticmethod
    def base(space: Space) -> str:
        return f"/o/{space.id}" if space.kind == "org" else "/me"

    def not_found(self, request: Request, s: dict[str, Any] | None, message: str = "There is no such page.") -> HTMLResponse:
        return self.render(request, "message.html", s, 404, title="Not found", message=message)

    # -- pages ---------------------------------------------------------------------------------------
    async def stylesheet(self, request: Request) -> Response:
        return Response(self.css, media_type="text/css", headers={"cache-control": "public, max-age=3600"})

    async def home(self, request: Request) -> Response:
        s = self.session(request)
        if s is None or s["email"] is None:
            return RedirectResponse("/sign-in", 303)
        first = self.service.spaces(s["email"])[0]
        return RedirectResponse(self.base(first["space"]) + "/keys", 303)

    async def sign_in_page(self, request: Request) -> Response:
        nxt = request.query_params.get("next", "")
        return self.page(request, "sign_in.html", next=nxt if SAFE_NEXT.match(nxt) else "", error=None)

    async def sign_in_send(self, request: Request) -> Response:
        s = self.session(request)
        try:
            pairs = dict(await self.form(request, s))
        except Refused as e:
            return self.refused(request, e)
        nxt = pairs.get("next", "")
        nxt = nxt if SAFE_NEXT.match(nxt) else ""
        try:
            self.service.request_code(pairs.get("email", ""))
        except DashboardError as e:
            return self.render(request, "sign_in.html", s, 400, next=nxt, error=str(e))
        return self.render(request, "code.html", s, email_value=pairs.get("email", "").strip().lower(), code="",
                           next=nxt, error=None)

    async def sign_in_confirm_page(self, request: Request) -> Response:
        """The email's link: a page with a button, so a mail scanner opening the link spends nothing."""
        q = request.query_params
        return self.page(request, "code.html", email_value=q.get("email", ""), code=q.get("code", ""),
                         next="", error=None)

    async def sign_in_code(self, request: Request) -> Response:
        s = self.session(request)
        try:
            pairs = dict(await self.form(request, s))
        except Refused as e:
            return self.refused(request, e)
        assert s is not None
        nxt = pairs.get("next", "")
        try:
            email = self.service.sign_in(pairs.get("email", ""), pairs.get("code", ""))
        except DashboardError as e:
            return self.render(request, "code.html", s, 400, email_value=pairs.get("email", ""), code="",
                               next=nxt if SAFE_NEXT.match(nxt) else "", error=str(e))
        self.service.store.delete_session(s["hash"])  # a new id at sign-in: a planted id is worth nothing
        sid, _ = self.new_session(email, verified=True)
        now = self.service.now()
        self.service.store.forget_expired(_iso(now - timedelta(hours=self.settings.absolute_hours)),
                                          _iso(now - timedelta(minutes=self.settings.idle_minutes)),
                                          _iso(now - timedelta(days=2)))
        response = RedirectResponse(nxt if SAFE_NEXT.match(nxt) else "/", 303)
        self.set_cookie(response, sid)
        return response

    async def sign_out(self, request: Request) -> Response:
        s = self.session(request)
        try:
            await self.form(request, s)
        except Refused as e:
            return self.refused(request, e)
        assert s is not None
        self.service.store.delete_session(s["hash"])
        response = RedirectResponse("/sign-in", 303)
        response.delete_cookie(self.settings.cookie_name, path="/", secure=self.settings.secure_cookie,
                               httponly=True, samesite="lax")
        return response

    async def reauth_page(self, request: Request) -> Response:
        s = self.signed_in(request)
        nxt = request.query_params.get("next", "")
        return self.render(request, "reauth.html", s, next=nxt if SAFE_NEXT.match(nxt) else "/",
                           sent=request.query_params.get("sent") == "1", error=None)

    async def reauth_send(self, request: Request) -> Response:
        s = self.signed_in(request)
        try:
            pairs = dict(await self.form(request, s))
        except Refused as e:
            return self.refused(request, e)
        self.service.request_code(s["email"])
        nxt = pairs.get("next", "")
        return RedirectResponse(f"/confirm-identity?sent=1&next={quote(nxt if SAFE_NEXT.match(nxt) else '/')}", 303)

    async def reauth(self, request: Request) -> Response:
        s = self.signed_in(request)
        try:
            pairs = dict(await self.form(request, s))
        except Refused as e:
            return self.refused(request, e)
        nxt = pairs.get("next", "")
        nxt = nxt if SAFE_NEXT.match(nxt) else "/"
        try:
            self.service.confirm_identity(s["email"], pairs.get("code", ""))
        except DashboardError as e:
            return self.render(request, "reauth.html", s, 400, next=nxt, sent=True, error=str(e))
        self.service.store.set_verified(s["hash"], _iso(self.service.now()))
        return RedirectResponse(nxt, 303)

    async def keys_page(self, request: Request) -> Response:
        s = self.signed_in(request)
        space = self.space(request, s)
        try:
            role = self.service.role_in(s["email"], space)
            rows = self.service.list_keys(s["email"], space)
        except NotFound:
            return self.not_found(request, s)
        return self.render(request, "keys.html", s, space=space, base=self.base(space), role=role, keys=rows,
                           today=self.service.now().astimezone(UTC).date(), day_text=day_text,
                           allowance=self.settings.monthly or DEFAULT_MONTHLY, reset=month_reset(self.service.now()),
                           space_name=self._space_name(space))

    def _space_name(self, space: Space) -> str:
        if space.kind == "org":
            org = self.service.store.get_org(space.id)
            return str(org["name"]) if org else space.id
        return "My own keys"

    async def new_key_page(self, request: Request) -> Response:
        s = self.signed_in(request)
        space = self.space(request, s)
        try:
            role = self.service.role_in(s["email"], space)
        except NotFound:
            return self.not_found(request, s)
        if role in ("member", "locked"):
            return self.render(request, "message.html", s, 403, title="Not allowed", message=(
                "Only the organisation's administrators can create its keys." if role == "member" else
                "API access is not unlocked for this account yet."))
        return self.render(request, "new_key.html", s, space=space, base=self.base(space), form_token=secrets.token_urlsafe(16),
                           values={"name": "", "scopes": [], "kind": "test", "expires": ""}, error=None,
                           space_name=self._space_name(space))

    async def create_key(self, request: Request) -> Response:
        s = self.signed_in(request)
        try:
            pairs = await self.form(request, s)
        except Refused as e:
            return self.refused(request, e)
        space = self.space(request, s)
        f = dict(pairs)
        scopes = [v for k, v in pairs if k == "scope"]
        name, kind, expires = f.get("name", ""), f.get("kind", "test"), f.get("expires", "")
        values = {"name": name, "scopes": scopes, "kind": kind, "expires": expires}
        try:
            kid, key = self.service.create_key(s["email"], space, name, scopes, kind, expires or None,
                                               f.get("form_token", "") or secrets.token_urlsafe(16), s["verified_at"])
        except AlreadySubmitted as e:
            return self.render(request, "already.html", s, space=space, base=self.base(space), key_id=e.key_id)
        except NeedsFreshCode:
            return RedirectResponse(f"/confirm-identity?next={quote(self.base(space) + '/keys/new')}", 303)
        except NotFound:
            return self.not_found(request, s)
        except Forbidden as e:
            return self.render(request, "message.html", s, 403, title="Not allowed", message=str(e))
        except DashboardError as e:
            return self.render(request, "new_key.html", s, 400, space=space, base=self.base(space),
                               form_token=secrets.token_urlsafe(16), values=values, error=str(e),
                               space_name=self._space_name(space))
        return self.created(request, s, space, kid, key)

    def created(self, request: Request, s: dict[str, Any], space: Space, kid: str, key: str) -> Response:
        row = self.service.get_key(s["email"], space, kid)
        return self.render(request, "created.html", s, space=space, base=self.base(space), key=key, row=row,
                           api=self.settings.api_url.rstrip("/"), path=example_path(row["scopes"]))

    async def key_page(self, request: Request) -> Response:
        s = self.signed_in(request)
        space = self.space(request, s)
        try:
            role = self.service.role_in(s["email"], space)
            row = self.service.get_key(s["email"], space, request.path_params["kid"])
        except NotFound:
            return self.not_found(request, s)
        return self.render(request, "key.html", s, space=space, base=self.base(space), role=role, row=row,
                           today=self.service.now().astimezone(UTC).date(), day_text=day_text,
                           allowance=self.settings.monthly or DEFAULT_MONTHLY, reset=month_reset(self.service.now()),
                           message=request.query_params.get("done", ""))

    async def revoke_page(self, request: Request) -> Response:
        s = self.signed_in(request)
        space = self.space(request, s)
        try:
            row = self.service.get_key(s["email"], space, request.path_params["kid"])
        except NotFound:
            return self.not_found(request, s)
        return self.render(request, "revoke.html", s, space=space, base=self.base(space), row=row)

    async def revoke(self, request: Request) -> Response:
        s = self.signed_in(request)
        try:
            await self.form(request, s)
        except Refused as e:
            return self.refused(request, e)
        space = self.space(request, s)
        kid = request.path_params["kid"]
        try:
            self.service.revoke_key(s["email"], space, kid)
        except NotFound:
            return self.not_found(request, s)
        except Forbidden as e:
            return self.render(request, "message.html", s, 403, title="Not allowed", message=str(e))
        return RedirectResponse(f"{self.base(space)}/keys/{kid}?done=revoked", 303)

    async def roll_page(self, request: Request) -> Response:
        s = self.signed_in(request)
        space = self.space(request, s)
        try:
            row = self.service.get_key(s["email"], space, request.path_params["kid"])
        except NotFound:
            return self.not_found(request, s)
        default = (self.service.now().astimezone(UTC).date() + timedelta(days=7)).isoformat()
        if row["expires_on"] and row["expires_on"] < default:
            default = row["expires_on"]
        return self.render(request, "roll.html", s, space=space, base=self.base(space), row=row, until=default,
                           form_token=secrets.token_urlsafe(16), error=None)

    async def roll(self, request: Request) -> Response:
        s = self.signed_in(request)
        try:
            f = dict(await self.form(request, s))
        except Refused as e:
            return self.refused(request, e)
        space = self.space(request, s)
        kid = request.path_params["kid"]
        try:
            new_id, key = self.service.roll_key(s["email"], space, kid, f.get("until", ""), f.get("form_token", ""),
                                                s["verified_at"])
        except AlreadySubmitted as e:
            return self.render(request, "already.html", s, space=space, base=self.base(space), key_id=e.key_id)
        except NeedsFreshCode:
            return RedirectResponse(f"/confirm-identity?next={quote(self.base(space) + '/keys/' + kid + '/roll')}", 303)
        except NotFound:
            return self.not_found(request, s)
        except Forbidden as e:
            return self.render(request, "message.html", s, 403, title="Not allowed", message=str(e))
        except DashboardError as e:
            row = self.service.get_key(s["email"], space, kid)
            return self.render(request, "roll.html", s, 400, space=space, base=self.base(space), row=row,
                               until=f.get("until", ""), form_token=secrets.token_urlsafe(16), error=str(e))
        return self.created(request, s, space, new_id, key)

    async def members_page(self, request: Request) -> Response:
        s = self.signed_in(request)
        space = self.space(request, s)
        try:
            role = self.service.role_in(s["email"], space)
            data = self.service.members(s["email"], space)
        except NotFound:
            return self.not_found(request, s)
        return self.render(request, "members.html", s, space=space, base=self.base(space), role=role,
                           error=request.query_params.get("error", ""), space_name=self._space_name(space), **data)

    async def _member_action(self, request: Request, action: Callable[[dict[str, Any], Space, dict[str, str]], None]) -> Response:
        s = self.signed_in(request)
        try:
            f = dict(await self.form(request, s))
        except Refused as e:
            return self.refused(request, e)
        space = self.space(request, s)
        try:
            action(s, space, f)
        except NeedsFreshCode:
            return RedirectResponse(f"/confirm-identity?next={quote(self.base(space) + '/members')}", 303)
        except NotFound:
            return self.not_found(request, s)
        except Forbidden as e:
            return self.render(request, "message.html", s, 403, title="Not allowed", message=str(e))
        except DashboardError as e:
            data = self.service.members(s["email"], space)
            return self.render(request, "members.html", s, 400, space=space, base=self.base(space),
                               role=self.service.role_in(s["email"], space), error=str(e),
                               space_name=self._space_name(space), **data)
        return RedirectResponse(self.base(space) + "/members", 303)

    async def invite(self, request: Request) -> Response:
        return await self._member_action(request, lambda s, space, f: self.service.invite(
            s["email"], space, f.get("email", ""), f.get("role", "member"), s["verified_at"]))

    async def change_role(self, request: Request) -> Response:
        return await self._member_action(request, lambda s, space, f: self.service.set_role(
            s["email"], space, f.get("email", ""), None if f.get("role") == "remove" else f.get("role", ""),
            s["verified_at"]))

    async def cancel_invitation(self, request: Request) -> Response:
        return await self._member_action(request, lambda s, space, f: self.service.cancel_invitation(
            s["email"], space, request.path_params["inv"]))

    async def invitation_page(self, request: Request) -> Response:
        s = self.signed_in(request)
        try:
            inv = self.service.invitation(s["email"], request.path_params["token"])
        except NotFound as e:
            return self.not_found(request, s, str(e))
        return self.render(request, "invitation.html", s, inv=inv, token=request.path_params["token"])

    async def invitation_accept(self, request: Request) -> Response:
        s = self.signed_in(request)
        try:
            await self.form(request, s)
        except Refused as e:
            return self.refused(request, e)
        try:
            org = self.service.accept_invitation(s["email"], request.path_params["token"])
        except NotFound as e:
            return self.not_found(request, s, str(e))
        return RedirectResponse(f"/o/{org}/keys", 303)

    async def request_access_page(self, request: Request) -> Response:
        s = self.signed_in(request)
        return self.render(request, "request_access.html", s, requests=self.service.store.access_requests(s["email"]),
                           role=self.service.role_in(s["email"], Space("me", s["email"])), error=None, sent=False)

    async def request_access(self, request: Request) -> Response:
        s = self.signed_in(request)
        try:
            f = dict(await self.form(request, s))
        except Refused as e:
            return self.refused(request, e)
        error = None
        try:
            self.service.request_access(s["email"], f.get("reason", ""))
        except DashboardError as e:
            error = str(e)
        return self.render(request, "request_access.html", s, 400 if error else 200,
                           requests=self.service.store.access_requests(s["email"]),
                           role=self.service.role_in(s["email"], Space("me", s["email"])), error=error,
                           sent=error is None)

    async def audit_page(self, request: Request) -> Response:
        s = self.signed_in(request)
        space = self.space(request, s)
        try:
            rows = self.service.audit(s["email"], space)
        except NotFound:
            return self.not_found(request, s)
        return self.render(request, "audit.html", s, space=space, base=self.base(space), rows=rows[:500],
                           total=len(rows), space_name=self._space_name(space))

    async def audit_csv(self, request: Request) -> Response:
        s = self.signed_in(request)
        space = self.space(request, s)
        try:
            rows = self.service.audit(s["email"], space)
        except NotFound:
            return self.not_found(request, s)
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\r\n")
        w.writerow(["seq", "at_utc", "at_wat", "actor", "action", "target", "detail"])
        for r in rows:
            w.writerow([r["seq"], r["at"], wat(r["at"]), _csv_safe(r["actor"]), r["action"],
                        _csv_safe(r["target"] or ""), _csv_safe(r["detail"])])
        name = f"audit-{space.id if space.kind == 'org' else 'me'}.csv"
        return Response(out.getvalue().encode(), media_type="text/csv; charset=utf-8",
                        headers={"content-disposition": f'attachment; filename="{name}"'})


def _csv_safe(value: str) -> str:
    """Spreadsheets run a cell that starts with = + - @ as a formula: prefix it with a quote."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


class _SignIn(Exception):
    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


def create_app(service: Dashboard, settings: DashboardSettings) -> SecurityHeaders:
    handlers = DashboardApp(service, settings)

    async def to_sign_in(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _SignIn)
        nxt = exc.path if SAFE_NEXT.match(exc.path) else "/"
        if request.method != "GET":
            return handlers.render(request, "message.html", None, 403, title="Signed out",
                                   message="Your session has ended: sign in again.")
        return RedirectResponse(f"/sign-in?next={quote(nxt)}", 303)

    async def not_found(request: Request, exc: Exception) -> Response:
        return handlers.render(request, "message.html", None, 404, title="Not found", message="There is no such page.")

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        return PlainTextResponse("Method not allowed", 405)

    app = Starlette(routes=handlers.routes(), exception_handlers={_SignIn: to_sign_in, 404: not_found,
                                                                   405: method_not_allowed})
    return SecurityHeaders(app, settings.origin_secret)


def build(settings: DashboardSettings) -> tuple[Dashboard, SecurityHeaders]:
    """The service over the stores the settings name, and the app over it.

    The dashboard store defaults to the key store's kind: `dashboard.sqlite` beside a SQLite
    key store, the `<prefix>dashboard` and `<prefix>audit` tables beside DynamoDB keys.
    """
    from edge.stores import sqlite_path

    from .mailer import open_mailer
    from .store import SQLiteDashboardStore, dashboard_path_for
    from .usage import CounterUsage, EdgeItemUsage

    _, _, rest = settings.store.partition(":")
    path = sqlite_path(settings.store)
    if path is None:  # DynamoDB: usage is on the key items the CDN function counts
        from edge.stores.dynamodb import DynamoDBKeyStore

        store: Any = DynamoDBKeyStore.from_env(rest)
        usage: Any = EdgeItemUsage(store)
        default_dashboard = f"dynamodb:{rest}"
    else:
        from edge.stores.counters import MappedCounter, SQLiteCounter, mapped_counters_path_for
        from edge.stores.sqlite import SQLiteKeyStore

        store = SQLiteKeyStore(path)
        counters = settings.counters
        usage = CounterUsage(lambda: SQLiteCounter(counters) if counters and counters.endswith(".sqlite")
                             else MappedCounter(counters or mapped_counters_path_for(path)))
        default_dashboard = str(dashboard_path_for(path))
    spec = settings.dashboard or default_dashboard
    if spec.startswith("dynamodb:"):
        from .dynamodb import DynamoDBDashboardStore

        state: Any = DynamoDBDashboardStore.from_env(spec.partition(":")[2])
    else:
        state = SQLiteDashboardStore(spec.removeprefix("sqlite:"))
    service = Dashboard(store, state, open_mailer(settings.mailer), settings.base_url, usage=usage)
    return service, create_app(service, settings)
