"""Dashboard state in SQLite, in its own file beside the key store (`var/dashboard.sqlite`).

A separate file because every commit to the key store empties the gate's key cache
(`edge.stores.sqlite.ChangeAwareKeyCache`): sessions and audit rows are written on most
dashboard requests and must not cost the API its cache.

The audit table is append-only: triggers refuse UPDATE and DELETE, so no code path of the
dashboard (or a mistaken one) can rewrite history. Sign-in codes, session ids and
invitation tokens are stored only as SHA-256 hashes.
"""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path
from typing import Any

from edge.stores.counters import SQLiteCounter
from edge.stores.sqlite import SQLiteFile

SCHEMA = """
CREATE TABLE IF NOT EXISTS accounts (
    email TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    unlocked_at TEXT,
    removed_at TEXT
);
CREATE TABLE IF NOT EXISTS orgs (
    org TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memberships (
    org TEXT NOT NULL,
    email TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('admin', 'member')),
    since TEXT NOT NULL,
    PRIMARY KEY (org, email)
);
CREATE INDEX IF NOT EXISTS memberships_by_email ON memberships (email);
CREATE TABLE IF NOT EXISTS invitations (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    org TEXT NOT NULL,
    email TEXT NOT NULL,
    role TEXT NOT NULL,
    invited_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at TEXT,
    cancelled_at TEXT
);
CREATE INDEX IF NOT EXISTS invitations_by_email ON invitations (email);
CREATE TABLE IF NOT EXISTS codes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    email TEXT NOT NULL,
    code_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0,
    used_at TEXT,
    browser TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS codes_by_email ON codes (email, created_at);
CREATE TABLE IF NOT EXISTS devices (
    browser TEXT NOT NULL,
    email TEXT NOT NULL,
    last_seen TEXT NOT NULL,
    PRIMARY KEY (browser, email)
);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    sid_hash TEXT PRIMARY KEY,
    email TEXT,
    csrf TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_seen TEXT NOT NULL,
    verified_at TEXT
);
CREATE INDEX IF NOT EXISTS sessions_by_email ON sessions (email);
CREATE TABLE IF NOT EXISTS forms (
    token TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    result TEXT
);
CREATE TABLE IF NOT EXISTS access_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    email TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at TEXT NOT NULL,
    answered_at TEXT
);
CREATE TABLE IF NOT EXISTS last_used (
    key_id TEXT PRIMARY KEY,
    day TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    org TEXT,
    account TEXT,
    action TEXT NOT NULL,
    target TEXT,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_by_org ON audit (org, seq) WHERE org IS NOT NULL;
CREATE INDEX IF NOT EXISTS audit_by_account ON audit (account, seq) WHERE account IS NOT NULL;
CREATE TABLE IF NOT EXISTS journal (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    entry TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""

AUDIT_COLUMNS = ("seq", "at", "actor", "org", "account", "action", "target", "detail")


def dashboard_path_for(keys_path: Path | str) -> Path:
    """`var/keys.sqlite` → `var/dashboard.sqlite`: beside the keys, never under build/."""
    return Path(keys_path).with_name("dashboard.sqlite")


LATER_COLUMNS = {"codes": {"browser": "TEXT NOT NULL DEFAULT ''"}}  # files made before these gain them on open


class SQLiteDashboardStore(SQLiteFile):
    def __init__(self, path: Path | str):
        super().__init__(path)
        c = self._conn()
        for table, columns in LATER_COLUMNS.items():
            have = {row[1] for row in c.execute(f"PRAGMA table_info({table})")}
            for column, kind in columns.items():
                if have and column not in have:
                    c.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        c.executescript(SCHEMA)
        self.counter = SQLiteCounter(self.path)  # sending budgets: the limiter's counters, in this file

    def _open(self) -> sqlite3.Connection:
        conn = super()._open()
        conn.row_factory = sqlite3.Row
        return conn

    def _one(self, sql: str, args: tuple[Any, ...] = ()) -> dict[str, Any] | None:
        row = self._conn().execute(sql, args).fetchone()
        return None if row is None else dict(row)

    def _all(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self._conn().execute(sql, args).fetchall()]

    def _write(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        return self._conn().execute(sql, args).rowcount

    # -- accounts ------------------------------------------------------------------------
    def ensure_account(self, email: str, now: str) -> dict[str, Any]:
        self._write("INSERT INTO accounts (email, created_at) VALUES (?, ?) ON CONFLICT(email) DO NOTHING",
                    (email, now))
        got = self.get_account(email)
        assert got is not None
        return got

    def get_account(self, email: str) -> dict[str, Any] | None:
        return self._one("SELECT * FROM accounts WHERE email = ?", (email,))

    def set_unlocked(self, email: str, at: str | None) -> None:
        self._write("UPDATE accounts SET unlocked_at = ? WHERE email = ?", (at, email))

    def set_removed(self, email: str, at: str) -> None:
        with self._conn() as c:
            c.execute("UPDATE accounts SET removed_at = ?, unlocked_at = NULL WHERE email = ?", (at, email))
            c.execute("DELETE FROM memberships WHERE email = ?", (email,))
            c.execute("DELETE FROM sessions WHERE email = ?", (email,))

    # -- organisations and memberships -------------------------------------------------------
    def create_org(self, org: str, name: str, now: str) -> bool:
        return self._write("INSERT INTO orgs (org, name, created_at) VALUES (?, ?, ?) ON CONFLICT(org) DO NOTHING",
                           (org, name, now)) == 1

    def get_org(self, org: str) -> dict[str, Any] | None:
        return self._one("SELECT * FROM orgs WHERE org = ?", (org,))

    def orgs_of(self, email: str) -> list[dict[str, Any]]:
        return self._all("SELECT o.org, o.name, m.role FROM memberships m JOIN orgs o ON o.org = m.org"
                         " WHERE m.email = ? ORDER BY o.name", (email,))

    def role(self, org: str, email: str) -> str | None:
        row = self._one("SELECT role FROM memberships WHERE org = ? AND email = ?", (org, email))
        return None if row is None else str(row["role"])

    def members(self, org: str) -> list[dict[str, Any]]:
        return self._all("SELECT email, role, since FROM memberships WHERE org = ? ORDER BY email", (org,))

    def set_role(self, org: str, email: str, role: str, now: str) -> None:
        self._write("INSERT INTO memberships (org, email, role, since) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT(org, email) DO UPDATE SET role = excluded.role", (org, email, role, now))

    def change_role_keeping_an_admin(self, org: str, email: str, role: str | None, force: bool = False) -> bool:
        """Set (or with None remove) a membership unless that would leave the organisation without an
        administrator; one transaction, so two administrators demoting each other cannot both succeed."""
        c = self._conn()
        c.execute("BEGIN IMMEDIATE")
        try:
            admins = c.execute("SELECT email FROM memberships WHERE org = ? AND role = 'admin'", (org,)).fetchall()
            others = [r[0] for r in admins if r[0] != email]
            if role != "admin" and not others and not force:
                c.execute("ROLLBACK")
                return False
            if role is None:
                c.execute("DELETE FROM memberships WHERE org = ? AND email = ?", (org, email))
            else:
                c.execute("UPDATE memberships SET role = ? WHERE org = ? AND email = ?", (role, org, email))
            c.execute("COMMIT")
            return True
        except BaseException:
            c.execute("ROLLBACK")
            raise

    # -- invitations -----------------------------------------------------------------------
    def add_invitation(self, inv: dict[str, Any]) -> None:
        self._write("INSERT INTO invitations (id, token_hash, org, email, role, invited_by, created_at, expires_at)"
                    " VALUES (:id, :token_hash, :org, :email, :role, :invited_by, :created_at, :expires_at)", inv)  # type: ignore[arg-type]

    def invitation_by_token(self, token_hash: str) -> dict[str, Any] | None:
        return self._one("SELECT * FROM invitations WHERE token_hash = ?", (token_hash,))

    def use_invitation(self, inv: dict[str, Any], now: str) -> bool:
        """Single use: only the first of two racing acceptances sees True."""
        return self._write("UPDATE invitations SET used_at = ? WHERE id = ? AND used_at IS NULL"
                           " AND cancelled_at IS NULL AND expires_at > ?", (now, inv["id"], now)) == 1

    def cancel_invitation(self, org: str, inv_id: str, now: str) -> bool:
        return self._write("UPDATE invitations SET cancelled_at = ? WHERE id = ? AND org = ? AND used_at IS NULL"
                           " AND cancelled_at IS NULL", (now, inv_id, org)) == 1

    def invitations_to(self, email: str, now: str) -> list[dict[str, Any]]:
        """The live invitations sent to an address (what makes it an address the service knows)."""
        return self._all("SELECT * FROM invitations WHERE email = ? AND used_at IS NULL AND cancelled_at IS NULL"
                         " AND expires_at > ?", (email, now))

    def cancel_invitations_from(self, org: str, inviter: str, now: str) -> int:
        """End every pending invitation `inviter` sent for `org` (they stop being an administrator)."""
        return self._write("UPDATE invitations SET cancelled_at = ? WHERE org = ? AND invited_by = ?"
                           " AND used_at IS NULL AND cancelled_at IS NULL", (now, org, inviter))

    def pending_invitations(self, org: str, now: str) -> list[dict[str, Any]]:
        return self._all("SELECT id, email, role, invited_by, created_at, expires_at FROM invitations"
                         " WHERE org = ? AND used_at IS NULL AND cancelled_at IS NULL AND expires_at > ?"
                         " ORDER BY created_at", (org, now))

    # -- sign-in codes ---------------------------------------------------------------------
    def add_code(self, email: str, browser: str, code_hash: str, now: str, expires_at: str) -> None:
        """A new code replaces the earlier ones of the same browser for this address, and only those:
        a code asked for in another browser never ends yours."""
        with self._conn() as c:
            c.execute("UPDATE codes SET used_at = ? WHERE email = ? AND browser = ? AND used_at IS NULL",
                      (now, email, browser))
            c.execute("INSERT INTO codes (email, browser, code_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                      (email, browser, code_hash, now, expires_at))

    def live_code(self, email: str, browser: str, now: str) -> dict[str, Any] | None:
        return self._one("SELECT * FROM codes WHERE email = ? AND browser = ? AND used_at IS NULL AND expires_at > ?"
                         " ORDER BY id DESC LIMIT 1", (email, browser, now))

    def spend_try(self, code_id: int, max_tries: int) -> bool:
        """Count one attempt; False when the code has no attempts left (then it is dead)."""
        return self._write("UPDATE codes SET tries = tries + 1 WHERE id = ? AND tries < ? AND used_at IS NULL",
                           (code_id, max_tries)) == 1

    def use_code(self, code_id: int, now: str) -> bool:
        return self._write("UPDATE codes SET used_at = ? WHERE id = ? AND used_at IS NULL", (now, code_id)) == 1

    # -- browsers that signed in (device cookies) --------------------------------------------
    def remember_device(self, browser: str, email: str, now: str) -> None:
        self._write("INSERT INTO devices (browser, email, last_seen) VALUES (?, ?, ?)"
                    " ON CONFLICT(browser, email) DO UPDATE SET last_seen = excluded.last_seen", (browser, email, now))

    def known_device(self, browser: str, email: str, since: str) -> bool:
        return self._one("SELECT 1 AS y FROM devices WHERE browser = ? AND email = ? AND last_seen >= ?",
                         (browser, email, since)) is not None

    # -- secrets ---------------------------------------------------------------------------
    def secret(self, name: str) -> str:
        """A named random secret, made once per store (first writer wins): `signing_secret` signs
        browser cookies, `log_key` keys the address hashes in log lines."""
        self._write("INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT(name) DO NOTHING",
                    (name, secrets.token_hex(32)))
        row = self._one("SELECT value FROM meta WHERE name = ?", (name,))
        assert row is not None
        return str(row["value"])

    def signing_secret(self) -> str:
        return self.secret("signing_secret")

    def signing_secrets(self) -> tuple[str, str | None]:
        """(current, previous): cookies are signed with the current one, accepted with either."""
        current = self.signing_secret()
        row = self._one("SELECT value FROM meta WHERE name = 'signing_secret_previous'")
        return current, None if row is None else str(row["value"])

    def rotate_signing_secret(self) -> None:
        """A new current secret; the current one becomes the previous (the one before is forgotten)."""
        current = self.signing_secret()
        with self._conn() as c:
            c.execute("INSERT INTO meta (name, value) VALUES ('signing_secret_previous', ?)"
                      " ON CONFLICT(name) DO UPDATE SET value = excluded.value", (current,))
            c.execute("UPDATE meta SET value = ? WHERE name = 'signing_secret'", (secrets.token_hex(32),))

    # -- sessions ---------------------------------------------------------------------------
    def create_session(self, sid_hash: str, email: str | None, csrf: str, now: str,
                       verified_at: str | None = None) -> None:
        self._write("INSERT INTO sessions (sid_hash, email, csrf, created_at, last_seen, verified_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)", (sid_hash, email, csrf, now, now, verified_at))

    def get_session(self, sid_hash: str) -> dict[str, Any] | None:
        return self._one("SELECT * FROM sessions WHERE sid_hash = ?", (sid_hash,))

    def touch_session(self, sid_hash: str, now: str) -> None:
        self._write("UPDATE sessions SET last_seen = ? WHERE sid_hash = ?", (now, sid_hash))

    def set_verified(self, sid_hash: str, now: str) -> None:
        self._write("UPDATE sessions SET verified_at = ? WHERE sid_hash = ?", (now, sid_hash))

    def delete_session(self, sid_hash: str) -> None:
        self._write("DELETE FROM sessions WHERE sid_hash = ?", (sid_hash,))

    def purge(self, sessions_created_before: str, idle_before: str, stale_before: str, devices_before: str,
              counters_before: int) -> dict[str, int]:
        """Forget sessions past their timeouts, codes and form tokens older than `stale_before`,
        device marks unused since `devices_before` and finished budget windows; how many of each.
        (DynamoDB expires the same items by TTL.)"""
        with self._conn() as c:
            out = {
                "sessions": c.execute("DELETE FROM sessions WHERE created_at < ? OR last_seen < ?",
                                      (sessions_created_before, idle_before)).rowcount,
                "codes": c.execute("DELETE FROM codes WHERE created_at < ?", (stale_before,)).rowcount,
                "forms": c.execute("DELETE FROM forms WHERE created_at < ?", (stale_before,)).rowcount,
                "devices": c.execute("DELETE FROM devices WHERE last_seen < ?", (devices_before,)).rowcount,
            }
        self.counter.sweep(counters_before)
        return out

    # -- forms submitted once ------------------------------------------------------------------
    def claim_form(self, token: str, now: str) -> bool:
        """True for the first submission of a form token, False for every repeat."""
        return self._write("INSERT INTO forms (token, created_at) VALUES (?, ?) ON CONFLICT(token) DO NOTHING",
                           (token, now)) == 1

    def set_form_result(self, token: str, result: str) -> None:
        self._write("UPDATE forms SET result = ? WHERE token = ?", (result, token))

    def form_result(self, token: str) -> str | None:
        row = self._one("SELECT result FROM forms WHERE token = ?", (token,))
        return None if row is None else row["result"]

    # -- access requests -------------------------------------------------------------------------
    def add_access_request(self, email: str, reason: str, now: str) -> None:
        self._write("INSERT INTO access_requests (email, reason, created_at) VALUES (?, ?, ?)", (email, reason, now))

    def access_requests(self, email: str | None = None) -> list[dict[str, Any]]:
        if email is None:
            return self._all("SELECT * FROM access_requests WHERE answered_at IS NULL ORDER BY id")
        return self._all("SELECT * FROM access_requests WHERE email = ? ORDER BY id", (email,))

    def answer_access_requests(self, email: str, now: str) -> None:
        self._write("UPDATE access_requests SET answered_at = ? WHERE email = ? AND answered_at IS NULL", (now, email))

    # -- usage memory ----------------------------------------------------------------------------
    def remember_last_used(self, key_id: str, day: str) -> None:
        self._write("INSERT INTO last_used (key_id, day) VALUES (?, ?)"
                    " ON CONFLICT(key_id) DO UPDATE SET day = max(day, excluded.day)", (key_id, day))

    def last_used(self, key_id: str) -> str | None:
        row = self._one("SELECT day FROM last_used WHERE key_id = ?", (key_id,))
        return None if row is None else str(row["day"])

    # -- audit -------------------------------------------------------------------------------------
    def append_audit(self, at: str, actor: str, org: str | None, account: str | None, action: str,
                     target: str | None, detail: str) -> None:
        self._write("INSERT INTO audit (at, actor, org, account, action, target, detail) VALUES (?,?,?,?,?,?,?)",
                    (at, actor, org, account, action, target, detail))

    # -- the key-change journal (dashboard.service.Dashboard._journaled) ------------------------------------
    def journal_open(self, entry_id: str, at: str, entry: str) -> None:
        self._write("INSERT INTO journal (id, created_at, entry) VALUES (?, ?, ?)", (entry_id, at, entry))

    def journal_pending(self) -> list[dict[str, Any]]:
        return self._all("SELECT id, created_at, entry FROM journal ORDER BY created_at, id")

    def journal_close(self, entry_id: str, audit: tuple[str, str, str | None, str | None, str, str | None, str] | None
                      ) -> bool:
        """Remove a journal entry and, with `audit`, append its audit row, in one transaction: only
        the first of two closers (the request, a replay) removes it, so the row is written once."""
        c = self._conn()
        c.execute("BEGIN IMMEDIATE")
        try:
            removed = c.execute("DELETE FROM journal WHERE id = ?", (entry_id,)).rowcount == 1
            if removed and audit is not None:
                c.execute("INSERT INTO audit (at, actor, org, account, action, target, detail) VALUES (?,?,?,?,?,?,?)",
                          audit)
            c.execute("COMMIT")
            return removed
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def audit(self, *, org: str | None = None, account: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        args: tuple[str, ...]
        if org is not None:
            sql, args = "SELECT * FROM audit WHERE org = ? ORDER BY seq DESC", (org,)
        elif account is not None:
            sql, args = "SELECT * FROM audit WHERE account = ? AND org IS NULL ORDER BY seq DESC", (account,)
        else:
            sql, args = "SELECT * FROM audit ORDER BY seq DESC", ()
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._all(sql, args)
