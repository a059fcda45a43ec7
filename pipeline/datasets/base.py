"""The contract between producers (one per dataset) and the renderer.

A producer takes the build context and returns documents keyed by route path and
parameter values. The renderer checks that every combination the route table
expects is present, so a producer cannot silently leave a hole in a release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.geography import Geography

# documents[route_path][tuple of parameter values in the route's param order] = JSON-able dict
Documents = dict[str, dict[tuple[str, ...], Any]]
Progress = Callable[[str, int, int], None]  # (label, done, total)


@dataclass
class BuildContext:
    data_dir: Path
    updated_at: str  # ISO 8601 UTC, the data load time stamped into the release
    geography: Geography  # the reference every dataset is keyed by
    progress: Progress | None = None
    produced: list[Produced] = field(default_factory=list)  # what earlier producers returned (the site reads it)


@dataclass
class Produced:
    dataset: str
    documents: Documents
    facts: dict[str, Any] = field(default_factory=dict)  # e.g. {"estimated": [...], "forecast": [...]}
    model_version: str | None = None
    # static files outside the route table, e.g. the docs site: key -> (content type, bytes).
    # Keys must start with "docs/"; the gate serves them without a key at /docs/...
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
