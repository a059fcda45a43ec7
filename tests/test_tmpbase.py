"""The session's temporary folder (tests/tmpbase.py): in memory only with room to spare, every
temporary file of the session inside it, removed at the end unless a test failed, and a kept one
removed by the next session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pipeline.settings import default_data_dir
from tests import tmpbase
from tests.paths import REPO_ROOT
from tests.tmp_probe import FAIL_ENV, PROBE_ENV


def meminfo(tmp_path: Path, available_kib: int) -> str:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       99999999 kB\nMemAvailable:   {available_kib} kB\n")
    return str(path)


def test_memory_is_used_only_with_room_to_spare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = tmp_path / "shm"
    memory.mkdir()
    free = tmpbase.free_bytes(str(memory))
    monkeypatch.setattr(tmpbase, "MIN_FREE_BYTES", free // 2)
    roomy = meminfo(tmp_path, free // 1024)
    assert tmpbase.base({}, str(memory), roomy) == str(memory)
    # too little memory available, whatever the filesystem's size says: the system's temporary folder
    assert tmpbase.base({}, str(memory), meminfo(tmp_path, free // 4096)) == tempfile.gettempdir()
    monkeypatch.setattr(tmpbase, "MIN_FREE_BYTES", free * 2)  # a filesystem with too little room
    assert tmpbase.base({}, str(memory), roomy) == tempfile.gettempdir()
    assert tmpbase.base({}, str(tmp_path / "absent"), roomy) == tempfile.gettempdir()
    assert tmpbase.base({"TMPDIR": "/elsewhere"}, str(memory), roomy) == "/elsewhere"  # the caller's choice


def test_this_session_keeps_its_temporary_files_in_its_folder(tmp_path: Path) -> None:
    folder = Path(os.environ[tmpbase.TMP_ENV])
    assert tempfile.gettempdir() == str(folder) == os.environ["TMPDIR"]
    assert tmp_path.is_relative_to(folder) and (folder / tmpbase.OWNER).is_file()


def test_only_folders_of_sessions_no_longer_running_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folders = {name: tmp_path / f"{tmpbase.PREFIX}{name}" for name in ("dead", "alive", "unowned")}
    for folder in folders.values():
        folder.mkdir()
    (folders["dead"] / tmpbase.OWNER).write_text(dead.stdout.strip())
    (folders["alive"] / tmpbase.OWNER).write_text(str(os.getpid()))
    (tmp_path / "other").mkdir()
    assert tmpbase.remove_stale(str(tmp_path)) == [folders["dead"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [folders["alive"].name, folders["unowned"].name, "other"])


def run_probe(base: Path, report: Path, fail: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "MALARIA_TEST_")) and k not in ("TMPDIR", "DATA_DIR")}
    env.update({"TMPDIR": str(base), PROBE_ENV: str(report)})
    if fail:
        env[FAIL_ENV] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "tests/tmp_probe.py"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_failed_session_keeps_its_folder_and_the_next_removes_it(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    failed = run_probe(base, tmp_path / "first.json", fail=True)
    assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr[-3000:]
    first = json.loads((tmp_path / "first.json").read_text())
    kept = Path(first["folder"])
    assert kept.parent == base and kept.is_dir() and f"temporary files of this run kept in {kept}" in failed.stdout
    # pytest's folders, tempfile's and the real-data snapshot were all inside it
    assert first["gettempdir"] == str(kept) and Path(first["tmp_path"]).is_relative_to(kept)
    assert Path(first["data"]).is_relative_to(kept) or not default_data_dir().is_dir()
    passed = run_probe(base, tmp_path / "second.json", fail=False)
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    second = Path(json.loads((tmp_path / "second.json").read_text())["folder"])
    assert second != kept and "kept in" not in passed.stdout
    assert list(base.iterdir()) == []  # the failed session's folder and its own are gone
