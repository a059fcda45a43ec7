"""API keys: format, hashing, and the record the gate decides on.

Keys are stored only as SHA-256 hashes: a leaked key store grants nothing. A key is
shown once, at creation; afterwards only its prefix and last four characters are
ever printed. The store interface is deliberately one method wide (`lookup`) so the
SQLite store (local) and the DynamoDB store (edge) are interchangeable.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Protocol

PREFIXES = {"live": "svc_live_", "test": "svc_test_"}
KEY_RE = re.compile(r"^svc_(live|test)_[A-Za-z0-9_-]{32}$")


def new_key(kind: str) -> str:
    """32 URL-safe characters (192 bits) after the kind prefix."""
    return PREFIXES[kind] + secrets.token_urlsafe(24)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def looks_like_key(key: str) -> bool:
    return KEY_RE.fullmatch(key) is not None


@dataclass(frozen=True)
class KeyRecord:
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


class KeyStore(Protocol):
    """Read side used by the gate on every request."""

    def lookup(self, key_hash: str) -> KeyRecord | None: ...
