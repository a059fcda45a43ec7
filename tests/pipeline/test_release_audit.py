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
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest

from pipeline.release.audit import (
    LGA_FILE,
    References,
    audit,
    audit_release,
    file_runs,
    held_out_seasons,
    references_from_tables,
    restricted_references,
)
from pipeline.sources.dated_cases import read_raw_dated
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


def _html_table(codes: list[str], values: list[float]) -> str:
    rows = "".join(f'<tr data-code="{c}"><td>{c}</td><td>{v:.4f}</td></tr>' for c, v in zip(codes, values, strict=True))
    return f"<html><body><table><thead><tr><th>Area</th><th>Score</th></tr></thead><tbody>{rows}</tbody></table></body></html>"


def test_an_html_table_of_named_rows_is_a_cross_section(tmp_path: Path, table: pl.DataFrame, refs: References) -> None:
    """Rows naming different areas (the map's printed tables): each column is compared area by area, as a
    CSV column beside `lga_code` is. A monotone column (a ranking) matches no stretch of any series; one
    month of every LGA is found; an area's months in rows that all name it are still a sequence."""
    root = tmp_path / "r"
    root.mkdir()
    rng = np.random.default_rng(3)
    ranked = sorted(rng.uniform(0.05, 0.4, len(LGAS)), reverse=True)  # highest first, like a risk table
    (root / "ranked.html").write_text(_html_table(list(LGAS), ranked))
    month = table.filter(pl.col("year") == "2021", pl.col("month") == "7")
    (root / "month.html").write_text(_html_table(month["lga_code"].to_list(),
                                                 (month["confirmed_uncomplicated"].cast(pl.Float64) / 7).to_list()))
    a = _series(table, LGAS[4])[12:36]
    (root / "one_area.html").write_text(_html_table([LGAS[4]] * len(a), list(a / 100)))
    found = {f.file: f for f in audit_release(root, refs)}
    assert set(found) == {"month.html", "one_area.html"}, found
    assert "2021-07 (across the same 15 LGAs)" in found["month.html"].reference
    assert found["one_area.html"].reference.startswith(f"lga_code {LGAS[4]} confirmed_uncomplicated")
    # the same ranked column without row names is compared as a sequence (the rule before)
    runs = [r for _, r in file_runs("x.html", _html_table(list(LGAS), ranked).replace(" data-code=", " data-x=").encode())]
    assert runs and all(not r.keys for r in runs)


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


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    return abs(float(np.corrcoef(a, b)[0, 1]))


def _two_harmonics(p: np.ndarray) -> np.ndarray:
    """A smooth model-like season: the profile's annual and semi-annual harmonics, peak 1, 3 decimals."""
    m = np.arange(12)
    basis = np.vstack([np.ones(12), *[f(2 * np.pi * h * m / 12) for h in (1, 2) for f in (np.cos, np.sin)]])
    fit = np.linalg.lstsq(basis.T, p, rcond=None)[0] @ basis
    return np.round(fit / fit.max(), 3)


def test_a_calendar_month_index_is_compared_with_profiles_not_with_single_years(tmp_path: Path, table: pl.DataFrame,
                                                                                 refs: References) -> None:
    """January to December of no year is not over the same months as January to December of 2022:
    a seasonal index is compared with calendar-month profiles only; the same 12 values under a key
    that says nothing about its months are compared with single years too."""
    years = [(code, y, _series(table, code)[12 * y:12 * y + 12]) for code in LGAS for y in range(4)]
    profiles = [_profile(_series(table, code)) for code in LGAS]
    year_only = [(c, y, v) for c, y, v in years if max(_corr(v, p) for p in profiles) < 0.9]
    assert year_only  # the premise: some single year resembles no calendar-month profile
    _, y, v = year_only[0]
    (tmp_path / "a.json").write_bytes(orjson.dumps({"season": {"seasonal_index": [round(float(x / v.max()), 3) for x in v]}}))
    assert audit_release(tmp_path, refs) == []
    (tmp_path / "a.json").write_bytes(orjson.dumps({"values": [round(float(x / v.max()), 3) for x in v]}))
    found = audit_release(tmp_path, refs)
    assert len(found) == 1 and found[0].reference.endswith(f"months of {2020 + y}")
    # a recorded profile under a calendar key is still found
    p = profiles[4]
    (tmp_path / "a.json").write_bytes(orjson.dumps({"published": [round(float(x / p.max()), 3) for x in p]}))
    assert [f.where for f in audit_release(tmp_path, refs)] == ["$.published"]


