"""Bad input files end in one message naming the file and the row, never a traceback.

Each case goes through the reader and through `malaria-risk build` (the operator's view):
exit code 1, `Error: <file>, row N: reason` on stderr, no traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.errors import InputError
from pipeline.sources.rainfall import CHIRPS_MONTHLY, read_state_chirps_monthly
from pipeline.sources.survey import SURVEY_CSV, read_survey_csv
from tests.paths import DATA_DIR

CHIRPS_HEADER = b"pcode,state_name,month,rainfall_mm,lta_mm,anomaly_pct\n"


def chirps(tmp_path: Path, body: bytes) -> Path:
    (tmp_path / "rainfall").mkdir(exist_ok=True)
    (tmp_path / CHIRPS_MONTHLY).write_bytes(CHIRPS_HEADER + body)
    return tmp_path


@pytest.mark.parametrize(("body", "row", "words"), [
    (b"NG020,Kano,2026-01,1.0,1,1\nNG020,Kano,2026-02,heavy,1,1\n", 3, "rainfall_mm 'heavy' is not a number"),
    (b"NG020,Kano,2026-01,1.0,1,1\nNG020,Kano,2026-02,,1,1\n", 3, "rainfall_mm is missing"),
    (b"NG020,Kano,2026-01,1.0,1,1\nNG020,Kano,2026-02,-4,1,1\n", 3, "negative rainfall_mm"),
    (b"NG020,Kano,2026-01,1.0,1,1\nNG020,Kano,2026-02,1\xe9.0,1,1\n", 3, "not UTF-8: byte 0xe9"),
])
def test_chirps_monthly_rainfall_bad_values_name_the_row(tmp_path: Path, body: bytes, row: int, words: str):
    d = chirps(tmp_path, body)
    with pytest.raises(InputError) as e:
        read_state_chirps_monthly(d)
    assert e.value.row == row and words in e.value.reason
    assert e.value.file.endswith(CHIRPS_MONTHLY)


def data_with(tmp_path: Path, replaced: str, content: bytes) -> Path:
    """The real data directory, file by file as symlinks, with one file replaced by `content`."""
    out = tmp_path / "data"
    for src in DATA_DIR.rglob("*"):
        rel = src.relative_to(DATA_DIR)
        if src.is_dir():
            (out / rel).mkdir(parents=True, exist_ok=True)
        elif rel.as_posix() != replaced:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).symlink_to(src)
    (out / replaced).write_bytes(content)
    return out


def chirps_with_bad_byte() -> bytes:
    lines = (DATA_DIR / CHIRPS_MONTHLY).read_bytes().split(b"\n")
    fields = lines[41].split(b",")
    fields[3] = fields[3] + b"\xff"
    lines[41] = b",".join(fields)
    return b"\n".join(lines)


@pytest.mark.slow
@pytest.mark.skipif(not (DATA_DIR / CHIRPS_MONTHLY).exists(), reason="real data not present")
@pytest.mark.parametrize(("replaced", "content", "message"), [
    (CHIRPS_MONTHLY, None, f"{CHIRPS_MONTHLY}, row 42: not UTF-8: byte 0xff"),
    (CHIRPS_MONTHLY, b"text", f"{CHIRPS_MONTHLY}, row 42: rainfall_mm"),
    (SURVEY_CSV, b"", f"{SURVEY_CSV}: the file is empty"),
])
def test_build_names_the_bad_file_without_a_traceback(tmp_path: Path, replaced: str, content: bytes | None,
                                                      message: str):
    if content is None:
        content = chirps_with_bad_byte()
    elif content == b"text":
        lines = (DATA_DIR / CHIRPS_MONTHLY).read_bytes().split(b"\n")
        fields = lines[41].split(b",")
        fields[3] = b"n/a"
        lines[41] = b",".join(fields)
        content = b"\n".join(lines)
    data = data_with(tmp_path, replaced, content)
    result = CliRunner().invoke(main, ["build", "--data-dir", str(data), "--out", str(tmp_path / "b"), "--quiet"])
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "b" / "current").exists()


@pytest.mark.parametrize(("content", "words"), [
    (b"", "the file is empty"),
    (b"\n\n", "the file is empty"),
    (b"survey,year,level,area,zone,test,positivity_pct,ci_low_pct,ci_high_pct,n_clusters,n_tested,weighting,source,notes\n",
     "no data rows"),
])
def test_empty_survey_csv_is_named(tmp_path: Path, content: bytes, words: str):
    path = tmp_path / SURVEY_CSV
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(InputError) as e:
        read_survey_csv(path, {"Kano": "KN"})
    assert words in e.value.reason and e.value.file == str(path)


def _survey_lines() -> list[bytes]:
    return (DATA_DIR / SURVEY_CSV).read_bytes().splitlines()


def _cut_at(fraction: float, mid_row: bool) -> bytes:
    """The real survey file cut as an interrupted copy leaves it: at a line end, or inside a row
    (after its third field, so the row is visibly short)."""
    data = (DATA_DIR / SURVEY_CSV).read_bytes()
    cut = data.rfind(b"\n", 0, int(len(data) * fraction)) + 1
    if mid_row:
        for _ in range(3):
            cut = data.index(b",", cut) + 1
    return data[:cut]


def _duplicated(conflicting: bool) -> bytes:
    lines = _survey_lines()
    row = lines[120]
    if conflicting:  # the same state, round, test and source with another value
        f = row.split(b",")
        f[6] = b"12.3"
        row = b",".join(f)
    return b"\n".join([*lines[:200], row, *lines[200:]]) + b"\n"


def _extra_column() -> bytes:
    lines = _survey_lines()
    return b"\n".join([lines[0] + b",weight"] + [ln + b",1" for ln in lines[1:]]) + b"\n"


@pytest.mark.slow
@pytest.mark.skipif(not (DATA_DIR / SURVEY_CSV).exists(), reason="real data not present")
@pytest.mark.parametrize(("make", "words"), [
    (lambda: _cut_at(0.6, mid_row=True), "fields where the header has 14"),
    (lambda: _cut_at(0.6, mid_row=False), "round has no row for"),
    (lambda: _duplicated(conflicting=False), "repeats row 121"),
    (lambda: _duplicated(conflicting=True), "repeats row 121"),
    (_extra_column, "unknown column(s) 'weight'"),
], ids=["cut-mid-row", "cut-at-line-end", "duplicate", "conflicting", "extra-column"])
def test_a_damaged_survey_file_fails_the_build_naming_file_and_row(tmp_path: Path, make, words: str):
    """Each of these used to build and publish with survey rounds silently missing or doubled."""
    data = data_with(tmp_path, SURVEY_CSV, make())
    out = tmp_path / "b"
    result = CliRunner().invoke(main, ["build", "--data-dir", str(data), "--out", str(out), "--quiet"])
    assert result.exit_code == 1, result.output
    assert f"{SURVEY_CSV}" in result.output and words in result.output
    if words != "unknown column(s) 'weight'":
        assert ", row " in result.output
    assert "Traceback" not in result.output
    assert not (out / "current").exists() and not list((out / "releases").glob("*")) if out.exists() else True


def test_survey_rounds_outside_the_four_and_documented_gaps(tmp_path: Path):
    header = "survey,year,level,area,zone,test,positivity_pct,ci_low_pct,ci_high_pct,n_clusters,n_tested,n_tested_kind,source,note"
    codes = {"Kano": "KN", "Lagos": "LA", "Borno": "BO"}
    path = tmp_path / SURVEY_CSV
    path.parent.mkdir(parents=True)

    def read(*rows: str):
        path.write_text("\n".join([header, *rows]) + "\n")
        return read_survey_csv(path, codes)

    # 2015 lacks Borno and Lagos in the sources (malaria SOURCES.md §1): allowed
    assert read("2015 NMIS,2015,state,Kano,NW,RDT,40,,,,,,f,").height == 1
    with pytest.raises(InputError, match="the 2018 round has no row for Borno, Lagos") as e:
        read("2018 NDHS,2018,state,Kano,NW,RDT,40,,,,,,f,")
    assert e.value.row == 2
    with pytest.raises(InputError, match="not a survey round") as e:
        read("2019 NDHS,2019,national,Nigeria,,RDT,40,,,,,,f,")
    assert e.value.row == 2
    # the same state and test from two sources is a documented fill-in, not a duplicate
    rows = [f"2018 NDHS,2018,state,{s},X,RDT,40,,,,,,f,"for s in codes] + ["2018 NDHS,2018,state,kano ,NW,RDT,41,,,,,,g,"]
    assert read(*rows).height == 4
    with pytest.raises(InputError, match="repeats row 2") as e:
        read(*rows, "2018 NDHS,2018,state,KANO,NW,RDT,45,,,,,,f,")
    assert e.value.row == 6


def _chirps_edit(edit: str) -> tuple[bytes, int]:
    """The real CHIRPS monthly file with one real mistake; (bytes, the line the build must name)."""
    lines = (DATA_DIR / CHIRPS_MONTHLY).read_text().split("\n")
    if lines[-1] == "":
        lines.pop()
    if edit == "duplicate":
        lines.append(lines[-1])
        return ("\n".join(lines) + "\n").encode(), len(lines)
    i = next(n for n, line in enumerate(lines) if line.startswith("NG020,Kano,2025-08,"))
    if edit == "huge":
        fields = lines[i].split(",")
        fields[3] = "99999999"
        lines[i] = ",".join(fields)
        return ("\n".join(lines) + "\n").encode(), i + 1
    # one state lacks the newest month: it would have moved last_estimated back to 2026-05
    j = next(n for n, line in enumerate(lines) if line.startswith("NG015,") and ",2026-06," in line)
    del lines[j]
    return ("\n".join(lines) + "\n").encode(), 0


@pytest.mark.slow
@pytest.mark.skipif(not (DATA_DIR / CHIRPS_MONTHLY).exists(), reason="real data not present")
@pytest.mark.parametrize(("edit", "words"), [
    ("duplicate", "duplicate state month"),
    ("huge", "99,999,999.0 mm is outside its plausible band"),
    ("missing", "2026-06 is recorded for 36 of 37 states: NG015 lack it"),
])
def test_build_refuses_real_mistakes_with_file_and_row(tmp_path: Path, edit: str, words: str):
    content, row = _chirps_edit(edit)
    data = data_with(tmp_path, CHIRPS_MONTHLY, content)
    result = CliRunner().invoke(main, ["build", "--data-dir", str(data), "--out", str(tmp_path / "b"), "--quiet"])
    assert result.exit_code == 1, result.output
    assert CHIRPS_MONTHLY in result.output and words in result.output
    if row:
        assert f", row {row}: " in result.output
    else:
        assert ", row " in result.output
    # nothing built: no release, no object; only fits of inputs that passed their checks may be cached
    assert sorted(p.name for p in (tmp_path / "b").glob("*")) in ([], ["cache"])
