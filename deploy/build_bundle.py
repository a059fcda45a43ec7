"""Build the Lambda@Edge bundle: the `edge` package plus `edge_config.json`, ≤ 1 MB.

Lambda@Edge takes no environment variables, so the settings the function needs (bucket,
key prefix, DynamoDB table prefix, region, cache bounds, default limits) are written into
the zip as `edge_config.json`. boto3 is not bundled: the Lambda Python runtime has it.

    python deploy/build_bundle.py --bucket B [--prefix api] --table-prefix mr- [--out build/edge.zip]
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 1024 * 1024  # Lambda@Edge limit for viewer-triggered functions
LOCAL_ONLY = "local"  # edge/local/ is the development server; everything else in edge/ ships


def bundle_sources(root: Path = ROOT) -> list[Path]:
    """Every module of the `edge` package except the folder `edge/local/`: the bundle is a folder."""
    edge = root / "edge"
    return sorted(p for p in edge.rglob("*.py")
                  if p.relative_to(edge).parts[0] != LOCAL_ONLY and "__pycache__" not in p.parts)


def build_bundle(out: Path, config: dict) -> int:
    """Write the zip and return its size; refuses (ValueError) anything over 1 MB."""
    for required in ("bucket", "table_prefix"):
        if not config.get(required):
            raise ValueError(f"edge config needs {required}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for src in bundle_sources():
            # fixed timestamps: the same sources give the same zip, so CodeSha256 is stable
            info = zipfile.ZipInfo(src.relative_to(ROOT).as_posix(), date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, src.read_bytes())
        info = zipfile.ZipInfo("edge_config.json", date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        z.writestr(info, json.dumps(config, indent=2, sort_keys=True))
    size = out.stat().st_size
    if size > MAX_BYTES:
        out.unlink()
        raise ValueError(f"bundle is {size} bytes, over the 1 MB Lambda@Edge limit")
    return size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", default="")
    p.add_argument("--bucket-region", default="us-east-1")
    p.add_argument("--table-prefix", required=True)
    p.add_argument("--region", default="us-east-1", help="DynamoDB region the function talks to")
    p.add_argument("--key-ttl", type=float, default=2.0, help="seconds; the revocation bound at the edge")
    p.add_argument("--pointer-ttl", type=float, default=5.0)
    p.add_argument("--per-minute", type=int, default=None)
    p.add_argument("--monthly", type=int, default=None)
    p.add_argument("--out", type=Path, default=ROOT / "build-edge" / "edge.zip")
    a = p.parse_args(argv)
    config = {"bucket": a.bucket, "prefix": a.prefix, "bucket_region": a.bucket_region,
              "table_prefix": a.table_prefix, "region": a.region, "key_ttl": a.key_ttl,
              "pointer_ttl": a.pointer_ttl}
    if a.per_minute:
        config["per_minute"] = a.per_minute
    if a.monthly:
        config["monthly"] = a.monthly
    size = build_bundle(a.out, config)
    print(f"{a.out}: {size} bytes (limit {MAX_BYTES})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
