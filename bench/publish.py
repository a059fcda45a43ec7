"""Benchmark: what publishing a new month costs in uploads and requests, beside a first publish.

Builds two releases from DATA_DIR (the monthly rainfall without its last month, then with it:
bench/build.py's loads), starts a throwaway SeaweedFS on 127.0.0.1 (tests/s3server.py), and
publishes the first, then the second, then the second again. Every request the publisher makes
is counted by operation (botocore's event hooks), so the ratios below are measured in this run:

* uploads of the new month's publish / files in its release (target <= 0.35);
* billable writes (PUT + COPY) of the new month / files in its release (aim <= 0.4);
* bucket growth per month / one release's bytes (its files' bytes, identity and gzip) (aim <= 0.5);
* requests by kind, bytes sent, and what a month of publishing therefore costs
  (docs/operations.md#what-a-month-of-publishing-costs);
* the scheduled job (`refresh --state`, each run in a fresh folder, as deploy/job.sh runs it): a day
  with unchanged inputs / a full build, CPU (aim <= 0.05), beside the same day without the kept
  state (what the job did before: a full build), and a new month with the state restored / a full build:
  with the live release's document keys (a sparse release: files made from unchanged inputs recorded from
  the live release, not made), and beside it the same month with the state as saved before the keys were
  kept (every file made). The second runs after the first with the job's prefix set back as it was
  (what the first wrote deleted, what it replaced put back), so both publish the same month into the
  same bucket.

    .venv/bin/python bench/publish.py [--workers 16] [--no-job]
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import click
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.build import load_without, run_build  # noqa: E402
from pipeline.publish import s3  # noqa: E402
from pipeline.publish.s3.objects import delete_keys  # noqa: E402


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


def bucket_bytes(client: Any, target: s3.Target, prefix: str = "") -> int:
    return sum(o.size for o in s3.list_objects(client, target, target.key(prefix)).values())


JOB = """
import sys
sys.path.insert(0, {root!r})
from pipeline.cli import main
main(sys.argv[1:])
"""


def job_refresh(server: Any, data: Path, work: Path, prefix: str, state: bool) -> tuple[float, str]:
    """One scheduled refresh in the fresh folder `work` (its own process); (CPU seconds, summary line)."""
    work.mkdir(parents=True)
    env = {**os.environ, **server.env()}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    got = subprocess.run([sys.executable, "-c", JOB.format(root=str(ROOT)), "refresh", "--no-fetch", "--data-dir",
                          str(data), "--out", "build", "--bucket", server.bucket, "--prefix", prefix,
                          "--endpoint-url", server.endpoint_url, *(["--state"] if state else [])],
                         cwd=work, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if got.returncode:
        raise SystemExit(got.stdout[-2000:] + got.stderr[-3000:])
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu, (got.stdout + got.stderr).strip().splitlines()[-1]


@click.command()
@click.option("--workers", default=16, show_default=True)
@click.option("--job/--no-job", default=True, show_default=True,
              help="Also measure the scheduled job's refresh with its state kept in the bucket (three more builds).")
def main(workers: int, job: bool) -> None:
    import boto3

    from tests.s3server import run_seaweedfs

    data_dir = Path(os.environ.get("DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
    work = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    try:
        load_without(data_dir, work / "data-1", 1)
        load_without(data_dir, work / "data-0", 0)
        out = work / "build"
        full = run_build(work / "data-1", out)
        first = full["release"]
        second = run_build(work / "data-0", out)["release"]
        with run_seaweedfs(work / "seaweedfs") as server:
            session = boto3.session.Session(aws_access_key_id=server.access_key,
                                            aws_secret_access_key=server.secret_key)
            client = s3.make_client(server.endpoint_url, workers=workers, session=session)
            requests = Requests(client)
            target = s3.Target.of(server.bucket, "bench-" + uuid.uuid4().hex[:8])
            runs = []
            sizes = []
            for name, rid in (("first release", first), ("new month", second), ("new month again", second)):
                seconds, result = publish(client, target, out, rid, workers)
                runs.append((name, seconds, result, requests.take()))
                sizes.append(bucket_bytes(client, target))
            n_stored = len(s3.list_objects(client, target, target.objects_prefix))
            # a release's files, as the copy layout held them under its prefix (identity and gzip bytes)
            one_release = sum(int(e["size"]) for e in s3.open_local_release(out, first).manifest.files.values())
            jobs: list[tuple[str, float, str]] = []
            if job:
                prefix = "job-" + uuid.uuid4().hex[:8]
                jobs.append(("full build (month before, fresh folder)",
                             *job_refresh(server, work / "data-1", work / "job1", prefix, True)))
                jobs.append(("unchanged day, state kept in the bucket",
                             *job_refresh(server, work / "data-1", work / "job2", prefix, True)))
                jobs.append(("unchanged day, no state (before)",
                             *job_refresh(server, work / "data-1", work / "job3", prefix, False)))
                raw = server.client()
                job_target = s3.Target.of(server.bucket, prefix)
                before = s3.list_objects(client, job_target, job_target.key(""))
                # every key but the stored objects and the releases' own files (create-only, never replaced
                # by a publish): the pointer, the lists, the job's state
                mutable = {k: raw.get_object(Bucket=server.bucket, Key=k) for k in before
                           if not k.startswith((job_target.objects_prefix, job_target.key("releases/")))}
                kept = {k: (o["Body"].read(), o["ContentType"]) for k, o in mutable.items()}
                jobs.append(("new month, state and document keys restored",
                             *job_refresh(server, work / "data-0", work / "job4", prefix, True)))
                # the same month again as the job ran it before the document keys were kept: the prefix as
                # it was before the run above, the state without its document keys
                delete_keys(client, job_target,
                               sorted(set(s3.list_objects(client, job_target, job_target.key(""))) - set(before)))
                for k, (body, ctype) in kept.items():
                    if k.endswith("state/state.json"):
                        doc = orjson.loads(body)
                        doc.pop("document_keys", None)
                        body = orjson.dumps(doc)
                    raw.put_object(Bucket=server.bucket, Key=k, Body=body, ContentType=ctype)
                jobs.append(("new month, state without document keys (before)",
                             *job_refresh(server, work / "data-0", work / "job5", prefix, True)))
        files = len(s3.open_local_release(out, second).manifest.files)
        print(f"releases {first} -> {second}; {files} files in the new month's release; {workers} workers")
        kinds = ["PutObject", "CopyObject", "HeadObject", "ListObjectsV2", "GetObject", "DeleteObjects"]
        print(f"{'publish':<18}{'seconds':>8}{'uploads':>9}{'MB up':>7}{'index':>8}"
              + "".join(f"{k.replace('ListObjectsV2', 'List').replace('Object', ''):>9}" for k in kinds))
        for name, seconds, r, counts in runs:
            print(f"{name:<18}{seconds:>8.1f}{r.uploaded:>9}{r.bytes_uploaded / 1e6:>7.1f}{r.index_files:>8}"
                  + "".join(f"{counts.get(k, 0):>9}" for k in kinds))
        new, new_counts = runs[1][2], runs[1][3]
        writes = new_counts.get("PutObject", 0) + new_counts.get("CopyObject", 0)
        print(f"\nuploads of a new month's publish / files in the release: {new.uploaded / files:.2f} (aim <= 0.35)")
        print(f"bytes uploaded by the new month / by the first release: "
              f"{new.bytes_uploaded / max(runs[0][2].bytes_uploaded, 1):.2f}")
        print(f"billable writes (PUT + COPY) of a new month / files in the release: {writes / files:.2f} "
              f"({writes} / {files}; aim <= 0.4)")
        print(f"bucket growth per month / one release: {(sizes[1] - sizes[0]) / one_release:.2f} "
              f"({(sizes[1] - sizes[0]) / 1e6:.0f} / {one_release / 1e6:.0f} MB; aim <= 0.5)")
        print(f"bucket after the first release / one release: {sizes[0] / one_release:.2f}; objects in the bucket "
              f"after the new month: {n_stored}")
        if jobs:
            full_cpu = full["cpu"]
            print(f"\nthe scheduled job's refresh (`refresh --no-fetch [--state]`, each in a fresh folder; CPU s; "
                  f"a full build: {full_cpu:.1f})")
            for name, cpu, summary in jobs:
                print(f"  {name:<48}{cpu:>7.1f}  {cpu / full_cpu:>5.2f} of a full build")
                print(f"      {summary}")
            print(f"scheduled run with unchanged inputs / full build, CPU: {jobs[1][1] / full_cpu:.3f} "
                  f"(aim <= 0.05; without the kept state {jobs[2][1] / full_cpu:.2f})")
            print(f"scheduled new month / full build, CPU: {jobs[3][1] / full_cpu:.2f} (aim <= 0.35; before the "
                  f"document keys were kept: {jobs[4][1] / full_cpu:.2f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
