"""Benchmark: full build, one-new-month build and unchanged build, side by side in one run.

The "previous load" is a data directory whose CHIRPS monthly series stops one month
earlier (every other input is a symlink to DATA_DIR); the "new load" is the real
directory. Four builds into one build root:

* full: the previous load into an empty root (every file written and compressed);
* one new month: the real directory (files whose bytes did not change are copied from
  the previous release after their SHA-256 is checked against its manifest);
* unchanged: the real directory again (content address equal: no release is built);
* unchanged, --force: the same inputs rendered anyway (the renderer's floor).

    python bench/build.py            # prints seconds, files written/reused and the ratio to the full build
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.build import BuildResult, build  # noqa: E402

CHIRPS = Path("rainfall/nga_state_chirps_monthly_1981_2026.csv")


def previous_load(data_dir: Path, into: Path) -> str:
    """A copy-by-symlink of DATA_DIR whose monthly rainfall ends one month earlier."""
    for path in data_dir.rglob("*"):
        rel = path.relative_to(data_dir)
        target = into / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif rel != CHIRPS:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(path.resolve(), target)
    lines = (data_dir / CHIRPS).read_text().splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    col = header.strip().split(",").index("month")

    def key(row: str) -> str:
        return row.split(",")[col]

    last = max(key(r) for r in rows)
    (into / CHIRPS).write_text(header + "".join(r for r in rows if key(r) != last))
    return last


def timed(data_dir: Path, out: Path, **kw: bool) -> tuple[float, BuildResult]:
    t = time.perf_counter()
    result = build(data_dir, out, **kw)
    return time.perf_counter() - t, result


def main() -> None:
    data_dir = Path(os.environ.get("DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
    work = Path(tempfile.mkdtemp(prefix="bench-build-"))
    try:
        old = work / "data-old"
        dropped = previous_load(data_dir, old)
        out = work / "build"
        runs = [
            (f"full (load without {dropped})", *timed(old, out)),
            (f"one new month (+ {dropped})", *timed(data_dir, out)),
            ("unchanged", *timed(data_dir, out)),
            ("unchanged, --force", *timed(data_dir, out, force=True)),
        ]
        full_s = runs[0][1]
        phases = ("key", "geography", "checks", "producers", "render")
        print(f"{'build':<30}{'seconds':>8}{'/ full':>7}{'files':>7}{'written':>8}{'reused':>7}"
              + "".join(f"{p:>10}" for p in phases))
        for name, seconds, r in runs:
            print(f"{name:<30}{seconds:>8.2f}{seconds / full_s:>7.2f}{r.stats.files:>7}{r.stats.written:>8}"
                  f"{r.stats.linked:>7}" + "".join(f"{r.phases.get(p, 0.0):>10.2f}" for p in phases))
        releases = sorted(p.name for p in (out / "releases").iterdir())
        print(f"releases made: {len(releases)} (unchanged inputs made none)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
