"""Producer of /v1/transmission/smc/states, /v1/transmission/smc/lgas and docs/smc-check.json.

SMC planning by Nigeria's own rule (pipeline.model.smc) on the rain season of every state and LGA
(pipeline.model.rain_season), with the children treated per cycle in each state's last campaign,
the modelled case share of the published season beside the rain share, and the check of the rule
against what Nigeria delivered (docs/smc.md). Runs after the transmission producer and reads the
seasonal index from its documents; without them the case share is null.

Sources: CHIRPS v2.0 dekadal state rainfall (UCSB CHC, public domain; WFP/HDX, CC BY-IGO); IDM/GSOD
LGA rainfall 2001-2016 and HBHI SMC rounds 2013-2019 (numalariamodeling, Apache-2.0); NMEP SMC
treatments per state 2013-2021 (sepmein/nigeria_malaria_report_2022, Apache-2.0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import polars as pl

from pipeline.datasets.base import BuildContext, Produced
from pipeline.errors import DatasetUnavailable
from pipeline.model import rain_season as rs
from pipeline.model import smc
from pipeline.sources import interventions, rainfall
from pipeline.sources.names import hbhi_lga_codes

STATES_ROUTE = "/v1/transmission/smc/states"
LGAS_ROUTE = "/v1/transmission/smc/lgas"
CHECK_FILE = "docs/smc-check.json"
COASTAL = ("LA", "OG", "RI", "BY", "DE", "AK")
REFERENCE_FIRST_MONTH = 7  # the check's simple reference: every campaign starting in July  # the southern coastal states the aims name
TARGET_REASON = ("No file in the data gives the share of children aged 3-59 months: the population tables give "
                 "totals (and sex) only, so no target is computed and no share is guessed.")
LGA_CHILDREN_REASON = "Treatments are recorded per state only (WHO/NMEP table); none per LGA."
CASE_SHARE_NOTE = ("Modelled: the share of a year's expected cases in the best 4 consecutive months of the published "
                   "seasonal index (/v1/transmission/states and /lgas), not a count of recorded cases.")

RULE = {
    "eligibility": smc.RULE,
    "share_threshold": smc.SHARE_THRESHOLD,
    "consecutive_years": smc.RUN_YEARS,
    "window_years": smc.WINDOW_YEARS,
    "margin": "Over every run of 4 consecutive complete years of the window, the lowest best-4-month share of the "
              "run; the margin is the best such value minus 0.60 (eligible exactly when it is >= 0).",
    "timing": smc.TIMING_RULE,
    "onset": "AGRHYMET / FEWS NET WRSI start of season on dekads: the first dekad with >= 25 mm followed by two dekads "
             "with >= 20 mm together; on LGA monthly rain (2001-2016), the cumulative-anomaly onset (docs/rain-season.md).",
    "best_4_months": "Windows of 4 consecutive months wrap inside the same calendar year (November-February takes "
                     "January and February of that year); share = the wettest window's rain / the year's rain.",
    "case_share": CASE_SHARE_NOTE,
    "complete_year": "All 36 dekads (or 12 months) recorded and none provisional; the dekads of the last two "
                     "complete months and of a trailing partial month are provisional.",
}
SOURCE = {
    "rain": rainfall.CHIRPS_SOURCE,
    "lga_rain": rainfall.LGA_MONTHLY_SOURCE + "; years without it use the state's dekadal series",
    "children": interventions.SMC_STATE_SOURCE,
    "delivered": interventions.SMC_STATE_SOURCE + "; " + interventions.SMC_LGA_SOURCE,
    "case_share": "the seasonal_index of /v1/transmission/states and /v1/transmission/lgas (modelled)",
}


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def _area_frames(ctx: BuildContext) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(state dekads keyed by state_code, state seasons, LGA seasons keyed by lga_code)."""
    if not ctx.inputs.has(rainfall.CHIRPS_DEKADAL):
        raise DatasetUnavailable("SMC planning needs the dekadal state rainfall (" + rainfall.CHIRPS_DEKADAL + ")")
    geo = ctx.geography
    raw = ctx.inputs.state_dekadal
    assert raw is not None
    dek, state = rs.state_dekadal_seasons(raw, geo.states)
    lga_state = geo.lgas.select(pl.col("lga_code").alias("lga"), pl.col("state_code").alias("state"))
    if ctx.inputs.has(rainfall.LGA_MONTHLY):
        monthly = rainfall.read_lga_monthly_rainfall(ctx.data_dir)
        names = hbhi_lga_codes(monthly.select("lga", "state").unique(), geo, rainfall.LGA_MONTHLY)
        monthly = monthly.join(names, on="lga").select(pl.col("lga_code").alias("area"), "period", "rain_mm")
        own = rs.monthly_rain_seasons(monthly)
    else:
        own = rs.monthly_rain_seasons(pl.DataFrame(schema={"area": pl.Utf8, "period": pl.Utf8, "rain_mm": pl.Float64}))
    lga = rs.lga_rain_seasons(own, state, lga_state).rename({"lga": "area"})
    return dek, state, lga


