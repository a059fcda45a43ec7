"""Benchmark: what a release costs — full build, one new month, a forced rebuild, disk, memory.

Monthly data loads are simulated from DATA_DIR: load k is a copy-by-symlink of it whose CHIRPS
monthly series stops k months before the real one (tests/rainfall_files.py and the refresh
tests make new months the same way). Every build runs in its own process, so its peak memory
is its own. Printed side by side, as ratios measured in this run (targets: docs/releases.md):

* one new month / full build (seconds, and CPU seconds, which other work on a shared machine
  disturbs less; best of two runs each), and how many of the new month's files were linked by the
  key of what they are made from (pipeline/release/reuse.py) rather than rendered;
* a forced rebuild of unchanged inputs: files that differ from the release it rebuilds;
* disk added by one new month / disk of one release (hard links counted once);
* disk after N monthly refreshes with the default retention / one release;
* full build peak memory (MiB);
* `malaria-risk audit` CPU seconds on the new month's release (aim <= 25), and with `--base REV` the
  same audit by the code of that revision (`git archive`), run beside it on the same release;
* with `--base REV`, that revision's full build and new month (twice each, as this tree's), so the
  figures above have their before beside them.

    .venv/bin/python bench/build.py [--months 12] [--base REV]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHIRPS = Path("rainfall/nga_state_chirps_monthly_1981_2026.csv")

CHILD = """
import json, resource, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from pipeline.build import build
from pipeline.release.catalogue import retain
t = time.perf_counter()
cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
r = build(Path(sys.argv[1]), Path(sys.argv[2]), force=sys.argv[3] == "force")
seconds = time.perf_counter() - t
if sys.argv[4] != "0":
    retain(Path(sys.argv[2]), int(sys.argv[4]))
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"seconds": seconds, "cpu": use.ru_utime + use.ru_stime - cpu0,
                  "release": r.stats.release_id, "files": r.stats.files,
                  "written": r.stats.written, "unchanged": r.unchanged,
                  "reused": getattr(r.stats, "reused", 0),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


AUDIT = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from pipeline.release.audit import audit, held_out_seasons, restricted_references
data = Path(sys.argv[3])
refs = restricted_references(data)
result = audit(Path(sys.argv[2]), refs, held_out_seasons(data) if len(refs.series) else {})
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu": use.ru_utime + use.ru_stime, "findings": len(result.findings)}))
"""


def run_audit(code: Path, release: Path, data_dir: Path) -> dict:
    """`malaria-risk audit`'s work (references, held-out seasons, every file) by the code under `code`."""
    got = subprocess.run([sys.executable, "-c", AUDIT, str(code), str(release), str(data_dir)],
                         capture_output=True, text=True, cwd=code)
    if got.returncode:
        raise SystemExit(got.stderr[-3000:])
    return json.loads(got.stdout.strip().splitlines()[-1])


def load_without(data_dir: Path, into: Path, months: int) -> str:
    """A copy-by-symlink of DATA_DIR whose monthly rainfall ends `months` months earlier; its last month."""
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
    month = sorted({r.split(",")[col] for r in rows})
    keep = set(month[: len(month) - months])
    (into / CHIRPS).write_text(header + "".join(r for r in rows if r.split(",")[col] in keep))
    # a load's time is its newest file's (no fetch record here): each load an hour after the one before
    newest = max(p.stat().st_mtime for p in data_dir.rglob("*") if p.is_file())
    stamp = int(newest) + 3600 * (1000 - months)
    os.utime(into / CHIRPS, (stamp, stamp))
    return max(keep)


def run_build(data: Path, out: Path, force: bool = False, keep: int = 0, code: Path = ROOT) -> dict:
    """A build by the code under `code` (this tree, or a base revision's archive) in its own process."""
    got = subprocess.run([sys.executable, "-c", CHILD.format(root=str(code)), str(data), str(out),
                          "force" if force else "-", str(keep)], capture_output=True, text=True, cwd=code)
    if got.returncode:
        raise SystemExit(got.stderr[-3000:])
    return json.loads(got.stdout.strip().splitlines()[-1])