def _declaring_release(root: Path, index: np.ndarray, declared: bool, extra: dict | None = None) -> None:
    """A release whose transmission document gives LGAS[0] the season `index`, the same curve drawn in
    a season figure and listed as a validation profile, with or without the declaration."""
    (root / "v1" / "transmission" / "lgas").mkdir(parents=True)
    (root / "docs" / "figures").mkdir(parents=True)
    curve = [float(x) for x in index]
    (root / "v1" / "transmission" / "lgas" / "ZZ.json").write_bytes(orjson.dumps({"state_code": "ZZ", "lgas": [
        {"lga_code": LGAS[0], "seasonal_index": curve, "fitted_without_own_series": declared}]}))
    (root / "docs" / "figures" / "season_lgas.svg").write_text(f"<svg>{_polyline(index)}</svg>")
    (root / "docs" / "validation.json").write_bytes(orjson.dumps({"profiles": {"lgas": [
        {"lga_code": LGAS[0], "out_of_sample": curve}], **(extra or {})}}))


def test_a_season_proven_fitted_without_its_state_is_independent(tmp_path: Path, table: pl.DataFrame,
                                                                  refs: References) -> None:
    """A good model's smooth season correlates above 0.97 with the recorded profile by its merit. When
    the release declares it fitted without the state and the audit's own held-out fit is exactly it,
    every copy of it (JSON, the drawn line, the validation list) is independent, and listed as such."""
    p = _profile(_series(table, LGAS[0]))
    h = _two_harmonics(p)
    assert _corr(h, p) > 0.97  # the premise: the audit alone would flag it
    _declaring_release(tmp_path / "r", h, declared=True)
    result = audit(tmp_path / "r", refs, held_out={LGAS[0]: h})
    assert result.findings == []
    assert {f.file for f in result.independent} == {"v1/transmission/lgas/ZZ.json", "docs/figures/season_lgas.svg",
                                                    "docs/validation.json"}
    assert all("independent (fitted without ZZ)" in f.reference for f in result.independent)
    # without held-out fits (nothing proven) the same release is three findings
    assert {f.file for f in audit_release(tmp_path / "r", refs)} == {
        "v1/transmission/lgas/ZZ.json", "docs/figures/season_lgas.svg", "docs/validation.json"}


def test_a_false_declaration_and_leaks_beside_a_proven_season_are_findings(tmp_path: Path, table: pl.DataFrame,
                                                                           refs: References) -> None:
    p = _profile(_series(table, LGAS[0]))
    h = _two_harmonics(p)
    # declared, but the season fitted without the state is another curve: the declaration is false
    other = np.round(np.roll(h, 1) * 0.5 + h * 0.5, 3)
    _declaring_release(tmp_path / "false", h, declared=True)
    found = audit_release(tmp_path / "false", refs, held_out={LGAS[0]: other})
    assert {f.file for f in found} == {"v1/transmission/lgas/ZZ.json", "docs/figures/season_lgas.svg",
                                       "docs/validation.json"}
    assert any(f.where == f"{LGAS[0]} season.fitted_without_own_series" and "declared fitted without ZZ" in
               f.reference for f in found)
    # not declared: the proven fit does not help
    _declaring_release(tmp_path / "undeclared", h, declared=False)
    assert len(audit_release(tmp_path / "undeclared", refs, held_out={LGAS[0]: h})) == 3
    # declared and proven, but the recorded profile and a rescaled series published beside it are found
    a = _series(table, LGAS[0])
    _declaring_release(tmp_path / "leaks", h, declared=True, extra={
        "recorded": [round(float(x / p.max()), 3) for x in p],
        "cases_over_mean": [round(float(x), 2) for x in a / a.mean()]})
    result = audit(tmp_path / "leaks", refs, held_out={LGAS[0]: h})
    assert sorted(f.where for f in result.findings) == ["$.profiles.cases_over_mean", "$.profiles.recorded"]
    assert len(result.independent) == 3


