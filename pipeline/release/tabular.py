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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import polars as pl

from edge.routes import BY_PATH
from pipeline.datasets.base import Rendered
from pipeline.release.reuse import Linked

if TYPE_CHECKING:
    from pipeline.release.reuse import Reuse

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


# --- many documents at once, in polars --------------------------------------------------------
#
# `to_csv_many` writes exactly the bytes `to_csv` writes, document by document, but formats every
# cell of all the documents of one shape as polars columns (one expression per column, not one
# Python call per cell). A value polars would spell differently from Python's `str` (a float below
# 1e-4, NaN), or a column mixing types (polars would coerce), sends the documents of that shape
# down `to_csv`: the vectorised path is a faster way to the same bytes, never other bytes.

_NEEDS_QUOTES = r'[,"\n\r]'  # what Python's csv quotes with our writers (see `to_csv`)


class _Unsupported(Exception):
    """A shape or value the vectorised path would not spell as `to_csv` does."""


def _shape(parts: list[tuple[dict[str, Any], list[dict]]]) -> tuple | None:
    """(report scalar names, record fields) shared by every part of a document, or None.

    A record field is (name, None) or, for a nested object, (name, its field names)."""
    shapes = set()
    for scalars, records in parts:
        fields: tuple = ()
        if records:
            first = records[0]
            if not isinstance(first, dict):
                return None
            keys = first.keys()
            if any(not isinstance(r, dict) or r.keys() != keys for r in records):
                return None
            out: list[tuple[str, tuple[str, ...] | None]] = []
            for k, v in first.items():
                if isinstance(v, dict):
                    inner = v.keys()
                    if any(not isinstance(r[k], dict) or r[k].keys() != inner or
                           any(isinstance(x, dict) for x in r[k].values()) for r in records):
                        return None
                    out.append((k, tuple(inner)))
                else:
                    out.append((k, None))
            fields = tuple(out)
            if {f"{k}_{i}" for k, inner in fields if inner for i in inner} & {k for k, inner in fields if not inner}:
                return None
        names = tuple(scalars)
        if set(names) & {n for n in _field_names(fields)}:
            return None  # a record field named like a report scalar: `to_csv` merges them
        shapes.add((names, fields))
    if len(shapes) != 1:
        return None
    return shapes.pop()


def _field_names(fields: tuple) -> list[str]:
    return [n for k, inner in fields for n in ([f"{k}_{i}" for i in inner] if inner else [k])]


def _neutralised(e: pl.Expr) -> pl.Expr:
    return pl.when(e.str.contains(_FORMULA_RE)).then(pl.lit("'") + e).otherwise(e)


def _scalar_text(e: pl.Expr, kind: type) -> pl.Expr:
    if kind is str:
        return _neutralised(e)
    if kind is bool:  # null stays null (an empty cell, as `cell` writes it), never "false"
        return pl.when(e.is_null()).then(pl.lit(None, dtype=pl.String)).when(e).then(pl.lit("true")) \
            .otherwise(pl.lit("false"))
    return e.cast(pl.String)


_DTYPES: dict[type, Any] = {str: pl.String, bool: pl.Boolean, int: pl.Int64, float: pl.Float64}


def _kind(values: Iterable[Any]) -> type | None:
    kinds = set(map(type, values))
    kinds.discard(type(None))
    if len(kinds) > 1 or not kinds <= {str, bool, int, float, list}:
        raise _Unsupported
    return kinds.pop() if kinds else None


def _check_floats(series: pl.Series) -> None:
    """Python writes 1e-05 where polars writes 0.00001; NaN and inf differ too."""
    s = series.drop_nulls()
    if s.len() and bool(((~s.is_finite()) | ((s != 0) & (s.abs() < 1e-4))).any()):
        raise _Unsupported


def _column(values: list[Any]) -> tuple[pl.Series, pl.Expr]:
    """The values as a typed series and the expression spelling each as `cell` does (null: "")."""
    name = "v"
    kind = _kind(values)
    if kind is None:
        return pl.Series(name, [None] * len(values), dtype=pl.String), pl.col(name)
    if kind is list:
        items = [x for v in values if v for x in v]
        inner = _kind(items)
        if inner is list:
            raise _Unsupported
        try:
            series = pl.Series(name, values, dtype=pl.List(_DTYPES[inner] if inner else pl.String), strict=True)
        except (OverflowError, TypeError, pl.exceptions.PolarsError):
            raise _Unsupported from None
        if inner is float:
            _check_floats(series.explode())
        text = pl.col(name).list.eval(_scalar_text(pl.element(), inner or str).fill_null("")).list.join(
            LIST_SEPARATOR)
        return series, _neutralised(text)
    try:
        series = pl.Series(name, values, dtype=_DTYPES[kind], strict=True)
    except (OverflowError, TypeError, pl.exceptions.PolarsError):
        raise _Unsupported from None
    if kind is float:
        _check_floats(series)
    return series, _scalar_text(pl.col(name), kind)


