"""No crash separates a key change from its audit row: a process killed (SIGKILL) right after
the key store's write, before the audit row, leaves the change recorded at the next start-up
(`dashboard.app.build`), once, on real SQLite stores."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dashboard.app import build
from dashboard.settings import DashboardSettings
from dashboard.store import SQLiteDashboardStore
from edge.stores.sqlite import SQLiteKeyStore
from tests.paths import REPO_ROOT

# A real key store whose write, once made, is followed by the process's own SIGKILL: the
# dashboard's service is the code under test, the crash is a real one.
CRASHING = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from dashboard.mailer import FileMailer
    from dashboard.service import Dashboard, Space
    from dashboard.store import SQLiteDashboardStore
    from edge.stores.sqlite import SQLiteKeyStore

    var, what, die_in = Path(sys.argv[1]), sys.argv[2], sys.argv[3]

    class Crashing(SQLiteKeyStore):
        def create(self, *a, **k):
            out = super().create(*a, **k)
            if die_in == "create":
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        def revoke(self, *a, **k):
            super().revoke(*a, **k)
            if die_in == "revoke":
                os.kill(os.getpid(), signal.SIGKILL)

    s = Dashboard(Crashing(var / "keys.sqlite"), SQLiteDashboardStore(var / "dashboard.sqlite"),
                  FileMailer(var / "mail.jsonl"))
    if what == "staff-create":
        s.staff_create_key("staff:ops", "crash test", ["risk_scores"], "test", None, None, "ngo", None, None)
    elif what == "staff-revoke":
        s.staff_revoke_key("staff:ops", sys.argv[4])
    elif what == "admin-create":
        s.create_key("ann@ngo.example", Space("org", "ngo"), "crash test", ["risk_scores"], "test", None, "form-1")
    elif what == "admin-revoke":
        s.revoke_key("ann@ngo.example", Space("org", "ngo"), sys.argv[4])
    print("not killed")
""")


def run_crashing(var: Path, what: str, die_in: str, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-c", CRASHING, str(var), what, die_in, *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, (proc.returncode, proc.stdout, proc.stderr)


def start_up(var: Path) -> None:
    """What every start of the dashboard or of a staff command does first."""
    build(DashboardSettings(store=f"sqlite:{var / 'keys.sqlite'}"))


def audit_rows(var: Path, action: str) -> list[dict[str, object]]:
    return [r for r in SQLiteDashboardStore(var / "dashboard.sqlite").audit() if r["action"] == action]


@pytest.fixture
def var(tmp_path: Path) -> Path:
    var = tmp_path / "var"
    store = SQLiteDashboardStore(var / "dashboard.sqlite")
    store.create_org("ngo", "Health NGO", "2026-01-01T00:00:00+00:00")
    store.ensure_account("ann@ngo.example", "2026-01-01T00:00:00+00:00")
    store.set_role("ngo", "ann@ngo.example", "admin", "2026-01-01T00:00:00+00:00")
    SQLiteKeyStore(var / "keys.sqlite")
    return var


@pytest.mark.parametrize("who", ["staff", "admin"])
def test_a_key_created_just_before_a_crash_has_its_audit_row_after_the_restart(var: Path, who: str):
    run_crashing(var, f"{who}-create", "create")
    keys = SQLiteKeyStore(var / "keys.sqlite").list()
    assert len(keys) == 1  # the key store's write happened
    start_up(var)
    rows = audit_rows(var, "key_created")
    assert [r["target"] for r in rows] == [keys[0]["id"]]
    assert rows[0]["org"] == "ngo" and "crash test" in str(rows[0]["detail"])
    start_up(var)  # a second start records nothing twice
    assert len(audit_rows(var, "key_created")) == 1
    if who == "admin":  # the form's second submission names the key, as after a normal creation
        assert SQLiteDashboardStore(var / "dashboard.sqlite").form_result("form-1") == keys[0]["id"]


@pytest.mark.parametrize("who", ["staff", "admin"])
def test_a_key_revoked_just_before_a_crash_has_its_audit_row_after_the_restart(var: Path, who: str):
    service, _ = build(DashboardSettings(store=f"sqlite:{var / 'keys.sqlite'}"))
    kid, _ = service.staff_create_key("staff:ops", "to revoke", ["risk_scores"], "test", None, None, "ngo", None, None)
    run_crashing(var, f"{who}-revoke", "revoke", kid)
    assert SQLiteKeyStore(var / "keys.sqlite").get(kid)["revoked_at"] is not None  # type: ignore[index]
    start_up(var)
    assert [r["target"] for r in audit_rows(var, "key_revoked")] == [kid]


def test_a_change_that_never_reached_the_key_store_leaves_no_row(var: Path):
    """A crash before the key write (here: the key store refuses it) records nothing, now or later."""
    service, _ = build(DashboardSettings(store=f"sqlite:{var / 'keys.sqlite'}"))
    with pytest.raises(Exception, match="scope"):
        service.staff_create_key("staff:ops", "bad", ["no_such_scope"], "test", None, None, "ngo", None, None)
    start_up(var)
    assert audit_rows(var, "key_created") == []
    assert SQLiteDashboardStore(var / "dashboard.sqlite").journal_pending() == []
