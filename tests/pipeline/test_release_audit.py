"""The release audit (pipeline/release/audit.py): a restricted series leaves no trace in a release,
however rescaled, drawn or averaged.

The first tests build their own restricted tables and a small release holding each kind of leak
(a series over its mean in JSON, a profile drawn upside down in SVG, a long CSV table, a zipped
Parquet cross-section) next to clean arrays, so the audit is shown to find each leak and nothing
else. The last ones run on the real data: a leak made from the real series is found, and the
real build holds none.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest

from pipeline.release.audit import (
    LGA_FILE,
    References,
    audit_release,
    references_from_tables,
    restricted_references,
)
from tests.paths import DATA_DIR, data_marks

LGAS = ("NG900001", "NG900002", "NG900003", *(f"NG9001{i:02d}" for i in range(12)))


def synthetic_tables(seed: int = 1) -> pl.DataFrame:
    """Fifteen LGAs of one state, 48 months each: a seasonal wave of its own phase, a trend, noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, code in enumerate(LGAS):
        phase, level = rng.uniform(0, 2 * np.pi), rng.uniform(200, 2000)
        for t in range(48):
            cases = level * (1 + 0.4 * np.sin(2 * np.pi * t / 12 + phase)) * (1 + 0.004 * t) \
                    * rng.lognormal(0, 0.12)
            rows.append({"lga_code": code, "state_code": "ZZ", "year": str(2020 + t // 12),
                         "month": str(t % 12 + 1), "confirmed_uncomplicated": f"{cases:.0f}",
                         "malaria_cases_total": f"{cases * 1.1 + k:.0f}", "test_positivity_pct": "70"})
    return pl.DataFrame(rows)


@pytest.fixture(scope="module")
def table() -> pl.DataFrame:
    return synthetic_tables()


@pytest.fixture(scope="module")
def refs(table: pl.DataFrame) -> References:
    return references_from_tables(table, None)


def _series(table: pl.DataFrame, code: str) -> np.ndarray:
    return table.filter(pl.col("lga_code") == code)["confirmed_uncomplicated"].cast(pl.Float64).to_numpy()


def _profile(values: np.ndarray) -> np.ndarray:
    return values.reshape(4, 12).mean(axis=0)


def _polyline(values: np.ndarray) -> str:
    lo, hi = values.min(), values.max()
    pts = " ".join(f"{30 + 10 * i:.1f},{120 - 100 * (v - lo) / (hi - lo):.1f}" for i, v in enumerate(values))
    return f'<polyline fill="none" stroke="#111" points="{pts}"/>'


def _leaky_release(root: Path, table: pl.DataFrame) -> None:
    root.mkdir(parents=True)
    a = _series(table, LGAS[0])
    b = _series(table, LGAS[1])
    rng = np.random.default_rng(7)
    # a series over its mean, two decimals, in a report-like document
    (root / "report.json").write_bytes(orjson.dumps(
        {"areas": [{"name": "one", "cases_over_mean": [round(float(v), 2) for v in a / a.mean()]}]}))
    # a calendar-month profile drawn upside down, beside a clean curve, in an SVG
    clean = 0.5 + 0.3 * np.cos(np.arange(12))
    (root / "fig.svg").write_text(f'<svg xmlns="http://www.w3.org/2000/svg">{_polyline(_profile(b))}'
                                  f'{_polyline(clean)}</svg>')
    # a long table: LGA, period, value rescaled (only months 2021-01..2022-12 of one LGA)
    sub = table.filter(pl.col("lga_code") == LGAS[2]).with_columns(
        (pl.col("year") + "-" + pl.col("month").str.zfill(2)).alias("period"),
        (pl.col("confirmed_uncomplicated").cast(pl.Float64) / 1000).alias("index"))
    sub.filter(pl.col("year").is_in(["2021", "2022"])).select("lga_code", "period", "index") \
        .write_csv(root / "long.csv")
    # one month's value of every LGA (a cross-section), zipped as Parquet
    month = table.filter(pl.col("year") == "2022", pl.col("month") == "8").select(
        "lga_code", (pl.col("confirmed_uncomplicated").cast(pl.Float64) * 3 + 5).alias("v"))
    buf = io.BytesIO()
    month.write_parquet(buf)
    with zipfile.ZipFile(root / "bundle.zip", "w") as z:
        z.writestr("cross.parquet", buf.getvalue())
    # clean arrays: noise of the same length, a model-like score for an LGA with no series, month numbers
    (root / "clean.json").write_bytes(orjson.dumps({
        "noise": rng.normal(size=48).tolist(), "lga_code": "NG123456", "score": np.sin(np.arange(48) / 2).tolist(),
        "months": [{"period": f"{2020 + t // 12}-{t % 12 + 1:02d}", "month": t % 12 + 1, "v": float(rng.normal())}
                   for t in range(48)],
        "lgas": [{"lga_code": c, "population": float(rng.uniform(1e4, 1e6))} for c in LGAS]}))


def test_each_kind_of_leak_is_found_and_clean_arrays_are_not(tmp_path: Path, table: pl.DataFrame,
                                                             refs: References) -> None:
    _leaky_release(tmp_path / "r", table)
    found = audit_release(tmp_path / "r", refs)
    by_file = {f.file: f for f in found}
    assert set(by_file) == {"report.json", "fig.svg", "long.csv", "bundle.zip!cross.parquet"}, found
    assert by_file["report.json"].reference.startswith(f"lga_code {LGAS[0]} confirmed_uncomplicated")
    assert by_file["long.csv"].length == 24 and "same months" in by_file["long.csv"].reference
    assert "2022-08 (across the same 15 LGAs)" in by_file["bundle.zip!cross.parquet"].reference
    assert all(f.correlation > 0.97 for f in found)
    svg = [f for f in found if f.file == "fig.svg"]
    assert len(svg) == 1 and "profile" in svg[0].reference  # the clean curve beside it is not flagged


def test_a_model_curve_of_the_same_area_that_does_not_reproduce_the_rows_passes(tmp_path: Path, table: pl.DataFrame,
                                                                               refs: References) -> None:
    """The same LGA's curve is allowed when it is not the series: a smooth wave with the series'
    own phase and period, but none of its month-to-month detail, over the same months."""
    a = _series(table, LGAS[0])
    t = np.arange(48)
    best = max(abs(np.corrcoef(a, np.sin(2 * np.pi * t / 12 + p))[0, 1]) for p in np.linspace(0, 2 * np.pi, 64))
    assert best < 0.97  # the premise: the recorded series is more than a sine wave
    wave = np.sin(2 * np.pi * t / 12 + np.linspace(0, 2 * np.pi, 64)[
        int(np.argmax([abs(np.corrcoef(a, np.sin(2 * np.pi * t / 12 + p))[0, 1]) for p in np.linspace(0, 2 * np.pi, 64)]))])
    root = tmp_path / "ok"
    root.mkdir()
    (root / "h.json").write_bytes(orjson.dumps({"lga_code": LGAS[0], "months": [
        {"period": f"{2020 + k // 12}-{k % 12 + 1:02d}", "score": float(w)} for k, w in enumerate(wave)]}))
    assert audit_release(root, refs) == []
    (root / "h.json").write_bytes(orjson.dumps({"lga_code": LGAS[0], "months": [
        {"period": f"{2020 + k // 12}-{k % 12 + 1:02d}", "score": float(v) / 7} for k, v in enumerate(a)]}))
    assert [f.file for f in audit_release(root, refs)] == ["h.json"]


@pytest.mark.parametrize("shift", [1, 5, 30])
def test_a_drawn_stretch_of_the_series_is_found_at_any_offset(tmp_path: Path, table: pl.DataFrame, refs: References,
                                                              shift: int) -> None:
    """A line of unknown months (an SVG) is compared at every alignment with the series."""
    a = _series(table, LGAS[3])[shift:shift + 18]
    (tmp_path / "f.svg").write_text(f"<svg>{_polyline(a)}</svg>")
    found = audit_release(tmp_path, refs)
    assert [f.file for f in found] == ["f.svg"] and found[0].length == 18


def test_a_line_under_an_area_title_is_compared_with_that_area(tmp_path: Path, table: pl.DataFrame,
                                                               refs: References) -> None:
    """A figure's title says whose line it is: another area's recorded profile drawn under the title
    of an area is not that area's rows (compared with that area's only), but its own profile is found,
    and the same line under no title is compared with every area."""
    from dataclasses import replace

    named = replace(refs, area_names={"first lga (zz)": LGAS[0], "second lga (zz)": LGAS[1]})
    b = _profile(_series(table, LGAS[1]))
    title = '<text font-weight="bold">{}</text>'
    (tmp_path / "a.svg").write_text(f"<svg>{title.format('First LGA (ZZ)')}{_polyline(b)}</svg>")
    assert audit_release(tmp_path, named) == []
    (tmp_path / "a.svg").write_text(f"<svg>{title.format('Second LGA (ZZ)')}{_polyline(b)}</svg>")
    assert [f.where for f in audit_release(tmp_path, named)] == [f"<polyline #2> points (under the title of {LGAS[1]}) y"]
    (tmp_path / "a.svg").write_text(f"<svg>{title.format('Legend')}{_polyline(b)}</svg>")
    assert len(audit_release(tmp_path, named)) == 1


# --- real data ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_refs() -> References:
    return restricted_references(DATA_DIR)


class TestRealData:
    pytestmark = data_marks(LGA_FILE)

    def test_references_cover_every_recorded_lga_and_state(self, real_refs: References) -> None:
        lgas = {code for code, st in real_refs.areas if code != st}
        states = {code for code, st in real_refs.areas if code == st}
        assert len(lgas) == 121 and states == {"AK", "BA", "BE", "EB", "KE", "NA"}
        assert all(code.startswith("NG") for code in lgas)  # the release's LGA codes, not the file's

    def test_a_leak_made_from_the_real_series_is_found(self, tmp_path: Path, real_refs: References) -> None:
        raw = pl.read_csv(DATA_DIR / LGA_FILE, infer_schema_length=0)
        state = raw.filter(pl.col("state_code") == "KE").with_columns(
            pl.col("year", "month").cast(pl.Int64)).group_by("year", "month").agg(
            pl.col("malaria_cases_total").cast(pl.Float64).sum()).sort("year", "month")["malaria_cases_total"]
        v = state.to_numpy()
        (tmp_path / "v.json").write_bytes(orjson.dumps({"x": [round(float(x), 2) for x in v / v.mean()]}))
        found = audit_release(tmp_path, real_refs)
        assert [f.file for f in found] == ["v.json"] and found[0].correlation > 0.99

    def test_lga_microscopy_published_per_lga_is_found(self, tmp_path: Path, real_refs: References) -> None:
        """The NDHS 2018 LGA microscopy values may not be published as LGA estimates: a table of one
        (rescaled) value per LGA is a finding, a shuffled one is not."""
        values = real_refs.lga_values["NDHS 2018 microscopy positivity per LGA (HBHI)"]
        codes = sorted(values)
        pl.DataFrame({"lga_code": codes, "estimate": [100 * values[c] for c in codes]}).write_csv(tmp_path / "a.csv")
        shuffled = np.random.default_rng(3).permutation([values[c] for c in codes])
        pl.DataFrame({"lga_code": codes, "estimate": shuffled}).write_csv(tmp_path / "b.csv")
        found = audit_release(tmp_path, real_refs)
        assert [f.file for f in found] == ["a.csv"] and "microscopy" in found[0].reference

    def test_no_file_of_the_real_release_matches_a_restricted_series(self, real_build: Path,
                                                                     real_refs: References) -> None:
        release = (real_build / "current").resolve()
        found = audit_release(release, real_refs)
        assert found == [], "restricted series in the release:\n" + "\n".join(
            f"{f.file} {f.where}: r={f.correlation} vs {f.reference}" for f in found[:40])
