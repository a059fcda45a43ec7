"""Where the tests find the checkout and the real data: defined once for every test module."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from pipeline.settings import REPO_ROOT
from tests.datasnapshot import session_data_dir
from tests.tmpbase import session_tmpdir

# under pytest, the session's temporary folder (tests/tmpbase.py; the snapshot below goes inside) ...
session_tmpdir()
# ... and a copy of DATA_DIR taken at session start (tests/datasnapshot.py)
DATA_DIR = session_data_dir()

__all__ = ["DATA_DIR", "REPO_ROOT", "data_marks", "linked_data", "needs_data"]

F = TypeVar("F")


def data_marks(*paths: str) -> list[pytest.MarkDecorator]:
    """`slow`, and a skip with a reason when DATA_DIR or any of `paths` inside it is
    missing: for `pytestmark` of a module that reads the real data throughout."""
    missing = [p for p in (paths or (".",)) if not (DATA_DIR / p).exists()]
    reason = f"real data not present: {DATA_DIR / missing[0]}" if missing else ""
    return [pytest.mark.slow, pytest.mark.skipif(bool(missing), reason=reason)]


def needs_data(*paths: str) -> Callable[[F], F]:
    """The same marks as a decorator, for one test (or fixture-using test) that reads the real data."""

    def mark(obj: F) -> F:
        for m in data_marks(*paths):
            obj = m(obj)
        return obj

    return mark


def linked_data(into: Path, *left_out: str | Path) -> Path:
    """The real data as links under `into`, without the files (or folders) `left_out` (relative to DATA_DIR):
    a data load lacking them, or one the test then writes a changed copy of them into."""
    skip = [Path(x) for x in left_out]
    for path in DATA_DIR.rglob("*"):
        rel = path.relative_to(DATA_DIR)
        if path.is_file() and not any(rel == s or s in rel.parents for s in skip):
            (into / rel).parent.mkdir(parents=True, exist_ok=True)
            (into / rel).symlink_to(path.resolve())
    return into
