"""A release served after its last forecast month: a request for a later month says where the data
end and, at request time, that the next data load is due (never remembered across months)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from edge.gate import Request, handle
from edge.release import LocalReleases
from edge.routes import Facts, load_due
from tests.conftest import ESTIMATED, FORECAST


@pytest.fixture
def release(release_root: Path):
    return LocalReleases(release_root).current()


def detail(release, store, key: str, period: str, now: datetime) -> tuple[int, str, str]:
    resp = handle(Request("GET", "/v1/risk/states", f"period={period}", {"authorization": f"Bearer {key}"}),
                  now, store, release)
    doc = json.loads(resp.body)
    return resp.status, doc["code"], doc["detail"]


def test_a_later_month_names_the_end_of_the_data(release, store, all_scopes_key) -> None:
    status, code, text = detail(release, store, all_scopes_key, "2030-01", datetime(2024, 5, 1, tzinfo=UTC))
    assert (status, code) == (404, "PERIOD_NOT_AVAILABLE")
    assert f"the data end at {ESTIMATED[-1]}" in text and f"forecasts to {FORECAST[-1]}" in text
    assert "next data load is due" not in text  # the forecasts have not passed yet on that day


def test_after_the_last_forecast_month_the_next_load_is_due(release, store, all_scopes_key) -> None:
    late = datetime(2024, 11, 26, 9, 0, tzinfo=UTC)  # FORECAST ends 2024-06
    status, code, text = detail(release, store, all_scopes_key, "2024-11", late)
    assert (status, code) == (404, "PERIOD_NOT_AVAILABLE")
    assert f"the data end at {ESTIMATED[-1]}" in text and "the next data load is due" in text
    assert "2024-11-26" in text
    # the same query earlier (the remembered outcome must not carry the later day's words)
    _, _, early = detail(release, store, all_scopes_key, "2024-11", datetime(2024, 5, 1, tzinfo=UTC))
    assert "next data load is due" not in early
    _, _, again = detail(release, store, all_scopes_key, "2024-11", late)
    assert again == text


def test_an_earlier_month_is_not_a_stale_release(release, store, all_scopes_key) -> None:
    _, code, text = detail(release, store, all_scopes_key, "2017-12", datetime(2030, 1, 1, tzinfo=UTC))
    assert code == "PERIOD_NOT_AVAILABLE" and "outside the months held" in text and "due" not in text


def test_load_due_compares_months() -> None:
    facts = Facts(estimated=("2026-05", "2026-06"), forecast=("2026-07", "2026-10"))
    assert not load_due(facts, "2026-10") and load_due(facts, "2026-11")
    assert load_due(Facts(estimated=("2026-06",)), "2026-07") and not load_due(Facts(), "2030-01")