def _quoted(e: pl.Expr) -> pl.Expr:
    e = e.fill_null("")
    return pl.when(e.str.contains(_NEEDS_QUOTES)).then(
        pl.lit('"') + e.str.replace_all('"', '""', literal=True) + pl.lit('"')).otherwise(e)


def _shape_csv(shape: tuple, members: list[list[tuple[dict[str, Any], list[dict]]]]) -> list[bytes]:
    """The CSV of each document of one shape (its parts given), formatted column by column."""
    scalar_names, fields = shape
    names = [*scalar_names, *_field_names(fields)]
    header = ",".join(n if not any(c in n for c in ',"\n\r') else '"' + n.replace('"', '""') + '"' for n in names)
    heads = [scalars for parts in members for scalars, _ in parts]
    counts = np.array([len(records) for parts in members for _, records in parts], dtype=np.int64)
    records = [r for parts in members for _, recs in parts for r in recs]
    per_doc = np.array([sum(len(recs) for _, recs in parts) for parts in members], dtype=np.int64)
    if not records:
        return [(header + LINE_END).encode("utf-8")] * len(members)
    at = np.repeat(np.arange(len(heads)), counts)
    cells: list[pl.Series] = []
    for k in scalar_names:
        series, text = _column([h[k] for h in heads])
        cells.append(pl.DataFrame([series]).select(_quoted(text).alias(f"c{len(cells)}")).to_series()[at])
    for k, inner in fields:
        columns = [[r[k] for r in records]] if inner is None else [[r[k][i] for r in records] for i in inner]
        for values in columns:
            series, text = _column(values)
            cells.append(pl.DataFrame([series]).select(_quoted(text).alias(f"c{len(cells)}")).to_series())
    lines = pl.DataFrame(cells).select(pl.concat_str(pl.all(), separator=",").alias("line")).to_series()
    doc = np.repeat(np.arange(len(members)), per_doc)
    joined = (pl.DataFrame({"doc": doc, "line": lines}).group_by("doc", maintain_order=True)
              .agg(pl.col("line").str.join(LINE_END)))
    body = dict(zip(joined["doc"].to_list(), joined["line"].to_list(), strict=True))
    return [(header + LINE_END + (body[j] + LINE_END if j in body else "")).encode("utf-8")
            for j in range(len(members))]


_FRAME_KINDS: dict[Any, type] = {pl.String: str, pl.Boolean: bool, pl.Int64: int, pl.Float64: float}


def frame_csv_rows(rows: pl.DataFrame, records: str) -> list[bytes] | None:
    """`to_csv_many(rows.to_dicts())` made from the frame itself, when each row is a document of report
    scalars (every column but `records`) and one record list (`records`, a list of flat structs): the
    same expressions as `_shape_csv` on the same typed columns, without turning the cells into Python
    objects first. None when the frame is not such a shape or holds a value `_shape_csv` would not
    spell (the caller then tabulates the dicts)."""
    schema = rows.schema
    if records not in schema or records not in CONTAINERS or rows.height == 0:
        return None
    inner = schema[records]
    if not isinstance(inner, pl.List) or not isinstance(inner.inner, pl.Struct):
        return None
    scalars = [c for c in rows.columns if c != records]
    fields = [f.name for f in inner.inner.fields]
    kinds = {c: schema[c] for c in scalars} | {f.name: f.dtype for f in inner.inner.fields}
    if (set(scalars) & set(fields) or len(scalars) + len(fields) < 2
            or any(k not in _FRAME_KINDS and k != pl.Null for k in kinds.values())):
        return None
    counts = rows[records].list.len()
    if counts.null_count() or bool((counts == 0).any()):  # a document without records has its own shape
        return None
    exploded = rows.select(pl.col(records).explode())
    if exploded[records].null_count():  # a null record: not a record `_shape` accepts
        return None
    flat = exploded.select(pl.col(records).struct.unnest())
    at = np.repeat(np.arange(rows.height), counts.to_numpy())

    def spelled(series: pl.Series) -> pl.Series:
        if series.dtype == pl.Null or series.null_count() == series.len():  # `_kind` None: every cell empty
            return pl.Series("c", [""] * series.len(), dtype=pl.String)
        kind = _FRAME_KINDS[series.dtype]
        if kind is float:
            _check_floats(series)
        return pl.DataFrame([series.rename("v")]).select(_quoted(_scalar_text(pl.col("v"), kind))).to_series()

    try:
        cells = [spelled(rows[c])[at] for c in scalars] + [spelled(flat[f]) for f in fields]
    except _Unsupported:
        return None
    names = [*scalars, *fields]
    header = ",".join(n if not any(c in n for c in ',"\n\r') else '"' + n.replace('"', '""') + '"' for n in names)
    lines = pl.DataFrame([c.rename(f"c{i}") for i, c in enumerate(cells)]).select(
        pl.concat_str(pl.all(), separator=",").alias("line")).to_series()
    joined = (pl.DataFrame({"doc": at, "line": lines}).group_by("doc", maintain_order=True)
              .agg(pl.col("line").str.join(LINE_END)))
    return [(header + LINE_END + body + LINE_END).encode("utf-8") for body in joined["line"].to_list()]


