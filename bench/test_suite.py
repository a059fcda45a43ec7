"""Benchmark: the test suite's wall time at another commit against this checkout's, side by side.

Clones this repository twice into a fresh folder (beside a link to `../shared`, so both see
the data as a checkout does), checks out the old commit (default: the merge base of HEAD and
`main`) and the new one (default: HEAD), installs each (`make install`, timed apart), and runs
each suite exactly as its own Makefile's `make test` runs pytest (the command `make -n test`
prints; the lint is left out of both), alternating old and new over `--rounds`. Prints each
run's wall time and test counts, and the ratio of wall times new/old.

    .venv/bin/python bench/test_suite.py [--old REF] [--new REF] [--rounds 1]
        [--pytest-args "tests/test_citation.py -q"] [--workdir DIR] [--keep]

A full run takes about half an hour on two cores and should have the machine to itself: the
ratio is what this script is for, the absolute times move with the load. Before each run it waits
(at most 4 minutes) for the machine to go quiet (`--quiet-load`), so neither suite starts while the
other's last run is still being written back to disk. `--pytest-args`
narrows both runs (paths, -k, -m) to try the mechanics quickly; an option only the new suite
knows (-n) would break the old run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


@dataclass
class Run:
    name: str
    ref: str
    seconds: float
    code: int
    counts: dict[str, int]
    log: Path


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def clean_env(data_dir: Path) -> dict[str, str]:
    """This environment less anything of a pytest or make run around us; DATA_DIR absolute."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "MAKE", "MFLAGS", "MALARIA_TEST_", "VIRTUAL_ENV"))}
    env["DATA_DIR"] = str(data_dir)
    return env


def suite_command(tree: Path, env: dict[str, str]) -> list[str]:
    """The pytest command line of the tree's own `make test` (its last recipe line)."""
    dry = subprocess.run(["make", "-n", "--no-print-directory", "test"], cwd=tree, env=env,
                         capture_output=True, text=True, check=True).stdout
    lines = [ln for ln in dry.splitlines() if re.match(r"^\S*\.venv/bin/pytest\b", ln.strip())]
    if not lines:
        raise click.ClickException(f"no pytest command in `make -n test` of {tree}:\n{dry[-2000:]}")
    return shlex.split(lines[-1])


def settle(max_load: float, limit: float = 240.0) -> tuple[float, float]:
    """Let the machine go quiet before a run: the files the last run wrote flushed (`sync`) and the
    one-minute load average under `max_load`, or `limit` seconds gone. Without it the second suite of
    a pair started while the first one's deleted temporary files were still being written back and its
    load was still decaying, and paid for both. Returns (seconds waited, load at the start)."""
    t = time.monotonic()
    os.sync()
    while os.getloadavg()[0] > max_load and time.monotonic() - t < limit:
        time.sleep(5)
    return time.monotonic() - t, os.getloadavg()[0]


def counts_of(text: str) -> dict[str, int]:
    tail = [ln for ln in text.splitlines() if SUMMARY.search(ln)]
    if not tail:
        return {}
    return {kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in SUMMARY.findall(tail[-1])}


def collected(tree: Path, env: dict[str, str], extra: list[str]) -> str:
    out = subprocess.run([str(tree / ".venv/bin/pytest"), "--collect-only", "-q", "-p", "no:cacheprovider", *extra],
                         cwd=tree, env=env, capture_output=True, text=True)
    lines = [ln for ln in out.stdout.splitlines() if "collected" in ln or "tests" in ln]
    return lines[-1] if lines else "?"


@click.command()
@click.option("--old", "old_ref", default=None, help="the old commit (default: merge base of HEAD and main)")
@click.option("--new", "new_ref", default="HEAD", show_default=True)
@click.option("--rounds", default=1, show_default=True, help="runs of each suite, alternating old and new")
@click.option("--pytest-args", default="", help="appended to both pytest commands, e.g. a path or -k")
@click.option("--workdir", type=click.Path(path_type=Path), default=None,
              help="where the clones go (default: a new temporary folder)")
