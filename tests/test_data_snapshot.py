"""The real data is read from a copy taken at session start; a change to the folder during the
run is reported by name at the end, not met as a failing assertion (tests/datasnapshot.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import datasnapshot
from tests.data_probe import PROBE_ENV
from tests.paths import DATA_DIR, REPO_ROOT


def test_this_session_reads_a_copy_of_the_data_that_matches_it() -> None:
    original = os.environ.get(datasnapshot.ORIGINAL_ENV)
    if original is None:  # no real data here: nothing to copy, the data tests skip
        assert not DATA_DIR.is_dir() or os.environ.get(datasnapshot.SNAPSHOT_ENV) is None
        return
    assert DATA_DIR == Path(os.environ[datasnapshot.SNAPSHOT_ENV]) != Path(original)
    manifest = json.loads((DATA_DIR.parent / datasnapshot.MANIFEST).read_text())
    assert manifest["original"] == original and manifest["files"] == datasnapshot.digests(DATA_DIR)


def test_a_file_added_during_a_run_is_reported_by_name(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "cases.csv").write_text("a,b\n1,2\n")
    report = tmp_path / "probe.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MALARIA_TEST_DATA_"))}
    env.update({"DATA_DIR": str(data), PROBE_ENV: str(report)})
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          f"--basetemp={tmp_path / 'inner'}", "tests/data_probe.py"],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout
    out = run.stdout
    assert "the real data changed during this run" in out
    assert f"added: {data / 'added_mid_run.csv'}" in out and f"changed: {data / 'cases.csv'}" in out
    assert "removed:" not in out
    assert not Path(json.loads(report.read_text())["snapshot"]).exists()  # the copy is removed at the end