def disk(root: Path) -> int:
    """Bytes of disk under `root` (blocks), each inode once: hard links are not counted twice."""
    seen: set[int] = set()
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            st = os.lstat(os.path.join(dirpath, name))
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_blocks * 512
    return total


def differing(a: Path, b: Path) -> int:
    """Files of release `a` and `b` that differ (or exist in one only); the manifests compared without
    their build time."""
    def files(d: Path) -> dict[str, Path]:
        return {p.relative_to(d).as_posix(): p for p in d.rglob("*") if p.is_file()}

    fa, fb = files(a), files(b)
    out = len(fa.keys() ^ fb.keys())
    for k in fa.keys() & fb.keys():
        if k == "manifest.json":
            ma, mb = json.loads(fa[k].read_bytes()), json.loads(fb[k].read_bytes())
            ma.pop("built_at", None)
            mb.pop("built_at", None)
            out += ma != mb
        elif fa[k].read_bytes() != fb[k].read_bytes():
            out += 1
    return out


@click.command()
@click.option("--months", default=12, show_default=True, help="Monthly refreshes simulated for the retention figure.")
@click.option("--keep", default=3, show_default=True, help="The retention rule's N (refresh's default).")
@click.option("--base", default=None, help="A git revision whose full build and audit run beside this tree's "
              "(before/after).")
