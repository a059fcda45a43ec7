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

import contextlib
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

import anyio
import anyio.to_thread
import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from edge.limits import DEFAULT_MONTHLY
from edge.routes import SCOPES, scope_endpoints

from . import service as rules
from .operator_text import csv_text
from .service import Dashboard, DashboardError, Limited, Space
from .settings import MAX_BODY, MAX_HEAD, DashboardSettings

HERE = Path(__file__).parent
WAT = timedelta(hours=1)  # West Africa Time, UTC+1 all year
SAFE_NEXT = re.compile(r"^/(?!/)[A-Za-z0-9/_.\-]{0,200}$")
INVITATION_NEXT = re.compile(r"^/invitations/([A-Za-z0-9_\-]{16,64})$")
# `script-src 'self'`: the one script is /static/copy.js (the new-key page's copy button); no inline script
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"strict-transport-security", b"max-age=63072000"),  # browsers heed it over https only
]
BROWSER_COOKIE_DAYS = 400  # the longest a browser keeps a cookie; the id has no server row
PURGE_SECONDS = 600  # how often expired sessions, codes and budget windows are forgotten
SECRET_SECONDS = 60  # how often a process reads the signing secrets again (a rotation reaches it this fast)

# Every message a page shows comes from the service or from these tables, chosen by a code:
# no page prints text taken from its address.
NOTICES = {
    "revoked": "The key is revoked: requests with it now answer 401.",
    "invited": "The invitation is sent.",
    "invitation_cancelled": "The invitation is cancelled: its link no longer works.",
    "role_changed": "The role is changed.",
    "role_unchanged": "Nothing changed: the member already had that role.",
    "member_removed": "The member is removed from the organisation.",
}
# Refusals shown after a redirect (POST, then See Other to the page, then GET): the page, not the
# form's POST address, is what the browser shows, reloads and keeps in its history.
REFUSALS = {"last_admin": rules.LAST_ADMIN_TEXT}
# What stays true for the person's other browsers (Dashboard.request_code skips the budgets for a browser
# marked as having signed in with the address; the mark lasts DEVICE_DAYS and the browser id survives
# every rotation of the signing secret it is used between, `DashboardApp.ctx`)
OWN_BROWSER = (f"A browser where you have signed in with this address in the last {rules.DEVICE_DAYS} days can still "
               "ask for a code, unless the dashboard's signing secret was replaced twice since that browser last "
               "opened it.")
LIMITS = {
    "browser": "This browser has asked for as many codes as it may this hour. You can ask again after {until} "
               "(in {minutes} minutes).",
    "client": "Your network has asked for as many codes as it may this hour. You can ask again "
              "after {until} (in {minutes} minutes). " + OWN_BROWSER,
    "inviter": "You have sent as many invitations as you may this hour. You can send more after {until} "
               "(in {minutes} minutes).",
    "keys": "You have created as many keys as you may this hour. You can create more after {until} "
            "(in {minutes} minutes).",
    "invitation": "As many codes as may be sent this hour for this invitation have been sent. You can ask again "
                  "after {until} (in {minutes} minutes).",
    "address": "This address has been sent as many codes as it may this hour for browsers it has not signed in "
               "from. You can ask again after {until} (in {minutes} minutes). " + OWN_BROWSER,
    "service": "The dashboard has sent as many emails this hour as it allows, and the service team is told. "
               "You can ask again after {until} (in {minutes} minutes). " + OWN_BROWSER
               + " Members and people invited by an organisation draw on a pool of their own.",
}
MEMBER_TEXT = {
    "member": "Only the organisation's administrators can create, roll or revoke its keys: ask one of them "
              "(see Members).",
    "locked": "API access is not unlocked for this account yet: request it under Request API access.",
}
ORIGIN_HEADER = "x-origin-verify"
CLIENT_ADDRESS_HEADER = "cloudfront-viewer-address"  # added by CloudFront from the viewer's connection (docs/deploy.md)

