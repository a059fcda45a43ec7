"""A DHIS2 analytics export straight into `project_counts` (docs: skill).

Reads what a programme downloads from DHIS2 for "Confirmed uncomplicated malaria": the analytics JSON
(`headers`, `rows`, `metaData.items`), or a CSV, long (columns for data, period, organisation unit and
value, by name or by the `dx`/`pe`/`ou`/`value` ids) or a pivot (one row per organisation unit, a column
per period `YYYYMM`). Organisation units are matched to the service's codes by the rule the API uses for
its "did you mean" suggestions (edge/names.py: case, accents, spaces and punctuation ignored, a trailing
"State"/"LGA"/"Local Government Area" dropped, then close spellings at difflib ratio >= 0.8), after
dropping the two-letter state prefix DHIS2 Nigeria puts before names ("kn Bunkure Local Government
Area"), which then narrows the match to that state. Nothing is guessed between several candidates:
those org units come back `ambiguous` with the suggestions, and unknown ones `unmatched`.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ._errors import ClientError

DATA_ELEMENT = "confirmed uncomplicated malaria"
_PERIOD = re.compile(r"^(\d{4})(0[1-9]|1[0-2])$")
_SUFFIX = re.compile(r"(state|lga|localgovernmentarea|localgovernment)$")
_PREFIX = re.compile(r"^([a-z]{2})\s+(.+)$", re.IGNORECASE)
CUTOFF, MAX_CLOSE, MAX_SUGGESTIONS = 0.8, 4, 8  # as edge/names.py for LGAs
HEADERS = {"data": ("dx", "data", "data element", "dataelement", "indicator"),
           "period": ("pe", "period", "periodid", "periodname"),
           "org_unit": ("ou", "organisation unit", "organisationunit", "org unit", "orgunit", "organisation unit name",
                        "orgunitname", "organisationunitname", "lga", "organisation unit code", "orgunitcode"),
           "value": ("value", "values")}


def normalise(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "", ascii_text.lower())


def _stem(text: str) -> str:
    key = normalise(text)
    return _SUFFIX.sub("", key) or key


def _fail(msg: str) -> ClientError:
    return ClientError(f"project_counts: {msg}")


def _period(v: str) -> str | None:
    m = _PERIOD.fullmatch(str(v).strip())
    return f"{m.group(1)}-{m.group(2)}" if m else None


def _value(v: Any) -> float | None:
    try:
        x = float(str(v).replace(",", "").strip())
    except ValueError:
        return None
    return x if x >= 0 else None


def _column(fields: Iterable[str], role: str) -> str | None:
    want = {normalise(x) for x in HEADERS[role]}
    return next((f for f in fields if normalise(f) in want), None)


def read_export(source: str | Path | bytes) -> list[dict[str, Any]]:
    """[{org_unit, period 'YYYY-MM', cases}] of "Confirmed uncomplicated malaria" in a DHIS2 export
    (a path, or the file's text or bytes). Rows of other data elements, blank values and periods that
    are not months are left out."""
    if isinstance(source, bytes):
        text = source.decode("utf-8-sig")
    elif isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and Path(source).is_file()):
        text = Path(source).read_text(encoding="utf-8-sig")
    else:
        text = str(source)
    text = text.lstrip("\ufeff")
    rows = _from_json(json.loads(text)) if text.lstrip().startswith("{") else _from_csv(text)
    if not rows:
        raise _fail("the DHIS2 export has no monthly values of \"Confirmed uncomplicated malaria\" (periods YYYYMM)")
    return rows


def _keep(data: str | None) -> bool:
    return data is None or DATA_ELEMENT in " ".join(str(data).lower().split())


def _from_json(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    names = {k: (v.get("name") if isinstance(v, dict) else v) for k, v in (doc.get("metaData", {}).get("items") or {}).items()}
    heads = [h.get("name") for h in doc.get("headers", [])]
    try:
        i_dx, i_pe, i_ou, i_v = (heads.index(x) for x in ("dx", "pe", "ou", "value"))
    except ValueError as e:
        raise _fail(f"the DHIS2 JSON lacks a header: {e}; it needs dx, pe, ou and value") from e
    out = []
    for r in doc.get("rows", []):
        per, v = _period(r[i_pe]), _value(r[i_v])
        if per is None or v is None or not _keep(names.get(r[i_dx], r[i_dx])):
            continue
        out.append({"org_unit": names.get(r[i_ou], r[i_ou]), "period": per, "cases": v})
    return out


def _from_csv(text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text))
    fields = list(reader.fieldnames or [])
    ou = _column(fields, "org_unit")
    if ou is None:
        raise _fail(f"the DHIS2 CSV has no organisation unit column (columns: {fields})")
    pe, val, dx = _column(fields, "period"), _column(fields, "value"), _column(fields, "data")
    out = []
    if pe is not None and val is not None:  # long: one value a row
        for r in reader:
            per, v = _period(r[pe]), _value(r[val])
            if per is not None and v is not None and _keep(r.get(dx) if dx else None):
                out.append({"org_unit": r[ou].strip(), "period": per, "cases": v})
        return out
    periods = {f: _period(f) for f in fields if _period(f)}
    for r in reader:  # pivot: a column per period
        if not _keep(r.get(dx) if dx else None):
            continue
        for f, per in periods.items():
            v = _value(r.get(f) or "")
            if v is not None and per is not None:
                out.append({"org_unit": r[ou].strip(), "period": per, "cases": v})
    return out


def match_org_units(org_units: Iterable[str], lgas: Iterable[Mapping[str, str]],
                    states: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Per org unit: {code, match ('code', 'name', 'close', 'ambiguous', 'unmatched'), suggestions}.
    `lgas`: rows with lga_code, lga, state_code; `states`: state code -> name."""
    lga_rows = list(lgas)
    by_key: dict[str, list[Mapping[str, str]]] = {}
    for r in sorted(lga_rows, key=lambda r: r["lga_code"]):
        by_key.setdefault(normalise(r["lga"]), []).append(r)
    state_keys = {normalise(n): c for c, n in states.items()}
    codes = {r["lga_code"] for r in lga_rows}
    out = {}
    for raw in dict.fromkeys(org_units):
        out[raw] = _match(raw, by_key, state_keys, codes, states)
    return out


def _suggest(rows: Iterable[Mapping[str, str]], states: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"lga_code": r["lga_code"], "lga": r["lga"], "state_code": r["state_code"],
             "state": states.get(r["state_code"], r["state_code"])} for r in rows][:MAX_SUGGESTIONS]


