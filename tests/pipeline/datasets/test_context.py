"""Context producer: SPEC 2.5 fields, state-name joins, weighting, nulls, order."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.datasets import context
from pipeline.datasets.base import BuildContext
from pipeline.errors import InputError
from pipeline.geography import Geography, load_geography
from pipeline.sources import coverage
from tests.paths import DATA_DIR
from tests.paths import needs_data as real_data

needs_data = real_data(f"malaria/{coverage.TRAVEL_CSV}")

STATE_FIELDS = ["state_code", "state", "zone", "lgas", "population", "area_km2", "itn_use", "itn_access",
                "irs_coverage", "effective_treatment", "travel_minutes_to_care", "response_index"]
LGA_FIELDS = ["lga_code", "lga", "is_urban", "population", "area_km2", "itn_use", "itn_access",
              "irs_coverage", "effective_treatment", "travel_minutes_to_care", "response_index"]

DHS_HEADER = (
    "Country,Year,Survey,State,Level,Malaria prevalence according to RDT,Malaria prevalence according to microscopy,"
    "Persons with access to an insecticide-treated mosquito net (ITN),Children who took any ACT,"
    "Children tested for malaria with RDT,Children with fever who had blood taken from a finger or heel for testing,"
    "Existing insecticide-treated mosquito nets (ITNs) used last night,Children under 5 who slept under any net,"
    "Population who slept under an insecticide-treated mosquito net (ITN) last night,"
    "Advice or treatment for fever sought from a health facility or provider,"
    "Children under 5 who slept under an insecticide-treated net (ITN)"
)


def geography() -> Geography:
    """FCT with three LGAs (two share a name, to test the tie-break) and Nasarawa with one."""
    states = pl.DataFrame(
        {"state_code": ["FC", "NA"], "state": ["Federal Capital Territory", "Nasarawa"],
         "zone": ["North Central", "North Central"], "ocha_pcode": ["NG015", "NG026"], "lgas": [3, 1],
         "population": [600, 100], "area_km2": [30.0, 10.0]}
    )
    lgas = pl.DataFrame(
        {"lga_code": ["NG015003", "NG015001", "NG015002", "NG026001"], "lga": ["bwari", "Kuje", "Bwari", "Lafia"],
         "state_code": ["FC", "FC", "FC", "NA"], "eha_code": ["3", "1", "2", "4"], "population": [100, 200, 300, 100],
         "area_km2": [10.0, 10.0, 10.0, 10.0], "density_per_km2": [10.0, 20.0, 30.0, 10.0],
         "is_urban": [False, True, False, False], "rep_lon": [7.0] * 4, "rep_lat": [9.0] * 4}
    )
    return Geography(states=states, lgas=lgas, outlines={}, crosswalk=pl.DataFrame())


def write_inputs(data_dir: Path, dhs_rows: list[str], travel_rows: list[str]) -> Path:
    malaria = data_dir / "malaria"
    (malaria / coverage.DHS_CSV).parent.mkdir(parents=True, exist_ok=True)
    (malaria / coverage.DHS_CSV).write_text("\n".join([DHS_HEADER, *dhs_rows]) + "\n")
    header = ("state,zone,n_wards,population_total,pct_pop_lt30min,pct_pop_30_60min,pct_pop_60_110min,"
              "pct_pop_gt110min,pct_pop_gt60min,approx_mean_minutes_band_midpoints")
    (malaria / coverage.TRAVEL_CSV).write_text("\n".join([header, *travel_rows]) + "\n")
    return data_dir


# Column order after State, Level: RDT, micro, access, ACT, tested, stick, nets used, u5 any net, pop ITN, advice, u5 ITN
DHS_OK = [
    "Nigeria,2018,DHS,North Central,L1,37,21.2,41.9,58.1,98.4,14.1,80.3,47.9,39,58.7,47.4",  # zone row: ignored
    "Nigeria,2015,MIS,FCT,L2,1,1,99,99,1,1,1,1,99,1,1",  # other year: ignored
    "Nigeria,2018,DHS,FCT Abuja ,L2,31.3,20.1,24.4,31.1,96.8,14.3,88.8,36,23.8,79.2,35.4",
    "Nigeria,2018,DHS,Nasarawa,L2,32.1,13.6,59.1,NA,96,38,77,57.6,51.2,48.4,57.4",
]
TRAVEL_OK = [
    "Federal Capital Territory,North Central,62,4499017,75.2,21.0,3.6,0.2,3.8,24.0",
    "Nassarawa,North Central,146,4836370,75.9,13.8,7.4,2.9,10.3,27.9",
]


def produce(tmp_path: Path, dhs=DHS_OK, travel=TRAVEL_OK):
    write_inputs(tmp_path, dhs, travel)
    return context.produce(BuildContext(tmp_path, "t", geography=geography()))


def test_documents_fields_and_values(tmp_path: Path) -> None:
    out = produce(tmp_path)
    assert out.dataset == "context"
    states = out.documents[context.STATES_ROUTE][()]
    assert list(states) == ["source", "states"]
    src = states["source"]
    assert src["coverage_year"] == 2018 and isinstance(src["name"], str)
    assert "not inputs to the risk score" in src["note"] and "repeat the state survey estimate" in src["note"]
    assert "irs_coverage is null" in src["note"]
    fc, na = states["states"]
    assert list(fc) == STATE_FIELDS and [fc["state_code"], na["state_code"]] == ["FC", "NA"]
    # Percent -> share; FCT row spelt "FCT Abuja " in the DHS file and in full in the travel file.
    assert fc["itn_use"] == pytest.approx(0.238) and fc["itn_access"] == pytest.approx(0.244)
    assert fc["effective_treatment"] == pytest.approx(0.311)
    assert fc["response_index"] == pytest.approx((0.238 + 0.311) / 2)
    assert fc["travel_minutes_to_care"] == 24.0
    assert fc["irs_coverage"] is None
    assert (fc["lgas"], fc["population"], fc["area_km2"]) == (3, 600, 30.0)
    # "NA" in the survey -> null, and the response index needs both parts.
    assert na["effective_treatment"] is None and na["response_index"] is None
    assert na["itn_use"] == pytest.approx(0.512) and na["travel_minutes_to_care"] == 27.9


def test_lga_documents_repeat_state_and_sort_alphabetically(tmp_path: Path) -> None:
    docs = produce(tmp_path).documents[context.LGAS_ROUTE]
    assert set(docs) == {("FC",), ("NA",)}
    fc = docs[("FC",)]
    assert list(fc) == ["source", "state_code", "state", "lgas"]
    assert (fc["state_code"], fc["state"]) == ("FC", "Federal Capital Territory")
    # Alphabetical by name, case-insensitive; equal names ordered by lga_code.
    assert [(r["lga"], r["lga_code"]) for r in fc["lgas"]] == [("Bwari", "NG015002"), ("bwari", "NG015003"), ("Kuje", "NG015001")]
    for r in fc["lgas"]:
        assert list(r) == LGA_FIELDS
        assert r["itn_use"] == pytest.approx(0.238) and r["irs_coverage"] is None
    assert [r["is_urban"] for r in fc["lgas"]] == [False, False, True]


def test_unknown_state_name_fails_with_row(tmp_path: Path) -> None:
    bad = [*DHS_OK[:3], "Nigeria,2018,DHS,Narnia,L2,32.1,13.6,59.1,NA,96,38,77,57.6,51.2,48.4,57.4"]
    with pytest.raises(InputError) as info:
        produce(tmp_path, dhs=bad)
    assert info.value.row == 5 and "Narnia" in info.value.reason
    assert info.value.file.endswith("2023-04-05-nga_dhs.csv")


def test_missing_state_fails(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        produce(tmp_path, travel=TRAVEL_OK[:1])
    assert "NA" in info.value.reason and info.value.file.endswith(str(coverage.TRAVEL_CSV))


def test_duplicate_state_fails(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        produce(tmp_path, travel=[*TRAVEL_OK, "FCT,North Central,1,1,1,1,1,1,1,30.0"])
    assert info.value.row == 4 and "FC" in info.value.reason


def test_unparsable_figure_fails_instead_of_null(tmp_path: Path) -> None:
    bad = [*DHS_OK[:3], "Nigeria,2018,DHS,Nasarawa,L2,32.1,13.6,59.1,n/k,96,38,77,57.6,51.2,48.4,57.4"]
    with pytest.raises(InputError) as info:
        produce(tmp_path, dhs=bad)
    assert info.value.row == 5 and "Children who took any ACT" in info.value.reason


def test_weighted_state_figure_from_varying_lgas() -> None:
    # Not reachable with state-level sources, but SPEC 2.5 defines state = weighted mean of LGAs.
    frame = pl.DataFrame({"population": [100, 300, 600], "v": [0.2, 0.6, None]})
    got = frame.select(context.weighted_mean("v"))["v"][0]
    assert got == pytest.approx((100 * 0.2 + 300 * 0.6) / 400)  # the null LGA carries no weight
    assert frame.select(context.weighted_mean("population"))["population"][0] == pytest.approx(
        (100 * 100 + 300 * 300 + 600 * 600) / 1000
    )


@given(
    st.lists(
        st.tuples(st.integers(0, 10**6), st.one_of(st.none(), st.floats(0, 1, allow_nan=False))),
        min_size=1, max_size=30,
    )
)
def test_weighted_mean_properties(rows: list[tuple[int, float | None]]) -> None:
    frame = pl.DataFrame({"population": [r[0] for r in rows], "v": [r[1] for r in rows]},
                         schema={"population": pl.Int64, "v": pl.Float64})
    got = frame.select(context.weighted_mean("v"))["v"][0]
    weighted = [(p, v) for p, v in rows if v is not None and p > 0]
    if not weighted:
        assert got is None
    else:
        values = [v for _, v in weighted]
        assert min(values) - 1e-12 <= got <= max(values) + 1e-12


def test_state_key_aliases() -> None:
    for name in ("FCT", "FCT Abuja", " Federal Capital Territory  ", "federal capital territory"):
        assert context.state_key(name) == "federal capital territory"
    assert context.state_key("Nassarawa") == context.state_key("Nasarawa ")
    assert context.state_key("Akwa-Ibom") == context.state_key("Akwa Ibom")


@pytest.fixture(scope="module")
def real():
    geo = load_geography(DATA_DIR)
    return geo, context.produce(BuildContext(DATA_DIR, "t", geography=geo))


@needs_data
def test_real_context(real) -> None:
    geo, out = real
    states = out.documents[context.STATES_ROUTE][()]["states"]
    assert len(states) == 37 and [s["state_code"] for s in states] == sorted(s["state_code"] for s in states)
    by = {s["state_code"]: s for s in states}
    # Values read off the 2018 L2 rows of the DHS export: Kano ITN use 65.1 %, access 63.3 %, ACT 49.1 %.
    assert (by["KN"]["itn_use"], by["KN"]["itn_access"], by["KN"]["effective_treatment"]) == (0.651, 0.633, 0.491)
    # ACT is "NA" for six states in the export: those have no effective treatment nor response index.
    no_act = {c for c, s in by.items() if s["effective_treatment"] is None}
    assert no_act == {"AB", "DE", "KO", "NA", "OG", "OY"}
    assert all(by[c]["response_index"] is None for c in no_act)
    # ITN use and access and travel time exist for all 37 states; IRS for none.
    assert all(s["itn_use"] is not None and s["itn_access"] is not None for s in states)
    assert all(s["travel_minutes_to_care"] is not None and s["irs_coverage"] is None for s in states)
    assert by["YO"]["travel_minutes_to_care"] == 87.5 and by["FC"]["travel_minutes_to_care"] == 24.0
    assert sum(s["population"] for s in states) == geo.lgas["population"].sum()
    lgas = out.documents[context.LGAS_ROUTE]
    assert len(lgas) == 37 and sum(len(d["lgas"]) for d in lgas.values()) == 774
    for (code,), doc in lgas.items():
        names = [(r["lga"].lower(), r["lga_code"]) for r in doc["lgas"]]
        assert names == sorted(names)
        for r in doc["lgas"]:  # LGA figures repeat the state estimate
            for f in ("itn_use", "itn_access", "effective_treatment", "travel_minutes_to_care"):
                assert r[f] == by[code][f]
