"""Local AWS for the edge tests: moto's server on 127.0.0.1 (S3 and DynamoDB on one port)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import session
from tests.conftest import free_port, wait_until_up

CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    exe = Path(sys.executable).with_name("moto_server")
    # its own session: a Ctrl-C stops the run, which then stops this server (tests/session.py)
    proc = session.spawn([str(exe), "-H", "127.0.0.1", "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **CREDS})
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url + "/moto-api/", proc, "moto_server")
    return proc, url


@pytest.fixture(scope="session")
def endpoint() -> Iterator[str]:
    proc, url = start_moto()
    yield url
    session.stop(proc, grace=10)


def boto_client(endpoint: str, service: str = "dynamodb"):  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")
