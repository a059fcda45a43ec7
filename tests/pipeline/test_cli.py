"""The key administration CLI, run as a real subprocess against a real SQLite file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from edge.keys import hash_key, looks_like_key
from edge.stores.sqlite import SQLiteKeyStore


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_create_list_revoke(tmp_path: Path):
    db = str(tmp_path / "k.sqlite")
    out = cli("keys", "create", "--keys", db, "--name", "dash", "--scope", "risk_scores", "--scope", "forecasts",
              "--kind", "live", "--org", "ngo", "--owner", "ann", "--expires", "2099-01-01")
    key = out.stdout.strip().splitlines()[-1]
    assert looks_like_key(key) and key.startswith("svc_live_")
    record = SQLiteKeyStore(db).lookup(hash_key(key))
    assert record is not None and record.scopes == ("forecasts", "risk_scores") and record.org == "ngo"

    listing = cli("keys", "list", "--keys", db).stdout.strip().splitlines()
    assert len(listing) == 1
    fields = listing[0].split("\t")
    assert fields[0] == record.id and fields[1] == "dash" and fields[2] == "live"
    assert fields[3] == "forecasts,risk_scores" and fields[4] == "active"
    assert fields[5:8] == ["ann", "ngo", "2099-01-01"]
    assert fields[8] == f"svc_live_…{key[-4:]}" and key not in listing[0]

    cli("keys", "revoke", "--keys", db, record.id)
    assert cli("keys", "list", "--keys", db).stdout.split("\t")[4] == "revoked"
    cli("orgs", "suspend", "--keys", db, "ngo")
    cli("orgs", "restore", "--keys", db, "ngo")
    cli("accounts", "remove", "--keys", db, "ann")


def test_cli_errors_are_one_line(tmp_path: Path):
    db = str(tmp_path / "k.sqlite")
    bad = cli("keys", "create", "--keys", db, "--name", "x", "--scope", "everything", ok=False)
    assert bad.returncode != 0 and "unknown scope" in bad.stderr and "Traceback" not in bad.stderr
    bad = cli("keys", "revoke", "--keys", db, "key_missing", ok=False)
    assert bad.returncode != 0 and "no key" in bad.stderr
    bad = cli("build", "--data-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "b"), ok=False)
    assert bad.returncode != 0 and "does not exist" in bad.stderr
