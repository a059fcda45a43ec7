"""`malaria-risk canary` against the real local server on loopback (a small synthetic release).

The synthetic release's newest estimated month is 2024-02, so "today" decides whether it is
fresh (2024-03-20: 20 days after the month ended) or stale (2026-11-22).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from edge.local.app import App
from edge.stores.sqlite import SQLiteKeyStore
from pipeline.canary import month_end, run_canary, status_key
from pipeline.cli import main
from tests.conftest import LiveServer

FRESH, STALE = "2024-03-20", "2026-11-22"


@pytest.fixture
def served(release_root: Path, store: SQLiteKeyStore) -> Iterator[LiveServer]:
    with LiveServer(App(release_root, store)) as live:
        yield live


@pytest.fixture
def key_file(tmp_path: Path, all_scopes_key: str) -> Path:
    f = tmp_path / "canary-key"
    f.write_text(all_scopes_key + "\n")
    return f


def canary(*args: str) -> Any:
    return CliRunner().invoke(main, ["canary", *args])


def test_passes_on_a_fresh_release_and_writes_status(served: LiveServer, key_file: Path, tmp_path: Path,
                                                     release_root: Path):
    out = canary("--base-url", served.url, "--key-file", str(key_file), "--today", FRESH,
                 "--status-file", str(tmp_path / "status.json"))
    assert out.exit_code == 0, out.output
    assert out.output.startswith("canary ok: release ") and len(out.output.splitlines()) == 1
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["ok"] is True and status["last_estimated"] == "2024-02" and status["lag_days"] == 20
    assert status["release_id"] == (release_root / "current").resolve().name
    assert [c["route"] for c in status["checks"]][:2] == ["/v1/periods", "/v1/risk/states?period=2024-02"]
    assert len(status["checks"]) == 9 and all(c["ok"] and c["status"] == 200 for c in status["checks"])


def test_fails_on_a_stale_pointer(served: LiveServer, key_file: Path):
    out = canary("--base-url", served.url, "--key-file", str(key_file), "--today", STALE, "--max-lag-days", "60")
    assert out.exit_code == 1
    (line,) = out.output.splitlines()
    assert "stale: /v1/periods says the newest estimated month is 2024-02" in line and "(limit 60)" in line
    # the same release is fresh for a longer allowed lag
    assert canary("--base-url", served.url, "--key-file", str(key_file), "--today", STALE,
                  "--max-lag-days", "1100").exit_code == 0


def test_fails_on_a_5xx_route_from_a_damaged_release_file(served: LiveServer, key_file: Path, release_root: Path,
                                                          tmp_path: Path):
    damaged = release_root / "current" / "v1" / "risk" / "states" / "2024-02.json"
    damaged.write_bytes(damaged.read_bytes().replace(b"estimated", b"estimatex"))
    out = canary("--base-url", served.url, "--key-file", str(key_file), "--today", FRESH,
                 "--status-file", str(tmp_path / "status.json"))
    assert out.exit_code == 1
    (line,) = out.output.splitlines()
    assert "/v1/risk/states?period=2024-02 answered RELEASE_INCOMPLETE" in line
    status = json.loads((tmp_path / "status.json").read_text())  # written even when failing
    bad = [c for c in status["checks"] if not c["ok"]]
    assert [(c["status"], c["problem"]) for c in bad] == [(500, "RELEASE_INCOMPLETE")]


def test_fails_when_nothing_answers_or_the_key_is_refused(tmp_path: Path, served: LiveServer, key_file: Path):
    from tests.conftest import free_port

    dead = run_canary(f"http://127.0.0.1:{free_port()}", "svc_test_" + "x" * 32, timeout=2)
    assert not dead.ok and dead.reason.startswith("/v1/periods answered no answer")
    refused = run_canary(served.url, "svc_test_" + "x" * 32)
    assert not refused.ok and refused.reason == "/v1/periods answered API_KEY_INVALID"
    empty = tmp_path / "empty"
    empty.write_text("")
    out = canary("--base-url", served.url, "--key-file", str(empty))
    assert out.exit_code == 1 and "holds no key" in out.output


def test_status_is_published_to_the_bucket(served: LiveServer, key_file: Path, monkeypatch: pytest.MonkeyPatch):
    from tests.edge.conftest import CREDS, start_moto

    proc, url = start_moto()
    try:
        for k, v in CREDS.items():
            monkeypatch.setenv(k, v)
        import boto3

        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
        s3.create_bucket(Bucket="status-bucket")
        out = canary("--base-url", served.url, "--key-file", str(key_file), "--today", STALE,
                     "--publish-status", "status-bucket", "--status-prefix", "api", "--endpoint-url", url)
        assert out.exit_code == 1  # stale, and still published
        got = s3.get_object(Bucket="status-bucket", Key=status_key("api"))
        assert got["ContentType"] == "application/json" and got["CacheControl"] == "public, max-age=60"
        doc = json.loads(got["Body"].read())
        assert doc["ok"] is False and doc["reason"].startswith("stale:") and doc["format"] == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_month_end():
    assert [str(month_end(m)) for m in ("2024-02", "2023-02", "2026-12")] == ["2024-02-29", "2023-02-28",
                                                                             "2026-12-31"]
