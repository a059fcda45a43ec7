"""Benchmark: what publishing a new month costs in uploads and requests, beside a first publish.

Builds two releases from DATA_DIR (the monthly rainfall without its last month, then with it:
bench/build.py's loads), starts a throwaway SeaweedFS on 127.0.0.1 (tests/s3server.py), and
publishes the first, then the second, then the second again. Every request the publisher makes
is counted by operation (botocore's event hooks), so the ratios below are measured in this run:

* uploads of the new month's publish / files in its release (target <= 0.35);
* requests by kind, bytes sent, and what a month of publishing therefore costs
  (docs/operations.md#what-a-month-of-publishing-costs).

    .venv/bin/python bench/publish.py [--workers 16]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.build import load_without, run_build  # noqa: E402
from pipeline.publish import s3  # noqa: E402


class Requests:
    """Counts the S3 operations a client sends (one count per request, retries included)."""

    def __init__(self, client: Any):
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        client.meta.events.register("before-send.s3", self._count)

    def _count(self, request: Any, **kwargs: Any) -> None:
        name = kwargs.get("event_name", "").rsplit(".", 1)[-1]
        with self.lock:
            self.counts[name] += 1

    def take(self) -> Counter[str]:
        with self.lock:
            out, self.counts = self.counts, Counter()
        return out


def publish(client: Any, target: s3.Target, root: Path, rid: str, workers: int) -> tuple[float, s3.PublishResult]:
    t = time.perf_counter()
    result = s3.publish_release(client, target, s3.open_local_release(root, rid), workers=workers)
    return time.perf_counter() - t, result


@click.command()
@click.option("--workers", default=16, show_default=True)
def main(workers: int) -> None:
    import boto3

    from tests.s3server import run_seaweedfs

    data_dir = Path(os.environ.get("DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
    work = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    try:
        load_without(data_dir, work / "data-1", 1)
        load_without(data_dir, work / "data-0", 0)
        out = work / "build"
        first = run_build(work / "data-1", out)["release"]
        second = run_build(work / "data-0", out)["release"]
        with run_seaweedfs(work / "seaweedfs") as server:
            session = boto3.session.Session(aws_access_key_id=server.access_key,
                                            aws_secret_access_key=server.secret_key)
            client = s3.make_client(server.endpoint_url, workers=workers, session=session)
            requests = Requests(client)
            target = s3.Target.of(server.bucket, "bench-" + uuid.uuid4().hex[:8])
            runs = []
            for name, rid in (("first release", first), ("new month", second), ("new month again", second)):
                seconds, result = publish(client, target, out, rid, workers)
                runs.append((name, seconds, result, requests.take()))
        files = len(s3.open_local_release(out, second).manifest.files)
        print(f"releases {first} -> {second}; {files} files in the new month's release; {workers} workers")
        kinds = ["PutObject", "CopyObject", "HeadObject", "ListObjectsV2", "GetObject", "DeleteObjects"]
        print(f"{'publish':<18}{'seconds':>8}{'uploads':>9}{'MB up':>7}{'copies':>8}"
              + "".join(f"{k.replace('ListObjectsV2', 'List').replace('Object', ''):>9}" for k in kinds))
        for name, seconds, r, counts in runs:
            print(f"{name:<18}{seconds:>8.1f}{r.uploaded:>9}{r.bytes_uploaded / 1e6:>7.1f}{r.copied:>8}"
                  + "".join(f"{counts.get(k, 0):>9}" for k in kinds))
        new = runs[1][2]
        print(f"\nuploads of a new month's publish / files in the release: {new.uploaded / files:.2f} (aim <= 0.35)")
        print(f"bytes uploaded by the new month / by the first release: "
              f"{new.bytes_uploaded / max(runs[0][2].bytes_uploaded, 1):.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