Scope = MutableMapping[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def head_size(scope: Scope) -> int:
    """The request head's size as sent: request line and every header line (`name: value\r\n`)."""
    line = len(scope.get("method", "")) + len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + 12
    return line + sum(len(k) + len(v) + 4 for k, v in scope.get("headers", []))


class SecurityHeaders:
    """Adds the headers above to every response; refuses requests that bypassed CloudFront and
    request heads above MAX_HEAD (431), whether uvicorn or the Lambda adapter made the scope."""

    def __init__(self, app: ASGI, origin_secret: str = ""):
        self.app = app
        self.origin_secret = origin_secret.encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if head_size(scope) > MAX_HEAD:
            await PlainTextResponse("Request header fields too large", 431,
                                    headers=dict((k.decode(), v.decode()) for k, v in HEADERS))(scope, receive, send)
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


def limit_text(e: Limited, now: datetime) -> str:
    """What a used-up budget means for the person who met it, and when to try again."""
    minutes = max(1, int((e.until - now).total_seconds() + 59) // 60)
    return LIMITS[e.which].format(until=wat(_iso(e.until)), minutes=minutes)


class Ctx:
    """One request's visitor: the browser (a signed random id in its own cookie, no server row),
    the signed-in session if any, and the CSRF token their forms carry."""

    __slots__ = ("request", "browser", "new_browser", "session", "resigned")

    def __init__(self, request: Request, browser: str, new_browser: str | None, session: dict[str, Any] | None,
                 resigned: str | None = None):
        self.request = request
        self.browser = browser
        self.new_browser = new_browser  # a new browser's cookie, to set on the answer
        self.session = session
        self.resigned = resigned  # the same browser id signed with the current secret, to set on the answer

    @property
    def email(self) -> str:
        assert self.session is not None and self.session["email"]
        return str(self.session["email"])


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
        self.copy_js = (HERE / "static" / "copy.js").read_bytes()
        self._secrets: tuple[bytes, ...] = ()
        self._secrets_read = -float(SECRET_SECONDS)

    # -- plumbing ------------------------------------------------------------------------------
    def routes(self) -> list[Route]:
        r = Route
        out = [
            r("/", self.home), r("/static/dashboard.css", self.stylesheet),
            r("/static/copy.js", self.script),
            r("/sign-in", self.sign_in_page), r("/sign-in", self.sign_in_send, methods=["POST"]),
            r("/sign-in/confirm", self.sign_in_confirm_page), r("/sign-in/code", self.sign_in_code, methods=["POST"]),
            r("/sign-out", self.sign_out, methods=["POST"]),
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
                r(prefix + "/settings", self.settings_home),
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

    @property
    def secrets(self) -> tuple[bytes, ...]:
        """The cookie-signing secrets, current first then the previous one (if any), read from the
        store again every SECRET_SECONDS: a running process follows `malaria-risk dashboard
        rotate-secret` within a minute, and cookies signed before still verify."""
        if time.monotonic() - self._secrets_read >= SECRET_SECONDS:
            current, previous = self.service.store.signing_secrets()
            self._secrets = tuple(x.encode() for x in (current, previous) if x)
            self._secrets_read = time.monotonic()
        return self._secrets

    @property
    def secret(self) -> bytes:
        return self.secrets[0]

    def _sign(self, *parts: str, secret: bytes | None = None) -> str:
        return hmac.new(secret or self.secret, "\x00".join(parts).encode(), hashlib.sha256).hexdigest()[:32]

    def _signed(self, sig: str, *parts: str) -> bool:
        """Whether `sig` signs `parts` under the current or the previous secret."""
        given = sig.encode("utf-8", "replace")  # bytes: compare_digest refuses str with other than ASCII
        return any(hmac.compare_digest(given, self._sign(*parts, secret=k).encode()) for k in self.secrets)

    def client(self, request: Request) -> str:
        """The visitor's network address (the service counts an IPv6 /64 as one, `service.client_group`).

        In production only CloudFront reaches the app (the secret origin header), and the address
        is the one CloudFront itself adds, `CloudFront-Viewer-Address` (`IP:port`, from the
        viewer's connection; the distribution's origin request policy forwards it). Nothing a
        client sends is read: `X-Forwarded-For` keeps whatever the client put in it, so it is
        ignored, and a request without CloudFront's header (a misconfigured policy) counts as one
        shared client, which fails closed. Locally the socket's peer, which uvicorn replaces only
        for a proxy named by `--forwarded-allow-ips`."""
        if self.settings.origin_secret:
            viewer = request.headers.get(CLIENT_ADDRESS_HEADER, "")
            return viewer.rsplit(":", 1)[0] if ":" in viewer else "no-viewer-address"
        return request.client.host if request.client else ""

    def session(self, request: Request) -> dict[str, Any] | None:
        """The signed-in session, or None (nobody who is not signed in has a session row)."""
        sid = request.cookies.get(self.settings.cookie_name)
        if not sid or len(sid) > 100:
            return None
        h = _sid_hash(sid)
        s = self.service.store.get_session(h)
        if s is None or s["email"] is None:
            return None
        now = self.service.now()
        if (now - datetime.fromisoformat(s["created_at"]) > timedelta(hours=self.settings.absolute_hours)
                or now - datetime.fromisoformat(s["last_seen"]) > timedelta(minutes=self.settings.idle_minutes)):
            self.service.store.delete_session(h)
            return None
        if now - datetime.fromisoformat(s["last_seen"]) > timedelta(seconds=60):
            self.service.store.touch_session(h, _iso(now))
        account = self.service.store.get_account(s["email"])
        if account is None or account["removed_at"] is not None:
            self.service.store.delete_session(h)
            return None
        return {**s, "hash": h}

    def ctx(self, request: Request) -> Ctx:
        """The visitor. A browser id signed with the previous secret is signed again with the current
        one on this answer, so the browser keeps its id (and its "signed in here before" marks)
        through every rotation it is used between, not only the next one."""
        value = request.cookies.get(self.settings.browser_cookie_name, "")
        bid, _, sig = value.partition(".")
        if bid and len(value) < 100 and self._signed(sig, "browser", bid):
            current = self._sign("browser", bid)
            resigned = None if hmac.compare_digest(sig.encode("utf-8", "replace"), current.encode()) \
                else f"{bid}.{current}"
            return Ctx(request, bid, None, self.session(request), resigned)
        bid = secrets.token_urlsafe(18)
        return Ctx(request, bid, f"{bid}.{self._sign('browser', bid)}", self.session(request))

    def csrf(self, ctx: Ctx) -> str:
        return str(ctx.session["csrf"]) if ctx.session else self._sign("csrf", ctx.browser)

    def _csrf_ok(self, ctx: Ctx, token: str) -> bool:
        """The session's token; before sign-in, the browser id's HMAC under either signing secret
        (a page loaded before a rotation still sends its form)."""
        if ctx.session:
            return hmac.compare_digest(token.encode(), str(ctx.session["csrf"]).encode())
        return self._signed(token, "csrf", ctx.browser)

    def new_session(self, email: str) -> str:
        sid = secrets.token_urlsafe(32)
        now = _iso(self.service.now())
        self.service.store.create_session(_sid_hash(sid), email, secrets.token_urlsafe(24), now, now)
        return sid

    def _cookie(self, response: Response, name: str, value: str, max_age: int) -> None:
        response.set_cookie(name, value, path="/", secure=self.settings.secure_cookie, httponly=True,
                            samesite="lax", max_age=max_age)

    def render(self, ctx: Ctx, template: str, status: int = 200, **context: Any) -> Response:
        email = ctx.session["email"] if ctx.session else None
        spaces = self.service.spaces(email) if email else []
        html = self.env.get_template(template).render(
            csrf=self.csrf(ctx), email=email, spaces=spaces, scopes=SCOPES,
            scope_endpoints={s: scope_endpoints(s) for s in SCOPES}, **context)
        return self.finish(ctx, HTMLResponse(html, status))

    def finish(self, ctx: Ctx, response: Response) -> Response:
        if ctx.new_browser is not None or ctx.resigned is not None:
            self._cookie(response, self.settings.browser_cookie_name, ctx.new_browser or str(ctx.resigned),
                         BROWSER_COOKIE_DAYS * 86_400)
        return response

    def message(self, ctx: Ctx, status: int, title: str, message: str) -> Response:
        return self.render(ctx, "message.html", status, title=title, message=message)

    def redirect(self, ctx: Ctx, to: str) -> Response:
        return self.finish(ctx, RedirectResponse(to, 303))

    async def form(self, request: Request, ctx: Ctx) -> list[tuple[str, str]]:
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
        if ctx.new_browser is not None or not token or not self._csrf_ok(ctx, token):
            raise Refused(403, "This form has expired or did not come from this site: reload the page and try again.")
        return pairs

    def signed_in(self, request: Request) -> Ctx:
        ctx = self.ctx(request)
        if ctx.session is None:
            raise _SignIn(request.url.path)
        return ctx

    async def post(self, request: Request, act: Action, retry: Retry | None = None, anonymous: bool = False) -> Response:
        """The one form skeleton: guard and parse the form, confirm a fresh code the form carries,
        run `act`, and answer every refusal of the service the same way on every page."""
        ctx = self.ctx(request) if anonymous else self.signed_in(request)
        try:
            pairs = await self.form(request, ctx)
        except Refused as e:
            return self.message(ctx, e.status, "Refused", str(e))
        f = dict(pairs)
        request.state.pairs = pairs  # for a retry that shows a form again with every value
        try:
            if not anonymous and f.get("resend"):
                return self.fresh_code(ctx, pairs, send=True)
            if not anonymous and "code" in f:
                try:
                    self.service.confirm_identity(ctx.email, f["code"], ctx.browser)
                except DashboardError as e:
                    return self.fresh_code(ctx, pairs, send=False, error=str(e))
                assert ctx.session is not None
                ctx.session["verified_at"] = _iso(self.service.now())
                self.service.store.set_verified(ctx.session["hash"], ctx.session["verified_at"])
            return act(ctx, f, pairs)
        except rules.AlreadySubmitted as e:
            space = self.space(ctx)
            return self.render(ctx, "already.html", space=space, base=self.base(space), key_id=e.key_id)
        except rules.NeedsFreshCode as e:
            return self.fresh_code(ctx, pairs, send=True, why=str(e))
        except Limited as e:
            if retry is not None:
                return retry(ctx, f, limit_text(e, self.service.now()), 429)
            return self.message(ctx, 429, "Limit reached", limit_text(e, self.service.now()))
        except rules.NotFound as e:
            return self.message(ctx, 404, "Not found", str(e) if anonymous else "There is no such page.")
        except rules.Forbidden as e:
            return self.message(ctx, 403, "Not allowed", str(e))
        except DashboardError as e:
            if retry is None:
                raise
            return retry(ctx, f, str(e), 400)

    def fresh_code(self, ctx: Ctx, pairs: list[tuple[str, str]], send: bool, error: str | None = None,
                   why: str = "") -> Response:
        """The step before a sensitive action: a code is mailed, and this page sends the same form
        again (its fields kept) with the code, so the action happens once the code is right."""
        status = 200 if error is None else 400
        if send:
            try:
                self.service.request_code(ctx.email, ctx.browser, self.client(ctx.request))
            except rules.Held:
                pass  # answered like a sent code (a signed-in browser is marked for its address: rare)
            except Limited as e:
                error, status = limit_text(e, self.service.now()), 429
        carried = [(k, v) for k, v in pairs if k not in ("csrf", "code", "resend")]
        return self.render(ctx, "reauth.html", status, action=ctx.request.url.path, carried=carried, why=why,
                           sent=send and error is None, error=error)

    @staticmethod
    def space(ctx: Ctx) -> Space:
        org = ctx.request.path_params.get("org")
        return Space("org", org) if org is not None else Space("me", ctx.email)

    @staticmethod
    def base(space: Space) -> str:
        return f"/o/{space.id}" if space.kind == "org" else "/me"

    def _space_name(self, space: Space) -> str:
        if space.kind == "org":
            org = self.service.store.get_org(space.id)
            return str(org["name"]) if org else space.id
        return "My own keys"

    def in_space(self, request: Request) -> tuple[Ctx, Space, str]:
        """A signed-in page of a space: (visitor, space, role); NotFound for a space not theirs."""
        ctx = self.signed_in(request)
        space = self.space(ctx)
        return ctx, space, self.service.role_in(ctx.email, space)

    def space_page(self, ctx: Ctx, space: Space, template: str, status: int = 200, **context: Any) -> Response:
        return self.render(ctx, template, status, space=space, base=self.base(space), space_name=self._space_name(space),
                           today=self.service.now().astimezone(UTC).date(), day_text=day_text,
                           allowance=self.settings.monthly or DEFAULT_MONTHLY, reset=month_reset(self.service.now()),
                           **context)

    # -- pages ---------------------------------------------------------------------------------------
    async def stylesheet(self, request: Request) -> Response:
        return Response(self.css, media_type="text/css", headers={"cache-control": "public, max-age=3600"})

    async def script(self, request: Request) -> Response:
        return Response(self.copy_js, media_type="text/javascript", headers={"cache-control": "public, max-age=3600"})

    async def home(self, request: Request) -> Response:
        s = self.session(request)
        if s is None:
            return RedirectResponse("/sign-in", 303)
        first = self.service.spaces(s["email"])[0]
        return RedirectResponse(self.base(first["space"]) + "/keys", 303)

    async def settings_home(self, request: Request) -> Response:
        ctx, space, _ = self.in_space(request)
        return self.redirect(ctx, self.base(space) + "/keys")

    async def sign_in_page(self, request: Request) -> Response:
        nxt = request.query_params.get("next", "")
        return self.render(self.ctx(request), "sign_in.html", next=nxt if SAFE_NEXT.match(nxt) else "", error=None)

    def _sign_in_again(self, ctx: Ctx, f: dict[str, str], error: str, status: int) -> Response:
        nxt = f.get("next", "")
        return self.render(ctx, "sign_in.html", status, next=nxt if SAFE_NEXT.match(nxt) else "", error=error)

    async def sign_in_send(self, request: Request) -> Response:
        def act(ctx: Ctx, f: dict[str, str], _: Any) -> Response:
            invited = INVITATION_NEXT.match(f.get("next", ""))  # following an invitation's link: its own budget
            # a held code gets the same answer as a sent one: a refusal here would say whether the address is known
            with contextlib.suppress(rules.Held):
                self.service.request_code(f.get("email", ""), ctx.browser, self.client(request),
                                          invitation=invited.group(1) if invited else None)
            nxt = f.get("next", "")
            return self.render(ctx, "code.html", email_value=rules.normalise_email(f.get("email", "")), code="",
                               next=nxt if SAFE_NEXT.match(nxt) else "", error=None, elsewhere=False)
        return await self.post(request, act, self._sign_in_again, anonymous=True)

    async def sign_in_confirm_page(self, request: Request) -> Response:
        """The email's link: a page with a button, so a mail scanner opening the link spends nothing.
        It fills the form only with what looks like an address and a code, and says so when the
        code was asked for in another browser."""
        ctx = self.ctx(request)
        email, code, here = self.service.code_link(request.query_params.get("email", ""),
                                                   request.query_params.get("code", ""), ctx.browser)
        return self.render(ctx, "code.html", email_value=email, code=code, next="", error=None, elsewhere=not here)

    async def sign_in_code(self, request: Request) -> Response:
        def act(ctx: Ctx, f: dict[str, str], _: Any) -> Response:
            email = self.service.sign_in(f.get("email", ""), f.get("code", ""), ctx.browser, self.client(request))
            if ctx.session is not None:
                self.service.store.delete_session(ctx.session["hash"])  # a new id at sign-in: a planted id is worth nothing
            nxt = f.get("next", "")
            response = self.redirect(ctx, nxt if SAFE_NEXT.match(nxt) else "/")
            self._cookie(response, self.settings.cookie_name, self.new_session(email), self.settings.absolute_hours * 3600)
            return response

        def retry(ctx: Ctx, f: dict[str, str], error: str, status: int) -> Response:
            nxt = f.get("next", "")
            return self.render(ctx, "code.html", status, email_value=rules.normalise_email(f.get("email", "")), code="",
                               next=nxt if SAFE_NEXT.match(nxt) else "", error=error, elsewhere=False)
        return await self.post(request, act, retry, anonymous=True)

    async def sign_out(self, request: Request) -> Response:
        def act(ctx: Ctx, f: dict[str, str], _: Any) -> Response:
            assert ctx.session is not None
            self.service.store.delete_session(ctx.session["hash"])
            response = self.redirect(ctx, "/sign-in")
            response.delete_cookie(self.settings.cookie_name, path="/", secure=self.settings.secure_cookie,
                                   httponly=True, samesite="lax")
            return response
        return await self.post(request, act)

    async def keys_page(self, request: Request) -> Response:
        ctx, space, role = self.in_space(request)
        return self.space_page(ctx, space, "keys.html", role=role, keys=self.service.list_keys(ctx.email, space))

    def _new_key_form(self, ctx: Ctx, f: dict[str, str], error: str | None, status: int = 200,
                      scopes: list[str] | None = None) -> Response:
        space = self.space(ctx)
        values = {"name": f.get("name", ""), "scopes": scopes or [], "kind": f.get("kind", "test"),
                  "expires": f.get("expires", "")}
        return self.space_page(ctx, space, "new_key.html", status, values=values, error=error,
                               form_token=f.get("form_token") or secrets.token_urlsafe(16))

    async def new_key_page(self, request: Request) -> Response:
        ctx, space, role = self.in_space(request)
        if role in ("member", "locked"):
            return self.message(ctx, 403, "Not allowed", MEMBER_TEXT[role])
        return self._new_key_form(ctx, {}, None)

    async def create_key(self, request: Request) -> Response:
        def act(ctx: Ctx, f: dict[str, str], pairs: list[tuple[str, str]]) -> Response:
            space = self.space(ctx)
            kid, key = self.service.create_key(ctx.email, space, f.get("name", ""), [v for k, v in pairs if k == "scope"],
                                               f.get("kind", "test"), f.get("expires") or None,
                                               f.get("form_token", "") or secrets.token_urlsafe(16),
                                               ctx.session["verified_at"] if ctx.session else None)
            return self.created(ctx, space, kid, key)

        def retry(ctx: Ctx, f: dict[str, str], error: str, status: int) -> Response:
            return self._new_key_form(ctx, {**f, "form_token": ""}, error, status,
                                      scopes=[v for k, v in ctx.request.state.pairs if k == "scope"])
        return await self.post(request, act, retry)

    def created(self, ctx: Ctx, space: Space, kid: str, key: str) -> Response:
        row = self.service.get_key(ctx.email, space, kid)
        return self.render(ctx, "created.html", space=space, base=self.base(space), key=key, row=row,
                           api=self.settings.api_url.rstrip("/"), path=example_path(row["scopes"]))

    async def key_page(self, request: Request) -> Response:
        ctx, space, role = self.in_space(request)
        row = self.service.get_key(ctx.email, space, request.path_params["kid"])
        return self.space_page(ctx, space, "key.html", role=role, row=row,
                               notice=NOTICES.get(request.query_params.get("done", "")))

    def _manage_key_page(self, request: Request, template: str) -> Response:
        """The revoke and roll pages: only for those who may do it (a member gets the reason, no button)."""
        ctx, space, role = self.in_space(request)
        if role not in ("admin", "owner"):
            return self.message(ctx, 403, "Not allowed", MEMBER_TEXT[role])
        row = self.service.get_key(ctx.email, space, request.path_params["kid"])
        if row["status"] != "active":
            return self.message(ctx, 409, "Nothing to do", "This key is not active any more: it cannot be rolled or revoked.")
        default = (self.service.now().astimezone(UTC).date() + timedelta(days=7)).isoformat()
        if row["expires_on"] and row["expires_on"] < default:
            default = row["expires_on"]
        return self.space_page(ctx, space, template, row=row, form_token=secrets.token_urlsafe(16), error=None,
                               until=default, latest=self._latest_until(row))

    def _latest_until(self, row: dict[str, Any]) -> str:
        latest = (self.service.now().astimezone(UTC).date() + timedelta(days=rules.ROLL_OVERLAP_DAYS)).isoformat()
        return min(latest, row["expires_on"]) if row["expires_on"] else latest

    async def revoke_page(self, request: Request) -> Response:
        return self._manage_key_page(request, "revoke.html")

    async def roll_page(self, request: Request) -> Response:
        return self._manage_key_page(request, "roll.html")

    async def revoke(self, request: Request) -> Response:
        def act(ctx: Ctx, f: dict[str, str], _: Any) -> Response:
            space, kid = self.space(ctx), request.path_params["kid"]
            self.service.revoke_key(ctx.email, space, kid)
            return self.redirect(ctx, f"{self.base(space)}/keys/{kid}?done=revoked")
        return await self.post(request, act)

    async def roll(self, request: Request) -> Response:
        def act(ctx: Ctx, f: dict[str, str], _: Any) -> Response:
            space = self.space(ctx)
            new_id, key = self.service.roll_key(ctx.email, space, request.path_params["kid"], f.get("until", ""),
                                                f.get("form_token", ""), ctx.session["verified_at"] if ctx.session else None)
            return self.created(ctx, space, new_id, key)

        def retry(ctx: Ctx, f: dict[str, str], error: str, status: int) -> Response:
            space = self.space(ctx)
            row = self.service.get_key(ctx.email, space, request.path_params["kid"])
            return self.space_page(ctx, space, "roll.html", status, row=row, until=f.get("until", ""),
                                   form_token=secrets.token_urlsafe(16), error=error, latest=self._latest_until(row))
        return await self.post(request, act, retry)

    async def members_page(self, request: Request) -> Response:
        ctx, space, role = self.in_space(request)
        return self._members(ctx, space, role, REFUSALS.get(request.query_params.get("refused", "")), 200,
                             NOTICES.get(request.query_params.get("done", "")))

    def _members(self, ctx: Ctx, space: Space, role: str, error: str | None, status: int,
                 notice: str | None = None) -> Response:
        return self.space_page(ctx, space, "members.html", status, role=role, error=error, notice=notice,
                               **self.service.members(ctx.email, space))

    async def _member_action(self, request: Request, action: Callable[[Ctx, Space, dict[str, str]], str]) -> Response:
        def act(ctx: Ctx, f: dict[str, str], _: Any) -> Response:
            space = self.space(ctx)
            try:
                done = action(ctx, space, f)
            except rules.LastAdministrator:
                return self.redirect(ctx, f"{self.base(space)}/members?refused=last_admin")
            return self.redirect(ctx, f"{self.base(space)}/members?done={done}")

        def retry(ctx: Ctx, f: dict[str, str], error: str, status: int) -> Response:
            space = self.space(ctx)
            return self._members(ctx, space, self.service.role_in(ctx.email, space), error, status)
        return await self.post(request, act, retry)

    async def invite(self, request: Request) -> Response:
        def action(ctx: Ctx, space: Space, f: dict[str, str]) -> str:
            self.service.invite(ctx.email, space, f.get("email", ""), f.get("role", "member"),
                                ctx.session["verified_at"] if ctx.session else None, client=self.client(request))
            return "invited"
        return await self._member_action(request, action)

    async def change_role(self, request: Request) -> Response:
        def action(ctx: Ctx, space: Space, f: dict[str, str]) -> str:
            role = None if f.get("role") == "remove" else f.get("role", "")
            changed = self.service.set_role(ctx.email, space, f.get("email", ""), role,
                                            ctx.session["verified_at"] if ctx.session else None)
            return "member_removed" if role is None else "role_changed" if changed else "role_unchanged"
        return await self._member_action(request, action)

    async def cancel_invitation(self, request: Request) -> Response:
        def action(ctx: Ctx, space: Space, f: dict[str, str]) -> str:
            self.service.cancel_invitation(ctx.email, space, request.path_params["inv"])
            return "invitation_cancelled"
        return await self._member_action(request, action)

    async def invitation_page(self, request: Request) -> Response:
        ctx = self.signed_in(request)
        try:
            inv = self.service.invitation(ctx.email, request.path_params["token"])
        except rules.NotFound as e:
            return self.message(ctx, 404, "Not found", str(e))
        return self.render(ctx, "invitation.html", inv=inv, token=request.path_params["token"])

    async def invitation_accept(self, request: Request) -> Response:
        def act(ctx: Ctx, f: dict[str, str], _: Any) -> Response:
            try:
                org = self.service.accept_invitation(ctx.email, request.path_params["token"])
            except rules.NotFound as e:
                return self.message(ctx, 404, "Not found", str(e))
            return self.redirect(ctx, f"/o/{org}/keys")
        return await self.post(request, act)

    def _request_access_form(self, ctx: Ctx, error: str | None, status: int = 200, sent: bool = False) -> Response:
        return self.render(ctx, "request_access.html", status, requests=self.service.store.access_requests(ctx.email),
                           role=self.service.role_in(ctx.email, Space("me", ctx.email)), error=error, sent=sent)

    async def request_access_page(self, request: Request) -> Response:
        return self._request_access_form(self.signed_in(request), None)

    async def request_access(self, request: Request) -> Response:
        def act(ctx: Ctx, f: dict[str, str], _: Any) -> Response:
            self.service.request_access(ctx.email, f.get("reason", ""))
            return self._request_access_form(ctx, None, sent=True)
        return await self.post(request, act, lambda ctx, f, error, status: self._request_access_form(ctx, error, status))

    async def audit_page(self, request: Request) -> Response:
        ctx, space, _ = self.in_space(request)
        rows = self.service.audit(ctx.email, space)
        return self.space_page(ctx, space, "audit.html", rows=rows[:500], total=len(rows))

    async def audit_csv(self, request: Request) -> Response:
        ctx, space, _ = self.in_space(request)
        rows = self.service.audit(ctx.email, space)
        text = csv_text(["seq", "at_utc", "at_wat", "actor", "action", "target", "detail"],
                        ([r["seq"], r["at"], wat(r["at"]), r["actor"], r["action"], r["target"], r["detail"]]
                         for r in rows), line_end="\r\n")
        name = f"audit-{space.id if space.kind == 'org' else 'me'}.csv"
        return Response(text.encode(), media_type="text/csv; charset=utf-8",
                        headers={"content-disposition": f'attachment; filename="{name}"'})


Action = Callable[[Ctx, dict[str, str], list[tuple[str, str]]], Response]
Retry = Callable[[Ctx, dict[str, str], str, int], Response]


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
            return handlers.message(handlers.ctx(request), 403, "Signed out", "Your session has ended: sign in again.")
        return RedirectResponse(f"/sign-in?next={quote(nxt)}", 303)

    async def not_found(request: Request, exc: Exception) -> Response:
        return handlers.message(handlers.ctx(request), 404, "Not found", "There is no such page.")

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        return PlainTextResponse("Method not allowed", 405)

    def purge() -> None:
        service.recover()
        try:
            service.purge(settings.absolute_hours, settings.idle_minutes)
        except Exception as e:  # a failed purge must not stop the dashboard; the next one tries again
            rules.log_event("dashboard.purge_failed", error=type(e).__name__)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        """Expired rows are forgotten at start and every few minutes, whether or not anyone signs in."""
        async def every() -> None:
            while True:
                await anyio.sleep(PURGE_SECONDS)
                await anyio.to_thread.run_sync(purge)

        await anyio.to_thread.run_sync(purge)
        await anyio.to_thread.run_sync(lambda: handlers.secrets)  # made once per store, at start
        async with anyio.create_task_group() as tg:
            tg.start_soon(every)
            yield
            tg.cancel_scope.cancel()

    app = Starlette(routes=handlers.routes(), lifespan=lifespan,
                    exception_handlers={_SignIn: to_sign_in, rules.NotFound: not_found, 404: not_found,
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
    service = Dashboard(store, state, open_mailer(settings.mailer), settings.base_url, usage=usage,
                        mail_per_hour=settings.mail_per_hour)
    service.recover()  # key changes a crash cut off from their audit rows are recorded before anything else
    return service, create_app(service, settings)
