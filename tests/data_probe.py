"""Run only by tests/test_data_snapshot.py: a test that changes the real-data folder mid-run.

Not collected by a normal run (the file name does not start with `test_`, and without
PROBE_ENV the test skips).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests import datasnapshot
from tests.paths import DATA_DIR

PROBE_ENV = "MALARIA_DATA_PROBE"

pytestmark = pytest.mark.skipif(not os.environ.get(PROBE_ENV), reason="run by tests/test_data_snapshot.py only")


def test_a_file_added_to_the_data_folder_is_not_seen_by_the_tests() -> None:
    original = Path(os.environ[datasnapshot.ORIGINAL_ENV])
    assert original != DATA_DIR and os.environ["DATA_DIR"] == str(DATA_DIR)
    before = sorted(p.name for p in DATA_DIR.iterdir())
    (original / "added_mid_run.csv").write_text("a,b\n1,2\n")
    (original / "cases.csv").write_text("a,b\n9,9\n")
    assert sorted(p.name for p in DATA_DIR.iterdir()) == before
    assert (DATA_DIR / "cases.csv").read_text() == "a,b\n1,2\n"
    Path(os.environ[PROBE_ENV]).write_text(json.dumps({"snapshot": str(DATA_DIR)}))
