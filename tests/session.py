"""The test session's own plumbing (a plugin loaded by tests/conftest.py): helper processes that
stop with the run, Ctrl-C that stops it, one real build shared by every xdist worker, and the
report of a real-data folder that changed during the run.

Ctrl-C. A terminal sends SIGINT to its whole foreground process group: pytest, its xdist workers
and every process they started. Two things used to keep the run going: helper servers (moto,
SeaweedFS) in the same group died first, so the running test failed on a dead server; and code
under test that turns KeyboardInterrupt into an ordinary result (click's standalone mode, which
`CliRunner` runs, answers "Aborted!" with exit code 1) made pytest record a failure and go on.
Now helpers run in their own session (`spawn`), so only their fixture, or this module at the end,
stops them; a SIGINT is remembered and raised again after the test phase it hit, whatever the
test did with it; a second SIGINT, or a run still alive `GRACE` seconds after the first, kills
the helpers and exits at once.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import datasnapshot, tmpbase

GRACE = 3.0  # seconds from the first SIGINT to a forced exit (teardown of fixtures gets that long)
INTERRUPTED_EXIT = 130  # 128 + SIGINT, what a shell reports for a job stopped by Ctrl-C

_helpers: dict[int, subprocess.Popen[Any]] = {}
_owner = os.getpid()  # a child forked by a test (multiprocessing) inherits all this and must not act on it
_lock = threading.Lock()
_interrupted = threading.Event()


# --- helper processes ------------------------------------------------------------------------


def spawn(args: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Start a helper server in its own session (a terminal's Ctrl-C does not reach it); it is
    stopped by `stop`, by the end of the session, or by an interrupt, whichever comes first."""
    proc: subprocess.Popen[Any] = subprocess.Popen(args, start_new_session=True, **kwargs)
    with _lock:
        _helpers[proc.pid] = proc
    return proc


