"""DHS Program API indicator export reader: a small export in the API's JSON format fills
the interval and children tested that the assembled survey table lacks."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from pipeline.datasets.base import BuildContext
from pipeline.datasets.transmission import produce
from pipeline.errors import InputError
from pipeline.sources.dhs_api import read_dhs_api_export
from pipeline.sources.survey import read_survey_positivity
from tests.pipeline.datasets.test_transmission import make_data_dir, small_geography

STATE_CODES = {"Kano": "KN", "Lagos": "LA"}


def rec(ind: str, value, cat: str, label: str, year: int = 2018, **kw) -> dict:
    """One `Data` element as the API returns it (fields not used here included for realism)."""
    survey_type = "DHS" if year == 2018 else "MIS"
    base = {
        "DataId": 1,
        "Indicator": "Malaria prevalence according to microscopy" if ind.endswith("MSC") else "Malaria prevalence according to RDT",
        "IndicatorId": ind,
        "Value": value,
        "Precision": 1,
        "CILow": "",
        "CIHigh": "",
        "DenominatorWeighted": None,
        "DenominatorUnweighted": None,
        "CharacteristicCategory": cat,
        "CharacteristicLabel": label,
        "CharacteristicId": 1000,
        "CharacteristicOrder": 0,
        "ByVariableId": 0,
        "ByVariableLabel": "",
        "SurveyYear": year,
        "SurveyYearLabel": str(year),
        "SurveyId": f"NG{year}{survey_type}",
        "SurveyType": survey_type,
        "IsPreferred": 1,
        "IsTotal": 1 if cat == "Total" else 0,
        "RegionId": "",
        "CountryName": "Nigeria",
        "DHS_CountryCode": "NG",
        "LevelRank": None,
        "SDRID": "MLPMALCMSC",
        "IndicatorOrder": 1,
        "IndicatorType": "I",
    }
    base.update(kw)
    return base


MSC, RDT = "ML_PMAL_C_MSC", "ML_PMAL_C_RDT"

EXPORT = {
    "RecordsReturned": 10,
    "Page": 1,
    "TotalPages": 1,
    "Data": [
        rec(MSC, 22.6, "Total", "Total", CILow=20.9, CIHigh=24.4, DenominatorWeighted=10185.3, DenominatorUnweighted=10397),
        rec(MSC, 13.5, "Residence", "Urban", CILow=11.2, CIHigh=16.1, DenominatorUnweighted=3900),
        rec(MSC, 28.1, "Residence", "Rural", CILow=25.9, CIHigh=30.4, DenominatorUnweighted=6497),
        rec(MSC, 33.8, "Region", "North West", CILow=30.0, CIHigh=37.8, DenominatorUnweighted=3300, LevelRank=1),
        rec(MSC, 37.4, "Region", "..Kano", CILow=31.0, CIHigh=44.2, DenominatorUnweighted=812, LevelRank=2),
        rec(MSC, 1.8, "Region", "..Lagos", CILow="0.6", CIHigh="5.2", DenominatorUnweighted=97, LevelRank=2),
        rec(RDT, 55.0, "Region", "..Kano", CILow=48.0, CIHigh=61.0, DenominatorUnweighted=815, LevelRank=2),
        # a breakdown by age group is not an area total
        rec(MSC, 12.0, "Region", "..Kano", ByVariableId=14001, ByVariableLabel="Age 6-8 months"),
        # a non-preferred duplicate loses
        rec(MSC, 99.0, "Region", "..Kano", IsPreferred=0),
        # suppressed value: no figure, not zero
        rec(MSC, None, "Region", "..Lagos", year=2015),
        rec(MSC, 20.1, "Region", "..Lagos", year=2021, DenominatorUnweighted=140),
        # other indicators in the same export are ignored
        rec("ML_FEVT_C_ADV", 70.0, "Total", "Total"),
    ],
}


def write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data))
    return path


def test_reads_export_into_normalised_schema(tmp_path: Path) -> None:
    df = read_dhs_api_export(write(tmp_path / "x.json", EXPORT), STATE_CODES)
    assert df.columns == [
        "survey_year", "survey", "level", "area", "state_code", "test", "test_assumed", "positivity",
        "low", "high", "clusters", "children_tested", "source",
    ]
    rows = {(r["survey_year"], r["level"], r["area"], r["test"]): r for r in df.iter_rows(named=True)}
    kano = rows[(2018, "state", "Kano", "microscopy")]
    assert kano["state_code"] == "KN" and kano["survey"] == "2018 NDHS"
    assert (kano["positivity"], kano["low"], kano["high"]) == pytest.approx((0.374, 0.31, 0.442))
    assert kano["children_tested"] == 812 and kano["clusters"] is None
    assert kano["test_assumed"] is False
    lagos = rows[(2018, "state", "Lagos", "microscopy")]
    assert (lagos["low"], lagos["high"], lagos["children_tested"]) == pytest.approx((0.006, 0.052, 97))
    assert rows[(2018, "national", "Nigeria", "microscopy")]["children_tested"] == 10397  # unweighted
    assert rows[(2018, "residence", "urban", "microscopy")]["positivity"] == pytest.approx(0.135)
    assert rows[(2018, "zone", "North West", "microscopy")]["state_code"] is None
    assert rows[(2018, "state", "Kano", "RDT")]["positivity"] == pytest.approx(0.55)
    assert rows[(2021, "state", "Lagos", "microscopy")]["survey"] == "2021 NMIS"
    assert (2015, "state", "Lagos", "microscopy") not in rows
    assert df.height == 8


def test_survey_reader_dispatches_and_trend_fills(tmp_path: Path) -> None:
    d = make_data_dir(tmp_path)
    write(d / "malaria/dhs_api_positivity_u5.json", EXPORT)
    df = read_survey_positivity(d, STATE_CODES)
    assert df["source"].str.starts_with("DHS Program API").all()
    doc = produce(BuildContext(data_dir=d, updated_at="x", geography=small_geography())).documents[
        "/v1/transmission/states"
    ][()]
    nat = doc["national"]["survey_trend"]
    assert [e["survey_year"] for e in nat] == [2018]
    assert (nat[0]["low"], nat[0]["high"], nat[0]["children_tested"], nat[0]["small_sample"]) == (0.209, 0.244, 10397, False)
    assert (nat[0]["urban"], nat[0]["rural"]) == (0.135, 0.281)
    kn, la = (s["survey_trend"] for s in doc["states"])
    assert [(e["survey_year"], e["positivity"], e["children_tested"]) for e in kn] == [(2018, 0.374, 812)]
    assert [(e["survey_year"], e["small_sample"]) for e in la] == [(2018, True), (2021, False)]
    assert all(e["clusters"] is None for e in kn + la + nat)


def test_rejects_bad_exports(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="Data"):
        read_dhs_api_export(write(tmp_path / "a.json", {"data": []}), STATE_CODES)
    bad_area = {"Data": [rec(MSC, 10.0, "Region", "..Kanoo")]}
    with pytest.raises(InputError, match="not a state or zone"):
        read_dhs_api_export(write(tmp_path / "b.json", bad_area), STATE_CODES)
    bad_value = {"Data": [rec(MSC, "ten", "Total", "Total")]}
    with pytest.raises(InputError, match="Value"):
        read_dhs_api_export(write(tmp_path / "c.json", bad_value), STATE_CODES)
    too_big = {"Data": [rec(MSC, 140.0, "Total", "Total")]}
    with pytest.raises(InputError, match="between 0 and 100"):
        read_dhs_api_export(write(tmp_path / "d.json", too_big), STATE_CODES)
    (tmp_path / "e.json").write_text("{not json")
    with pytest.raises(InputError, match="not JSON"):
        read_dhs_api_export(tmp_path / "e.json", STATE_CODES)
