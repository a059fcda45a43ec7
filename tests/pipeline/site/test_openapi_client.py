"""A client generated from the served OpenAPI document by a standard generator
(openapi-python-client) keeps the error and GeoJSON models, and works against the real
release on loopback: typed success bodies, typed problem documents, the state enum.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from edge.problems import CATALOGUE
from tests.paths import data_marks
from tests.pipeline.site.conftest import RealSite

pytestmark = data_marks()  # slow, and skipped with a reason when the real data is absent

# not the name the generator would choose from the title: that one is the repository's own client
# package (clients/python), installed in the same environment
PACKAGE = "generated_malaria_risk_client"
# what the generator says when it drops part of a document
DROPPED = ("response will be omitted", "Unable to process schema", "Unable to parse", "Failure to process schema",
           "will be ignored", "Could not find reference")


@pytest.fixture(scope="module")
def generated(real_site: RealSite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModuleType, str]]:
    tool = shutil.which("openapi-python-client") or str(Path(sys.executable).with_name("openapi-python-client"))
    tmp = tmp_path_factory.mktemp("generated")
    spec = tmp / "openapi.json"
    spec.write_bytes(httpx.get(real_site.url + "/docs/openapi.json", timeout=30).content)
    config = tmp / "generator.json"
    config.write_text(f'{{"package_name_override": "{PACKAGE}", "project_name_override": "{PACKAGE}"}}')
    proc = subprocess.run([tool, "generate", "--path", str(spec), "--meta", "none", "--config", str(config),
                           "--output-path", str(tmp / PACKAGE)], capture_output=True, text=True, timeout=300, cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sys.path.insert(0, str(tmp))
    try:
        yield importlib.import_module(PACKAGE), proc.stdout + proc.stderr
    finally:
        sys.path.remove(str(tmp))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def test_generator_drops_nothing(generated: tuple[ModuleType, str]) -> None:
    _, log = generated
    assert not [line for line in log.splitlines() if any(d in line for d in DROPPED)], log


def test_errors_and_geojson_survive_as_models(generated: tuple[ModuleType, str], real_site: RealSite) -> None:
    client_mod, _ = generated
    models = importlib.import_module(f"{PACKAGE}.models")
    boundaries = importlib.import_module(f"{PACKAGE}.api.geography.get_boundaries_lgas")
    risk = importlib.import_module(f"{PACKAGE}.api.risk.get_risk_lgas")
    state_codes = [s.value for s in models.StateCode]
    assert len(state_codes) == 37 and "KN" in state_codes and "FC" in state_codes
    assert {p.code for p in CATALOGUE} <= {c.value for c in models.ProblemCode}

    client = client_mod.AuthenticatedClient(base_url=real_site.url, token=real_site.key)
    kano = boundaries.sync(client=client, state=models.StateCode.KN)
    assert isinstance(kano, models.BoundaryCollection)
    assert kano.features and all(isinstance(f, models.BoundaryFeature) for f in kano.features)
    ring = kano.features[0].geometry.coordinates[0]
    first = ring[0] if kano.features[0].geometry.type_.value == "Polygon" else ring[0][0]
    assert len(first) == 2 and 2 < first[0] < 15 and 4 < first[1] < 14  # lon, lat inside Nigeria

    narrow = client_mod.AuthenticatedClient(base_url=real_site.url, token=real_site.narrow_key)
    refused = boundaries.sync_detailed(client=narrow, state=models.StateCode.KN)
    assert refused.status_code == 403 and isinstance(refused.parsed, models.Problem)
    assert refused.parsed.code == models.ProblemCode.SCOPE_REQUIRED
    bad_key = client_mod.AuthenticatedClient(base_url=real_site.url, token="svc_test_" + "x" * 32)
    unauthorised = risk.sync_detailed(client=bad_key, state=models.StateCode.KN)
    assert unauthorised.status_code == 401 and unauthorised.parsed.code == models.ProblemCode.API_KEY_INVALID
    report = risk.sync(client=client, state=models.StateCode.KN)
    assert isinstance(report, models.LgaRiskReport) and report.state_code == "KN" and report.lgas


def test_csv_answers_and_histories_round_trip(generated: tuple[ModuleType, str], real_site: RealSite) -> None:
    """The `.csv` operations return the CSV text (not a JSONDecodeError), equal to the JSON answer row for
    row, and the history operations return typed models."""
    import csv
    import io

    client_mod, _ = generated
    models = importlib.import_module(f"{PACKAGE}.models")
    as_csv = importlib.import_module(f"{PACKAGE}.api.risk.get_risk_lgas_csv")
    as_json = importlib.import_module(f"{PACKAGE}.api.risk.get_risk_lgas")
    lga_history = importlib.import_module(f"{PACKAGE}.api.history.get_history_lgas")
    country_csv = importlib.import_module(f"{PACKAGE}.api.history.get_risk_lgas_all_csv")
    client = client_mod.AuthenticatedClient(base_url=real_site.url, token=real_site.key)

    text = as_csv.sync(client=client, state=models.StateCode.NA)  # Nasarawa: the code `NA` stays a string
    report = as_json.sync(client=client, state=models.StateCode.NA)
    assert isinstance(text, str) and isinstance(report, models.LgaRiskReport)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["lga_code"] for r in rows] == [x.lga_code for x in report.lgas]
    assert [float(r["score"]) for r in rows] == [x.score for x in report.lgas]
    assert {r["state_code"] for r in rows} == {"NA"}

    country = list(csv.DictReader(io.StringIO(country_csv.sync(client=client))))
    assert len(country) == 774 and len({r["lga_code"] for r in country}) == 774

    code = report.lgas[0].lga_code
    history = lga_history.sync(client=client, lga=code)
    assert isinstance(history, models.LgaHistory) and history.lga_code == code and history.state_code == "NA"
    assert [m.kind.value if hasattr(m.kind, "value") else m.kind for m in history.months] == \
        ["estimated"] * len(history.months)
    last = next(m for m in history.months if m.period == report.period)
    mine = next(x for x in report.lgas if x.lga_code == code)
    assert (last.score, last.score_low, last.score_high) == (mine.score, mine.score_low, mine.score_high)
