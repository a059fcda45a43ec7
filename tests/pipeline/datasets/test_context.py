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
from pipeline.sources import coverage, eha_names, itn_sae, map_irs
from tests.paths import DATA_DIR
from tests.paths import needs_data as real_data

needs_data = real_data(f"malaria/{coverage.TRAVEL_CSV}")

EXTRA = ["itn_use_low_90", "itn_use_high_90", "itn_use_2024", "itn_use_2024_low_90", "itn_use_2024_high_90"]
STATE_FIELDS = ["state_code", "state", "zone", "lgas", "population", "area_km2", "itn_use", "itn_access",
                "irs_coverage", "effective_treatment", "travel_minutes_to_care", "response_index", *EXTRA]
LGA_FIELDS = ["lga_code", "lga", "is_urban", "population", "area_km2", "itn_use", "itn_access",
              "irs_coverage", "effective_treatment", "travel_minutes_to_care", "response_index", *EXTRA]

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


# eHA codes 1..4 of the fixture geography, with eHA spellings (code 3 differs from its OCHA name)
EHA_ROWS = ["1,Kuje,FC", "2,Bwari,FC", "3,Municipal Area Council,FC", "4,Lafia,NA"]
SAE_HEADER = "ISO3,Country,Year,Survey,Indicator,Admin,Region_Name,Mean,Median,Lower_CI,Upper_CI,Width_90_CI,Coefficient_of_Variation"
FCT_UW = "Abuja Federal Capital Territory"
# (area, 2018 mean, 2024 mean); intervals are mean -/+ 0.1
SAE_VALUES = [(FCT_UW, 0.37, 0.46), ("Nasarawa", 0.61, 0.69), (f"{FCT_UW}_Kuje", 0.2, 0.3),
              (f"{FCT_UW}_Bwari", 0.4, 0.5), (f"{FCT_UW}_Municipal Area Council", 0.5, 0.6), ("Nasarawa_Lafia", 0.6, 0.7)]


def sae_rows(values=SAE_VALUES) -> list[str]:
    out = []
    for year, i in ((2018, 1), (2024, 2)):
        for v in values:
            admin = 2 if "_" in v[0] else 1
            m = v[i]
            out.append(f"NGA,Nigeria,{year},NG{year}DHS,ML_NETC_C_ITN,{admin},{v[0]},{m},{m},{m - 0.1:.2f},{m + 0.1:.2f},0.2,0.1")
    return out


IRS_OK = ["1,Kuje,FC,Federal Capital Territory,0.0,10,0.47,10", "2,Bwari,FC,Federal Capital Territory,0.1,12,0.47,12",
          "3,Municipal Area Council,FC,Federal Capital Territory,0.0,5,0.47,5", "4,Lafia,NA,Nasarawa,0.0,20,0.47,20"]


def write_inputs(data_dir: Path, dhs_rows: list[str], travel_rows: list[str], sae: list[str] | None = None,
                 irs: list[str] | None = None) -> Path:
    (data_dir / "admin").mkdir(parents=True, exist_ok=True)
    (data_dir / eha_names.LGAS_CSV).write_text("\n".join(["lga_code,lga_name,state_code", *EHA_ROWS]) + "\n")
    for path, header, rows in (
        (itn_sae.SAE_CSV, SAE_HEADER, sae_rows() if sae is None else sae),
        (map_irs.LGA_CSV, "lga_code,lga_name,state_code,state_name,map2022_irs_coverage_mean,irs_pixels,"
                          "map2022_effective_treatment_mean,amt_pixels", IRS_OK if irs is None else irs),
    ):
        (data_dir / path).parent.mkdir(parents=True, exist_ok=True)
        (data_dir / path).write_text("\n".join([header, *rows]) + "\n")
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


def produce(tmp_path: Path, dhs=DHS_OK, travel=TRAVEL_OK, sae=None, irs=None):
    write_inputs(tmp_path, dhs, travel, sae, irs)
    return context.produce(BuildContext(tmp_path, "t", geography=geography()))


