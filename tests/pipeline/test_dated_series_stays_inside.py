"""The dated LGA case series (no stated licence) is used for fitting and validation only:
no row of it may appear in any file of a release, and the build works without it.

The scan reads every file of the built release as it ships: text (JSON, CSV, HTML, SVG,
Markdown), gzip copies, the bundle's Parquet tables and its zip. A "row" is recognised by
signatures no other figure makes by chance: an LGA-month's (confirmed, confirmed + clinical)
pair and three consecutive months of one LGA's confirmed counts, in that order.
"""

from __future__ import annotations

import gzip
import io
import re
import zipfile
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest

from pipeline.sources.dated_cases import DATED_LGA_CASES, read_raw_dated
from tests.paths import DATA_DIR, data_marks

pytestmark = data_marks(DATED_LGA_CASES)

NUMBER = re.compile(rb"-?\d+(?:\.\d+)?")
MIN_COUNT = 100  # small counts (0-99) are everywhere in a release; they make no signature


def signatures() -> tuple[set[tuple[float, ...]], set[tuple[float, ...]]]:
    """(pairs, triples) of the dated series."""
    raw = read_raw_dated(DATA_DIR)
    assert raw is not None
    d = raw.select(
        "lga_code", pl.col("year").cast(pl.Int64), pl.col("month").cast(pl.Int64),
        pl.col("confirmed_uncomplicated").cast(pl.Float64, strict=False).alias("c"),
        pl.col("malaria_cases_total").cast(pl.Float64, strict=False).alias("t"),
    ).sort("lga_code", "year", "month")
    d = d.with_columns((pl.col("t") - pl.col("c")).alias("k"))
    pairs = {(k, c, t) for k, c, t in d.select("k", "c", "t").iter_rows() if c and t and c >= MIN_COUNT and k and k > 0}
    triples = set()
    for _, g in d.group_by("lga_code"):
        c = g["c"].to_list()
        triples |= {tuple(c[i:i + 3]) for i in range(len(c) - 2)
                    if all(v is not None and v >= MIN_COUNT for v in c[i:i + 3])}
    return pairs, triples


_MIDDLES: dict[tuple[int, int], tuple[set, set, frozenset[float], np.ndarray]] = {}
LONG = 256  # a sequence at least this long is searched with numpy; shorter ones (a CSV row) in Python


def _middles(pairs: set, triples: set) -> tuple[frozenset[float], np.ndarray]:
    """The signatures' middle values, computed once per pair of sets (kept with them, so ids stay theirs)."""
    got = _MIDDLES.get((id(pairs), id(triples)))
    if got is None or got[0] is not pairs or got[1] is not triples:
        mids = frozenset({p[1] for p in pairs} | {t[1] for t in triples})
        got = (pairs, triples, mids, np.array(sorted(mids), dtype=np.float64))
        _MIDDLES[(id(pairs), id(triples))] = got
    return got[2], got[3]


def _hits(values: list[float], pairs: set, triples: set) -> list[tuple[float, ...]]:
    """Every window of three consecutive values that is a signature. A window can only be one when
    its middle value is some signature's middle, so only those windows are looked up (vectorised)."""
    if len(values) < 3:
        return []
    mids, sorted_mids = _middles(pairs, triples)
    if len(values) < LONG or not len(sorted_mids):
        at = [i for i in range(len(values) - 2) if values[i + 1] in mids]
    else:
        inner = np.asarray(values[1:-1], dtype=np.float64)
        pos = np.minimum(np.searchsorted(sorted_mids, inner), len(sorted_mids) - 1)
        at = np.flatnonzero(sorted_mids[pos] == inner).tolist()
    return [w for w in (tuple(values[i:i + 3]) for i in at) if w in triples or w in pairs]


def _row_hits(table: np.ndarray, pairs: set, triples: set) -> list[tuple[float, ...]]:
    """`_hits` along every row of a numeric table (nulls as NaN): each window of three adjacent
    columns is looked up only in the rows whose middle value is some signature's middle."""
    _, middles = _middles(pairs, triples)
    out: list[tuple[float, ...]] = []
    for j in range(table.shape[1] - 2):
        for i in np.flatnonzero(np.isin(table[:, j + 1], middles, assume_unique=False, kind="sort")).tolist():
            w = tuple(float(v) for v in table[i, j:j + 3])
            if w in triples or w in pairs:
                out.append(w)
    return out


def scan_bytes(name: str, data: bytes, pairs: set, triples: set) -> list[str]:
    """Signatures found in one file (recursing into gzip and zip)."""
    if name.endswith(".gz"):
        return scan_bytes(name[:-3], gzip.decompress(data), pairs, triples)
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return [f for m in z.namelist() for f in scan_bytes(f"{name}!{m}", z.read(m), pairs, triples)]
    if name.endswith((".parquet", ".csv")):
        df = pl.read_parquet(io.BytesIO(data)) if name.endswith(".parquet") else pl.read_csv(io.BytesIO(data))
        found = _hits([float(m) for m in NUMBER.findall(data)], pairs, triples) if name.endswith(".csv") else []
        nums = [c for c, t in df.schema.items() if t.is_numeric()]
        for c in nums:  # down each column
            found += _hits([float(v) if v is not None else float("nan") for v in df[c].to_list()], pairs, triples)
        found += _row_hits(df.select(nums).cast(pl.Float64).to_numpy(), pairs, triples)  # along each row
        return [f"{name}: {h}" for h in found]
    values = [float(m) for m in NUMBER.findall(data)]
    found = _hits(values, pairs, triples)
    if name.endswith(".json"):  # records: each key's values down a list of objects
        found += [h for seq in _json_columns(orjson.loads(data)) for h in _hits(seq, pairs, triples)]
    return [f"{name}: {h}" for h in found]


def _json_columns(doc: object) -> list[list[float]]:
    """For every list of objects in a JSON document, each numeric key's values in list order."""
    out: list[list[float]] = []
    if isinstance(doc, dict):
        for v in doc.values():
            out += _json_columns(v)
    elif isinstance(doc, list):
        records = [r for r in doc if isinstance(r, dict)]
        if records:
            for key in {k for r in records for k in r}:
                out.append([float(r[key]) if isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool)
                            else float("nan") for r in records])
        for v in doc:
            out += _json_columns(v)
    return out


def scan_release(root: Path) -> list[str]:
    pairs, triples = signatures()
    found: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix == ".gz" and path.with_suffix("").is_file():
            continue  # a precompressed copy of a file scanned as itself
        found += scan_bytes(str(path.relative_to(root)), path.read_bytes(), pairs, triples)
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


def test_no_dated_row_in_any_release_file(real_build: Path) -> None:
    releases = sorted((real_build / "releases").iterdir())
    assert releases
    found = scan_release(releases[-1])
    assert found == [], f"dated series rows found in the release: {found[:5]}"


@pytest.fixture(scope="module")
def data_without_dated_series(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("nodated") / "data"
    skip = Path(DATED_LGA_CASES)
    for path in DATA_DIR.rglob("*"):
        rel = path.relative_to(DATA_DIR)
        if path.is_file() and skip not in rel.parents:
            (data / rel).parent.mkdir(parents=True, exist_ok=True)
            (data / rel).symlink_to(path.resolve())
    return data


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
