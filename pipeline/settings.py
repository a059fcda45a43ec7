"""Settings of the build/publish runtime, read once: where the raw data lives.

The data directory defaults to `../shared/data` beside the checkout (not beside the
current directory), so every command and report finds the same data wherever it runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data"
ENV_DATA_DIR = "DATA_DIR"


@dataclass(frozen=True)
class BuildSettings:
    data_dir: Path = DEFAULT_DATA_DIR
    docs_dir: Path = REPO_ROOT / "docs"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BuildSettings:
        e = os.environ if env is None else env
        # A relative DATA_DIR (the Makefile's `../shared/data`) means relative to where the command was
        # started; made absolute once here so links, subprocesses and temporary folders all see the same place.
        return cls(data_dir=Path(os.path.abspath(e[ENV_DATA_DIR])) if e.get(ENV_DATA_DIR) else DEFAULT_DATA_DIR)


def default_data_dir() -> Path:
    return BuildSettings.from_env().data_dir
