"""Build orchestration: load inputs once, run every producer, render one release.

Producers are listed by import, in PRODUCERS: adding a dataset is one module in
pipeline/datasets/ and one line here. A producer whose inputs are absent raises
DatasetUnavailable: the release is still built, and its routes answer their
documented error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pipeline.datasets import (
    boundaries,
    context,
    downloads,
    history,
    risk,
    transmission,
    validation,
)
from pipeline.datasets.base import BuildContext, Produced, Progress
from pipeline.errors import DatasetUnavailable
from pipeline.geography import load_geography
from pipeline.release.render import RenderStats, render_release
from pipeline.site import pages

Producer = Callable[[BuildContext], Produced]

PRODUCERS: tuple[Producer, ...] = (
    boundaries.produce,
    context.produce,
    risk.produce,
    history.produce,  # after risk: regroups its documents
    transmission.produce,
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


def now_iso() -> str:
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
) -> BuildResult:
    """`base_url` (default: the settings' PUBLIC_BASE_URL) is the address citations link to."""
    from pipeline.settings import BuildSettings

    started = time.perf_counter()
    if progress:
        progress("reading geography", 0, 1)
    geography = load_geography(Path(data_dir))
    ctx = BuildContext(Path(data_dir), updated_at or now_iso(), geography, progress,
                       base_url=base_url or BuildSettings.from_env().base_url)
    timings: dict[str, float] = {}
    produced, unavailable = run_producers(ctx, producers, progress, timings)
    stats = render_release(Path(out), produced, ctx.updated_at, progress)
    return BuildResult(stats, time.perf_counter() - started, unavailable, Path(out), timings)
