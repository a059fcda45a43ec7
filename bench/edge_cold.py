"""Benchmark: the Lambda@Edge bundle's cold start, warm cost and dependency latency, on loopback.

Builds the bundle as deployed (deploy/build_bundle.py) aimed at moto's server (S3 and
DynamoDB on 127.0.0.1) through a proxy that can delay or stall each dependency call
(tests/edge/proxy.py), unpacks it as Lambda does, and runs the handler in fresh
processes on a recorded CloudFront event with a live key. Prints, in one run:

- cold: CPU and wall time of import + first authorised request (interpreter start
  excluded), the median of several fresh processes; again under a CPU quota of a 128 MB
  Lambda share (128/1769 of a core) when this machine lets us make a cgroup; and, side
  by side, what importing boto3 and building the two clients the edge used to need costs;
- warm: CPU per authorised request, and calls per request to S3 and DynamoDB;
- latency added per request with an injected delay on every dependency call (p50, p99);
- the answer time when DynamoDB stops answering (a 503 within the deadline).

    .venv/bin/python bench/edge_cold.py [--runs 5] [--warm 200] [--delay-ms 80] [--compare main]
        [--period-us 20000 --period-us 100000] [--no-boto3] [--copies]

The release is published by the publisher in the index layout (the cold request reads the pointer
and one index shard); `--copies` puts only a copy-layout pointer in the bucket, as before the index.

With `--compare REF` the bundle as built at that commit is measured too, each cold process
alternating with one of this bundle's, so both see the same machine load (the figures
move ±20 % between runs on a shared machine; their ratio much less).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deploy.build_bundle import build_bundle  # noqa: E402
from tests.edge.conftest import CREDS, boto_client, start_moto  # noqa: E402
from tests.edge.proxy import proxy  # noqa: E402

LAMBDA_SHARE = 128 / 1769  # Lambda gives one vCPU at 1,769 MB, in proportion below that
CGROUP_ROOT = Path("/sys/fs/cgroup/cpu")
PERIOD_US = (20_000, 100_000)  # CFS periods of the quota; Lambda's own is not documented (--period-us)

# Runs in the fresh process: first line to first answer is what a cold start costs the function.
PROBE = r"""
import json, sys, time
t0 = time.process_time(); w0 = time.perf_counter()
# the function's own log lines (one per decision) are written, as on Lambda, but not into our pipe
import os; report = sys.stdout; sys.stdout = open(os.devnull, "w")
sys.path.insert(0, TASK)
import edge.cloudfront as c
import edge.aws
# the endpoints here are plain http on loopback; on AWS they are https, so the cold path also
# builds the TLS context the bundle's settings choose (the handshakes themselves are not counted)
edge.aws.ssl_context(c._gate.accounts.call.endpoint.budget.ca_file)
out = c.handler(json.loads(EVENT), None)
cold_cpu = time.process_time() - t0; cold_wall = time.perf_counter() - w0
assert "uri" in out, out
ep = (c._gate.releases.source.endpoint, c._gate.accounts.call.endpoint)
cold_calls = (ep[0].calls, ep[1].calls)
print(json.dumps({"cold_cpu": cold_cpu, "cold_wall": cold_wall, "cold_calls": cold_calls}), flush=True, file=report)
for line in sys.stdin:
    cmd = json.loads(line)
    before = (ep[0].calls, ep[1].calls); walls = []; c0 = time.process_time()
    for _ in range(cmd["n"]):
        w = time.perf_counter(); out = c.handler(json.loads(EVENT), None); walls.append(time.perf_counter() - w)
    cpu = (time.process_time() - c0) / cmd["n"]
    print(json.dumps({"walls": walls, "cpu": cpu, "status": out.get("status", "rewrite"),
                      "calls": [(ep[i].calls - before[i]) / cmd["n"] for i in (0, 1)]}), flush=True, file=report)
