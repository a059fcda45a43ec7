"""The service's geography: 37 states and 774 LGAs with codes, names, outlines, area,
population and an urban flag, joined from OCHA COD-AB, eHA/GRID3 and WorldPop/NPC.

Identity comes from OCHA (p-code `lga_code`, `adm2_name`), because that is the code
humanitarian and health partners join on. Shape, area and population come from the
eHA/GRID3 outlines (the WorldPop/NPC table is keyed on the eHA code), so all three
describe the same polygon. The link between the two is computed here
(`build_crosswalk`), not taken from the derived `admin/lgas.csv`, so that the rule is
visible, tested and re-run when either source changes.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyproj
import shapely

from pipeline.errors import InputError
from pipeline.sources import admin

# People per km² at or above which an LGA is flagged urban. There is NO official
# urban/rural LGA classification for Nigeria; this is derived from WorldPop/NPC
# population over the eHA geodesic area. 1,500/km² is the density criterion of an
# "urban centre" in the Degree of Urbanisation (UN Statistical Commission, 2020) and
# the top of the 1,000-1,500 range the admin SOURCES.md found to pick out the
# metropolitan LGAs (Kano, Lagos, Aba, Onitsha, Port Harcourt, Ibadan ...). See
# docs/geography.md.
URBAN_DENSITY_THRESHOLD = 1500.0

ZONES = ("North Central", "North East", "North West", "South East", "South South", "South West")

_GEOD = pyproj.Geod(ellps="WGS84")


@dataclass(frozen=True)
class Geography:
    states: pl.DataFrame  # state_code, state, zone, ocha_pcode, lgas, population, area_km2
    lgas: pl.DataFrame  # lga_code, lga, state_code, eha_code, population, area_km2, density_per_km2, is_urban, rep_lon, rep_lat
    outlines: dict[str, object]  # lga_code -> shapely geometry (simplified outline)
    crosswalk: pl.DataFrame  # lga_code, eha_code, method, note


# --- pure functions ------------------------------------------------------------------


def normalise_name(name: str) -> str:
    """Key for comparing place names across sources that differ in case, accents,
    hyphens, apostrophes and spacing ("Warri South-West" = "Warri South West",
    "Qua'An Pan" = "Qua'an Pan")."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    text = re.sub(r"[^a-z0-9]+", " ", text.lower())
    return " ".join(text.split())


def normalise_name_expr(column: str) -> pl.Expr:
    """`normalise_name` as a polars expression (same rule, vectorised)."""
    return (
        pl.col(column)
        .str.normalize("NFKD")
        .str.replace_all(r"[^\x00-\x7F]", "")
        .str.to_lowercase()
        .str.replace_all(r"[^a-z0-9]+", " ")
        .str.strip_chars()
    )


