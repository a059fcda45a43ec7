"""Benchmark: publish a full release to S3, then publish it again with nothing changed.

Prints upload time and objects/s for both, side by side. The second run should do
near-zero work: one listing, one HEAD per object, no PUT, no pointer write.

By default it starts a throwaway SeaweedFS on 127.0.0.1 (tests/s3server.py) and
publishes `build/current` if it exists, else a synthetic release shaped like the
real one (~4,000 small JSON documents plus their gzip copies). Against another
server: --endpoint-url URL --bucket B (credentials from the usual AWS variables).

    .venv/bin/python bench/publish.py [--synthetic] [--documents 4000] [--workers 16]
"""

from __future__ import annotations

import gzip
import sys
import tempfile
import time
import uuid
from pathlib import Path

import click
import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.publish import s3  # noqa: E402
from pipeline.release.manifest import MANIFEST_NAME, Manifest, file_entry  # noqa: E402


def synthetic_release(root: Path, documents: int, seed: int = 6) -> Path:
    """A release tree with the renderer's layout and realistic document sizes.

    Figures in it are random noise, never published: it exists only to be uploaded.
    """
    rng = np.random.default_rng(seed)
    release_id = "bench-" + uuid.uuid4().hex[:8]
    rdir = root / "releases" / release_id
    files = {}
    lgas = rng.integers(10, 45, size=documents)  # LGAs per state-level document
    for i in range(documents):
        n = int(lgas[i])
        doc = {
            "period": f"20{10 + i % 15:02d}-{1 + i % 12:02d}",
            "state": f"S{i % 37:02d}",
            "source": "synthetic benchmark data, not for publication",
            "lgas": [
                {
                    "lga_code": f"NG{i % 37:03d}{j:03d}",
                    "risk": round(float(v), 3),
                    "band": "moderate",
                }
                for j, v in enumerate(rng.random(n))
            ],
        }
        body = orjson.dumps(doc)
        key = f"v1/risk/doc{i:05d}.json"
        path = rdir / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        files[key] = file_entry(body, "application/json")
        gz = gzip.compress(body, compresslevel=9, mtime=0)
        (rdir / (key + ".gz")).write_bytes(gz)
        files[key + ".gz"] = file_entry(gz, "application/json", "gzip")
    manifest = Manifest(release_id, "2024-05-01T00:00:00Z", "bench", {}, files)
    (rdir / MANIFEST_NAME).write_bytes(manifest.to_bytes())
    return rdir


def _run(
    client, target: s3.Target, local: s3.LocalRelease, workers: int
) -> tuple[float, s3.PublishResult]:
    t = time.perf_counter()
    result = s3.publish_release(client, target, local, workers=workers)
    return time.perf_counter() - t, result


def bench(client, target: s3.Target, local: s3.LocalRelease, workers: int) -> None:
    objects = len(local.manifest.files) + 1
    size = sum(int(e["size"]) for e in local.manifest.files.values()) + len(local.manifest_bytes)
    print(f"release {local.release_id}: {objects} objects, {size / 1e6:.1f} MB, {workers} workers")
    full_s, full = _run(client, target, local, workers)
    again_s, again = _run(client, target, local, workers)
    print(f"{'':24}{'full publish':>16}{'re-publish':>16}")
    rows = [
        ("wall time (s)", f"{full_s:.2f}", f"{again_s:.2f}"),
        ("objects uploaded", full.uploaded, again.uploaded),
        ("MB uploaded", f"{full.bytes_uploaded / 1e6:.1f}", f"{again.bytes_uploaded / 1e6:.1f}"),
        ("objects/s (processed)", f"{objects / full_s:.0f}", f"{objects / again_s:.0f}"),
        ("upload phase (s)", f"{full.seconds['upload']:.2f}", f"{again.seconds['upload']:.2f}"),
        ("list phase (s)", f"{full.seconds['list']:.2f}", f"{again.seconds['list']:.2f}"),
        ("check phase (s)", f"{full.seconds['check']:.2f}", f"{again.seconds['check']:.2f}"),
        ("verify phase (s)", f"{full.seconds['verify']:.2f}", f"{again.seconds['verify']:.2f}"),
        ("pointer switched", full.pointer_switched, again.pointer_switched),
    ]
    for name, a, b in rows:
        print(f"{name:<24}{a!s:>16}{b!s:>16}")


@click.command()
@click.option(
    "--endpoint-url", default=None, help="Use this S3 endpoint instead of a throwaway SeaweedFS."
)
@click.option("--bucket", default=None)
@click.option("--root", type=click.Path(path_type=Path), default=ROOT / "build")
@click.option(
    "--synthetic", is_flag=True, help="Ignore build/current; publish a synthetic release."
)
@click.option("--documents", default=4000, show_default=True)
@click.option("--workers", default=s3.DEFAULT_WORKERS, show_default=True)
def main(
    endpoint_url: str | None,
    bucket: str | None,
    root: Path,
    synthetic: bool,
    documents: int,
    workers: int,
) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp:
        tmpdir = Path(tmp)
        if not synthetic and (root / "current").exists():
            local = s3.open_local_release(root)
        else:
            t = time.perf_counter()
            synthetic_release(tmpdir / "build", documents)
            local = s3.open_local_release(
                tmpdir / "build", next((tmpdir / "build" / "releases").iterdir()).name
            )
            print(f"synthetic release written in {time.perf_counter() - t:.1f}s")
        prefix = "bench-" + uuid.uuid4().hex[:8]
        if endpoint_url:
            if not bucket:
                raise click.UsageError("--bucket is required with --endpoint-url")
            bench(
                s3.make_client(endpoint_url, workers=workers),
                s3.Target.of(bucket, prefix),
                local,
                workers,
            )
            return
        import boto3

        from tests.s3server import run_seaweedfs

        with run_seaweedfs(tmpdir / "seaweedfs") as server:
            session = boto3.session.Session(
                aws_access_key_id=server.access_key, aws_secret_access_key=server.secret_key
            )
            client = s3.make_client(server.endpoint_url, workers=workers, session=session)
            bench(client, s3.Target.of(server.bucket, prefix), local, workers)


if __name__ == "__main__":
    main()