def _match(raw: str, by_key: Mapping[str, list[Mapping[str, str]]], state_keys: Mapping[str, str], codes: set[str],
           states: Mapping[str, str]) -> dict[str, Any]:
    up = raw.strip().upper()
    if up in codes or up in states:
        return {"code": up, "match": "code", "suggestions": []}
    if _stem(raw) in state_keys:
        return {"code": state_keys[_stem(raw)], "match": "name", "suggestions": []}
    state, name = None, raw.strip()
    m = _PREFIX.match(name)
    if m and m.group(1).upper() in states:
        state, name = m.group(1).upper(), m.group(2)
    key = _stem(name)

    def in_state(rows: Iterable[Mapping[str, str]]) -> list[Mapping[str, str]]:
        return [r for r in rows if state is None or r["state_code"] == state]

    exact = in_state(by_key.get(key, []))
    if len(exact) == 1:
        return {"code": exact[0]["lga_code"], "match": "name", "suggestions": _suggest(exact, states)}
    if exact:
        return {"code": None, "match": "ambiguous", "suggestions": _suggest(exact, states)}
    pool = [k for k in by_key if in_state(by_key[k])]
    close = [r for k in difflib.get_close_matches(key, pool, n=MAX_CLOSE, cutoff=CUTOFF) for r in in_state(by_key[k])]
    if len(close) == 1:
        return {"code": close[0]["lga_code"], "match": "close", "suggestions": _suggest(close, states)}
    return {"code": None, "match": "ambiguous" if close else "unmatched", "suggestions": _suggest(close, states)}


def series_by_area(rows: Iterable[Mapping[str, Any]], matches: Mapping[str, Mapping[str, Any]]
                   ) -> dict[str, dict[str, float]]:
    """Matched code -> {period: cases} (several org units of one code are summed)."""
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        code = matches[r["org_unit"]]["code"]
        if code is None:
            continue
        per = out.setdefault(code, {})
        per[r["period"]] = per.get(r["period"], 0.0) + float(r["cases"])
    return out


def last_counts(series: Mapping[str, float], month: str | None, k: int = 3) -> tuple[str, list[float]] | None:
    """(month, counts of up to k consecutive months ending there, oldest first): `month` or the latest."""
    if not series:
        return None
    end = month or max(series)
    if end not in series:
        return None
    y, m = int(end[:4]), int(end[5:7])
    counts = []
    for j in range(k):
        t = y * 12 + m - 1 - j
        v = series.get(f"{t // 12:04d}-{t % 12 + 1:02d}")
        if v is None:
            break
        counts.insert(0, v)
    return end, counts
