"""The Python client's messages name its own methods, not HTTP routes, and carry the suggestions
for an unknown state or LGA: against the local server over loopback, on a small release with a
names index (no real build needed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from malaria_risk_client import ApiError, Client
from malaria_risk_client._errors import for_client

from edge.local.app import App
from edge.stores.sqlite import SQLiteKeyStore
from tests.conftest import FORECAST, NOW, LiveServer
from tests.edge.test_suggestions import release_with

INDEX = b'{"states":[["KN","Kano"],["LA","Lagos"]],"variants":{},"lgas":[["NG020006","Bunkure","KN"]]}'


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[str, str]]:
    release_with(tmp_path, INDEX)
    store = SQLiteKeyStore(tmp_path / "keys.sqlite")
    _, key = store.create("client", ["risk_scores", "forecasts", "lga_boundaries"], "test", now=NOW)
    with LiveServer(App(tmp_path / "build", store, clock=lambda: NOW)) as live:
        yield live.url, key


def test_a_forecast_month_names_the_forecast_methods(api: tuple[str, str]):
    with Client(*api) as mr, pytest.raises(ApiError) as caught:
        mr.risk_states(FORECAST[0])
    e = caught.value
    assert e.code == "FORECAST_PERIOD"
    assert "forecasts_states()" in str(e) and "forecasts_lgas()" in str(e) and "/v1/" not in str(e)
    assert "/v1/forecasts/lgas" in e.problem["detail"]  # the service's own words are kept


def test_a_name_suggests_codes_through_the_client(api: tuple[str, str]):
    with Client(*api) as mr:
        with pytest.raises(ApiError) as caught:
            mr.history_state("Kano")
        assert caught.value.code == "UNKNOWN_STATE" and "`KN`" in str(caught.value)
        assert caught.value.suggestions == [{"state_code": "KN", "state": "Kano"}]
        with pytest.raises(ApiError) as caught:
            mr.history_lga("bunkure")
        assert [s["lga_code"] for s in caught.value.suggestions] == ["NG020006"]
        assert "risk_lgas()" in str(caught.value)  # "…/v1/risk/lgas and the gazetteer list them"
        with pytest.raises(ApiError) as caught:
            mr.history_state("ZZ")
        assert caught.value.suggestions == []


def test_routes_become_methods_longest_first():
    assert for_client("see /v1/risk/lgas/all and /v1/risk/lgas.") == "see risk_lgas_all() and risk_lgas()."
    assert for_client("/v1/downloads/20261122T100000Z-abcd1234/x.csv") == "/v1/downloads/20261122T100000Z-abcd1234/x.csv"
