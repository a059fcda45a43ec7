"""The dashboard's settings, read once per process (`DashboardSettings.from_env`).

Locally `malaria-risk dashboard` fills them from its options; in production the Lambda
function's environment carries them (deploy/dashboard.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_PORT = 8090
MAX_BODY = 8 * 1024  # bytes of a form; every form of the dashboard fits in 2 KiB
MAX_HEAD = 16 * 1024  # bytes of a request head (431 above): a browser's, cookies included, stays under 4 KiB
MAIL_PER_HOUR = 300  # codes and invitations the whole service sends in an hour (docs/dashboard.md#sign-in-limits)


@dataclass(frozen=True)
class DashboardSettings:
    store: str = "sqlite:var/keys.sqlite"  # the key store (sqlite:PATH or dynamodb:PREFIX)
    dashboard: str = ""  # the dashboard's own store (a SQLite path); default beside the key store
    counters: str | None = None  # the local server's counters file, for usage (default beside the keys)
    mailer: str = "console"  # console | file:PATH | ses:FROM_ADDRESS
    base_url: str = ""  # the dashboard's public origin, e.g. https://account.example.org
    api_url: str = "http://127.0.0.1:8080"  # the API's origin, for the ready curl / Python / R lines
    secure_cookie: bool = True  # `__Host-` cookie with Secure; see docs/dashboard-operations.md
    origin_secret: str = ""  # production: CloudFront adds X-Origin-Verify with this value; others get 403
    idle_minutes: int = 30
    absolute_hours: int = 12
    monthly: int | None = None  # the service's default monthly allowance (None: edge.limits default)
    mail_per_hour: int = MAIL_PER_HOUR

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DashboardSettings:
        e = os.environ if env is None else env
        monthly = e.get("MALARIA_RISK_MONTHLY")
        return cls(
            store=e.get("DASHBOARD_KEY_STORE", cls.store),
            dashboard=e.get("DASHBOARD_STORE", ""),
            counters=e.get("MALARIA_RISK_COUNTERS") or None,
            mailer=e.get("DASHBOARD_MAILER", "console"),
            base_url=e.get("DASHBOARD_BASE_URL", ""),
            api_url=e.get("DASHBOARD_API_URL", cls.api_url),
            secure_cookie=e.get("DASHBOARD_SECURE_COOKIE", "1") != "0",
            origin_secret=e.get("DASHBOARD_ORIGIN_SECRET", ""),
            monthly=int(monthly) if monthly else None,
            mail_per_hour=int(e.get("DASHBOARD_MAIL_PER_HOUR", cls.mail_per_hour)),
        )

    def to_env(self) -> dict[str, str]:
        env = {"DASHBOARD_KEY_STORE": self.store, "DASHBOARD_STORE": self.dashboard, "DASHBOARD_MAILER": self.mailer,
               "DASHBOARD_BASE_URL": self.base_url, "DASHBOARD_API_URL": self.api_url,
               "DASHBOARD_SECURE_COOKIE": "1" if self.secure_cookie else "0",
               "DASHBOARD_ORIGIN_SECRET": self.origin_secret}
        if self.counters:
            env["MALARIA_RISK_COUNTERS"] = self.counters
        if self.monthly:
            env["MALARIA_RISK_MONTHLY"] = str(self.monthly)
        env["DASHBOARD_MAIL_PER_HOUR"] = str(self.mail_per_hour)
        return env

    @property
    def cookie_name(self) -> str:
        """`__Host-` needs Secure; without it (plain-HTTP development on another host name) a plain name."""
        return "__Host-session" if self.secure_cookie else "session"

    @property
    def browser_cookie_name(self) -> str:
        """The signed browser id (no server row): what sign-in codes and the anonymous CSRF token belong to."""
        return "__Host-browser" if self.secure_cookie else "browser"
