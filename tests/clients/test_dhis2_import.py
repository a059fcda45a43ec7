"""A DHIS2 analytics export straight into `project_counts`, offline from a bundle folder made here: a
realistic export (DHIS2 Nigeria's "kn ... Local Government Area" names, misspellings, a name two states
share, an unknown unit, another data element, a blank value) in the three layouts, matched and
projected the same way by the Python and the R client."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from malaria_risk_client import ClientError, dhis2_counts, project_counts
from malaria_risk_client._dhis2 import read_export

from tests.paths import REPO_ROOT

CLIENT_R = REPO_ROOT / "clients" / "r" / "malariarisk" / "R" / "client.R"
LGAS = [("NG020006", "Bunkure", "KN"), ("NG020009", "Dala", "KN"), ("NG020017", "Gwale", "KN"),
        ("NG020024", "Kano Municipal", "KN"), ("NG023004", "Bassa", "KG"), ("NG032003", "Bassa", "PL"),
        ("NG032010", "Jos North", "PL")]
STATES = {"KN": "Kano", "KG": "Kogi", "PL": "Plateau"}
DATA = "Confirmed uncomplicated Malaria"
# org unit as exported -> the code it must map to (None: not mapped), and how
EXPECTED = {
    "kn Bunkure Local Government Area": ("NG020006", "name"),
    "kn Dalla Local Government Area": ("NG020009", "close"),  # misspelt, the state prefix narrows it
    "Gwalle LGA": ("NG020017", "close"),  # misspelt, no prefix
    "kn Kano Municipal Local Government Area": ("NG020024", "name"),
    "Bassa": (None, "ambiguous"),  # Kogi and Plateau
    "pl Bassa Local Government Area": ("NG032003", "name"),
    "Jos Nort": ("NG032010", "close"),
    "Plateau State": ("PL", "name"),
    "Nowhere Local Government Area": (None, "unmatched"),
}
MONTHS = ["202309", "202310", "202311", "202312"]


def ratio_rows(code_key: str, code: str, name_key: str, name: str, base_months: int) -> list[dict[str, Any]]:
    out = []
    for m in range(1, 13):
        for h in range(1, 5):
            r = round(1 + 0.1 * ((m + h) % 5) - 0.2, 3)
            out.append({code_key: code, name_key: name, "start_month": m, "horizon": h, "ratio": r,
                        "low": round(r * 0.6, 3), "high": round(r * 1.5, 3), "q10": round(r * 0.6, 3),
                        "q25": round(r * 0.8, 3), "q50": r, "q75": round(r * 1.2, 3), "q90": round(r * 1.5, 3),
                        "beats_persistence": "true" if code != "NG020017" else "", "insufficient_skill":
                        "false" if code != "NG020017" else "true", "forecast": "projected",
                        "base_months": base_months if h == 4 else 1, "season_class": "moderate"})
    return out


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    d = tmp_path / "bundle"
    d.mkdir()
    write_csv(d / "gazetteer.csv", [{"lga_code": c, "lga": n, "state_code": s, "state": STATES[s]} for c, n, s in LGAS])
    write_csv(d / "season_ratio_lga.csv", [r for c, n, _ in LGAS for r in ratio_rows("lga_code", c, "lga", n, 3)])
    write_csv(d / "season_ratio_state.csv", [r for c, n in STATES.items()
                                             for r in ratio_rows("state_code", c, "state", n, 3)])
    return d


def value(i: int, j: int) -> int:
    return 100 * (i + 1) + 7 * j


def long_csv(tmp_path: Path) -> Path:
    p = tmp_path / "export_long.csv"
    rows = [{"Data": DATA, "Period": per, "Organisation unit": ou, "Value": value(i, j)}
            for i, ou in enumerate(EXPECTED) for j, per in enumerate(MONTHS)]
    rows.append({"Data": "Malaria treated with ACT", "Period": "202312", "Organisation unit": "Gwalle LGA", "Value": 5})
    rows.append({"Data": DATA, "Period": "2023Q4", "Organisation unit": "Gwalle LGA", "Value": 9})
    rows.append({"Data": DATA, "Period": "202401", "Organisation unit": "Jos Nort", "Value": ""})
    write_csv(p, rows)
    return p


def pivot_csv(tmp_path: Path) -> Path:
    p = tmp_path / "export_pivot.csv"
    write_csv(p, [{"Organisation unit": ou, **{per: value(i, j) for j, per in enumerate(MONTHS)}}
                  for i, ou in enumerate(EXPECTED)])
    return p


def analytics_json(tmp_path: Path) -> Path:
    p = tmp_path / "export.json"
    ids = {ou: f"ou{i:09d}" for i, ou in enumerate(EXPECTED)}
    doc = {"headers": [{"name": "dx", "column": "Data"}, {"name": "pe", "column": "Period"},
                       {"name": "ou", "column": "Organisation unit"}, {"name": "value", "column": "Value"}],
           "metaData": {"items": {"dxConfUncomp": {"name": DATA}, **{v: {"name": k} for k, v in ids.items()}}},
           "rows": [["dxConfUncomp", per, ids[ou], str(value(i, j))]
                    for i, ou in enumerate(EXPECTED) for j, per in enumerate(MONTHS)]}
    p.write_text(json.dumps(doc))
    return p


def check(out: dict[str, Any]) -> None:
    got = {u["org_unit"]: (u["code"], u["match"]) for u in out["org_units"]}
    assert got == EXPECTED
    amb = next(u for u in out["org_units"] if u["org_unit"] == "Bassa")
    assert {s["lga_code"] for s in amb["suggestions"]} == {"NG023004", "NG032003"}
    by = {p["area"]: p for p in out["projections"]}
    assert set(by) == {c for c, _ in EXPECTED.values() if c}
    i = list(EXPECTED).index("kn Dalla Local Government Area")
    dala = by["NG020009"]
    assert dala["month"] == "2023-12" and dala["cases"] == [value(i, 1), value(i, 2), value(i, 3)]
    p1, p4 = dala["projections"][0], dala["projections"][3]
    assert p1["status"] == "ok" and p1["expected"] == int(value(i, 3) * p1["ratio"] + 0.5)
    assert p4["base_months"] == 3 and p4["expected"] is not None
    assert all(p["status"] == "insufficient_skill" and p["expected"] is None for p in by["NG020017"]["projections"])


@pytest.mark.parametrize("layout", [long_csv, pivot_csv, analytics_json])
def test_python_client_imports_the_export(bundle: Path, tmp_path: Path, layout: Any) -> None:
    out = project_counts(bundle=bundle, dhis2=layout(tmp_path))
    check(out)


def test_only_the_confirmed_uncomplicated_months_are_read(tmp_path: Path) -> None:
    rows = read_export(long_csv(tmp_path))
    assert len(rows) == len(EXPECTED) * len(MONTHS)  # not the ACT row, the quarter or the blank
    with pytest.raises(ClientError, match="no monthly values"):
        read_export("Data,Period,Organisation unit,Value\nMalaria treated with ACT,202312,Dala,5\n")


def test_r_client_matches_and_projects_as_the_python_client(bundle: Path, tmp_path: Path) -> None:
    rscript = shutil.which("Rscript")
    if rscript is None:
        pytest.skip("R is not installed (.ci/run installs it)")
    export = long_csv(tmp_path)
    script = f"""
