"""The test session's temporary folder: made by the session's first process under memory (/dev/shm)
when that is a filesystem with room to spare, else under the system's temporary folder; TMPDIR
points at it for the xdist workers and every subprocess (pytest's `tmp_path` folders, the S3
server's data, the real-data snapshot are all inside). It is removed when the session ends, unless
a test failed: then it is kept for a look, named at the end of the report, and removed by the
next session (a folder whose session is no longer running).

Why memory: the suite builds and publishes the real release about ten times, and each build
creates some 24,000 files and as many links. On this project's 2-core machines (ext4 on a virtual
disk) creating a file costs about 50 µs of kernel time against 7 on tmpfs, and one build's
writing phase took 6–8 CPU s on disk against 3.5–3.9 in memory. A run's temporary files peak at
about PEAK_BYTES, so memory is used only where at least MIN_FREE_BYTES of it is free for them;
a TMPDIR the caller set is kept as it is. The code under test is the same either way: the
files are real files on a real filesystem.

    python tests/tmpbase.py      # prints where a session's folder would go
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from pipeline.release.store import _pid_alive

MEMORY = "/dev/shm"
PEAK_BYTES = 2 << 30  # a whole `make test` on 2 cores peaked at 1.8 GiB (CONTRIBUTING.md, "Temporary files")
MIN_FREE_BYTES = 3 * PEAK_BYTES
TMP_ENV = "MALARIA_TEST_TMP"  # the session's folder, for the processes it starts
PREFIX = "malaria-risk-tests-"
OWNER = ".session-pid"  # in the folder: the pid of the process that made it

_owned: Path | None = None


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def memory_available(meminfo: str = "/proc/meminfo") -> int:
    """MemAvailable in bytes (0 when unknown): a tmpfs's size is only a cap on what it may take."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def base(env: dict[str, str] | None = None, memory: str = MEMORY, meminfo: str = "/proc/meminfo") -> str:
    env = dict(os.environ) if env is None else env
    if env.get("TMPDIR"):
        return env["TMPDIR"]
    try:
        roomy = os.path.isdir(memory) and os.access(memory, os.W_OK) and \
            min(free_bytes(memory), memory_available(meminfo)) >= MIN_FREE_BYTES
    except OSError:
        roomy = False
    return memory if roomy else tempfile.gettempdir()


def remove_stale(under: str) -> list[Path]:
    """Remove the folders earlier sessions left under `under` (kept after a failure, or cut off by a
    kill): those whose session process is no longer running. Returns what was removed."""
    gone: list[Path] = []
    with contextlib.suppress(OSError):
        for folder in Path(under).glob(PREFIX + "*"):
            try:
                pid = int((folder / OWNER).read_text())
            except (OSError, ValueError):
                continue  # not a folder this module made whole: left alone
            if not _pid_alive(pid):
                shutil.rmtree(folder, ignore_errors=True)
                gone.append(folder)
    return gone


def session_tmpdir() -> Path | None:
    """Under pytest, the session's folder (made by the first process, inherited by the others);
    None outside pytest."""
    global _owned
    if not os.environ.get("PYTEST_VERSION"):
        return None
    taken = os.environ.get(TMP_ENV)
    if taken and Path(taken).is_dir():
        return Path(taken)
    under = base()
    remove_stale(under)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=under))
    (folder / OWNER).write_text(str(os.getpid()))
    os.environ[TMP_ENV] = os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    _owned = folder
    return folder


def owned() -> Path | None:
    return _owned


def remove() -> None:
    """Remove the session's folder (its owner only)."""
    global _owned
    if _owned is not None:
        shutil.rmtree(_owned, ignore_errors=True)
        _owned = None


if __name__ == "__main__":
    sys.stdout.write(base() + "\n")
