"""Input rules (pipeline/sources/checks.py): each real mistake fails with the file and the row."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.errors import InputError
from pipeline.sources.checks import (
    check_chirps_file,
    check_rainfall_file,
    check_wfp_file,
    plausible_upper,
)
from pipeline.sources.rainfall import CHIRPS_MONTHLY, read_recorded_rainfall
from tests.paths import DATA_DIR, linked_data, needs_data
from tests.rainfall_files import LGAS, STATES, wfp_file, wfp_lines, wfp_row
from tests.small_geography import small_geo


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def line_of(lines: list[str], needle: str) -> int:
    """1-based line number of the first line containing `needle`."""
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def test_a_sound_file_passes_with_its_window_and_flags(tmp_path: Path):
    report = check_wfp_file(wfp_file(tmp_path / "w.csv", lgas=LGAS))
    assert (report.first, report.last, report.states, report.lgas) == ("2014-01", "2020-06", 3, 4)
    assert report.months == 78
    # prelim comes from the version field: the last two dekads are prelim -> only 2020-06
    assert report.provisional == ("2020-06",)


def test_provisional_follows_the_version_field_not_the_position(tmp_path: Path):
    lines = wfp_lines(prelim=0)
    i = line_of(lines, "2019-03-11,1,101,NG026")
    lines[i - 1] = lines[i - 1].replace(",final", ",prelim")
    report = check_wfp_file(write(tmp_path / "w.csv", lines))
    assert report.provisional == ("2019-03",)
    rec = pl.concat([read_recorded_rainfall_from(tmp_path / "w.csv")])
    assert sorted(rec.filter(pl.col("provisional"))["period"].unique()) == ["2019-03"]


def read_recorded_rainfall_from(path: Path) -> pl.DataFrame:
    data = path.parent / "data"
    (data / "rainfall").mkdir(parents=True, exist_ok=True)
    (data / "rainfall" / "nga-rainfall-subnat-full.csv").write_bytes(path.read_bytes())
    return read_recorded_rainfall(data).state


def test_duplicate_row_names_the_second_row(tmp_path: Path):
    lines = wfp_lines()
    i = line_of(lines, "2017-08-11,1,101,NG020")
    lines.insert(i + 5, lines[i - 1])
    with pytest.raises(InputError) as e:
        check_wfp_file(write(tmp_path / "w.csv", lines))
    assert e.value.row == i + 6 and "duplicate dekad" in e.value.reason and f"row {i}" in e.value.reason
    assert "NG020" in e.value.reason


def test_a_month_present_for_one_state_only_is_refused(tmp_path: Path):
    # the newest month recorded for NG020 alone: it would have moved last_estimated
    lines = wfp_lines(last="2020-06", forecast=0)
    lines += [wfp_row(f"2020-07-{d}", 1, "NG020", 5.0, "prelim") for d in ("01", "11", "21")]
    with pytest.raises(InputError) as e:
        check_wfp_file(write(tmp_path / "w.csv", lines))
    assert "2020-07 is recorded for 1 of 3 states" in e.value.reason and "NG026" in e.value.reason
    assert e.value.row is not None and "2020-07" in lines[e.value.row - 1]


def test_a_state_missing_a_dekad_of_the_newest_month_is_named(tmp_path: Path):
    lines = wfp_lines(prelim=0, forecast=0)
    i = line_of(lines, "2020-06-21,1,101,NG030")
    del lines[i - 1]
    with pytest.raises(InputError) as e:
        check_wfp_file(write(tmp_path / "w.csv", lines))
    assert "NG030 lack it (it has 2 of 3 dekads)" in e.value.reason
    assert "2020-06" in lines[e.value.row - 1] and "NG030" in lines[e.value.row - 1]


def test_a_gap_in_the_months_is_refused(tmp_path: Path):
    lines = [ln for ln in wfp_lines() if not ln.startswith("2018-04")]
    with pytest.raises(InputError) as e:
        check_wfp_file(write(tmp_path / "w.csv", lines))
    assert "complete 2018-04" in e.value.reason and "contiguous" in e.value.reason
    assert lines[e.value.row - 1].startswith("2018-05")


def test_every_state_and_lga_of_the_geography_is_required(tmp_path: Path):
    geo = small_geo()  # states NG020, NG026; LGAs NG020001-3, NG026001-2
    lgas = {"NG020": ["NG020001", "NG020002", "NG020003"], "NG026": ["NG026001"]}
    with pytest.raises(InputError) as e:
        check_wfp_file(wfp_file(tmp_path / "w.csv", states=["NG020", "NG026"], lgas=lgas), geo)
    assert "2014-01 is recorded for 4 of 5 LGAs: NG026002 lack it" in e.value.reason
    with pytest.raises(InputError) as e:
        check_wfp_file(wfp_file(tmp_path / "w.csv", states=["NG020"]), geo)
    assert "1 of 2 states: NG026" in e.value.reason
    with pytest.raises(InputError) as e:
        check_wfp_file(wfp_file(tmp_path / "w.csv", states=["NG020", "NG026", "NG099"]), geo)
    assert "unknown state p-code 'NG099'" in e.value.reason and e.value.row is not None


def set_field(lines: list[str], start: str, index: int, value: str) -> int:
    """Set one comma-separated field of the first line holding `start` (in place); its 1-based row number."""
    row = line_of(lines, start)
    fields = lines[row - 1].split(",")
    fields[index] = value
    lines[row - 1] = ",".join(fields)
    return row


def test_a_value_outside_its_band_is_refused_with_its_row(tmp_path: Path):
    lines = wfp_lines()
    i = set_field(lines, "2019-08-11,1,101,NG026", 5, "99999999")
    with pytest.raises(InputError) as e:
        check_wfp_file(write(tmp_path / "w.csv", lines))
    assert e.value.row == i and "NG026 2019-08" in e.value.reason and "plausible band" in e.value.reason


def test_the_band_is_the_other_years_record_plus_twice_the_wettest_median():
    monthly = pl.DataFrame({
        "pcode": ["A"] * 7 + ["A"],
        "period": [f"{y}-08" for y in range(2014, 2021)] + ["2014-01"],
        "rainfall_mm": [100.0, 120.0, 90.0, 110.0, 130.0, 105.0, 400.0, 1.0],
        "row": list(range(2, 10)),
    })
    banded = plausible_upper(monthly)
    aug = dict(zip(banded["period"], banded["upper"], strict=False))
    # wettest calendar month median: August, 110; the 2020 outlier's own record is the others' 130
    assert aug["2020-08"] == pytest.approx(130 + 2 * 110)
    assert aug["2018-08"] == pytest.approx(400 + 2 * 110)


def test_chirps_csv_rules_and_its_own_version_column(tmp_path: Path):
    rows = ["pcode,state_name,month,rainfall_mm,lta_mm,anomaly_pct,version"]
    for y in range(2014, 2021):
        for m in range(1, 13):
            for s in STATES:
                version = "prelim" if (y, m) == (2020, 12) else "final"
                rows.append(f"{s},X,{y}-{m:02d},{10 + m * (y % 3 + 1)}.0,1,1,{version}")
    path = write(tmp_path / "c.csv", rows)
    report = check_chirps_file(path)
    assert (report.first, report.last, report.provisional) == ("2014-01", "2020-12", ("2020-12",))
    rows.append(rows[5])
    with pytest.raises(InputError) as e:
        check_rainfall_file(write(tmp_path / "c.csv", rows))
    assert "duplicate state month" in e.value.reason and e.value.row == len(rows)


@needs_data("rainfall")
def test_real_series_passes_and_a_keying_error_fails(tmp_path: Path):
    path = DATA_DIR / CHIRPS_MONTHLY
    report = check_rainfall_file(path)
    assert (report.first, report.last, report.states) == ("1981-01", "2026-06", 37)
    lines = path.read_text().splitlines()
    # the wettest month on record relative to its own history (Osun, October 2024) passes ...
    osun = line_of(lines, "NG030,Osun,2024-10,")
    assert float(lines[osun - 1].split(",")[3]) > 500
    # ... and 99,999,999 mm in an ordinary month fails, naming its row
    j = set_field(lines, "NG020,Kano,2025-08,", 3, "99999999")
    with pytest.raises(InputError) as e:
        check_rainfall_file(write(tmp_path / "c.csv", lines))
    assert e.value.row == j and "NG020 2025-08" in e.value.reason


@needs_data("admin", "rainfall", "malaria")
def test_data_check_command_on_the_real_directory_and_a_broken_copy(tmp_path: Path):
    from click.testing import CliRunner

    from pipeline.cli import main

    ok = CliRunner().invoke(main, ["data", "check", "--data-dir", str(DATA_DIR)])
    assert ok.exit_code == 0, ok.output
    assert "ok: 37 states, 774 LGAs" in ok.output and "1981-01..2026-06" in ok.output
    data = linked_data(tmp_path / "data", CHIRPS_MONTHLY)
    lines = (DATA_DIR / CHIRPS_MONTHLY).read_text().splitlines()
    lines.append(lines[-1])  # the newest row twice
    (data / CHIRPS_MONTHLY).write_text("\n".join(lines) + "\n")
    bad = CliRunner().invoke(main, ["data", "check", "--data-dir", str(data)])
    assert bad.exit_code == 1 and f"row {len(lines)}: duplicate state month" in bad.output
    assert "Traceback" not in bad.output