source("{CLIENT_R}")
out <- mr_project_counts(bundle = "{bundle}", dhis2 = "{export}")
cat(jsonlite::toJSON(list(org_units = out$org_units, projections = out$projections), na = "null"))
"""
    res = subprocess.run([rscript, "--vanilla", "-e", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    py = project_counts(bundle=bundle, dhis2=export)
    assert {u["org_unit"]: (u["code"], u["match"]) for u in r["org_units"]} == EXPECTED
    want = [(p["area"], q["horizon"], q["status"], q["expected"], q["low"], q["high"], q["base_months"])
            for p in py["projections"] for q in p["projections"]]
    got = [(x["area"], x["horizon"], x["status"], x.get("expected"), x.get("low"), x.get("high"), x["base_months"])
           for x in r["projections"]]
    assert got == want


def test_dhis2_counts_feed_the_score_command(bundle: Path, tmp_path: Path) -> None:
    """The export's counts keyed by code, as `malaria-risk score --counts` reads them."""
    from pipeline.model import hub

    got = dhis2_counts(long_csv(tmp_path), bundle=bundle)
    by = {(c["location"], c["month"]): c["cases"] for c in got["counts"]}
    i = list(EXPECTED).index("Jos Nort")
    assert by[("NG032010", "2023-09")] == value(i, 0) and ("NG032010", "2024-01") not in by  # the blank
    assert not any(loc is None for loc, _ in by)
    buf = "location,month,cases\n" + "".join(f"{c['location']},{c['month']},{c['cases']}\n" for c in got["counts"])
    assert hub.read_counts(buf) == by
