"""Tests that wait to be interrupted: run only by tests/test_interrupt.py, through `make test`.

Not collected by a normal run (the file name does not start with `test_`, and without
PROBE_ENV every test here skips). Two classes, so a parallel run (`--dist loadscope`) puts them
on two xdist workers: one holds each kind of helper (SeaweedFS, moto, a headless Chromium)
and waits; the other waits inside a click command run by CliRunner, which turns
KeyboardInterrupt into "Aborted!" and exit code 1, the way a test used to swallow Ctrl-C.
Each writes a ready file into PROBE_ENV's folder once it is waiting.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests import s3server, session
from tests.s3server import S3Server

PROBE_ENV = "MALARIA_INTERRUPT_PROBE"
WAIT = 300.0  # seconds: far longer than the outer test waits for the interrupt to be sent

pytestmark = pytest.mark.skipif(not os.environ.get(PROBE_ENV), reason="run by tests/test_interrupt.py only")

s3_server = s3server.s3_server


def ready(name: str, **extra: object) -> None:
    info = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "pid": os.getpid(), **extra}
    Path(os.environ[PROBE_ENV], f"{name}.ready").write_text(json.dumps(info))


def wait_to_be_interrupted() -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        time.sleep(0.05)
    pytest.fail(f"not interrupted within {WAIT:g} s")


@pytest.fixture
def moto() -> Iterator[str]:
    from tests.edge.conftest import start_moto

    proc, url = start_moto()
    try:
        yield url
    finally:
        session.stop(proc)


class TestHelpers:
    def test_waits_with_seaweedfs_moto_and_chromium_running(self, s3_server: S3Server, moto: str) -> None:
        import httpx

        from tests.pipeline.site.screenshots import browser

        s3_server.client().head_bucket(Bucket=s3_server.bucket)
        assert httpx.get(moto + "/moto-api/", timeout=10).status_code == 200
        with browser() as chromium:
            page = chromium.new_page()
            page.set_content("<p>waiting</p>")
            ready("helpers", weed=s3_server.pid)
            wait_to_be_interrupted()


class TestSwallowed:
    def test_waits_inside_a_click_command(self) -> None:
        @click.command()
        def sleeper() -> None:
            ready("cli")
            wait_to_be_interrupted()

        result = CliRunner().invoke(sleeper, [])
        # without tests/session.py this line runs after Ctrl-C (exit code 1, "Aborted!") and the run goes on
        assert result.exit_code == 0, result.output

    def test_runs_only_if_the_interrupt_was_swallowed(self) -> None:
        Path(os.environ[PROBE_ENV], "went-on").write_text("the run went on after Ctrl-C")