def stop(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    """SIGTERM to the helper's process group, SIGKILL after `grace` seconds (at once when interrupted)."""
    with _lock:
        _helpers.pop(proc.pid, None)
    if proc.poll() is None:
        _signal_group(proc, signal.SIGKILL if _interrupted.is_set() else signal.SIGTERM)
        try:
            proc.wait(timeout=0.5 if _interrupted.is_set() else grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=10)
    else:
        _signal_group(proc, signal.SIGKILL)  # whatever it left behind in its group


def _signal_group(proc: subprocess.Popen[Any], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # its own session: the group id is its pid


def kill_all() -> None:
    """SIGKILL every helper still running (their whole groups), and reap them."""
    if os.getpid() != _owner:
        return
    with _lock:
        procs = [p for p in _helpers.values() if p.poll() is None]  # a reaped pid may be reused
        _helpers.clear()
    for proc in procs:
        _signal_group(proc, signal.SIGKILL)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired, ChildProcessError):
            proc.wait(timeout=2)


atexit.register(kill_all)


# --- Ctrl-C ----------------------------------------------------------------------------------


def _force_exit(why: str, code: int = INTERRUPTED_EXIT) -> None:
    kill_all()
    with contextlib.suppress(Exception):
        sys.stderr.write(f"\n{why}: helpers killed, exiting\n")
        sys.stderr.flush()
    datasnapshot.remove()
    tmpbase.remove()
    os._exit(code)


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (a CI timeout, `kill`) ends the process without atexit or finalizers: the helpers,
    in their own sessions, would outlive it. Kill them first."""
    if os.getpid() != _owner:  # a forked child: die as it would have
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _force_exit("SIGTERM", 128 + signal.SIGTERM)


def _watchdog() -> None:
    time.sleep(GRACE)
    _force_exit(f"still running {GRACE:g} s after Ctrl-C")


def _on_sigint(signum: int, frame: Any) -> None:
    if os.getpid() != _owner:  # a forked child: the default behaviour
        raise KeyboardInterrupt
    if _interrupted.is_set():
        _force_exit("second Ctrl-C")
    _interrupted.set()
    threading.Thread(target=_watchdog, name="interrupt-watchdog", daemon=True).start()
    raise KeyboardInterrupt


def interrupted() -> bool:
    return _interrupted.is_set()


def pytest_configure(config: pytest.Config) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_sigint)
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _on_sigterm)


@contextlib.contextmanager
def _reraise_interrupt() -> Iterator[None]:
    try:
        yield
    finally:
        if _interrupted.is_set():
            raise KeyboardInterrupt  # the interrupt stops the run even if the test swallowed it


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    with _reraise_interrupt():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    with _reraise_interrupt():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    with _reraise_interrupt():
        return (yield)


KEEP_TMP_ON = (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERNAL_ERROR)
_exit_status: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


def pytest_unconfigure(config: pytest.Config) -> None:
    kill_all()
    datasnapshot.remove()
    if not (_exit_status and _exit_status[-1] in KEEP_TMP_ON):
        tmpbase.remove()  # kept after a failure for a look; the next session removes it


# --- scheduling ------------------------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with a `heavy` test first, then those with `slow` tests, then the rest; each
    module's tests together and in their own order. A parallel run (`--dist loadscope
    --no-loadscope-reorder`, the Makefile's) then starts its longest tests at once, on
    different workers, and ends on short ones instead of one worker still busy with a long one.

    Right after the first module, the `slow` modules that do not use the session build
    (`real_build`; they read the real data or build small inputs of their own): the first module's
    worker makes that build (half a minute), and the next workers would otherwise wait for it doing
    nothing. The order depends on the collection only, so every worker sorts it the same way
    (xdist requires it)."""
    rank: dict[str, tuple[int, int]] = {}
    builds: set[str] = set()
    for i, item in enumerate(items):
        module = item.nodeid.split("::", 1)[0]
        kind = 0 if item.get_closest_marker("heavy") else 1 if item.get_closest_marker("slow") else 2
        first = rank.get(module, (2, i))
        rank[module] = (min(first[0], kind), first[1])
        if "real_build" in getattr(item, "fixturenames", ()):
            builds.add(module)
    modules = sorted(rank, key=lambda m: rank[m])
    if modules and modules[0] in builds:
        beside = [m for m in modules[1:] if m not in builds and rank[m][0] <= 1]
        modules = [modules[0], *beside, *(m for m in modules[1:] if m not in beside)]
    position = {m: n for n, m in enumerate(modules)}
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda item: (position[item.nodeid.split("::", 1)[0]], order[id(item)]))


# --- shared between xdist workers ------------------------------------------------------------


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's base temporary folder common to every xdist worker (each worker's own
    basetemp is a folder inside it), or the basetemp itself in a run without workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Any) -> Path:
    """`make(path)` run once per session across all workers (a file lock in the shared folder);
    the others wait for it and reuse `path`. A failed `make` is tried again by the next caller."""
    from filelock import FileLock

    root = shared_dir(tmp_path_factory)
    path, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            if path.exists():
                import shutil

                shutil.rmtree(path)
            make(path)
            done.write_text(str(os.getpid()))
    return path


# --- the real data ---------------------------------------------------------------------------


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    if tmpbase.owned() is not None:
        lines.append(f"temporary files: {tmpbase.owned()} (tests/tmpbase.py)")
    snap = os.environ.get(datasnapshot.SNAPSHOT_ENV)
    if snap and datasnapshot.owner():
        lines.append(f"real data: {os.environ.get(datasnapshot.ORIGINAL_ENV)}, read from a copy taken now ({snap})")
    return lines


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    kept = tmpbase.owned()
    if kept is not None and exitstatus in KEEP_TMP_ON:
        terminalreporter.line(f"temporary files of this run kept in {kept} (the next run removes them)")
    changed = datasnapshot.changes()
    if changed:
        tr = terminalreporter
        tr.section("the real data changed during this run", sep="!", red=True, bold=True)
        tr.line("The tests read a copy taken at the start; their results hold for the data as it was then.",
                red=True)
        for line in changed:
            tr.line(f"  {line}", red=True)
