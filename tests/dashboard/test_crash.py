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
from tests.edge.conftest import endpoint as endpoint  # noqa: F401  (moto's server, for the DynamoDB stores)
from tests.paths import REPO_ROOT

# A real key store whose write, once made, is followed by the process's own SIGKILL: the
# dashboard's service is the code under test, the crash is a real one.
CRASHING = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from dashboard.mailer import FileMailer
    from dashboard.service import Dashboard, Space

    where, what, die_in = sys.argv[1], sys.argv[2], sys.argv[3]

    def crashing(base):
        class Crashing(base):
            def create(self, *a, **k):
                out = super().create(*a, **k)
                if die_in == "create":
                    os.kill(os.getpid(), signal.SIGKILL)
                return out

            def revoke(self, *a, **k):
                super().revoke(*a, **k)
                if die_in == "revoke":
                    os.kill(os.getpid(), signal.SIGKILL)
        return Crashing

    if where.startswith("dynamodb:"):  # production's stores (on moto), named as --store names them
        from dashboard.dynamodb import DynamoDBDashboardStore
        from edge.stores.dynamodb import DynamoDBKeyStore, client_from_env
        prefix = where.partition(":")[2]
        keys, state = crashing(DynamoDBKeyStore)(client_from_env(), prefix), DynamoDBDashboardStore.from_env(prefix)
    else:
        from dashboard.store import SQLiteDashboardStore
        from edge.stores.sqlite import SQLiteKeyStore
        keys = crashing(SQLiteKeyStore)(Path(where) / "keys.sqlite")
        state = SQLiteDashboardStore(Path(where) / "dashboard.sqlite")
    s = Dashboard(keys, state, FileMailer(os.devnull))
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


def run_crashing(var: Path | str, what: str, die_in: str, *args: str) -> None:
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


def test_on_dynamodb_too(endpoint: str, monkeypatch: pytest.MonkeyPatch):
    """Production's stores (moto): the entry is closed at start-up under a key made from its id."""
    from dashboard.dynamodb import DynamoDBDashboardStore
    from edge.stores.dynamodb import DynamoDBKeyStore
    from tests.edge.conftest import CREDS

    for name, value in {**CREDS, "AWS_ENDPOINT_URL_DYNAMODB": endpoint, "MALARIA_RISK_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    keys, state = DynamoDBKeyStore.from_env("crash-"), DynamoDBDashboardStore.from_env("crash-")
    keys.create_tables()
    state.create_tables()
    run_crashing("dynamodb:crash-", "staff-create", "create")
    made = keys.list_for(org="ngo")
    assert len(made) == 1 and [r["action"] for r in state.audit(org="ngo")] == []  # the key, and no row yet
    build(DashboardSettings(store="dynamodb:crash-"))
    build(DashboardSettings(store="dynamodb:crash-"))  # twice: still one row
    assert [(r["action"], r["target"]) for r in state.audit(org="ngo")] == [("key_created", made[0]["id"])]
    assert state.journal_pending() == []
