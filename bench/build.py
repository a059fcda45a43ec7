"""Benchmark: full build from raw inputs, then an incremental build after a one-month data load.

The "previous load" is simulated by a data directory whose CHIRPS monthly series stops one
month earlier (every other input is a symlink to DATA_DIR); the "new load" is the real
directory. The second build reuses (copies, with the gzip compression) every file whose bytes did not change.

    python bench/build.py            # prints seconds and files written for both builds
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

from pipeline.build import build  # noqa: E402

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


def main() -> None:
    data_dir = Path(os.environ.get("DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
    work = Path(tempfile.mkdtemp(prefix="bench-build-"))
    try:
        old = work / "data-old"
        dropped = previous_load(data_dir, old)
        out = work / "build"
        t = time.perf_counter()
        full = build(old, out)
        full_s = time.perf_counter() - t
        t = time.perf_counter()
        inc = build(data_dir, out)
        inc_s = time.perf_counter() - t
        print(f"{'build':<34}{'seconds':>9}{'files':>9}{'written':>9}{'linked':>9}")
        print(f"{'full (load without ' + dropped + ')':<34}{full_s:>9.2f}{full.stats.files:>9}"
              f"{full.stats.written:>9}{full.stats.linked:>9}")
        print(f"{'incremental (+ ' + dropped + ')':<34}{inc_s:>9.2f}{inc.stats.files:>9}"
              f"{inc.stats.written:>9}{inc.stats.linked:>9}")
        print(f"incremental / full time: {inc_s / full_s:.2f}; files written: {inc.stats.written / full.stats.written:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
