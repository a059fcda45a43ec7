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

from pipeline.settings import DEFAULT_BASE_URL, DEFAULT_DASHBOARD_URL

if TYPE_CHECKING:
    from pipeline.geography import Geography
    from pipeline.release.reuse import Linked, Reuse
    from pipeline.sources.inputs import Inputs

# documents[route_path][tuple of parameter values in the route's param order] = JSON-able dict
Documents = dict[str, dict[tuple[str, ...], Any]]
StaticFiles = dict[str, tuple[str, bytes]]  # key -> (content type, bytes)
Progress = Callable[[str, int, int], None]  # (label, done, total)


@dataclass
class BuildContext:
    data_dir: Path
    updated_at: str  # ISO 8601 UTC, the data load time stamped into the release
    geography: Geography  # the reference every dataset is keyed by
    progress: Progress | None = None
    produced: list[Produced] = field(default_factory=list)  # what earlier producers returned (the site reads it)
    base_url: str = DEFAULT_BASE_URL  # the public address, for absolute links (settings: PUBLIC_BASE_URL)
    dashboard_url: str = DEFAULT_DASHBOARD_URL  # where the public pages send a reader for a key (DASHBOARD_URL)
    # the inputs, each read once for the whole build (made from data_dir and geography if not given)
    inputs: Inputs = None  # type: ignore[assignment]
    # model runs a later producer reuses (the validation report reuses the risk model's run)
    runs: dict[str, Any] = field(default_factory=dict)
    # the files of the previous release and the inputs each was made from (pipeline.release.reuse):
    # None renders every document
    reuse: Reuse | None = None

    def __post_init__(self) -> None:
        if self.inputs is None:
            # imported here: the release tree and the CLI import this module for its types, and the
            # readers bring polars and numpy (0.3 s) to every command that reads no data
            from pipeline.sources.inputs import Inputs

            self.inputs = Inputs(self.data_dir, self.geography)


@dataclass(frozen=True)
class Rendered:
    """A document already turned into its response bytes (`pipeline.release.tabular.rendered`): a
    producer whose documents no later producer reads hands these over instead of the dicts, so a
    build does not hold a large route's documents as Python objects until the end."""

    json: bytes
    csv: bytes | Linked | None = None
    csv_key: str | None = None  # what the CSV was made from (pipeline.release.reuse), when known


@dataclass
class Produced:
    dataset: str
    documents: Documents
    facts: dict[str, Any] = field(default_factory=dict)  # e.g. {"estimated": [...], "forecast": [...]}
    model_version: str | None = None
    # static files outside the route table, e.g. the docs site: key -> (content type, bytes).
    # Keys start with "docs/" (served without a key at /docs/...) or "downloads/" (the bundle,
    # served with a key at /v1/downloads/<release id>/...).
    files: StaticFiles = field(default_factory=dict)
    # Documents and files that name the release id (the bundle's README, checksums, zip and
    # index): the id hashes every other file, so the renderer calls this once it is known.
    stamp: Callable[[str], tuple[Documents, StaticFiles]] | None = None
    # The scopes a key needs to download each bundle file (key under "downloads/" -> scopes), for
    # the files and the stamped files alike; the renderer writes them into the manifest.
    scopes: dict[str, tuple[str, ...]] = field(default_factory=dict)
