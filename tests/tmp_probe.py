"""Run only by tests/test_tmpbase.py: a session that records its temporary folder, and fails when told to.

Not collected by a normal run (the file name does not start with `test_`, and without PROBE_ENV
the test skips).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from tests import tmpbase
from tests.paths import DATA_DIR

PROBE_ENV = "MALARIA_TMP_PROBE"
FAIL_ENV = "MALARIA_TMP_PROBE_FAIL"

pytestmark = pytest.mark.skipif(not os.environ.get(PROBE_ENV), reason="run by tests/test_tmpbase.py only")


def test_record_the_session_folder(tmp_path: Path) -> None:
    folder = tmpbase.owned()
    Path(os.environ[PROBE_ENV]).write_text(json.dumps({
        "folder": str(folder), "tmp_path": str(tmp_path), "gettempdir": tempfile.gettempdir(),
        "data": str(DATA_DIR)}))
    assert not os.environ.get(FAIL_ENV), "failing as asked"
