"""The Python client package (clients/python) against the local server over real HTTP."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import httpx
import pandas as pd
import polars as pl
import pytest
from malaria_risk_client import ApiError, ChecksumError, Client

from tests.clients.conftest import Limited, Servers
from tests.paths import REPO_ROOT, data_marks

pytestmark = data_marks()


def test_history_of_one_lga_and_of_one_state_in_one_call(servers: Servers):
    api = httpx.Client(base_url=servers.url, headers={"Authorization": f"Bearer {servers.key}"})
    with Client(servers.url, servers.key, frames="polars") as mr:
        lga = mr.history_lga("NG020001")
        doc = api.get("/v1/history/lgas", params={"lga": "NG020001"}).json()
        assert lga["period"].to_list() == [m["period"] for m in doc["months"]]
        assert lga["score"].to_list() == [m["score"] for m in doc["months"]]
        assert mr.stats["requests"] == 1
        withf = mr.history_state("NA", forecasts=True, as_="pandas")
        sdoc = api.get("/v1/history/states", params={"state": "NA", "include": "forecasts"}).json()
        assert isinstance(withf, pd.DataFrame) and len(withf) == len(sdoc["months"])
        assert set(withf["state_code"]) == {"NA"}  # Nasarawa's code is text, not a missing value
        assert list(withf["kind"])[-1] == "forecast" and withf["score_high"].tolist() == [
            m["score_high"] for m in sdoc["months"]]


def test_a_whole_country_month_and_codes_as_text(servers: Servers):
    with Client(servers.url, servers.key) as mr:
        latest = mr.periods()["last_estimated"]
        month = mr.risk_lgas_all(latest, as_="pandas")
        assert len(month) == 774 and month["lga_code"].is_unique
        assert month["state_code"].map(type).eq(str).all() and (month["state_code"] == "NA").sum() > 0
        assert month["score"].is_monotonic_decreasing
        pl_month = mr.risk_lgas_all(latest, as_="polars")
        assert pl_month.schema["state_code"] == pl.String and pl_month.height == 774


def test_etag_revalidation_answers_from_the_cache(servers: Servers, tmp_path: Path):
    with Client(servers.url, servers.key, cache_dir=tmp_path / "cache") as mr:
        first = mr.risk_states(as_="json")
        assert mr.stats["not_modified"] == 0
    with Client(servers.url, servers.key, cache_dir=tmp_path / "cache") as again:  # a script run again
        assert again.risk_states(as_="json") == first
        assert again.stats["not_modified"] == 1 and again.stats["requests"] == 1


def test_bundle_file_is_checked_against_the_release_checksums(servers: Servers, tmp_path: Path):
    with Client(servers.url, servers.key) as mr:
        index = mr.downloads()
        path = mr.download("risk_state_month.csv", tmp_path)
        listed = {f["name"]: f["sha256"] for f in index["files"]}
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed["risk_state_month.csv"]
        pinned = mr.download("gazetteer.parquet", tmp_path / "pinned", release_id=index["release_id"])
        assert pl.read_parquet(pinned).height == 774


def test_a_damaged_download_is_refused_and_nothing_is_left(servers: Servers, tmp_path: Path):
    """The service's bytes are checked, not trusted: a transport that flips one byte of the body
    (as a broken proxy would) makes the download fail and leaves no file behind."""

    class FlipOneByte(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            resp = super().handle_request(request)
            if request.url.path.endswith("/gazetteer.csv"):
                body = bytearray(resp.read())
                body[10] ^= 1
                return httpx.Response(resp.status_code, headers={"content-type": "text/csv"}, content=bytes(body))
            return resp

    with Client(servers.url, servers.key, http=httpx.Client(transport=FlipOneByte())) as mr, \
            pytest.raises(ChecksumError, match="gazetteer.csv"):
        mr.download("gazetteer.csv", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_problems_raise_with_their_code(servers: Servers):
    with Client(servers.url, servers.narrow_key) as mr:
        with pytest.raises(ApiError) as e:
            mr.history_state("KN", forecasts=True)
        assert (e.value.status, e.value.code) == (403, "SCOPE_REQUIRED")
        with pytest.raises(ApiError) as e:
            mr.risk_lgas("XX")
        assert (e.value.status, e.value.code) == (404, "UNKNOWN_STATE")


def test_a_429_is_waited_out_as_the_server_says(limited: Limited):
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        import time

        waits.append(seconds)
        time.sleep(seconds)

    with Client(limited.url, limited.key, sleep=sleep) as mr:
        assert mr.periods()["last_estimated"]
        assert len(mr.risk_states(as_="json")["states"]) == 37  # the second request of the minute
    assert len(waits) == 1 and 1 <= waits[0] <= 3 and mr.stats["requests"] == 3


def test_outlines_as_a_geodataframe(servers: Servers):
    gpd = pytest.importorskip("geopandas")
    with Client(servers.url, servers.key) as mr:
        gdf = mr.boundaries("KN", as_="geopandas")
    assert isinstance(gdf, gpd.GeoDataFrame) and len(gdf) == 44 and gdf.crs.to_epsg() == 4326
    assert set(gdf["state"]) == {"KN"}


def test_booleans_come_back_as_booleans(servers: Servers):
    """The CSV writes booleans as `true`/`false`; both frame kinds read them as booleans."""
    with Client(servers.url, servers.key) as mr:
        latest = mr.periods()["last_estimated"]
        pd_lgas, pl_lgas = mr.risk_lgas("KN", latest, as_="pandas"), mr.risk_lgas("KN", latest, as_="polars")
        doc = mr.risk_lgas("KN", latest, as_="json")
        assert pd_lgas["is_urban"].dtype == bool and pl_lgas.schema["is_urban"] == pl.Boolean
        assert pd_lgas["is_urban"].tolist() == pl_lgas["is_urban"].to_list() == [r["is_urban"] for r in doc["lgas"]]
        history = mr.history_lga("NG020001", as_="pandas")
        assert history["provisional"].dtype == bool
        assert mr.history_lga("NG020001", as_="polars").schema["provisional"] == pl.Boolean


EXAMPLE = REPO_ROOT / "clients" / "python" / "examples" / "history.py"
# runs the example in a fresh interpreter in which no data frame library can be imported, as on the
# client's base install
WITHOUT_FRAMES = """
import runpy, sys
class NoFrames:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"pandas", "polars", "geopandas", "pyarrow"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoFrames())
for name in [m for m in sys.modules if m.split(".")[0] in {"pandas", "polars", "geopandas"}]:
    del sys.modules[name]
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_example(servers: Servers, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"MALARIA_RISK_BASE_URL": servers.url, "MALARIA_RISK_API_KEY": key, "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", WITHOUT_FRAMES, str(EXAMPLE), *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_example_runs_on_the_base_install(servers: Servers):
    api = httpx.Client(base_url=servers.url, headers={"Authorization": f"Bearer {servers.key}"})
    months = api.get("/v1/history/lgas", params={"lga": "NG020001"}).json()["months"]
    start, end = months[2]["period"], months[5]["period"]
    done = run_example(servers, servers.key, "NG020001", start, end)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["period", "kind", "score", "score_low", "score_high", "level", "provisional", "basis",
                                "rank", "rank_low", "rank_high"]
    assert [line.split()[0] for line in lines[1:5]] == [m["period"] for m in months[2:6]]
    assert lines[1].split()[2] == str(months[2]["score"])
    latest = api.get("/v1/periods").json()["last_estimated"]
    top = api.get("/v1/risk/lgas/all", params={"period": latest}).json()["lgas"][:5]
    assert lines[5] == f"highest risk in {latest}:"
    assert [line.split()[0] for line in lines[7:12]] == [r["state_code"] for r in top]


def test_the_example_reports_a_problem_as_the_clients_error(servers: Servers):
    done = run_example(servers, "svc_live_not_a_key", "NG020001")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: 401 ") and done.stdout == ""


def test_smc_planning_for_the_states_and_the_lgas_of_one(servers: Servers):
    api = httpx.Client(base_url=servers.url, headers={"Authorization": f"Bearer {servers.key}"})
    with Client(servers.url, servers.key, frames="polars") as mr:
        states = mr.smc()
        doc = api.get("/v1/transmission/smc/states").json()
        assert states.height == 37 and states["state_code"].to_list() == [s["state_code"] for s in doc["states"]]
        assert states["eligible"].to_list() == [s["eligible"] for s in doc["states"]]
        assert states["margin"].to_list() == [s["margin"] for s in doc["states"]]
        kn = mr.smc("KN", as_="pandas")
        assert len(kn) == 44 and set(kn["state_code"]) == {"KN"} and kn["lga_code"].is_unique
        with pytest.raises(ApiError) as err:
            mr.smc("XX")
        assert err.value.code == "UNKNOWN_STATE"
