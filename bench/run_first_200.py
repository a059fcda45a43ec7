"""A newcomer's wait: from a fresh clone, `make run` until the docs answer 200, as a ratio against a
plain `pip install` of the same runtime dependencies into a fresh venv, measured side by side in one
run, so the machine's speed (and how busy it is) cancels out.

    python bench/run_first_200.py                      # this checkout's HEAD
    python bench/run_first_200.py --compare d20a904    # and that commit, side by side (A B B A)

Each subject is a fresh `git clone` (no .venv, node_modules or build). The reference is timed just
before and just after its `make run` (the mean is used), so the pip cache is as warm for both. Ports
are free ones chosen here (never 8080/8090); the servers are stopped afterwards (their process group).
Prints the phases `make run` reported and any deprecation warning it printed.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 1800.0  # seconds a `make run` may take to answer before the bench gives up


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")


def clone(rev: str, into: Path) -> Path:
    run(["git", "clone", "--quiet", str(REPO), str(into)])
    run(["git", "-c", "advice.detachedHead=false", "checkout", "--quiet", rev], cwd=into)
    return into


def plain_pip(checkout: Path, where: Path) -> float:
    """Seconds for a fresh venv and `pip install` of the checkout's runtime dependencies, as `make run`
    installs them (pip upgraded first, as the Makefile does)."""
    deps = tomllib.loads((checkout / "pyproject.toml").read_text())["project"]["dependencies"]
    started = time.perf_counter()
    run([sys.executable, "-m", "venv", str(where)])
    run([str(where / "bin" / "pip"), "install", "-q", "--upgrade", "pip"])
    run([str(where / "bin" / "pip"), "install", "-q", *deps])
    return time.perf_counter() - started


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def make_run(checkout: Path, data_dir: Path, log: Path) -> float:
    """Seconds from `make run` to the first 200 of its docs; the servers are stopped afterwards."""
    port, dash = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DIR", "DASHBOARD_URL", "VIRTUAL_ENV")}
    env["DATA_DIR"] = str(data_dir)
    url = f"http://127.0.0.1:{port}/docs/"
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(["make", "run", f"PORT={port}", f"DASH_PORT={dash}"], cwd=checkout, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while not answers(url):
                if proc.poll() is not None:
                    raise SystemExit(f"make run stopped ({proc.returncode}) before serving; see {log}")
                if time.perf_counter() - started > TIMEOUT:
                    raise SystemExit(f"make run did not answer within {TIMEOUT:.0f} s; see {log}")
                time.sleep(0.25)
            return time.perf_counter() - started
        finally:
            os.killpg(proc.pid, signal.SIGTERM)  # the group `make run` leads: make, the API, the dashboard
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def measure(name: str, rev: str, tmp: Path, data_dir: Path) -> dict[str, Any]:
    checkout = clone(rev, tmp / f"{name}-clone")
    before = plain_pip(checkout, tmp / f"{name}-pip-1")
    log = tmp / f"{name}-make-run.log"
    first_200 = make_run(checkout, data_dir, log)
    after = plain_pip(checkout, tmp / f"{name}-pip-2")
    raw = log.read_bytes()  # as bytes: text mode would turn each carriage return into a line break
    text = raw.decode(errors="replace")
    pip = (before + after) / 2
    return {"name": name, "rev": rev, "pip": pip, "pip_runs": (before, after), "run": first_200,
            "ratio": first_200 / pip, "phases": re.findall(r"^== .*$", text, re.M),
            "deprecations": len(re.findall(r"deprecat", text, re.I)),
            "longest_line": max(map(len, raw.split(b"\n"))), "carriage_returns": raw.count(b"\r")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", metavar="REV", help="also measure this commit (e.g. the last release's)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each subject, in alternating order")
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("DATA_DIR", REPO.parent / "shared" / "data")))
    args = ap.parse_args(argv)
    data_dir = args.data_dir.resolve()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    subjects = [("head", head)] + ([("compare", args.compare)] if args.compare else [])
    # rounds alternate the order (A B, B A, ...), so what the first run warms (the pip and npm caches,
    # the data files in the page cache) favours neither subject
    order = [s for i in range(args.rounds) for s in (subjects if i % 2 == 0 else subjects[::-1])]
    with tempfile.TemporaryDirectory(prefix="run-first-200-") as tmp:
        results = [measure(f"{name}-{i}", rev, Path(tmp), data_dir) for i, (name, rev) in enumerate(order)]
    print("fresh clone, `make run` to the first 200 of /docs/, against a plain pip install of the same "
          "runtime dependencies into a fresh venv (mean of one just before and one just after)")
    for r in results:
        b, a = r["pip_runs"]
        print(f"{r['rev']:>10}: make run {r['run']:6.1f} s / pip {r['pip']:5.1f} s (runs {b:.1f}, {a:.1f}) "
              f"= ratio {r['ratio']:.2f}; log: {r['deprecations']} mentions of deprecation, longest line "
              f"{r['longest_line']} bytes, {r['carriage_returns']} carriage returns")
        for line in r["phases"]:
            print(f"            {line}")
    means = {rev: sum(r["ratio"] for r in results if r["rev"] == rev) / args.rounds for _, rev in subjects}
    print("mean ratio: " + "; ".join(f"{rev} {m:.2f}" for rev, m in means.items()))
    if len(subjects) == 2:
        print(f"ratio {subjects[1][1]} -> {subjects[0][1]}: {means[subjects[1][1]]:.2f} -> {means[subjects[0][1]]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
