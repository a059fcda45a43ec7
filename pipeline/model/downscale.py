"""LGA rainfall downscaled from state CHIRPS: the one shared implementation.

No LGA rainfall series exists from 2018 on (rainfall/SOURCES.md). The IDM/GSOD LGA
climatology knows how an LGA differs from the rest of its state but runs low on the
wet coast (Bayelsa at 0.55 of CHIRPS), so only its *relative* within-state shape is
kept: for LGA l in state s and calendar month m

    ratio[l, m] = G[l, m] / (sum_k a_k G[k, m] / sum_k a_k)       (k over the LGAs of s)

with G the IDM/GSOD climatology and a the LGA land area. The state's CHIRPS value is a
mean over its pixels, i.e. an AREA-weighted mean, so the ratios are area-weighted to
average 1 and the area-weighted mean of a state's LGA rainfall equals the state value
exactly, for the climatology and for every recorded month. Where a state's GSOD
climatology is ~0 (below MIN_SHAPE_MM) for a month, as in the dry-season north, the
shape is unknown and the ratio is 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from pipeline.errors import InputError
from pipeline.sources.names import hbhi_lga_codes

if TYPE_CHECKING:
    from pipeline.geography import Geography

# Below this state-mean GSOD rainfall (mm/month) a month is "dry": its shape is noise.
MIN_SHAPE_MM = 1e-6


def _with_state_code(df: pl.DataFrame, geo: Geography, what: str) -> pl.DataFrame:
    """Accept a state table keyed by `state_code` or by OCHA `ocha_pcode`."""
    if "state_code" in df.columns:
        return df
    if "ocha_pcode" in df.columns:
        out = df.join(geo.states.select("ocha_pcode", "state_code"), on="ocha_pcode", how="left")
        if out["state_code"].null_count():
            bad = sorted(out.filter(pl.col("state_code").is_null())["ocha_pcode"].unique())
            raise InputError(what, f"unknown state p-code(s) {bad}")
        return out.drop("ocha_pcode")
    raise InputError(what, "needs a state_code or ocha_pcode column")


def _with_lga_code(lga_clim: pl.DataFrame, geo: Geography) -> pl.DataFrame:
    if "lga_code" in lga_clim.columns:
        return lga_clim
    mapping = hbhi_lga_codes(lga_clim, geo, source="LGA rainfall climatology")
    return lga_clim.join(mapping, on="lga", how="left")


def lga_ratios(geo: Geography, lga_clim: pl.DataFrame) -> pl.DataFrame:
    """lga_code, state_code, month, ratio: each LGA's within-state shape (area-weighted mean 1)."""
    clim = _with_lga_code(lga_clim, geo).select("lga_code", pl.col("month").cast(pl.Int64), "rainfall_mm")
    lg = geo.lgas.select("lga_code", "state_code", "area_km2")
    full = lg.join(pl.DataFrame({"month": list(range(1, 13))}, schema={"month": pl.Int64}), how="cross")
    df = full.join(clim, on=["lga_code", "month"], how="left")
    if df["rainfall_mm"].null_count():
        miss = sorted(df.filter(pl.col("rainfall_mm").is_null())["lga_code"].unique())
        raise InputError("LGA rainfall climatology", f"{len(miss)} LGA(s) without a 12-month climatology: {miss[:10]}")
    state_mean = (pl.col("rainfall_mm") * pl.col("area_km2")).sum().over("state_code", "month") / pl.col(
        "area_km2"
    ).sum().over("state_code", "month")
    return (
        df.with_columns(
            pl.when(state_mean > MIN_SHAPE_MM).then(pl.col("rainfall_mm") / state_mean).otherwise(1.0).alias("ratio")
        )
        .select("lga_code", "state_code", "month", "ratio")
        .sort("lga_code", "month")
    )


def lga_climatology(geo: Geography, state_clim: pl.DataFrame, lga_clim: pl.DataFrame) -> pl.DataFrame:
    """lga_code, state_code, month, rainfall_mm: GSOD shape rescaled to the state CHIRPS climatology."""
    sc = _with_state_code(state_clim, geo, "state rainfall climatology").select(
        "state_code", pl.col("month").cast(pl.Int64), "rainfall_mm"
    )
    r = lga_ratios(geo, lga_clim)
    out = r.join(sc, on=["state_code", "month"], how="left")
    if out["rainfall_mm"].null_count():
        raise InputError("state rainfall climatology", "a state lacks one of the 12 months")
    return out.select(
        "lga_code", "state_code", "month", (pl.col("ratio") * pl.col("rainfall_mm")).alias("rainfall_mm")
    ).sort("lga_code", "month")


def lga_monthly(geo: Geography, state_monthly: pl.DataFrame, ratios: pl.DataFrame) -> pl.DataFrame:
    """lga_code, period, rainfall_mm (+ provisional when the state series has it).

    The state's recorded month times the LGA's ratio for that calendar month.
    """
    sm = _with_state_code(state_monthly, geo, "state rainfall series")
    extra = ["provisional"] if "provisional" in sm.columns else []
    sm = sm.select(
        "state_code", "period", pl.col("period").str.slice(5, 2).cast(pl.Int64).alias("month"), "rainfall_mm", *extra
    )
    out = ratios.select("lga_code", "state_code", "month", "ratio").join(sm, on=["state_code", "month"], how="inner")
    return out.select(
        "lga_code", "period", (pl.col("ratio") * pl.col("rainfall_mm")).alias("rainfall_mm"), *extra
    ).sort("lga_code", "period")