@click.option("--keep", is_flag=True, help="keep the clones and logs")
@click.option("--quiet-load", type=float, default=None,
              help="wait before each run until the 1-minute load average is under this (default: cores / 2)")
def main(old_ref: str | None, new_ref: str, rounds: int, pytest_args: str, workdir: Path | None, keep: bool,
         quiet_load: float | None) -> None:
    from pipeline.settings import default_data_dir

    new = git("rev-parse", new_ref)
    old = git("rev-parse", old_ref) if old_ref else git("merge-base", "HEAD", "main")
    if old == new and not old_ref:
        old = git("rev-parse", "main")
    if git("status", "--porcelain"):
        click.echo("note: this checkout has uncommitted changes; the bench measures commits only", err=True)
    data = default_data_dir()
    # beside the checkout, with ../shared linked: tests that find the data or SPEC beside the tree work
    base = workdir or Path(tempfile.mkdtemp(prefix="bench-tests-"))
    base.mkdir(parents=True, exist_ok=True)
    shared = base / "shared"
    if not shared.exists():
        shared.symlink_to(ROOT.parent / "shared")
    env = clean_env(data)
    extra = shlex.split(pytest_args)
    trees: dict[str, tuple[str, Path]] = {}
    try:
        for name, ref in (("old", old), ("new", new)):
            tree = base / name
            if not tree.exists():
                subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(tree)], check=True)
            else:  # a kept workdir (--workdir): bring its clone up to date
                subprocess.run(["git", "fetch", "-q", str(ROOT), ref], cwd=tree, check=True)
            subprocess.run(["git", "checkout", "-q", "--detach", ref], cwd=tree, check=True)
            t = time.monotonic()
            with (base / f"{name}-install.log").open("w") as out:
                subprocess.run(["make", "--no-print-directory", "install"], cwd=tree, env=env, check=True,
                               stdout=out, stderr=subprocess.STDOUT)
            click.echo(f"{name} {ref[:12]}: installed in {time.monotonic() - t:.0f} s; "
                       f"{collected(tree, env, extra)}")
            trees[name] = (ref, tree)
        runs: list[Run] = []
        for r in range(rounds):
            for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                ref, tree = trees[name]
                cmd = [*suite_command(tree, env), *extra]
                log = base / f"{name}-{r}.log"
                waited, load = settle(quiet_load if quiet_load is not None else (os.cpu_count() or 2) / 2)
                click.echo(f"  (waited {waited:.0f} s for a quiet machine: load {load:.2f})")
                t = time.monotonic()
                with log.open("w") as out:
                    code = subprocess.run(cmd, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
                seconds = time.monotonic() - t
                runs.append(Run(name, ref, seconds, code, counts_of(log.read_text()), log))
                click.echo(f"  round {r + 1} {name}: {seconds:7.1f} s  exit {code}  "
                           f"{' '.join(f'{k} {v}' for k, v in runs[-1].counts.items())}  ({shlex.join(cmd[1:])})")
        by = {n: [x.seconds for x in runs if x.name == n] for n in ("old", "new")}
        mean = {n: sum(v) / len(v) for n, v in by.items()}
        click.echo(f"\nsuite wall time: old {old[:12]} {mean['old']:.1f} s, new {new[:12]} {mean['new']:.1f} s "
                   f"(mean of {rounds}); ratio new/old {mean['new'] / mean['old']:.3f}")
        for n in ("old", "new"):
            last = [x for x in runs if x.name == n][-1]
            click.echo(f"tests {n}: {sum(last.counts.get(k, 0) for k in ('passed', 'failed', 'skipped', 'error'))} "
                       f"run ({', '.join(f'{k} {v}' for k, v in last.counts.items())})")
        if any(x.code not in (0, 5) for x in runs):
            click.echo("some runs failed: see their logs" + ("" if keep else " (use --keep)"), err=True)
    finally:
        if keep:
            click.echo(f"clones and logs kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
