"""Edge throughput: the local server against nginx serving the same release files, with wrk.

Run with `make bench-edge`. Loopback only. Installs wrk and nginx from Debian packages
(apt-get) when missing. Prints, for (a) an authorised LGA risk request, (b) a 304
revalidation and (c) a 401, requests/s and p99 for our server and nginx, and the ratio;
then a micro-benchmark of the gate function alone (decisions/s on one core).

nginx serves the release directory without any auth: it is the physical limit of this
machine for "send a small file over HTTP/1.1", not a like-for-like server. Limits are ON
in our server (a live key: minute and month counter increments per request, in the shared
counters file as served) with a per-minute limit high enough
never to trigger, so what is measured is the real hot path.

Side by side: the machine is shared, and its load swings within seconds, so the servers
are not measured one after the other for the whole time. Each case runs BENCH_ROUNDS
rounds (default 3); in each round every server gets BENCH_SECONDS / BENCH_ROUNDS seconds
in turn. Printed: the median requests/s and the median p99 over the rounds, and the ratio
of medians against nginx.

Environment: BENCH_SECONDS per server and case (default 6), BENCH_ROUNDS (3),
BENCH_CONNECTIONS (default 32), BENCH_WORKERS (2),
the HTTP fronts measured in the same run (BENCH_FRONTS, default "direct uvicorn": the
default direct front and `--http uvicorn`; a front written `before:NAME` runs the server
from the checkout named by BENCH_BEFORE, for before/after figures in one run),
BENCH_ROOT (a build root with `current`, default ./build if it exists, else a small
synthetic release rendered into a temporary directory).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import wait_until_up  # noqa: E402  (the checkout on the path first)

SECONDS = int(os.environ.get("BENCH_SECONDS", "6"))
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "3")))
SLICE = max(1, round(SECONDS / ROUNDS))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "32"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
FRONTS = os.environ.get("BENCH_FRONTS", "direct uvicorn").split()


def ensure_tools() -> None:
    missing = [t for t in ("wrk", "nginx") if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
    if not missing:
        return
    print(f"installing {' '.join(missing)} from Debian packages…", file=sys.stderr)
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "wrk", "nginx-light"], check=True,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def release_root(tmp: Path) -> tuple[Path, str]:
    given = os.environ.get("BENCH_ROOT")
    if given:
        return Path(given), "BENCH_ROOT"
    if (ROOT / "build" / "current").exists():
        return ROOT / "build", "the real build (./build/current)"
    from pipeline.release.render import render_release
    from tests.conftest import synthetic_produced

    root = tmp / "build"
    render_release(root, synthetic_produced(), "2026-11-22T10:00:00Z")
    return root, "a small synthetic release (run `make build` first to bench the real one)"


def wrk(url: str, headers: dict[str, str]) -> tuple[float, float, dict[int, int]]:
    """Requests/s, p99 in ms, and a status tally from wrk's own Lua-free output."""
    cmd = ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{SLICE}s", "--latency"]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    out = subprocess.run([*cmd, url], check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return rps, p99, {0: int(non2xx.group(1)) if non2xx else 0}


NGINX_CONF = """
worker_processes {workers};
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    types {{ application/json json; }}
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location / {{ }}
    }}
}}
"""


def gate_microbench(root: Path, tmp: Path) -> list[tuple[str, float]]:
    """Decisions per second of `edge.gate.handle` alone, one core, no HTTP."""
    from edge.gate import Request, handle
    from edge.limits import Limiter, MemoryCounter
    from edge.release import LocalReleases
    from edge.stores.counters import MappedCounter, SQLiteCounter
    from edge.stores.sqlite import ChangeAwareKeyCache, SQLiteKeyStore

    store = SQLiteKeyStore(tmp / "micro.sqlite")
    _, key = store.create("micro", ["risk_scores", "forecasts", "lga_boundaries"], "live",
                          per_minute=10**9, monthly=10**9)
    release = LocalReleases(root).current()
    state = release.facts.states[0]
    req = Request("GET", "/v1/risk/lgas", f"state={state}", {"authorization": f"Bearer {key}"})
    bad = Request("GET", "/v1/risk/lgas", f"state={state}", {})
    now = datetime.now(UTC)
    cached = ChangeAwareKeyCache(store, store.path)
    cases = [
        ("authorised, uncached key, no limiter", req, store, None),
        ("authorised, key cache, no limiter", req, cached, None),
        ("authorised, key cache, in-memory limits", req, cached, Limiter(MemoryCounter())),
        ("authorised, key cache, SQLite limits", req, cached,
         Limiter(SQLiteCounter(tmp / "micro.counters.sqlite"))),
        ("authorised, key cache, mapped limits (as served)", req, cached,
         Limiter(MappedCounter(tmp / "micro.counters.map"))),
        ("401 missing key", bad, cached, None),
    ]
    results = []
    for label, r, keys, lim in cases:
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.5:
            for _ in range(500):
                handle(r, now, keys, release, lim)
            n += 500
        results.append((label, n / (time.perf_counter() - t0)))
    return results