def test_documents_fields_and_values(tmp_path: Path) -> None:
    out = produce(tmp_path)
    assert out.dataset == "context"
    states = out.documents[context.STATES_ROUTE][()]
    assert list(states) == ["source", "states"]
    src = states["source"]
    assert src["coverage_year"] == 2018 and isinstance(src["name"], str)
    assert "not inputs to the risk score" in src["note"] and "repeat the state survey estimate" in src["note"]
    assert "irs_coverage is 0" in src["note"] and "Nasarawa" in src["note"]
    assert src["years"]["irs_coverage"] == 2022 and src["years"]["itn_use"] == 2018
    assert {a["key"] for a in src["attribution"]} >= {"map_irs_2022", "uw_sae_itn"}
    fc, na = states["states"]
    assert list(fc) == STATE_FIELDS and [fc["state_code"], na["state_code"]] == ["FC", "NA"]
    # Percent -> share; FCT row spelt "FCT Abuja " in the DHS file and in full in the travel file.
    assert fc["itn_access"] == pytest.approx(0.244)
    assert fc["effective_treatment"] == pytest.approx(0.311)
    # net use: population-weighted LGA estimates (Kuje 200 x 0.2, Bwari 300 x 0.4, bwari 100 x 0.5),
    # not the model's own state figure 0.37
    assert fc["itn_use"] == pytest.approx(210 / 600) and fc["itn_use_2024"] == pytest.approx(270 / 600)
    assert all(fc[f] is None for f in EXTRA if f != "itn_use_2024")
    assert fc["response_index"] == pytest.approx((210 / 600 + 0.311) / 2)
    assert fc["travel_minutes_to_care"] == 24.0
    assert fc["irs_coverage"] == pytest.approx(300 * 0.1 / 600)
    assert (fc["lgas"], fc["population"], fc["area_km2"]) == (3, 600, 30.0)
    # "NA" in the survey -> null, and the response index needs both parts.
    assert na["effective_treatment"] is None and na["response_index"] is None
    assert na["itn_use"] == pytest.approx(0.6) and na["travel_minutes_to_care"] == 27.9


def test_lga_documents_state_figures_and_own_net_use(tmp_path: Path) -> None:
    docs = produce(tmp_path).documents[context.LGAS_ROUTE]
    assert set(docs) == {("FC",), ("NA",)}
    fc = docs[("FC",)]
    assert list(fc) == ["source", "state_code", "state", "lgas"]
    assert (fc["state_code"], fc["state"]) == ("FC", "Federal Capital Territory")
    # Alphabetical by name, case-insensitive; equal names ordered by lga_code.
    assert [(r["lga"], r["lga_code"]) for r in fc["lgas"]] == [("Bwari", "NG015002"), ("bwari", "NG015003"), ("Kuje", "NG015001")]
    for r in fc["lgas"]:
        assert list(r) == LGA_FIELDS
        assert r["itn_access"] == pytest.approx(0.244)  # state-only source: repeated
    # net use is the LGA's own estimate, joined through the eHA code (code 3 is spelt
    # "Municipal Area Council" there, "bwari" in the OCHA names)
    got = {r["lga_code"]: (r["itn_use"], r["itn_use_low_90"], r["itn_use_high_90"], r["itn_use_2024"], r["irs_coverage"])
           for r in fc["lgas"]}
    assert got == {"NG015001": (0.2, 0.1, 0.3, 0.3, 0.0), "NG015002": (0.4, 0.3, 0.5, 0.5, 0.1),
                   "NG015003": (0.5, 0.4, 0.6, 0.6, 0.0)}
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


def test_unmatched_lga_name_fails(tmp_path: Path) -> None:
    bad = [(n.replace("Kuje", "Kujee"), a, b) for n, a, b in SAE_VALUES]
    with pytest.raises(InputError) as info:
        produce(tmp_path, sae=sae_rows(bad))
    assert "Kujee" in info.value.reason and info.value.file.endswith(str(itn_sae.SAE_CSV))


def test_lga_without_net_use_fails(tmp_path: Path) -> None:
    rows = [r for r in sae_rows() if "Lafia" not in r or ",2024," in r]
    with pytest.raises(InputError) as info:
        produce(tmp_path, sae=rows)
    assert "NG026001" in info.value.reason


