"""API keys: format, hashing, and the record the gate decides on.

Keys are stored only as SHA-256 hashes: a leaked key store grants nothing. A key is
shown once, at creation; afterwards only its prefix and last four characters are
ever printed. The store interface is deliberately one method wide (`lookup`) so the
SQLite store (local) and the DynamoDB store (edge) are interchangeable.
"""

# Annotations are evaluated, not postponed: a NamedTuple compiles each string annotation when the
# class is created, ~30 µs a field of the CDN function's cold start (docs/deploy.md#measurements).

import builtins
import hashlib
import re
from datetime import UTC, date, datetime
from typing import Any, NamedTuple, Protocol

PREFIXES = {"live": "svc_live_", "test": "svc_test_"}
KEY_LENGTH = 32  # characters after the prefix (docs/keys.md renders this number)
# Letters and digits only, so a double-click selects the whole key (a `-` splits it into words).
KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# Keys issued before had URL-safe characters (`-` and `_` too): they stay valid, so the pattern
# accepts both; only `new_key` is narrower.
KEY_RE = re.compile(r"^svc_(live|test)_[A-Za-z0-9_-]{32}$")


def new_key(kind: str) -> str:
    """32 letters and digits (190 bits) after the kind prefix."""
    import secrets  # administration only: the edge never makes keys, and `secrets` imports `random`

    return PREFIXES[kind] + "".join(secrets.choice(KEY_ALPHABET) for _ in range(KEY_LENGTH))


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_id_of(key: str) -> str:
    """The id a key is listed and audited under (its hash's first 10 hex digits)."""
    return "key_" + hash_key(key)[:10]


def looks_like_key(key: str) -> bool:
    return KEY_RE.fullmatch(key) is not None


class KeyRecord(NamedTuple):
    """What the gate needs to know about a key, joined with its owner's and org's state."""

    id: str
    name: str
    kind: str  # "live" | "test"
    scopes: tuple[str, ...]
    revoked: bool = False
    expires_on: str | None = None  # YYYY-MM-DD: the key stops working at 00:00 UTC that day
    owner: str | None = None
    org: str | None = None
    owner_removed: bool = False
    org_suspended: bool = False
    per_minute: int | None = None  # None: the service default
    monthly: int | None = None  # None: the service default (live keys only)

    def status(self, now: datetime) -> str:
        """`active`, `revoked`, `expired`, `owner_removed` or `org_suspended`.

        Revocation outranks expiry so a revoked key is reported as revoked forever.
        """
        if self.revoked:
            return "revoked"
        if self.expires_on is not None and now >= expiry_instant(self.expires_on):
            return "expired"
        if self.owner_removed:
            return "owner_removed"
        if self.org_suspended:
            return "org_suspended"
        return "active"


def expiry_instant(expires_on: str) -> datetime:
    d = date.fromisoformat(expires_on)
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


class AdminError(Exception):
    """A key-administration request that cannot be carried out (unknown id, bad scope…)."""


def validate_new_key(
    name: str,
    scopes: list[str],
    kind: str,
    expires_on: str | None,
    per_minute: int | None,
    monthly: int | None,
    now: datetime,
    known_scopes: tuple[str, ...],
) -> None:
    """The dashboard's rules for a new key, shared by every store so their messages agree."""
    if kind not in PREFIXES:
        raise AdminError(f"kind must be live or test, not {kind!r}")
    bad = [s for s in scopes if s not in known_scopes]
    if bad:
        raise AdminError(f"unknown scope(s) {', '.join(bad)}; scopes are {', '.join(known_scopes)}")
    if not scopes:
        raise AdminError("a key needs at least one scope")
    if not name.strip():
        raise AdminError("a key needs a name")
    if expires_on is not None:
        try:
            d = date.fromisoformat(expires_on)
        except ValueError as e:
            raise AdminError(f"--expires must be YYYY-MM-DD, not {expires_on!r}") from e
        if len(expires_on) != 10:
            raise AdminError(f"--expires must be YYYY-MM-DD, not {expires_on!r}")
        if d <= now.date():
            raise AdminError(f"--expires {expires_on} is not in the future")
    for label, value in (("--per-minute", per_minute), ("--monthly", monthly)):
        if value is not None and value < 1:
            raise AdminError(f"{label} must be a positive whole number")


class KeyStore(Protocol):
    """Read side used by the gate on every request."""

    def lookup(self, key_hash: str) -> KeyRecord | None: ...


class AdminStore(KeyStore, Protocol):
    """Write side, for key administration (`malaria-risk keys|orgs|accounts`); every store
    raises AdminError with the same messages (validate_new_key)."""

    def create(self, name: str, scopes: builtins.list[str], kind: str = "test", expires_on: str | None = None,
               owner: str | None = None, org: str | None = None, per_minute: int | None = None,
               monthly: int | None = None, now: datetime | None = None,
               created_by: str | None = None, key: str | None = None) -> tuple[str, str]: ...

    # `org` / `owner` limit a change or a read to one holder's keys (the dashboard always passes
    # one); without either, any key (the operator's command line)
    def revoke(self, key_id: str, now: datetime | None = None, *, org: str | None = None,
               owner: str | None = None) -> None: ...

    def shorten_expiry(self, key_id: str, expires_on: str, *, org: str | None = None,
                       owner: str | None = None) -> None: ...

    def get(self, key_id: str, *, org: str | None = None, owner: str | None = None,
            now: datetime | None = None) -> dict[str, Any] | None: ...

    def list_for(self, *, org: str | None = None, owner: str | None = None,
                 now: datetime | None = None) -> builtins.list[dict[str, Any]]: ...

    def set_org_suspended(self, org: str, suspended: bool, now: datetime | None = None) -> None: ...

    def remove_account(self, account: str, now: datetime | None = None, *, require_keys: bool = True) -> None: ...

    def list(self, now: datetime | None = None) -> builtins.list[dict[str, Any]]: ...
