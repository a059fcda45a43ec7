"""The one route table: path → scope, query parameters, validation, file key, content type.

Everything that knows about endpoints reads this module: the gate (to validate a
request and map it to a file), the renderer (to know which files a release must
hold), the OpenAPI document and the docs site. Adding an endpoint means adding a
`Route` here and a producer in the pipeline; nothing else lists paths.

This module is part of the edge bundle, so it imports only the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = "application/json"
GEOJSON = "application/geo+json"

SCOPES = ("risk_scores", "forecasts", "lga_boundaries")

# Anchored for the OpenAPI document (JSON Schema patterns are unanchored) and used with
# fullmatch here, because `$` alone would also accept a trailing newline.
PERIOD_RE = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
STATE_RE = re.compile(r"^[A-Z]{2}$")
MONTHS_RE = re.compile(r"^[1-4]$")


class ParamError(Exception):
    """A query value that fails validation; carries the problem code the SPEC assigns."""

    def __init__(self, code: str, detail: str, param: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.param = param


@dataclass(frozen=True)
class Facts:
    """What a release holds, needed to validate values that depend on the data.

    Written by the renderer into the manifest (and the published pointer) so the
    edge never has to list files to answer "is 2019-04 a forecast month?".
    """

    states: tuple[str, ...] = ()
    estimated: tuple[str, ...] = ()
    forecast: tuple[str, ...] = ()
    available: tuple[str, ...] = ()  # datasets present in the release

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Facts:
        return cls(
            states=tuple(raw.get("states", ())),
            estimated=tuple(raw.get("estimated", ())),
            forecast=tuple(raw.get("forecast", ())),
            available=tuple(raw.get("available", ())),
        )

    def to_json(self) -> dict[str, list[str]]:
        return {
            "states": list(self.states),
            "estimated": list(self.estimated),
            "forecast": list(self.forecast),
            "available": list(self.available),
        }

    @property
    def last_estimated(self) -> str | None:
        return self.estimated[-1] if self.estimated else None


# --- parameter kinds -------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A query parameter: how to validate it and which values a release must render.

    `kind` selects the validator and the value domain; validators return the
    canonical string that goes into the file key, so a file key is only ever built
    from values that matched a strict pattern.
    """

    name: str
    kind: str  # "state" | "period" | "months"
    required: bool
    description: str
    default: str | None = None  # "last_estimated" or a literal

    def validate(self, raw: str | None, facts: Facts) -> str:
        return VALIDATORS[self.kind](self, raw, facts)

    def domain(self, facts: Facts) -> tuple[str, ...]:
        """Every value a release renders a file for."""
        if self.kind == "state":
            return facts.states
        if self.kind == "period":
            return facts.estimated
        if self.kind == "months":
            return ("1", "2", "3", "4")
        raise ValueError(self.kind)


def _state(p: Param, raw: str | None, facts: Facts) -> str:
    if raw is None:
        raise ParamError("UNKNOWN_STATE", "The `state` parameter is required: a two-letter state code such as KN.", p.name)
    if not STATE_RE.fullmatch(raw) or raw not in facts.states:
        hint = ""
        if raw.upper() in facts.states:
            hint = f" State codes are upper case: use `{raw.upper()}`."
        shown = raw if len(raw) <= 20 else raw[:20] + "…"
        raise ParamError(
            "UNKNOWN_STATE",
            f"`{shown}` is not a state code.{hint} Valid codes are the 37 ISO 3166-2:NG suffixes (AB … ZA, FC for Abuja).",
            p.name,
        )
    return raw


def _period(p: Param, raw: str | None, facts: Facts) -> str:
    if raw is None:
        if facts.last_estimated is None:
            raise ParamError("PERIOD_NOT_AVAILABLE", "This release holds no estimated month.", p.name)
        return facts.last_estimated
    shown = raw if len(raw) <= 20 else raw[:20] + "…"
    if not PERIOD_RE.fullmatch(raw):
        raise ParamError("INVALID_PERIOD", f"`{shown}` is not a month of the form YYYY-MM (e.g. 2024-07).", p.name)
    if raw in facts.forecast:
        raise ParamError(
            "FORECAST_PERIOD",
            f"{raw} is a forecast month; use /v1/forecasts/states or /v1/forecasts/lgas.",
            p.name,
        )
    if raw not in facts.estimated:
        first = facts.estimated[0] if facts.estimated else "?"
        last = facts.forecast[-1] if facts.forecast else facts.last_estimated
        raise ParamError(
            "PERIOD_NOT_AVAILABLE",
            f"{raw} is outside the months held ({first} to {last}); see /v1/periods.",
            p.name,
        )
    return raw


def _months(p: Param, raw: str | None, facts: Facts) -> str:
    if raw is None:
        return str(p.default)
    if not MONTHS_RE.fullmatch(raw):
        shown = raw if len(raw) <= 20 else raw[:20] + "…"
        raise ParamError("INVALID_MONTHS", f"`{shown}` is not a whole number from 1 to 4.", p.name)
    return raw


