"""deploy/job.sh's refresh job, run by bash with `aws` and `malaria-risk` replaced on PATH by scripts that
record their arguments: the refresh keeps its state in the bucket (`--state`), and retention
(`release prune`) runs after a good refresh only."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

JOB = Path(__file__).resolve().parents[2] / "deploy" / "job.sh"


def run_job(tmp_path: Path, refresh_exit: int, keep: str | None = None) -> tuple[int, list[list[str]]]:
    bin_dir, log = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir(exist_ok=True)
    log.write_text("")
    for name, body in (("aws", "exit 0"),
                       ("malaria-risk", f'[ "$1" = refresh ] && exit {refresh_exit}; exit 0')):
        script = bin_dir / name
        script.write_text(f'#!/usr/bin/env bash\nprintf "%s\\t" {name} "$@" >> "{log}"; echo >> "{log}"\n{body}\n')
        script.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path), "BUCKET": "b", "PREFIX": "api",
           "TABLE_PREFIX": "mr-", "MALARIA_RISK_REGION": "eu-west-1", "BASE_URL": "https://api.example.org",
           "CANARY_KEY": "k"}
    if keep is not None:
        env["KEEP_RELEASES"] = keep
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    got = subprocess.run(["bash", str(JOB), "refresh"], cwd=work, env=env, capture_output=True, text=True,
                         timeout=60)
    return got.returncode, [line.rstrip("\t").split("\t") for line in log.read_text().splitlines()]


@pytest.mark.parametrize("keep", [None, "24"])
def test_a_good_refresh_keeps_its_state_then_prunes(tmp_path: Path, keep: str | None):
    code, calls = run_job(tmp_path, 0, keep)
    assert code == 0
    tools = [c[:3] for c in calls]
    refresh = next(c for c in calls if c[1] == "refresh")
    assert "--state" in refresh and refresh[refresh.index("--bucket") + 1] == "b"
    prune = next(c for c in calls if c[1:3] == ["release", "prune"])
    assert prune[prune.index("--keep") + 1] == (keep or "12") and prune[prune.index("--prefix") + 1] == "api"
    # order: data down, refresh, data up, prune, usage export
    assert tools.index(refresh[:3]) < tools.index(prune[:3]) < tools.index(["malaria-risk", "keys", "usage-export"])


def test_a_failed_refresh_prunes_nothing_and_fails_the_job(tmp_path: Path):
    code, calls = run_job(tmp_path, 6)
    assert code == 6
    assert any(c[1] == "refresh" for c in calls)
    assert not any(c[1:3] == ["release", "prune"] for c in calls)
    assert any(c[:3] == ["aws", "s3", "sync"] and c[-1].endswith("/ops/data/") for c in calls)  # data still saved
