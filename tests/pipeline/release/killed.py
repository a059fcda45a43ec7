"""A build killed (SIGKILL) at a chosen moment, in a subprocess: what it leaves must be sound."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.paths import REPO_ROOT

PRELUDE = (
    "import os, signal, sys\n"
    "from pathlib import Path\n"
    "from pipeline.release import store\n"
    "from pipeline.release.render import render_release\n"
    "from tests.conftest import synthetic_produced\n"
)


def killed(body: str) -> bool:
    """Run PRELUDE + `body` (which kills its own process) from the checkout; whether SIGKILL ended it."""
    proc = subprocess.run([sys.executable, "-c", PRELUDE + body], cwd=REPO_ROOT)
    return proc.returncode == -signal.SIGKILL
