"""SMC planning in a release built from the real data: the rule's verdicts recomputed from the raw
rainfall file without the service's code, the check against what Nigeria delivered recomputed from the
raw delivery files, the LGA rows' rain sources, and the page quoting its own release."""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.paths import DATA_DIR, data_marks

pytestmark = data_marks("rainfall/nga_state_chirps_dekadal_wfp_1981_2026.csv",
                        "malaria/who_smc_state_2013_2021", "malaria/hbhi_smc_lga_2013_2019")
COASTAL = {"Lagos", "Ogun", "Rivers", "Bayelsa", "Delta", "Akwa Ibom"}


def _json(root: Path, key: str) -> dict:
    return json.loads((root / "current" / key).read_text())


def _raw_shares() -> dict[str, dict[int, float]]:
    """State name -> year -> best-4-month share, from the raw dekadal CSV, 2016-2025 (complete years)."""
    months: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0] * 12)
    counts: dict[tuple[str, int], int] = defaultdict(int)
    with open(DATA_DIR / "rainfall/nga_state_chirps_dekadal_wfp_1981_2026.csv") as f:
        for row in csv.DictReader(f):
            d = dt.date.fromisoformat(row["dekad_start"])
            if 2016 <= d.year <= 2025:
                months[(row["state_name"], d.year)][d.month - 1] += float(row["rfh_mm"])
                counts[(row["state_name"], d.year)] += 1
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for (state, year), m in months.items():
        assert counts[(state, year)] == 36
        best = max(sum(m[(k + j) % 12] for j in range(4)) for k in range(12))
        out[state][year] = round(best / sum(m), 4)
    return out


def test_state_verdicts_recomputed_from_the_raw_rainfall(real_build: Path) -> None:
    doc = _json(real_build, "v1/transmission/smc/states.json")
    raw = _raw_shares()
    assert len(doc["states"]) == 37
    for s in doc["states"]:
        shares = [raw[s["state"]][y] for y in range(2016, 2026)]
        assert (s["window_first_year"], s["window_last_year"]) == (2016, 2025)
        assert s["rain_shares"] == pytest.approx(shares, abs=1e-4)
        passed = [v >= 0.6 for v in shares]
        runs = [all(passed[i:i + 4]) for i in range(7)]
        assert s["eligible"] is any(runs), s["state"]
        assert s["margin"] == pytest.approx(max(min(shares[i:i + 4]) for i in range(7)) - 0.6, abs=2e-4)
        assert s["years_passed"] == sum(passed)
        if s["eligible"]:
            assert s["first_cycle_month"] == s["best4_start_month"] % 12 + 1 and s["cycles"] in (4, 5)
            assert s["cycle_months"][0] == s["first_cycle_month"] and len(s["cycle_months"]) == s["cycles"]
        else:
            assert s["first_cycle_month"] is None and s["cycles"] is None
        assert s["target_children_3_59_months"] is None and "3-59 months" in s["target_reason"]
        assert s["rain_this_year"]["year"] == 2026 and s["rain_this_year"]["provisional"] is True