def main() -> None:
    ensure_tools()
    from edge.release import LocalReleases
    from edge.stores.sqlite import SQLiteKeyStore

    tmp = Path(tempfile.mkdtemp(prefix="bench-edge-"))
    tmp.chmod(0o755)  # nginx workers run as an unprivileged user when started by root
    procs: list[subprocess.Popen] = []
    try:
        root, which = release_root(tmp)
        release = LocalReleases(root).current()
        state = "KN" if "KN" in release.facts.states else release.facts.states[0]
        period = release.facts.last_estimated
        file_key = f"v1/risk/lgas/{state}/{period}.json"
        release_dir = (root / "current").resolve()
        keys_path = tmp / "var" / "keys.sqlite"
        _, key = SQLiteKeyStore(keys_path).create("bench", ["risk_scores"], "live",
                                                  per_minute=10**9, monthly=10**9)

        fronts: dict[str, str] = {}
        for i, front in enumerate(FRONTS):
            port = free_port()
            checkout, _, name = front.rpartition(":")  # "before:uvicorn" runs BENCH_BEFORE's code
            code = Path(os.environ["BENCH_BEFORE"]).resolve() if checkout == "before" else ROOT
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "pipeline.cli", "serve", "--root", str(root), "--port", str(port),
                 "--keys", str(keys_path), "--workers", str(WORKERS), "--http", name],
                # a counters file of its own: code of another version may not share one
                cwd=code, env={**os.environ, "PYTHONPATH": str(code),
                               "MALARIA_RISK_COUNTERS": str(tmp / "var" / f"counters-{i}.map")},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            fronts[front] = f"http://127.0.0.1:{port}"
            wait_until_up(fronts[front] + "/v1/periods", procs[-1], f"malaria-risk serve --http {front}")
        ours = fronts[FRONTS[0]]

        nport = free_port()
        (tmp / "nginx.conf").write_text(NGINX_CONF.format(workers=WORKERS, tmp=tmp, port=nport, root=release_dir))
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        procs.append(subprocess.Popen([nginx, "-c", str(tmp / "nginx.conf"), "-p", str(tmp)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        theirs = f"http://127.0.0.1:{nport}"
        wait_until_up(theirs + "/" + file_key, procs[-1], "nginx")

        auth = {"Authorization": f"Bearer {key}", "Accept-Encoding": "identity"}
        url = f"{ours}/v1/risk/lgas?state={state}&period={period}"
        first = httpx.get(url, headers=auth)
        assert first.status_code == 200, first.text
        assert "ratelimit" in first.headers, "limits must be on: the counter is part of the hot path measured"
        assert first.content == (release_dir / file_key).read_bytes()
        etag = first.headers["etag"]
        assert httpx.get(url, headers={**auth, "If-None-Match": etag}).status_code == 304
        assert httpx.get(url).status_code == 401
        probe = httpx.get(f"{theirs}/{file_key}")
        assert probe.status_code == 200, (probe.status_code, probe.text[:200])
        n_etag = probe.headers["etag"]

        print(f"release: {which} ({release.release_id}); request: /v1/risk/lgas?state={state}&period={period} "
              f"({len(first.content)} bytes)")
        print(f"wrk: 2 threads, {CONNECTIONS} connections, {ROUNDS} interleaved rounds of {SLICE} s per server and case; "
              f"{WORKERS} worker(s) for every server; "
              f"{os.cpu_count()} CPUs shared by client and servers. Fronts: {', '.join(FRONTS)} "
              f"(the first is the default).\n")
        rows = [
            ("(a) authorised LGA risk 200", url, auth, f"{theirs}/{file_key}", {}),
            ("(b) 304 revalidation", url, {**auth, "If-None-Match": etag}, f"{theirs}/{file_key}",
             {"If-None-Match": n_etag}),
            ("(c) 401 no key", url, {}, f"{theirs}/{file_key}", {}),
        ]
        print(f"{'case':<30} {'server':<16} {'req/s':>9} {'p99 ms':>8} {'vs nginx':>9}   rounds (req/s)")
        for label, u, h, nu, nh in rows:
            targets = [("nginx (no auth)", nu, nh)] + [(front, u.replace(ours, base), h) for front, base in fronts.items()]
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in targets}
            for _ in range(ROUNDS):
                for name, target, headers in targets:
                    rps, p99, _ = wrk(target, headers)
                    runs[name].append((rps, p99))
            base_rps = statistics.median(r for r, _ in runs["nginx (no auth)"])
            for i, (name, _, _) in enumerate(targets):
                rps = statistics.median(r for r, _ in runs[name])
                p99 = statistics.median(p for _, p in runs[name])
                each = " ".join(f"{r:.0f}" for r, _ in runs[name])
                print(f"{label if i == 0 else '':<30} {name:<16} {rps:>9.0f} {p99:>8.2f} {rps / base_rps:>8.0%}   {each}")

        print("\ngate function alone (one core, no HTTP):")
        for label, rate in gate_microbench(root, tmp):
            print(f"  {label:<50} {rate:>10.0f} decisions/s")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
