"""Build orchestration: load inputs once, run every producer, render one release.

Producers are listed by module name so a dataset can be added without touching
this file's logic. A producer whose inputs are absent raises DatasetUnavailable:
the release is still built, and its routes answer their documented error.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pipeline.datasets.base import BuildContext, Produced
from pipeline.errors import DatasetUnavailable
from pipeline.geography import load_geography
from pipeline.release.render import RenderStats, render_release

PRODUCERS: tuple[str, ...] = (
    "pipeline.datasets.boundaries",
    "pipeline.datasets.context",
    "pipeline.datasets.risk",
    "pipeline.datasets.transmission",
    "pipeline.datasets.downloads",  # after the datasets it tabulates
    "pipeline.site.pages",  # last: documents the release it ships in
)

Progress = Callable[[str, int, int], None]


@dataclass
class BuildResult:
    stats: RenderStats
    seconds: float
    unavailable: list[tuple[str, str]]  # (producer, reason)
    out: Path
    timings: dict[str, float] = field(default_factory=dict)  # seconds per producer (module's last name)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def run_producers(ctx: BuildContext, producers: tuple[str, ...] = PRODUCERS,
                  progress: Progress | None = None,
                  timings: dict[str, float] | None = None) -> tuple[list[Produced], list[tuple[str, str]]]:
    produced: list[Produced] = ctx.produced
    unavailable: list[tuple[str, str]] = []
    for i, name in enumerate(producers):
        if progress:
            progress(f"computing {name.rsplit('.', 1)[-1]}", i, len(producers))
        module = importlib.import_module(name)
        started = time.perf_counter()
        try:
            produced.append(module.produce(ctx))
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
    producers: tuple[str, ...] = PRODUCERS,
) -> BuildResult:
    started = time.perf_counter()
    ctx = BuildContext(data_dir=Path(data_dir), updated_at=updated_at or now_iso(), progress=progress)
    if progress:
        progress("reading geography", 0, 1)
    ctx.geography = load_geography(ctx.data_dir)
    timings: dict[str, float] = {}
    produced, unavailable = run_producers(ctx, producers, progress, timings)
    stats = render_release(Path(out), produced, ctx.updated_at, progress)
    return BuildResult(stats, time.perf_counter() - started, unavailable, Path(out), timings)
