"""Benchmark: what the bulk downloads and the CSV responses add to a full build.

The datasets are computed once from DATA_DIR; then, side by side in one run, releases are
rendered fresh (nothing to hard-link) with and without the bundle producer, alternating,
best of N each, in wall and CPU time. Also timed: rendering every CSV response from its document. Prints seconds,
the difference, the ratio and the zip's size.

    python bench/bundles.py [repeats]
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

from edge.routes import ROUTES  # noqa: E402
from pipeline.build import PRODUCERS, now_iso, run_producers  # noqa: E402
from pipeline.datasets import downloads  # noqa: E402
from pipeline.datasets.base import BuildContext  # noqa: E402
from pipeline.geography import load_geography  # noqa: E402
from pipeline.release import tabular  # noqa: E402
from pipeline.release.render import render_release  # noqa: E402


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    data_dir = Path(os.environ.get("DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
    ctx = BuildContext(data_dir=data_dir, updated_at=now_iso())
    ctx.geography = load_geography(data_dir)
    t = time.perf_counter()
    base = [p for p in PRODUCERS if not p.endswith(".downloads")]
    produced, _ = run_producers(ctx, tuple(base))
    compute_s = time.perf_counter() - t
    site = [p for p in produced if p.dataset == "site"]
    data = [p for p in produced if p.dataset != "site"]

    work = Path(tempfile.mkdtemp(prefix="bench-bundles-"))
    without: list[float] = []
    with_: list[float] = []
    cpu_without: list[float] = []
    cpu_with: list[float] = []
    zip_bytes = bundle_bytes = 0
    try:
        for i in range(repeats):
            t, c = time.perf_counter(), time.process_time()
            render_release(work / f"without-{i}", data + site, ctx.updated_at)
            without.append(time.perf_counter() - t)
            cpu_without.append(time.process_time() - c)

            t, c = time.perf_counter(), time.process_time()
            ctx.produced = list(data)
            bundle = downloads.produce(ctx)
            stats = render_release(work / f"with-{i}", [*data, bundle, *site], ctx.updated_at)
            with_.append(time.perf_counter() - t)
            cpu_with.append(time.process_time() - c)
            zip_bytes, bundle_bytes = stats.zip_bytes, stats.bundle_bytes
            shutil.rmtree(work / f"without-{i}")
            shutil.rmtree(work / f"with-{i}")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    docs = {path: d for p in data for path, d in p.documents.items()}
    csv_routes = [r for r in ROUTES if r.param("format") is not None and r.path in docs]
    t = time.perf_counter()
    n_csv = 0
    for r in csv_routes:
        for doc in docs[r.path].values():
            tabular.to_csv(doc)
            n_csv += 1
    csv_s = time.perf_counter() - t

    a, b = min(without), min(with_)
    print(f"computing the datasets once: {compute_s:.2f} s")
    print(f"render without bundles: {a:.2f} s   with bundles (tables, outlines, zip, writing): {b:.2f} s")
    print(f"bundles add {b - a:.2f} s to a full build (ratio {b / a:.2f}, best of {repeats})")
    ca, cb = min(cpu_without), min(cpu_with)
    print(f"CPU time (all threads): {ca:.2f} s without, {cb:.2f} s with: bundles add {cb - ca:.2f} s "
          f"(ratio {cb / ca:.2f}); wall time on a shared machine is noisier")
    print(f"bundle: {bundle_bytes / 1e6:.1f} MB in files, zip {zip_bytes / 1e6:.1f} MB")
    print(f"CSV responses: {n_csv} documents rendered as CSV in {csv_s:.2f} s (inside both renders)")


if __name__ == "__main__":
    main()
