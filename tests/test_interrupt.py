"""Ctrl-C stops `make test` within 5 seconds and leaves no process behind.

The real path a contributor takes: `make test` (lint skipped with TEST_NEEDS=install, the run
narrowed to tests/interrupt_probe.py with PYTEST_ARGS) → pytest → two xdist workers, one of
them holding SeaweedFS, moto and a headless Chromium, the other inside a click command that
would swallow KeyboardInterrupt. Once both are waiting, SIGINT goes to make's process group, as
a terminal sends it. Every process of the run carries a marker in its environment; /proc is
walked for any still alive afterwards (or still in the run's session).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.interrupt_probe import PROBE_ENV
from tests.paths import REPO_ROOT

MARKER_ENV = "MALARIA_INTERRUPT_RUN"
STOP_WITHIN = 5.0  # seconds from SIGINT to make's exit


def processes_of_run(marker: str, session_id: int) -> dict[int, str]:
    """pid -> command line of every live (not zombie) process with the marker in its environment
    or in the run's session."""
    found: dict[int, str] = {}
    me = os.getpid()
    needle = f"{MARKER_ENV}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            state, sid = fields[0], int(fields[3])
            if state in ("Z", "X"):
                continue
            env = (entry / "environ").read_bytes().split(b"\0")
            if needle in env or sid == session_id:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return found


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                    reason="chromium is not installed (Debian package `chromium`)")
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_ctrl_c_stops_make_test_within_5_s_and_leaves_no_process(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    marker = uuid.uuid4().hex
    # a fresh run: nothing of this session's pytest, xdist worker or make is inherited
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "MAKE", "MFLAGS", "MALARIA_TEST_DATA_"))}
    env.update({PROBE_ENV: str(probe), MARKER_ENV: marker})
    args = ["make", "--no-print-directory", "test", "TEST_NEEDS=install", "PYTEST_WORKERS=2",
            f"PYTEST_ARGS=-p no:cacheprovider --basetemp={tmp_path / 'inner'} tests/interrupt_probe.py"]
    log = tmp_path / "make.log"
    with log.open("wb") as out:
        # its own session and process group, like a shell's foreground job
        proc = subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not ((probe / "helpers.ready").exists() and (probe / "cli.ready").exists()):
            assert proc.poll() is None, f"make test ended before the probes were ready:\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"probes not ready after 240 s:\n{log.read_text()[-4000:]}"
            time.sleep(0.2)
        helpers = json.loads((probe / "helpers.ready").read_text())
        cli = json.loads((probe / "cli.ready").read_text())
        assert {helpers["worker"], cli["worker"]} == {"gw0", "gw1"}  # two xdist workers, one probe each
        running = " ".join(processes_of_run(marker, proc.pid).values())
        for name in ("weed", "moto_server", "chromium", "pytest"):
            assert name in running, f"{name} is not running: {running}"

        os.killpg(proc.pid, signal.SIGINT)
        sent = time.monotonic()
        try:
            code = proc.wait(timeout=STOP_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"make test still running {STOP_WITHIN:g} s after SIGINT:\n{log.read_text()[-4000:]}")
        took = time.monotonic() - sent
        assert code != 0 and took <= STOP_WITHIN
        # processes killed just before make exited may take a moment to disappear
        settle = time.monotonic() + 2
        while (left := processes_of_run(marker, proc.pid)) and time.monotonic() < settle:
            time.sleep(0.1)
        assert not left, "left running after Ctrl-C:\n" + "\n".join(f"{p}: {c[:200]}" for p, c in left.items())
        # the worker inside the click command stopped there, rather than record a failure and go on
        assert not (probe / "went-on").exists(), log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in processes_of_run(marker, proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
