"""Errors that stop a build. Each names the input file, the row and the reason, so the
operator can fix the data rather than read a traceback."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """An input file is missing, malformed or inconsistent; the build stops before writing."""

    def __init__(self, file: Path | str, reason: str, row: int | None = None):
        self.file = str(file)
        self.row = row
        self.reason = reason
        where = f"{self.file}, row {row}" if row is not None else self.file
        super().__init__(f"{where}: {reason}")


class DatasetUnavailable(Exception):
    """A producer's inputs are absent: the build continues and its routes answer their
    route's `unavailable` error (e.g. 503 TRANSMISSION_DATA_UNAVAILABLE)."""
