"""The R package (clients/r/malariarisk): `R CMD build` and `R CMD check`, whose tests call the
local server over real HTTP (history, whole-country month, bundle file with checksum, a 429)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.clients.conftest import Limited, Servers
from tests.paths import REPO_ROOT, data_marks

pytestmark = data_marks()
PACKAGE = REPO_ROOT / "clients" / "r" / "malariarisk"


def _r_ready() -> str | None:
    r = shutil.which("R")
    if r is None:
        return None
    probe = subprocess.run([r, "--vanilla", "-s", "-e", "library(httr2); library(jsonlite); library(openssl)"],
                           capture_output=True)
    return r if probe.returncode == 0 else None


def test_r_package_passes_r_cmd_check_against_the_local_server(servers: Servers, limited: Limited, tmp_path: Path):
    r = _r_ready()
    if r is None:
        pytest.skip("R with httr2, jsonlite and openssl is not installed (.ci/run installs them)")
    built = subprocess.run([r, "CMD", "build", "--no-build-vignettes", str(PACKAGE)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    [tarball] = tmp_path.glob("malariarisk_*.tar.gz")
    env = {**os.environ, "MALARIA_RISK_TEST_URL": servers.url, "MALARIA_RISK_TEST_KEY": servers.key,
           "MALARIA_RISK_TEST_NARROW_KEY": servers.narrow_key, "MALARIA_RISK_TEST_LIMITED_URL": limited.url,
           "MALARIA_RISK_TEST_LIMITED_KEY": limited.key, "_R_CHECK_FORCE_SUGGESTS_": "false",
           "_R_CHECK_CRAN_INCOMING_": "false", "HOME": str(tmp_path)}
    check = subprocess.run([r, "CMD", "check", "--no-manual", "--no-build-vignettes", tarball.name], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=900)
    log = check.stdout + check.stderr
    tests_out = tmp_path / "malariarisk.Rcheck" / "tests" / "test-client.Rout"
    detail = tests_out.read_text() if tests_out.exists() else ""
    assert check.returncode == 0, log + detail
    assert "Status: OK" in log or ("ERROR" not in log and "WARNING" not in log), log
    assert "client tests passed" in detail, detail  # the tests ran against the server, not skipped
