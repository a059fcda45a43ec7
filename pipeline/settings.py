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
# Where a reader gets a key: the key dashboard's address, linked from the public pages ("Get a key").
# `make run` serves the dashboard beside the API on DASH_PORT and passes its address here.
ENV_DASHBOARD_URL = "DASHBOARD_URL"
DEFAULT_DASHBOARD_URL = "http://127.0.0.1:8090"


def clean_base_url(raw: str, variable: str = ENV_BASE_URL) -> str:
    """An absolute http(s) address without a trailing slash; anything else is an operator error."""
    from urllib.parse import urlsplit

    from pipeline.errors import OperatorError

    url = raw.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise OperatorError(f"{variable}={raw!r} is not an absolute http(s) address such as https://api.example.org")
    return url
ENV_RAINFALL_URL = "MALARIA_RAINFALL_URL"
ENV_RAINFALL_SHA256 = "MALARIA_RAINFALL_SHA256"
# WFP's "Rainfall Indicators at Subnational Level" for Nigeria (CHIRPS, admin 1 and 2, dekadal),
# the HDX resource public projects download; rainfall/SOURCES.md describes the file.
DEFAULT_RAINFALL_URL = (
    "https://data.humdata.org/dataset/ff5dba07-397b-44fb-b04f-bbca782ce793/resource/"
    "114874de-df99-4102-b4c8-b44e2db44a5e/download/nga-rainfall-subnat-full.csv"
)


@dataclass(frozen=True)
class BuildSettings:
    data_dir: Path = DEFAULT_DATA_DIR
    docs_dir: Path = REPO_ROOT / "docs"
    base_url: str = DEFAULT_BASE_URL
    dashboard_url: str = DEFAULT_DASHBOARD_URL
    # `data fetch`: where the rainfall file comes from and how patiently (docs/data-load.md)
    rainfall_url: str = DEFAULT_RAINFALL_URL
    rainfall_sha256: str | None = None  # a published checksum to verify against, when there is one
    fetch_timeout: float = 60.0  # seconds without a byte (connect or read) before an attempt fails
    fetch_deadline: float = 900.0  # seconds for the whole download, retries included
    fetch_retries: int = 4  # further attempts after a failed one (5xx, 429, timeout, truncation)
    fetch_backoff: float = 5.0  # seconds before the first retry, doubled each time (at most 120)
    fetch_max_bytes: int = 1 << 30  # the full admin-1 + admin-2 file is a few hundred MB

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BuildSettings:
        e = os.environ if env is None else env
        # A relative DATA_DIR (the Makefile's `../shared/data`) means relative to where the command was
        # started; made absolute once here so links, subprocesses and temporary folders all see the same place.
        return cls(data_dir=Path(os.path.abspath(e[ENV_DATA_DIR])) if e.get(ENV_DATA_DIR) else DEFAULT_DATA_DIR,
                   base_url=clean_base_url(e[ENV_BASE_URL]) if e.get(ENV_BASE_URL) else DEFAULT_BASE_URL,
                   dashboard_url=(clean_base_url(e[ENV_DASHBOARD_URL], ENV_DASHBOARD_URL)
                                  if e.get(ENV_DASHBOARD_URL) else DEFAULT_DASHBOARD_URL),
                   rainfall_url=e.get(ENV_RAINFALL_URL) or DEFAULT_RAINFALL_URL,
                   rainfall_sha256=e.get(ENV_RAINFALL_SHA256) or None)


def default_data_dir() -> Path:
    return BuildSettings.from_env().data_dir
