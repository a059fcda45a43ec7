"""Figures of this release that the documentation quotes, taken from the documents the
build just produced, so a page can never disagree with the data it ships with.

Markdown pages refer to them as `{{ name }}` (e.g. `{{ check.median_correlation }}`);
`substitute` replaces every placeholder and refuses an unknown name, so a typo fails the
build instead of publishing a blank.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pipeline.datasets.base import Produced
from pipeline.errors import UnknownFigure

PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_.]*)\s*\}\}")
NOT_IN_RELEASE = "(not in this release)"


def release_figures(produced: Iterable[Produced]) -> dict[str, Any]:
    """Flat `dotted.name → value` of the figures a page may quote; absent datasets give a marker."""
    docs: dict[str, Any] = {}
    for p in produced:
        for path, by_key in p.documents.items():
            if () in by_key:
                docs[path] = by_key[()]
    figures: dict[str, Any] = {}
    periods = docs.get("/v1/periods")
    for name in ("last_estimated", "last_forecast", "model_version", "updated_at"):
        figures[f"periods.{name}"] = (periods or {}).get(name, NOT_IN_RELEASE)
    transmission = docs.get("/v1/transmission/states")
    check = transmission["method"]["check"] if transmission else {}
    method = transmission["method"] if transmission else {}
    for name in ("series", "median_correlation", "mean_months_off", "mean_months_peak_is_off"):
        value = check.get(name, NOT_IN_RELEASE)
        figures[f"check.{name}"] = NOT_IN_RELEASE if value is None else value
    figures["check.states_count"] = len(check["states"]) if check else NOT_IN_RELEASE
    for name in ("cases_follow_rain_by_months", "high_season_share_of_peak"):
        figures[f"method.{name}"] = method.get(name, NOT_IN_RELEASE)
    return figures


def substitute(text: str, figures: Mapping[str, Any], page: str) -> str:
    def one(m: re.Match) -> str:
        name = m.group(1)
        if name not in figures:
            raise UnknownFigure(f"docs/{page}.md quotes {{{{ {name} }}}}, which no producer provides; "
                                f"known: {', '.join(sorted(figures))}")
        return str(figures[name])

    return PLACEHOLDER.sub(one, text)
