"""Reader for the DHS Program API indicator export (JSON) of child malaria positivity.

The assembled survey table lacks 95% intervals and numbers tested (malaria SOURCES.md
§1: the DHS API / STATcompiler "hold them, but neither was reachable"). When the
operator drops the API's export for the two indicators into
`DATA_DIR/malaria/dhs_api_positivity_u5.json`, `pipeline.sources.survey` dispatches
here and the same normalised frame comes back with those fields filled:

* `ML_PMAL_C_MSC` (microscopy) and `ML_PMAL_C_RDT` (RDT), children 6-59 months;
* `Value`, `CILow`, `CIHigh` are percentages -> shares 0..1;
* `DenominatorUnweighted` is the number of children actually tested, which is what
  the small-sample rule (< 100 tested) is about; the weighted denominator is a
  survey-weight total and is not a head count, so it is not used;
* the export has no field for the number of clusters, so `clusters` stays null.

Rows broken down by a second variable (`ByVariableLabel` not empty) are not area
totals and are skipped. Where the export holds the same survey/area/test twice, the
`IsPreferred` row wins.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from pipeline.errors import InputError
from pipeline.sources.survey_schema import SCHEMA

INDICATOR_TESTS = {"ML_PMAL_C_MSC": "microscopy", "ML_PMAL_C_RDT": "RDT"}

ZONES = ("North Central", "North East", "North West", "South East", "South South", "South West")

# Abuja is spelt several ways across DHS products
STATE_VARIANTS = {"fct": "FC", "fctabuja": "FC", "abuja": "FC", "federalcapitalterritory": "FC", "nassarawa": "NA"}

__all__ = ["INDICATOR_TESTS", "SCHEMA", "read_dhs_api_export"]


def _key(name: str) -> str:
    s = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _state_table(state_codes: Mapping[str, str] | pl.DataFrame) -> dict[str, str]:
    """Normalised state name -> code, from a name->code mapping or a states frame."""
    pairs: Iterable[tuple[str, str]]
    if isinstance(state_codes, pl.DataFrame):
        pairs = zip(state_codes["state"], state_codes["state_code"], strict=True)
    else:
        pairs = state_codes.items()
    table = {_key(n): c for n, c in pairs}
    table.update(STATE_VARIANTS)
    return table


def _number(v: Any, path: Path, row: int, field: str) -> float | None:
    """Number or None for the API's empty values (null, "", "NA")."""
    if v is None or (isinstance(v, str) and v.strip() in ("", "NA", "na", "null")):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        raise InputError(path, f"`{field}` is not a number: {v!r}", row) from None


def _survey_name(year: int, survey_type: str, survey_id: str) -> str:
    """Match the assembled table's labels (`2018 NDHS`, `2015 NMIS`)."""
    kind = (survey_type or "").upper() or re.sub(r"^[A-Z]{2}\d{4}", "", survey_id or "")
    return f"{year} N{kind}" if kind else f"{year} survey"


def read_dhs_api_export(path: Path, state_codes: Mapping[str, str] | pl.DataFrame) -> pl.DataFrame:
    """Normalised positivity rows (schema `SCHEMA`) from a DHS API indicator export.

    `state_codes` maps state names to ISO suffix codes (or is the geography's states
    frame). Area levels come from the label: `Total` -> national, `Residence` ->
    urban/rural, a state name -> state, a zone name -> zone. A sub-national label
    that is neither stops the build, so a misspelt state is never filed as a zone.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, "file not found")
    try:
        raw = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise InputError(path, f"not JSON: {e}") from None
    data = raw.get("Data") if isinstance(raw, dict) else None
    if not isinstance(data, list):
        raise InputError(path, "no `Data` array (expected the DHS API indicator data export)")
    states = _state_table(state_codes)
    zones = {_key(z): z for z in ZONES}

    rows: list[dict[str, Any]] = []
    for i, rec in enumerate(data, start=1):
        ind = rec.get("IndicatorId")
        if ind not in INDICATOR_TESTS:
            continue
        if str(rec.get("ByVariableLabel") or "").strip():
            continue
        category = str(rec.get("CharacteristicCategory") or "").strip()
        label = str(rec.get("CharacteristicLabel") or "").strip().lstrip(".").strip()
        cat = category.lower()
        if cat == "total":
            level, area, code = "national", "Nigeria", None
        elif cat == "residence":
            if label.lower() not in ("urban", "rural"):
                raise InputError(path, f"residence label {label!r} is neither Urban nor Rural", i)
            level, area, code = "residence", label.lower(), None
        elif _key(label) in states:
            level, area, code = "state", label, states[_key(label)]
        elif _key(label) in zones:
            level, area, code = "zone", zones[_key(label)], None
        else:
            raise InputError(path, f"area {category}: {label!r} is not a state or zone", i)
        value = _number(rec.get("Value"), path, i, "Value")
        if value is None:
            continue  # suppressed in the export: no figure, not a zero
        try:
            year = int(rec.get("SurveyYear"))
        except (TypeError, ValueError):
            raise InputError(path, f"`SurveyYear` is not a year: {rec.get('SurveyYear')!r}", i) from None
        low = _number(rec.get("CILow"), path, i, "CILow")
        high = _number(rec.get("CIHigh"), path, i, "CIHigh")
        n = _number(rec.get("DenominatorUnweighted"), path, i, "DenominatorUnweighted")
        if not 0 <= value <= 100 or any(v is not None and not 0 <= v <= 100 for v in (low, high)):
            raise InputError(path, "percentages must lie between 0 and 100", i)
        survey_id = str(rec.get("SurveyId") or "")
        rows.append(
            {
                "survey_year": year,
                "survey": _survey_name(year, str(rec.get("SurveyType") or ""), survey_id),
                "level": level,
                "area": area,
                "state_code": code,
                "test": INDICATOR_TESTS[ind],
                "test_assumed": False,
                "positivity": value / 100,
                "low": None if low is None else low / 100,
                "high": None if high is None else high / 100,
                "clusters": None,
                "children_tested": None if n is None else round(n),
                "source": f"DHS Program API indicator export, {ind}, {survey_id or year}",
                "_preferred": bool(rec.get("IsPreferred", 1)),
                "_row": i,
            }
        )
    df = pl.DataFrame(rows, schema={**SCHEMA, "_preferred": pl.Boolean, "_row": pl.Int64})
    keys = ["survey_year", "level", "area", "test"]
    df = df.sort([*keys, "_preferred", "_row"], descending=[False, False, False, False, True, False])
    df = df.unique(subset=keys, keep="first", maintain_order=True)
    return df.drop("_preferred", "_row").sort("survey_year", "level", "area", "test")
