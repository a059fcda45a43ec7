"""The dated LGA case series (no stated licence) is used for fitting and validation only:
no row of it may appear in any file of a release, and the build works without it.

The scan reads every file of the built release as it ships: text (JSON, CSV, HTML, SVG,
Markdown), gzip copies, the bundle's Parquet tables and its zip. A "row" is recognised by
signatures no other figure makes by chance: an LGA-month's (confirmed, confirmed + clinical)
pair and three consecutive months of one LGA's confirmed counts, in that order.

The scan runs on every file of a 12k-file release, so it finds a text's numbers with numpy and
reads a window of three only where each number can be that place's value of some signature; it
parses a CSV or JSON (for its columns, rows and records) only when some number in it can be a
middle and stands where a value can, or has an exponent. Each shortcut only skips what cannot
match: the scan finds what reading every number and every record would find.
"""

from __future__ import annotations

import gzip
import io
import math
import random
import re
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import orjson
import polars as pl
import pytest

from pipeline.sources.dated_cases import DATED_LGA_CASES, read_raw_dated
from tests.paths import DATA_DIR, data_marks, linked_data

pytestmark = data_marks(DATED_LGA_CASES)

NUMBER = re.compile(rb"-?\d+(?:\.\d+)?")  # a number of a text; `_tokens` finds the same spans with numpy
MIN_COUNT = 100  # small counts (0-99) are everywhere in a release; they make no signature
NAN = float("nan")

Window = tuple[float, ...]
Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


class Signatures(NamedTuple):
    """The series' signatures, with the values of each place of a window indexed. A window of three
    values can only be a signature when its middle is some signature's middle (and its first and last
    values some signature's first and last), so every scan first finds those (vectorised, or by
    hashing) and looks up only the windows around them."""

    pairs: frozenset[Window]
    triples: frozenset[Window]
    middles: frozenset[float]
    sorted_middles: npt.NDArray[np.float64]
    places: tuple[Ints, Ints, Ints]  # `_place_keys` of the first, middle and last values
    digits: int  # no integer part with more significant digits is in any of `places`

    def match(self, windows: list[list[float]]) -> list[Window]:
        return [w for w in map(tuple, windows) if w in self.triples or w in self.pairs]


def signatures() -> Signatures:
    """(pairs, triples) of the dated series."""
    raw = read_raw_dated(DATA_DIR)
    assert raw is not None
    d = raw.select(
        "lga_code", pl.col("year").cast(pl.Int64), pl.col("month").cast(pl.Int64),
        pl.col("confirmed_uncomplicated").cast(pl.Float64, strict=False).alias("c"),
        pl.col("malaria_cases_total").cast(pl.Float64, strict=False).alias("t"),
    ).sort("lga_code", "year", "month")
    d = d.with_columns((pl.col("t") - pl.col("c")).alias("k"))
    pairs: set[Window] = {(k, c, t) for k, c, t in d.select("k", "c", "t").iter_rows() if c and t and c >= MIN_COUNT and k and k > 0}
    triples: set[Window] = set()
    for _, g in d.group_by("lga_code"):
        c = g["c"].to_list()
        triples |= {tuple(c[i:i + 3]) for i in range(len(c) - 2)
                    if all(v is not None and v >= MIN_COUNT for v in c[i:i + 3])}
    return _index(pairs, triples)


def _place_keys(values: set[float]) -> Ints:
    """Sorted keys (2 * integer part, + 1 when written with a fraction) of every number that can equal
    one of the values: v written without a fraction, or with one: floor(v), and v - 1 for an integral
    v (1233.99999999999999999 is 1234.0 as a float)."""
    whole = {int(v) for v in values if v.is_integer()}
    near = {math.floor(v) for v in values} | {w - 1 for w in whole}
    return np.array(sorted({2 * w for w in whole} | {2 * n + 1 for n in near}), dtype=np.int64)


