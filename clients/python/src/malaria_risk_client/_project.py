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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ._errors import ClientError

__all__ = ["project_counts", "projection"]

FORMULA = "expected = cases x ratio; low = cases x low ratio; high = cases x high ratio (80 % range)"
_STATE = re.compile(r"^[A-Z]{2}$")
_LGA = re.compile(r"^NG\d{6}$")
_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
BUNDLE_TABLES = {"state": "season_ratio_state.csv", "lga": "season_ratio_lga.csv"}


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


def check_inputs(cases: Any, horizons: Any, fn: str = "project_counts") -> tuple[float, int]:
    if isinstance(cases, bool) or not isinstance(cases, int | float) or not math.isfinite(cases) or cases < 0:
        raise _fail(fn, f"cases {cases!r} must be a count: a finite number of 0 or more")
    if isinstance(horizons, bool) or not isinstance(horizons, int) or not 1 <= horizons <= 4:
        raise _fail(fn, f"horizons {horizons!r} must be a whole number from 1 to 4")
    return float(cases), horizons


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


def projection(records: Iterable[Mapping[str, Any]], area: str, month: Any, cases: Any, horizons: int = 4,
               fn: str = "project_counts") -> dict[str, Any]:
    """The projection from the ratio records of one area (any start months; those of `month` are used)."""
    year, cal = parse_month(month, fn)
    n, horizons = check_inputs(cases, horizons, fn)
    rows = {int(r["horizon"]): r for r in records if int(r["start_month"]) == cal}
    if not rows:
        raise _fail(fn, f"no season ratios for area {area!r}")
    out = []
    for h in range(1, horizons + 1):
        r = rows.get(h)
        if r is None:
            raise _fail(fn, f"the ratios of {area!r} lack horizon {h}")
        ratio, lo, hi = _num(r["ratio"]), _num(r.get("low")), _num(r.get("high"))
        beats = _flag(r.get("beats_persistence"))
        mon = (cal - 1 + h) % 12 + 1
        period = None if year is None else f"{year + (cal - 1 + h) // 12:04d}-{mon:02d}"
        ok = beats is True and ratio is not None and lo is not None and hi is not None
        out.append({
            "horizon": h, "period": period, "month": mon,
            "status": "ok" if ok else "insufficient_skill",
            "expected": round(n * ratio, 1) if ok and ratio is not None else None,
            "low": round(n * lo, 1) if ok and lo is not None else None,
            "high": round(n * hi, 1) if ok and hi is not None else None,
            "ratio": ratio, "ratio_low": lo, "ratio_high": hi, "beats_persistence": beats,
        })
    first = next(iter(rows.values()))
    return {"area": area, "month": month, "cases": cases, "season_class": first.get("season_class"),
            "formula": FORMULA, "projections": out,
            "note": "insufficient_skill: in the service's cross-validation, projected counts did not beat the count "
                    "carried forward for areas of this season class at this horizon (or no evidence): use your "
                    "count as it is, or your own judgement"}


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


def project_counts(area: str, month: Any, cases: Any, horizons: int = 4, *,
                   bundle: str | Path) -> dict[str, Any]:
    """Project `cases` (the count of `month` in `area`) 1-`horizons` months on from a downloaded bundle
    (folder or zip): no network, no key."""
    fn = "project_counts"
    kind = area_kind(area, fn)
    parse_month(month, fn)
    check_inputs(cases, horizons, fn)
    key = "state_code" if kind == "state" else "lga_code"
    rows = [r for r in _bundle_rows(bundle, kind, fn) if r.get(key) == area]
    if not rows:
        raise _fail(fn, f"area {area!r} is not in the bundle's {BUNDLE_TABLES[kind]}")
    return projection(rows, area, month, cases, horizons, fn)