# --- real data ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_refs() -> References:
    return restricted_references(DATA_DIR)


@pytest.fixture(scope="module")
def real_geo() -> Any:
    """One geography for the module's real-data tests, so the season fit they each need is made once
    (pipeline.datasets.transmission.season_model memoises it per geography): fitted here, not read
    from the build, since the tests compare it with what the release declares."""
    from pipeline.geography import load_geography

    return load_geography(DATA_DIR)


class TestRealData:
    pytestmark = data_marks(LGA_FILE)

    def test_references_cover_every_recorded_lga_and_state(self, real_refs: References) -> None:
        lgas = {code for code, st in real_refs.areas if code != st}
        states = {code for code, st in real_refs.areas if code == st}
        raw = read_raw_dated(DATA_DIR)
        assert raw is not None
        assert len(lgas) == raw["lga_code"].n_unique() and states == set(raw["state_code"].unique())
        assert {"AK", "BA", "BE", "EB", "KE", "NA", "OY"} <= states  # every state file of the folder is read
        assert all(code.startswith("NG") for code in lgas)  # the release's LGA codes, not the file's

    def test_a_leak_made_from_the_real_series_is_found(self, tmp_path: Path, real_refs: References) -> None:
        raw = read_raw_dated(DATA_DIR)
        assert raw is not None
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
                                                                     real_refs: References, real_geo: Any) -> None:
        release = (real_build / "current").resolve()
        result = audit(release, real_refs, held_out_seasons(DATA_DIR, real_geo))
        assert result.findings == [], "restricted series in the release:\n" + "\n".join(
            f"{f.file} {f.where}: r={f.correlation} vs {f.reference}" for f in result.findings[:40])
        # the seasons of the dated states resemble their recorded profiles by the model's merit, fitted
        # without them: they are reported, never silently passed
        assert result.independent and all("independent (fitted without" in f.reference for f in result.independent)

    def test_each_declared_season_is_the_fit_without_its_state(self, real_build: Path, real_geo: Any) -> None:
        """Every season the release declares fitted without its state's series equals, to the published
        rounding, a fit made here from the fitting table with every series of that state (its dated LGAs
        and every archetype group covering any of its population) removed and the pooling constants chosen
        without it, published as model 5 publishes it (3-month smoothed, peak 1; at its state's season where
        `season_level` is "state"); every LGA and the state of the seven dated states is declared, no other
        area is. Holds while the published model-5 method is model 4 (the release's `release_method`)."""
        from pipeline.datasets.transmission import area_data, dated_data_weight, season_model
        from pipeline.model import season_cv
        from pipeline.model import season_harmonics as H
        from pipeline.sources.inputs import Inputs

        release = (real_build / "current").resolve()
        geo = real_geo
        sm = season_model(DATA_DIR, geo)
        assert sm.fit is not None and sm.fit.dated is not None
        series = sm.fit.series
        areas = area_data(geo, sm.lga_codes, sm.lga_rain)
        units = season_cv.harmonic_units(series, areas, dated_data_weight(Inputs(DATA_DIR, geo).dated_cases))
        std = H.Standardiser.of(areas.x)
        dated_states = sorted(sm.fit.dated.state_codes)
        raw = read_raw_dated(DATA_DIR)
        assert raw is not None and dated_states == sorted(raw["state_code"].unique())
        states_doc = orjson.loads((release / "v1/transmission/states.json").read_bytes())
        declared_states = {s["state_code"] for s in states_doc["states"] if s["season"]["fitted_without_own_series"]}
        assert declared_states == set(dated_states)
        assert states_doc["national"]["season"]["fitted_without_own_series"] is False
        pop = geo.lgas.sort("lga_code")["population"].cast(pl.Float64).to_numpy()
        if "model_7" in states_doc["method"]["check"] or "model_6" in states_doc["method"]["check"]:
            self._model_6_declared_seasons(release, states_doc, sm, geo, dated_states, pop)
            return
        assert states_doc["method"]["check"]["model_5"]["release_method"] == "model_4"
        for s in dated_states:
            mine = areas.state == s
            keep = np.ones(len(series.names), dtype=bool)
            keep &= np.array(series.state) != s  # its dated LGAs
            keep &= series.weights[:, mine].sum(axis=1) == 0  # every archetype covering any of its people
            assert not (keep & (np.array(series.kind) == "lga") & (np.array(series.state) == s)).any()
            rk, sh = H.choose_pooling(units, std, keep)
            fit = H.fit(units, std, keep, rk, sh)
            own = H.profiles(fit.predict(areas.x[mine], areas.xy[mine]))
            own = own / own.mean(axis=1, keepdims=True)
            state_prof = (pop[mine] / pop[mine].sum()) @ own
            doc = orjson.loads((release / f"v1/transmission/lgas/{s}.json").read_bytes())
            published = {r["lga_code"]: r for r in doc["lgas"]}
            codes = np.array(sm.lga_codes)[mine]
            level = np.array([published[c]["season_level"] for c in codes])
            assert set(level) <= {"state", "lga"}
            raw = np.where((level == "state")[:, None], state_prof[None, :], own)
            smooth = (np.roll(raw, 1, axis=1) + raw + np.roll(raw, -1, axis=1)) / 3
            expect = np.round(smooth / smooth.max(axis=1, keepdims=True), 3)
            assert set(published) == set(codes)
            for code, e in zip(codes, expect, strict=True):
                assert published[code]["fitted_without_own_series"] is True
                np.testing.assert_allclose(published[code]["seasonal_index"], e, atol=5e-4 + 1e-9, err_msg=code)
            w = pop[mine] / pop[mine].sum()
            state_season = next(x["season"] for x in states_doc["states"] if x["state_code"] == s)
            np.testing.assert_allclose(state_season["seasonal_index"],
                                       np.round(season_cv.weighted_profile(expect, w), 3), atol=5e-4 + 1e-9)
        others = [p for p in (release / "v1/transmission/lgas").glob("*.json") if p.stem not in dated_states]
        assert others and not any(r["fitted_without_own_series"] for p in others
                                  for r in orjson.loads(p.read_bytes())["lgas"])


    @staticmethod
    def _model_6_declared_seasons(release: Path, states_doc: dict[str, Any], sm: Any, geo: Any,
                                  dated_states: list[str], pop: np.ndarray) -> None:
        """Model 6 and 7: each dated state's LGAs publish what the registered rule picks, and fits, on the other
        six dated states alone (pipeline.model.season5.held_out_index on a fresh copy of the inputs: none of
        the release's documents or of the build's fitted objects is read), smoothed and at their published
        level; the state's season is their population-weighted mean."""
        from pipeline.datasets.transmission import _season5_data_for
        from pipeline.model import season5, season_cv
        from pipeline.sources.inputs import Inputs

        d = _season5_data_for(Inputs(DATA_DIR, geo), geo, sm)
        assert d is not None and d.protocol >= 6
        for s in dated_states:
            held = season5.held_out_index(d, "selection", [s])
            mine = np.array([sm.lga_codes[i] for i in range(len(sm.lga_codes)) if d.area_state[i] == s])
            rows = d.area_state == s
            expect = np.round(held[rows], 3)
            doc = orjson.loads((release / f"v1/transmission/lgas/{s}.json").read_bytes())
            published = {r["lga_code"]: r for r in doc["lgas"]}
            assert set(published) == set(mine)
            for code, e in zip(mine, expect, strict=True):
                assert published[code]["fitted_without_own_series"] is True
                np.testing.assert_allclose(published[code]["seasonal_index"], e, atol=5e-4 + 1e-9, err_msg=code)
            state_season = next(x["season"] for x in states_doc["states"] if x["state_code"] == s)
            w = pop[rows] / pop[rows].sum()
            np.testing.assert_allclose(state_season["seasonal_index"],
                                       np.round(season_cv.weighted_profile(expect, w), 3), atol=1e-3 + 1e-9)
        others = [p for p in (release / "v1/transmission/lgas").glob("*.json") if p.stem not in dated_states]
        assert others and not any(r["fitted_without_own_series"] for p in others
                                  for r in orjson.loads(p.read_bytes())["lgas"])


