"""Frozen forecasts in the hubverse layout, and scoring an archived round against counts supplied later.

Skill must be measurable on what was issued, not on refits: each release writes the quantile
forecasts it issues from its origin month as one CSV per origin month (origin_date, target_end_date,
horizon, location, output_type, output_type_id, value) under a stable path. The values are ratios to
the origin month's count (the counts belong to the programme: the archive holds none), so a programme
scores a round by supplying its own counts of the origin and target months (`malaria-risk score`).
Scores are those of docs/skill-protocol.md (protocol 2): WIS and coverage on log cases, skill of the
median against persistence.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from pipeline.model import forecast_cv

MODEL_ID = "malaria-risk-ratios"
HUB_DIR = "docs/forecasts/model-output/" + MODEL_ID
COLUMNS = ("origin_date", "target_end_date", "horizon", "location", "output_type", "output_type_id", "value")
LEVELS = forecast_cv.QUANTILE_LEVELS
FIELDS = forecast_cv.QUANTILE_FIELDS


def month_add(ym: str, h: int) -> str:
    y, m = int(ym[:4]), int(ym[5:7])
    t = y * 12 + m - 1 + h
    return f"{t // 12:04d}-{t % 12 + 1:02d}"


def round_path(origin: str) -> str:
    """The stable path of the round issued from origin month `origin` (YYYY-MM)."""
    return f"{HUB_DIR}/{origin}-01-{MODEL_ID}.csv"


def round_rows(origin: str, records: Iterable[tuple[str, Mapping[str, Any]]]) -> list[tuple[Any, ...]]:
    """Hubverse rows of one origin month from (location, ratio record) pairs of every area: the records
    whose start month is the origin's calendar month; areas without quantiles are left out."""
    cal = int(origin[5:7])
    rows = []
    for loc, r in records:
        if int(r["start_month"]) != cal or r.get("q10") is None:
            continue
        h = int(r["horizon"])
        for lv, f in zip(LEVELS, FIELDS, strict=True):
            rows.append((f"{origin}-01", f"{month_add(origin, h)}-01", h, loc, "quantile", lv, r[f]))
    return rows


def render_round(rows: Sequence[tuple[Any, ...]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(rows)
    return buf.getvalue().encode()


def read_round(text: str) -> list[dict[str, str]]:
    rows = list(csv.DictReader(io.StringIO(text)))
    if rows and set(COLUMNS) - set(rows[0]):
        raise ValueError(f"not a hubverse round: columns {sorted(rows[0])} lack {sorted(set(COLUMNS) - set(rows[0]))}")
    return rows


def score_round(round_rows_: Sequence[Mapping[str, str]], counts: Mapping[tuple[str, str], float]
                ) -> dict[str, Any]:
    """Scores of an archived round against `counts` {(location, YYYY-MM): cases} supplied later.

    Per horizon: the forecasts whose origin and target counts are both given and > 0; WIS of the five
    quantiles on log cases (scoringrules), coverage of the 50 % and 80 % intervals, and the skill of the
    median against persistence (1 - MSE / MSE of the origin count carried forward, on log cases)."""
    by: dict[tuple[str, int], dict[float, float]] = {}
    origin_of: dict[tuple[str, int], tuple[str, str]] = {}
    for r in round_rows_:
        if r["output_type"] != "quantile":
            continue
        key = (r["location"], int(r["horizon"]))
        by.setdefault(key, {})[round(float(r["output_type_id"]), 4)] = float(r["value"])
        origin_of[key] = (r["origin_date"][:7], r["target_end_date"][:7])
    out: dict[str, Any] = {"horizons": []}
    for h in sorted({k[1] for k in by}):
        keys = [k for k in by if k[1] == h and len(by[k]) == len(LEVELS)]
        have = [(k, counts.get((k[0], origin_of[k][0])), counts.get((k[0], origin_of[k][1]))) for k in keys]
        have = [(k, c0, c1) for k, c0, c1 in have if c0 and c1 and c0 > 0 and c1 > 0]
        if not have:
            out["horizons"].append({"months_ahead": h, "forecasts": 0})
            continue
        q = np.log(np.array([[by[k][lv] for lv in LEVELS] for k, _, _ in have]))  # log ratio quantiles
        c0 = np.log(np.array([c for _, c, _ in have], dtype=float))
        y = np.log(np.array([c for _, _, c in have], dtype=float)) - c0  # observed log ratio
        w = forecast_cv.wis_values(y, q)
        mse_med, mse_pers = float(np.mean((y - q[:, 2]) ** 2)), float(np.mean(y**2))
        out["horizons"].append({
            "months_ahead": h, "forecasts": len(have), "locations": len({k[0] for k, _, _ in have}),
            "wis_log": round(float(np.mean(w)), 4),
            "coverage_50": round(float(np.mean((y >= q[:, 1]) & (y <= q[:, 3]))), 3),
            "coverage_80": round(float(np.mean((y >= q[:, 0]) & (y <= q[:, 4]))), 3),
            "skill_vs_persistence": round(1 - mse_med / mse_pers, 3) if mse_pers > 0 else None,
        })
    return out


def read_counts(text: str) -> dict[tuple[str, str], float]:
    """Counts a user supplies: CSV with `location`, `month` (YYYY-MM) and `cases`."""
    out = {}
    for r in csv.DictReader(io.StringIO(text)):
        v = (r.get("cases") or "").strip()
        if v:
            out[(r["location"].strip(), r["month"].strip()[:7])] = float(v)
    return out