def to_csv_many(docs: Sequence[dict[str, Any]]) -> list[bytes]:
    """`to_csv` of every document, the same bytes, formatted in polars a shape at a time.

    Documents of one route share a shape (the same report scalars and record fields), so their
    cells are typed and spelled as whole columns. A document of its own shape, or a value the
    columns cannot spell exactly as `to_csv` does, is written by `to_csv`.
    """
    out: list[bytes | None] = [None] * len(docs)
    groups: dict[tuple, list[tuple[int, list]]] = {}
    for i, doc in enumerate(docs):
        parts = list(leaves(doc))
        shape = _shape(parts) if parts else None
        if shape is None or len(shape[0]) + len(_field_names(shape[1])) < 2:  # one column: csv quotes ""
            out[i] = to_csv(doc)
        else:
            groups.setdefault(shape, []).append((i, parts))
    for shape, members in groups.items():
        try:
            written = _shape_csv(shape, [parts for _, parts in members])
        except _Unsupported:
            written = [to_csv(docs[i]) for i, _ in members]
        for (i, _), data in zip(members, written, strict=True):
            out[i] = data
    return [b for b in out if b is not None]


def frame_json_rows(rows: pl.DataFrame) -> list[bytes]:
    """`[orjson.dumps(d) for d in rows.to_dicts()]`, encoded by polars without the cells as Python
    objects: the same bytes (numbers in the shortest form that reads back, non-finite numbers as null,
    text as UTF-8 with the same escapes, fields in column order; tests/pipeline/release/test_tabular.py
    compares the two on awkward values)."""
    if not rows.width:
        return [b"{}"] * rows.height
    return [s.encode("utf-8") for s in rows.select(pl.struct(pl.all()).struct.json_encode()).to_series().to_list()]


def _doc_or_json(doc: dict[str, Any] | None, js: bytes) -> dict[str, Any]:
    return doc if doc is not None else orjson.loads(js)


def rendered(docs: Mapping[tuple[str, ...], dict[str, Any] | None], csv: bool = True,
             reuse: Reuse | None = None, route: str | None = None,
             made: Sequence[bytes] | None = None,
             jsons: Sequence[bytes] | None = None) -> dict[tuple[str, ...], Rendered]:
    """Documents as the bytes the renderer would make of them (JSON, and CSV when the route has a
    CSV variant): the same bytes, made early so the dicts can go.

    With `reuse` and the route's path, a CSV is keyed by its JSON bytes (`Reuse.csv_key`) and the
    previous release's CSV made from the same bytes is linked rather than written again. `jsons` (the
    documents' JSON bytes, in their order, e.g. `frame_json_rows`) let a caller pass keys with no dicts
    behind them (None): a CSV to make (not in `made`, not linked) is then tabulated from its JSON, which
    is all a CSV is made of."""
    keys = list(docs)
    jsons = list(jsons) if jsons is not None else [orjson.dumps(docs[k]) for k in keys]
    texts: list[bytes | Linked | None] = [None] * len(keys)
    csv_keys: list[str | None] = [None] * len(keys)
    if csv and reuse is not None and route is not None:
        r = BY_PATH[route]
        names = [p.name for p in r.document_params]
        for i, (k, js) in enumerate(zip(keys, jsons, strict=True)):
            csv_keys[i] = reuse.csv_key(js)
            texts[i] = reuse.linked(r.key({**dict(zip(names, k, strict=True)), "format": "csv"}), csv_keys[i] or "")
    if csv:
        todo = [i for i, t in enumerate(texts) if t is None]
        # `made`: the CSVs already tabulated from the documents' frame (`frame_csv_rows`), in their order
        for i, t in zip(todo, [made[i] for i in todo] if made is not None else
                        to_csv_many([_doc_or_json(docs[keys[i]], jsons[i]) for i in todo]), strict=True):
            texts[i] = t
    return {k: Rendered(js, t, ck) for k, js, t, ck in zip(keys, jsons, texts, csv_keys, strict=True)}


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
