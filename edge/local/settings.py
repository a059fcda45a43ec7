"""The local server's settings, read once per worker process from the environment.

Several workers are separate processes started by the supervisor, so the settings travel
in the environment: `serve` writes them with `to_env()`, each worker reads them with
`from_env()`. Nothing else in the local server reads `os.environ`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..limits import DEFAULT_MONTHLY, DEFAULT_PER_MINUTE

ENV_ROOT = "MALARIA_RISK_ROOT"
ENV_STORE = "MALARIA_RISK_STORE"  # sqlite:PATH (default sqlite:var/keys.sqlite) or dynamodb:PREFIX
ENV_COUNTERS = "MALARIA_RISK_COUNTERS"  # counters file; default <keys>.counters.map beside the keys;
# a path ending in .sqlite selects the SQLite counters (slower, see docs/limits.md#throughput)
ENV_LIMITS = "MALARIA_RISK_LIMITS"  # "on" (default) or "off"
ENV_PER_MINUTE = "MALARIA_RISK_PER_MINUTE"
ENV_MONTHLY = "MALARIA_RISK_MONTHLY"
ENV_FIXED_NOW = "MALARIA_RISK_FIXED_NOW"  # tests and benchmarks only: freeze the gate's clock
ENV_HTTP = "MALARIA_RISK_HTTP"  # "direct" (default, edge/local/direct.py) or "uvicorn"
ENV_ACCESS_LOG = "MALARIA_RISK_ACCESS_LOG"  # "on" (default): one JSON line per decision on stderr; "off"
ENV_LOG_OK_EVERY = "MALARIA_RISK_LOG_OK_EVERY"  # successes logged one in N (default 100; 1: all; 0: none)

DEFAULT_ROOT = "build"
DEFAULT_STORE = "sqlite:var/keys.sqlite"
FRONTS = ("direct", "uvicorn")
# Problems are always logged; successes one in 100 by default: a line for every success adds ~40 % to
# a decision's CPU here (bench/access_log.py); the CDN function logs every one (docs/monitoring.md).
LOCAL_OK_EVERY = 100
DEFAULT_FRONT = "direct"


@dataclass(frozen=True)
class ServerSettings:
    root: Path = Path(DEFAULT_ROOT)
    store: str = DEFAULT_STORE
    counters: str | None = None
    limits: bool = True
    per_minute: int = DEFAULT_PER_MINUTE
    monthly: int = DEFAULT_MONTHLY
    fixed_now: datetime | None = None
    http: str = DEFAULT_FRONT
    access_log: bool = True
    log_ok_every: int = LOCAL_OK_EVERY

    def __post_init__(self) -> None:
        if self.http not in FRONTS:
            raise ValueError(f"unknown HTTP front {self.http!r}; choose one of {', '.join(FRONTS)}")
        if self.log_ok_every < 0:
            raise ValueError(f"{ENV_LOG_OK_EVERY} must be 0 (log no successes) or N ≥ 1 (one in N)")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServerSettings:
        e = os.environ if env is None else env
        fixed = e.get(ENV_FIXED_NOW)
        return cls(
            root=Path(e.get(ENV_ROOT, DEFAULT_ROOT)),
            store=e.get(ENV_STORE, DEFAULT_STORE),
            counters=e.get(ENV_COUNTERS) or None,
            limits=e.get(ENV_LIMITS, "on") != "off",
            per_minute=int(e.get(ENV_PER_MINUTE, DEFAULT_PER_MINUTE)),
            monthly=int(e.get(ENV_MONTHLY, DEFAULT_MONTHLY)),
            fixed_now=datetime.fromisoformat(fixed.replace("Z", "+00:00")).astimezone(UTC) if fixed else None,
            http=e.get(ENV_HTTP, DEFAULT_FRONT),
            access_log=e.get(ENV_ACCESS_LOG, "on") != "off",
            log_ok_every=int(e.get(ENV_LOG_OK_EVERY, LOCAL_OK_EVERY)),
        )

    def to_env(self) -> dict[str, str]:
        """The variables `from_env` reads back in a worker process."""
        env = {
            ENV_ROOT: str(self.root),
            ENV_STORE: self.store,
            ENV_LIMITS: "on" if self.limits else "off",
            ENV_PER_MINUTE: str(self.per_minute),
            ENV_MONTHLY: str(self.monthly),
            ENV_HTTP: self.http,
            ENV_ACCESS_LOG: "on" if self.access_log else "off",
            ENV_LOG_OK_EVERY: str(self.log_ok_every),
        }
        if self.counters:
            env[ENV_COUNTERS] = self.counters
        if self.fixed_now is not None:
            env[ENV_FIXED_NOW] = self.fixed_now.isoformat()
        return env
