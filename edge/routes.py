"""The one route table: path → scope, query parameters, validation, file key, content type.

Everything that knows about endpoints reads this module: the gate (to validate a
request and map it to a file), the renderer (to know which files a release must
hold), the OpenAPI document and the docs site. Adding an endpoint means adding a
`Route` here and a producer in the pipeline; nothing else lists paths.

This module is part of the edge bundle, so it imports only the standard library, and its
types are NamedTuples rather than dataclasses: a dataclass costs the CDN function's cold
start up to a millisecond of CPU each to create (docs/deploy.md#measurements).
"""

# Annotations are evaluated, not postponed: a NamedTuple compiles each string annotation when the
# class is created, ~30 µs a field of the CDN function's cold start (docs/deploy.md#measurements).

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

JSON = "application/json"
GEOJSON = "application/geo+json"
CSV = "text/csv; charset=utf-8"

# Response formats a `format` parameter selects, and the media type each file is served as.
FORMATS: dict[str, str] = {"json": JSON, "csv": CSV}

SCOPES = ("risk_scores", "forecasts", "lga_boundaries")

# Anchored for the OpenAPI document (JSON Schema patterns are unanchored) and used with
# fullmatch here, because `$` alone would also accept a trailing newline.
PERIOD_RE = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
STATE_RE = re.compile(r"^[A-Z]{2}$")
# An LGA code: the OCHA COD-AB admin-2 p-code (NG, two digits of the state, three of the LGA).
LGA_RE = re.compile(r"^NG\d{6}$")
MONTHS_RE = re.compile(r"^[1-4]$")
# A release id as the renderer makes it (UTC stamp, 8 hex digits of the content hash) and a
# bundle file name: both are matched whole before either is used to name a file.
RELEASE_ID_RE = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{8}$")
# Any release id the publisher accepts (one S3 key segment): wider than the renderer's, so
# releases named by hand (tests, an operator's re-publish) still publish and serve.
PUBLISHED_RELEASE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
FILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]*(\.[a-z0-9]+){0,2}$")


