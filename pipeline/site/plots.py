"""Static SVG plots of the validation page, drawn from the validation report itself.

Plain SVG text (no plotting library, no script): each plot is small multiples of line charts
whose every number comes from `docs/validation.json` of the same release, so a plot can never
show something the report does not carry. Pure: report in, SVG strings out.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

PANEL_W, PANEL_H = 230, 150
PAD_L, PAD_R, PAD_T, PAD_B = 34, 8, 22, 24
COLS = 3
MONTH_LETTERS = "JFMAMJJASOND"
MONTHS = 12
STYLE = {
    "archetype_band": ("#bbbbbb", ""),
    "archetype_profile": ("#555555", "1 2"),
    "out_of_sample": ("#1f6fb4", ""),
    "model_3_out_of_sample": ("#999999", "4 3"),
    "published": ("#d9730d", "2 2"),
    "score_over_mean": ("#1f6fb4", ""),
    "peak_window": ("#f3d9b1", ""),
    "rain_over_peak": ("#2a9d8f", "3 2"),
}
LABELS = {
    "archetype_band": "range of the published archetype case profiles in the state",
    "archetype_profile": "published case profile of the LGA's archetype",
    "out_of_sample": "model, state held out",
    "model_3_out_of_sample": "model 3 rule, state held out",
    "published": "published index",
    "score_over_mean": "score (season held out) / mean",
    "peak_window": "80 % peak window (the months shaded)",
    "rain_over_peak": "rain climatology, share of its wettest month (CHIRPS)",
}
Band = dict[str, list[float]]  # a filled band ("low", "high"), or months shaded whole ("months": 0-11)


def _fmt(v: float) -> str:
    return f"{v:.1f}"


def _panel(x0: float, y0: float, title: str, series: dict[str, Sequence[float | None] | Band], ymin: float, ymax: float,
           xlabels: Sequence[str]) -> list[str]:
    w, h = PANEL_W - PAD_L - PAD_R, PANEL_H - PAD_T - PAD_B
    n = max(MONTHS if isinstance(v, dict) and "months" in v else len(v["low"]) if isinstance(v, dict) else len(v)
            for v in series.values())
    out = [f'<text x="{_fmt(x0 + PAD_L)}" y="{_fmt(y0 + 14)}" font-size="11" font-weight="bold">{escape(title)}</text>',
           f'<rect x="{_fmt(x0 + PAD_L)}" y="{_fmt(y0 + PAD_T)}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>']
    for frac in (0.0, 0.5, 1.0):
        tick = ymin + frac * (ymax - ymin)
        y = y0 + PAD_T + h * (1 - frac)
        out.append(f'<text x="{_fmt(x0 + PAD_L - 3)}" y="{_fmt(y + 3)}" font-size="8" text-anchor="end">{tick:.2g}</text>')
    step = max(1, n // 12)
    for k in range(0, n, step):
        x = x0 + PAD_L + (w * k / max(n - 1, 1))
        out.append(f'<text x="{_fmt(x)}" y="{_fmt(y0 + PAD_T + h + 10)}" font-size="7" text-anchor="middle">'
                   f'{escape(xlabels[k % len(xlabels)])}</text>')
    def xy(k: int, v: float) -> str:
        x = x0 + PAD_L + w * k / max(n - 1, 1)
        y = y0 + PAD_T + h * (1 - (min(max(v, ymin), ymax) - ymin) / (ymax - ymin))
        return f"{_fmt(x)},{_fmt(y)}"

    for name, vals in series.items():
        colour, dash = STYLE.get(name, ("#444", ""))
        if isinstance(vals, dict) and "months" in vals:  # months shaded whole (a window), not a curve
            step_w = w / max(n - 1, 1)
            for mo in vals["months"]:
                x = x0 + PAD_L + step_w * (mo - 0.5)
                left, right = max(x, x0 + PAD_L), min(x + step_w, x0 + PAD_L + w)
                out.append(f'<rect x="{_fmt(left)}" y="{_fmt(y0 + PAD_T)}" width="{_fmt(right - left)}" height="{h}" '
                           f'fill="{colour}" fill-opacity="0.6" stroke="none"/>')
            continue
        if isinstance(vals, dict):  # a band: filled between its low and high edges
            ring = [xy(k, v) for k, v in enumerate(vals["high"])] + [xy(k, v) for k, v in reversed(list(enumerate(vals["low"])))]
            out.append(f'<polygon fill="{colour}" fill-opacity="0.5" stroke="none" points="{" ".join(ring)}"/>')
            continue
        pts: list[str] = []
        runs: list[list[str]] = []
        for k, v in enumerate(vals):
            if v is None:
                if pts:
                    runs.append(pts)
                pts = []
                continue
            x = x0 + PAD_L + w * k / max(n - 1, 1)
            y = y0 + PAD_T + h * (1 - (min(max(v, ymin), ymax) - ymin) / (ymax - ymin))
            pts.append(f"{_fmt(x)},{_fmt(y)}")
        if pts:
            runs.append(pts)
        for run in runs:
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.4"{dash_attr} points="{" ".join(run)}"/>')
    return out


def _figure(title: str, panels: list[tuple[str, dict[str, Sequence[float | None] | Band]]], ymin: float, ymax: float,
            xlabels: Sequence[str], note: str) -> str:
    names: list[str] = []
    for _, s in panels:
        names += [k for k in s if k not in names]
    rows = max(1, -(-len(panels) // COLS))
    legend_h = 16 * max(1, len(names)) + 10
    width, height = COLS * PANEL_W, 30 + rows * PANEL_H + legend_h + 16
    body = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'font-family="sans-serif" role="img" aria-label="{escape(title)}">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{width}" height="{height}" fill="white"/>',
            f'<text x="8" y="18" font-size="13" font-weight="bold">{escape(title)}</text>']
    if not panels:
        body.append(f'<text x="8" y="50" font-size="12">{escape(note)}</text>')
    for i, (ptitle, series) in enumerate(panels):
        body += _panel((i % COLS) * PANEL_W, 30 + (i // COLS) * PANEL_H, ptitle, series, ymin, ymax, xlabels)
    y = 30 + rows * PANEL_H + 8
    for k, name in enumerate(names):
        colour, dash = STYLE.get(name, ("#444", ""))
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        yy = y + 16 * k
        body.append(f'<line x1="10" y1="{yy}" x2="34" y2="{yy}" stroke="{colour}" stroke-width="2"{dash_attr}/>')
        body.append(f'<text x="40" y="{yy + 4}" font-size="10">{escape(LABELS.get(name, name))}</text>')
    if panels and note:
        body.append(f'<text x="8" y="{height - 6}" font-size="9" fill="#555">{escape(note)}</text>')
    body.append("</svg>")
    return "\n".join(body) + "\n"


def validation_plots(report: dict[str, Any]) -> dict[str, str]:
    """File name -> SVG for the validation page (always every file; empty plots say why).

    Only the model's curves and published archetype profiles are drawn: the dated case series may not
    leave the pipeline in any form, so none of its values (not even rescaled) reaches a plot."""
    prof = report.get("seasons", {}).get("profiles", {})
    absent = prof.get("note", "dated case series absent from this data load")
    keys_s = ("archetype_band", "out_of_sample", "model_3_out_of_sample")
    keys_l = ("archetype_profile", "out_of_sample", "published")
    state_panels = [(f'{s["state"]}', {k: s[k] for k in keys_s if k in s}) for s in prof.get("states", [])]
    lga_panels = [(f'{s["lga"]} ({s["state_code"]})', {k: s[k] for k in keys_l if k in s})
                  for s in prof.get("lgas", [])]
    months = report.get("months", {}) or {}
    score_panels: list[tuple[str, dict[str, Sequence[float | None] | Band]]] = [
        (f'{s["state_code"]}: r {s["r_monthly_level"]} / {s["r_month_to_month"]}', {"score_over_mean": s["score_over_mean"]})
        for s in months.get("score_against_cases", [])]
    years = months.get("months", "")
    first_year = int(years[:4]) if years[:4].isdigit() else 2020
    month_labels = [f"{MONTH_LETTERS[k % 12]}{'' if k % 12 else str(first_year + k // 12)[2:]}" for k in range(48)]
    rain_panels: list[tuple[str, dict[str, Sequence[float | None] | Band]]] = []
    for s in report.get("seasons", {}).get("rain_and_season", []):
        top = max(s["rain_mm"]) or 1.0
        win = set(s["peak_window"])
        # the panel's title is the state's name alone, so the line belongs to that area (the audit reads it so)
        rain_panels.append((s["state"], {
            "peak_window": {"months": [m for m in range(12) if m + 1 in win]},
            "rain_over_peak": [round(v / top, 3) for v in s["rain_mm"]],
            "published": s["seasonal_index"]}))
    return {
        "season_rain_states.svg": _figure("Every state: its rain, its published season and the 80 % peak window",
                                          rain_panels, 0.0, 1.0, list(MONTH_LETTERS),
                                          "Rain and index scaled to their peak month. The season is the published "
                                          "index; the rain is the state's CHIRPS climatology (public domain)."
                                          if rain_panels else "no seasons in this data load"),
        "season_states.svg": _figure("Dated states: the season predicted without the state",
                                     state_panels, 0.3, 1.0, list(MONTH_LETTERS),
                                     "Scaled to peak 1. Grey band: published archetype case profiles of the state's "
                                     "LGAs. The dated series are scored (see the tables), not drawn." if state_panels
                                     else absent),
        "season_lgas.svg": _figure("Sample of dated LGAs (first two by code in each state)", lga_panels, 0.2, 1.0,
                                   list(MONTH_LETTERS),
                                   "The dated series are scored (see the tables), not drawn." if lga_panels
                                   else absent),
        "score_vs_cases.svg": _figure("Score month by month (over its own mean), season fitted without the state",
                                      score_panels, 0.4, 1.8, month_labels,
                                      "r against the dated cases: monthly levels / month-to-month anomalies (the "
                                      "cases themselves are not drawn)." if score_panels
                                      else months.get("note", absent)),
    }


SKILL_SERIES = {
    "skill:published": ("#d9730d", "", "published (the registered rule, fold by fold)"),
    "skill:projected_a1": ("#1f6fb4", "", "projected counts, alpha 1"),
    "skill:seasonal_adjustment_k3": ("#2ca02c", "4 3", "seasonal adjustment, k = 3 (Abeku et al. 2002)"),
    "skill:protocol_1": ("#999999", "2 2", "protocol 1 as published"),
    "skill:flat": ("#8c564b", "1 2", "flat level, past 12 months"),
    "skill:coverage_50": ("#1f6fb4", "", "published: 50 % interval"),
    "skill:coverage_80": ("#d9730d", "", "published: 80 % interval"),
    "skill:target_50": ("#1f6fb4", "1 3", "stated 0.50"),
    "skill:target_80": ("#d9730d", "1 3", "stated 0.80"),
}
STYLE.update({k: (c, d) for k, (c, d, _) in SKILL_SERIES.items()})
LABELS.update({k: label for k, (_, _, label) in SKILL_SERIES.items()})


def skill_plot(report: dict[str, Any]) -> str:
    """The scorecard at a glance: skill against persistence by horizon, and the coverage of the 50 % and
    80 % intervals, at LGA and state level, from docs/skill.json of the same release (summaries only)."""
    panels: list[tuple[str, dict[str, Sequence[float | None] | Band]]] = []
    levels = report.get("levels") or {}
    for level, name in (("lgas", "LGA series"), ("states", "state series")):
        hs = (levels.get(level) or {}).get("horizons", [])
        if not hs:
            continue
        meth = [h["all"].get("methods", {}) for h in hs]
        panels.append((f"{name}: skill vs persistence", {
            f"skill:{m}": [x.get(m, {}).get("skill_vs_persistence") for x in meth]
            for m in ("published", "projected_a1", "seasonal_adjustment_k3", "protocol_1", "flat")}))
        panels.append((f"{name}: interval coverage", {
            "skill:coverage_50": [x.get("published", {}).get("coverage_50") for x in meth],
            "skill:coverage_80": [x.get("published", {}).get("coverage_80") for x in meth],
            "skill:target_50": [0.5] * len(meth), "skill:target_80": [0.8] * len(meth)}))
    note = ("Nested whole-state cross-validation on the dated series; x: months ahead 1-4. Skill panels from -0.5 "
            "to 1, coverage from 0 to 1." if panels else report.get("reason", "the scorecard was not run"))
    skill_panels = [p for p in panels if "skill" in p[0]]
    cover_panels = [p for p in panels if "coverage" in p[0]]
    a = _figure("Projected counts: skill against persistence", skill_panels, -0.5, 1.0, ["1", "2", "3", "4"], note)
    b = _figure("Projected counts: coverage of the stated intervals", cover_panels, 0.0, 1.0, ["1", "2", "3", "4"], "")
    return a if not cover_panels else _stack(a, b)


def _stack(a: str, b: str) -> str:
    """Two figures one above the other in one SVG."""
    import re

    def size(s: str) -> tuple[int, int]:
        m = re.search(r'width="(\d+)" height="(\d+)"', s)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    (wa, ha), (wb, hb) = size(a), size(b)
    w, h = max(wa, wb), ha + hb
    inner = [f'<g transform="translate(0,{y})">{s.split(">", 1)[1].rsplit("</svg>", 1)[0]}</g>' for s, y in ((a, 0), (b, ha))]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'font-family="sans-serif" role="img" aria-label="Season-ratio scorecard">\n<title>Season-ratio scorecard'
            f"</title>\n" + "\n".join(inner) + "\n</svg>\n")