def test_file_sizes_are_not_data_but_the_same_numbers_under_a_data_key_are() -> None:
    """`bytes` of a file list (the datapackage's resources) is the release describing its own files; a
    spike of one large table would match any series peaking at the same place. Under any other key the
    same numbers are a run like every other."""
    from pipeline.release.audit import json_runs

    sizes = [10_000_000] + [50_000 + 1000 * i for i in range(19)]
    files = {"resources": [{"name": f"t{i}", "bytes": b} for i, b in enumerate(sizes)]}
    assert [r.where for r in json_runs(files)] == []
    data = {"resources": [{"name": f"t{i}", "cases": b} for i, b in enumerate(sizes)]}
    assert [r.where for r in json_runs(data)] == ["$.resources[].cases"]


# --- what the scanner reads: every run of a tricky document, and nothing else --------------------------

PI = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7]  # 14 values (ints: JSON numbers without a point)


def _run_rows(runs: list) -> list[tuple]:
    return [(r.where, r.area, [float(x) for x in r.values], None if r.months is None else [int(m) for m in r.months],
             r.calendar, r.keys) for r in runs]


def test_every_run_of_a_tricky_json_document_and_no_other() -> None:
    """Nested lists of records, numbered keys, nulls, booleans and strings that look like numbers: each
    run the audit must compare is found, where it is and of the area it belongs to, and nothing else (a
    boolean is not a number, a string is not a number, `coordinates` are positions)."""
    from pipeline.release.audit import json_runs

    f = [float(x) for x in PI]
    records = [{"period": f"{2020 + m // 12}-{m % 12 + 1:02d}", "cases": PI[m], "flag": m % 2 == 0,
                "label": str(PI[m]), "extra": None} for m in range(14)]
    records[3]["inner"] = PI  # one record holds a list: the records no longer share their keys
    doc = {
        "lga_code": "NG900001",
        "values": PI,
        "flags": [True, False] * 7,
        "strings": [str(x) for x in PI],
        "gappy": PI[:13] + [None] + PI[:12],
        "bool_gap": PI[:12] + [True] + PI[:12],
        "monthly": {**{f"m{k + 1:02d}": PI[k] for k in range(12)}, "name": "x"},
        "monthly_bool": {f"k{k + 1:02d}": (True if k == 5 else PI[k]) for k in range(12)},
        "national": {"values": PI},
        "nested": {"deeper": [{"state_code": "ZZ", "series": PI}]},
        "records": records,
        "lgas": [{"lga_code": f"NG9001{i:02d}", "v": PI[i] * 1.5, "ok": True} for i in range(14)],
        "list_of_lists": [PI, [1.5, 2.5, 3.5]],
        "coordinates": PI,
        "calendar": {"seasonal_index": PI[:12]},
    }
    runs = json_runs(orjson.loads(orjson.dumps(doc)))
    assert _run_rows(runs) == [
        ("$.values", "NG900001", f, None, False, None),
        ("$.gappy[0:13]", "NG900001", f[:13], None, False, None),
        ("$.gappy[14:26]", "NG900001", f[:12], None, False, None),
        ("$.bool_gap[0:12]", "NG900001", f[:12], None, False, None),  # the boolean is a gap, not a 1
        ("$.bool_gap[13:25]", "NG900001", f[:12], None, False, None),
        ("$.monthly.{m01…}", "NG900001", f[:12], None, False, None),
        ("$.national.values", "NG", f, None, False, None),
        ("$.nested.deeper[0].series", "ZZ", f, None, False, None),
        ("$.records[].cases", "NG900001", f, list(range(14)), False, None),
        ("$.records[3].inner", "NG900001", f, None, False, None),
        ("$.lgas[].v", None, [x * 1.5 for x in f], None, False, tuple(f"NG9001{i:02d}" for i in range(14))),
        ("$.list_of_lists[0]", "NG900001", f, None, False, None),
        ("$.calendar.seasonal_index", "NG900001", f[:12], None, True, None),
    ]


