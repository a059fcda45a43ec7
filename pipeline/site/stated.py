"""Every limit, size and window the docs state, from the settings that enforce it.

The docs quote these as `{{ name }}` placeholders (pipeline/site/figures.py fills them), so a page
cannot say "3 codes an hour" while the dashboard allows 5. Operator pages, which are read as
Markdown and not rendered, state the numbers in words; tests/pipeline/site/test_stated_numbers.py
checks every such statement against these values, so a change of a setting without its page fails.
"""

from __future__ import annotations

from typing import Any


def _thousands(n: int) -> str:
    return f"{n:,}"


def settings_figures() -> dict[str, Any]:
    from dashboard import service
    from dashboard.settings import MAIL_PER_HOUR, MAX_BODY, DashboardSettings
    from edge.keys import KEY_LENGTH, PREFIXES
    from edge.limits import DEFAULT_MONTHLY, DEFAULT_PER_MINUTE

    dash = DashboardSettings()
    return {
        "limits.per_minute": DEFAULT_PER_MINUTE,
        "limits.per_hour_runaway": _thousands(DEFAULT_PER_MINUTE * 60),
        "limits.monthly": _thousands(DEFAULT_MONTHLY),
        "limits.monthly_plain": DEFAULT_MONTHLY,
        "keys.random_length": KEY_LENGTH,
        "keys.length": len(PREFIXES["live"]) + KEY_LENGTH,
        "dashboard.code_length": service.CODE_LENGTH,
        "dashboard.code_minutes": service.CODE_MINUTES,
        "dashboard.code_tries": service.CODE_TRIES,
        "dashboard.codes_per_browser": service.CODES_PER_BROWSER,
        "dashboard.codes_per_address": service.CODES_PER_ADDRESS,
        "dashboard.mail_per_client": service.MAIL_PER_CLIENT,
        "dashboard.codes_per_client_address": service.CODES_PER_CLIENT_ADDRESS,
        "dashboard.codes_per_known_address": service.CODES_PER_KNOWN_ADDRESS,
        "dashboard.codes_per_invitation": service.CODES_PER_INVITATION,
        "dashboard.invitations_per_admin": service.INVITATIONS_PER_ADMIN,
        "dashboard.known_after_days": service.KNOWN_AFTER_DAYS,
        "dashboard.keys_per_org": service.KEYS_PER_ORG,
        "dashboard.keys_per_researcher": service.KEYS_PER_RESEARCHER,
        "dashboard.keys_per_admin_hour": service.KEYS_PER_ADMIN_HOUR,
        "limits.org_per_minute": _thousands(service.KEYS_PER_ORG * DEFAULT_PER_MINUTE),
        "limits.org_monthly": _thousands(service.KEYS_PER_ORG * DEFAULT_MONTHLY),
        "dashboard.mail_per_hour": MAIL_PER_HOUR,
        "dashboard.device_days": service.DEVICE_DAYS,
        "dashboard.invitation_days": service.INVITATION_DAYS,
        "dashboard.roll_overlap_days": service.ROLL_OVERLAP_DAYS,
        "dashboard.reauth_minutes": service.REAUTH_MINUTES,
        "dashboard.idle_minutes": dash.idle_minutes,
        "dashboard.absolute_hours": dash.absolute_hours,
        "dashboard.max_body_kib": MAX_BODY // 1024,
    }