def _case_shares(ctx: BuildContext) -> tuple[dict[str, float], dict[str, float]]:
    """Modelled best-4-month case shares of the published seasons (empty without them)."""
    from pipeline.datasets.ratios import published_seasons

    try:
        states, lgas, _, _ = published_seasons(ctx.produced)
    except DatasetUnavailable:
        return {}, {}
    out: list[dict[str, float]] = []
    for table in (states, lgas):
        codes = [c for c, s in table.items() if len(s.get("seasonal_index") or []) == 12]
        shares: list[float] = smc.case_share(np.array([table[c]["seasonal_index"] for c in codes])).tolist() \
            if codes else []
        out.append(dict(zip(codes, shares, strict=True)))
    return out[0], out[1]


def _planning(seasons: pl.DataFrame) -> pl.DataFrame:
    """Eligibility, climate and timing of every area, one row each."""
    clim = rs.rain_season_climate(seasons)
    elig = smc.eligibility(seasons)
    tim = smc.timing(seasons, clim)
    return elig.join(clim, on="area", how="left").join(tim, on="area", how="left")


def _record(r: dict[str, Any], case_share: float | None) -> dict[str, Any]:
    eligible = r["eligible"]
    timed = eligible is True
    return {
        "eligible": eligible,
        "margin": r["margin"],
        "years_passed": r["years_passed"],
        "complete_years": r["complete_years"],
        "longest_run": r["longest_run"],
        "best_run_first_year": r["best_run_first_year"],
        "window_first_year": r["first_year"],
        "window_last_year": r["last_year"],
        "rain_shares": r["shares"],
        "rain_share_median": None if r["best4_share_median"] is None else round(r["best4_share_median"], 4),
        "case_share_modelled": case_share,
        "best4_start_month": r["best4_start_month_mode"],
        "onset_month_median": r["onset_month_median"],
        "onset_month_earliest": r["onset_month_earliest"],
        "onset_month_latest": r["onset_month_latest"],
        "cessation_month_median": r["cessation_month_median"],
        "wet_season_months_median": r["season_months_median"],
        "first_cycle_month": r["first_cycle_month"] if timed else None,
        "cycles": r["cycles"] if timed else None,
        "cycle_months": r["cycle_months"] if timed else None,
    }


YEAR_LISTS = ("onset_months", "onset_dekads", "cessation_months", "wet_season_lengths_months", "best4_start_months",
              "annual_rain_mm")


