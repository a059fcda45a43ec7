"""Project a programme's own counts with the published season ratios (docs: skill).

expected = cases x ratio, range = cases x low .. cases x high, for the next 1-4 months after the month
of the count. Where the service's cross-validation found that projected counts did not beat carrying
the count forward for areas of this season class at this horizon (`beats_persistence` not true), the
answer says `insufficient_skill` and gives no number. Works from the API or, with no network, from a
downloaded bundle (its `season_ratio_lga.csv` / `season_ratio_state.csv`, in a folder or the zip).
"""

from __future__ import annotations

import csv
import io
import math
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ._dhis2 import last_counts, match_org_units, read_export, series_by_area
from ._errors import ClientError

__all__ = ["dhis2_counts", "project_counts", "project_export", "projection", "whole_cases"]

FORMULA = ("expected = cases x ratio; low = cases x low ratio; high = cases x high ratio (80 % range); "
           "quantiles q10..q90 = cases x the ratio's quantiles; whole cases, half up")
_STATE = re.compile(r"^[A-Z]{2}$")
_LGA = re.compile(r"^NG\d{6}$")
_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
BUNDLE_TABLES = {"state": "season_ratio_state.csv", "lga": "season_ratio_lga.csv", "gazetteer": "gazetteer.csv"}


def _fail(fn: str, msg: str) -> ClientError:
    return ClientError(f"{fn}: {msg}")


def area_kind(area: str, fn: str = "project_counts") -> str:
    if isinstance(area, str) and _STATE.fullmatch(area):
        return "state"
    if isinstance(area, str) and _LGA.fullmatch(area):
        return "lga"
    raise _fail(fn, f"area {area!r} is neither a two-letter state code (e.g. 'KN') nor an LGA code "
                    "(e.g. 'NG020001')")


def parse_month(month: Any, fn: str = "project_counts") -> tuple[int | None, int]:
    """(year or None, calendar month) of `month`: 'YYYY-MM' or a calendar month 1-12."""
    if isinstance(month, str):
        m = _MONTH.fullmatch(month)
        if not m:
            raise _fail(fn, f"month {month!r} is not of the form YYYY-MM (the month of the count, e.g. '2024-06')")
        return int(m.group(1)), int(m.group(2))
    if isinstance(month, int) and not isinstance(month, bool) and 1 <= month <= 12:
        return None, month
    raise _fail(fn, f"month {month!r} must be 'YYYY-MM' or a calendar month 1 to 12")


def check_inputs(cases: Any, horizons: Any, fn: str = "project_counts") -> tuple[list[float], int]:
    """(counts, horizons): `cases` is one count or the last few months' counts, oldest first (the last is
    the count of the month given)."""
    many = cases if isinstance(cases, list | tuple) else [cases]
    if not many:
        raise _fail(fn, "cases is empty: give the count of the month (or the last few months' counts)")
    for c in many:
        if isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c) or c < 0:
            raise _fail(fn, f"cases {c!r} must be a count: a finite number of 0 or more")
    if isinstance(horizons, bool) or not isinstance(horizons, int) or not 1 <= horizons <= 4:
        raise _fail(fn, f"horizons {horizons!r} must be a whole number from 1 to 4")
    return [float(c) for c in many], horizons


def whole_cases(x: float) -> int:
    """Cases are whole: half up, floor(x + 0.5) (x >= 0). The one rule of the map's form, this client and
    the R client (tests/clients/test_rounding.py compares the three)."""
    return int(math.floor(x + 0.5))


def _num(v: Any) -> float | None:
    if v is None or v == "":
        return None
    return float(v)


def _flag(v: Any) -> bool | None:
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        return v
    return str(v).lower() == "true"


QUANTILES = ("q10", "q25", "q50", "q75", "q90")