"""

BOTO3_PROBE = r"""
import time
t0 = time.process_time(); w0 = time.perf_counter()
import boto3
s3 = boto3.client("s3", region_name="us-east-1"); ddb = boto3.client("dynamodb", region_name="us-east-1")
print(time.process_time() - t0, time.perf_counter() - w0)
"""


@contextlib.contextmanager
def cpu_quota(share: float, period_us: int = PERIOD_US[0]) -> Iterator[Path | None]:
    """A cgroup (v1 cpu controller) limited to `share` of one core, or None where not allowed."""
    group = CGROUP_ROOT / f"edge-cold-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(str(period_us))
        (group / "cpu.cfs_quota_us").write_text(str(int(period_us * share)))
    except OSError:
        yield None
        return
    try:
        yield group
    finally:
        with contextlib.suppress(OSError):
            group.rmdir()


def spawn(code: str, env: dict[str, str], group: Path | None) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-S", "-c", code]
    if group is not None:  # join the cgroup, then become Python: the whole process runs under the quota
        cmd = ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh", *cmd]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def cold(code: str, env: dict[str, str], group: Path | None) -> dict[str, object]:
    proc = spawn(code, env, group)
    line = proc.stdout.readline() if proc.stdout else ""
    proc.communicate("", timeout=120)
    if not line:
        raise RuntimeError(proc.stderr.read() if proc.stderr else "probe failed")
    return dict(json.loads(line))


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


@click.command()
@click.option("--runs", default=5, help="fresh processes per cold measurement")
@click.option("--warm", default=200, help="warm requests per phase")
@click.option("--delay-ms", default=80.0, help="injected delay per dependency call")
@click.option("--period-us", default=PERIOD_US, multiple=True, show_default=True,
              help="CFS period of the CPU quota; repeat for several quota shapes")
@click.option("--compare", default="", metavar="GIT_REF",
              help="also measure the bundle as built at this commit (e.g. main), alternating with this one")
@click.option("--boto3/--no-boto3", "with_boto3", default=True, help="also measure importing boto3 + 2 clients")
@click.option("--copies", is_flag=True, help="serve a release of the copy layout (only its pointer in the bucket) "
              "instead of one published in the index layout (the cold request then reads one index shard too)")
def main(runs: int, warm: int, delay_ms: float, period_us: tuple[int, ...], compare: str, with_boto3: bool,
         copies: bool) -> None:
    moto, endpoint = start_moto()
    try:
        with tempfile.TemporaryDirectory(prefix="edge-cold-") as tmp_s, proxy(endpoint) as s3p, \
                proxy(endpoint) as ddbp:
            tmp = Path(tmp_s)
            run(tmp, endpoint, s3p, ddbp, runs, warm, delay_ms, period_us, compare, with_boto3, copies)
    finally:
        moto.terminate()
        moto.wait(timeout=10)


def ref_bundle(tmp: Path, ref: str, s3_url: str, ddb_url: str) -> Path:
    """The bundle as built at git commit `ref` (its own edge/ and build script), unpacked; returns its folder."""
    src = tmp / "ref-src"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "edge", "deploy"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run([sys.executable, str(src / "deploy" / "build_bundle.py"), "--bucket", "edge-bench", "--prefix",
                    "api", "--table-prefix", "bench-", "--region", "us-east-1", "--s3-endpoint-url", s3_url, "--dynamodb-endpoint-url", ddb_url,
                    "--out", str(tmp / "ref.zip")], check=True, capture_output=True)
    zipfile.ZipFile(tmp / "ref.zip").extractall(tmp / "ref-task")
    return tmp / "ref-task"


def run(tmp: Path, endpoint: str, s3p, ddbp, runs: int, warm: int, delay_ms: float,  # type: ignore[no-untyped-def]
        period_us: tuple[int, ...], compare: str, with_boto3: bool, copies: bool = False) -> None:
    import orjson

    from edge.stores.dynamodb import DynamoDBKeyStore
    from pipeline.release.render import render_release
    from tests.conftest import synthetic_produced
    from tests.edge.test_cloudfront import event_for, pointer_for

    render_release(tmp / "build", synthetic_produced(), "2026-11-22T10:00:00Z")
    pointer, _ = pointer_for((tmp / "build" / "current").resolve())
    s3 = boto_client(endpoint, "s3")
    s3.create_bucket(Bucket="edge-bench")
    if copies:  # the copy layout's pointer: the function reads nothing else of the release
        s3.put_object(Bucket="edge-bench", Key="api/current.json", Body=orjson.dumps(pointer))
    else:  # published as the job publishes: the cold request reads the pointer and one index shard
        import boto3

        from pipeline.publish import s3 as publisher

        session = boto3.session.Session(aws_access_key_id=CREDS["AWS_ACCESS_KEY_ID"],
                                        aws_secret_access_key=CREDS["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
        publisher.publish_release(publisher.make_client(endpoint, session=session), publisher.Target.of("edge-bench", "api"),
                                  publisher.open_local_release(tmp / "build"))
    store = DynamoDBKeyStore(boto_client(endpoint), "bench-")
    store.create_tables()
    _, key = store.create("bench", ["risk_scores"], "live", per_minute=10**6, monthly=10**9)
    size = build_bundle(tmp / "edge.zip", {"bucket": "edge-bench", "prefix": "api", "table_prefix": "bench-",
                                           "region": "us-east-1",
                                           "s3_endpoint_url": s3p.url, "dynamodb_endpoint_url": ddbp.url})
    zipfile.ZipFile(tmp / "edge.zip").extractall(tmp / "task")
    event = json.dumps(event_for("/v1/context/lgas", "state=KN", authorization=f"Bearer {key}"))
    code = f"TASK = {str(tmp / 'task')!r}\nEVENT = {event!r}\n" + PROBE
    env = {**CREDS, "PATH": os.environ.get("PATH", "")}
    boto_env = {**env, "PYTHONPATH": os.pathsep.join(p for p in sys.path if "site-packages" in p)}

    print(f"bundle: {size:,} bytes ({len(zipfile.ZipFile(tmp / 'edge.zip').namelist())} files), "
          f"release {pointer['release_id']} ({'copy' if copies else 'index'} layout)")

    def boto3_cost(group: Path | None) -> tuple[float, float]:
        proc = subprocess.run(
            ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh", sys.executable, "-c", BOTO3_PROBE]
            if group else [sys.executable, "-c", BOTO3_PROBE], capture_output=True, text=True, env=boto_env)
        cpu, wall = (float(x) for x in proc.stdout.split())
        return cpu, wall

    codes = {"now": code}
    if compare:
        codes[compare] = f"TASK = {str(ref_bundle(tmp, compare, s3p.url, ddbp.url)) !r}\nEVENT = {event!r}\n" + PROBE

    rows = []
    shapes: list[tuple[str, float | None, int]] = [("no quota", None, 0)]
    shapes += [(f"quota {LAMBDA_SHARE:.1%}, period {p // 1000} ms", LAMBDA_SHARE, p) for p in period_us]
    for label, share, period in shapes:
        with cpu_quota(share, period) if share else contextlib.nullcontext(None) as group:
            if share and group is None:
                print(f"{label}: not measured (no cgroup here)")
                continue
            # alternated, so both bundles see the same machine load
            colds: dict[str, list[dict[str, object]]] = {name: [] for name in codes}
            for _ in range(runs):
                for name, c in codes.items():
                    colds[name].append(cold(c, env, group))
            boto = [boto3_cost(group) for _ in range(max(1, runs // 2))] if with_boto3 else [(float("nan"),) * 2]
        for name, got in colds.items():
            cpu = statistics.median(float(c["cold_cpu"]) for c in got) * 1e3  # type: ignore[arg-type]
            wall = statistics.median(float(c["cold_wall"]) for c in got) * 1e3  # type: ignore[arg-type]
            rows.append((label, name, cpu, wall, got[0]["cold_calls"]))
        rows.append((label, "boto3 + 2 clients", statistics.median(b[0] for b in boto) * 1e3,
                     statistics.median(b[1] for b in boto) * 1e3, None))
    print("\ncold start (import + first authorised request, median of", runs, "fresh processes each)")
    print(f"{'':28} {'bundle':>20} {'CPU':>9} {'wall':>9}")
    for label, name, cpu, wall, _ in rows:
        print(f"{label:28} {name:>20} {cpu:7.1f}ms {wall:7.1f}ms")
    if compare:
        print("ratios, now vs " + compare + ": " + "; ".join(
            f"{a[0]}: CPU {b[2] / a[2]:.2f}x, wall {b[3] / a[3]:.2f}x less"
            for a, b in zip(rows[0::len(codes) + 1], rows[1::len(codes) + 1], strict=True)))
    print(f"calls on the cold request: S3 {rows[0][4][0]}, DynamoDB {rows[0][4][1]}")  # type: ignore[index]

    if compare:  # warm CPU of the compared bundle, in alternating rounds with this one's
        procs = {name: spawn(c, env, None) for name, c in codes.items()}
        cpus: dict[str, list[float]] = {name: [] for name in codes}
        for p in procs.values():
            assert p.stdout
            p.stdout.readline()
        for _ in range(5):
            for name, p in procs.items():
                assert p.stdin and p.stdout
                p.stdin.write(json.dumps({"n": warm}) + "\n")
                p.stdin.flush()
                cpus[name].append(float(json.loads(p.stdout.readline())["cpu"]) * 1e3)
        for p in procs.values():
            assert p.stdin
            p.stdin.close()
            p.wait(timeout=30)
        print("\nwarm CPU per authorised request, median of 5 rounds of", warm, "alternated: " + ", ".join(
            f"{name} {statistics.median(v):.3f} ms" for name, v in cpus.items()))

    proc = spawn(code, env, None)
    assert proc.stdin and proc.stdout
    proc.stdout.readline()

    def phase(n: int) -> dict[str, object]:
        assert proc.stdin and proc.stdout
        proc.stdin.write(json.dumps({"n": n}) + "\n")
        proc.stdin.flush()
        return dict(json.loads(proc.stdout.readline()))

    base = phase(warm)
    s3p.delay = ddbp.delay = delay_ms / 1e3
    slow = phase(max(20, warm // 4))
    s3p.delay = ddbp.delay = 0.0
    ddbp.stall = True
    t = time.perf_counter()
    stalled = phase(1)
    stall_wall = time.perf_counter() - t
    ddbp.stall = False
    proc.stdin.close()
    proc.wait(timeout=30)

    walls0 = [w * 1e3 for w in base["walls"]]  # type: ignore[attr-defined]
    walls1 = [w * 1e3 for w in slow["walls"]]  # type: ignore[attr-defined]
    print(f"\nwarm: {float(base['cpu']) * 1e3:.2f} ms CPU per authorised request; calls per request: "  # type: ignore[arg-type]
          f"S3 {base['calls'][0]:.3f}, DynamoDB {base['calls'][1]:.3f}")  # type: ignore[index]
    print(f"loopback wall p50 {pct(walls0, .5):.1f} ms, p99 {pct(walls0, .99):.1f} ms")
    print(f"with {delay_ms:.0f} ms per dependency call: p50 {pct(walls1, .5):.1f} ms "
          f"(+{pct(walls1, .5) - pct(walls0, .5):.1f}), p99 {pct(walls1, .99):.1f} ms "
          f"(+{pct(walls1, .99) - pct(walls0, .99):.1f})")
    print(f"DynamoDB silent: answer {stalled['status']} after {stall_wall * 1e3:.0f} ms "
          f"(connect 0.3 s, read 1 s, one retry, deadline 3 s)")


if __name__ == "__main__":
    main()