def _tricky_csv(quoted: bool) -> str:
    """13 months of one LGA and 2 of another: a numeric column with a gap, booleans, a text column of
    numbers but one, numbers written with spaces or underscores after a first plain one (text: polars
    reads no number there),
    every way of writing a number, and twelve numbered columns along each row."""
    expo = ["1e3", "2.5E-1", "+.5", "7.", "-3", "0.25", "1E+2", "8", "9.5", ".75", "-1e-2", "3", "4"]
    header = ["lga_code", "period", "cases", "flag", "label", "spaced", "under", "expo",
              *[f"m{j + 1:02d}" for j in range(12)]]
    lines = [",".join(header)]
    rows = [("NG900001", m) for m in range(13)] + [("NG900002", m) for m in range(2)]
    for i, (code, m) in enumerate(rows):
        cells = [f'"{code}"' if quoted else code, f"{2020 + m // 12}-{m % 12 + 1:02d}",
                 "" if (code, m) == ("NG900001", 5) else str(PI[m]), "true" if m % 2 else "false",
                 "n/a" if m == 7 else str(m), f" {m}" if m else "0", f"1_{m}" if m else "10", expo[m], *[str(PI[(i + j) % 14]) for j in range(12)]]
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("quoted", [False, True], ids=["split", "csv-module"])
def test_every_run_of_a_tricky_csv_table_and_no_other(quoted: bool) -> None:
    """The same table read by splitting (plain) and by the csv module (quoted cells): the same runs, each
    column of the LGA with 13 months on its months, each row's numbered columns, and no other."""
    from pipeline.release.audit import _split_csv, file_runs

    text = _tricky_csv(quoted)
    assert (_split_csv(text) is None) is quoted  # each reader is exercised
    runs = [r for _, r in file_runs("t.csv", text.encode())]
    expo = [1e3, 0.25, 0.5, 7.0, -3.0, 0.25, 100.0, 8.0, 9.5, 0.75, -0.01, 3.0, 4.0]
    codes = ["NG900001"] * 13 + ["NG900002"] * 2
    numbered = [[float(PI[(i + j) % 14]) for j in range(12)] for i in range(15)]
    expected = [
        ("lga_code=NG900001 column cases", "NG900001", [float(PI[m]) for m in range(13) if m != 5],
         [m for m in range(13) if m != 5], False, None),
        ("lga_code=NG900001 column expo", "NG900001", expo, list(range(13)), False, None),
        *[(f"lga_code=NG900001 column m{j + 1:02d}", "NG900001", [numbered[i][j] for i in range(13)],
           list(range(13)), False, None) for j in range(12)],
        *[(f"row {i} m01…", codes[i], numbered[i], None, False, None) for i in range(15)],
    ]
    assert _run_rows(runs) == expected
