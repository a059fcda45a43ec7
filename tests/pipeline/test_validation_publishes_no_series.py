"""The validation outputs (docs/validation.json and its SVG plots) carry no value of the dated case
series, however rescaled: only the model's curves, published archetype profiles and statistics.

Two checks: arrays of 12 or more numbers appear only under the keys of model curves and published
profiles, and none of them tracks the same area's recorded profile or monthly series (r > 0.97)
unless it is a curve fitted without that area's state (it cannot carry what it never saw).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest

from pipeline.datasets import validation
from pipeline.datasets.base import BuildContext
from pipeline.site import plots
from pipeline.sources.dated_cases import DATED_LGA_CASES, read_dated_lga_cases, with_geography_codes
from tests.conftest import fits_of
from tests.paths import DATA_DIR, needs_data

SERIES_KEYS = {"out_of_sample", "model_3_out_of_sample", "published", "archetype_profile", "low", "high",
               "score_over_mean", "seasonal_index", "rain_mm"}
# curves that cannot carry an area's own series: fitted without its state, or not cases at all. A dated
# state's published `seasonal_index` is its held-out fold's (`fitted_without_own_series`, which the release
# audit proves); `rain_mm` is CHIRPS rainfall.
OUT_OF_SAMPLE = {"out_of_sample", "model_3_out_of_sample", "score_over_mean", "seasonal_index", "rain_mm"}
LIMIT = 0.97
OWN_DATA_MARGIN = 0.02  # how much closer than the blind curve a fitted one may come


def arrays(doc: Any, path: tuple[str, ...] = (), area: str | None = None) -> list[tuple[tuple[str, ...], str | None, np.ndarray]]:
    """(key path, nearest lga_code / state_code above it, values) of every numeric list of 12 or more."""
    out = []
    if isinstance(doc, dict):
        here = doc.get("lga_code") or doc.get("state_code") or area
        for k, v in doc.items():
            out += arrays(v, (*path, k), here)
    elif isinstance(doc, list):
        if len(doc) >= 12 and all(isinstance(x, int | float) or x is None for x in doc):
            out.append((path, area, np.array([np.nan if x is None else x for x in doc], dtype=float)))
        else:
            for x in doc:
                out += arrays(x, path, area)
    return out


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 12 or a[ok].std() == 0 or b[ok].std() == 0:
        return 0.0
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def test_plots_draw_only_model_curves_and_published_profiles():
    """A report that (wrongly) held a recorded curve still gets no plot of it: plots pick their keys."""
    twelve = [0.5 + 0.04 * k for k in range(12)]
    report = {"seasons": {"profiles": {
        "states": [{"state_code": "KE", "state": "Kebbi", "out_of_sample": twelve, "recorded": twelve[::-1],
                    "archetype_band": {"low": [0.4] * 12, "high": [0.9] * 12}}],
        "lgas": [{"lga_code": "X", "lga": "X", "state_code": "KE", "published": twelve, "recorded": twelve[::-1],
                  "out_of_sample": twelve}]}},
        "months": {"months": "2020-01 to 2023-12", "score_against_cases": [
            {"state_code": "KE", "r_monthly_level": 0.5, "r_month_to_month": 0.4, "score_over_mean": [1.0] * 48,
             "cases_over_mean": [1.2] * 48}]}}
    svgs = plots.validation_plots(report)
    assert svgs["season_states.svg"].count("<polyline") == 1 and svgs["season_states.svg"].count("<polygon") == 1
    assert svgs["season_lgas.svg"].count("<polyline") == 2
    assert svgs["score_vs_cases.svg"].count("<polyline") == 1
    assert "recorded" not in "".join(svgs.values()) and "cases / mean" not in "".join(svgs.values())


@pytest.fixture(scope="module")
def real_validation(real_build: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from pipeline.geography import load_geography

    with fits_of(real_build, tmp_path_factory.mktemp("fits")):
        p = validation.produce(BuildContext(data_dir=DATA_DIR, updated_at="t", geography=load_geography(DATA_DIR)))
    return {name: body for name, (_, body) in p.files.items()}


def recorded(geo_lgas: pl.DataFrame) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(calendar-month profile per LGA and state code, 48-month series per state) of the dated cases."""
    d = with_geography_codes(read_dated_lga_cases(DATA_DIR), geo_lgas)  # type: ignore[arg-type]
    prof: dict[str, np.ndarray] = {}
    for key in ("lga_code", "state_code"):
        g = d.group_by(key, "year", "month").agg(pl.col("cases").sum()).group_by(key, "month").agg(pl.col("cases").mean())
        for (code,), part in g.sort("month").group_by(key):
            prof[str(code)] = part["cases"].to_numpy().astype(float)
    series = {str(c): part.sort("year", "month")["cases"].to_numpy().astype(float)
              for (c,), part in d.group_by("state_code", "year", "month").agg(pl.col("cases").sum()).group_by("state_code")}
    return prof, series


@needs_data(DATED_LGA_CASES)
def test_validation_json_carries_no_recorded_series(real_validation):
    """Arrays only under model-curve keys; a published curve fitted with the area's own series may track its
    recorded profile no more closely than the curve fitted without its state does (plus a small margin):
    it may not carry the area's own data, though a good model will of course resemble it."""
    from pipeline.geography import load_geography

    report = orjson.loads(real_validation[validation.VALIDATION_FILE])
    prof, series = recorded(load_geography(DATA_DIR).lgas)
    found = arrays(report)
    assert found, "the report plots model curves: some arrays are expected"
    oos = {(path[:-1], area): v for path, area, v in found if path[-1] == "out_of_sample"}
    for path, area, values in found:
        assert path[-1] in SERIES_KEYS, f"{'.'.join(path)}: an array under a key that is not a model curve"
        if path[-1] in OUT_OF_SAMPLE or area is None:
            continue
        ref = series.get(area) if len(values) == 48 else prof.get(area)
        if ref is None or len(ref) != len(values):
            continue
        r = _corr(values, ref)
        blind = oos.get((path[:-1], area))
        allowed = max(LIMIT, _corr(blind, ref) + OWN_DATA_MARGIN) if blind is not None else LIMIT
        assert r <= allowed, f"{'.'.join(path)} ({area}) tracks the recorded series ({r:.3f})"


@needs_data(DATED_LGA_CASES)
def test_validation_plots_carry_only_the_json_curves(real_validation):
    """Every line and band of the SVGs is one of the report's arrays (so the check above covers them)."""
    report = orjson.loads(real_validation[validation.VALIDATION_FILE])
    allowed = [v for _, _, v in arrays(report)]
    for name, body in real_validation.items():
        if not name.endswith(".svg"):
            continue
        for kind, pts in re.findall(r'<(polyline|polygon)[^>]*points="([^"]+)"', body.decode()):
            y = np.array([-float(p.split(",")[1]) for p in pts.split()])
            parts = [y] if kind == "polyline" else [y[: len(y) // 2], y[len(y) // 2:][::-1]]  # a band: two edges
            for part in parts:
                if len(part) < 12:
                    continue
                assert any(_corr(part, v[: len(part)]) > 0.999 for v in allowed if len(v) >= len(part)), \
                    f"{name}: a curve the report does not carry"


@needs_data(DATED_LGA_CASES)
def test_committed_report_holds_the_figures_the_build_computes(real_validation):
    """reports/validation.json is the release's docs/validation.json for this data (`make reports`)."""
    from tests.paths import REPO_ROOT

    committed = orjson.loads((REPO_ROOT / "reports/validation.json").read_bytes())
    assert committed == orjson.loads(real_validation[validation.VALIDATION_FILE]), "run `make reports`"
