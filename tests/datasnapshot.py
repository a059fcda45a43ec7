"""The real data as it was when the test session started.

Tests that read the real data (DATA_DIR, default ../shared/data) read a copy taken once per
session, so a file added to or changed in ../shared during a run cannot turn into a failing
assertion (say, a refresh that reports "updated" where it should find nothing changed). At
the end the original folder is compared with the copy's digests and every difference is
reported by name, as a session-level warning: the results hold for the data as it was at the
start.

The copy is taken by the first process of the session that imports `tests.paths` under pytest
(the xdist controller, or the only process); it puts the copy's path into the environment
(DATA_DIR and SNAPSHOT_ENV), so xdist workers and the subprocesses tests start read the same
copy. The data is tens of MB: a copy costs well under a second and isolates even a file
rewritten in place (hard links would not).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from pipeline.settings import ENV_DATA_DIR, default_data_dir

SNAPSHOT_ENV = "MALARIA_TEST_DATA_SNAPSHOT"  # the copy this session's tests read
ORIGINAL_ENV = "MALARIA_TEST_DATA_ORIGINAL"  # the folder it was taken from
MANIFEST = "manifest.json"  # beside the copy: {"original": ..., "files": {relative path: sha256}}

_owned: Path | None = None  # the copy's parent folder, when this process made it


def digests(root: Path) -> dict[str, str]:
    """SHA-256 of every file under `root` (links followed), by path relative to it."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with path.open("rb") as f:
                out[path.relative_to(root).as_posix()] = hashlib.file_digest(f, "sha256").hexdigest()
    return out


def session_data_dir() -> Path:
    """The folder this test session reads the real data from: the snapshot under pytest, else DATA_DIR."""
    global _owned
    original = default_data_dir()
    if not os.environ.get("PYTEST_VERSION"):  # a script importing tests.paths outside pytest
        return original
    taken = os.environ.get(SNAPSHOT_ENV)
    if taken and Path(taken).is_dir():
        return Path(taken)
    if not original.is_dir():  # no data: the tests that need it skip with the reason
        return original
    parent = Path(tempfile.mkdtemp(prefix="malaria-test-data-"))
    copy = parent / "data"
    shutil.copytree(original, copy, symlinks=False)  # copy2: times kept (the build's load time reads them)
    (parent / MANIFEST).write_text(json.dumps({"original": str(original), "files": digests(copy)}))
    _owned = parent
    os.environ[SNAPSHOT_ENV] = str(copy)
    os.environ[ORIGINAL_ENV] = str(original)
    os.environ[ENV_DATA_DIR] = str(copy)
    return copy


def owner() -> bool:
    return _owned is not None


def changes() -> list[str]:
    """What differs between the original folder now and the snapshot taken at the start (owner only)."""
    if _owned is None:
        return []
    manifest = json.loads((_owned / MANIFEST).read_text())
    original = Path(manifest["original"])
    before: dict[str, str] = manifest["files"]
    if not original.is_dir():
        return [f"{original} is gone"]
    now = digests(original)
    return ([f"added: {original / p}" for p in sorted(set(now) - set(before))]
            + [f"removed: {original / p}" for p in sorted(set(before) - set(now))]
            + [f"changed: {original / p}" for p in sorted(set(now) & set(before)) if now[p] != before[p]])


def remove() -> None:
    """Delete the snapshot (owner only), at the end of the session."""
    global _owned
    if _owned is not None:
        shutil.rmtree(_owned, ignore_errors=True)
        _owned = None
