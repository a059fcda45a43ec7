"""The key administration CLI, run as a real subprocess against a real SQLite file."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
from click.testing import CliRunner

from edge.keys import hash_key, looks_like_key
from edge.stores.sqlite import SQLiteKeyStore
from pipeline.cli import main
from tests.paths import REPO_ROOT


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_create_list_revoke(tmp_path: Path):
    db = str(tmp_path / "k.sqlite")
    out = cli("keys", "create", "--keys", db, "--name", "dash", "--scope", "risk_scores", "--scope", "forecasts",
              "--kind", "live", "--org", "ngo", "--expires", "2099-01-01")
    key = out.stdout.strip().splitlines()[-1]
    assert looks_like_key(key) and key.startswith("svc_live_")
    record = SQLiteKeyStore(db).lookup(hash_key(key))
    assert record is not None and record.scopes == ("forecasts", "risk_scores") and record.org == "ngo"

    listing = cli("keys", "list", "--keys", db).stdout.strip().splitlines()
    assert len(listing) == 1
    fields = listing[0].split("\t")
    assert fields[0] == record.id and fields[1] == "dash" and fields[2] == "live"
    assert fields[3] == "forecasts,risk_scores" and fields[4] == "active"
    assert fields[5:8] == ["-", "ngo", "2099-01-01"]  # an organisation's key has no owner (SPEC §5.6)
    assert fields[8] == f"svc_live_…{key[-4:]}" and key not in listing[0]

    cli("keys", "revoke", "--keys", db, record.id)
    assert cli("keys", "list", "--keys", db).stdout.split("\t")[4] == "revoked"
    cli("orgs", "suspend", "--keys", db, "ngo")
    cli("orgs", "restore", "--keys", db, "ngo")
    own = cli("keys", "create", "--keys", db, "--name", "own", "--scope", "risk_scores", "--owner", "ann")
    cli("accounts", "remove", "--keys", db, "ann")
    gone = SQLiteKeyStore(db).lookup(hash_key(own.stdout.strip().splitlines()[-1]))
    assert gone is not None and gone.owner_removed

    # every change above is in the audit log beside the key store, once, with the operator as actor
    from dashboard.store import SQLiteDashboardStore

    actions = [r["action"] for r in SQLiteDashboardStore(tmp_path / "dashboard.sqlite").audit()][::-1]
    assert actions == ["key_created", "key_revoked", "org_suspended", "org_restored", "key_created",
                       "account_removed"]
    both = cli("keys", "create", "--keys", db, "--name", "x", "--scope", "risk_scores", "--org", "ngo",
               "--owner", "ann", ok=False)
    assert both.returncode == 1 and "not both" in both.stderr


def test_cli_errors_are_one_line(tmp_path: Path):
    db = str(tmp_path / "k.sqlite")
    bad = cli("keys", "create", "--keys", db, "--name", "x", "--scope", "everything", ok=False)
    assert bad.returncode != 0 and "unknown scope" in bad.stderr and "Traceback" not in bad.stderr
    bad = cli("keys", "revoke", "--keys", db, "key_missing", ok=False)
    assert bad.returncode != 0 and "no key" in bad.stderr
    bad = cli("build", "--data-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "b"), ok=False)
    assert bad.returncode != 0 and "does not exist" in bad.stderr
    # an InputError from deep inside the build: caught once, by the root command
    (tmp_path / "empty").mkdir()
    bad = cli("build", "--data-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "b"), "--quiet", ok=False)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == f"Error: {tmp_path / 'empty' / 'admin' / 'states.csv'}: file not found"


def _leaf_commands() -> dict[str, click.Command]:
    """Every listed (non-hidden) command path of `malaria-risk`, e.g. "keys create"."""
    out: dict[str, click.Command] = {}

    def walk(cmd: click.Command, path: str) -> None:
        if isinstance(cmd, click.Group):
            if cmd.invoke_without_command:  # a group that also runs on its own (`dashboard`) is a command too
                out[path] = cmd
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, f"{path} {name}".strip())
        else:
            out[path] = cmd

    walk(main, "")
    return out


def test_readme_command_list_matches_help() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    block = readme.split("## Command line", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = _leaf_commands()
    listed: dict[str, str] = {}
    for line in block.splitlines():
        if not line.startswith("malaria-risk "):
            continue
        words = line.split()[1:]
        path = " ".join(w for w in words[:2] if w.islower() and not w.startswith(("-", "[")))
        path = path if path in commands else words[0]
        listed[path] = line
    assert set(listed) == set(commands)
    for path, line in listed.items():
        known = {opt for p in commands[path].params for opt in (*p.opts, *p.secondary_opts)}
        if path in ("keys list", "keys revoke", "orgs suspend", "orgs restore", "accounts remove", "accounts unlock",
                    "accounts lock", "accounts requests", "orgs create"):
            continue  # their shared --keys/--store are given once, as a comment
        mentioned = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line.split("#")[0]))
        assert mentioned <= known, (path, mentioned - known)
        required = {p.opts[0] for p in commands[path].params if getattr(p, "required", False) and p.opts[0].startswith("--")}
        assert required <= mentioned, (path, required - mentioned)


def test_every_command_help_has_an_example() -> None:
    runner = CliRunner()
    for path in _leaf_commands():
        out = runner.invoke(main, [*path.split(), "--help"])
        assert out.exit_code == 0 and "Example:" in out.output and f"malaria-risk {path}" in out.output, path


def test_serve_rejects_out_of_range_ports(tmp_path: Path):
    for port in ("0", "65536", "-1", "http"):
        bad = cli("serve", "--root", str(tmp_path), "--port", port, ok=False)
        assert bad.returncode == 2 and "--port" in bad.stderr and "Traceback" not in bad.stderr, port
        bad = cli("check-port", "--port", port, ok=False)
        assert bad.returncode == 2 and "--port" in bad.stderr, port


def test_a_busy_port_is_reported_with_the_fix(tmp_path: Path):
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        bad = cli("check-port", "--host", "127.0.0.1", "--port", str(port), ok=False)
        assert bad.returncode == 1 and f"port {port} on 127.0.0.1 is already in use" in bad.stderr
        assert f"make run PORT={port + 1}" in bad.stderr and "Traceback" not in bad.stderr
        # the dashboard's port, as `make run` checks it, names its own variable
        bad = cli("check-port", "--host", "127.0.0.1", "--port", str(port), "--make-var", "DASH_PORT", ok=False)
        assert f"make run DASH_PORT={port + 1}" in bad.stderr
        bad = cli("dashboard", "--port", str(port), "--keys", str(tmp_path / "k.sqlite"), ok=False)
        assert bad.returncode == 1 and f"make run DASH_PORT={port + 1}" in bad.stderr
    cli("check-port", "--host", "127.0.0.1", "--port", str(port))  # released: free again


def test_local_test_key_is_reused_and_kept_owner_only(tmp_path: Path):
    db, key_file = tmp_path / "var" / "keys.sqlite", tmp_path / "var" / "local-test-key"
    first = cli("keys", "local-test", "--keys", str(db), "--key-file", str(key_file)).stdout.strip()
    assert looks_like_key(first) and first.startswith("svc_test_")
    assert key_file.read_text().strip() == first and key_file.stat().st_mode & 0o777 == 0o600
    record = SQLiteKeyStore(db).lookup(hash_key(first))
    assert record is not None and set(record.scopes) == {"risk_scores", "forecasts", "lga_boundaries"}
    key_file.chmod(0o644)  # loosened by hand: put back to owner-only on the next run
    again = cli("keys", "local-test", "--keys", str(db), "--key-file", str(key_file)).stdout.strip()
    assert again == first and key_file.stat().st_mode & 0o777 == 0o600
    assert len(SQLiteKeyStore(db).list()) == 1  # repeated runs do not pile up keys
    # a kept key that no longer works (revoked) is replaced, once
    SQLiteKeyStore(db).revoke(record.id)
    fresh = cli("keys", "local-test", "--keys", str(db), "--key-file", str(key_file)).stdout.strip()
    assert fresh != first and key_file.read_text().strip() == fresh
    assert cli("keys", "local-test", "--keys", str(db), "--key-file", str(key_file)).stdout.strip() == fresh
    assert len(SQLiteKeyStore(db).list()) == 2


def test_local_test_key_is_listed_in_the_local_organisation(tmp_path: Path):
    """`make run` makes the key with `--org local`: its administrator sees it in the dashboard's key list; a
    key kept from before (no organisation) is replaced once, so the store holds one working local test key."""
    from dashboard.app import build as build_dashboard
    from dashboard.service import LOCAL_ORG, Space
    from dashboard.settings import DashboardSettings

    db, key_file = tmp_path / "var" / "keys.sqlite", tmp_path / "var" / "local-test-key"
    old = cli("keys", "local-test", "--keys", str(db), "--key-file", str(key_file)).stdout.strip()
    key = cli("keys", "local-test", "--keys", str(db), "--key-file", str(key_file), "--org", LOCAL_ORG).stdout.strip()
    assert key != old and looks_like_key(key)
    store = SQLiteKeyStore(db)
    assert store.lookup(hash_key(old)).status(datetime.now(UTC)) == "revoked"  # type: ignore[union-attr]
    assert cli("keys", "local-test", "--keys", str(db), "--key-file", str(key_file), "--org", LOCAL_ORG
               ).stdout.strip() == key
    service, _ = build_dashboard(DashboardSettings(store=f"sqlite:{db}", dashboard="", counters=None, mailer="console",
                                                   base_url="http://127.0.0.1:1", api_url="http://127.0.0.1:2"))
    service.ensure_local_org("admin@example.org")
    listed = service.list_keys("admin@example.org", Space("org", LOCAL_ORG))
    assert [(k["name"], k["hint"][-4:]) for k in listed if k["status"] == "active"] == [("local test key", key[-4:])]


def test_build_progress_is_one_line_per_step_in_a_log() -> None:
    """Not a TTY (`make run > log`): each step once, on its own line, with its time; no carriage returns."""
    from pipeline.cli import build_progress

    lines: list[tuple[str, bool]] = []
    ticks = iter(range(100))
    progress = build_progress(lambda text, nl: lines.append((text, nl)), tty=False, clock=lambda: float(next(ticks)))
    for label, done, total in [("reading geography", 0, 1), ("computing risk", 0, 8), ("computing risk", 1, 8),
                               ("writing files", 0, 500), ("writing files", 250, 500), ("writing files", 500, 500)]:
        progress(label, done, total)
    assert [t.split(" s  ", 1)[1] for t, _ in lines] == ["reading geography", "computing risk", "writing files",
                                                         "writing files: 500 of 500 done"]
    assert all(nl and "\r" not in t for t, nl in lines)
    # a terminal keeps the one redrawn line
    tty: list[tuple[str, bool]] = []
    progress = build_progress(lambda text, nl: tty.append((text, nl)), tty=True)
    progress("writing files", 1, 2)
    progress("writing files", 2, 2)
    assert tty[0][0].startswith("\r") and not tty[0][1] and tty[-1] == ("", True)


def test_wait_http_says_when_the_server_answers(tmp_path: Path) -> None:
    """`make run`'s serve line: printed once the address answers 200; a clear failure when it never does."""
    import functools
    import http.server
    import threading

    from tests.conftest import free_port

    (tmp_path / "docs").mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/docs/"
        ok = cli("wait-http", "--label", "serve", url)
        assert re.fullmatch(rf"== serve +\d+\.\d s  \(first 200 from {re.escape(url)}\)\n", ok.stdout), ok.stdout
    finally:
        server.shutdown()
        server.server_close()
    silent = f"http://127.0.0.1:{free_port()}/docs/"  # nothing listens there
    bad = cli("wait-http", "--timeout", "1", silent, ok=False)
    assert bad.returncode == 1 and "did not answer 200" in bad.stderr and "Traceback" not in bad.stderr


def test_commands_that_read_no_data_load_no_data_libraries() -> None:
    """`keys`, `serve`, `release publish` and the other commands that read no input data start without
    polars, numpy or shapely (about 0.3 s of the 0.4 s an import of the CLI took): the CLI module, the
    release tree and the publisher import the readers only where a command reads data."""
    probe = ("import sys, pipeline.cli, pipeline.publish.s3, pipeline.release.tree, pipeline.release.catalogue; "
             "print(sorted(m for m in ('polars', 'numpy', 'shapely') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
