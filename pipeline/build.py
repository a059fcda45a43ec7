"""Build orchestration: load inputs once, run every producer, render one release.

Producers are listed by import, in PRODUCERS: adding a dataset is one module in
pipeline/datasets/ and one line here. A producer whose inputs are absent raises
DatasetUnavailable: the release is still built, and its routes answer their
documented error.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pipeline import buildkey, cache
from pipeline.datasets import (
    boundaries,
    context,
    downloads,
    history,
    ratios,
    risk,
    smc,
    transmission,
    validation,
)
from pipeline.datasets.base import BuildContext, Produced, Progress
from pipeline.errors import DatasetUnavailable
from pipeline.geography import load_geography
from pipeline.release import reuse as reuse_mod
from pipeline.release.render import RenderStats, merge_facts, render_release
from pipeline.settings import BuildSettings
from pipeline.site import pages
from pipeline.sources.checks import RainfallReport, check_rainfall
from pipeline.window import check_window

Producer = Callable[[BuildContext], Produced]
CACHE_DIR = cache.CACHE_DIR  # OUT/cache: fits kept between builds (pipeline.cache), never published

PRODUCERS: tuple[Producer, ...] = (
    boundaries.produce,
    context.produce,
    risk.produce,
    history.produce,  # after risk: regroups its documents
    transmission.produce,
    ratios.produce,  # after transmission: reads the seasonal index it publishes
    smc.produce,  # after transmission: reads the seasonal index it publishes (the modelled case share)
    validation.produce,  # after risk and transmission: reuses their model run and season check
    downloads.produce,  # after the datasets it tabulates
    pages.produce,  # last: documents the release it ships in
)


@dataclass
class BuildResult:
    stats: RenderStats
    seconds: float
    unavailable: list[tuple[str, str]]  # (producer, reason)
    out: Path
    timings: dict[str, float] = field(default_factory=dict)  # seconds per producer (module's last name)
    unchanged: bool = False  # inputs and code as for the current release: nothing was built
    rainfall: RainfallReport | None = None  # the checked recorded-rainfall window (None when unchanged)
    key: str | None = None  # content address of the inputs and code (pipeline.buildkey)
    phases: dict[str, float] = field(default_factory=dict)  # seconds: key, geography, checks, producers, render


def now_iso() -> str:
    """The build's clock: it goes into the manifest and releases.json only, never into a document."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def run_producers(ctx: BuildContext, producers: tuple[Producer, ...] = PRODUCERS,
                  progress: Progress | None = None,
                  timings: dict[str, float] | None = None) -> tuple[list[Produced], list[tuple[str, str]]]:
    """Run each producer in order; `ctx.produced` grows as they go (later ones may read it)."""
    produced: list[Produced] = ctx.produced
    unavailable: list[tuple[str, str]] = []
    for i, producer in enumerate(producers):
        name = producer.__module__  # e.g. "pipeline.datasets.transmission", as the build log names it
        if progress:
            progress(f"computing {name.rsplit('.', 1)[-1]}", i, len(producers))
        started = time.perf_counter()
        try:
            produced.append(producer(ctx))
        except DatasetUnavailable as e:
            unavailable.append((name, str(e)))
        if timings is not None:
            timings[name.rsplit(".", 1)[-1]] = time.perf_counter() - started
    if progress:
        progress("computing", len(producers), len(producers))
    return produced, unavailable


def build(
    data_dir: Path,
    out: Path,
    progress: Progress | None = None,
    updated_at: str | None = None,
    producers: tuple[Producer, ...] = PRODUCERS,
    base_url: str | None = None,
    *,
    allow_shrink: bool = False,
    force: bool = False,
    live: reuse_mod.Reuse | None = None,
) -> BuildResult:
    """Check the inputs, run the producers and render a release, unless nothing changed.

    Unchanged inputs and code (the content address of `pipeline.buildkey`) reuse the current
    release (`unchanged`), unless `force`. The recorded window must not move backwards
    against `OUT/current` (checked on the inputs before the model runs, and on the
    producers' facts before anything is written) unless `allow_shrink`. `base_url` (default:
    the settings' PUBLIC_BASE_URL) is the address citations link to.

    `live` (`reuse.from_published`: the bucket's live release and its document keys, which the
    scheduled job restores) stands in for the previous release when this root has none: files made
    from the inputs its files were made from are recorded, not made, and the release is sparse
    (pipeline.release.tree.write_release); its window is checked against the live release's.
    """

    started = time.perf_counter()
    phases: dict[str, float] = {}

    def lap(name: str, since: float) -> float:
        now = time.perf_counter()
        phases[name] = now - since
        return now

    out = Path(out)
    settings = BuildSettings.from_env()
    base_url = base_url or settings.base_url
    loaded_at = updated_at or buildkey.data_loaded_at(Path(data_dir))
    key = buildkey.release_key(Path(data_dir), base_url, loaded_at) if producers is PRODUCERS else None
    t = lap("key", started)
    if key is not None:
        # forced, the current release built from this key is what the producers would make again (releases
        # are reproducible): when every file still verifies, it is found before anything is computed
        same = buildkey.verified_current(out, key) if force else buildkey.unchanged_release(out, key)
        if same is not None:
            stats = RenderStats(same.release_id, len(same.files), sum(int(e["size"]) for e in same.files.values()), 0, 0)
            return BuildResult(stats, time.perf_counter() - started, [], out, unchanged=True, key=key, phases=phases)
    # a file made from the inputs and code the previous release's file was made from is linked, not made
    # again (pipeline.release.reuse); a forced build makes every file (and records their keys), a build
    # with other producers neither reads nor records keys
    reuse = None if producers is not PRODUCERS else reuse_mod.Reuse(reuse_mod.code_digest()) if force \
        else reuse_mod.load(out)
    if live is not None and reuse is not None and not force and reuse.previous_id is None \
            and buildkey.current_manifest(out) is None:
        reuse = live
    with cache.use(out / CACHE_DIR) if producers is PRODUCERS else contextlib.nullcontext(out):
        if progress:
            progress("reading geography", 0, 1)
        # the outlines are parsed once per content of admin/ and code (pipeline.cache), not once a build
        geography = cache.cached("geography", Path(data_dir), ["admin"],
                                 cache.code_of("pipeline.geography", "pipeline.sources"),
                                 lambda: load_geography(Path(data_dir)))
        t = lap("geography", t)
        report = check_rainfall(Path(data_dir), geography)
        current = buildkey.current_manifest(out)
        published = list(current.facts.get("estimated", [])) if current else []
        against = f"{out / 'current'} ({current.release_id})" if current else ""
        if current is None and reuse is not None and reuse.published:
            published = list(reuse.facts.get("estimated", []))
            against = f"the live release ({reuse.previous_id})"
        if published:  # cheap first check on the inputs, before the model runs
            check_window(published, [published[0], report.last], against, allow_shrink)
        t = lap("checks", t)
        ctx = BuildContext(Path(data_dir), loaded_at, geography, progress, base_url=base_url,
                           dashboard_url=settings.dashboard_url, reuse=reuse)
        timings: dict[str, float] = {}
        produced, unavailable = run_producers(ctx, producers, progress, timings)
        check_window(published, merge_facts(produced)[0].estimated, against, allow_shrink)
        t = lap("producers", t)
        stats = render_release(out, produced, ctx.updated_at, progress, built_at=now_iso(), reuse=reuse)
    if key is not None:
        buildkey.record_key(out, stats.release_id, key)
    lap("render", t)
    return BuildResult(stats, time.perf_counter() - started, unavailable, out, timings, rainfall=report, key=key,
                       phases=phases)
