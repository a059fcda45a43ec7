"""The cost of recording daily usage in the local limiter, side by side with the limiter before it.

Run: `.venv/bin/python bench/limiter_usage.py [REVISION]` (default `6776194`, the commit
before the day counters). Loads `edge/limits.py` of REVISION as a second module and times
`Limiter.hit` of both over the same kind of shared counters file (MappedCounter, the local
server's default), in alternating rounds so the machine's load swings hit both alike.
Prints hits/s per kind of key and the ratio now/before.
"""

from __future__ import annotations

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge import limits as now_limits  # noqa: E402
from edge.keys import KeyRecord  # noqa: E402
from edge.stores.counters import MappedCounter  # noqa: E402

ROUNDS, HITS = 7, 20_000


def load_before(revision: str) -> object:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:edge/limits.py"], check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "limits_before.py"
    path.write_text(source.replace("from .gate import", "from edge.gate import").replace(
        "from .keys import", "from edge.keys import"))
    spec = importlib.util.spec_from_file_location("limits_before", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rate(limiter: object, record: KeyRecord) -> float:
    t0 = time.perf_counter()
    base = datetime(2026, 11, 22, 12, tzinfo=UTC).timestamp()
    for i in range(HITS):
        limiter.hit(record, datetime.fromtimestamp(base + i * 0.003, UTC))  # type: ignore[attr-defined]
    return HITS / (time.perf_counter() - t0)


def main() -> None:
    before = load_before(sys.argv[1] if len(sys.argv) > 1 else "6776194")
    tmp = Path(tempfile.mkdtemp())
    for kind in ("test", "live"):
        record = KeyRecord(id=f"key_{kind}", name="b", kind=kind, scopes=("risk_scores",))
        limiters = {"before": before.Limiter(MappedCounter(tmp / f"{kind}-before.map"), 10**9, 10**9),  # type: ignore[attr-defined]
                    "now": now_limits.Limiter(MappedCounter(tmp / f"{kind}-now.map"), 10**9, 10**9)}
        rates: dict[str, list[float]] = {name: [] for name in limiters}
        for _ in range(ROUNDS):
            for name, limiter in limiters.items():
                rates[name].append(rate(limiter, record))
        b, n = statistics.median(rates["before"]), statistics.median(rates["now"])
        print(f"{kind} key: before {b:,.0f} hits/s, now {n:,.0f} hits/s, ratio now/before {n / b:.2f}")


if __name__ == "__main__":
    main()