def rain_season_years(seasons: pl.DataFrame) -> dict[str, dict[str, list[Any]]]:
    """Per area, its rain season year by year over its window (the last ten complete years), oldest first,
    as parallel lists beside `rain_shares`: onset (month and dekad), cessation, wet-season length, the
    wettest 4 months' start and the year's rain (issue 41 item 1; `rain_sources` says which rainfall)."""
    s = seasons.join(smc_window(seasons), on=["area", "year"]).sort("area", "year")
    done = pl.col("complete")  # an incomplete year says nothing (null), as in rain_shares
    agg = s.group_by("area", maintain_order=True).agg(
        *(pl.when(done).then(pl.col(c)).alias(name) for c, name in (
            ("onset_month", "onset_months"), ("onset_dekad", "onset_dekads"), ("cessation_month", "cessation_months"),
            ("season_months", "wet_season_lengths_months"), ("best4_start_month", "best4_start_months"))),
        pl.when(done).then(pl.col("annual_mm").round(1)).alias("annual_rain_mm"))
    return {r.pop("area"): r for r in agg.iter_rows(named=True)}


def _children(cycles: pl.DataFrame | None) -> dict[str, dict[str, Any]]:
    """Per state, its last campaign (the newest year with treatments): year and treatments per cycle."""
    if cycles is None:
        return {}
    given = cycles.filter(pl.col("treatments") > 0)
    last = given.group_by("state_code").agg(pl.col("year").max().alias("year"))
    rows = given.join(last, on=["state_code", "year"]).sort("state_code", "cycle")
    out: dict[str, dict[str, Any]] = {}
    for (code,), part in rows.group_by("state_code", maintain_order=True):
        per = [int(v) for v in part["treatments"].to_list()]
        out[str(code)] = {"last_campaign_year": int(part["year"][0]), "children_treated_per_cycle": per,
                          "children_treated_mean_per_cycle": int(round(sum(per) / len(per)))}
    return out


def _delivered_states(cycles: pl.DataFrame | None) -> dict[str, list[int]]:
    if cycles is None:
        return {}
    d = cycles.filter(pl.col("treatments") > 0).group_by("state_code").agg(pl.col("year").unique().sort())
    return {r["state_code"]: r["year"] for r in d.iter_rows(named=True)}


def _this_year(dek: pl.DataFrame, clim: pl.DataFrame) -> dict[str, dict[str, Any]]:
    so_far = smc.rain_so_far(dek.select("area", "dekad_start", "rain_mm", "lta_mm", "provisional"))
    onset = smc.onset_so_far(dek.select("area", "dekad_start", "rain_mm"))
    df = so_far.join(onset, on="area", how="left").join(clim.select("area", "onset_dekad_median"), on="area", how="left")
    out = {}
    for r in df.iter_rows(named=True):
        od = r["onset_date"]
        dekad = None if od is None else (od.month - 1) * 3 + (od.day - 1) // 10 + 1
        med = r["onset_dekad_median"]
        out[r["area"]] = {
            "year": r["year"], "through": r["through"].isoformat(), "rain_mm": r["rain_mm"], "average_mm": r["lta_mm"],
            "percent_of_average": r["percent_of_average"], "provisional": r["provisional"],
            "onset_date": None if od is None else od.isoformat(),
            "onset_vs_median_dekads": None if dekad is None or med is None else int(round(dekad - med)),
        }
    return out


