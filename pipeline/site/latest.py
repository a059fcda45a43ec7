"""The latest estimated month as tables the map page prints itself: every state, and each state's
LGAs, from the very documents the map reads with a key (/v1/risk/states, /v1/risk/lgas,
/v1/transmission/states, /v1/periods). A reader without JavaScript, or on a connection too slow for
the map, still gets the month's figures, their 80 % ranges and the season; docs/map.md.

Pure: documents in, rows out; the templates (map.html, map_state.html) lay them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class Latest:
    period: str
    basis: str | None
    states: list[dict[str, Any]]  # highest score first, as /v1/risk/states orders them
    lgas: dict[str, list[dict[str, Any]]]  # state code -> its LGAs, highest score first


def level_of(value: float, bands: Sequence[Mapping[str, Any]]) -> str:
    """The level a score falls in (bands: pages.level_bands, lowest first, each from `lower`)."""
    return next(b["level"] for b in reversed(bands) if value >= b["lower"])


def levels_spanned(low: float, high: float, bands: Sequence[Mapping[str, Any]]) -> str | None:
    """'low to moderate' when the 80 % range reaches into more than one level (None otherwise): the level
    of the score alone would hide that the range straddles a threshold."""
    a, b = level_of(low, bands), level_of(high, bands)
    label = {x["level"]: x["label"] for x in bands}
    return None if a == b else f"{label[a]} to {label[b]}"


def season_text(season: Mapping[str, Any] | None, month: int) -> str:
    """'Jun–Oct, peak Aug; Jul high' in a few words, from a season record (SPEC 2.6): the season, and
    whether the month shown is one of its high months."""
    if not season or season.get("season_start_month") is None:
        return "no clear season"
    start, end = season["season_start_month"], season["season_end_month"]
    text = f"{MONTH_NAMES[start - 1]}–{MONTH_NAMES[end - 1]}"
    if season.get("peak_month") is not None:
        text += f", peak {MONTH_NAMES[season['peak_month'] - 1]}"
    high = month in (season.get("high_months") or ())
    return text + f"; {MONTH_NAMES[month - 1]} {'high' if high else 'not high'}"


def _row(r: Mapping[str, Any], bands: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    label = {x["level"]: x["label"] for x in bands}
    return {**r, "level_label": label.get(r["level"], r["level"]),
            "spans": levels_spanned(r["score_low"], r["score_high"], bands)}


def latest_month(docs: Mapping[str, Mapping[tuple[str, ...], Any]], bands: Sequence[Mapping[str, Any]]) -> Latest | None:
    """The latest estimated month's tables, or None when the release has no risk documents (a site
    built without data)."""
    periods = (docs.get("/v1/periods") or {}).get(())
    if not periods or "/v1/risk/states" not in docs:
        return None
    period = periods["last_estimated"]
    month = int(period[5:7])
    seasons = {s["state_code"]: s.get("season")
               for s in ((docs.get("/v1/transmission/states") or {}).get(()) or {}).get("states", [])}
    report = docs["/v1/risk/states"][(period,)]
    states = [{**_row(r, bands), "season": season_text(seasons.get(r["state_code"]), month)}
              for r in report["states"]]
    lgas = {code: [_row(r, bands) for r in doc["lgas"]]
            for (code, p), doc in (docs.get("/v1/risk/lgas") or {}).items() if p == period}
    return Latest(period, report.get("basis"), states, lgas)
