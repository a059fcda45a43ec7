"""Rainfall readers (CHIRPS CSV and the WFP HDX format), LGA name matching, downscaling."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import InputError
from pipeline.geography import Geography
from pipeline.model.downscale import lga_climatology, lga_monthly, lga_ratios
from pipeline.sources.names import hbhi_lga_codes, normalise
from pipeline.sources.rainfall import (
    read_lga_climatology,
    read_recorded_rainfall,
    read_state_chirps_monthly,
    read_wfp_subnational,
)
from tests.paths import DATA_DIR, needs_data
from tests.small_geography import small_geo

# --- LGA names -----------------------------------------------------------------------


def test_hbhi_names_with_state_aliases_and_numbered_duplicates():
    geo = small_geo()
    hbhi = pl.DataFrame(
        {
            "lga": ["Fagge", "Nasarawa1", "Takali", "Nasarawa2", "Obi2"],
            "state": ["Kano", "Kano", "Kano", "Nasarawa", "Nasarawa "],
        }
    )
    out = hbhi_lga_codes(hbhi, geo)
    assert dict(zip(out["lga"], out["lga_code"], strict=True)) == {
        "Fagge": "NG020001",
        "Nasarawa1": "NG020002",  # numbered duplicate -> the Kano one
        "Takali": "NG020003",  # alias for Takai
        "Nasarawa2": "NG026001",
        "Obi2": "NG026002",
    }


def test_hbhi_names_without_state_use_unique_names_only():
    geo = small_geo()
    out = hbhi_lga_codes(pl.DataFrame({"lga": ["Fagge", "Obi2", "Nasarawa1"]}), geo)
    assert out.sort("lga")["lga_code"].to_list() == ["NG020001", "NG020002", "NG026002"]
    # the bare shared name is ambiguous without a state: it must be reported, not guessed
    with pytest.raises(InputError, match="Nasarawa"):
        hbhi_lga_codes(pl.DataFrame({"lga": ["Nasarawa"]}), geo)


def test_hbhi_unmatched_names_are_listed():
    geo = small_geo()
    with pytest.raises(InputError) as e:
        hbhi_lga_codes(pl.DataFrame({"lga": ["Fagge", "Atlantis", "Utopia"], "state": ["Kano"] * 3}), geo)
    assert "Atlantis" in str(e.value) and "Utopia" in str(e.value)


def test_hbhi_alias_contradicting_state_is_an_error():
    with pytest.raises(InputError):
        hbhi_lga_codes(pl.DataFrame({"lga": ["Obi2"], "state": ["Kano"]}), small_geo())


def test_hbhi_point_in_other_state_is_an_error():
    geo = small_geo()
    ok = pl.DataFrame({"lga": ["Fagge"], "state": ["Kano"], "lat": [0.5], "lon": [1.5]})  # neighbour: tolerated
    assert hbhi_lga_codes(ok, geo)["lga_code"].to_list() == ["NG020001"]
    bad = pl.DataFrame({"lga": ["Fagge"], "state": ["Kano"], "lat": [0.5], "lon": [11.5]})
    with pytest.raises(InputError, match="other state"):
        hbhi_lga_codes(bad, geo)


def test_hbhi_two_names_on_one_lga_is_an_error():
    with pytest.raises(InputError, match="several names"):
        hbhi_lga_codes(pl.DataFrame({"lga": ["Takai", "Takali"], "state": ["Kano", "Kano"]}), small_geo())


def test_normalise_ignores_case_accents_and_punctuation():
    assert normalise("Abua/Odual") == normalise("abua-odual") == "abuaodual"
    assert normalise("Ìbàdàn North") == "ibadannorth"


# --- downscaling -----------------------------------------------------------------------


def _lga_clim(values: dict[str, list[float]]) -> pl.DataFrame:
    rows = [(code, m + 1, v) for code, vs in values.items() for m, v in enumerate(vs)]
    return pl.DataFrame(rows, schema={"lga_code": pl.Utf8, "month": pl.Int64, "rainfall_mm": pl.Float64}, orient="row")


def _state_clim(values: dict[str, list[float]]) -> pl.DataFrame:
    rows = [(p, m + 1, v) for p, vs in values.items() for m, v in enumerate(vs)]
    return pl.DataFrame(rows, schema={"ocha_pcode": pl.Utf8, "month": pl.Int64, "rainfall_mm": pl.Float64}, orient="row")


def _area_mean(df: pl.DataFrame, geo: Geography, by: list[str]) -> pl.DataFrame:
    return (
        df.join(geo.lgas.select("lga_code", "state_code", "area_km2"), on="lga_code", suffix="_g")
        .group_by(["state_code", *by])
        .agg(((pl.col("rainfall_mm") * pl.col("area_km2")).sum() / pl.col("area_km2").sum()).alias("mean"))
    )


clim_values = st.lists(st.floats(0, 600, allow_nan=False), min_size=12, max_size=12)


@settings(max_examples=40, deadline=None)
@given(a=clim_values, b=clim_values, c=clim_values, d=clim_values, e=clim_values, s1=clim_values, s2=clim_values)
def test_downscaled_climatology_area_mean_equals_state(a, b, c, d, e, s1, s2):
    geo = small_geo()
    lc = _lga_clim({"NG020001": a, "NG020002": b, "NG020003": c, "NG026001": d, "NG026002": e})
    sc = _state_clim({"NG020": s1, "NG026": s2})
    out = lga_climatology(geo, sc, lc)
    assert out.height == 5 * 12 and out["rainfall_mm"].min() >= 0
    means = _area_mean(out, geo, ["month"]).join(
        sc.join(geo.states.select("ocha_pcode", "state_code"), on="ocha_pcode"), on=["state_code", "month"]
    )
    assert (means["mean"] - means["rainfall_mm"]).abs().max() < 1e-6 * (1 + means["rainfall_mm"].max())


def test_downscaling_keeps_relative_shape_not_level():
    geo = small_geo()
    # GSOD says Takai is twice as wet as Fagge and Nasarawa(KN) in every month but runs 50% low overall
    lc = _lga_clim({"NG020001": [10.0] * 12, "NG020002": [10.0] * 12, "NG020003": [20.0] * 12,
                    "NG026001": [5.0] * 12, "NG026002": [5.0] * 12})
    sc = _state_clim({"NG020": [100.0] * 12, "NG026": [50.0] * 12})
    out = lga_climatology(geo, sc, lc).filter(pl.col("month") == 7)
    v = dict(zip(out["lga_code"], out["rainfall_mm"], strict=True))
    assert v["NG020003"] == pytest.approx(2 * v["NG020001"])
    # area weights 5, 10, 15: (5x + 10x + 15*2x)/30 = 100 -> x = 66.67
    assert v["NG020001"] == pytest.approx(2000 / 30)
    assert v["NG026001"] == pytest.approx(50.0) and v["NG026002"] == pytest.approx(50.0)


def test_dry_state_month_gets_uniform_ratio_and_monthly_applies_ratio():
    geo = small_geo()
    lc = _lga_clim({k: [0.0] + [10.0 * (i + 1)] * 11 for i, k in enumerate(["NG020001", "NG020002", "NG020003", "NG026001", "NG026002"])})
    r = lga_ratios(geo, lc)
    assert r.filter(pl.col("month") == 1)["ratio"].to_list() == [1.0] * 5
    sm = pl.DataFrame({"ocha_pcode": ["NG020", "NG020"], "period": ["2020-01", "2020-02"], "rainfall_mm": [3.0, 90.0], "provisional": [False, True]})
    out = lga_monthly(geo, sm, r)
    assert set(out["lga_code"]) == {"NG020001", "NG020002", "NG020003"}
    feb = _area_mean(out.filter(pl.col("period") == "2020-02"), geo, [])
    assert feb["mean"][0] == pytest.approx(90.0)
    assert out.filter(pl.col("period") == "2020-02")["provisional"].all()
    assert out.filter(pl.col("period") == "2020-01")["rainfall_mm"].to_list() == [3.0, 3.0, 3.0]


def test_missing_lga_climatology_is_an_input_error():
    geo = small_geo()
    lc = _lga_clim({"NG020001": [1.0] * 12})
    with pytest.raises(InputError, match="without a 12-month climatology"):
        lga_ratios(geo, lc)


# --- WFP HDX subnational format ---------------------------------------------------------

WFP_HEADER = "date,adm_level,adm_id,PCODE,n_pixels,rfh,rfh_avg,r1h,r1h_avg,r3h,r3h_avg,rfq,r1q,r3q,version"
WFP_HXL = "#date,#adm_level,#adm_id,#adm_pcode,#indicator+n_pixels,#indicator+rfh,#indicator+rfh_avg,#indicator+r1h,#indicator+r1h_avg,#indicator+r3h,#indicator+r3h_avg,#indicator+rfq,#indicator+r1q,#indicator+r3q,#status"


def _wfp_row(date: str, level: int, pcode: str, rfh: float, version: str) -> str:
    return f"{date},{level},{100 + level},{pcode},120,{rfh},{rfh},{rfh * 3},{rfh * 3},{rfh * 9},{rfh * 9},100,100,100,{version}"


def write_wfp(path: Path) -> Path:
    rows = [WFP_HEADER, WFP_HXL]
    for pcode, level in (("NG020", 1), ("NG020001", 2)):
        # 2024-06: three final dekads (complete, recorded)
        rows += [_wfp_row(f"2024-06-{d}", level, pcode, 10.0, "final") for d in ("01", "11", "21")]
        # 2024-07: final, final, prelim (recorded, provisional)
        rows += [_wfp_row("2024-07-01", level, pcode, 20.0, "final"), _wfp_row("2024-07-11", level, pcode, 20.0, "final"),
                 _wfp_row("2024-07-21", level, pcode, 21.5, "prelim")]
        # 2024-08: prelim, prelim, forecast (NOT recorded: the forecast dekad is not data)
        rows += [_wfp_row("2024-08-01", level, pcode, 30.0, "prelim"), _wfp_row("2024-08-11", level, pcode, 30.0, "prelim"),
                 _wfp_row("2024-08-21", level, pcode, 30.0, "forecast")]
        # 2024-09: only one dekad so far
        rows.append(_wfp_row("2024-09-01", level, pcode, 5.0, "final"))
    path.write_text("\n".join(rows) + "\n")
    return path


def test_wfp_reader_complete_months_prelim_flag_and_no_forecast(tmp_path):
    state, lga = read_wfp_subnational(write_wfp(tmp_path / "nga-rainfall-subnat-full.csv"))
    assert state["period"].to_list() == ["2024-06", "2024-07"]
    assert state["rainfall_mm"].to_list() == pytest.approx([30.0, 61.5])
    assert state["provisional"].to_list() == [False, True]
    assert lga is not None and lga["pcode"].unique().to_list() == ["NG020001"]
    assert lga["period"].to_list() == ["2024-06", "2024-07"]


def test_recorded_rainfall_prefers_wfp_file(tmp_path):
    (tmp_path / "rainfall").mkdir()
    write_wfp(tmp_path / "rainfall" / "nga-rainfall-subnat-full.csv")
    rec = read_recorded_rainfall(tmp_path)
    assert rec.file.endswith("nga-rainfall-subnat-full.csv")
    assert rec.state.columns[:2] == ["ocha_pcode", "period"] and rec.lga is not None
    assert "CC BY-IGO" in rec.source


def test_wfp_unknown_version_rejected(tmp_path):
    p = tmp_path / "w.csv"
    p.write_text("\n".join([WFP_HEADER, WFP_HXL, _wfp_row("2024-06-01", 1, "NG020", 1.0, "draft")]) + "\n")
    with pytest.raises(InputError, match="version"):
        read_wfp_subnational(p)


def test_chirps_csv_fixture_flags_trailing_months(tmp_path):
    (tmp_path / "rainfall").mkdir()
    lines = ["pcode,state_name,month,rainfall_mm,lta_mm,anomaly_pct"]
    for m in range(1, 6):
        lines.append(f"NG020,Kano,2026-{m:02d},{m}.0,1.0,100.0")
    (tmp_path / "rainfall" / "nga_state_chirps_monthly_1981_2026.csv").write_text("\n".join(lines) + "\n")
    df = read_state_chirps_monthly(tmp_path)
    assert df["provisional"].to_list() == [False, False, False, True, True]
    rec = read_recorded_rainfall(tmp_path)
    assert rec.lga is None and rec.state.height == 5


def test_chirps_csv_bad_month_names_row(tmp_path):
    (tmp_path / "rainfall").mkdir()
    (tmp_path / "rainfall" / "nga_state_chirps_monthly_1981_2026.csv").write_text(
        "pcode,state_name,month,rainfall_mm,lta_mm,anomaly_pct\nNG020,Kano,2026-01,1.0,1,1\nNG020,Kano,2026-13,1.0,1,1\n"
    )
    with pytest.raises(InputError) as e:
        read_state_chirps_monthly(tmp_path)
    assert e.value.row == 3


# --- real data ------------------------------------------------------------------------


@needs_data("rainfall")
def test_real_lga_climatology_maps_all_774_one_to_one():
    geography = pytest.importorskip("pipeline.geography")
    geo = geography.load_geography(DATA_DIR)
    lc = read_lga_climatology(DATA_DIR)
    mapping = hbhi_lga_codes(lc, geo)
    assert mapping.height == 774 and mapping["lga_code"].n_unique() == 774
    assert set(mapping["lga_code"]) == set(geo.lgas["lga_code"])


def test_dekadal_reader_flags_the_last_two_complete_months_and_a_trailing_partial_one(tmp_path: Path) -> None:
    from pipeline.sources.rainfall import CHIRPS_DEKADAL, read_state_chirps_dekadal

    days = [f"2025-{m:02d}-{d:02d}" for m in range(1, 13) for d in (1, 11, 21)] + ["2026-01-01"]
    lines = ["pcode,state_name,dekad_start,rfh_mm,rfh_avg_mm,rfq_pct"]
    lines += [f"NG001,Abia,{d},{i}.5,10,{i * 10}" for i, d in enumerate(days)]
    path = tmp_path / CHIRPS_DEKADAL
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")
    df = read_state_chirps_dekadal(tmp_path)
    flagged = df.filter(pl.col("provisional"))["dekad_start"].dt.strftime("%Y-%m").unique().sort().to_list()
    assert flagged == ["2025-11", "2025-12", "2026-01"]
    assert df.height == 37 and df["rain_mm"][3] == 3.5 and df["lta_mm"][0] == 10.0


def test_dekadal_reader_names_the_row_of_a_bad_dekad(tmp_path: Path) -> None:
    from pipeline.errors import InputError
    from pipeline.sources.rainfall import CHIRPS_DEKADAL, read_state_chirps_dekadal

    path = tmp_path / CHIRPS_DEKADAL
    path.parent.mkdir(parents=True)
    path.write_text("pcode,state_name,dekad_start,rfh_mm,rfh_avg_mm,rfq_pct\nNG001,Abia,2025-01-01,1,1,100\n"
                    "NG001,Abia,2025-01-05,1,1,100\n")
    with pytest.raises(InputError, match="row 3|line 3|:3"):
        read_state_chirps_dekadal(tmp_path)