def _check(states: list[dict[str, Any]], rounds: pl.DataFrame | None, lga_plan: dict[str, dict[str, Any]]
           ) -> dict[str, Any]:
    """The rule's verdict against delivery (2013-2021) and the first-cycle month against recorded
    first rounds (2013-2019): a check, not a model input."""
    delivered_2021 = [s for s in states if 2021 in (s["delivered_years"] or [])]
    ever = [s for s in states if s["delivered_years"]]
    out: dict[str, Any] = {
        "delivered_2021": len(delivered_2021),
        "delivered_2021_eligible": sum(1 for s in delivered_2021 if s["eligible"] is True),
        "delivered_2021_not_eligible": [s["state"] for s in delivered_2021 if s["eligible"] is not True],
        "delivered_ever": len(ever),
        "eligible": sum(1 for s in states if s["eligible"] is True),
        "eligible_never_delivered": [s["state"] for s in states if s["eligible"] is True and not s["delivered_years"]],
        "coastal": [{"state_code": s["state_code"], "state": s["state"], "eligible": s["eligible"],
                     "margin": s["margin"]} for s in states if s["state_code"] in COASTAL],
        "coastal_not_eligible": sum(1 for s in states if s["state_code"] in COASTAL and s["eligible"] is False),
        "states": [{k: s[k] for k in ("state_code", "state", "eligible", "margin", "years_passed", "longest_run",
                                      "rain_share_median", "case_share_modelled", "best4_start_month",
                                      "onset_month_median", "onset_month_earliest", "onset_month_latest",
                                      "cessation_month_median", "first_cycle_month", "cycles", "last_campaign_year",
                                      "children_treated_mean_per_cycle", "delivered_years")}
                   | {"rain_this_year_percent_of_average": (s["rain_this_year"] or {}).get("percent_of_average"),
                      "rain_this_year_onset_date": (s["rain_this_year"] or {}).get("onset_date"),
                      "rain_this_year_through": (s["rain_this_year"] or {}).get("through")}
                   for s in states],
    }
    if rounds is None or rounds.height == 0:
        return {**out, "timing": None}
    first_by_state = {s["state_code"]: s["first_cycle_month"] for s in states}
    sy = rounds.group_by("state_code", "year").agg(pl.col("first_round").min(), pl.len().alias("lgas")).sort(
        "state_code", "year")
    rows = []
    for r in sy.iter_rows(named=True):
        rec = first_by_state.get(r["state_code"])
        got = r["first_round"]
        off = None if rec is None else _month_offset(got.month, rec)
        rows.append({"state_code": r["state_code"], "year": r["year"], "lgas": r["lgas"],
                     "first_round": got.isoformat(), "first_round_month": got.month,
                     "recommended_first_cycle_month": rec, "months_off": off})
    lga_rows = [(_month_offset(r["first_round"].month, lga_plan[r["lga_code"]]["first_cycle_month"])
                 if lga_plan.get(r["lga_code"], {}).get("first_cycle_month") else None)
                for r in rounds.iter_rows(named=True)]
    delivered_lgas = sorted(set(rounds["lga_code"].to_list()))
    out["lgas_delivered"] = len(delivered_lgas)
    out["lgas_delivered_eligible"] = sum(1 for c in delivered_lgas if lga_plan.get(c, {}).get("eligible") is True)
    judged = [r for r in rows if r["months_off"] is not None]
    lga_judged = [o for o in lga_rows if o is not None]
    out["timing"] = {
        "state_years": rows,
        "state_years_judged": len(judged),
        "state_years_within_1_month": sum(1 for r in judged if abs(r["months_off"]) <= 1),
        "share_within_1_month": round(sum(1 for r in judged if abs(r["months_off"]) <= 1) / len(judged), 3)
        if judged else None,
        "mean_months_off": round(float(np.mean([r["months_off"] for r in judged])), 2) if judged else None,
        # the simple reference: a first cycle in July everywhere, the usual Sahelian campaign start
        "reference_july_within_1_month": round(
            sum(1 for r in rows if abs(_month_offset(r["first_round_month"], REFERENCE_FIRST_MONTH)) <= 1) / len(rows), 3)
        if rows else None,
        "lga_years_judged": len(lga_judged),
        "lga_share_within_1_month": round(sum(1 for o in lga_judged if abs(o) <= 1) / len(lga_judged), 3)
        if lga_judged else None,
    }
    return out


def _month_offset(recorded: int, recommended: int) -> int:
    """Recorded minus recommended month, in -6..5 (months wrap at the year's end)."""
    return int((recorded - recommended + 6) % 12 - 6)


