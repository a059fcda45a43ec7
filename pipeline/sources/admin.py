"""Readers of the administrative inputs in `DATA_DIR/admin/` (see its SOURCES.md).

Every reader validates what it returns and raises `InputError(file, reason, row)` on the
first problem, so a build never continues on half a dataset: a missing file or
column, an unparsable value, a duplicated code, an invalid outline or a wrong count
(37 states, 774 LGAs) stops it with the file, the row and the reason.

Row numbers: for CSV files `row` is the line number in the file (the header is line
1, the first data row line 2), so an operator can open the file at that line. For
GeoJSON files it is the 1-based position of the feature in `features`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import shapely

from pipeline.errors import InputError
from pipeline.sources._csv import Dtype, read_text_columns

STATE_COUNT = 37
LGA_COUNT = 774

STATES_CSV = "states.csv"
LGAS_CSV = "lgas.csv"
OCHA_ADMIN1_CSV = "ocha_codab_nga_admin1.csv"
OCHA_ADMIN2_CSV = "ocha_codab_nga_admin2.csv"
POPULATION_CSV = "population_lga_worldpop_npc_bottomup_v2.csv"
LGA_BOUNDARIES = "lga_boundaries_grid3_eha.geojson"
LGA_BOUNDARIES_SIMPLIFIED = "lga_boundaries_grid3_eha_simplified.geojson"

# LGA totals must add up to the state rows "within rounding" (SOURCES.md); the largest
# gap in the v2 file is 0.03 % (Lagos). 0.5 % is far above rounding but far below what
# leaking the "Population Outside Settlements" sub-rows into the totals would add.
POPULATION_STATE_TOLERANCE = 0.005


@dataclass(frozen=True)
class Outlines:
    """eHA/GRID3 LGA outlines: one properties row per feature, geometries aligned with it."""

    frame: pl.DataFrame  # feature (1-based), lga_code, lga_name, state_code, state_code_eha
    geometries: np.ndarray  # shapely (Multi)Polygons, same order as `frame`


# --- helpers -------------------------------------------------------------------------


def _line(index: int) -> int:
    """CSV line number of a 0-based data row index (header is line 1)."""
    return index + 2


def _read_csv(path: Path, columns: dict[str, Dtype]) -> pl.DataFrame:
    """Read `path` as text, check the columns exist, cast each to its type.

    Everything is read as text first so that a bad value can be reported with its
    line instead of failing inside the CSV parser with a generic message.
    """
    frame = read_text_columns(path, list(columns))
    casts = []
    for name, dtype in columns.items():
        if dtype == pl.Utf8:
            continue
        cast = pl.col(name).cast(dtype, strict=False)
        bad = frame.with_row_index("_i").filter(pl.col(name).is_not_null() & cast.is_null())
        if bad.height:
            i = int(bad["_i"][0])
            raise InputError(path, f"column {name}: {bad[name][0]!r} is not a {dtype}", row=_line(i))
        casts.append(cast)
    return frame.with_columns(casts) if casts else frame


def _require_values(path: Path, frame: pl.DataFrame, columns: list[str]) -> None:
    """Fail on the first empty value in any of `columns`."""
    for name in columns:
        idx = frame.with_row_index("_pos").filter(pl.col(name).is_null() | (pl.col(name).cast(pl.Utf8) == ""))
        if idx.height:
            raise InputError(path, f"column {name} is empty", row=_line(int(idx["_pos"][0])))


def _require_pattern(path: Path, frame: pl.DataFrame, column: str, pattern: str, what: str) -> None:
    """Fail on the first value of `column` not matching `pattern`, naming its line."""
    bad = frame.with_row_index("_i").filter(~pl.col(column).str.contains(pattern))
    if bad.height:
        raise InputError(path, f"{column} {bad[column][0]!r} is not {what}", row=_line(int(bad["_i"][0])))


def _require_unique(path: Path, frame: pl.DataFrame, column: str, row_of=_line) -> None:
    """Fail on the first repeated value of `column`, naming the row of the repeat."""
    dup = frame.with_row_index("_pos").filter(pl.col(column).is_duplicated())
    if dup.height:
        first = dup.group_by(column).agg(pl.col("_pos").sort()).sort(pl.col("_pos").list.get(1)).row(0)
        value, rows = first
        raise InputError(
            path,
            f"duplicate {column} {value!r} (also at row {row_of(rows[0])})",
            row=row_of(rows[1]),
        )


def _require_count(path: Path, n: int, expected: int, what: str) -> None:
    if n != expected:
        raise InputError(path, f"expected {expected} {what}, found {n}")


# --- readers -------------------------------------------------------------------------


def read_states(path: Path) -> pl.DataFrame:
    """`states.csv`: ISO code, name, zone and the code cross-references of the 37 states."""
    frame = _read_csv(
        path,
        {
            "state_code": pl.Utf8,
            "state_name": pl.Utf8,
            "zone": pl.Utf8,
            "state_code_eha": pl.Utf8,
            "ocha_adm1_pcode": pl.Utf8,
            "area_km2_geodesic": pl.Float64,
        },
    )
    _require_values(path, frame, ["state_code", "state_name", "zone", "state_code_eha", "ocha_adm1_pcode"])
    _require_pattern(path, frame, "state_code", r"^[A-Z]{2}$", "two upper-case letters")
    for col in ("state_code", "state_code_eha", "ocha_adm1_pcode"):
        _require_unique(path, frame, col)
    _require_count(path, frame.height, STATE_COUNT, "states")
    return frame


def read_ocha_admin1(path: Path) -> pl.DataFrame:
    """OCHA COD-AB admin-1 gazetteer (37 rows): p-code and official state name."""
    frame = _read_csv(path, {"adm1_pcode": pl.Utf8, "adm1_name": pl.Utf8})
    _require_values(path, frame, ["adm1_pcode", "adm1_name"])
    _require_unique(path, frame, "adm1_pcode")
    _require_count(path, frame.height, STATE_COUNT, "states")
    return frame


def read_ocha_admin2(path: Path) -> pl.DataFrame:
    """OCHA COD-AB admin-2 gazetteer (774 rows): the p-codes and names the service publishes.

    Adds `row` (the CSV line) so later cross-checks can point at the offending line.
    """
    frame = _read_csv(
        path,
        {
            "adm2_pcode": pl.Utf8,
            "adm2_name": pl.Utf8,
            "adm1_pcode": pl.Utf8,
            "center_lon": pl.Float64,
            "center_lat": pl.Float64,
            "area_sqkm": pl.Float64,
        },
    )
    _require_values(path, frame, ["adm2_pcode", "adm2_name", "adm1_pcode", "center_lon", "center_lat"])
    _require_pattern(path, frame, "adm2_pcode", r"^NG\d{6}$", "of the form NG000000")
    wrong_parent = frame.with_row_index("_i").filter(pl.col("adm2_pcode").str.slice(0, 5) != pl.col("adm1_pcode"))
    if wrong_parent.height:
        r = wrong_parent.row(0, named=True)
        raise InputError(path, f"adm2_pcode {r['adm2_pcode']} does not start with its adm1_pcode {r['adm1_pcode']}", row=_line(r["_i"]))
    _require_unique(path, frame, "adm2_pcode")
    _require_count(path, frame.height, LGA_COUNT, "LGAs")
    return frame.with_row_index("row").with_columns((pl.col("row") + 2).cast(pl.Int64))


def read_lgas_table(path: Path) -> pl.DataFrame:
    """`lgas.csv`, a table derived from the sources when the data directory was assembled. Used only to cross-check our own work
    (crosswalk, geodesic area) in tests; the service computes these itself."""
    frame = _read_csv(
        path,
        {
            "lga_code": pl.Utf8,
            "lga_name": pl.Utf8,
            "state_code": pl.Utf8,
            "ocha_adm2_pcode": pl.Utf8,
            "ocha_centroid_in_this_polygon": pl.Utf8,
            "area_km2_geodesic": pl.Float64,
            "population_worldpop_v2": pl.Int64,
        },
    )
    _require_unique(path, frame, "lga_code")
    _require_unique(path, frame, "ocha_adm2_pcode")
    _require_count(path, frame.height, LGA_COUNT, "LGAs")
    return frame


def read_population(path: Path) -> pl.DataFrame:
    """WorldPop/NPC bottom-up v2 LGA totals: `lga_code` (eHA code), `population` (Float64).

    The file mixes three kinds of row: state totals (empty lga_code), LGA totals (empty
    notes) and "Population Outside Settlements" sub-rows, which are a PART of the LGA
    total. Only LGA totals are returned; they are checked against the state rows so a
    change of layout that let sub-rows through would fail here, not inflate populations.
    """
    frame = _read_csv(
        path,
        {
            "state_code_eha": pl.Utf8,
            "state": pl.Utf8,
            "lga_code": pl.Utf8,
            "lga": pl.Utf8,
            "notes": pl.Utf8,
            "total": pl.Float64,
        },
    )
    _require_values(path, frame, ["state_code_eha", "total"])
    frame = frame.with_row_index("_i")
    negative = frame.filter(pl.col("total") < 0)
    if negative.height:
        raise InputError(path, f"negative population {negative['total'][0]}", row=_line(int(negative["_i"][0])))
    is_state = pl.col("lga_code").is_null() | (pl.col("lga_code") == "")
    is_total = ~is_state & (pl.col("notes").is_null() | (pl.col("notes") == ""))
    states = frame.filter(is_state)
    lgas = frame.filter(is_total)
    _require_unique(path, lgas, "lga_code", row_of=lambda i: _line(int(lgas["_i"][i])))
    _require_unique(path, states, "state_code_eha", row_of=lambda i: _line(int(states["_i"][i])))
    _require_count(path, states.height, STATE_COUNT, "state total rows")
    _require_count(path, lgas.height, LGA_COUNT, "LGA total rows (rows with an lga_code and empty notes)")
    check = (
        lgas.group_by("state_code_eha")
        .agg(pl.col("total").sum().alias("lga_sum"))
        .join(states.select("state_code_eha", "total", "_i"), on="state_code_eha", how="full", coalesce=True)
        .filter(
            pl.col("lga_sum").is_null()
            | pl.col("total").is_null()
            | ((pl.col("lga_sum") - pl.col("total")).abs() > POPULATION_STATE_TOLERANCE * pl.col("total"))
        )
        .sort("state_code_eha")
    )
    if check.height:
        r = check.row(0, named=True)
        raise InputError(
            path,
            f"LGA totals of state {r['state_code_eha']} sum to {r['lga_sum']} but the state row says {r['total']}",
            row=None if r["_i"] is None else _line(r["_i"]),
        )
    return lgas.select(
        "lga_code", "lga", "state_code_eha", pl.col("total").alias("population"), (pl.col("_i") + 2).cast(pl.Int64).alias("row")
    )


def read_outlines(path: Path) -> Outlines:
    """eHA/GRID3 LGA outlines (full resolution or simplified file, same properties).

    Every feature must carry its codes and a valid Polygon/MultiPolygon; 774 features in
    37 states. Geometries are parsed in one vectorised shapely call.
    """
    if not path.is_file():
        raise InputError(path, "file not found")
    try:
        doc = orjson.loads(path.read_bytes())
        features = doc["features"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise InputError(path, f"not a GeoJSON FeatureCollection: {exc}") from exc
    keys = ("lga_code", "lga_name", "state_code", "state_code_eha")
    rows: dict[str, list] = {k: [] for k in keys}
    geometry_json: list[bytes] = []
    for n, feature in enumerate(features, start=1):
        props = feature.get("properties") or {}
        for k in keys:
            value = props.get(k)
            if value is None or str(value).strip() == "":
                raise InputError(path, f"feature has no property {k}", row=n)
            rows[k].append(str(value).strip())
        geometry = feature.get("geometry")
        if not geometry or geometry.get("type") not in ("Polygon", "MultiPolygon"):
            kind = None if not geometry else geometry.get("type")
            raise InputError(path, f"lga_code {rows['lga_code'][-1]}: geometry is {kind}, expected Polygon or MultiPolygon", row=n)
        geometry_json.append(orjson.dumps(geometry))
    try:
        geoms = shapely.from_geojson(geometry_json, on_invalid="raise")
    except Exception as exc:
        raise InputError(path, f"unreadable geometry: {exc}") from exc
    frame = pl.DataFrame(rows).with_row_index("feature", offset=1).with_columns(pl.col("feature").cast(pl.Int64))
    empty = np.flatnonzero(shapely.is_empty(geoms))
    if empty.size:
        raise InputError(path, f"lga_code {frame['lga_code'][int(empty[0])]}: empty geometry", row=int(empty[0]) + 1)
    invalid = np.flatnonzero(~shapely.is_valid(geoms))
    if invalid.size:
        i = int(invalid[0])
        raise InputError(
            path,
            f"lga_code {frame['lga_code'][i]}: invalid geometry ({shapely.is_valid_reason(geoms[i])})",
            row=i + 1,
        )
    _require_unique(path, frame, "lga_code", row_of=lambda i: i + 1)
    _require_count(path, frame.height, LGA_COUNT, "LGA features")
    _require_count(path, frame["state_code"].n_unique(), STATE_COUNT, "states among the LGA features")
    return Outlines(frame=frame, geometries=geoms)