def geodesic_area_km2(geometries: np.ndarray) -> np.ndarray:
    """Area on the WGS84 ellipsoid: degrees² would overstate northern LGAs relative to
    southern ones and a planar projection distorts somewhere in a country this size.

    Rings are pulled out with shapely's array functions and handed to pyproj as numpy
    slices (Geod.geometry_area_perimeter walks coordinates in Python and is ~10x slower).
    Each ring's area is taken unsigned, exteriors added and holes subtracted, so ring
    orientation in the source does not matter.
    """
    geometries = np.asarray(geometries, dtype=object)
    parts, owner = shapely.get_parts(geometries, return_index=True)
    n_holes = shapely.get_num_interior_rings(parts)
    hole_part = np.repeat(np.arange(len(parts)), n_holes)
    hole_k = np.arange(hole_part.size) - np.repeat(np.cumsum(n_holes) - n_holes, n_holes)
    rings = np.concatenate([shapely.get_exterior_ring(parts), shapely.get_interior_ring(parts[hole_part], hole_k)])
    ring_owner = np.concatenate([owner, owner[hole_part]])
    sign = np.concatenate([np.ones(len(parts)), -np.ones(hole_part.size)])
    coords, ring_id = shapely.get_coordinates(rings, return_index=True)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(ring_id, minlength=len(rings)))])
    areas = np.array(
        [abs(_GEOD.polygon_area_perimeter(coords[a:b, 0], coords[a:b, 1])[0]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    )
    return np.bincount(ring_owner, weights=sign * areas, minlength=len(geometries)) / 1e6


def classify_urban(density_per_km2: pl.Expr | pl.Series, threshold: float = URBAN_DENSITY_THRESHOLD):
    """Derived urban flag: density at or above the threshold (null density stays null)."""
    return density_per_km2 >= threshold


def build_crosswalk(
    ocha: pl.DataFrame,
    eha: pl.DataFrame,
    geometries: np.ndarray,
    *,
    file: Path | str = admin.OCHA_ADMIN2_CSV,
) -> pl.DataFrame:
    """Link every OCHA LGA to exactly one eHA outline, one-to-one.

    `ocha`: lga_code, lga, state_code, center_lon, center_lat. `eha`: eha_code,
    eha_name, state_code, aligned with `geometries`.

    1. Containment first: the OCHA centroid lies in an eHA polygon of the same state,
       and that is the only such polygon and no other centroid lies in it. Position
       wins over spelling because the p-code's meaning is OCHA's location.
    2. Name second, within the state, for what containment cannot settle: a centroid
       outside every polygon of its state, or two centroids in one polygon.
    3. A polygon left unclaimed whose name matches an LGA settled by containment
       elsewhere releases that LGA (and the LGA named like its polygon) to name
       matching; repeated until stable. This resolves three-way chains such as
       Irepodun/Orolu/Olorunda (OS) instead of guessing.
    Anything still unmatched raises InputError: never a partial crosswalk.
    """
    points = shapely.points(ocha["center_lon"].to_numpy(), ocha["center_lat"].to_numpy())
    pi, gi = shapely.STRtree(geometries).query(points, predicate="within")
    o_state = ocha["state_code"].to_numpy()
    e_state = eha["state_code"].to_numpy()
    same = o_state[pi] == e_state[gi]
    cand = pl.DataFrame({"o": pi[same].astype(np.int64), "g": gi[same].astype(np.int64)})
    cand = cand.with_columns(
        pl.len().over("o").alias("n_o"),
        pl.len().over("g").alias("n_g"),
    )
    o = ocha.select("lga_code", "lga", "state_code", normalise_name_expr("lga").alias("key")).with_row_index("o")
    e = eha.select("eha_code", "eha_name", normalise_name_expr("eha_name").alias("key")).with_row_index("g")
    o = o.with_columns(pl.col("o").cast(pl.Int64))
    e = e.with_columns(pl.col("g").cast(pl.Int64), pl.Series("state_code", e_state))
    o = o.with_columns(pl.format("{}|{}", "state_code", "key").alias("sk"))
    e = e.with_columns(pl.format("{}|{}", "state_code", "key").alias("sk"))

    settled = cand.filter((pl.col("n_o") == 1) & (pl.col("n_g") == 1)).select("o", "g")
    released: set[int] = set()
    for _ in range(len(ocha) + 1):
        free_o = o.filter(~pl.col("o").is_in(settled["o"].implode()))
        free_e = e.filter(~pl.col("g").is_in(settled["g"].implode()))
        named = free_o.join(free_e.select("g", "state_code", "key"), on=["state_code", "key"], how="inner")
        named = named.filter(pl.len().over("o") == 1, pl.len().over("g") == 1)
        left_o = free_o.filter(~pl.col("o").is_in(named["o"].implode()))
        left_e = free_e.filter(~pl.col("g").is_in(named["g"].implode()))
        if left_o.height == 0 and left_e.height == 0:
            break
        # Release containment matches that block a name match of what is left over.
        s = settled.join(o.select("o", okey="sk"), on="o").join(e.select("g", ekey="sk"), on="g")
        blocking = s.filter(
            pl.col("okey").is_in(left_e["sk"].implode()) | pl.col("ekey").is_in(left_o["sk"].implode())
        )
        if blocking.height == 0:
            names = ", ".join(f"{r['lga_code']} {r['lga']} ({r['state_code']})" for r in left_o.iter_rows(named=True))
            polys = ", ".join(f"{r['eha_code']} {r['eha_name']}" for r in left_e.iter_rows(named=True))
            raise InputError(
                file,
                f"cannot link to an eHA outline by position or by name: LGAs [{names}]; outlines left [{polys}]",
            )
        released |= set(blocking["o"].to_list())
        settled = settled.filter(~pl.col("o").is_in(blocking["o"].implode()))

    cand_o = cand.group_by("o").agg(pl.col("g").alias("inside"), pl.col("n_g").max().alias("shared"))
    by_centroid = settled.with_columns(pl.lit("centroid").alias("method"))
    by_name = named.select("o", "g").with_columns(pl.lit("name").alias("method"))
    result = (
        pl.concat([by_centroid, by_name])
        .join(o.select("o", "lga_code", "lga", "state_code"), on="o")
        .join(e.select("g", "eha_code", "eha_name"), on="g")
        .join(cand_o, on="o", how="left")
    )
    inside_name = e.select(pl.col("g"), pl.col("eha_name").alias("inside_name"))
    first_inside = result.select("o", pl.col("inside").list.first().alias("g")).join(inside_name, on="g", how="left")
    result = result.join(first_inside.select("o", "inside_name"), on="o", how="left")
    same_name = normalise_name_expr("lga") == normalise_name_expr("eha_name")
    note = (
        pl.when(pl.col("method") == "centroid")
        .then(
            pl.when(same_name)
            .then(pl.lit("OCHA centroid inside this eHA outline only"))
            .otherwise(
                pl.format(
                    "OCHA centroid inside this eHA outline only; names differ (OCHA '{}', eHA '{}'): position kept",
                    pl.col("lga"),
                    pl.col("eha_name"),
                )
            )
        )
        .when(pl.col("o").is_in(list(released)))
        .then(pl.format("OCHA centroid inside eHA '{}', whose own name is left without an outline: matched by name", pl.col("inside_name")))
        .when(pl.col("inside").is_null())
        .then(pl.lit("OCHA centroid outside every eHA outline of its state: matched by name"))
        .when(pl.col("shared") > 1)
        .then(pl.format("OCHA centroid shares eHA '{}' with another LGA: matched by name", pl.col("inside_name")))
        .otherwise(pl.lit("matched by name"))
    )
    result = result.with_columns(note.alias("note")).select("lga_code", "eha_code", "method", "note").sort("lga_code")
    if result.height != len(ocha) or result["eha_code"].n_unique() != len(ocha):
        raise InputError(file, f"crosswalk is not one-to-one: {result.height} links for {len(ocha)} LGAs")
    return result


def representative_points(geometries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A point guaranteed inside each outline (label placement, point joins)."""
    pts = shapely.point_on_surface(geometries)
    return np.round(shapely.get_x(pts), 5), np.round(shapely.get_y(pts), 5)


# --- loading -------------------------------------------------------------------------


def _state_table(data_dir: Path) -> pl.DataFrame:
    """States with ISO code, OCHA name and p-code, zone; names cross-checked between files."""
    states_path = data_dir / admin.STATES_CSV
    states = admin.read_states(states_path)
    ocha1 = admin.read_ocha_admin1(data_dir / admin.OCHA_ADMIN1_CSV)
    joined = states.with_row_index("_i").join(
        ocha1, left_on="ocha_adm1_pcode", right_on="adm1_pcode", how="left"
    )
    orphan = joined.filter(pl.col("adm1_name").is_null())
    if orphan.height:
        r = orphan.row(0, named=True)
        raise InputError(states_path, f"ocha_adm1_pcode {r['ocha_adm1_pcode']} is not in {admin.OCHA_ADMIN1_CSV}", row=r["_i"] + 2)
    differ = joined.filter(normalise_name_expr("state_name") != normalise_name_expr("adm1_name"))
    if differ.height:
        r = differ.row(0, named=True)
        raise InputError(
            states_path,
            f"state {r['state_code']} is {r['state_name']!r} here but {r['adm1_name']!r} in OCHA {r['ocha_adm1_pcode']}",
            row=r["_i"] + 2,
        )
    # naijR gives the FCT zone as "fct"; the usual convention (and SOURCES.md) is North Central.
    zone = pl.when(pl.col("zone").str.to_lowercase().str.strip_chars() == "fct").then(pl.lit("North Central")).otherwise(pl.col("zone"))
    joined = joined.with_columns(zone.alias("zone"))
    bad_zone = joined.filter(~pl.col("zone").is_in(list(ZONES)))
    if bad_zone.height:
        r = bad_zone.row(0, named=True)
        raise InputError(states_path, f"zone {r['zone']!r} is not one of the six geopolitical zones", row=r["_i"] + 2)
    return joined.select(
        "state_code",
        pl.col("adm1_name").alias("state"),
        "zone",
        pl.col("ocha_adm1_pcode").alias("ocha_pcode"),
        "state_code_eha",
    ).sort("state_code")


def load_geography(data_dir: Path) -> Geography:
    """Read, validate and join the admin inputs (data_dir is DATA_DIR; files under admin/)."""
    admin_dir = Path(data_dir) / "admin"
    states = _state_table(admin_dir)
    ocha2_path = admin_dir / admin.OCHA_ADMIN2_CSV
    ocha2 = admin.read_ocha_admin2(ocha2_path)
    ocha2 = ocha2.join(states.select("ocha_pcode", "state_code"), left_on="adm1_pcode", right_on="ocha_pcode", how="left")
    orphan = ocha2.filter(pl.col("state_code").is_null())
    if orphan.height:
        r = orphan.row(0, named=True)
        raise InputError(ocha2_path, f"adm1_pcode {r['adm1_pcode']} is not a known state", row=r["row"])

    full_path = admin_dir / admin.LGA_BOUNDARIES
    full = admin.read_outlines(full_path)
    eha = full.frame.rename({"lga_code": "eha_code", "lga_name": "eha_name"})
    unknown = eha.filter(~pl.col("state_code").is_in(states["state_code"].implode()))
    if unknown.height:
        r = unknown.row(0, named=True)
        raise InputError(full_path, f"state_code {r['state_code']!r} is not one of the 37 states", row=r["feature"])

    crosswalk = build_crosswalk(
        ocha2.select(
            pl.col("adm2_pcode").alias("lga_code"), pl.col("adm2_name").alias("lga"), "state_code", "center_lon", "center_lat"
        ),
        eha.select("eha_code", "eha_name", "state_code"),
        full.geometries,
        file=ocha2_path,
    )

    pop_path = admin_dir / admin.POPULATION_CSV
    population = admin.read_population(pop_path)
    no_pop = eha.join(population, left_on="eha_code", right_on="lga_code", how="anti")
    if no_pop.height:
        r = no_pop.row(0, named=True)
        raise InputError(
            pop_path,
            f"no LGA total row for lga_code {r['eha_code']} ({r['eha_name']}, feature {r['feature']} of {admin.LGA_BOUNDARIES})",
        )
    stray = population.join(eha, left_on="lga_code", right_on="eha_code", how="anti")
    if stray.height:
        r = stray.row(0, named=True)
        raise InputError(pop_path, f"lga_code {r['lga_code']} ({r['lga']}) has no outline in {admin.LGA_BOUNDARIES}", row=r["row"])

    area = geodesic_area_km2(full.geometries)
    rep_lon, rep_lat = representative_points(full.geometries)
    shapes = eha.select(
        "eha_code",
        pl.Series("area_km2", area),
        pl.Series("rep_lon", rep_lon),
        pl.Series("rep_lat", rep_lat),
    )

    lgas = (
        crosswalk.select("lga_code", "eha_code")
        .join(ocha2.select(pl.col("adm2_pcode").alias("lga_code"), pl.col("adm2_name").alias("lga"), "state_code"), on="lga_code")
        .join(shapes, on="eha_code")
        .join(population.select(pl.col("lga_code").alias("eha_code"), "population"), on="eha_code")
        .with_columns(
            pl.col("population").round(0).cast(pl.Int64),
            (pl.col("population") / pl.col("area_km2")).alias("density"),
        )
        .with_columns(
            classify_urban(pl.col("density")).alias("is_urban"),
            pl.col("density").round(2).alias("density_per_km2"),
            pl.col("area_km2").round(3),
        )
        .select(
            "lga_code", "lga", "state_code", "eha_code", "population", "area_km2",
            "density_per_km2", "is_urban", "rep_lon", "rep_lat",
        )
        .sort("lga_code")
    )

    simple_path = admin_dir / admin.LGA_BOUNDARIES_SIMPLIFIED
    simple = admin.read_outlines(simple_path)
    missing = eha.join(simple.frame, left_on="eha_code", right_on="lga_code", how="anti")
    if missing.height:
        r = missing.row(0, named=True)
        raise InputError(simple_path, f"no simplified outline for lga_code {r['eha_code']} ({r['eha_name']})")
    eha_to_lga = dict(zip(crosswalk["eha_code"].to_list(), crosswalk["lga_code"].to_list(), strict=True))
    outlines = {
        eha_to_lga[code]: geom
        for code, geom in zip(simple.frame["lga_code"].to_list(), simple.geometries, strict=True)
    }

    per_state = lgas.group_by("state_code").agg(
        pl.len().cast(pl.Int64).alias("lgas"),
        pl.col("population").sum().cast(pl.Int64).alias("population"),
        pl.col("area_km2").sum().round(2).alias("area_km2"),
    )
    state_frame = (
        states.join(per_state, on="state_code", how="left")
        .select("state_code", "state", "zone", "ocha_pcode", "lgas", "population", "area_km2")
        .sort("state_code")
    )
    empty = state_frame.filter(pl.col("lgas").is_null())
    if empty.height:
        raise InputError(ocha2_path, f"state {empty['state_code'][0]} has no LGA")
    return Geography(states=state_frame, lgas=lgas, outlines=outlines, crosswalk=crosswalk)
