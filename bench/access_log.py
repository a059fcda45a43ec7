"""What the decision log costs the local server: CPU per `App.respond`, side by side in one run.

Five apps over one small synthetic release and one live key, measured in alternating rounds
(the machine is shared; the ratios move much less than the figures): no log; every success
logged through the background writer (`edge/local/loglines.py`, to /dev/null); one in 100
(the local default); and, to split the cost, every line formatted but handed to a no-op.
Process CPU time, so the writer thread's share is counted.

    make bench-access-log   (or .venv/bin/python bench/access_log.py [--rounds 7] [--requests 20000])
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.accesslog import AccessLog  # noqa: E402
from edge.local.app import App  # noqa: E402
from edge.local.loglines import BackgroundLines  # noqa: E402
from edge.local.settings import ServerSettings  # noqa: E402
from edge.stores.sqlite import SQLiteKeyStore  # noqa: E402
from pipeline.release.render import render_release  # noqa: E402
from tests.conftest import NOW, synthetic_produced  # noqa: E402


@click.command()
@click.option("--rounds", default=7)
@click.option("--requests", default=20_000)
def main(rounds: int, requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        render_release(tmp / "build", synthetic_produced(), "2026-11-22T10:00:00Z")
        store = SQLiteKeyStore(tmp / "keys.sqlite")
        _, key = store.create("bench", ["risk_scores"], "live", now=NOW)
        devnull = os.open(os.devnull, os.O_WRONLY)
        default = ServerSettings().log_ok_every
        apps = {
            "no log": None,
            "every success": AccessLog(BackgroundLines(devnull), 1),
            f"1 in {default} (default)": AccessLog(BackgroundLines(devnull), default),
            "every success, no-op sink": AccessLog(lambda _t: None, 1),
        }
        made = {name: App(tmp / "build", store, clock=lambda: NOW, access_log=log) for name, log in apps.items()}
        headers = {"authorization": f"Bearer {key}"}
        us: dict[str, list[float]] = {name: [] for name in made}
        for _ in range(rounds):
            for name, app in made.items():
                t = time.process_time()
                for _ in range(requests):
                    app.respond("GET", "/v1/risk/lgas", "state=KN&period=2024-02", headers)
                us[name].append((time.process_time() - t) / requests * 1e6)
        base = statistics.median(us["no log"])
        print(f"CPU per App.respond (authorised 200), median of {rounds} alternating rounds of {requests}:")
        for name, values in us.items():
            m = statistics.median(values)
            print(f"  {name:<28} {m:6.2f} µs   {m / base:5.2f}x")
        os.close(devnull)


if __name__ == "__main__":
    main()
