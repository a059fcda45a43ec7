"""`Client.project_counts` over real HTTP against the real build: the answer is the documented formula
on the ratio route's own figures, and it equals the offline (bundle) answer."""

from __future__ import annotations

import pytest
from malaria_risk_client import Client, ClientError, project_counts
from malaria_risk_client._project import whole_cases

from tests.clients.conftest import Servers
from tests.paths import data_marks

pytestmark = data_marks("malaria/dhis2_lga_monthly_2020_2023")


def test_project_counts_over_http_is_the_formula_and_matches_the_bundle(servers: Servers) -> None:
    with Client(servers.url, servers.key, frames="json") as c:
        states = c.ratios_states()["states"]
        kn = {r["horizon"]: r for r in states if r["state_code"] == "KN" and r["start_month"] == 6}
        out = c.project_counts("KN", "2024-06", 500, horizons=3)
        assert [p["horizon"] for p in out["projections"]] == [1, 2, 3]
        for p in out["projections"]:
            r = kn[p["horizon"]]
            assert p["ratio"] == r["ratio"]
            if r["beats_persistence"] is True or r["forecast"] == "persistence":
                assert p["expected"] == whole_cases(500 * r["ratio"])  # whole cases, half up
                assert [p["quantiles"][q] for q in ("q10", "q90")] == [p["low"], p["high"]]
            else:
                assert p["status"] == "insufficient_skill" and p["expected"] is None
        lga = c.ratios_lgas("KN")["lgas"][0]["lga_code"]
        via_api = c.project_counts(lga, 6, 80)
        via_api_state = c.project_counts(lga, 6, 80, state="KN")
        offline = project_counts(lga, 6, 80, bundle=servers.build / "current" / "downloads")
        assert via_api["projections"] == via_api_state["projections"] == offline["projections"]
        with pytest.raises(ClientError, match="^project_counts: .*horizons"):
            c.project_counts("KN", 6, 80, horizons=5)
        with pytest.raises(ClientError, match="^project_counts: .*area"):
            c.project_counts("Kano", 6, 80)
