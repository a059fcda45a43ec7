"""How many of the attack tests hold: this checkout's attack tests run against the code of this
checkout and of another commit, side by side, printing held/total for each.

An attack is one test (one parametrised case) in the files below, each of which plays an attack
over real HTTP on loopback, real SQLite or a real process (kill -9, slow clients, floods): the
dashboard's abuse tests, the local server's client-controlled attacks, and one file per weakness
of docs/dashboard.md's and docs/limits.md's reviews. A test that passes is an attack held.

The old code is taken with `git archive` into a temporary folder and this checkout's tests are
laid over it (the tests of today against the code of then), so an attack the old code does not
hold fails there on what it checks. Nothing in this checkout is changed.

    .venv/bin/python bench/attacks_held.py [--old REF] [--workers 2] [-k EXPR]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
# (file, what it attacks): every test in it is one attack
ATTACK_FILES = (
    ("tests/dashboard/test_abuse.py", "dashboard: jammed sign-in, mail cannon, visitor state, CSRF, heads"),
    ("tests/dashboard/test_crash.py", "kill -9 between a key change and its audit row"),
    ("tests/dashboard/test_caps_and_pools.py", "keys per holder and per hour; pools a stranger can spend"),
    ("tests/dashboard/test_operator_text.py", "formulas in exports, escapes in the operator's terminal"),
    ("tests/dashboard/test_rotation_marks.py", "device marks through secret rotations; the 429 text"),
    ("tests/dashboard/test_no_account_oracle.py", "whether an address has an account, by answer or work"),
    ("tests/edge/local/test_attacks.py", "API front: oversized heads, pipelining, trickled and silent clients"),
    ("tests/edge/local/test_bounded_headers.py", "API front: a 4,400-digit Range; a changed names index"),
    ("tests/edge/local/test_connection_caps.py", "both fronts: connections per client; dashboard deadlines"),
)


def export(ref: str, into: Path) -> None:
    """The tree of `ref`, with this checkout's tests over it."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    shutil.rmtree(into / "tests")
    shutil.copytree(ROOT / "tests", into / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    # this checkout is installed editable, and its finder would supply a module the old tree lacks
    # from this checkout: every process of the old run (xdist workers too) drops it at start-up
    (into / "sitecustomize.py").write_text(
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, '__name__', '') != '_EditableFinder']\n")
    data = ROOT.parent / "shared"
    if data.exists() and not (into.parent / "shared").exists():
        (into.parent / "shared").symlink_to(data)


def run(code: Path, files: list[str], workers: int, keyword: str | None) -> dict[str, dict[str, str]]:
    """{file: {test: outcome}} of the attack files run against the code under `code`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = str(code)
    args = [sys.executable, "-m", "pytest", *files, "-rA", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
            "-n", str(workers), "--dist", "loadfile", "-o", "addopts="]
    if keyword:
        args += ["-k", keyword]
    out = subprocess.run(args, cwd=code, env=env, capture_output=True, text=True).stdout
    found: dict[str, dict[str, str]] = {f: {} for f in files}
    for line in out.splitlines():
        m = re.match(r"^(PASSED|FAILED|ERROR|SKIPPED) (tests/\S+?\.py)::(\S+)", line)
        if m:
            found.setdefault(m.group(2), {})[m.group(3)] = m.group(1)
    return found


@click.command()
@click.option("--old", default=None, help="The commit whose code the attacks are played against (default: the merge "
              "base of HEAD and main, the code before this branch).")
@click.option("--workers", default=2, show_default=True)
@click.option("-k", "keyword", default=None, help="Only the attacks pytest's -k selects.")
def main(old: str | None, workers: int, keyword: str | None) -> None:
    if old is None:
        old = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, check=True, capture_output=True,
                             text=True).stdout.strip()[:12]
    files = [f for f, _ in ATTACK_FILES]
    with tempfile.TemporaryDirectory(prefix="attacks-held-") as tmp:
        old_tree = Path(tmp) / "old"
        export(old, old_tree)
        results = {"old": run(old_tree, files, workers, keyword), "new": run(ROOT, files, workers, keyword)}
    totals = {"old": [0, 0], "new": [0, 0]}
    print(f"{'attacks (tests) in':<45} {old + ' held':>12} {'now held':>10}  what")
    for f, what in ATTACK_FILES:
        names = sorted(set(results["old"].get(f, {})) | set(results["new"].get(f, {})))
        cells = []
        for side in ("old", "new"):
            got = results[side].get(f, {})
            held = sum(got.get(n) == "PASSED" for n in names)
            played = sum(got.get(n, "SKIPPED") != "SKIPPED" for n in names) or len(names)
            totals[side][0] += held
            totals[side][1] += played
            cells.append(f"{held}/{played}")
        print(f"{f:<45} {cells[0]:>12} {cells[1]:>10}  {what}")
        for n in names:
            for side, label in (("old", f"not held at {old}"), ("new", "not held now")):
                if results[side].get(f, {}).get(n) not in ("PASSED", "SKIPPED"):
                    print(f"    {label}: {n} ({results[side].get(f, {}).get(n, 'not run')})")
    (oh, ot), (nh, nt) = totals["old"], totals["new"]
    print(f"{'held/total':<45} {f'{oh}/{ot}':>12} {f'{nh}/{nt}':>10}")


if __name__ == "__main__":
    main()
