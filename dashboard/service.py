"""What the dashboard and the staff commands may do, and the audit row each change writes.

Every state change goes through one method here, which checks who asks, makes the change
in the key store or the dashboard store, and appends exactly one audit row. The web app
(`dashboard.app`) and the command line (`malaria-risk keys|orgs|accounts`) both call these
methods, so a key created or revoked by an operator shows in the organisation's audit log
like one made in the browser.

A *space* is where keys live: an organisation (`Space("org", ORG)`), whose keys belong to
it (no owner, `created_by` recorded), or a researcher's own (`Space("me", EMAIL)`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

from edge.clients import client_group as client_group  # the grouping every client bound uses
from edge.errors import OperatorError
from edge.keys import PREFIXES, AdminError, AdminStore, key_id_of, new_key
from edge.routes import SCOPES

from .mailer import Mailer
from .settings import MAIL_PER_HOUR

CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ"  # no 0/O, 1/I/L, U: read aloud and typed on phones
CODE_LENGTH = 8  # 30^8 ≈ 6.6e11
CODE_MINUTES = 15
CODE_TRIES = 5  # wrong attempts per code; then it is dead
# Sending budgets, per hour (docs/dashboard.md#sign-in-limits says why these sizes):
CODES_PER_BROWSER = 5  # codes asked for in one browser, for any addresses
MAIL_PER_CLIENT = 20  # codes asked for from one network address (an IPv6 /64), per kind of address
CODES_PER_ADDRESS = 5  # codes mailed to one unknown address, from browsers that have not signed in as it
CODES_PER_CLIENT_ADDRESS = 5  # codes one network address may have mailed to one known address
CODES_PER_KNOWN_ADDRESS = 20  # codes mailed to one known address from every network together
CODES_PER_INVITATION = 5  # codes asked for by people following one invitation's link
INVITATIONS_PER_ADMIN = 30  # invitations one administrator sends
KNOWN_AFTER_DAYS = 14  # a self-made account counts as a known address this long after its first sign-in
POOLS = ("unknown", "known", "member", "invitations")  # the service-wide hourly pools (`malaria-risk dashboard budgets`)
# Keys (docs/rate-limits.md#keys-per-holder says why these sizes): each key has its own limits, so
# these caps are what bound one organisation or researcher in all
KEYS_PER_ORG = 10  # active keys one organisation holds
KEYS_PER_RESEARCHER = 3  # active keys one researcher holds in their own space
KEYS_PER_ADMIN_HOUR = 10  # keys (new or rolled) one person creates in an hour
DEVICE_DAYS = 90  # a browser that signed in as an address keeps its own budget for it this long
INVITATION_DAYS = 7
ROLL_OVERLAP_DAYS = 30  # the longest an old key may keep working after a roll
REAUTH_MINUTES = 10  # a live key or a role change needs a code entered this recently
NAME_MAX = 80
EMAIL_RE = re.compile(r"^[^@\s<>\"']{1,64}@[A-Za-z0-9.-]{1,255}\.[A-Za-z]{2,63}$")
ORG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{1,39}$")
ROLES = ("admin", "member")
LOCAL_ORG = "local"  # the organisation `make run` makes for its printed administrator
T = TypeVar("T")
JOURNAL_GRACE_SECONDS = 600  # longer than any request: a younger open journal entry may still be under way


class DashboardError(OperatorError):
    """A request the dashboard refuses, with a message fit to show the person who asked."""


class NotFound(DashboardError):
    """No such thing, or not yours: both answer the same, so ids of others cannot be probed."""


class Forbidden(DashboardError):
    """You may see this but not change it (a member, a locked researcher)."""


class AlreadySubmitted(DashboardError):
    """A repeated submission of a form that already created a key."""

    def __init__(self, key_id: str | None):
        super().__init__("this form was already submitted")
        self.key_id = key_id


class LastAdministrator(DashboardError):
    """The change would leave an organisation without an administrator."""


LAST_ADMIN_TEXT = ("An organisation keeps at least one administrator. Make another member an administrator "
                   "first, then change this role.")


class KeyCapReached(Forbidden):
    """The organisation or researcher holds as many active keys as it may."""


class NeedsFreshCode(DashboardError):
    """The action needs a sign-in code entered in the last few minutes."""


class Limited(DashboardError):
    """A sending budget is used up until `until`; `which` is browser, client, address, inviter,
    invitation or service."""

    def __init__(self, which: str, until: datetime):
        super().__init__(f"the {which} budget of codes is used up until {_iso(until)}")
        self.which = which
        self.until = until


class Held(Limited):
    """A code not mailed because a budget of the address's kind is used up: answered like a sent
    code (the person is told codes may be held when many are asked), so the answer does not say
    whether the service knows the address. Logged as `dashboard.code_held`."""


def log_event(event: str, **fields: Any) -> None:
    """One JSON line on stderr (CloudWatch keeps it as it is): the operator's metric filters and
    alarms match on `event`, so its names are fixed."""
    print(json.dumps({"event": event, **fields}, separators=(",", ":")), file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Space:
    kind: str  # "org" | "me"
    id: str

    def holder(self) -> dict[str, str]:
        return {"org": self.id} if self.kind == "org" else {"owner": self.id}


def normalise_email(email: str) -> str:
    return email.strip().lower()


def valid_email(email: str) -> bool:
    return EMAIL_RE.fullmatch(email) is not None


def normalise_code(code: str) -> str:
    return "".join(ch for ch in code.upper() if ch.isalnum())


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="seconds")


class Dashboard:
    def __init__(self, keys: AdminStore, store: Any, mailer: Mailer, base_url: str = "",
                 clock: Callable[[], datetime] | None = None, usage: Any = None, mail_per_hour: int = MAIL_PER_HOUR):
        self.mail_per_hour = mail_per_hour
        self.keys = keys
        self.store = store
        self.mailer = mailer
        self.base_url = base_url.rstrip("/")
        self.clock = clock or (lambda: datetime.now(UTC))
        self.usage = usage
        self._log_key: bytes | None = None
        self._send_seconds = 0.0  # the running mean of a sign-in mail's sending time

    def now(self) -> datetime:
        return self.clock()

    def _log_hash(self, value: str) -> str:
        """What log lines carry instead of an address or a client: an HMAC keyed with the store's
        `log_key`, so a list of likely addresses cannot be hashed and matched against the logs,
        while one address still gives one value (lines about it can be followed)."""
        if self._log_key is None:
            self._log_key = self.store.secret("log_key").encode()
        return hmac.new(self._log_key, value.encode(), hashlib.sha256).hexdigest()[:16]

    def _audit(self, actor: str, action: str, *, org: str | None = None, account: str | None = None,
               target: str | None = None, detail: str = "") -> None:
        self.store.append_audit(_iso(self.now()), actor, org, account, action, target, detail)

    # -- key changes and their audit rows ----------------------------------------------------------
    def _journaled(self, work: Callable[[], T], actor: str, action: str, *, org: str | None, account: str | None,
                   target: str, detail: str, done_when: str, form: str | None = None,
                   shorten: tuple[str, str] | None = None, proof: str | None = None) -> T:
        """Run `work` (one key-store write) between a journal entry and its audit row.

        The key store and the dashboard store are two stores, so a crash between the key write and
        the audit write would lose the row. The entry, written first to the dashboard store, holds
        the whole audit row and what shows the change happened (`done_when`: `created` or `revoked`,
        of `proof`, by default `target`); closing it appends the row in the same transaction. An entry a crash left
        open is closed by `recover` at the next start-up: with its row when the key store shows the
        change, without when it does not. `form`: the form token whose result is the new key;
        `shorten`: a roll's old key and its last day, written again on replay."""
        entry_id = f"{time.time_ns():020d}{secrets.token_hex(4)}"  # in time order, as the audit keys sort
        at = _iso(self.now())
        entry = {"at": at, "actor": actor, "org": org, "account": account, "action": action, "target": target,
                 "detail": detail, "done_when": done_when, "proof": proof or target, "form": form,
                 "shorten": list(shorten) if shorten else None}
        self.store.journal_open(entry_id, at, json.dumps(entry, separators=(",", ":")))
        try:
            result = work()
        except BaseException:
            # a failure may come after the key store's write (a roll's second step): the key store
            # says whether the change happened, now
            self._settle(entry_id, at, entry, 0)
            raise
        self.store.journal_close(entry_id, (at, actor, org, account, action, target, detail))
        return result

    def recover(self, older_than_seconds: int = JOURNAL_GRACE_SECONDS) -> int:
        """Close the journal entries a crash left open (run at start-up and with every purge); how
        many were recorded. An entry whose change is not in the key store is dropped only once it is
        older than any request takes, so one still being carried out elsewhere is left to its request
        (and a DynamoDB index that has not caught up yet is asked again at the next purge)."""
        try:
            pending = self.store.journal_pending()
        except Exception as e:  # no store yet (a first start): nothing to recover, the next purge tries again
            log_event("dashboard.journal_replay_failed", error=type(e).__name__)
            return 0
        return sum(self._settle(row["id"], row["created_at"], json.loads(row["entry"]), older_than_seconds) is True
                   for row in pending)

    def _settle(self, entry_id: str, created_at: str, entry: dict[str, Any], older_than_seconds: int) -> bool | None:
        """Close one journal entry as the key store shows it: True when its audit row was written
        here, False when it was dropped (or closed by someone else), None when it is left open."""
        key = self.keys.get(entry["proof"], now=self.now())
        done = key is not None and (entry["done_when"] == "created" or key["revoked_at"] is not None)
        if not done and (self.now() - datetime.fromisoformat(created_at)).total_seconds() < older_than_seconds:
            return None
        if done and entry.get("shorten"):
            old, until = entry["shorten"]
            with contextlib.suppress(AdminError):
                self.keys.shorten_expiry(old, until)
        if done and entry.get("form"):
            self.store.set_form_result(entry["form"], entry["proof"])
        audit = (entry["at"], entry["actor"], entry["org"], entry["account"], entry["action"], entry["target"],
                 entry["detail"]) if done else None
        closed = self.store.journal_close(entry_id, audit)
        if closed and done:
            log_event("dashboard.journal_replayed", action=entry["action"], target=entry["target"])
        return closed and done

    # -- sending budgets -------------------------------------------------------------------------
    def _spend(self, which: str, name: str, limit: int, shown: str | None = None) -> None:
        """Count one mail against a budget of this UTC hour; Limited past `limit` (`shown`: the
        budget the person is told about, when it is not `which`)."""
        refused = self._count(which, name, limit, shown)
        if refused is not None:
            raise refused

    def _count(self, which: str, name: str, limit: int, shown: str | None = None) -> Limited | None:
        """`_spend` that returns the refusal instead of raising it."""
        now = self.now()
        hour = int(now.timestamp()) // 3600
        n = self.store.counter.incr(f"mail:{which}:{name}:{hour}", (hour + 2) * 3600)
        if n <= limit:
            return None
        until = datetime.fromtimestamp((hour + 1) * 3600, UTC)
        if which.startswith("service-"):
            log_event("dashboard.mail_budget_exhausted", budget=which.removeprefix("service-"), limit=limit,
                      until=_iso(until))
        return Limited(shown or which, until)

    def _spend_pool(self, pool: str) -> None:
        refused = self._count_pool(pool)
        if refused is not None:
            raise refused

    def _count_pool(self, pool: str) -> Limited | None:
        """One mail from a service-wide pool; its counter's name carries the pool's generation,
        which `reset_pool` moves on, so the operator can give a flooded pool back at once."""
        return self._count(f"service-{pool}", f"all{self._generation(pool) or ''}", self.mail_per_hour, "service")

    def _generation(self, pool: str) -> int:
        return int(self.store.counter.value(f"mail:generation:{pool}"))

    def budgets(self) -> list[dict[str, Any]]:
        """The service-wide pools of this hour: spent, limit, and when the hour ends."""
        hour = int(self.now().timestamp()) // 3600
        until = _iso(datetime.fromtimestamp((hour + 1) * 3600, UTC))
        return [{"pool": p, "spent": min(self.store.counter.value(
                     f"mail:service-{p}:all{self._generation(p) or ''}:{hour}"), self.mail_per_hour),
                 "limit": self.mail_per_hour, "until": until} for p in POOLS]

    def reset_pool(self, staff: str, pool: str) -> None:
        """Give a pool its whole hour back (a new counter), with an audit row."""
        if pool not in POOLS:
            raise DashboardError(f"no pool {pool!r}; the pools are {', '.join(POOLS)}")
        self.store.counter.incr(f"mail:generation:{pool}", 2**62)
        self._audit(staff, "mail_budget_reset", detail=_detail(pool=pool))

    def _spend_mail(self, to: str, client: str, kind: str) -> Limited | None:
        """The budgets a code for someone not yet proven to own the address passes. First the one
        that is the same for every address, this network's share of it (Limited, shown); then, kept
        apart by the address's kind (`_address_kind`) so a flood of one kind cannot use up another's,
        this network's codes, the address's own and the service's pool of its kind. A refusal by
        those is returned, not raised: the code is then held (not mailed) behind the same answer
        as a sent one, since a visible refusal would tell which kind the address is. Every one is
        counted every time, so both kinds do the same steps."""
        group = client_group(client)
        known = kind != "unknown"
        self._spend("pair", _digest(group, to)[:24], CODES_PER_CLIENT_ADDRESS if known else CODES_PER_ADDRESS,
                    "address")
        held = [self._count(f"client-{kind}", _digest(group)[:24], MAIL_PER_CLIENT, "client"),
                self._count(f"address-{kind}", _digest(to)[:24], CODES_PER_KNOWN_ADDRESS if known else CODES_PER_ADDRESS,
                            "address"),
                self._count_pool(kind)]
        return next((h for h in held if h is not None), None)

    def _address_kind(self, email: str) -> str:
        """Which pool a code for `email` draws on. `member`: an account (not removed) that staff or an
        administrator vouched for (a member of an organisation, a researcher staff unlocked), or an
        address with a live invitation from a current administrator; `known`: any other account made
        at least KNOWN_AFTER_DAYS ago; `unknown`: every other address. A first sign-in alone makes no
        address known, so a catch-all domain's addresses, signed in once, spend only the unknown pool,
        and accounts aged on purpose spend only the known one: neither reaches members."""
        account = self.store.get_account(email)
        orgs = self.store.orgs_of(email)  # every read for every address: the timing tells nothing
        invited = any(self._may_still_invite(i) for i in self.store.invitations_to(email, _iso(self.now())))
        live = account is not None and account["removed_at"] is None
        if invited or (live and (account["unlocked_at"] or orgs)):  # type: ignore[index]
            return "member"
        if live and datetime.fromisoformat(account["created_at"]) <= self.now() - timedelta(days=KNOWN_AFTER_DAYS):  # type: ignore[index]
            return "known"
        return "unknown"

    def _invitation_for(self, email: str, token: str | None) -> dict[str, Any] | None:
        """The live invitation `token` names, when it was sent to `email` by a current administrator."""
        if not token:
            return None
        inv = self.store.invitation_by_token(_digest(token))
        if inv is None or inv["used_at"] or inv["cancelled_at"] or inv["expires_at"] <= _iso(self.now()) \
                or inv["email"] != email or not self._may_still_invite(inv):
            return None
        return inv

    # -- sign-in -------------------------------------------------------------------------------
    def request_code(self, email: str, browser: str = "cli", client: str = "cli", invitation: str | None = None) -> None:
        """Mail a sign-in code that only `browser` can use.

        Budgets: the browser's own; then, unless this browser has signed in as this address
        before (a device cookie, so a stranger cannot use up its owner's codes), either the
        invitation's own (`invitation`: the token of the link being followed, valid for this
        address) or those of `_spend_mail`, kept apart for known and unknown addresses. Limited
        says which and until when. Every address state (unknown, removed, active) does the same
        work: the same reads and writes and one mail (a removed account's says it can no longer
        sign in), so timing tells nothing.
        """
        email = normalise_email(email)
        if not valid_email(email):
            raise DashboardError("enter an email address, like name@example.org")
        now = self.now()
        device = self.store.known_device(_digest(browser), email, _iso(now - timedelta(days=DEVICE_DAYS)))
        kind = self._address_kind(email)
        invited = self._invitation_for(email, invitation)
        self._spend("browser", _digest(browser)[:24], CODES_PER_BROWSER)
        held = None
        if invited is not None and not device:
            self._spend("invitation", str(invited["token_hash"])[:24], CODES_PER_INVITATION)
        elif not device:
            held = self._spend_mail(email, client, kind)
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        account = self.store.get_account(email)
        self.store.add_code(email, _digest(browser), _digest(email, code), _iso(now),
                            _iso(now + timedelta(minutes=CODE_MINUTES)))
        hashed = {"address": self._log_hash(email), "client": self._log_hash(client_group(client))}  # either way
        if held is not None:
            log_event("dashboard.code_held", budget=held.which, **hashed)
            self._pace()  # as long as a mail takes: the answer's timing does not tell a held code from a sent one
            raise Held(held.which, held.until)
        if account is not None and account["removed_at"] is not None:
            self._send(email, "Your dashboard account was removed", (
                "Someone asked for a sign-in code for this address on the malaria risk data service dashboard, "
                "but its account was removed, so it cannot sign in. If you need access, ask your organisation's "
                "administrator or the service team. If you did not ask, ignore this email."))
            return
        shown = f"{code[:4]}-{code[4:]}"
        link = f"{self.base_url}/sign-in/confirm?email={_q(email)}&code={code}"
        self._send(email, f"Your sign-in code: {shown}", (
            f"Your code for the malaria risk data service dashboard is {shown}.\n\n"
            f"Or open this link in the same browser and press the button on the page:\n{link}\n\n"
            f"The code works once, for {CODE_MINUTES} minutes, in the browser where it was asked for. "
            f"If you did not ask for it, ignore this email."))

    def _send(self, to: str, subject: str, text: str) -> None:
        """Mail, keeping a running mean of how long sending takes (what `_pace` waits)."""
        started = time.monotonic()
        self.mailer.send(to, subject, text)
        self._send_seconds += (time.monotonic() - started - self._send_seconds) / 8

    def _pace(self) -> None:
        time.sleep(self._send_seconds)

    def code_link(self, email: str, code: str, browser: str) -> tuple[str, str, bool]:
        """What the email's link may put in the sign-in form (only an address and a code of the
        code's alphabet, never other text), and whether a code asked for in `browser` waits there."""
        email, code = normalise_email(email), normalise_code(code)
        email = email if valid_email(email) else ""
        code = code if len(code) == CODE_LENGTH and all(c in CODE_ALPHABET for c in code) else ""
        here = bool(email) and self.store.live_code(email, _digest(browser), _iso(self.now())) is not None
        return email, code if here else "", here

    def check_code(self, email: str, code: str, browser: str = "cli", client: str = "cli") -> str:
        """The account's email if `code` is its live code asked for in `browser`; every failure
        answers alike, is logged, and (when a code was tried) leaves an audit row for the address."""
        email = normalise_email(email)
        now = self.now()
        failed = DashboardError("that code is not valid here: check it, or ask for a new one in this browser")
        row = self.store.live_code(email, _digest(browser), _iso(now)) if valid_email(email) else None
        if row is None:
            hmac.compare_digest(_digest(email, normalise_code(code)), "0" * 64)  # the same work as a real check
            log_event("dashboard.sign_in_failed", reason="no_code", address=self._log_hash(email),
                      client=self._log_hash(client_group(client)))
            raise failed
        reason = None
        if not self.store.spend_try(row["id"], CODE_TRIES):
            reason = "code_used_up"
        elif not hmac.compare_digest(_digest(email, normalise_code(code)), row["code_hash"]):
            reason = "wrong_code"
        elif not self.store.use_code(row["id"], _iso(now)):
            reason = "code_used_up"
        if reason is not None:
            log_event("dashboard.sign_in_failed", reason=reason, address=self._log_hash(email),
                      client=self._log_hash(client_group(client)))
            self._audit("unverified", "sign_in_failed", account=email, target=email,
                        detail=_detail(reason=reason, browser=_digest(browser)[:8]))
            raise failed
        account = self.store.ensure_account(email, _iso(now))
        if account["removed_at"] is not None:
            raise failed
        self.store.remember_device(_digest(browser), email, _iso(now))
        return email

    def sign_in(self, email: str, code: str, browser: str = "cli", client: str = "cli") -> str:
        """One audit row in the account's own log and one in each of its organisations' logs."""
        email = self.check_code(email, code, browser, client)
        self._audit(email, "sign_in", account=email, target=email)
        for o in self.store.orgs_of(email):
            self._audit(email, "sign_in", org=o["org"], account=email, target=email)
        return email

    def confirm_identity(self, email: str, code: str, browser: str = "cli") -> None:
        """Re-entering a code before a sensitive action: one audit row, like a sign-in."""
        self.check_code(email, code, browser)
        self._audit(email, "identity_confirmed", account=email)

    def purge(self, absolute_hours: int, idle_minutes: int) -> dict[str, int]:
        """Forget what has expired (sessions, codes, form tokens, device marks, budget windows):
        run on a schedule (`dashboard.app` every few minutes), never on someone's request."""
        now = self.now()
        return self.store.purge(_iso(now - timedelta(hours=absolute_hours)), _iso(now - timedelta(minutes=idle_minutes)),
                                _iso(now - timedelta(days=2)), _iso(now - timedelta(days=DEVICE_DAYS)),
                                int(now.timestamp()))

    def needs_fresh_code(self, verified_at: str | None) -> bool:
        if verified_at is None:
            return True
        return self.now() - datetime.fromisoformat(verified_at) > timedelta(minutes=REAUTH_MINUTES)

    # -- who may do what -------------------------------------------------------------------------
    def spaces(self, email: str) -> list[dict[str, Any]]:
        """The places this account can see keys: its organisations, then its own (researcher) space."""
        out = [{"space": Space("org", o["org"]), "name": o["name"], "role": o["role"]}
               for o in self.store.orgs_of(email)]
        account = self.store.get_account(email) or {}
        out.append({"space": Space("me", email), "name": "My own keys (researcher)",
                    "role": "owner" if account.get("unlocked_at") else "locked"})
        return out

    def role_in(self, email: str, space: Space) -> str:
        """`admin`, `member`, `owner` (own unlocked space), `locked` (own space, not unlocked); NotFound otherwise."""
        account = self.store.get_account(email)
        if account is None or account["removed_at"] is not None:
            raise NotFound("no such page")
        if space.kind == "org":
            role = self.store.role(space.id, email)
            if role is None:
                raise NotFound("no such organisation")
            return role
        if space.id != email:
            raise NotFound("no such page")
        return "owner" if account["unlocked_at"] else "locked"

    def _may_manage_keys(self, email: str, space: Space) -> None:
        role = self.role_in(email, space)
        if role == "member":
            raise Forbidden("only the organisation's administrators can create, roll or revoke its keys")
        if role == "locked":
            raise Forbidden("API access is not unlocked for this account yet: request it on this page")

    def _may_manage_members(self, email: str, space: Space) -> None:
        if space.kind != "org" or self.role_in(email, space) != "admin":
            raise Forbidden("only the organisation's administrators can manage its members")

    # -- keys ----------------------------------------------------------------------------------
    def list_keys(self, email: str, space: Space) -> list[dict[str, Any]]:
        self.role_in(email, space)
        rows: list[dict[str, Any]] = self.keys.list_for(**space.holder(), now=self.now())
        return [self._with_usage(r) for r in rows]

    def get_key(self, email: str, space: Space, key_id: str) -> dict[str, Any]:
        self.role_in(email, space)
        row = self.keys.get(key_id, **space.holder(), now=self.now())
        if row is None:
            raise NotFound("no such key")
        return self._with_usage(row)

    def _with_usage(self, row: dict[str, Any]) -> dict[str, Any]:
        if self.usage is None:
            return {**row, "usage": None}
        usage = self.usage.read(row["id"], self.now())
        if usage.last_used:
            self.store.remember_last_used(row["id"], usage.last_used)
        else:
            usage = usage._replace(last_used=self.store.last_used(row["id"]))
        return {**row, "usage": usage}

    def _check_new_key(self, name: str, scopes: list[str], kind: str, expires_on: str | None) -> str:
        name = " ".join(name.split())
        if len(name) > NAME_MAX:
            raise DashboardError(f"a key name has at most {NAME_MAX} characters")
        try:
            from edge.keys import validate_new_key

            validate_new_key(name, scopes, kind, expires_on, None, None, self.now(), SCOPES)
        except AdminError as e:
            raise DashboardError(str(e).replace("--expires", "the expiry")) from None
        return name

    def _check_key_cap(self, space: Space, who: str, override: bool = False) -> None:
        """Refuse a new key past the holder's cap of active keys (per-key limits multiply with the
        number of keys); staff may go past it with `override`. Either way one log line for the alarm."""
        cap = KEYS_PER_ORG if space.kind == "org" else KEYS_PER_RESEARCHER
        active = sum(r["status"] == "active" for r in self.keys.list_for(**space.holder(), now=self.now()))
        if active < cap:
            return
        holder = space.id if space.kind == "org" else self._log_hash(space.id)
        log_event("dashboard.key_cap_reached", holder_kind=space.kind, holder=holder, cap=cap, active=active,
                  overridden=override)
        if not override:
            whose = "this organisation" if space.kind == "org" else "a researcher"
            raise KeyCapReached(f"{whose} can hold {cap} active keys at once, and has {active}: revoke one you no "
                                f"longer use, or ask the service team")

    def _spend_key_creation(self, email: str) -> None:
        """Keys one person may create (or roll) in an hour: LimitedKeys past KEYS_PER_ADMIN_HOUR."""
        try:
            self._spend("keys", _digest(email)[:24], KEYS_PER_ADMIN_HOUR)
        except Limited as e:
            log_event("dashboard.key_creation_limited", who=self._log_hash(email), limit=KEYS_PER_ADMIN_HOUR,
                      until=_iso(e.until))
            raise

    def create_key(self, email: str, space: Space, name: str, scopes: list[str], kind: str,
                   expires_on: str | None, form_token: str, verified_at: str | None = None) -> tuple[str, str]:
        """(key id, key). A repeated `form_token` raises AlreadySubmitted naming the first key."""
        self._may_manage_keys(email, space)
        name = self._check_new_key(name, scopes, kind, expires_on)
        if kind == "live" and self.needs_fresh_code(verified_at):
            raise NeedsFreshCode("creating a live key needs a fresh sign-in code")
        self._check_key_cap(space, email)
        if not self.store.claim_form(form_token, _iso(self.now())):
            raise AlreadySubmitted(self.store.form_result(form_token))
        self._spend_key_creation(email)
        owner = space.id if space.kind == "me" else None
        org = space.id if space.kind == "org" else None
        key = new_key(kind)
        kid = key_id_of(key)
        self._journaled(lambda: self.keys.create(name, scopes, kind, expires_on, owner, org, now=self.now(),
                                                 created_by=email, key=key),
                        email, "key_created", org=org, account=owner, target=kid, done_when="created", form=form_token,
                        detail=_detail(name=name, kind=kind, scopes=" ".join(sorted(set(scopes))),
                                       expires=expires_on or "never"))
        self.store.set_form_result(form_token, kid)
        return kid, key

    def revoke_key(self, email: str, space: Space, key_id: str) -> None:
        self._may_manage_keys(email, space)
        row = self.keys.get(key_id, **space.holder(), now=self.now())
        if row is None:
            raise NotFound("no such key")
        if row["revoked_at"] is not None:
            return  # nothing changes, nothing to record
        try:
            self._journaled(lambda: self.keys.revoke(key_id, self.now(), **space.holder()), email, "key_revoked",
                            org=space.id if space.kind == "org" else None,
                            account=space.id if space.kind == "me" else None, target=key_id,
                            detail=_detail(name=row["name"]), done_when="revoked")
        except AdminError:
            raise NotFound("no such key") from None

    def roll_key(self, email: str, space: Space, key_id: str, old_until: str, form_token: str,
                 verified_at: str | None = None) -> tuple[str, str]:
        """A new key with the same name, scopes, kind and expiry; the old one keeps working until
        `old_until` (00:00 UTC), never later than its own expiry."""
        self._may_manage_keys(email, space)
        row = self.keys.get(key_id, **space.holder(), now=self.now())
        if row is None:
            raise NotFound("no such key")
        if row["status"] != "active":
            raise DashboardError("only an active key can be rolled")
        try:
            until = date.fromisoformat(old_until)
        except ValueError:
            raise DashboardError("choose the day the old key stops working") from None
        today = self.now().astimezone(UTC).date()
        if until <= today:
            raise DashboardError("the old key's last day must be after today (revoke it to stop it now)")
        if row["expires_on"] is not None and until.isoformat() > row["expires_on"]:
            raise DashboardError(f"the old key expires on {row['expires_on']} already; choose that day or earlier")
        if until > today + timedelta(days=ROLL_OVERLAP_DAYS):
            raise DashboardError(f"the old key can keep working for {ROLL_OVERLAP_DAYS} days at most: choose "
                                 f"{(today + timedelta(days=ROLL_OVERLAP_DAYS)).isoformat()} or earlier")
        if row["kind"] == "live" and self.needs_fresh_code(verified_at):
            raise NeedsFreshCode("rolling a live key needs a fresh sign-in code")
        if not self.store.claim_form(form_token, _iso(self.now())):
            raise AlreadySubmitted(self.store.form_result(form_token))
        self._spend_key_creation(email)  # a roll replaces a key within 30 days, so the holder's cap does not stop it
        owner = space.id if space.kind == "me" else None
        org = space.id if space.kind == "org" else None
        key = new_key(row["kind"])
        kid = key_id_of(key)

        def work() -> None:
            self.keys.create(row["name"], row["scopes"].split(), row["kind"], row["expires_on"], owner, org,
                             now=self.now(), created_by=email, key=key)
            self.keys.shorten_expiry(key_id, until.isoformat(), **space.holder())

        # the row names the old key; what shows the roll happened is the new key
        self._journaled(work, email, "key_rolled", org=org, account=owner, target=key_id, done_when="created",
                        proof=kid, form=form_token, shorten=(key_id, until.isoformat()),
                        detail=_detail(new_key=kid, old_key_until=until.isoformat()))
        self.store.set_form_result(form_token, kid)
        return kid, key

    # -- organisations, members, invitations -------------------------------------------------------
    def members(self, email: str, space: Space) -> dict[str, Any]:
        self.role_in(email, space)
        if space.kind != "org":
            raise NotFound("no such page")
        return {"members": self.store.members(space.id),
                "invitations": [i for i in self.store.pending_invitations(space.id, _iso(self.now()))
                                if self._may_still_invite({**i, "org": space.id})]}

    def invite(self, email: str, space: Space, invitee: str, role: str, verified_at: str | None = None,
               client: str = "cli") -> None:
        self._may_manage_members(email, space)
        invitee = normalise_email(invitee)
        if not valid_email(invitee):
            raise DashboardError("enter the email address of the person to invite")
        if role not in ROLES:
            raise DashboardError("the role is admin or member")
        if role == "admin" and self.needs_fresh_code(verified_at):
            raise NeedsFreshCode("inviting an administrator needs a fresh sign-in code")
        if self.store.role(space.id, invitee) is not None:
            raise DashboardError(f"{invitee} is already a member")
        # An administrator's own budget and the invitations' pool: only signed-in administrators spend
        # either, so no stranger asking codes (for the invitee's address or anyone's) can use them up.
        self._spend("inviter", _digest(email)[:24], INVITATIONS_PER_ADMIN)
        self._spend_pool("invitations")
        token = secrets.token_urlsafe(24)
        now = self.now()
        inv_id = "inv_" + secrets.token_hex(5)
        self.store.add_invitation({"id": inv_id, "token_hash": _digest(token), "org": space.id, "email": invitee,
                                   "role": role, "invited_by": email, "created_at": _iso(now),
                                   "expires_at": _iso(now + timedelta(days=INVITATION_DAYS))})
        org = self.store.get_org(space.id) or {"name": space.id}
        self.mailer.send(invitee, f"Invitation to {org['name']} on the malaria risk data service", (
            f"{email} invites you to join {org['name']} as {role} on the malaria risk data service dashboard.\n\n"
            f"Open this link, sign in with this email address, and press the button to accept:\n"
            f"{self.base_url}/invitations/{token}\n\nThe invitation works once, for {INVITATION_DAYS} days."))
        self._audit(email, "member_invited", org=space.id, target=invitee, detail=_detail(role=role, id=inv_id))

    def invitation(self, email: str, token: str) -> dict[str, Any]:
        inv = self.store.invitation_by_token(_digest(token))
        if inv is not None and inv["email"] == email and inv["cancelled_at"] and not inv["used_at"]:
            raise NotFound("this invitation is no longer valid: it was cancelled, or the person who sent it can no "
                           "longer invite members")
        if inv is None or inv["used_at"] or inv["cancelled_at"] or inv["expires_at"] <= _iso(self.now()) \
                or inv["email"] != email:
            raise NotFound("this invitation is not valid for this account (used, expired, or sent to another address)")
        if not self._may_still_invite(inv):
            raise NotFound("this invitation is no longer valid: the person who sent it can no longer invite members")
        org = self.store.get_org(inv["org"]) or {"name": inv["org"]}
        return {**inv, "org_name": org["name"]}

    def _may_still_invite(self, inv: dict[str, Any]) -> bool:
        """An invitation lives only while its sender is an administrator of the organisation (and a
        demotion or removal also cancels it for good, so a re-promotion does not bring it back)."""
        inviter = self.store.get_account(inv["invited_by"])
        return (inviter is not None and inviter["removed_at"] is None
                and self.store.role(inv["org"], inv["invited_by"]) == "admin")

    def accept_invitation(self, email: str, token: str) -> str:
        inv = self.invitation(email, token)
        if not self.store.use_invitation(inv, _iso(self.now())):
            raise NotFound("this invitation was already used")
        if self.store.role(inv["org"], email) is None:
            self.store.set_role(inv["org"], email, inv["role"], _iso(self.now()))
        self._audit(email, "member_joined", org=inv["org"], target=email, detail=_detail(role=inv["role"], id=inv["id"]))
        return str(inv["org"])

    def cancel_invitation(self, email: str, space: Space, inv_id: str) -> None:
        self._may_manage_members(email, space)
        if not self.store.cancel_invitation(space.id, inv_id, _iso(self.now())):
            raise NotFound("no such invitation")
        self._audit(email, "invitation_cancelled", org=space.id, target=inv_id)

    def set_role(self, email: str, space: Space, member: str, role: str | None,
                 verified_at: str | None = None) -> bool:
        """Change a member's role, or with None remove them; the last administrator stays.
        False when nothing changed (the member had that role already)."""
        self._may_manage_members(email, space)
        if role is not None and role not in ROLES:
            raise DashboardError("the role is admin or member")
        current = self.store.role(space.id, member)
        if current is None:
            raise NotFound("no such member")
        if current == role:
            return False
        if self.needs_fresh_code(verified_at):
            raise NeedsFreshCode("changing a role needs a fresh sign-in code")
        if not self.store.change_role_keeping_an_admin(space.id, member, role):
            raise LastAdministrator(LAST_ADMIN_TEXT)
        if current == "admin":  # their invitations end now, and stay ended if they become an admin again
            self.store.cancel_invitations_from(space.id, member, _iso(self.now()))
        if role is None:
            self._audit(email, "member_removed", org=space.id, target=member)
        else:
            self._audit(email, "role_changed", org=space.id, target=member, detail=_detail(role=role))
        return True

    # -- researchers ------------------------------------------------------------------------------------
    def request_access(self, email: str, reason: str) -> None:
        reason = " ".join(reason.split())
        if not 10 <= len(reason) <= 1000:
            raise DashboardError("tell us in 10 to 1000 characters what you will use the API for")
        self.store.add_access_request(email, reason, _iso(self.now()))
        self._audit(email, "access_requested", account=email, detail=reason[:200])

    def audit(self, email: str, space: Space) -> list[dict[str, Any]]:
        self.role_in(email, space)
        if space.kind == "org":
            return self.store.audit(org=space.id)
        return self.store.audit(account=space.id)

    # -- the service team (command line) ------------------------------------------------------------------
    def create_org(self, staff: str, org: str, name: str, admin: str) -> None:
        admin = normalise_email(admin)
        if not ORG_RE.fullmatch(org):
            raise DashboardError(f"organisation id {org!r}: 2-40 of a-z, 0-9 and -, starting with a letter or digit")
        if not valid_email(admin):
            raise DashboardError(f"{admin!r} is not an email address")
        if not name.strip():
            raise DashboardError("an organisation needs a name")
        now = _iso(self.now())
        if not self.store.create_org(org, " ".join(name.split()), now):
            raise DashboardError(f"organisation {org!r} exists already")
        self.store.ensure_account(admin, now)
        self.store.set_role(org, admin, "admin", now)
        self._audit(staff, "org_created", org=org, target=admin, detail=_detail(name=name, admin=admin))

    def ensure_local_org(self, admin: str) -> bool:
        """The local organisation `make run` offers a newcomer, with `admin` as its administrator:
        made once (True), left as it is afterwards (False), so restarts change nothing."""
        if self.store.get_org(LOCAL_ORG) is not None:
            admin = normalise_email(admin)
            if self.store.role(LOCAL_ORG, admin) is None:
                now = _iso(self.now())
                self.store.ensure_account(admin, now)
                self.store.set_role(LOCAL_ORG, admin, "admin", now)
                self._audit("staff:make-run", "role_changed", org=LOCAL_ORG, target=admin, detail=_detail(role="admin"))
                return True
            return False
        self.create_org("staff:make-run", LOCAL_ORG, "Local organisation", admin)
        return True

    def set_unlocked(self, staff: str, email: str, unlocked: bool) -> None:
        email = normalise_email(email)
        account = self.store.get_account(email)
        if account is None or account["removed_at"] is not None:
            raise DashboardError(f"no account {email!r} (it is made when its owner first signs in)")
        if bool(account["unlocked_at"]) == unlocked:
            return
        now = _iso(self.now())
        self.store.set_unlocked(email, now if unlocked else None)
        if unlocked:
            self.store.answer_access_requests(email, now)
        self._audit(staff, "api_access_unlocked" if unlocked else "api_access_locked", account=email, target=email)

    def remove_account(self, staff: str, email: str) -> None:
        """The account's own keys answer 401 from the next request; its organisations' keys keep working."""
        email = normalise_email(email)
        account = self.store.get_account(email)
        if account is None:
            try:  # an account known only to the key store (made with `keys create --owner`)
                self.keys.remove_account(email, self.now())
            except AdminError:
                raise DashboardError(f"no account {email!r}") from None
            self._audit(staff, "account_removed", account=email, target=email)
            return
        if account["removed_at"] is not None:
            return
        for org in self.store.orgs_of(email):
            if org["role"] == "admin" and sum(m["role"] == "admin" for m in self.store.members(org["org"])) == 1:
                raise DashboardError(f"{email} is the last administrator of {org['org']}: make someone else one first")
        self.keys.remove_account(email, self.now(), require_keys=False)
        for org in self.store.orgs_of(email):
            if org["role"] == "admin":
                self.store.cancel_invitations_from(org["org"], email, _iso(self.now()))
        self.store.set_removed(email, _iso(self.now()))
        self._audit(staff, "account_removed", account=email, target=email)

    def rotate_signing_secret(self, staff: str) -> None:
        """A new cookie-signing secret (the current one stays accepted as the previous one)."""
        self.store.rotate_signing_secret()
        self._audit(staff, "signing_secret_rotated")

    def set_org_suspended(self, staff: str, org: str, suspended: bool) -> None:
        self.keys.set_org_suspended(org, suspended, self.now())
        self._audit(staff, "org_suspended" if suspended else "org_restored", org=org, target=org)

    def staff_create_key(self, staff: str, name: str, scopes: list[str], kind: str, expires_on: str | None,
                         owner: str | None, org: str | None, per_minute: int | None,
                         monthly: int | None, over_cap: bool = False) -> tuple[str, str]:
        """The operator's key: the holder's cap applies unless `over_cap` (logged all the same)."""
        if org is not None or owner is not None:
            self._check_key_cap(Space("org", org) if org is not None else Space("me", str(owner)), staff, over_cap)
        key = new_key(kind) if kind in PREFIXES else ""
        kid = key_id_of(key)
        self._journaled(lambda: self.keys.create(name, scopes, kind, expires_on, owner, org, per_minute, monthly,
                                                 now=self.now(), created_by=staff, key=key or None),
                        staff, "key_created", org=org, account=owner if org is None else None, target=kid,
                        done_when="created", detail=_detail(name=name, kind=kind, scopes=" ".join(sorted(set(scopes))),
                                                            expires=expires_on or "never"))
        return kid, key

    def staff_revoke_key(self, staff: str, key_id: str) -> None:
        row = self.keys.get(key_id, now=self.now()) if hasattr(self.keys, "get") else None
        if row is not None and row["revoked_at"] is not None:
            return
        self._journaled(lambda: self.keys.revoke(key_id, self.now()), staff, "key_revoked",
                        org=row["org"] if row else None, account=row["owner"] if row and not row["org"] else None,
                        target=key_id, detail=_detail(name=row["name"]) if row else "", done_when="revoked")


def _detail(**fields: str) -> str:
    return " ".join(f"{k}={v!r}" if " " in v else f"{k}={v}" for k, v in fields.items())


def _q(s: str) -> str:
    from urllib.parse import quote

    return quote(s, safe="")