def produce(ctx: BuildContext) -> Produced:
    geo = ctx.geography
    dek, state_seasons, lga_seasons = _area_frames(ctx)
    st_case, lga_case = _case_shares(ctx)
    st_plan = {r["area"]: r for r in _planning(state_seasons).iter_rows(named=True)}
    lga_plan = {r["area"]: r for r in _planning(lga_seasons).iter_rows(named=True)}
    clim = rs.rain_season_climate(state_seasons)
    this_year = _this_year(dek, clim)
    cycles = interventions.read_smc_state_cycles(ctx.data_dir, geo.states)
    children = _children(cycles)
    delivered = _delivered_states(cycles)
    rounds = interventions.read_smc_lga_rounds(ctx.data_dir, geo.lgas)
    lga_rounds: dict[str, list[dict[str, Any]]] = {}
    if rounds is not None:
        for r in rounds.iter_rows(named=True):
            lga_rounds.setdefault(r["lga_code"], []).append(r)
    sources = lga_seasons.join(smc_window(lga_seasons), on=["area", "year"]).group_by("area").agg(
        pl.col("rain_source").sort_by("year"))
    lga_source = {r["area"]: r["rain_source"] for r in sources.iter_rows(named=True)}

    st_years, lga_years = rain_season_years(state_seasons), rain_season_years(lga_seasons)
    states_out = []
    for s in geo.states.sort("state_code").iter_rows(named=True):
        code = s["state_code"]
        plan = st_plan.get(code)
        if plan is None:
            continue
        kids = children.get(code)
        states_out.append({
            "state_code": code, "state": s["state"], **_record(plan, st_case.get(code)),
            "rain_this_year": this_year.get(code),
            "last_campaign_year": kids["last_campaign_year"] if kids else None,
            "children_treated_per_cycle": kids["children_treated_per_cycle"] if kids else None,
            "children_treated_mean_per_cycle": kids["children_treated_mean_per_cycle"] if kids else None,
            "target_children_3_59_months": None,
            "target_reason": TARGET_REASON,
            "delivered_years": delivered.get(code, []),
            **st_years.get(code, dict.fromkeys(YEAR_LISTS, [])),
        })
    states_doc = {"rule": RULE, "states": states_out, "source": SOURCE}

    lga_docs: dict[tuple[str, ...], Any] = {}
    by_state = geo.lgas.sort("lga").group_by("state_code", maintain_order=True)
    names = dict(zip(geo.states["state_code"].to_list(), geo.states["state"].to_list(), strict=True))
    for (code,), part in sorted(by_state, key=lambda kv: str(kv[0][0])):
        recs = []
        for r in part.iter_rows(named=True):
            plan = lga_plan.get(r["lga_code"])
            if plan is None:
                continue
            got = sorted(lga_rounds.get(r["lga_code"], []), key=lambda x: x["year"])
            src = lga_source.get(r["lga_code"], [])
            recs.append({
                "lga_code": r["lga_code"], "lga": r["lga"], **_record(plan, lga_case.get(r["lga_code"])),
                "rain_sources": src,
                "years_from_lga_rain": sum(1 for x in src if x == "lga_monthly"),
                "children_treated_per_cycle": None, "children_reason": LGA_CHILDREN_REASON,
                "first_round_dates": [x["first_round"].isoformat() for x in got],
                **lga_years.get(r["lga_code"], dict.fromkeys(YEAR_LISTS, [])),
            })
        lga_docs[(str(code),)] = {
            "state_code": str(code), "state": names[str(code)], "rule": RULE,
            "state_rain_this_year": this_year.get(str(code)), "lgas": recs, "source": SOURCE,
        }
    check = _check(states_out, rounds, {c: {"first_cycle_month": p["first_cycle_month"] if p["eligible"] else None,
                                            "eligible": p["eligible"]} for c, p in lga_plan.items()})
    check["source"] = SOURCE
    return Produced(
        dataset="smc",
        documents={STATES_ROUTE: {(): states_doc}, LGAS_ROUTE: lga_docs},
        files={CHECK_FILE: ("application/json", orjson.dumps(check, option=orjson.OPT_INDENT_2) + b"\n")},
    )


def smc_window(seasons: pl.DataFrame) -> pl.DataFrame:
    """(area, year) of each area's eligibility window: its last ten complete years."""
    return rs.last_complete_years(seasons, "area", smc.WINDOW_YEARS)