def test_lga_without_irs_fails(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        produce(tmp_path, irs=IRS_OK[:3])
    assert "NG026001" in info.value.reason and info.value.file.endswith(str(map_irs.LGA_CSV))


def test_weighted_state_figure_from_varying_lgas() -> None:
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
@pytest.mark.slow
def test_real_context(real) -> None:
    geo, out = real
    states = out.documents[context.STATES_ROUTE][()]["states"]
    assert len(states) == 37 and [s["state_code"] for s in states] == sorted(s["state_code"] for s in states)
    by = {s["state_code"]: s for s in states}
    # Values read off the 2018 L2 rows of the DHS export: Kano access 63.3 %, ACT 49.1 %.
    assert (by["KN"]["itn_access"], by["KN"]["effective_treatment"]) == (0.633, 0.491)
    # ACT is "NA" for six states in the export: those have no effective treatment nor response index.
    no_act = {c for c, s in by.items() if s["effective_treatment"] is None}
    assert no_act == {"AB", "DE", "KO", "NA", "OG", "OY"}
    assert all(by[c]["response_index"] is None for c in no_act)
    assert all(s["itn_use"] is not None and s["itn_access"] is not None for s in states)
    assert all(s["travel_minutes_to_care"] is not None for s in states)
    assert by["YO"]["travel_minutes_to_care"] == 87.5 and by["FC"]["travel_minutes_to_care"] == 24.0
    assert sum(s["population"] for s in states) == geo.lgas["population"].sum()
    lgas = out.documents[context.LGAS_ROUTE]
    assert len(lgas) == 37 and sum(len(d["lgas"]) for d in lgas.values()) == 774
    for (code,), doc in lgas.items():
        names = [(r["lga"].lower(), r["lga_code"]) for r in doc["lgas"]]
        assert names == sorted(names)
        for r in doc["lgas"]:  # state-only sources: LGA figures repeat the state estimate
            for f in ("itn_access", "effective_treatment", "travel_minutes_to_care"):
                assert r[f] == by[code][f]


@needs_data
@pytest.mark.slow
def test_real_irs_is_map_2022_zero_everywhere(real) -> None:
    _, out = real
    doc = out.documents[context.STATES_ROUTE][()]
    assert [s["irs_coverage"] for s in doc["states"]] == [0.0] * 37
    lgas = [r for d in out.documents[context.LGAS_ROUTE].values() for r in d["lgas"]]
    assert len(lgas) == 774 and all(r["irs_coverage"] == 0.0 for r in lgas)
    for d in [doc, *out.documents[context.LGAS_ROUTE].values()]:
        src = d["source"]
        assert "Malaria Atlas Project" in src["fields"]["irs_coverage"] and "2022" in src["fields"]["irs_coverage"]
        assert src["years"]["irs_coverage"] == 2022 and "Nasarawa" in src["note"]
        assert any(a["key"] == "map_irs_2022" and "CC BY 4.0" in a["licence"] for a in src["attribution"])


@needs_data
@pytest.mark.slow
def test_real_lga_net_use_varies_and_states_are_weighted_means(real) -> None:
    geo, out = real
    by = {s["state_code"]: s for s in out.documents[context.STATES_ROUTE][()]["states"]}
    for (code,), doc in out.documents[context.LGAS_ROUTE].items():
        rows = doc["lgas"]
        values = {r["itn_use"] for r in rows}
        assert len(values) > 1, code  # every state has several LGAs, each with its own estimate
        assert all(r["itn_use_low_90"] <= r["itn_use"] <= r["itn_use_high_90"] for r in rows)
        for field in ("itn_use", "itn_use_2024"):
            pop = sum(r["population"] for r in rows)
            mean = sum(r[field] * r["population"] for r in rows) / pop
            # the state figure is computed before rounding: within half a rounding step
            assert by[code][field] == pytest.approx(mean, abs=1e-4), (code, field)
        assert by[code]["itn_use_low_90"] is None and by[code]["itn_use_2024_high_90"] is None


@needs_data
@pytest.mark.slow
def test_real_lga_net_use_is_the_file_value(real) -> None:
    """Read the estimates file and the admin folder's eHA->OCHA table independently of the producer."""
    import csv

    geo, out = real
    # Values follow the eHA outline, as population and the published outline do: for the
    # two Abia and two Kaduna pairs whose OCHA names sit on the neighbouring outline
    # (geography.md) the service's crosswalk, not the name, decides.
    to_ocha = dict(zip(geo.crosswalk["eha_code"], geo.crosswalk["lga_code"], strict=True))
    lgas_csv = {r["lga_code"]: r for r in csv.DictReader((DATA_DIR / "admin" / "lgas.csv").open())}
    by_name = {(r["state_name"], r["lga_name"]): to_ocha[r["lga_code"]] for r in lgas_csv.values()}
    file_value: dict[str, float] = {}
    for r in csv.DictReader((DATA_DIR / itn_sae.SAE_CSV).open()):
        if r["Admin"] == "2" and r["Year"] == "2018":
            state, _, lga = r["Region_Name"].partition("_")
            state = "Federal Capital Territory" if state == "Abuja Federal Capital Territory" else state
            if (state, lga) in by_name:
                file_value[by_name[(state, lga)]] = float(r["Mean"])
    published = {r["lga_code"]: r["itn_use"] for d in out.documents[context.LGAS_ROUTE].values() for r in d["lgas"]}
    differ = {c: (published[c], v) for c, v in file_value.items() if published[c] != pytest.approx(v, abs=0.5e-4 + 1e-12)}
    assert len(file_value) > 700 and differ == {}