def _base(counts: list[float], k: int, back: dict[int, float | None]) -> tuple[float, int]:
    """(base, months used): with k > 1 published and k counts given (all > 0), the geometric mean of
    c(t-j) x I(m)/I(m-j), each earlier count carried to month m by the season: I(m)/I(m-j) is the published
    j-month ratio from month m-j; else the last count."""
    if k > 1 and len(counts) >= k and all(c > 0 for c in counts[-k:]) and all(back.get(j) for j in range(1, k)):
        logs = [math.log(counts[-1])] + [math.log(counts[-1 - j] * back[j]) for j in range(1, k)]  # type: ignore[operator]
        return math.exp(sum(logs) / k), k
    return counts[-1], 1


def projection(records: Iterable[Mapping[str, Any]], area: str, month: Any, cases: Any, horizons: int = 4,
               fn: str = "project_counts") -> dict[str, Any]:
    """The projection from the ratio records of one area (every start month; those of `month` are used,
    and with several counts the earlier months' ratios for the base)."""
    year, cal = parse_month(month, fn)
    counts, horizons = check_inputs(cases, horizons, fn)
    recs = list(records)
    rows = {int(r["horizon"]): r for r in recs if int(r["start_month"]) == cal}
    if not rows:
        raise _fail(fn, f"no season ratios for area {area!r}")
    back = {h: _num(r["ratio"]) for r in recs for h in (1, 2, 3)
            if int(r["horizon"]) == h and int(r["start_month"]) == (cal - 1 - h) % 12 + 1}
    out = []
    for h in range(1, horizons + 1):
        r = rows.get(h)
        if r is None:
            raise _fail(fn, f"the ratios of {area!r} lack horizon {h}")
        ratio, lo, hi = _num(r["ratio"]), _num(r.get("low")), _num(r.get("high"))
        qs = {q: _num(r.get(q)) for q in QUANTILES}
        beats = _flag(r.get("beats_persistence"))
        persistence = r.get("forecast") == "persistence"
        base, used = _base(counts, int(_num(r.get("base_months")) or 1), back)
        mon = (cal - 1 + h) % 12 + 1
        period = None if year is None else f"{year + (cal - 1 + h) // 12:04d}-{mon:02d}"
        ok = (beats is True or persistence) and ratio is not None and lo is not None and hi is not None
        status = ("persistence" if persistence else "ok") if ok else "insufficient_skill"
        out.append({
            "horizon": h, "period": period, "month": mon, "status": status,
            "expected": whole_cases(base * ratio) if ok and ratio is not None else None,
            "low": whole_cases(base * lo) if ok and lo is not None else None,
            "high": whole_cases(base * hi) if ok and hi is not None else None,
            "quantiles": {q: whole_cases(base * v) if ok and v is not None else None for q, v in qs.items()},
            "ratio": ratio, "ratio_low": lo, "ratio_high": hi, "beats_persistence": beats,
            "base_months": used,
        })
    first = next(iter(rows.values()))
    return {"area": area, "month": month, "cases": cases, "season_class": first.get("season_class"),
            "formula": FORMULA, "projections": out,
            "note": "insufficient_skill: in the service's cross-validation, projected counts did not beat the count "
                    "carried forward for areas of this season class at this horizon (or no evidence): use your "
                    "count as it is, or your own judgement. persistence: for this weak season the service "
                    "carries your count forward, with ranges from the errors of doing so. Cases are whole "
                    "(half up)."}


def _bundle_rows(bundle: str | Path, kind: str, fn: str) -> list[dict[str, str]]:
    name = BUNDLE_TABLES[kind]
    path = Path(bundle)
    if path.is_dir():
        f = path / name
        if not f.is_file():
            raise _fail(fn, f"{f} is missing: the bundle folder has no {name} (a release from before season ratios?)")
        text = f.read_text(encoding="utf-8")
    elif path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.rsplit("/", 1)[-1] == name]
            if not names:
                raise _fail(fn, f"{path} has no {name} (a release from before season ratios?)")
            text = z.read(names[0]).decode("utf-8")
    else:
        raise _fail(fn, f"bundle {str(bundle)!r} is neither a bundle folder nor the bundle zip")
    return list(csv.DictReader(io.StringIO(text)))