class ParamError(Exception):
    """A query value that fails validation; carries the problem code the SPEC assigns."""

    def __init__(self, code: str, detail: str, param: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.param = param


class Facts(NamedTuple):
    """What a release holds, needed to validate values that depend on the data.

    Written by the renderer into the manifest (and the published pointer) so the
    edge never has to list files to answer "is 2019-04 a forecast month?".
    """

    states: tuple[str, ...] = ()
    estimated: tuple[str, ...] = ()
    forecast: tuple[str, ...] = ()
    available: tuple[str, ...] = ()  # datasets present in the release
    lgas: tuple[str, ...] = ()  # LGA codes (sorted), for the routes keyed by LGA; empty in older releases

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> "Facts":
        return cls(
            states=tuple(raw.get("states", ())),
            estimated=tuple(raw.get("estimated", ())),
            forecast=tuple(raw.get("forecast", ())),
            available=tuple(raw.get("available", ())),
            lgas=tuple(raw.get("lgas", ())),
        )

    def to_json(self) -> dict[str, list[str]]:
        out = {
            "states": list(self.states),
            "estimated": list(self.estimated),
            "forecast": list(self.forecast),
            "available": list(self.available),
        }
        if self.lgas:  # absent rather than empty, so a release without LGA routes keeps its manifest shape
            out["lgas"] = list(self.lgas)
        return out

    @property
    def last_estimated(self) -> str | None:
        return self.estimated[-1] if self.estimated else None


# --- parameter kinds -------------------------------------------------------------


class Param(NamedTuple):
    """A query parameter: how to validate it and which values a release must render.

    `kind` selects the validator and the value domain; validators return the
    canonical string that goes into the file key, so a file key is only ever built
    from values that matched a strict pattern.
    """

    name: str
    kind: str  # "state" | "period" | "months" | "format" | "lga" | "include"
    required: bool
    description: str
    default: str | None = None  # "last_estimated" or a literal
    # (canonical value, scope) pairs: a value that needs a scope beyond the route's own
    value_scopes: tuple[tuple[str, str], ...] = ()

    def scope_for(self, value: str) -> str | None:
        for v, scope in self.value_scopes:
            if v == value:
                return scope
        return None

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
        if self.kind == "format":
            return tuple(FORMATS)
        if self.kind == "lga":
            return facts.lgas
        if self.kind == "include":
            return INCLUDES
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
        if last is not None and raw > last:  # YYYY-MM compares as text
            reach = f", with forecasts to {facts.forecast[-1]}" if facts.forecast else ""
            raise ParamError(
                "PERIOD_NOT_AVAILABLE",
                f"{raw} {AFTER_HELD}: the data end at {facts.last_estimated}, the latest estimated month"
                f"{reach}; see /v1/periods.",
                p.name,
            )
        raise ParamError(
            "PERIOD_NOT_AVAILABLE",
            f"{raw} is outside the months held ({first} to {last}); see /v1/periods.",
            p.name,
        )
    return raw


AFTER_HELD = "is after the last month this release holds"


def load_due(facts: Facts, today: str) -> bool:
    """Whether a release is served after its last forecast month (or, without forecasts, its last
    estimated month) has passed: `today` is the request's month, YYYY-MM."""
    last = facts.forecast[-1] if facts.forecast else facts.last_estimated
    return last is not None and today > last


def _months(p: Param, raw: str | None, facts: Facts) -> str:
    if raw is None:
        return str(p.default)
    if not MONTHS_RE.fullmatch(raw):
        shown = raw if len(raw) <= 20 else raw[:20] + "…"
        raise ParamError("INVALID_MONTHS", f"`{shown}` is not a whole number from 1 to 4.", p.name)
    return raw


def _format(p: Param, raw: str | None, facts: Facts) -> str:
    if raw is None:
        return str(p.default)
    if raw not in FORMATS:
        shown = raw if len(raw) <= 20 else raw[:20] + "…"
        raise ParamError("INVALID_FORMAT", f"`{shown}` is not a format; use `json` (the default) or `csv`.", p.name)
    return raw


def _lga(p: Param, raw: str | None, facts: Facts) -> str:
    if raw is None:
        raise ParamError("UNKNOWN_LGA", "The `lga` parameter is required: an LGA code such as NG020001 "
                         "(the `lga_code` of /v1/risk/lgas or the gazetteer).", p.name)
    if not LGA_RE.fullmatch(raw) or raw not in facts.lgas:
        shown = raw if len(raw) <= 20 else raw[:20] + "…"
        hint = f" LGA codes are upper case: use `{raw.upper()}`." if raw.upper() in facts.lgas else ""
        raise ParamError(
            "UNKNOWN_LGA",
            f"`{shown}` is not an LGA code of this release.{hint} Codes are OCHA p-codes of the form NG + 6 digits "
            "(e.g. NG020001); /v1/risk/lgas and the gazetteer list them.",
            p.name,
        )
    return raw


# `include` values as the file key spells them: absent → only the estimated months.
INCLUDE_NONE = "estimated"
INCLUDE_FORECASTS = "forecasts"
INCLUDES = (INCLUDE_NONE, INCLUDE_FORECASTS)


def _include(p: Param, raw: str | None, facts: Facts) -> str:
    if raw is None:
        return INCLUDE_NONE
    if raw != INCLUDE_FORECASTS:
        shown = raw if len(raw) <= 20 else raw[:20] + "…"
        raise ParamError("INVALID_INCLUDE", f"`{shown}` is not a value of `include`; the one value is `forecasts` "
                         "(leave the parameter out for the estimated months only).", p.name)
    return raw


VALIDATORS = {"state": _state, "period": _period, "months": _months, "format": _format, "lga": _lga,
              "include": _include}

STATE = Param("state", "state", True, "Two-letter state code (ISO 3166-2:NG suffix, upper case), e.g. `KN`.")
PERIOD = Param(
    "period", "period", False, "Estimated month, YYYY-MM. Defaults to the latest estimated month.", "last_estimated"
)
MONTHS = Param("months", "months", False, "How many forecast months, 1 to 4. Default 4.", "4")
FORMAT = Param(
    "format", "format", False,
    "`json` (default) or `csv`: CSV has one header row and one row per record, the report's own fields "
    "first; see /docs/downloads.html for the columns.",
    "json",
)

LGA = Param("lga", "lga", True, "LGA code (`lga_code`: OCHA COD-AB p-code, NG + 6 digits), e.g. `NG020001`.")
INCLUDE = Param(
    "include", "include", False,
    "`forecasts`: add the forecast months after the estimated ones (needs the `forecasts` scope as well). "
    "Leave out for the estimated months only.",
    None, value_scopes=((INCLUDE_FORECASTS, "forecasts"),),
)


# --- routes ------------------------------------------------------------------------


class Route(NamedTuple):
    """One endpoint. `file_key` is a template over the parameter names."""

    path: str
    scope: str | None  # None: any valid key
    params: tuple[Param, ...]
    file_key: str
    content_type: str
    summary: str
    dataset: str  # which producer fills it; absent datasets answer `unavailable`
    unavailable: tuple[int, str] | None = None  # (status, code) when the dataset is absent
    errors: tuple[str, ...] = ()  # SPEC codes this route can return
    # True: the file lies beside the release pointer, not in a release (it changes when releases
    # are published or pruned; see RELEASE_LIST_NAME), so no release renders it
    beside_pointer: bool = False

    def key(self, values: Mapping[str, str]) -> str:
        return self.file_key.format(**values)

    def media_type(self, values: Mapping[str, str]) -> str:
        """The content type of the file for these values: the `format` parameter's, if it has one."""
        fmt = values.get("format")
        return FORMATS[fmt] if fmt is not None and self.param("format") is not None else self.content_type

    @property
    def document_params(self) -> tuple[Param, ...]:
        """The parameters a producer keys its documents by; the format is the renderer's business."""
        return tuple(p for p in self.params if p.kind != "format")

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None


TRANSMISSION_UNAVAILABLE = (503, "TRANSMISSION_DATA_UNAVAILABLE")

# The list of kept releases: beside `current` (local build root) and `current.json` (bucket).
RELEASE_LIST_NAME = "releases.json"

ROUTES: tuple[Route, ...] = (
    Route(
        "/v1/periods", None, (), "v1/periods.json", JSON,
        "Period index: available months (each with its kind and `basis`), latest estimated and forecast "
        "month, model version. What a month's score is made of comes from the model's declared terms "
        "(the API reference and /v1/periods `basis_descriptions`).",
        "risk",
    ),
    Route(
        "/v1/risk/states", "risk_scores", (PERIOD, FORMAT), "v1/risk/states/{period}.{format}", JSON,
        "All 37 states' risk for one estimated month, highest risk first.",
        "risk", errors=("INVALID_PERIOD", "FORECAST_PERIOD", "PERIOD_NOT_AVAILABLE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/risk/lgas", "risk_scores", (STATE, PERIOD, FORMAT), "v1/risk/lgas/{state}/{period}.{format}", JSON,
        "Every LGA of a state for one estimated month, highest risk first.",
        "risk", errors=("INVALID_PERIOD", "FORECAST_PERIOD", "PERIOD_NOT_AVAILABLE", "UNKNOWN_STATE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/risk/lgas/all", "risk_scores", (PERIOD, FORMAT), "v1/risk/lgas_all/{period}.{format}", JSON,
        "All 774 LGAs' risk for one estimated month, each with its state, highest risk first.",
        "history", errors=("INVALID_PERIOD", "FORECAST_PERIOD", "PERIOD_NOT_AVAILABLE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/history/states", "risk_scores", (STATE, INCLUDE, FORMAT),
        "v1/history/states/{state}/{include}.{format}", JSON,
        "One state's risk for every estimated month, oldest first; with `include=forecasts`, the forecast "
        "months after them.",
        "history", errors=("UNKNOWN_STATE", "INVALID_INCLUDE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/history/lgas", "risk_scores", (LGA, INCLUDE, FORMAT),
        "v1/history/lgas/{lga}/{include}.{format}", JSON,
        "One LGA's risk for every estimated month, oldest first; with `include=forecasts`, the forecast "
        "months after them.",
        "history", errors=("UNKNOWN_LGA", "INVALID_INCLUDE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/forecasts/states", "forecasts", (MONTHS, FORMAT), "v1/forecasts/states/{months}.{format}", JSON,
        "State risk forecasts for the months after the latest estimated month, nearest first.",
        "risk", errors=("INVALID_MONTHS", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/forecasts/lgas", "forecasts", (STATE, MONTHS, FORMAT), "v1/forecasts/lgas/{state}/{months}.{format}", JSON,
        "LGA risk forecasts of a state for the months after the latest estimated month, nearest first.",
        "risk", errors=("INVALID_MONTHS", "UNKNOWN_STATE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/context/states", "risk_scores", (FORMAT,), "v1/context/states.{format}", JSON,
        "Coverage context per state (population-weighted from LGAs); not score inputs.",
        "context", errors=("INVALID_FORMAT",),
    ),
    Route(
        "/v1/context/lgas", "risk_scores", (STATE, FORMAT), "v1/context/lgas/{state}.{format}", JSON,
        "Coverage context per LGA of a state, alphabetical.",
        "context", errors=("UNKNOWN_STATE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/transmission/states", "risk_scores", (), "v1/transmission/states.json", JSON,
        "Transmission seasons and survey positivity trends, national and per state.",
        "transmission", unavailable=TRANSMISSION_UNAVAILABLE, errors=("TRANSMISSION_DATA_UNAVAILABLE",),
    ),
    Route(
        "/v1/transmission/lgas", "risk_scores", (STATE, FORMAT), "v1/transmission/lgas/{state}.{format}", JSON,
        "Transmission season and typical rainfall per LGA of a state, alphabetical.",
        "transmission", unavailable=TRANSMISSION_UNAVAILABLE,
        errors=("UNKNOWN_STATE", "TRANSMISSION_DATA_UNAVAILABLE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/transmission/ratios/states", "risk_scores", (FORMAT,), "v1/transmission/ratios/states.{format}", JSON,
        "Season ratios per state: expected cases h = 1-4 months after each start month over the start month's "
        "cases, from the published seasonal index, with an 80 % range from whole-state cross-validation and "
        "whether it beat persistence there (docs/skill.md).",
        "ratios", unavailable=TRANSMISSION_UNAVAILABLE, errors=("TRANSMISSION_DATA_UNAVAILABLE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/transmission/ratios/lgas", "risk_scores", (STATE, FORMAT), "v1/transmission/ratios/lgas/{state}.{format}",
        JSON,
        "Season ratios per LGA of a state (LGAs alphabetical, then start month and horizon): as the state "
        "ratios, from each LGA's published seasonal index.",
        "ratios", unavailable=TRANSMISSION_UNAVAILABLE,
        errors=("UNKNOWN_STATE", "TRANSMISSION_DATA_UNAVAILABLE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/transmission/smc/states", "risk_scores", (FORMAT,), "v1/transmission/smc/states.{format}", JSON,
        "Seasonal malaria chemoprevention (SMC) planning per state by Nigeria's rule (>= 60 % of the year's rain "
        "in 4 consecutive months, in 4 consecutive of the last ten complete years): verdict, margin, rain onset, "
        "first-cycle month and cycles, this year's rain against the average, children treated per cycle in the "
        "last campaign (docs/smc.md).",
        "smc", errors=("INVALID_FORMAT",),
    ),
    Route(
        "/v1/transmission/smc/lgas", "risk_scores", (STATE, FORMAT), "v1/transmission/smc/lgas/{state}.{format}", JSON,
        "SMC planning per LGA of a state, alphabetical: as the states, with which years rest on the LGA's own "
        "rainfall (2001-2016) and which on its state's, and the SMC rounds delivered 2013-2019.",
        "smc", errors=("UNKNOWN_STATE", "INVALID_FORMAT"),
    ),
    Route(
        "/v1/boundaries/lgas", "lga_boundaries", (STATE,), "v1/boundaries/lgas/{state}.geojson", GEOJSON,
        "LGA outlines of a state as a GeoJSON FeatureCollection.",
        "geography", errors=("UNKNOWN_STATE",),
    ),
    Route(
        "/v1/downloads", None, (), "v1/downloads.json", JSON,
        "The release's bulk downloads: every table (CSV, Parquet), the outlines, the data package "
        "description, README, checksums and one zip, each with its pinned path.",
        "downloads",
    ),
    Route(
        "/v1/releases", None, (), RELEASE_LIST_NAME, JSON,
        "The releases this service keeps, newest first: id, when each went live, model version, months held, "
        "what changed, and the pinned path of its bundle.",
        "releases", beside_pointer=True,
    ),
)

BY_PATH: dict[str, Route] = {r.path: r for r in ROUTES}

# `<path>.csv` is `<path>?format=csv` for every route with a `format` parameter: one operation per
# media type in the OpenAPI document, which is what code generators need to type a CSV answer.
CSV_SUFFIX = ".csv"


def csv_alias(path: str) -> Route | None:
    """The route whose CSV answer `path` names, if it is one of the `.csv` aliases."""
    if not path.endswith(CSV_SUFFIX):
        return None
    route = BY_PATH.get(path[: -len(CSV_SUFFIX)])
    return route if route is not None and route.param("format") is not None else None

# The documentation site ships inside each release under this key prefix and is
# served without a key at /docs/…; a path maps to a file only if the manifest
# lists exactly that key, so nothing outside the site can be reached this way.
PUBLIC_PREFIX = "docs/"


class FileRoute(NamedTuple):
    """Files addressed by path segments rather than query values: a bundle file of a kept release.

    `<prefix><release_id>/<name>` maps to `<key_prefix><name>` inside release `<release_id>`;
    both segments must match their patterns whole, so no request text other than a vetted
    release id and file name ever reaches a file key.
    """

    path: str
    prefix: str
    key_prefix: str
    summary: str
    errors: tuple[str, ...]

    def parse(self, path: str) -> tuple[str, str] | None:
        """(release id, name) when `path` lies under the prefix and has exactly two well-formed segments."""
        rest = path[len(self.prefix):] if path.startswith(self.prefix) else None
        if rest is None:
            return None
        parts = rest.split("/")
        if len(parts) != 2 or not RELEASE_ID_RE.fullmatch(parts[0]) or not FILE_NAME_RE.fullmatch(parts[1]):
            return None
        return parts[0], parts[1]

    def path_for(self, release_id: str, name: str) -> str:
        return f"{self.prefix}{release_id}/{name}"

    def key(self, name: str) -> str:
        return self.key_prefix + name


# Bundle files stored already compressed: the renderer writes no .gz copy of them.
PRECOMPRESSED_SUFFIXES = (".parquet", ".zip")
# The bundle's one zip: not in its SHA256SUMS (the zip holds that file), so named here for the edge.
BUNDLE_ZIP = "malaria_risk_nigeria.zip"

DOWNLOAD_FILE = FileRoute(
    "/v1/downloads/{release_id}/{name}", "/v1/downloads/", "downloads/",
    "One bundle file of a release this service keeps (the current one or an earlier one), byte for byte.",
    ("UNKNOWN_RELEASE", "UNKNOWN_FILE"),
)


def scope_endpoints(scope: str) -> tuple[str, ...]:
    """The endpoints (and parameter values) a scope opens, from the route table: what the dashboard's
    key form says each scope reads. Bundle downloads need the scopes of everything in them
    (their release records which; docs/downloads.md#scopes)."""
    own = tuple(r.path for r in ROUTES if r.scope == scope)
    values = tuple(f"{r.path}?{p.name}={v}" for r in ROUTES for p in r.params for v, s in p.value_scopes
                   if s == scope)
    return own + values


def route_values(route: Route, facts: Facts) -> list[dict[str, str]]:
    """Every parameter combination a release renders for `route`."""
    combos: list[dict[str, str]] = [{}]
    for p in route.params:
        combos = [{**c, p.name: v} for c in combos for v in p.domain(facts)]
    return combos