@click.option("--quick", is_flag=True, help="Leave out the forced rebuild and the monthly refreshes (retention).")
def main(months: int, keep: int, base: str | None, quick: bool) -> None:
    data_dir = Path(os.environ.get("DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
    work = Path(tempfile.mkdtemp(prefix="bench-build-"))
    try:
        loads = []
        for k in range(months, -1, -1):  # oldest first; the last is the real directory's months
            d = work / f"data-{k}"
            loads.append((load_without(data_dir, d, k), d))
        out = work / "build"
        # the full build and the new month into one root, as a month passes; then both again into a
        # second root, interleaved, and the faster of each kept (the machine is shared: a ratio of
        # single runs moves with whatever else runs)
        full = run_build(loads[-2][1], out)
        one_release = disk(out)
        new = run_build(loads[-1][1], out)
        added = disk(out) - one_release
        full2 = run_build(loads[-2][1], work / "build2")
        new2 = run_build(loads[-1][1], work / "build2")
        full_s, new_s = min(full["seconds"], full2["seconds"]), min(new["seconds"], new2["seconds"])
        full_cpu, new_cpu = min(full["cpu"], full2["cpu"]), min(new["cpu"], new2["cpu"])
        # a forced rebuild of the same inputs into a second root: every file compared
        if quick:
            again, differ, same_id = new, -1, True
        else:
            again = run_build(loads[-1][1], work / "again", force=True)
            differ = differing(out / "releases" / new["release"], work / "again" / "releases" / again["release"])
            same_id = new["release"] == again["release"]
        # the audit of the new month's release, by this tree and (beside it) by the base revision
        release = out / "releases" / new["release"]
        audits = {"this tree": run_audit(ROOT, release, data_dir)}
        base_full: list[dict] = []
        base_new: list[dict] = []
        if base:
            (work / "base").mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", base], check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(work / "base")], input=archive, check=True)
            # the site's pinned front-end libraries are not in git: the base builds with this tree's copy
            libs = ROOT / "pipeline" / "site" / "node_modules"
            if libs.is_dir() and not (work / "base" / "pipeline" / "site" / "node_modules").exists():
                os.symlink(libs, work / "base" / "pipeline" / "site" / "node_modules")
            audits[f"base {base}"] = run_audit(work / "base", release, data_dir)
            # the base revision's full build from nothing and its new month, twice, as this tree's above
            for i in (1, 2):
                base_full.append(run_build(loads[-2][1], work / f"base-build{i}", code=work / "base"))
                base_new.append(run_build(loads[-1][1], work / f"base-build{i}", code=work / "base"))
            audits["this tree (again)"] = run_audit(ROOT, release, data_dir)
        # N monthly refreshes with the default retention (as `refresh` runs it)
        monthly = work / "monthly"
        steps = [] if quick else [run_build(d, monthly, keep=keep) for _, d in loads]
        after = disk(monthly) if steps else 0
        kept = sorted(p.name for p in (monthly / "releases").iterdir()) if steps else []

        print(f"data: {data_dir}; loads ending {loads[0][0]} .. {loads[-1][0]}")
        print(f"{'measure':<62}{'value':>12}{'aim':>10}")
        rows = [
            ("one new month / full build (seconds, best of 2 each)", f"{new_s / full_s:.2f}", "<= 0.35"),
            ("one new month / full build (CPU seconds, best of 2 each)", f"{new_cpu / full_cpu:.2f}", "<= 0.35"),
            ("  full build s / new month s (each run)",
             f"{full['seconds']:.1f},{full2['seconds']:.1f}/{new['seconds']:.1f},{new2['seconds']:.1f}", ""),
            ("  full build CPU s / new month CPU s (each run)",
             f"{full['cpu']:.1f},{full2['cpu']:.1f}/{new['cpu']:.1f},{new2['cpu']:.1f}", ""),
            ("  new month: files linked by their inputs' key, not rendered", f"{new['reused']}", ""),
            ("forced rebuild of unchanged inputs: files that differ", f"{differ}", "0"),
            ("  (the same release id both times)", f"{same_id}", ""),
            ("disk added by a new month / one release", f"{added / one_release:.2f}", "<= 0.5"),
            ("  one release MB / added MB", f"{one_release / 1e6:.0f}/{added / 1e6:.0f}", ""),
            (f"disk after {months} monthly refreshes, keep {keep} / one release", f"{after / one_release:.2f}",
             "<= 3"),
            (f"  releases kept after {months} refreshes", f"{len(kept)}", ""),
            ("full build peak memory (MiB)", f"{max(full['peak_mib'], full2['peak_mib']):.0f}", "<= 500"),
            ("  files in a release / objects written by the new month",
             f"{new['files']}/{new['written']}", ""),
            ("  monthly build seconds (median)",
             f"{sorted(s['seconds'] for s in steps[1:])[len(steps[1:]) // 2]:.1f}" if len(steps) > 1 else "-", ""),
        ]
        if base_full:
            base_cpu = min(b["cpu"] for b in base_full)
            base_s = min(b["seconds"] for b in base_full)
            rows += [(f"full build CPU s, this tree / base {base} (best of 2 each)", f"{full_cpu / base_cpu:.2f}",
                      "<= 1.20"),
                     ("  base full build CPU s (each run)", ",".join(f"{b['cpu']:.1f}" for b in base_full), ""),
                     (f"base {base}: one new month / full build (seconds)",
                      f"{min(b['seconds'] for b in base_new) / base_s:.2f}", "<= 0.35"),
                     (f"base {base}: one new month / full build (CPU seconds)",
                      f"{min(b['cpu'] for b in base_new) / base_cpu:.2f}", "<= 0.35"),
                     ("  base full build s / new month s (each run)",
                      ",".join(f"{b['seconds']:.1f}" for b in base_full) + "/"
                      + ",".join(f"{b['seconds']:.1f}" for b in base_new), ""),
                     ("  base new month CPU s (each run)", ",".join(f"{b['cpu']:.1f}" for b in base_new), ""),
                     ("  base full build peak memory (MiB)", f"{max(b['peak_mib'] for b in base_full):.0f}", "")]
        mine = min(a["cpu"] for k, a in audits.items() if k.startswith("this tree"))
        rows.append(("audit CPU seconds (this tree, best of the runs)", f"{mine:.1f}", "<= 25"))
        rows += [(f"  audit CPU seconds, {k} ({a['findings']} findings)", f"{a['cpu']:.1f}", "")
                 for k, a in audits.items()]
        for name, value, aim in rows:
            print(f"{name:<62}{value:>12}{aim:>10}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