def project_export(export: str | Path | bytes, lgas: Iterable[Mapping[str, str]], states: Mapping[str, str],
                   ratios_of: Callable[[str], list[Mapping[str, Any]]], month: str | None = None,
                   horizons: int = 4, fn: str = "project_counts") -> dict[str, Any]:
    """Every matched org unit of a DHIS2 export projected from its latest month (or `month`), with the
    last three months' counts for a published k-month base; `org_units` says how each was matched."""
    rows = read_export(export)
    matches = match_org_units([r["org_unit"] for r in rows], lgas, states)
    out = []
    end = None
    if month is not None:
        year, cal = parse_month(month, fn)
        if year is None:
            raise _fail(fn, f"with a DHIS2 export, month {month!r} is 'YYYY-MM' (or left out: each org unit's latest)")
        end = f"{year:04d}-{cal:02d}"
    for code, series in sorted(series_by_area(rows, matches).items()):
        found = last_counts(series, end)
        if found is None:
            continue
        recs = ratios_of(code)
        if recs:
            out.append(projection(recs, code, found[0], found[1], horizons, fn))
    return {"org_units": [{"org_unit": k, **v} for k, v in matches.items()], "projections": out}


def dhis2_counts(dhis2: str | Path | bytes, *, bundle: str | Path) -> dict[str, Any]:
    """The monthly counts of a DHIS2 export keyed by the service's codes (`counts`: location, month,
    cases), with how each org unit was matched (`org_units`): e.g. for `malaria-risk score --counts`."""
    fn = "dhis2_counts"
    lgas, states = _bundle_lgas(bundle, fn)
    rows = read_export(dhis2)
    matches = match_org_units([r["org_unit"] for r in rows], lgas, states)
    counts = [{"location": code, "month": m, "cases": v}
              for code, series in sorted(series_by_area(rows, matches).items()) for m, v in sorted(series.items())]
    return {"org_units": [{"org_unit": k, **v} for k, v in matches.items()], "counts": counts}


def _bundle_lgas(bundle: str | Path, fn: str) -> tuple[list[dict[str, str]], dict[str, str]]:
    lgas = _bundle_rows(bundle, "gazetteer", fn)
    states = {r["state_code"]: r["state"] for r in _bundle_rows(bundle, "state", fn)}
    return lgas, states


def project_counts(area: str | None = None, month: Any = None, cases: Any = None, horizons: int = 4, *,
                   bundle: str | Path, dhis2: str | Path | bytes | None = None) -> dict[str, Any]:
    """Project `cases` (the count of `month` in `area`, or the last few months' counts, oldest first)
    1-`horizons` months on from a downloaded bundle (folder or zip): no network, no key.

    With `dhis2` (a DHIS2 analytics export of "Confirmed uncomplicated malaria": JSON, or CSV long or
    pivot), every org unit is matched to a state or LGA code and projected from its latest month (or
    `month`); `area` and `cases` are then not given."""
    fn = "project_counts"
    if dhis2 is not None:
        lgas, states = _bundle_lgas(bundle, fn)
        tables = {k: _bundle_rows(bundle, k, fn) for k in ("state", "lga")}

        def ratios_of(code: str) -> list[Mapping[str, Any]]:
            kind = area_kind(code, fn)
            key = "state_code" if kind == "state" else "lga_code"
            return [r for r in tables[kind] if r.get(key) == code]

        return project_export(dhis2, lgas, states, ratios_of, month, horizons, fn)
    if area is None or month is None or cases is None:
        raise _fail(fn, "give area, month and cases, or a DHIS2 export (dhis2=...)")
    kind = area_kind(area, fn)
    parse_month(month, fn)
    check_inputs(cases, horizons, fn)
    key = "state_code" if kind == "state" else "lga_code"
    rows = [r for r in _bundle_rows(bundle, kind, fn) if r.get(key) == area]
    if not rows:
        raise _fail(fn, f"area {area!r} is not in the bundle's {BUNDLE_TABLES[kind]}")
    return projection(rows, area, month, cases, horizons, fn)