VALIDATORS = {"state": _state, "period": _period, "months": _months}

STATE = Param("state", "state", True, "Two-letter state code (ISO 3166-2:NG suffix, upper case), e.g. `KN`.")
PERIOD = Param(
    "period", "period", False, "Estimated month, YYYY-MM. Defaults to the latest estimated month.", "last_estimated"
)
MONTHS = Param("months", "months", False, "How many forecast months, 1 to 4. Default 4.", "4")


# --- routes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One endpoint. `file_key` is a template over the parameter names."""

    path: str
    scope: str | None  # None: any valid key
    params: tuple[Param, ...]
    file_key: str
    content_type: str
    summary: str
    dataset: str  # which producer fills it; absent datasets answer `unavailable`
    unavailable: tuple[int, str] | None = None  # (status, code) when the dataset is absent
    errors: tuple[str, ...] = field(default=())  # SPEC codes this route can return

    def key(self, values: Mapping[str, str]) -> str:
        return self.file_key.format(**values)

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None


TRANSMISSION_UNAVAILABLE = (503, "TRANSMISSION_DATA_UNAVAILABLE")

ROUTES: tuple[Route, ...] = (
    Route(
        "/v1/periods", None, (), "v1/periods.json", JSON,
        "Period index: available months, latest estimated and forecast month, model version.",
        "risk",
    ),
    Route(
        "/v1/risk/states", "risk_scores", (PERIOD,), "v1/risk/states/{period}.json", JSON,
        "All 37 states' risk for one estimated month, highest risk first.",
        "risk", errors=("INVALID_PERIOD", "FORECAST_PERIOD", "PERIOD_NOT_AVAILABLE"),
    ),
    Route(
        "/v1/risk/lgas", "risk_scores", (STATE, PERIOD), "v1/risk/lgas/{state}/{period}.json", JSON,
        "Every LGA of a state for one estimated month, highest risk first.",
        "risk", errors=("INVALID_PERIOD", "FORECAST_PERIOD", "PERIOD_NOT_AVAILABLE", "UNKNOWN_STATE"),
    ),
    Route(
        "/v1/forecasts/states", "forecasts", (MONTHS,), "v1/forecasts/states/{months}.json", JSON,
        "State risk forecasts for the months after the latest estimated month, nearest first.",
        "risk", errors=("INVALID_MONTHS",),
    ),
    Route(
        "/v1/forecasts/lgas", "forecasts", (STATE, MONTHS), "v1/forecasts/lgas/{state}/{months}.json", JSON,
        "LGA risk forecasts of a state for the months after the latest estimated month, nearest first.",
        "risk", errors=("INVALID_MONTHS", "UNKNOWN_STATE"),
    ),
    Route(
        "/v1/context/states", "risk_scores", (), "v1/context/states.json", JSON,
        "Coverage context per state (population-weighted from LGAs); not score inputs.",
        "context",
    ),
    Route(
        "/v1/context/lgas", "risk_scores", (STATE,), "v1/context/lgas/{state}.json", JSON,
        "Coverage context per LGA of a state, alphabetical.",
        "context", errors=("UNKNOWN_STATE",),
    ),
    Route(
        "/v1/transmission/states", "risk_scores", (), "v1/transmission/states.json", JSON,
        "Transmission seasons and survey positivity trends, national and per state.",
        "transmission", unavailable=TRANSMISSION_UNAVAILABLE, errors=("TRANSMISSION_DATA_UNAVAILABLE",),
    ),
    Route(
        "/v1/transmission/lgas", "risk_scores", (STATE,), "v1/transmission/lgas/{state}.json", JSON,
        "Transmission season and typical rainfall per LGA of a state, alphabetical.",
        "transmission", unavailable=TRANSMISSION_UNAVAILABLE,
        errors=("UNKNOWN_STATE", "TRANSMISSION_DATA_UNAVAILABLE"),
    ),
    Route(
        "/v1/boundaries/lgas", "lga_boundaries", (STATE,), "v1/boundaries/lgas/{state}.geojson", GEOJSON,
        "LGA outlines of a state as a GeoJSON FeatureCollection.",
        "geography", errors=("UNKNOWN_STATE",),
    ),
)

BY_PATH: dict[str, Route] = {r.path: r for r in ROUTES}

# The documentation site ships inside each release under this key prefix and is
# served without a key at /docs/…; a path maps to a file only if the manifest
# lists exactly that key, so nothing outside the site can be reached this way.
PUBLIC_PREFIX = "docs/"


def route_values(route: Route, facts: Facts) -> list[dict[str, str]]:
    """Every parameter combination a release renders for `route`."""
    combos: list[dict[str, str]] = [{}]
    for p in route.params:
        combos = [{**c, p.name: v} for c in combos for v in p.domain(facts)]
    return combos
