"""Build the Lambda@Edge bundle: the `edge` package, compiled, plus `edge_config.json`, ≤ 1 MB.

Lambda@Edge takes no environment variables, so the settings the function needs (bucket,
key prefix, DynamoDB table prefix, home region, endpoints, cache bounds, default limits)
are written into the zip as `edge_config.json`, checked by `edge.settings.EdgeSettings`
first. The function uses the standard library only (no boto3).

Lambda unpacks the zip into a read-only folder, so an interpreter could never cache the
bytecode it compiles: every cold start would compile every module again. The bundle
therefore ships `__pycache__/*.pyc` beside the sources, compiled by this interpreter
(unchecked-hash pycs: valid whatever the unpacked files' times); the function's runtime
must be the same Python version (`deploy/aws.py` reads it from the bundle).

    python deploy/build_bundle.py --bucket B [--prefix api] --table-prefix mr- [--out build-edge/edge.zip]
        [--region eu-west-1] [--s3-endpoint-url URL] [--dynamodb-endpoint-url URL]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import marshal
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.settings import REGION_ENV, EdgeSettings, SettingsError, home_region  # noqa: E402

MAX_BYTES = 1024 * 1024  # Lambda@Edge limit for viewer-triggered functions
LOCAL_ONLY = "local"  # edge/local/ is the development server; everything else in edge/ ships


def bundle_sources(root: Path = ROOT) -> list[Path]:
    """Every module of the `edge` package except the folder `edge/local/`: the bundle is a folder."""
    edge = root / "edge"
    return sorted(p for p in edge.rglob("*.py")
                  if p.relative_to(edge).parts[0] != LOCAL_ONLY and "__pycache__" not in p.parts)


def _entry(name: str, data: bytes, z: zipfile.ZipFile) -> None:
    # fixed timestamps: the same sources give the same zip, so CodeSha256 is stable
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    z.writestr(info, data)


def compiled(src: Path) -> bytes:
    """The module's bytecode as an unchecked-hash pyc (PEP 552): used without looking at the source."""
    code = compile(src.read_bytes(), src.relative_to(ROOT).as_posix(), "exec", dont_inherit=True, optimize=0)
    source_hash = importlib.util.source_hash(src.read_bytes())
    flags = 0b01  # hash-based, check_source = 0
    return importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + source_hash + marshal.dumps(code)


# The roots of Amazon Trust Services, which issue the certificates of the S3 and DynamoDB
# endpoints (S3 finished moving to them in June 2022; DynamoDB before). Shipping only these
# makes the function's TLS set-up ~3 ms of CPU instead of ~40 ms for the whole system store.
ATS_ROOTS = ("Amazon Root CA 1", "Amazon Root CA 2", "Amazon Root CA 3", "Amazon Root CA 4",
             "Starfield Services Root Certificate Authority - G2")
CA_FILE = "aws-roots.pem"
SYSTEM_CERTS = Path("/etc/ssl/certs")


def ats_roots(certs_dir: Path = SYSTEM_CERTS) -> bytes:
    """The five roots from this machine's CA store (Debian's ca-certificates names them by subject)."""
    import ssl

    pems = []
    for name in ATS_ROOTS:
        path = certs_dir / (name.replace(" ", "_") + ".pem")
        if not path.is_file():
            raise ValueError(f"{path} not found: install ca-certificates, or build with --ca-bundle system")
        pems.append(path.read_bytes())
    data = b"".join(pems)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=data.decode("ascii"))
    if ctx.cert_store_stats()["x509_ca"] != len(ATS_ROOTS):
        raise ValueError("the Amazon Trust Services roots did not load as CA certificates")
    return data


def python_runtime() -> str:
    """The Lambda runtime name matching the interpreter that compiled the bundle."""
    return f"python{sys.version_info.major}.{sys.version_info.minor}"


def build_bundle(out: Path, config: dict[str, Any], ca_bundle: str = "amazon") -> int:
    """Write the zip and return its size; refuses (ValueError) a bad config or anything over 1 MB.

    `ca_bundle`: "amazon" ships the Amazon Trust Services roots as the function's trust
    store for https; "system" leaves the runtime's own store in use.
    """
    if ca_bundle not in ("amazon", "system"):
        raise ValueError(f"ca_bundle must be amazon or system, not {ca_bundle!r}")
    roots = ats_roots() if ca_bundle == "amazon" else None
    if roots is not None:
        config = {**config, "ca_file": CA_FILE}
    try:
        settings = EdgeSettings.from_mapping(config)
    except SettingsError as e:
        raise ValueError(f"edge config: {e}") from e
    out.parent.mkdir(parents=True, exist_ok=True)
    tag = sys.implementation.cache_tag
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for src in bundle_sources():
            rel = src.relative_to(ROOT)
            _entry(rel.as_posix(), src.read_bytes(), z)
            _entry((rel.parent / "__pycache__" / f"{src.stem}.{tag}.pyc").as_posix(), compiled(src), z)
        if roots is not None:
            _entry(CA_FILE, roots, z)
        doc = {k: v for k, v in settings._asdict().items() if v is not None}
        doc["runtime"] = python_runtime()
        _entry("edge_config.json", json.dumps(doc, indent=2, sort_keys=True).encode(), z)
    size = out.stat().st_size
    if size > MAX_BYTES:
        out.unlink()
        raise ValueError(f"bundle is {size} bytes, over the 1 MB Lambda@Edge limit")
    return size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", default="")
    p.add_argument("--bucket-region", help="region of the bucket (the pointer); default: the home region")
    p.add_argument("--table-prefix", required=True)
    p.add_argument("--region", help="home region of the DynamoDB table and the bucket, near the viewers "
                   f"(docs/deploy.md#home-region); default ${REGION_ENV}, no fallback")
    p.add_argument("--s3-endpoint-url", help="e.g. a local S3-compatible server, for tests")
    p.add_argument("--dynamodb-endpoint-url", help="e.g. a local DynamoDB endpoint, for tests")
    p.add_argument("--key-ttl", type=float, help="seconds a refused key is remembered per instance (2)")
    p.add_argument("--pointer-ttl", type=float, help="seconds between reads of current.json (5)")
    p.add_argument("--per-minute", type=int)
    p.add_argument("--monthly", type=int)
    p.add_argument("--log-ok-every", type=int, help="log one successful decision in N (1: all, 0: none; "
                   "problems are always logged; docs/monitoring.md)")
    p.add_argument("--ca-bundle", choices=["amazon", "system"], default="amazon",
                   help="trust store for https: the Amazon Trust Services roots (fast) or the runtime's")
    p.add_argument("--out", type=Path, default=ROOT / "build-edge" / "edge.zip")
    a = p.parse_args(argv)
    try:
        region = home_region(a.region)
    except SettingsError as e:
        p.error(str(e))
    config = {"bucket": a.bucket, "prefix": a.prefix, "bucket_region": a.bucket_region or region,
              "table_prefix": a.table_prefix, "region": region, "s3_endpoint_url": a.s3_endpoint_url,
              "dynamodb_endpoint_url": a.dynamodb_endpoint_url, "key_ttl": a.key_ttl, "pointer_ttl": a.pointer_ttl,
              "per_minute": a.per_minute, "monthly": a.monthly, "log_ok_every": a.log_ok_every}
    try:
        size = build_bundle(a.out, {k: v for k, v in config.items() if v is not None}, a.ca_bundle)
    except ValueError as e:
        p.error(str(e))
    print(f"{a.out}: {size} bytes (limit {MAX_BYTES}), runtime {python_runtime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
