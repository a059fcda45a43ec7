"""JSON documents as tables: the one flattening the CSV responses and the bundle tables share.

A document is a report (scalars such as `period`, `state_code`) holding record lists
under the container keys (`states`, `lgas`, `forecasts`); a forecast response nests one
report per month. Each record becomes one row: the scalars of every report above it
first, then the record's own fields in their JSON order. Because both outputs walk the
documents the JSON API serves, a CSV row can only differ from its JSON record in
spelling (see `cell`), never in value.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import polars as pl

CONTAINERS = ("forecasts", "states", "lgas", "months")
LIST_SEPARATOR = ";"
# One line ending for every CSV the service writes (responses and bundle tables alike): LF, what
# pandas, R, polars and spreadsheet imports write and read by default.
LINE_END = "\n"
# OWASP's CSV-injection guidance: a text cell a spreadsheet could read as a formula (or that a
# tab or carriage return can shift into one) is prefixed with a single quote, which spreadsheets
# show as text and scripts can strip. Only text is touched: numbers keep their minus sign.
FORMULA_START = "=+-@\t\r"
_FORMULA_RE = r"^[=+\-@\t\r]"


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def leaves(doc: dict[str, Any], inherited: dict[str, Any] | None = None) -> Iterator[tuple[dict[str, Any], list[dict]]]:
    """(report scalars, records) for every record list in a document, in document order.

    Nested objects at report level (`source`, `method`) are attribution, not rows, and
    are left out; lists of plain values are kept as values.
    """
    here = dict(inherited or {})
    for k, v in doc.items():
        if k not in CONTAINERS and (_is_scalar(v) or (isinstance(v, list) and all(_is_scalar(x) for x in v))):
            here[k] = v
    containers = [k for k in CONTAINERS if isinstance(doc.get(k), list)]
    for k in containers:
        items = doc[k]
        first = items[0] if items else None  # a list holds records of one shape
        if isinstance(first, dict) and any(isinstance(first.get(c), list) for c in CONTAINERS):
            for item in items:
                yield from leaves(item, here)
        else:
            yield here, items


def _flat(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in record.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}_"))
        else:
            out[prefix + k] = v
    return out


def neutralise(text: str) -> str:
    """A text cell made safe to open in a spreadsheet (see FORMULA_START)."""
    return "'" + text if text[:1] and text[0] in FORMULA_START else text


def neutralised(df: pl.DataFrame) -> pl.DataFrame:
    """`neutralise` on every text column of a frame, vectorised; an empty text is an empty cell,
    as `to_csv` writes it."""
    text = [c for c, t in df.schema.items() if t == pl.String]
    return df.with_columns(
        pl.when(pl.col(c).str.contains(_FORMULA_RE)).then(pl.lit("'") + pl.col(c))
        .when(pl.col(c) == "").then(None).otherwise(pl.col(c)).alias(c)
        for c in text
    )


def cell(v: Any) -> Any:
    """A JSON value as CSV text: null is empty, booleans are `true`/`false`, lists are `;`-joined,
    text is neutralised against formula injection."""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return neutralise(v)
    if isinstance(v, list):
        return neutralise(LIST_SEPARATOR.join("" if x is None else str(cell(x)) for x in v))
    return v


def columns(parts: Iterable[tuple[dict[str, Any], list[dict]]]) -> tuple[list[str], list[list[dict[str, Any]]]]:
    names: dict[str, None] = {}
    rows: list[list[dict[str, Any]]] = []
    for scalars, records in parts:
        flat = [_flat(r) for r in records]
        for k in scalars:
            names.setdefault(k)
        for r in flat:
            for k in r:
                if k not in scalars:
                    names.setdefault(k)
        rows.append([{**scalars, **r} for r in flat])
    return list(names), rows


def to_csv(doc: dict[str, Any]) -> bytes:
    """One CSV response: a header row, then one row per record (UTF-8, LINE_END line ends),
    quoted as `frame_csv` quotes a bundle table (fields holding a separator, quote, CR or LF)."""
    names, groups = columns(leaves(doc))
    rows = [[cell(r.get(n)) for n in names] for group in groups for r in group]
    buf = io.StringIO()
    if not any(isinstance(v, str) and "\r" in v for row in rows for v in row):
        w = csv.writer(buf, lineterminator=LINE_END)  # quotes what holds , " or LF
        w.writerow(names)
        w.writerows(rows)
        return buf.getvalue().encode("utf-8")
    # A carriage return inside a value is quoted only when CR is part of the writer's line end:
    # rows are written one at a time with CRLF and each row's own ending swapped for LINE_END.
    w = csv.writer(buf, lineterminator="\r\n")
    out = []
    for row in [names, *rows]:
        buf.seek(0)
        buf.truncate()
        w.writerow(row)
        out.append(buf.getvalue()[:-2] + LINE_END)
    return "".join(out).encode("utf-8")


def frame_csv(df: pl.DataFrame) -> bytes:
    """A bundle table as CSV, spelled exactly as `to_csv` spells a response: the same header
    row, quoting, empty cells for null, neutralised text and LINE_END line ends."""
    return neutralised(df).write_csv(null_value="", line_terminator=LINE_END, quote_style="necessary").encode("utf-8")


def frame(docs: Iterable[dict[str, Any]]) -> pl.DataFrame:
    """Every record of many documents as one frame, the report scalars broadcast onto their rows.

    Records are gathered list by list (no per-row Python work) and typed by polars over
    all rows, so a field that is null in some areas still gets its real type.
    """
    records: list[dict[str, Any]] = []
    heads: list[dict[str, Any]] = []
    counts: list[int] = []
    for doc in docs:
        for here, items in leaves(doc):
            heads.append(here)
            counts.append(len(items))
            records.extend(items)
    recs = pl.from_dicts(records, infer_schema_length=None) if records else pl.DataFrame()
    structs = [c for c, t in recs.schema.items() if isinstance(t, pl.Struct)]
    for c in structs:  # nested objects in records: `season.peak_month` → `season_peak_month`
        recs = recs.with_columns(pl.col(c).name.prefix_fields(f"{c}_")).unnest(c)
    head = pl.from_dicts(heads, infer_schema_length=None) if heads and any(heads) else pl.DataFrame()
    if head.width:
        head = head.select(c for c in head.columns if c not in recs.columns)
        head = head[np.repeat(np.arange(len(counts)), counts)]
    if not recs.width:
        return head
    return pl.concat([head, recs], how="horizontal") if head.width else recs
