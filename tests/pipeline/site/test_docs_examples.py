"""Every example of the quickstart runs, as written, against the real release on loopback.

The page's `sh`, `python` and `r` blocks are run (`text` blocks, which set the variables,
are not: the test sets BASE_URL and API_KEY itself). What each example prints is checked
against the API's own answers, so a stale example fails here rather than on a reader.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.paths import REPO_ROOT, data_marks
from tests.pipeline.site.conftest import RealSite

pytestmark = data_marks()  # slow, and skipped with a reason when the real data is absent

QUICKSTART = REPO_ROOT / "docs" / "quickstart.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)
RUNNERS = {"sh": ["bash", "-euo", "pipefail", "-c"], "python": [sys.executable, "-c"], "r": ["Rscript", "-e"]}


def blocks(lang: str) -> list[str]:
    return [code for tag, code in FENCE.findall(QUICKSTART.read_text(encoding="utf-8")) if tag == lang]


def run(lang: str, code: str, site: RealSite) -> str:
    env = {**os.environ, "BASE_URL": site.url, "API_KEY": site.key}
    proc = subprocess.run([*RUNNERS[lang], code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, f"{lang} example failed:\n{code}\n--- stderr ---\n{proc.stderr}"
    return proc.stdout


def facts(site: RealSite) -> tuple[str, dict]:
    headers = {"Authorization": f"Bearer {site.key}"}
    month = httpx.get(site.url + "/v1/periods", headers=headers).json()["last_estimated"]
    kano = httpx.get(site.url + "/v1/risk/lgas", params={"state": "KN", "period": month}, headers=headers).json()
    return month, kano


def test_the_page_has_examples_in_each_language() -> None:
    assert len(blocks("sh")) >= 1 and len(blocks("python")) >= 3 and len(blocks("r")) >= 2
    tags = {tag for tag, _ in FENCE.findall(QUICKSTART.read_text(encoding="utf-8"))}
    assert tags <= {"sh", "python", "r", "text"}, tags  # nothing that silently escapes this test


def test_curl_examples(real_site: RealSite) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    month, kano = facts(real_site)
    out = run("sh", "\n".join(blocks("sh")), real_site)
    assert f'"last_estimated":"{month}"' in out.replace(" ", "")
    assert kano["lgas"][0]["lga_code"] in out  # the Kano report, decompressed
    assert '"code":"UNKNOWN_STATE"' in out.replace(" ", "")  # the error example


def test_python_examples(real_site: RealSite) -> None:
    pytest.importorskip("pandas")
    month, kano = facts(real_site)
    first, forecasts, errors = (run("python", code, real_site) for code in blocks("python")[:3])
    assert f"{kano['state']}, {month}: {len(kano['lgas'])} LGAs" in first
    top = kano["lgas"][0]
    assert re.search(rf"{top['lga_code']}\s+{re.escape(top['lga'])}\s+{top['score']}", first), first
    assert "period" in forecasts and "Abia" in forecasts
    assert errors.startswith("404 UNKNOWN_STATE - ")


def test_r_examples(real_site: RealSite) -> None:
    if shutil.which("Rscript") is None:
        pytest.skip("R is not installed (Debian packages r-base-core, r-cran-httr2)")
    month, kano = facts(real_site)
    first, error = (run("r", code, real_site) for code in blocks("r")[:2])
    assert f"{kano['state']}, {month}: {len(kano['lgas'])} LGAs" in first
    assert kano["lgas"][0]["lga_code"] in first
    assert error.strip().startswith("404 UNKNOWN_STATE - ")


def test_quickstart_is_linked_from_the_landing_page(real_site: RealSite) -> None:
    landing = httpx.get(real_site.url + "/docs/").text
    assert 'href="/docs/quickstart.html"' in landing
    page = httpx.get(real_site.url + "/docs/quickstart.html")
    assert page.status_code == 200 and "library(httr2)" in page.text and "import pandas as pd" in page.text
    assert Path(QUICKSTART).stat().st_size > 0
