"""Map HBHI-spelt LGA names to OCHA `lga_code`.

The Northwestern HBHI model inputs (numalariamodeling) and the IDM/GSOD LGA rainfall
files carry LGA *names*, not codes, in their own spelling: "/" written as "-",
duplicate names disambiguated with a digit ("Obi1", "Obi2") and about sixteen plain
spelling variants ("Gawabawa" for Gwadabawa). Every join of those files to the
service's LGAs goes through `hbhi_lga_codes`, so the spelling knowledge lives in one
place and a new variant fails loudly (InputError listing the names) instead of
silently dropping an LGA.

Matching order:
1. the alias table (`ALIASES`: HBHI spelling -> state code + OCHA name);
2. normalised name (accents, case and punctuation removed) within the state, when
   the input has a `state` column; nationwide where the name is unique otherwise;
3. where `lat`/`lon` exist, a point-in-outline cross-check (`point_check`). It is
   reported, not used to override: the eHA outlines and OCHA names disagree for ~20
   LGAs (admin SOURCES.md), and the HBHI node is only "roughly the LGA centre".
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import shapely

from pipeline.errors import InputError

if TYPE_CHECKING:
    from pipeline.geography import Geography

# HBHI spelling (normalised key) -> (ISO state code, OCHA LGA name). Each entry was
# checked against the OCHA gazetteer name and the HBHI node position.
ALIASES: dict[str, tuple[str, str]] = {
    # spelling variants
    "isuikwato": ("AB", "Isiukwuato"),
    "obinwa": ("AB", "Obi Ngwa"),
    "umuneochi": ("AB", "Umu-Nneochi"),
    "gireri": ("AD", "Girei"),
    "ganaye": ("AD", "Ganye"),
    "efonalayee": ("EK", "Efon"),
    "gboyin": ("EK", "Aiyekire (Gbonyin)"),
    "idosiosi": ("EK", "Ido-Osi"),
    "ilemeji": ("EK", "Ilejemeji"),
    "ogorimangongo": ("KO", "Ogori/Magongo"),
    "takali": ("KN", "Takai"),
    "matazuu": ("KT", "Matazu"),
    "pailoro": ("NI", "Paikoro"),
    "dangeshnsi": ("SO", "Dange-Shuni"),
    "gawabawa": ("SO", "Gwadabawa"),
    "karinlamido": ("TA", "Karim-Lamido"),
    # names shared by two states, numbered in HBHI files
    "obi1": ("BE", "Obi"),
    "obi2": ("NA", "Obi"),
    "nasarawa1": ("KN", "Nasarawa"),
    "nasarawa2": ("NA", "Nasarawa"),
    "bassa1": ("KO", "Bassa"),
    "bassa2": ("PL", "Bassa"),
    "ifelodun1": ("KW", "Ifelodun"),
    "ifelodun2": ("OS", "Ifelodun"),
    "irepodun1": ("KW", "Irepodun"),
    "irepodun2": ("OS", "Irepodun"),
    "surulere1": ("LA", "Surulere"),
    "surulere2": ("OY", "Surulere"),
}

# Abuja and Nasarawa are spelt several ways across the sources (malaria SOURCES.md).
STATE_NAME_VARIANTS: dict[str, str] = {
    "fct": "FC",
    "fctabuja": "FC",
    "abuja": "FC",
    "federalcapitalterritory": "FC",
    "abujafederalcapitalterritory": "FC",
    "nassarawa": "NA",
    "nasarawa": "NA",
}


def normalise(name: str) -> str:
    """Key for name comparison: ASCII, lower case, letters and digits only."""
    s = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]", "", s.lower())


def state_name_codes(states: pl.DataFrame) -> dict[str, str]:
    """State name (as spelt in any source) -> ISO suffix code.

    Returns a dict keyed by the *raw* names of `states` plus the known variants; use
    `state_code_for` to look up arbitrary spellings (trailing spaces, case).
    """
    out = {n: c for n, c in zip(states["state"], states["state_code"], strict=True)}
    for n, c in zip(states["state"], states["state_code"], strict=True):
        out[n.strip()] = c
    out.update({"FCT": "FC", "FCT Abuja": "FC", "Federal Capital Territory": "FC", "Nassarawa": "NA"})
    return out


def state_code_for(name: str | None, states: pl.DataFrame) -> str | None:
    """ISO suffix code for a state name in any source spelling, or None."""
    if name is None:
        return None
    key = normalise(name)
    table = {normalise(n): c for n, c in zip(states["state"], states["state_code"], strict=True)}
    table.update(STATE_NAME_VARIANTS)
    return table.get(key)


def hbhi_lga_codes(hbhi: pl.DataFrame, geo: Geography, source: str = "HBHI LGA names") -> pl.DataFrame:
    """One row per distinct HBHI LGA name: columns `lga` (HBHI spelling), `lga_code`.

    `hbhi` needs `lga`; `state` (state name) is used when present. Raises InputError
    naming every unmatched name, and when two names land on one LGA (the mapping
    must be one-to-one or a join would double-count).
    """
    if "lga" not in hbhi.columns:
        raise InputError(source, "no `lga` column")
    has_state = "state" in hbhi.columns
    cols = ["lga", "state"] if has_state else ["lga"]
    names = hbhi.select(cols).unique(maintain_order=True)

    ocha = geo.lgas.select("lga_code", "lga", "state_code").with_columns(
        pl.col("lga").map_elements(normalise, return_dtype=pl.Utf8).alias("key")
    )
    alias_df = pl.DataFrame(
        {
            "akey": list(ALIASES),
            "alias_state": [v[0] for v in ALIASES.values()],
            "alias_key": [normalise(v[1]) for v in ALIASES.values()],
        }
    )
    names = names.with_columns(
        pl.col("lga").map_elements(normalise, return_dtype=pl.Utf8).alias("akey")
    ).join(alias_df, on="akey", how="left")
    if has_state:
        smap = {s: state_code_for(s, geo.states) for s in names["state"].drop_nulls().unique()}
        names = names.with_columns(
            pl.col("state").replace_strict(smap, default=None, return_dtype=pl.Utf8).alias("given_state")
        )
    else:
        names = names.with_columns(pl.lit(None, dtype=pl.Utf8).alias("given_state"))
    names = names.with_columns(
        pl.coalesce("alias_key", "akey").alias("key"),
        pl.coalesce("alias_state", "given_state").alias("want_state"),
        # an alias that contradicts the stated state is a mismatch, not a silent fix
        (
            pl.col("alias_state").is_not_null()
            & pl.col("given_state").is_not_null()
            & (pl.col("alias_state") != pl.col("given_state"))
        ).alias("conflict"),
    )

    with_state = names.filter(pl.col("want_state").is_not_null()).join(
        ocha.select("key", pl.col("state_code").alias("want_state"), "lga_code"),
        on=["want_state", "key"],
        how="left",
    )
    unique_keys = ocha.group_by("key").agg(pl.len().alias("n"), pl.first("lga_code")).filter(pl.col("n") == 1)
    without_state = names.filter(pl.col("want_state").is_null()).join(
        unique_keys.select("key", "lga_code"), on="key", how="left"
    )
    out = pl.concat([with_state, without_state], how="diagonal_relaxed").with_columns(
        pl.when(pl.col("conflict")).then(None).otherwise(pl.col("lga_code")).alias("lga_code")
    )
    missing = out.filter(pl.col("lga_code").is_null())
    if missing.height:
        listed = ", ".join(
            f"{r['lga']} ({r['state']})" if has_state else r["lga"] for r in missing.iter_rows(named=True)
        )
        raise InputError(source, f"{missing.height} LGA name(s) not matched to an OCHA LGA: {listed}")
    per = out.group_by("lga_code").agg(pl.col("lga").unique().alias("names")).filter(pl.col("names").list.len() > 1)
    if per.height:
        listed = "; ".join(f"{r['lga_code']} <- {', '.join(r['names'])}" for r in per.iter_rows(named=True))
        raise InputError(source, f"several names map to one LGA: {listed}")
    mapping = out.select("lga", "lga_code").unique(subset="lga", maintain_order=True)
    if {"lat", "lon"} <= set(hbhi.columns) and getattr(geo, "outlines", None):
        # The HBHI node is only "roughly the LGA centre": on the real climatology file
        # 51 of 774 nodes sit in a neighbouring LGA of the same state. A node in
        # another *state* would mean a wrong name match, so that stops the build.
        off = point_check(hbhi, mapping, geo).drop_nulls("point_lga_code")
        st = geo.lgas.select("lga_code", "state_code")
        off = off.join(st, on="lga_code").join(
            st.rename({"lga_code": "point_lga_code", "state_code": "point_state"}), on="point_lga_code"
        ).filter(pl.col("state_code") != pl.col("point_state"))
        if off.height:
            listed = ", ".join(f"{r['lga']} -> {r['lga_code']} but point in {r['point_lga_code']}" for r in off.iter_rows(named=True))
            raise InputError(source, f"name match contradicted by the node position (other state): {listed}")
    return mapping


def point_check(hbhi: pl.DataFrame, mapping: pl.DataFrame, geo: Geography) -> pl.DataFrame:
    """HBHI names whose `lat`/`lon` point falls in a *different* LGA outline.

    Columns `lga`, `lga_code` (from the name match), `point_lga_code` (outline that
    holds the point, null when it falls in none, e.g. on the coast). Informational:
    the caller decides whether disagreements are tolerable.
    """
    pts_df = hbhi.select("lga", "lat", "lon").unique(subset="lga", maintain_order=True).join(
        mapping, on="lga", how="inner"
    )
    codes = list(geo.outlines)
    tree = shapely.STRtree(np.array([geo.outlines[c] for c in codes], dtype=object))
    pts = shapely.points(pts_df["lon"].to_numpy(), pts_df["lat"].to_numpy())
    pi, gi = tree.query(pts, predicate="within")
    hit = np.full(len(pts), None, dtype=object)
    hit[pi] = np.array(codes, dtype=object)[gi]
    return pts_df.with_columns(pl.Series("point_lga_code", hit.tolist(), dtype=pl.Utf8)).filter(
        pl.col("point_lga_code").is_null() | (pl.col("point_lga_code") != pl.col("lga_code"))
    ).select("lga", "lga_code", "point_lga_code")