def test_the_check_against_delivery_recomputed_from_the_raw_files(real_build: Path) -> None:
    doc = {s["state"]: s for s in _json(real_build, "v1/transmission/smc/states.json")["states"]}
    check = _json(real_build, "docs/smc-check.json")
    treated: dict[tuple[str, int], list[float]] = defaultdict(list)
    with open(DATA_DIR / "malaria/who_smc_state_2013_2021/2023-04-09-nga_smc.csv") as f:
        for row in csv.DictReader(f):
            treated[(row["adm1"].strip(), int(row["year"]))].append(float(row["value"]))
    in_2021 = sorted(st for (st, y), v in treated.items() if y == 2021 and sum(v) > 0)
    assert len(in_2021) == 18
    by_name = {n.replace(" ", "").lower(): n for n in doc}
    eligible_2021 = [st for st in in_2021 if doc[by_name[st.replace(" ", "").lower()]]["eligible"]]
    assert check["delivered_2021"] == 18 and check["delivered_2021_eligible"] == len(eligible_2021)
    assert len(eligible_2021) == 18  # aim: every state that delivered SMC in 2021 is eligible
    assert all(doc[st]["eligible"] is False for st in COASTAL) and check["coastal_not_eligible"] == 6
    kano = doc["Kano"]
    assert kano["children_treated_per_cycle"] == [int(v) for v in treated[("Kano", 2021)]]
    # first cycle vs the recorded first rounds, per state and year
    first: dict[tuple[str, int], dt.date] = {}
    with open(DATA_DIR / "malaria/hbhi_smc_lga_2013_2019/smc_lga_year_summary_2013_2019.csv") as f:
        for row in csv.DictReader(f):
            k = (row["state_code"], int(row["year"]))
            d = dt.date.fromisoformat(row["first_round_date"])
            first[k] = min(first.get(k, d), d)
    codes = {s["state_code"]: s for s in doc.values()}
    offs = [(d.month - codes[c]["first_cycle_month"] + 6) % 12 - 6 for (c, _), d in first.items()]
    timing = check["timing"]
    assert timing["state_years_judged"] == len(first) == 27
    assert timing["state_years_within_1_month"] == sum(1 for o in offs if abs(o) <= 1)
    assert timing["share_within_1_month"] >= 0.8  # aim: within one month in at least 80 % of state-years
    july = [(d.month - 7 + 6) % 12 - 6 for d in first.values()]
    assert timing["reference_july_within_1_month"] == round(sum(1 for o in july if abs(o) <= 1) / len(july), 3)


def test_lga_rows_say_which_rain_they_rest_on(real_build: Path) -> None:
    kn = _json(real_build, "v1/transmission/smc/lgas/KN.json")
    assert kn["state_code"] == "KN" and len(kn["lgas"]) == 44
    names = [r["lga"].casefold() for r in kn["lgas"]]
    assert names == sorted(names)
    for r in kn["lgas"]:
        assert len(r["rain_sources"]) == len(r["rain_shares"]) == 10
        assert r["rain_sources"][1:] == ["state_dekadal"] * 9  # no LGA rainfall after 2016
        assert r["years_from_lga_rain"] == r["rain_sources"].count("lga_monthly")
    assert sum(r["years_from_lga_rain"] for r in kn["lgas"]) >= 40  # 2016 from the LGA series
    so = _json(real_build, "v1/transmission/smc/lgas/SO.json")
    delivered = [r for r in so["lgas"] if r["first_round_dates"]]
    assert len(delivered) == 23 and all(r["first_round_dates"] == sorted(r["first_round_dates"]) for r in delivered)
    assert {d[:4] for r in delivered for d in r["first_round_dates"]} == {str(y) for y in range(2015, 2020)}
    csv_text = (real_build / "current" / "v1/transmission/smc/lgas/KN.csv").read_text()
    header = csv_text.splitlines()[0].split(",")
    assert header[:3] == ["state_code", "state", "lga_code"] and "rain_sources" in header
    assert len(csv_text.splitlines()) == 45


def test_the_page_quotes_its_own_release(real_build: Path) -> None:
    page = (real_build / "current" / "docs/smc.html").read_text()
    check = _json(real_build, "docs/smc-check.json")
    kano = next(s for s in check["states"] if s["state_code"] == "KN")
    assert "{{" not in page and "Planning SMC with this service" in page
    assert str(kano["margin"]) in page and str(check["timing"]["state_years_judged"]) in page
    assert "<table" in page and "first round recorded" in page
    bundle = {p.name for p in (real_build / "current" / "downloads").iterdir()}
    assert {"smc_state.csv", "smc_lga.csv", "smc_state.parquet", "smc_lga.parquet"} <= bundle
