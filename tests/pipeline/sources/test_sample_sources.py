"""Readers of the third-pass sources: MAP IRS per LGA, UW net-use estimates, eHA names,
HBHI LGA microscopy counts, NDHS 2018 cluster counts, urban clusters."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.errors import InputError
from pipeline.sources import (
    eha_names,
    hbhi_microscopy,
    itn_sae,
    map_irs,
    ndhs_clusters,
    urban_clusters,
)
from tests.paths import DATA_DIR

IRS_HEADER = "lga_code,lga_name,state_code,state_name,map2022_irs_coverage_mean,irs_pixels,map2022_effective_treatment_mean,amt_pixels"
SAE_HEADER = "ISO3,Country,Year,Survey,Indicator,Admin,Region_Name,Mean,Median,Lower_CI,Upper_CI,Width_90_CI,Coefficient_of_Variation"


def write(tmp_path: Path, header: str, *rows: str) -> Path:
    p = tmp_path / "f.csv"
    p.write_text("\n".join([header, *rows]) + "\n")
    return p


def sae(year: int, admin: int, name: str, mean: float, low: float, high: float, ind: str = "ML_NETC_C_ITN") -> str:
    return f"NGA,Nigeria,{year},NG{year}DHS,{ind},{admin},{name},{mean},{mean},{low},{high},0.1,0.1"


def test_irs_reads_and_checks(tmp_path: Path) -> None:
    df = map_irs.read_lga_irs(write(tmp_path, IRS_HEADER, "1001,Aba North,AB,Abia,0.0,60,0.47,60",
                                    "1002,Aba South,AB,Abia,0.25,3,0.47,3"))
    assert df.select("eha_code", "irs_coverage", "pixels").rows() == [("1001", 0.0, 60), ("1002", 0.25, 3)]
    for bad, reason, row in (("1002,X,AB,Abia,1.5,3,0.4,3", "outside 0..1", 3),
                             ("1002,X,AB,Abia,0.0,0,0.4,0", "irs_pixels", 3),
                             ("1001,X,AB,Abia,0.0,4,0.4,4", "more than once", 3),
                             ("1002,X,AB,Abia,n/a,4,0.4,4", "not a number", 3)):
        with pytest.raises(InputError) as e:
            map_irs.read_lga_irs(write(tmp_path, IRS_HEADER, "1001,Aba North,AB,Abia,0.0,60,0.47,60", bad))
        assert reason in e.value.reason and e.value.row == row


def test_sae_splits_state_prefix_and_checks(tmp_path: Path) -> None:
    rows = [sae(y, 1, "Abuja Federal Capital Territory", 0.3, 0.2, 0.4) for y in (2018, 2024)]
    rows += [sae(y, 2, "Abuja Federal Capital Territory_Municipal Area Council", 0.5, 0.4, 0.6) for y in (2018, 2024)]
    rows += [sae(2018, 1, "Cross River", 0.1, 0.05, 0.2), sae(2018, 2, "Cross River_Obanliku", 0.2, 0.1, 0.3)]
    df = itn_sae.read_itn_sae(write(tmp_path, SAE_HEADER, *rows))
    lga = df.filter(df["lga"] == "Municipal Area Council")
    assert lga["state"].to_list() == ["Abuja Federal Capital Territory"] * 2
    assert df.filter(df["lga"] == "Obanliku")["state"].to_list() == ["Cross River"]
    assert df.filter(df["admin"] == 1)["lga"].null_count() == 3
    bad_cases = [
        (sae(2018, 2, "Atlantis_X", 0.2, 0.1, 0.3), "does not start with a state"),
        (sae(2018, 2, "Cross River_Y", 0.5, 0.6, 0.7), "outside its interval"),
        (sae(2018, 2, "Cross River_Y", 1.2, 0.6, 1.3), "not a share"),
        (sae(2019, 2, "Cross River_Y", 0.5, 0.4, 0.6), "Year"),
        (sae(2018, 2, "Cross River_Obanliku", 0.2, 0.1, 0.3), "twice"),
        (sae(2018, 2, "Cross River_Y", 0.2, 0.1, 0.3, ind="ML_OTHER"), "indicator"),
    ]
    for bad, reason in bad_cases:
        with pytest.raises(InputError) as e:
            itn_sae.read_itn_sae(write(tmp_path, SAE_HEADER, *rows, bad))
        assert reason in e.value.reason and e.value.row == len(rows) + 2


def test_sae_needs_both_years(tmp_path: Path) -> None:
    with pytest.raises(InputError) as e:
        itn_sae.read_itn_sae(write(tmp_path, SAE_HEADER, sae(2018, 1, "Kano", 0.3, 0.2, 0.4)))
    assert "2024" in e.value.reason


def test_eha_names(tmp_path: Path) -> None:
    df = eha_names.read_eha_names(write(tmp_path, "lga_code,lga_name,state_code,other", "1,Kuje,FC,x", "2,Bwari,FC,y"))
    assert df.select("eha_code", "eha_name", "state_code").rows() == [("1", "Kuje", "FC"), ("2", "Bwari", "FC")]
    with pytest.raises(InputError) as e:
        eha_names.read_eha_names(write(tmp_path, "lga_code,lga_name,state_code", "1,Kuje,FC", "1,Bwari,FC"))
    assert e.value.row == 3


def test_hbhi_children(tmp_path: Path) -> None:
    df = hbhi_microscopy.read_lga_children(write(tmp_path, "LGA,p_test,se,n,State", "Aba North,0.0,0.0,7,Abia",
                                                 "Abaji,0.2,0.09,16,Federal Capital Territory"))
    assert df.select("lga", "state", "children").rows() == [("Aba North", "Abia", 7), ("Abaji", "Federal Capital Territory", 16)]
    with pytest.raises(InputError) as e:
        hbhi_microscopy.read_lga_children(write(tmp_path, "LGA,p_test,se,n,State", "Aba North,0.0,0.0,7.5,Abia"))
    assert "n is not" in e.value.reason and e.value.row == 2


def test_ndhs_clusters(tmp_path: Path) -> None:
    h = "admin1,clusters_with_child_12_23m,urban_clusters,rural_clusters"
    df = ndhs_clusters.read_state_clusters(write(tmp_path, h, "ABIA,33,7,26", "FCT ABUJA,32,20,12"))
    assert df.select("state", "clusters").rows() == [("ABIA", 33), ("FCT ABUJA", 32)]
    with pytest.raises(InputError) as e:
        ndhs_clusters.read_state_clusters(write(tmp_path, h, "ABIA,33,7,25"))
    assert "urban_clusters + rural_clusters" in e.value.reason


def test_urban_clusters_keep_na_as_null(tmp_path: Path) -> None:
    h = "\"\",v001,dhs_year,shstate,child_6_59_tested_malaria,positives"
    df = urban_clusters.read_urban_clusters(write(tmp_path, h, '"1",8,2010,benue,12,3', '"2",9,2018,kano,NA,NA'))
    assert df.select("survey_year", "cluster", "state", "children").rows() == [(2010, 8, "benue", 12), (2018, 9, "kano", None)]
    for bad, reason in (('"3",8,2010,kano,4,1', "twice"), ('"3",10,2012,kano,4,1', "dhs_year"),
                        ('"3",10,2010,kano,4.5,1', "whole number")):
        with pytest.raises(InputError) as e:
            urban_clusters.read_urban_clusters(write(tmp_path, h, '"1",8,2010,benue,12,3', bad))
        assert reason in e.value.reason and e.value.row == 3


needs_data = pytest.mark.skipif(not (DATA_DIR / itn_sae.SAE_CSV).is_file(), reason="real data not present")


@needs_data
@pytest.mark.slow
def test_real_files_read() -> None:
    irs = map_irs.read_lga_irs(DATA_DIR / map_irs.LGA_CSV)
    assert irs.height == 774 and irs["irs_coverage"].max() == 0.0
    s = itn_sae.read_itn_sae(DATA_DIR / itn_sae.SAE_CSV)
    assert s.group_by("year", "admin").len().sort("year", "admin")["len"].to_list() == [37, 774, 37, 774]
    assert hbhi_microscopy.read_lga_children(DATA_DIR / hbhi_microscopy.LGA_CSV)["children"].sum() == 8118
    assert ndhs_clusters.read_state_clusters(DATA_DIR / ndhs_clusters.CLUSTERS_CSV)["clusters"].sum() == 1324
    u = urban_clusters.read_urban_clusters(DATA_DIR / urban_clusters.CLUSTERS_CSV)
    # SOURCES.md: 2010 292/1,400, 2015 238/1,977, 2018 504/3,419 children tested in urban clusters
    got = dict(u.group_by("survey_year").agg(pl.col("children").sum()).rows())
    assert got == {2010: 1400, 2015: 1977, 2018: 3419}
