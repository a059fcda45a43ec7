"""Survey positivity reader: normalised schema, state-name spellings, dispatch."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest

from pipeline.errors import InputError
from pipeline.sources.survey import SCHEMA, read_survey_positivity
from tests.paths import DATA_DIR, needs_data

HEADER = "survey,year,level,area,zone,test,positivity_pct,ci_low_pct,ci_high_pct,n_clusters,n_tested,n_tested_kind,source,note"
CODES = {"Kano": "KN", "Federal Capital Territory": "FC", "Nasarawa": "NA", "Lagos": "LA"}


def write(tmp_path: Path, *rows: str) -> Path:
    (tmp_path / "malaria").mkdir(exist_ok=True)
    (tmp_path / "malaria" / "survey_positivity_u5.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    return tmp_path


def test_schema_shares_and_state_spellings(tmp_path):
    d = write(
        tmp_path,
        '2010 NMIS,2010,national,Nigeria,,RDT (assumed),42,,,,,,"page: news, text",note',
        "2018 NDHS,2018,national,Nigeria,,RDT,35.5,33.9,37.1,,10185,weighted,page: paper,",
        "2021 NMIS,2021,state,FCT Abuja,North Central,microscopy,12.5,,,,,,file.csv,",
        "2021 NMIS,2021,state,Nasarawa ,North Central,RDT,40,,,,,,file.csv,",
        "2021 NMIS,2021,state,FCT,North Central,RDT,20,,,,,,file.csv,",
        "2021 NMIS,2021,residence,urban,,microscopy,10.5,,,,,,file.csv,",
    )
    df = read_survey_positivity(d, CODES, states=["FC", "NA"])
    assert dict(df.schema) == SCHEMA
    nat10 = df.filter(pl.col("survey_year") == 2010).row(0, named=True)
    assert nat10["test"] == "RDT" and nat10["test_assumed"] is True and nat10["positivity"] == pytest.approx(0.42)
    assert nat10["state_code"] is None and nat10["source"] == "page: news, text"
    nat18 = df.filter(pl.col("survey_year") == 2018).row(0, named=True)
    assert (nat18["low"], nat18["high"]) == (pytest.approx(0.339), pytest.approx(0.371))
    # 10185 is a survey-weighted total, not a head count: it never reaches children_tested
    assert nat18["children_tested"] is None
    states = df.filter(pl.col("level") == "state")
    assert sorted(states["state_code"]) == ["FC", "FC", "NA"]
    assert df.filter(pl.col("level") == "residence")["state_code"].to_list() == [None]


def test_unknown_state_is_reported_with_row(tmp_path):
    d = write(tmp_path, "2021 NMIS,2021,state,Kano,NW,RDT,40,,,,,,f,", "2021 NMIS,2021,state,Atlantis,NW,RDT,40,,,,,,f,")
    with pytest.raises(InputError) as e:
        read_survey_positivity(d, CODES)
    assert e.value.row == 3 and "Atlantis" in str(e.value)


@pytest.mark.parametrize("bad", ["140", "-1", "x"])
def test_positivity_out_of_range(tmp_path, bad):
    d = write(tmp_path, f"2021 NMIS,2021,state,Kano,NW,RDT,{bad},,,,,,f,")
    with pytest.raises(InputError, match="positivity"):
        read_survey_positivity(d, CODES)


def test_dhs_api_export_takes_precedence(tmp_path):
    d = write(tmp_path, "2021 NMIS,2021,state,Kano,NW,RDT,40,,,,,,f,")
    record = {"IndicatorId": "ML_PMAL_C_MSC", "CharacteristicCategory": "Total", "CharacteristicLabel": "Total",
              "Value": 22.3, "SurveyYear": 2021, "SurveyType": "MIS", "SurveyId": "NG2021MIS"}
    (d / "malaria" / "dhs_api_positivity_u5.json").write_bytes(orjson.dumps({"Data": [record]}))
    out = read_survey_positivity(d, CODES)
    # the export's one national row, not the CSV's Kano row
    assert out.height == 1 and out["level"][0] == "national" and out["positivity"][0] == 0.223
    assert out["source"][0].startswith("DHS Program API")


@needs_data("malaria")
def test_real_survey_rounds():
    states = pl.read_csv(DATA_DIR / "admin" / "states.csv")
    codes = dict(zip(states["state_name"], states["state_code"], strict=True))
    df = read_survey_csv_real = read_survey_positivity(DATA_DIR, codes)
    assert read_survey_csv_real is df
    st = df.filter(pl.col("level") == "state")
    # SOURCES.md §1: 2010 has no state values; 2018 and 2021 cover all 37 with microscopy
    assert 2010 not in st["survey_year"].to_list()
    for year in (2018, 2021):
        assert st.filter((pl.col("survey_year") == year) & (pl.col("test") == "microscopy"))["state_code"].n_unique() == 37
    assert df["positivity"].is_between(0, 1).all()


def test_each_round_must_cover_the_geographys_states(tmp_path):
    """A round with state rows covers every state of the geography: a file cut at a line end
    reads cleanly, and this is what gives it away."""
    d = write(tmp_path, "2021 NMIS,2021,state,Kano,NW,RDT,40,,,,,,f,", "2021 NMIS,2021,state,Lagos,SW,RDT,4,,,,,,f,")
    assert read_survey_positivity(d, CODES, states=["KN", "LA"]).height == 2
    with pytest.raises(InputError, match="the 2021 round has no row for Nasarawa") as e:
        read_survey_positivity(d, CODES, states=["KN", "LA", "NA"])
    assert e.value.row == 3
