"""Settings of the build/publish runtime, read once: where the raw data lives, and the
public address the service is reached at (for absolute links in citations).

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
# The address the bundles' citation names; a deployment sets it to its own (e.g. the CloudFront domain).
ENV_BASE_URL = "PUBLIC_BASE_URL"
DEFAULT_BASE_URL = "http://127.0.0.1:8080"


def clean_base_url(raw: str) -> str:
    """An absolute http(s) address without a trailing slash; anything else is an operator error."""
    from urllib.parse import urlsplit

    from pipeline.errors import OperatorError

    url = raw.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise OperatorError(f"{ENV_BASE_URL}={raw!r} is not an absolute http(s) address such as https://api.example.org")
    return url


@dataclass(frozen=True)
class BuildSettings:
    data_dir: Path = DEFAULT_DATA_DIR
    docs_dir: Path = REPO_ROOT / "docs"
    base_url: str = DEFAULT_BASE_URL

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BuildSettings:
        e = os.environ if env is None else env
        # A relative DATA_DIR (the Makefile's `../shared/data`) means relative to where the command was
        # started; made absolute once here so links, subprocesses and temporary folders all see the same place.
        return cls(data_dir=Path(os.path.abspath(e[ENV_DATA_DIR])) if e.get(ENV_DATA_DIR) else DEFAULT_DATA_DIR,
                   base_url=clean_base_url(e[ENV_BASE_URL]) if e.get(ENV_BASE_URL) else DEFAULT_BASE_URL)


def default_data_dir() -> Path:
    return BuildSettings.from_env().data_dir
