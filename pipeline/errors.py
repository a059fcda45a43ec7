"""Every exception the pipeline raises on purpose, in one tree.

Each is an `OperatorError`: its message is one line that names the file, key or
object and the reason, so the operator can fix the cause rather than read a
traceback. The command line catches the family once (`pipeline.cli.main`) and
prints the message, plus `problems` when there are many; anything else that
escapes is a bug and keeps its traceback.

    OperatorError
    ├── InputError            an input file is missing, malformed or inconsistent;
    │                         the build stops before writing anything
    ├── DatasetUnavailable    a producer's inputs are absent; the build skips it and its
    │                         routes answer their `unavailable` error (caught in pipeline.build)
    ├── RenderError           the producers' documents do not cover the route table exactly
    │   ├── StaleReuse        an object the document keys name is missing or damaged (made again)
    │   ├── UnknownFigure     a documentation page quotes a figure no producer provides
    │   └── SiteError         the site's front-end libraries (npm ci) are not installed
    ├── LocalReleaseError     a local build root cannot be verified or pruned as asked
    ├── WindowShrinks         the estimated months would move backwards against the built or
    │                         published release (refused unless --allow-shrink)
    ├── FetchError            downloading an input failed; the data directory is unchanged
    └── PublishError          publishing to S3 failed or was refused (wrong key, missing
        │                     bucket, unsound release tree, failed verification)
        ├── PointerConflict   current.json moved while we worked; nothing was switched
        └── SparseIncomplete  a sparse release names objects the bucket does not hold

`OperatorError` itself is defined in `edge.errors` (standard library only), so the key
dashboard's own bundle can raise it without shipping `pipeline/`.

`edge.keys.AdminError` (key administration refused: unknown scope, no such key) is
not in the tree because `edge/` imports nothing from `pipeline/`; the command line
handles it at the same place, the same way.
"""

from __future__ import annotations

from pathlib import Path

from edge.errors import OperatorError  # the base lives where the dashboard's bundle can import it

__all__ = ["OperatorError", "InputError", "DatasetUnavailable", "RenderError", "StaleReuse", "SparseIncomplete", "UnknownFigure", "SiteError",
           "LocalReleaseError", "PublishError", "PointerConflict", "WindowShrinks", "FetchError"]


class InputError(OperatorError):
    """An input file is missing, malformed or inconsistent; the build stops before writing."""

    def __init__(self, file: Path | str, reason: str, row: int | None = None):
        self.file = str(file)
        self.row = row
        self.reason = reason
        where = f"{self.file}, row {row}" if row is not None else self.file
        super().__init__(f"{where}: {reason}")


class DatasetUnavailable(OperatorError):
    """A producer's inputs are absent: the build continues and its routes answer their
    route's `unavailable` error (e.g. 503 TRANSMISSION_DATA_UNAVAILABLE)."""


class RenderError(OperatorError):
    """The producers' documents do not cover the route table exactly."""


class StaleReuse(RenderError):
    """An object the document keys said to link is missing or damaged: the renderer makes every file
    again (pipeline/release/reuse.py)."""


class UnknownFigure(RenderError):
    """A page names a figure that no producer provides."""


class SiteError(RenderError):
    """The documentation site cannot be rendered: its pinned front-end libraries are missing."""


class LocalReleaseError(OperatorError):
    """The build root cannot be verified or pruned as asked (no such release, bad --keep)."""


class PublishError(OperatorError):
    """Publishing failed or was refused: one line that says what went wrong and where;
    `problems` holds the full list (e.g. every object that failed verification)."""


class SparseIncomplete(PublishError):
    """A sparse release (its unchanged files recorded, not held: pipeline.release.tree.write_release)
    names objects the bucket does not hold, so it cannot be published: nothing was written. The job
    renders the release in full and publishes that (pipeline.refresh)."""


class PointerConflict(PublishError):
    """current.json changed between our read and our conditional write: another
    publisher (or a rollback) got there first, and we refuse to overwrite it blindly."""


class WindowShrinks(OperatorError):
    """The recorded window (the estimated months) would move backwards against the release
    already built or published; refused unless the operator passes --allow-shrink."""


class FetchError(OperatorError):
    """Downloading an input failed or gave something that is not the file (truncated, an error
    page, too large, wrong checksum, failing the input rules); the data directory is unchanged."""