def _index(pairs: set[Window], triples: set[Window]) -> Signatures:
    """The signatures with what each scan looks up first, computed once per scan."""
    windows = pairs | triples
    assert all(v > 0 for w in windows for v in w)  # `_tokens` relies on it: no number written with "-" is one
    assert all(w[1] < 2 ** 53 for w in windows)  # `_record_hits` relies on it
    first, middle, last = (_place_keys({w[at] for w in windows}) for at in range(3))
    middles = frozenset(w[1] for w in windows)
    top = max((int(k[-1]) // 2 for k in (first, middle, last) if len(k)), default=0)
    return Signatures(frozenset(pairs), frozenset(triples), middles, np.array(sorted(middles), dtype=np.float64),
                      (first, middle, last), len(str(top)))


def _in_sorted(values: npt.NDArray[Any], sorted_values: npt.NDArray[Any]) -> Mask:
    """Which values are in a sorted array (NaN never is), by binary search."""
    if not len(sorted_values):
        return np.zeros(values.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_values, values), len(sorted_values) - 1)
    return np.asarray(sorted_values[pos] == values)


def _hits(values: npt.NDArray[np.float64], sig: Signatures) -> list[Window]:
    """Every window of three consecutive values (a 1-D float array, nulls as NaN) that is a signature."""
    if len(values) < 3:
        return []
    at = np.flatnonzero(_in_sorted(values[1:-1], sig.sorted_middles))
    return sig.match(np.stack((values[at], values[at + 1], values[at + 2]), axis=1).tolist()) if len(at) else []


def _row_hits(table: npt.NDArray[np.float64], sig: Signatures) -> list[Window]:
    """`_hits` along every row of a numeric table (nulls as NaN), all rows and columns at once."""
    if table.ndim != 2 or table.shape[1] < 3:
        return []
    i, j = np.nonzero(_in_sorted(table[:, 1:-1], sig.sorted_middles))
    return sig.match(np.stack((table[i, j], table[i, j + 1], table[i, j + 2]), axis=1).tolist()) if len(i) else []


def _table_hits(df: pl.DataFrame, sig: Signatures) -> list[Window]:
    """Windows down each numeric column and along each row of the numeric columns. Integer and float
    columns are cast by polars (exact for every value a column's `to_list` would give as a float);
    any other numeric type (Decimal) is read down its column as Python floats, as the row scan casts it."""
    schema = df.schema
    nums = [c for c, t in schema.items() if t.is_numeric()]
    if not nums:
        return []
    cols = [df[c].cast(pl.Float64).to_numpy() for c in nums]
    found: list[Window] = []
    for c, col in zip(nums, cols, strict=True):  # down each column
        if not (schema[c].is_integer() or schema[c].is_float()):
            col = np.array([NAN if v is None else float(v) for v in df[c].to_list()], dtype=np.float64)
        found += _hits(col, sig)
    return found + _row_hits(np.column_stack(cols).astype(np.float64, copy=False), sig)  # along each row


def _numeric(v: object) -> float:
    """A JSON value as a number of a column: ints and floats (never booleans); anything else is NaN."""
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else NAN


def _record_hits(records: list[dict[str, object]], sig: Signatures) -> list[Window]:
    """Windows down each key's values in a list of objects. A key is only read further when one of
    its inner values is a signature's middle: `v in middles` holds for an int or float exactly when
    `float(v)` is one (every middle is below 2**53, where ints convert exactly; booleans are 0/1,
    below any middle; strings and None are never equal to a float)."""
    found: list[Window] = []
    n = len(records)
    for key in {k for r in records for k in r}:
        inner = [r.get(key) for r in records[1:n - 1]]
        try:
            if sig.middles.isdisjoint(inner):
                continue
        except TypeError:  # a nested list or object among the values: it is never a middle
            pass
        at = [i for i, v in enumerate(inner) if isinstance(v, int | float) and not isinstance(v, bool)
              and v in sig.middles]
        found += sig.match([[_numeric(records[i].get(key)), _numeric(records[i + 1][key]),
                             _numeric(records[i + 2].get(key))] for i in at])
    return found


_CONTAINERS = (dict, list)


def _json_hits(doc: object, sig: Signatures) -> list[Window]:
    """For every list of objects anywhere in a JSON document, the windows down each key's values
    (missing or non-numeric values as NaN), in list order."""
    found: list[Window] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack += [v for v in node.values() if isinstance(v, _CONTAINERS)]
        elif isinstance(node, list):
            records = [r for r in node if isinstance(r, dict)]
            if len(records) >= 3:
                found += _record_hits(records, sig)
            if records:
                stack += [v for r in records for v in r.values() if isinstance(v, _CONTAINERS)]
            stack += [v for v in node if isinstance(v, list)]
    return found


class Tokens(NamedTuple):
    """The numbers of a text (NUMBER's matches) as arrays: byte spans, and for each place of a window
    whether the number could stand there (a superset; the exact test is `float` of its bytes)."""

    start: Ints
    end: Ints
    first: Mask
    middle: Mask
    last: Mask


def _tokens(a: npt.NDArray[np.uint8], sig: Signatures) -> Tokens:
    """NUMBER's matches, found with numpy rather than one Python object per number (the regex, and
    `float` of each match, were most of the scan's time). A match is a run of digits, a "-" just
    before it, and a "." plus the next run when the "." joins them; in a chain of runs joined by
    single dots (1.2.3.4) the regex takes them two by two, so a run starts a match when its place in
    its chain is even. A number can equal a signature's value v only when it is not negative and its
    integer part is v, or with a fraction floor(v) or v - 1 (`_place_keys`), so the integer part is
    computed from the run's last `sig.digits` digits and counts only when no earlier digit is 1-9."""
    digit = np.zeros(len(a) + 2, dtype=bool)
    np.less(a - np.uint8(48), 10, out=digit[1:-1])
    edges = np.flatnonzero(digit[1:] != digit[:-1])
    s, e = edges[0::2], edges[1::2]
    n = len(s)
    if not n:
        none, no = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        return Tokens(none, none, no, no, no)
    joined = np.zeros(n, dtype=bool)  # run k is the fraction of run k - 1 if it is its match's
    joined[1:] = (s[1:] == e[:-1] + 1) & (a[e[:-1]] == ord("."))
    k = np.arange(n)
    chain_start = np.maximum.accumulate(np.where(joined, 0, k))
    tok = np.flatnonzero(((k - chain_start) & 1) == 0)
    nxt = np.minimum(tok + 1, n - 1)
    frac = (tok + 1 < n) & joined[nxt]
    rs, re_ = s[tok], e[tok]  # the integer part's run
    neg = (rs > 0) & (a[np.maximum(rs - 1, 0)] == ord("-"))
    whole = np.zeros(len(tok), dtype=np.int64)
    for place in range(sig.digits):
        p = re_ - 1 - place
        whole += np.where(p >= rs, a[np.maximum(p, 0)] - np.int64(48), 0) * 10 ** place
    whole[neg] = -1
    long = np.flatnonzero(re_ - rs > sig.digits)
    for place in range(sig.digits, int((re_ - rs).max())):  # a 1-9 digit before the last `digits`
        p = re_[long] - 1 - place
        whole[long[(p >= rs[long]) & (a[np.maximum(p, 0)] > ord("0"))]] = -1
    key = 2 * whole + frac  # as `_place_keys`; a number that can be none is below every key
    first, middle, last = (_in_sorted(key, keys) for keys in sig.places)
    return Tokens(rs - neg, np.where(frac, e[nxt], re_), first, middle, last)


def _text_hits(data: bytes, tokens: Tokens, sig: Signatures) -> list[Window]:
    """Windows of three consecutive numbers of the text that can be a signature, each number `float`
    of its bytes, as of the regex's match."""
    at = np.flatnonzero(tokens.first[:-2] & tokens.middle[1:-1] & tokens.last[2:]) + 1
    if not len(at):
        return []
    bounds = [b.tolist() for d in (-1, 0, 1) for b in (tokens.start[at + d], tokens.end[at + d])]
    return sig.match([[float(data[s0:e0]), float(data[s1:e1]), float(data[s2:e2])]
                      for s0, e0, s1, e1, s2, e2 in zip(*bounds, strict=True)])


def _bytes(chars: bytes, *, edge: bool, complement: bool = False) -> Mask:
    """A lookup table over the 256 byte values and one more (256: before the first or after the last
    byte of a file) for the character on either side of a number."""
    table = np.zeros(257, dtype=bool)
    table[list(chars)] = True
    table ^= complement
    table[256] = edge
    return table


_LETTERS = bytes(range(ord("A"), ord("Z") + 1)) + bytes(range(ord("a"), ord("z") + 1))
# In a CSV cell polars reads as a number, no ASCII letter stands just before the integer part's first
# digit (only an exponent's "e", which the exponent rule below covers) and no digit is followed by "-".
_CSV_BEFORE, _CSV_AFTER = _bytes(_LETTERS, edge=True, complement=True), _bytes(b"-", edge=True, complement=True)
# A JSON number value stands between structural characters or whitespace (RFC 8259).
_JSON_BEFORE, _JSON_AFTER = _bytes(b":,[ \t\r\n", edge=True), _bytes(b",]} \t\r\n", edge=True)
_EXPONENT = _bytes(b"eE", edge=False)


def _may_hold_a_middle(a: npt.NDArray[np.uint8], tokens: Tokens, before: Mask, after: Mask) -> bool:
    """Whether a CSV or JSON file can hold a numeric value equal to some middle, so that its columns or
    records must be read: some number that can be a middle stands where such a value can stand, or some number
    has an exponent (1.234e3 is 1234, and the regex sees 1.234 and 3). Otherwise no window of its
    columns, rows or records can have a middle, and the parse is skipped."""
    prev = np.where(tokens.start > 0, a[np.maximum(tokens.start - 1, 0)], 256)
    nxt = np.where(tokens.end < len(a), a[np.minimum(tokens.end, len(a) - 1)], 256)
    return bool(_EXPONENT[nxt].any() or (tokens.middle & before[prev] & after[nxt]).any())


def scan_bytes(name: str, data: bytes, sig: Signatures) -> list[str]:
    """Signatures found in one file (recursing into gzip and zip)."""
    if name.endswith(".gz"):
        return scan_bytes(name[:-3], gzip.decompress(data), sig)
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return [f for m in z.namelist() for f in scan_bytes(f"{name}!{m}", z.read(m), sig)]
    if name.endswith(".parquet"):
        return [f"{name}: {h}" for h in _table_hits(pl.read_parquet(io.BytesIO(data)), sig)]
    a = np.frombuffer(data, dtype=np.uint8)
    tokens = _tokens(a, sig)
    found = _text_hits(data, tokens, sig)
    if name.endswith(".csv") and _may_hold_a_middle(a, tokens, _CSV_BEFORE, _CSV_AFTER):
        found += _table_hits(pl.read_csv(io.BytesIO(data)), sig)
    if name.endswith(".json") and _may_hold_a_middle(a, tokens, _JSON_BEFORE, _JSON_AFTER):
        found += _json_hits(orjson.loads(data), sig)  # records: each key's values down a list of objects
    return [f"{name}: {h}" for h in found]


def scan_release(root: Path) -> list[str]:
    sig = signatures()
    found: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix == ".gz" and path.with_suffix("").is_file():
            continue  # a precompressed copy of a file scanned as itself
        found += scan_bytes(str(path.relative_to(root)), path.read_bytes(), sig)
    return found


def test_the_scan_finds_a_leaked_row(tmp_path: Path) -> None:
    """The detector can fail: a row, a column and a zipped CSV of the series are each found."""
    raw = read_raw_dated(DATA_DIR)
    assert raw is not None
    row = raw.filter(pl.col("clinically_diagnosed").cast(pl.Float64, strict=False) > 0,
                     pl.col("confirmed_uncomplicated").cast(pl.Float64, strict=False) >= MIN_COUNT).row(0, named=True)
    (tmp_path / "a.json").write_bytes(orjson.dumps({"lga": row["lga_code"], "clinical": int(row["clinically_diagnosed"]),
                                                    "confirmed": int(row["confirmed_uncomplicated"]),
                                                    "total": int(row["malaria_cases_total"])}))
    lga = raw.filter(pl.col("lga_code") == raw["lga_code"][0])
    pl.DataFrame({"cases": lga["confirmed_uncomplicated"].cast(pl.Int64)}).write_parquet(tmp_path / "b.parquet")
    (tmp_path / "e.json").write_bytes(orjson.dumps(
        [{"month": m, "cases": int(c)} for m, c in enumerate(lga["confirmed_uncomplicated"].cast(pl.Int64))]))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("t.csv", lga.select("year", "month", "confirmed_uncomplicated").write_csv())
    (tmp_path / "c.zip").write_bytes(buf.getvalue())
    (tmp_path / "d.json.gz").write_bytes(gzip.compress((tmp_path / "a.json").read_bytes()))
    # a row of a CSV whose text puts another number between the values: only the scan along rows
    # of the numeric columns sees the pair
    pl.DataFrame({"clinical": [int(row["clinically_diagnosed"])], "note": ["x7"],
                  "confirmed": [int(row["confirmed_uncomplicated"])], "total": [int(row["malaria_cases_total"])]},
                 ).write_csv(tmp_path / "f.csv")
    found = scan_release(tmp_path)
    assert {f.split(":")[0].split("!")[0] for f in found} == {"a.json", "b.parquet", "c.zip", "d.json", "e.json",
                                                                "f.csv"}


def test_the_scan_finds_each_written_form(tmp_path: Path) -> None:
    """Three consecutive counts of one LGA are found however a file writes them, where only the scan
    of records or columns sees them (other numbers stand between them in the text), and where a
    file is parsed only because a number in it can be a middle or has an exponent."""
    sig = signatures()
    a, b, c = (int(v) for v in min(sig.triples))

    def e(v: int) -> str:  # 1234 as 1.234e3: the text shows 1.234 and 3
        return f"{str(v)[0]}.{str(v)[1:]}e{len(str(v)) - 1}"

    files = {
        # a list of records nested inside an object inside a list
        "g.json": orjson.dumps([{"x": {"rows": [{"v": a, "n": 7}, {"v": b, "n": 7}, {"v": c, "n": 7, "s": "NG1"}]}}]),
        "h.json": orjson.dumps({"rows": [{"v": float(v), "n": 7} for v in (a, b, c)]}),  # floats: 1234.0
        "i.json": ('{"rows":[' + ",".join(f'{{"v":{e(v)},"n":7}}' for v in (a, b, c)) + "]}").encode(),
        "j.csv": f"id,v,n\nNG001,{a},7\nNG002,{b},7\nNG003,{c},7\n".encode(),  # down a column
        "k.csv": f"id,v,n\nNG001,{e(a)},7\nNG002,{e(b)},7\nNG003,{e(c)},7\n".encode(),
        "l.csv": f'id,v,n\nNG001,"{a}",7\nNG002,"{b}",7\nNG003,"{c}",7\n'.encode(),  # quoted
        "p.json": orjson.dumps({"rows": [{"v": v, "n": 7} for v in (a, b, c)]}, option=orjson.OPT_INDENT_2),
        # leading zeros, a decimal that rounds to the count, a fraction of zeros; signs around
        "m.txt": f"-1 0{a} {b - 1}.99999999999999999999 {c}.000-2".encode(),
        # no finds: negative counts down a column, and a "-" that makes the next number negative
        "n.csv": f"v,w\n-{a},x\n-{b},y\n-{c},z\n{a}-{b}-{c},q\n".encode(),
        "o.json": orjson.dumps([{"v": -a}, {"v": -b}, {"v": -c}]),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    found = scan_release(tmp_path)
    assert sorted(f.split(":")[0] for f in found) == ["g.json", "h.json", "i.json", "j.csv", "k.csv", "l.csv", "m.txt",
                                                         "p.json"]
    assert all(f.endswith(str((float(a), float(b), float(c)))) for f in found)


def test_numbers_are_the_regexs_and_no_window_is_missed() -> None:
    """`_tokens` gives NUMBER's spans, and the text scan finds exactly the windows of `float` of
    NUMBER's matches that are signatures, on made-up text dense in signature values (small values,
    a non-integral middle, a value reached by rounding, chains of dots, signs, exponents)."""
    sig = _index({(2.0, 1.0, 2.0), (5.0, 30.0, 100.0), (3.0, 1234.0, 4.0)},
                 {(1.0, 2.0, 3.0), (12.0, 0.5, 7.0), (10.0, 10.0, 10.0)})
    rng = random.Random(36)
    texts = [b"", b"1", b"-", b"1.2.3.4.5", b"1..2", b"--1-2-3", b"1.-2 3", b"a1.2.3", b"0.5.", b".5 12 0.5 7",
             b"x-1 2 3-", b"1 2 3", b"001 002.0 3.000", b"12,0.50,7", b"3 1233.99999999999999999 4",
             b"10 0010 10.000", b"5 30 100.0", b"5 3.0e1 100", b"9" * 40 + b" 1 2 3"]
    texts += [bytes(rng.choice(b"0123456789.-- e,x") for _ in range(rng.randrange(1, 200))) for _ in range(2000)]
    for text in texts:
        a = np.frombuffer(text, dtype=np.uint8)
        tokens = _tokens(a, sig)
        assert list(zip(tokens.start.tolist(), tokens.end.tolist(), strict=True)) == \
            [m.span() for m in NUMBER.finditer(text)], text
        values = [float(m) for m in NUMBER.findall(text)]
        expected = [w for w in zip(values, values[1:], values[2:], strict=False) if w in sig.triples or w in sig.pairs]
        assert sorted(_text_hits(text, tokens, sig)) == sorted(expected), text


def test_no_dated_row_in_any_release_file(real_build: Path) -> None:
    releases = sorted((real_build / "releases").iterdir())
    assert releases
    found = scan_release(releases[-1])
    assert found == [], f"dated series rows found in the release: {found[:5]}"


@pytest.fixture(scope="module")
def data_without_dated_series(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return linked_data(tmp_path_factory.mktemp("nodated") / "data", DATED_LGA_CASES)


def test_build_without_the_dated_series(data_without_dated_series: Path) -> None:
    """Without the dated series the seasons are fitted to the archetype profiles alone, no month test
    runs, no rain term enters the score, and the report says so rather than inventing figures."""
    from pipeline.datasets import risk, transmission, validation
    from pipeline.datasets.base import BuildContext
    from pipeline.geography import load_geography

    geo = load_geography(data_without_dated_series)
    ctx = BuildContext(data_without_dated_series, "t", geo)
    md, res = risk.model_run(ctx)
    assert md.months is None and (md.rain_factor == 1.0).all()
    tr = transmission.produce(ctx).documents["/v1/transmission/states"][()]["method"]
    assert tr["check"]["dated_lga_series"] == 0 and tr["check"]["series"] == 22
    # model 5's fields fall back honestly: no calibration, no cross-validated error, no LGA detail claimed
    docs = transmission.produce(ctx).documents
    season = docs["/v1/transmission/states"][()]["states"][0]["season"]
    assert season["peak_window_calibrated"] is False and season["season_start_error_months"] is None
    assert season["season_class"] in ("marked", "moderate", "weak") and len(season["peak_window"]) >= 1
    assert "model_5" not in tr["check"] and tr["peak_window_half_width_months"] == {
        "uncalibrated": {"marked": 1, "moderate": 2, "weak": 6}}
    assert all(r["season_level"] == "state" for d in docs["/v1/transmission/lgas"].values() for r in d["lgas"])
    report = orjson.loads(validation.produce(ctx).files[validation.VALIDATION_FILE][1])
    assert report["months"]["tests"] is None and "absent" in report["months"]["note"]
    assert report["seasons"]["profiles"]["states"] == []
    assert len(res.estimated) > 90
