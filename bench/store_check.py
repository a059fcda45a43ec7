"""Benchmark: what checking the store's objects by their contents costs a build.

Before a build links an object into a release it checks the object's bytes (docs/local-releases.md):
a rendered file by comparing the object with the bytes in memory (`Store.holds`), a reused gzip copy
by hashing it (`Store.sound`). This measures both over every file of a built release, beside the
one-stat check by size and modification time they replaced (which `touch -d` or `cp -p` defeat),
in one run, best of three, CPU seconds (less disturbed by other work on a shared machine):

    .venv/bin/python bench/store_check.py --root build
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import click
import orjson

from pipeline.release.store import STORED_MTIME_NS, Store


def best(fn: Callable[[], bool], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.process_time()
        assert fn()
        times.append(time.process_time() - started)
    return min(times)


@click.command()
@click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path("build"),
              help="A build root with a current release.")
def main(root: Path) -> None:
    release = (root / "current").resolve()
    files = orjson.loads((release / "manifest.json").read_bytes())["files"]
    store = Store(root)
    rendered = [(e["sha256"], (release / k).read_bytes()) for k, e in files.items() if e["content_encoding"] is None]
    reused = [(e["sha256"], int(e["size"])) for e in files.values() if e["content_encoding"] == "gzip"]

    def by_date() -> bool:
        def one(sha: str, size: int) -> bool:
            st = store.path(sha).stat()
            return st.st_size == size and st.st_mtime_ns == STORED_MTIME_NS
        return all(one(s, len(d)) for s, d in rendered) and all(one(s, n) for s, n in reused)

    stat_only = best(by_date)
    compare = best(lambda: all(store.holds(s, d) for s, d in rendered))
    hashing = best(lambda: all(store.sound(s, n) for s, n in reused))
    mb = sum(len(d) for _, d in rendered) / 1e6
    gz_mb = sum(n for _, n in reused) / 1e6
    click.echo(f"release {release.name}: {len(rendered)} files ({mb:.1f} MB), {len(reused)} gzip copies ({gz_mb:.1f} MB)")
    click.echo(f"one stat per object (size, modification time): {stat_only:.2f} s CPU")
    click.echo(f"compare rendered files with their objects:     {compare:.2f} s CPU")
    click.echo(f"hash the reused gzip copies:                   {hashing:.2f} s CPU")
    click.echo(f"contents / dates: {(compare + hashing) / stat_only:.1f}x")


if __name__ == "__main__":
    main()
