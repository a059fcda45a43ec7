"""Reproducible evidence for the risk model, written as Markdown + JSON into reports/.

Each report states the command that made it, so a reader can regenerate it from the
same DATA_DIR and check the figures quoted in docs/model.md.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DATA_DIR = Path(os.environ.get("DATA_DIR", Path(__file__).resolve().parents[2].parent / "shared" / "data"))

