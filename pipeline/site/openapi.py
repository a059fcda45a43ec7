"""The OpenAPI 3.1 document, generated from the route table and the problem catalogue.

Paths, parameters (with the validators' own patterns), scopes and the error codes
each route can answer all come from `edge.routes` and `edge.problems`, so the
document cannot drift from what the gate does. What the route table does not know
— the shape of each response body (SPEC 2.1–2.9) — is written out once here, as
JSON Schemas keyed by route path; a test fails if a route has no schema.

The document ships inside every release as `docs/openapi.json`, next to the pages
that describe the same data.
"""

from __future__ import annotations

import re
from typing import Any

from edge.problems import CATALOGUE, PROBLEM_JSON, TYPE_BASE, Problem
from edge.routes import (
    CSV,
    CSV_SUFFIX,
    DOWNLOAD_FILE,
    FILE_NAME_RE,
    FORMATS,
    INCLUDES,
    LGA_RE,
    PERIOD_RE,
    RELEASE_ID_RE,
    ROUTES,
    SCOPES,
    STATE_RE,
    Facts,
    Param,
    Route,
)
from edge.routes import STATE as STATE_PARAM
from pipeline.model import evidence as support
from pipeline.model import terms

OPENAPI_VERSION = "3.1.0"
API_VERSION = "1"

# Answered before a route is known (the path or method itself is wrong), so they
# belong to no operation; the docs list them with the catalogue.
PATH_LEVEL_CODES = ("NOT_FOUND", "METHOD_NOT_ALLOWED")

# Security scheme names: the same key is accepted in either header.
BEARER = "bearerKey"
HEADER = "apiKeyHeader"

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(kind: str, description: str, **extra: Any) -> Schema:
    return {"type": [kind, "null"], "description": description, **extra}


def _obj(properties: dict[str, Schema], required: list[str] | None = None, description: str = "") -> Schema:
    """Every SPEC field is always present (null where the data lacks it), hence required=all by default."""
    out: Schema = {"type": "object", "properties": properties,
                   "required": list(properties) if required is None else required}
    if description:
        out["description"] = description
    return out


# --- value domains shared by several schemas -------------------------------------

LEVELS = ["very_low", "low", "moderate", "high", "very_high"]
SHARE = {"type": "number", "minimum": 0, "maximum": 1}
MONTH_NUMBER = {"type": "integer", "minimum": 1, "maximum": 12}
TWELVE_NUMBERS = {"type": "array", "items": {"type": "number"}, "minItems": 12, "maxItems": 12}


def _share(description: str, nullable: bool = False) -> Schema:
    if nullable:
        return {"type": ["number", "null"], "minimum": 0, "maximum": 1, "description": description}
    return {**SHARE, "description": description}


def _str(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


def _int(description: str, **extra: Any) -> Schema:
    return {"type": "integer", "description": description, **extra}


BASIS = _str("What the month's score rests on (additive; generated from the model's declared terms, "
             "pipeline.model.terms): `survey_fit` within the household survey rounds, `baseline_x_season` after "
             "the newest round's fieldwork, where no survey has measured the month; /v1/periods "
             "`basis_descriptions` gives the release's wording.", enum=list(terms.BASES))
STATE_CODE = _str("Two-letter state code (ISO 3166-2:NG suffix).", pattern=STATE_RE.pattern, examples=["KN"])
PERIOD = _str("Month, YYYY-MM.", pattern=PERIOD_RE.pattern, examples=["2024-07"])
LGA_CODE = _str("Stable LGA identifier: the OCHA COD-AB p-code. Join on it, not on the name.",
                pattern=LGA_RE.pattern, examples=["NG001001"])


def resource_schemas(adopted: tuple[str, ...] = ()) -> dict[str, Schema]:
    """SPEC sections 2.1–2.9 as JSON Schema (draft 2020-12, which OpenAPI 3.1 uses).

    `adopted`: the month terms in this release's score (pipeline.model.terms); the descriptions of what a
    month is made of are generated from the model's declared terms."""
    risk_common = {
        "score": _share("Risk score: modelled malaria positivity, the share (0 to 1) of children 6–59 months a "
                        "microscopy survey of the area would be expected to find infected in that month. A model "
                        "figure, not an observation (docs: model)."),
        "score_low": _share("Lower end of the score's 80 % predictive range, in the score's unit (share of "
                            "children 6–59 months): a survey of the area in that month would measure a value in "
                            "[score_low, score_high] with probability 0.8 (`score_range_level` of /v1/periods)."),
        "score_high": _share("Upper end of the score's 80 % predictive range, in the score's unit (share of "
                             "children 6–59 months); see `score_low`."),
        "level": _str("Risk level band of the score.", enum=LEVELS),
    }
    season = {
        "peak_month": {**MONTH_NUMBER, "type": ["integer", "null"],
                       "description": "Month reported cases are expected to be highest (accurate to about a "
                       "month): the month of the smoothed index's peak. null where `season_class` is `weak` (a "
                       "deviation: otherwise an integer), because no month is reliably the peak there; "
                       "`peak_month_null_reason` says so and `peak_window` gives the likely months."},
        "peak_month_null_reason": _nullable("string", "Why `peak_month` is null (a weak season); null when it "
                                            "is given (additive)."),
        "season_start_month": {**MONTH_NUMBER, "description": "First month of the high season."},
        "season_end_month": {**MONTH_NUMBER, "description": "Last month of the high season."},
        "season_months": _int("Length of the high season in months.", minimum=1, maximum=12),
        "high_months": {"type": "array", "items": MONTH_NUMBER, "description": "Every month at "
                        "`high_season_share_of_peak` of the peak or more."},
        "seasonal_index": {**TWELVE_NUMBERS, "description": "Expected level of reported cases per month "
                           "(January to December) as a share of the peak month (peak month = 1)."},
        "season_centre_month": {"type": "number", "minimum": 1, "exclusiveMaximum": 13,
                                "description": "Centre of the season (phase of the first annual harmonic of "
                                "the index), one decimal; 7.0 is mid-July, 12.5 the turn of the year "
                                "(additive)."},
        "peak_window": {"type": "array", "items": MONTH_NUMBER, "minItems": 1, "maxItems": 12,
                        "description": "Months (calendar order) that together hold about 80 % probability of "
                        "the peak month of reported cases: the smoothed peak month ± the half-width calibrated "
                        "for the area's season class and level in whole-state cross-validation on the dated "
                        "(development) states; wider as the season flattens; the whole year when it cannot be "
                        "told (additive)."},
        "peak_window_probability": _share("Probability (share, 0 to 1) the peak window is meant to hold: 0.8, i.e. an 80 % window (additive)."),
        "peak_window_calibrated": {"type": "boolean", "description": "true where the window's half-width was "
                                   "calibrated on held-out dated states; false (fixed, wide half-widths) when the "
                                   "dated series are absent from the data load (additive)."},
        "season_class": _str("Strength of the season from `season_class_trough_to_peak`: `weak` (>= 0.70: "
                             "cases barely vary over the year; no peak month is given), `marked` only with "
                             "evidence (that reading plus its out-of-sample mean absolute error still < 0.50), "
                             "`moderate` otherwise (additive).", enum=["marked", "moderate", "weak"]),
        "season_trough_to_peak": _share("The smoothed index's quietest month as a share of its peak, 2 decimals "
                                        "(additive)."),
        "season_class_trough_to_peak": _share("The trough/peak reading `season_class` is read from, as a share of the peak month, 2 decimals: "
                                              "the smoothed index's own (`season_trough_to_peak`) "
                                              "corrected by its out-of-sample bias at the area's level "
                                              "(`class_correction` in the season check of the release's model, `method.check.model_7`), a modelled figure; "
                                              "additive)."),
        "season_start_error_months": _nullable("number", "Mean absolute error of `season_start_month`, months, "
                                               "in whole-state cross-validation on the dated states at this "
                                               "level (state or LGA); null without dated series (additive)."),
        "season_end_error_months": _nullable("number", "Mean absolute error of `season_end_month`, months, as "
                                             "`season_start_error_months` (additive)."),
        "best_4_months_start_month": {**MONTH_NUMBER, "description": "First month of the 4 consecutive months "
                                      "with the largest share of the year's expected cases (a planning figure, "
                                      "not a prescription; docs: seasons) (additive)."},
        "best_4_months_share": _share("Share of the year's expected reported cases in those 4 months (additive; "
                                      "compare the WHO SMC criterion of 60 %, docs: seasons)."),
        "best_4_months_start_error_months": _nullable("number", "Mean absolute error of "
                                                      "`best_4_months_start_month`, months, cross-validated on "
                                                      "the dated states at this level (additive)."),
        "best_4_months_share_error": _nullable("number", "Mean absolute error of `best_4_months_share`, as a share "
                                               "of a year's cases, cross-validated as above (additive)."),
        "season_level": _str("What the index describes: `lga` (the LGA's own season, published only where "
                             "LGA deviations from their state were shown to repeat across 2020-21 and 2022-23), "
                             "`state` (the state's season, given to its LGAs), `national` (additive).",
                             enum=["lga", "state", "national"]),
        "lag_months": {"type": "number", "description": "Months by which the season's centre lies after the "
                       "centre of the area's rainfall climatology (negative: before), read off the season fitted "
                       "to cases (additive)."},
        "seasonal_floor": _share("The area's floor: expected cases in its quietest month as a share of the peak "
                                 "(additive)."),
        "high_season_share_of_peak": _share("The area's threshold share of the peak defining `high_months`: "
                                            "halfway between its floor and the peak (additive)."),
        "fitted_without_own_series": {"type": "boolean", "description": "true where the area's state has dated "
                                      "case series: its season is then the one fitted without any of that state's "
                                      "series (the curve the validation page scores out of sample), so none of "
                                      "its own rows shapes it; false elsewhere and nationally (additive; docs: "
                                      "seasons)."},
    }
    survey = {
        "survey_year": _int("Survey round: the year it was fielded.", enum=[2010, 2015, 2018, 2021]),
        "positivity": _share("Share of children aged 6 to 59 months who tested positive."),
        "low": _share("Lower end of the 95% range; null where the source gives none.", nullable=True),
        "high": _share("Upper end of the 95% range; null where the source gives none.", nullable=True),
        "clusters": _nullable("integer", "Survey locations in the area that round; null where the source "
                              "gives no exact count (see /docs/survey.html)."),
        "children_tested": _nullable("integer", "Children tested in the area that round; null where the "
                                     "source gives no exact count (see /docs/survey.html)."),
        "small_sample": _nullable("boolean", "true when fewer than 100 children were tested; false also where "
                                  "a lower bound of 100 or more (`children_tested_lower_bound`) makes that certain; "
                                  "null when it is unknown."),
        "survey": _str("Survey round, e.g. `2021 NMIS` (additive)."),
        "test": {"type": "string", "enum": ["microscopy", "RDT"],
                 "description": "Test behind the figure: microscopy wherever the round has it, else RDT "
                                "(additive; compare entries only when it agrees)."},
        "test_assumed": {"type": "boolean",
                         "description": "true where the source does not name the test (additive)."},
        "source": _str("Where the figure comes from (additive)."),
        "children_tested_lower_bound": _nullable("integer", "Additive: the number of children tested by "
                                                 "microscopy is at least this (microscopy entries only); a bound, "
                                                 "never the exact count (see the survey page).", minimum=0),
        "children_tested_lower_bound_covers": _nullable("string", "Additive: what exactly the bound counted."),
        "children_tested_lower_bound_source": _nullable("string", "Additive: origin and licence of the bound."),
        "clusters_lower_bound": _nullable("integer", "Additive: the survey clusters in the area that round are at "
                                          "least this many; a bound, never the exact count.", minimum=0),
        "clusters_lower_bound_covers": _nullable("string", "Additive: what exactly the bound counted."),
        "clusters_lower_bound_source": _nullable("string", "Additive: origin and licence of the bound."),
    }
    context_figures = {
        "population": _int("People living in the area."),
        "area_km2": {"type": "number", "description": "Land area, km², computed geodesically from the outline."},
        "itn_use": _share("Share who slept under a treated net.", nullable=True),
        "itn_access": _share("Share with access to a treated net.", nullable=True),
        "irs_coverage": _share("Share protected by indoor spraying.", nullable=True),
        "effective_treatment": _share("Share of malaria cases getting effective treatment.", nullable=True),
        "travel_minutes_to_care": _nullable("number", "Average travel time to the nearest health facility, "
                                            "minutes."),
        "response_index": _share("Average of net use and effective treatment: a share (0 to 1).", nullable=True),
        "itn_use_low_90": _share("Lower end of the 90% interval of the LGA's 2018 net-use estimate (additive); "
                                 "null in state records.", nullable=True),
        "itn_use_high_90": _share("Upper end of the 90% interval of the LGA's 2018 net-use estimate (additive); "
                                  "null in state records.", nullable=True),
        "itn_use_2024": _share("Net use by children under 5, NDHS 2024 small-area estimate (additive; a newer "
                               "year than `coverage_year`).", nullable=True),
        "itn_use_2024_low_90": _share("Lower end of the 90% interval of the LGA's 2024 estimate (additive); null "
                                      "in state records.", nullable=True),
        "itn_use_2024_high_90": _share("Upper end of the 90% interval of the LGA's 2024 estimate (additive); "
                                       "null in state records.", nullable=True),
    }
    evidence_fields: dict[str, Schema] = {
        "evidence": _str("What the LGA's place within its state rests on (additive; docs/model.md, \"Evidence "
                         "and rank ranges\"): `direct` where its own NDHS 2018 survey children carry at least half "
                         "of its offset from the state (the small-area model's shrinkage weight sigma2 / (sigma2 + v) "
                         ">= 0.5), `some` where they carry less, `borrowed` where it has none (covariates, neighbours "
                         "and its state only). The weight itself is not published: across LGAs it follows their "
                         "survey children, which are not published per LGA.",
                         enum=list(support.EVIDENCE_LEVELS)),
        "survey_children_2018_band": {"type": ["string", "null"], "pattern": "^(" + "|".join(
                                     re.escape(b) for _, b in support.CHILDREN_BANDS) + ")$",
                                 "description": "Children aged 6-59 months with an NDHS 2018 microscopy result in "
                                 "survey clusters inside the LGA, the sample its own offset rests on, as a band "
                                 "(`none`, `1-9`, `10-24`, `25-49`, `50+`): the exact count per LGA is a model input "
                                 "not published per LGA (the state totals are in the survey trends). Clusters per "
                                 "LGA are in no source and the 2021 NMIS has no LGA-level data. Null when the data "
                                 "load has no LGA survey file (additive)."},
    }
    rank_fields: dict[str, Schema] = {
        "rank": _int("The LGA's rank within its state this month, 1 = highest score (the order of the report; "
                     "additive).", minimum=1),
        "rank_low": _nullable("integer", "Best (lowest) end of the 80 % range of the LGA's rank within its state, "
                              "from 200 seeded draws of the score's uncertainty (the state's part shared by its LGAs, "
                              "the LGA's offset its own); always <= `rank`. Null where the state's ranges would say "
                              "little: a random ranking would fall inside them nearly as often (`rank_range_withheld`; "
                              "docs/range-protocol.md) (additive).", minimum=1),
        "rank_high": _nullable("integer", "Worst (highest) end of the 80 % rank range within the state; always >= "
                               "`rank`. LGAs whose rank ranges overlap cannot be told apart. Null with `rank_low` "
                               "(additive).", minimum=1),
        "rank_range_withheld": _nullable("string", "Why `rank_low` and `rank_high` are null: "
                                         f"`{support.RANK_RANGE_WITHHELD}`, the survey cannot rank the LGAs of this "
                                         "state (a random ranking of its LGAs falls inside their 80 % ranges more than "
                                         f"{support.RANK_RANDOM_INCLUSION_MAX:.2f} of the time); null where the "
                                         "ranges are published (additive).",
                                         pattern="^" + re.escape(support.RANK_RANGE_WITHHELD) + "$"),
    }
    s: dict[str, Schema] = {}
    s["Month"] = _obj({
        "period": PERIOD, "kind": _str("Kind of month.", enum=["estimated", "forecast"]),
        "provisional": {"type": "boolean", "description": terms.provisional_words(adopted)},
        "basis": BASIS,
        "month_end": _str("The month's last day (additive): the month has passed once a client's own date is later.",
                          format="date"),
        "passed_at_release": {"type": "boolean", "description": "Whether the month had ended when the data were "
                              "loaded (`updated_at`; additive). A forecast month can be past: forecasts are made "
                              "from the data of the load, not revised as months go by."},
    })
    s["PeriodIndex"] = _obj({
        "last_estimated": {**PERIOD, "description": "Most recent month with recorded rainfall."},
        "last_forecast": {**PERIOD, "description": "Furthest month ahead that has a forecast. A forecast is the "
                          "survey baseline times the typical season of its calendar month: it equals the season "
                          "climatology scaled by the baseline (no rainfall forecast is used; its skill against "
                          "climatology and persistence is on the validation page)."},
        "months": {"type": "array", "items": _ref("Month"), "description": "Every available month, oldest "
                   "first, from 2018-01."},
        "updated_at": _str("When the data was last loaded (ISO 8601).", format="date-time"),
        "model_version": _str("Version of the model that produced the scores."),
        "score_range_level": _share("Probability that a survey of the area in that month would measure a value "
                                    "inside [score_low, score_high] (additive)."),
        "season_after_survey": _obj({
            "source": _str("What the season factor of a month after the newest survey round reads: "
                           "`typical_season` (the usual season of its calendar month) or `recorded_rain` (that "
                           "month's own rain), as the model's registered recorded-rain check decided (additive; docs: model-7-protocol).",
                           enum=list(terms.SEASON_SOURCES)),
            "description": _str("The same, in one plain sentence."),
            "recorded_rain_gain": _nullable("number", "The check's gain in median LGA month-to-month r from "
                                            "driving the season by recorded rain (out of sample); null without "
                                            "dated series."),
            "recorded_rain_minimum_gain": _nullable("number", "The registered minimum gain in median "
                                                    "month-to-month correlation r (0.03)."),
        }, description="Months after the last survey: typical season or recorded rain (additive)."),
        "kind_descriptions": _obj({k: _str(f"What a `{k}` month is built from.") for k in terms.KINDS},
                                  description="What each kind of month is built from in this release, generated "
                                  "from the model's declared terms (additive; the same words as the bundle's "
                                  "README and datapackage.json)."),
        "all_passed_at_release": {"type": "boolean", "description": "Whether every month of the release, the "
                                  "forecast months included, had ended when the data were loaded (additive): then "
                                  "the release forecasts nothing still to come and the next data load is due."},
        "score_terms": {"type": "array", "items": _str("A term key."), "description": "The terms the scores "
                        "of this release are made of, in order (additive; docs/model.md): " + ", ".join(
                            f"`{t.key}` ({t.words})" for t in terms.terms(adopted)) + "."},
        "basis_descriptions": _obj({b: _str(f"What a `{b}` month rests on.") for b in terms.BASES},
                                   description="What each `basis` value means in this release, generated from the "
                                   "model's declared terms (additive)."),
        "drift_after_last_survey": _obj({
            "applied": {"type": "boolean", "description": "Whether the baseline moves after each state's last "
                        "survey round: only where a drift passed its registered check (a build without the newest "
                        "round must predict it better with the drift than with the level held, docs/range-protocol.md); "
                        "otherwise the last round's level holds and only the range widens."},
            "logit_per_year": {"type": "number", "description": "The drift applied per year after the state's last "
                               "round, on the logit scale (0 when the level holds)."},
        }, description="What the baseline does after the last survey round (additive)."),
    }, description="The months the service covers: latest estimated month, forecast horizon, model version. "
       + terms.periods_description(adopted))
    s["StateRisk"] = _obj({
        "state_code": STATE_CODE, "state": _str("State name."), "zone": _str("Geopolitical zone."),
        **risk_common,
        "lgas": _int("Number of LGAs in the state."), "population": _int("People living in the state."),
    }, description="One state's risk for one month.")
    s["LgaRisk"] = _obj({
        "lga_code": LGA_CODE, "lga": _str("LGA name."), **risk_common,
        "is_urban": {"type": "boolean", "description": "Whether the LGA is classed as urban (derived from "
                     "population density; no official flag exists)."},
        "population": _int("People living in the LGA."),
        **evidence_fields, **rank_fields,
    }, description="One LGA's risk for one month.")
    def report(kind: str, lgas: bool) -> dict[str, Schema]:
        """A month's report: the states (or one state's LGAs), highest risk first."""
        area = {"state_code": STATE_CODE, "state": _str("State name.")} if lgas else {}
        rows, ref, what, tie = (("lgas", "LgaRisk", "Every LGA of the state", "lga_code") if lgas
                                else ("states", "StateRisk", "All states", "state_code"))
        return {"period": PERIOD, "kind": _str(f"Always `{kind}`.", const=kind), **area,
                rows: {"type": "array", "items": _ref(ref), "description": f"{what}, highest risk first; ties "
                       f"broken by `{tie}`."},
                "basis": BASIS}

    def forecasts(ref: str) -> dict[str, Schema]:
        return {"forecasts": {"type": "array", "items": _ref(ref), "minItems": 1, "maxItems": 4,
                              "description": "One report per month after the latest estimated month, nearest first."}}

    s["StateRiskReport"] = _obj(report("estimated", False), description="Risk of every state for one estimated month.")
    s["LgaRiskReport"] = _obj(report("estimated", True),
                              description="Risk of every LGA of one state for one estimated month.")
    s["StateForecast"] = _obj(report("forecast", False))
    s["StateForecastResponse"] = _obj(forecasts("StateForecast"),
                                      description="State forecasts, one report per forecast month.")
    s["LgaForecast"] = _obj(report("forecast", True))
    s["LgaForecastResponse"] = _obj(forecasts("LgaForecast"),
                                    description="LGA forecasts of one state, one report per forecast month.")
    s["ContextSource"] = _obj({
        "name": _str("Origin of the coverage figures, with licences."),
        "coverage_year": _nullable("integer", "Year the net and treatment figures describe."),
        "note": _str("States that the figures are modelled context and not score inputs."),
        "fields": {"type": "object", "additionalProperties": {"type": "string"},
                   "description": "Additive: origin of each field, one line per field."},
        "years": {"type": "object", "additionalProperties": {"type": "integer"},
                  "description": "Additive: the year each figure describes, by field."},
        "attribution": {"type": "array", "items": _ref("Attribution"),
                        "description": "Additive: every source behind these figures, with licence and citation."},
    })
    s["Attribution"] = _obj({
        "key": _str("Stable identifier of the source."),
        "name": _str("Name of the data set."),
        "provider": _str("Who made it."),
        "used_for": _str("What the service takes from it."),
        "licence": _str("Licence of the data, as far as it could be established."),
        "via": _str("Where the copy used was obtained."),
        "note": _str("Caveats; may be empty."),
        "citation": _str("How to cite it; may be empty."),
    })
    s["TransmissionSource"] = {
        "type": "object", "required": ["rainfall", "lga_rainfall_shape"],
        "description": "Origin and licence of each input; `surveys` lists every survey source quoted.",
        "properties": {
            "rainfall": _str("Source of the state rainfall series."),
            "lga_rainfall_shape": _str("Source of the within-state LGA rainfall shape."),
            "check_cases": _str("Source of the archetype case profiles the season is fitted to and checked "
                                "against (out of sample)."),
            "fit_dated_cases": _str("Source of the dated LGA case series used for fitting and validation only "
                                    "(rows never published; additive)."),
            "surveys": {"type": "array", "items": {"type": "string"},
                        "description": "Every survey source quoted, one line each."},
            "survey_note": _str("How survey rounds were chosen and labelled."),
            "note": _str("How the LGA rainfall was derived."),
            "survey_sample": {
                "type": "object", "required": ["note", "sources"],
                "description": "Additive: where the survey sample lower bounds come from (see /docs/survey.html).",
                "properties": {
                    "note": _str("How the bounds were made and why they are bounds, not counts."),
                    "sources": {"type": "array", "items": _ref("Attribution"),
                                "description": "The sources of the bounds, with licence and citation."},
                },
            },
        },
    }
    s["StateContext"] = _obj({
        "state_code": STATE_CODE, "state": _str("State name."), "zone": _str("Geopolitical zone."),
        "lgas": _int("Number of LGAs."), **context_figures,
    }, description="Context figures of one state: population-weighted averages of the state's LGAs.")
    s["LgaContext"] = _obj({
        "lga_code": LGA_CODE, "lga": _str("LGA name (OCHA)."),
        "is_urban": {"type": "boolean", "description": "Urban classification (derived, see the geography page)."},
        **context_figures,
    }, description="Context figures of one LGA.")
    s["StateContextResponse"] = _obj({
        "source": {**_ref("ContextSource"), "description": "Origin, licence and year of the figures."},
        "states": {"type": "array", "items": _ref("StateContext"), "description": "Every state, by state code."},
    })
    s["LgaContextResponse"] = _obj({
        "source": {**_ref("ContextSource"), "description": "Origin, licence and year of the figures."},
        "state_code": STATE_CODE, "state": _str("State name."),
        "lgas": {"type": "array", "items": _ref("LgaContext"), "description": "Alphabetical by LGA name."},
    })
    s["Season"] = _obj(season, description="When reported cases are expected to be highest in an area (not how high).")
    s["SurveyTrendEntry"] = _obj(survey, description="One survey round's malaria positivity in children for one state.")
    s["NationalSurveyTrendEntry"] = _obj({
        **survey,
        "urban": _share("Positivity in children 6–59 months living in urban survey clusters (share, 0 to 1).",
                        nullable=True),
        "rural": _share("Positivity in children 6–59 months living in rural survey clusters (share, 0 to 1).",
                        nullable=True),
        "derived": {"type": "boolean", "description": "true where no national figure of this test was "
                    "published for the round and the entry is the population-weighted mean of its zone figures "
                    "(additive)."},
        "derived_from": _nullable("string", "What a derived entry was computed from; null for a published "
                                  "figure (additive)."),
        "test_note": _nullable("string", "How the test of a figure whose source does not name it was checked "
                               "(additive)."),
    }, description="One survey round's national malaria positivity in children, with urban and rural; one test per series.")
    s["TransmissionCheck"] = _obj({
        "series": _int("How many independent case series were compared."),
        "states": {"type": "array", "items": {"type": "string"}, "description": "Names of the states checked."},
        "median_correlation": _nullable("number", "Median correlation (Pearson r, "
                               "-1 to 1) between the season predicted out of sample and each recorded case series."),
        "mean_months_off": _nullable("number", "Mean distance between predicted and "
                            "recorded season start and end, months."),
        "mean_months_peak_is_off": _nullable("number", "Mean distance between predicted "
                                    "and recorded peak month, months."),
        "cross_validation": _str("How the figures were made out of sample (additive)."),
        "season_rule": _str("The season rule published (additive): `model_5` whenever dated case series exist, `model_4` with case records only; the "
                            "others are refitted in the same folds as its comparison.",
                            enum=["model_2", "constant_floor_both_sources", "model_3", "model_4", "model_5", "model_6", "model_7"]),
        "season_rule_cv_squared_error": {"type": "object", "additionalProperties": {"type": "number"},
                                         "description": "Held-out squared error of each season rule (additive)."},
        "folds": _int("States left out in turn (additive)."),
        "archetype_series": _int("Archetype profiles among the series (additive)."),
        "dated_lga_series": _int("Dated LGA profiles among the series (fitting and validation only; "
                                 "additive)."),
        "dated_states": {"type": "array", "items": {"type": "string"},
                         "description": "States with dated series (additive)."},
        "mean_centre_months_off": _nullable("number", "Mean distance between predicted "
                                   "and recorded season centres, months (additive)."),
        "mean_best_4_month_share_error": _nullable("number", "Mean absolute error of the "
                                          "share of a year's cases in its best 4 months (additive)."),
        "mean_trough_to_peak_error": _nullable("number", "Mean absolute error of the "
                                      "lowest month as a share of the peak (additive)."),
        "recorded_median_trough_to_peak": _nullable("number", "Median over the recorded "
                                           "series of the lowest month as a share of the peak month."),
        "recorded_max_best_4_month_share": _nullable("number", "Largest share of a "
                                            "year's recorded cases falling in its best 4 months, over the series."),
        "by_band": {"type": "object", "description": "The same figures for north, middle_belt and south "
                    "(additive)."},
        "levels": {"type": "object", "description": "Every measure by level (archetype_groups, dated_states, "
                   "dated_lgas), by rule and by zone (additive; docs: seasons)."},
        "timing": {"type": "object", "description": "Per rule: signed peak, start and centre errors, trough/peak "
                   "and best-4 share errors and shape r over the left-out dated states and their LGAs, and per "
                   "left-out state (summaries only; additive; present when dated series exist)."},
        "model_5": {"type": "object", "description": "The season methods' nested whole-state cross-validation on the dated "
                    "(development) states: the published method, the selection rule, the release's "
                    "hyperparameters and every compared method's outer-fold summaries (no profile, no series; "
                    "additive; present when dated series exist; docs: model-5-protocol, model-6-protocol). Its key "
                    "names the model that introduced it; it runs under the protocol of the release's model (`model_6` or `model_7`)."},
        "model_6": {"type": "object", "description": "The model-6 protocol's additions: candidates in the selection "
                    "rule's order of complexity, the rule and its margin, the release method and constants, each "
                    "candidate's inner loss on all dated states, the season class's bias correction, and the "
                    "recorded-rain check of protocol item 5 (summaries and constants only; additive; present when "
                    "dated series exist; docs: model-6-protocol)."},
        "model_7": {"type": "object", "description": "The model-7 protocol's additions, in `model_6`'s shape: "
                    "candidates in the rule's order of complexity and those it may publish (the borrowed seasons "
                    "are references only), the rule and its margin, the release method and constants, each "
                    "candidate's inner loss on all dated states, `rain_onset`'s constants, the season class's bias "
                    "correction and the recorded-rain check (summaries and constants only; additive; present when "
                    "dated series exist under model 7; docs: model-7-protocol)."},
        "season_error": {"type": "object", "description": "The published season's out-of-sample log error by "
                         "level, the sd the ranges carry and its coverage summarised over calendar months "
                         "(additive; present when case records exist)."},
    }, required=["series", "states", "median_correlation", "mean_months_off", "mean_months_peak_is_off",
                 "cross_validation", "season_rule", "season_rule_cv_squared_error", "folds", "archetype_series",
                 "dated_lga_series", "dated_states", "mean_centre_months_off", "mean_best_4_month_share_error",
                 "mean_trough_to_peak_error", "recorded_median_trough_to_peak", "recorded_max_best_4_month_share",
                 "by_band", "levels"], description="Comparison against monthly case records, leaving whole states out.")
    s["TransmissionMethod"] = _obj({
        "cases_follow_rain_by_months": {"type": "number", "description": "Lag of cases behind rainfall, months."},
        "high_season_share_of_peak": _share("Threshold share of the peak defining high months."),
        "description": _str("The method in plain sentences."),
        "check": {**_ref("TransmissionCheck"), "description": "How well the method predicts recorded case "
                  "series it was not fitted to (out of sample)."},
        "seasonal_floor": _share("The national season's floor (population-weighted mean of the states'; "
                                 "additive)."),
        "floor_at_5_dry_months": _share("Floor of an area with 5 dry months (additive)."),
        "floor_per_dry_month": {"type": "number", "description": "Change of the floor per extra dry month "
                                "(additive)."},
        "floor_bounds": {"type": "array", "items": SHARE, "minItems": 2, "maxItems": 2,
                         "description": "The floor is kept within these (additive)."},
        "season_rule": _str("The season rule published (additive; docs: seasons).",
                            enum=["model_2", "constant_floor_both_sources", "model_3", "model_4", "model_5", "model_6", "model_7"]),
        "season_model": {"type": "object", "description": "The harmonic season fit of the `model_4` rule: harmonics, covariates, ridge, pooling "
                         "range and shrink, regression coefficients (additive; present when season_rule is "
                         "model_4, whose seasons are fitted to case harmonics rather than a floor and a lag)."},
        "lag_at_5_dry_months": {"type": "number", "description": "Lag of cases behind rain, months, in an area "
                                "with 5 dry months (additive)."},
        "lag_per_dry_month": {"type": "number", "description": "Change of the lag per extra dry month (additive)."},
        "lag_rule": _str("Which lag rule the constants belong to (additive; docs: seasons).",
                         enum=["constant", "linear", "linear_non_negative", "above_5_dry_months"]),
        "dry_month_below_mm": {"type": "number", "description": "A dry month has less rain than this, mm "
                               "(additive)."},
        "peak_window_probability": _share("Probability (share, 0 to 1) each `peak_window` is meant to hold: 0.8, an 80 % window (additive)."),
        "peak_window_half_width_months": {"type": "object", "description": "Half-width in months of the peak "
                                          "windows per level and season class, calibrated in the whole-state "
                                          "cross-validation and strictly wider for each flatter class "
                                          "(`uncalibrated` without dated series) (additive)."},
        "season_class_thresholds": {"type": "object", "description": "Smoothed trough/peak thresholds of "
                                    "`season_class` (additive)."},
        "parameters_fitted_to_series": _int("Case profiles the published parameters were fitted to; 0 when "
                                            "the case records were absent and the documented defaults apply "
                                            "(additive)."),
    }, required=["cases_follow_rain_by_months", "high_season_share_of_peak", "description", "check",
                 "seasonal_floor", "season_rule", "dry_month_below_mm", "peak_window_probability",
                 "peak_window_half_width_months", "season_class_thresholds",
                 "parameters_fitted_to_series"])  # the floor and lag constants exist only under models 2-3
    s["TransmissionStatesResponse"] = _obj({
        "method": {**_ref("TransmissionMethod"), "description": "How the seasons were made, and their check."},
        "national": _obj({
            "season": {**_ref("Season"), "description": "The national season (population-weighted)."},
            "survey_trend": {"type": "array", "items": _ref("NationalSurveyTrendEntry"),
                             "description": "Microscopy only, one entry per round (derived where marked)."},
            "survey_trend_rdt": {"type": "array", "items": _ref("NationalSurveyTrendEntry"),
                                 "description": "RDT only, one entry per round (derived where marked; "
                                 "additive). RDT reads higher than microscopy: compare within a series."},
        }, description="The country as a whole."),
        "states": {"type": "array", "items": _obj({
            "state_code": STATE_CODE, "state": _str("State name."), "zone": _str("Geopolitical zone."),
            "season": {**_ref("Season"), "description": "The state's season."},
            "survey_trend": {"type": "array", "items": _ref("SurveyTrendEntry"),
                             "description": "The state's survey positivity, one entry per round."},
        }), "description": "Every state, by state code."},
        "source": {**_ref("TransmissionSource"), "description": "Origin and licence of each input."},
    }, description="Seasons and survey trends of the country and every state, with the method and its check.")
    s["LgaTransmission"] = _obj({
        "lga_code": LGA_CODE, "lga": _str("LGA name."), **season,
        "typical_rainfall_mm": {**TWELVE_NUMBERS, "description": "Usual rainfall per month, mm (downscaled "
                                "from state CHIRPS)."},
    }, description="Season and usual rainfall of one LGA.")
    s["LgaTransmissionResponse"] = _obj({
        "state_code": STATE_CODE, "state": _str("State name."),
        "lgas": {"type": "array", "items": _ref("LgaTransmission"), "description": "Alphabetical by LGA name."},
        "source": {**_ref("TransmissionSource"), "description": "Origin and licence of each input."},
    }, required=["state_code", "state", "lgas"])  # a state without LGAs carries no source
    ratio_fields = {
        "season_class": _str("`marked`, `moderate` or `weak`: the season's published class, else by trough/peak of "
                             "the index (< 0.50, 0.50-0.70, >= 0.70). Ranges and beats_persistence are by class.",
                             enum=["marked", "moderate", "weak"]),
        "start_month": {**MONTH_NUMBER, "description": "The month whose count you have, 1 (January) to 12."},
        "horizon": _int("Months after the start month, 1 to 4.", minimum=1, maximum=4),
        "ratio": {"type": "number", "minimum": 0, "description": "Expected reported cases of the month `horizon` months after the start month, as a share "
                  "(ratio) of the start month's cases: cases(start + horizon) / cases(start) under "
                  "the published seasonal index: (I(start + h) / I(start)) ** alpha_h (method.alpha_by_horizon). "
                  "Modelled."},
        "low": _nullable("number", "Lower end of the 80 % range of the ratio, from out-of-sample errors in "
                         "whole-state cross-validation on dated case series (null where none was run)."),
        "high": _nullable("number", "Upper end of the 80 % range of the ratio (null where none was run)."),
        "beats_persistence": _nullable("boolean", "Whether, in that cross-validation, projected counts beat the "
                                       "count carried forward for areas of this season class at this horizon; "
                                       "null where series of the class came from fewer than 3 dated states "
                                       "(method.evidence says why, and which verdict pooled over classes the "
                                       "forecast then follows)."),
        **{f"q{p}": _nullable("number", f"The {p} % quantile of the ratio (split-conformal, from out-of-sample "
                              "errors of the same level, horizon and class; null where none was run)."
                              + (" Equals low." if p == 10 else " Equals high." if p == 90 else ""))
           for p in (10, 25, 50, 75, 90)},
        "insufficient_skill": {"type": "boolean", "description": "true where beats_persistence is not true: the "
                               "evidence is missing or says the projection did not beat the count carried forward."},
        "forecast": _str("`projected` (the count x ratio) or `persistence` (the weak class where the evidence "
                         "says the projection did not beat the count carried forward: ratio 1, quantiles from "
                         "persistence errors).",
                         enum=["projected", "persistence"]),
        "base_months": _int("Months of counts the ratio applies to (1: the count of the start month; k > 1: the "
                            "geometric mean of the last k counts, each times I(start)/I(its month), docs/skill.md).",
                            minimum=1, maximum=3),
    }
    evidence_item = _obj({
        "months_ahead": _int("Horizon.", minimum=1, maximum=4),
        "beats_persistence": _nullable("boolean", "The class's verdict at this horizon."),
        "reason": _str("The evidence behind the verdict (states and pooled skill) or why there is none."),
        "forecast": _str("What the class publishes at this horizon.", enum=["projected", "persistence"]),
    }, description="One class and horizon.")
    ratio_method = _obj({
        "description": _str("How the ratios and their ranges are made."),
        "alpha_by_horizon": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4,
                             "description": "The exponent of the index ratio per horizon 1-4, chosen by the "
                             "registered rule (docs/skill.md); where it chose one per season class, the moderate class's: "
                             "alpha_by_class has each."},
        "alpha_by_class": _nullable("object", "The exponent per season class and horizon (null without "
                                    "cross-validation)."),
        "base_months_by_horizon": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 3},
                                   "minItems": 4, "maxItems": 4,
                                   "description": "Months of counts in the base per horizon: with k > 1 the "
                                   "base is the geometric mean of c(t-j) x I(m)/I(m-j), j < k (docs/skill.md)."},
        "forecast_by_horizon": {"type": ["array", "null"], "items": {"type": "string"},
                                "description": "The candidate the registered one-count rule chose per horizon."},
        "forecast_several_months_by_horizon": {"type": ["array", "null"], "items": {"type": "string"},
                                               "description": "The candidate the registered several-months rule "
                                               "chose per horizon (its k is base_months_by_horizon)."},
        "quantile_levels": {"type": "array", "items": {"type": "number"}, "description": "Levels of q10..q90."},
        "evidence": {"type": ["object", "null"], "additionalProperties": {"type": "array", "items": evidence_item},
                     "description": "Per season class: the verdict and its reason per horizon."},
        "range": _str("Range level."),
        "season_class": _str("How season_class is set."),
        "cross_validated": {"type": "boolean", "description": "false when the dated series were absent: ranges "
                            "and beats_persistence are then null."},
        "scorecard": _str("Where the scorecard is (docs/skill.json in the same release)."),
    }, description="The method of the season ratios.")
    ratio_source = _obj({"season": _str("Where the index comes from."), "ranges": _str("What the ranges rest on.")},
                        description="Sources of the seasonal index and of the ranges' cross-validation.")
    s["StateSeasonRatio"] = _obj({"state_code": STATE_CODE, "state": _str("State name."), **ratio_fields},
                                 description="One state, start month and horizon.")
    s["StateSeasonRatioResponse"] = _obj({
        "method": ratio_method,
        "states": {"type": "array", "items": _ref("StateSeasonRatio"),
                   "description": "By state code, then start month, then horizon."},
        "source": ratio_source,
    }, description="Season ratios of every state: multiply a count of a month by `ratio` to project later months.")
    s["LgaSeasonRatio"] = _obj({"lga_code": LGA_CODE, "lga": _str("LGA name."), **ratio_fields},
                               description="One LGA, start month and horizon.")
    s["LgaSeasonRatioResponse"] = _obj({
        "state_code": STATE_CODE, "state": _str("State name."), "method": ratio_method,
        "lgas": {"type": "array", "items": _ref("LgaSeasonRatio"),
                 "description": "Alphabetical by LGA name, then start month, then horizon."},
        "source": ratio_source,
    }, description="Season ratios of every LGA of a state.")
    s.update(smc_schemas())
    s["BoundaryFeature"] = _obj({
        "type": _str("Always `Feature`.", const="Feature"),
        "properties": _obj({
            "lgaCode": {**LGA_CODE, "description": "LGA identifier; equals `lga_code` in the other endpoints."},
            "lga": _str("LGA name."),
            "state": STATE_CODE,
        }, description="The LGA's code, name and state."),
        "geometry": _obj({
            "type": _str("Geometry type.", enum=["Polygon", "MultiPolygon"]),
            "coordinates": {"anyOf": [_ref("PolygonCoordinates"), _ref("MultiPolygonCoordinates")],
                            "description": "GeoJSON coordinates, longitude/latitude (WGS 84): rings of positions "
                            "for a Polygon, polygons of rings for a MultiPolygon."},
        }, description="The outline (simplified for screen scale; shared edges kept)."),
    }, description="One LGA outline as a GeoJSON feature.")
    s["Position"] = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2,
                     "description": "Longitude, latitude (WGS 84, degrees)."}
    s["LinearRing"] = {"type": "array", "items": _ref("Position"), "minItems": 4,
                       "description": "A closed ring: the first and last positions are equal."}
    s["PolygonCoordinates"] = {"type": "array", "items": _ref("LinearRing"), "minItems": 1,
                               "description": "Outer ring, then any holes."}
    s["MultiPolygonCoordinates"] = {"type": "array", "items": _ref("PolygonCoordinates"), "minItems": 1}
    s["BoundaryCollection"] = _obj({
        "type": _str("Always `FeatureCollection`.", const="FeatureCollection"),
        "source": _str("Origin and licence of the shapes."),
        "features": {"type": "array", "items": _ref("BoundaryFeature"),
                     "description": "One feature per LGA of the state, by LGA code."},
    })
    s["DownloadFile"] = _obj({
        "name": _str("File name, unique within the release.", pattern=FILE_NAME_RE.pattern,
                     examples=["risk_lga_month.csv"]),
        "path": _str("Where to fetch it (with a key): `/v1/downloads/<release_id>/<name>`. The path stays "
                     "valid, byte for byte, for as long as the release is kept.", format="uri-reference"),
        "media_type": _str("Content type the file is served with."),
        "bytes": _int("Size in bytes (uncompressed).", minimum=0),
        "sha256": _str("SHA-256 of the file's bytes, hex.", pattern="^[0-9a-f]{64}$"),
        "description": _str("What the file holds."),
        "scopes": {"type": "array", "items": {"type": "string", "enum": list(SCOPES)}, "uniqueItems": True,
                   "description": "The scopes a key needs to download the file: those of every table in it "
                   "(a risk table holds estimated and forecast months: `risk_scores` and `forecasts`; the zip "
                   "all three). Empty for the files that describe the bundle and hold no rows (any valid key)."},
    })
    s["DownloadIndex"] = _obj({
        "release_id": _str("The release these files belong to.", pattern=RELEASE_ID_RE.pattern),
        "model_version": _nullable("string", "Version of the model behind the scores."),
        "files": {"type": "array", "items": _ref("DownloadFile"),
                  "description": "Tables (CSV and Parquet), outlines (GeoJSON and GeoParquet), datapackage.json, "
                  "README.md, SHA256SUMS and one zip of everything; see /docs/downloads.html."},
    }, description="The current release's bulk downloads.")
    s["HistoryMonth"] = _obj({
        "period": PERIOD, "kind": _str("`estimated` or `forecast`.", enum=["estimated", "forecast"]),
        **risk_common,
        "provisional": {"type": "boolean", "description": "The month's rainfall may be CHIRPS-preliminary "
                        "(additive; as in /v1/periods); always false for forecast months."},
        "basis": BASIS,
    }, description="One month of an area's history: the same numbers as that month's report.")
    s["LgaHistoryMonth"] = _obj({**s["HistoryMonth"]["properties"], **rank_fields},
                                description="One month of an LGA's history: the same numbers as that month's report, "
                                "with the LGA's rank within its state.")
    history_months = {"type": "array", "items": _ref("HistoryMonth"),
                      "description": "Every estimated month, oldest first; with `include=forecasts` the "
                      "forecast months follow, nearest first."}
    s["StateHistory"] = _obj({
        "state_code": STATE_CODE, "state": _str("State name."), "zone": _str("Geopolitical zone."),
        "months": history_months,
    }, description="One state's risk for every month held.")
    s["LgaHistory"] = _obj({
        "lga_code": LGA_CODE, "lga": _str("LGA name."), "state_code": STATE_CODE, "state": _str("State name."),
        "is_urban": {"type": "boolean", "description": "Whether the LGA is classed as urban (derived from "
                     "population density; no official flag exists)."},
        **evidence_fields,
        "months": {**history_months, "items": _ref("LgaHistoryMonth")},
    }, description="One LGA's risk for every month held.")
    lga_risk = s["LgaRisk"]["properties"]
    s["CountryLgaRisk"] = _obj({
        "lga_code": LGA_CODE, "lga": lga_risk["lga"], "state_code": STATE_CODE, "state": _str("State name."),
        **{k: v for k, v in lga_risk.items() if k not in ("lga_code", "lga")},
    }, description="An LGA record of /v1/risk/lgas with its state.")
    s["CountryLgaRiskReport"] = _obj({
        "period": PERIOD, "kind": _str("Always `estimated`.", const="estimated"),
        "lgas": {"type": "array", "items": _ref("CountryLgaRisk"), "description": "All 774 LGAs, highest "
                 "risk first; ties broken by `lga_code`."},
        "basis": BASIS,
    }, description="Every LGA of the country for one estimated month.")
    window = _obj({
        "first_estimated": {**PERIOD, "type": ["string", "null"], "description": "First estimated month."},
        "last_estimated": {**PERIOD, "type": ["string", "null"], "description": "Last estimated month."},
        "last_forecast": {**PERIOD, "type": ["string", "null"], "description": "Last forecast month."},
    }, description="The months the release holds.")
    s["KeptRelease"] = _obj({
        "release_id": _str("The release id (as in `X-Release-Id` and the bundle paths)."),
        "published_at": _nullable("string", "When the release first went live on this service (UTC); for a "
                                  "local build, when the build finished.", format="date-time"),
        "data_loaded_at": _nullable("string", "When its data was loaded (the `updated_at` of /v1/periods).",
                                    format="date-time"),
        "model_version": _nullable("string", "Version of the model behind its scores."),
        "data_window": window,
        "datasets": {"type": "array", "items": {"type": "string"}, "description": "Data sets the release serves."},
        "bundle": _str("Pinned path of the release's whole bundle (zip), valid while the release is kept."),
        "changes": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                    "description": "What changed from the release live before it, in sentences."},
        "current": {"type": "boolean", "description": "true for the release answering now."},
        "pinned": {"type": "boolean", "description": "true for a release kept whatever its age (e.g. one a "
                   "publication cites); others are kept while they are among the newest few."},
    }, description="One kept release.")
    s["ReleaseList"] = _obj({
        "format": _int("Version of this document's layout.", const=1),
        "current": _nullable("string", "Id of the release answering now."),
        "releases": {"type": "array", "items": _ref("KeptRelease"), "description": "Every kept release, the "
                     "one that went live last first. A release pruned from the service leaves the list."},
    }, description="The releases this service keeps.")
    s["Problem"] = problem_schema()
    return s


# Which schema answers which route: the one thing about a route the route table does not hold.
def smc_schemas() -> dict[str, Schema]:
    """The SMC planning routes (pipeline/datasets/smc.py, docs/smc.md): units, population and rule per field."""
    month = lambda d: {**MONTH_NUMBER, "type": ["integer", "null"], "description": d}  # noqa: E731
    months = lambda d: {"type": ["array", "null"], "items": MONTH_NUMBER, "description": d}  # noqa: E731
    months_by_year = lambda d: {"type": "array", "items": {**MONTH_NUMBER, "type": ["integer", "null"]},  # noqa: E731
                                "description": d}
    share_list = {"type": "array", "items": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                  "description": "The best-4-month rain share of each year of the window, oldest first "
                                 "(window_first_year..window_last_year); null where the year is incomplete."}
    plan = {
        "eligible": _nullable("boolean", "Nigeria's rule: true when best-4-month rain share >= 0.60 in at least 4 "
                              "consecutive years of the last ten complete years; null with fewer than 4 complete "
                              "years."),
        "margin": _nullable("number", "How far from the threshold: over every run of 4 consecutive complete years, "
                            "the lowest share of the run; the best such value minus 0.60 (a share, not percent). "
                            ">= 0 exactly when eligible."),
        "years_passed": _int("Years of the window whose share is >= 0.60.", minimum=0, maximum=10),
        "complete_years": _int("Complete years in the window (all dekads or months recorded, none provisional).",
                               minimum=0, maximum=10),
        "longest_run": _int("Longest run of consecutive passing years in the window.", minimum=0, maximum=10),
        "best_run_first_year": _nullable("integer", "First year of the 4-year run the margin comes from."),
        "window_first_year": _int("First year of the window (the last ten complete years)."),
        "window_last_year": _int("Last year of the window: the last complete year."),
        "rain_shares": share_list,
        "rain_share_median": _share("Median best-4-month share of the year's rainfall over the window.", True),
        "case_share_modelled": _share("Modelled: share of a year's expected cases in the best 4 consecutive months "
                                      "of the published seasonal index (/v1/transmission/*); null without it.", True),
        "best4_start_month": month("First month of the wettest 4 consecutive months, the most frequent over the "
                                   "window (earliest on ties), 1-12."),
        "onset_month_median": month("Median month of the rain onset over the window (AGRHYMET/FEWS NET start of "
                                    "season on dekads; docs/rain-season.md)."),
        "onset_month_earliest": month("Earliest onset month in the window."),
        "onset_month_latest": month("Latest onset month in the window."),
        "cessation_month_median": month("Median month the rains end (cumulative-anomaly rule)."),
        "wet_season_months_median": _nullable("number", "Median wet-season length, onset to cessation, in months."),
        "first_cycle_month": month("Recommended month of the first SMC cycle: the month after best4_start_month. "
                                   "Null where not eligible (the rule recommends no campaign)."),
        "cycles": {"type": ["integer", "null"], "minimum": 4, "maximum": 5,
                   "description": "Monthly cycles: 4, or 5 when the median end of the rains plus one month falls "
                                  "after the fourth cycle. Null where not eligible."},
        "cycle_months": months("The months of the cycles, in order (null where not eligible)."),
        # the rain season year by year (additive; issue 41 item 1): parallel lists over the window, oldest
        # first, like rain_shares (so the CSV keeps one row per area)
        "onset_months": months_by_year("Month the rains began in each year of the window (AGRHYMET/FEWS NET "
                                       "start of season on dekads, cumulative anomaly on LGA monthly rain; see "
                                       "rain_sources); null: none found or the year is incomplete."),
        "onset_dekads": {"type": "array", "items": {"type": ["integer", "null"], "minimum": 1, "maximum": 36},
                         "description": "Dekad of the year (1-36) the rains began, each year of the window; null on "
                                        "monthly rainfall or without an onset."},
        "cessation_months": months_by_year("Month the rains ended in each year of the window (cumulative-anomaly "
                                           "rule)."),
        "wet_season_lengths_months": {"type": "array", "items": {"type": ["integer", "null"], "minimum": 0},
                                      "description": "Onset to cessation in months, each year of the window."},
        "best4_start_months": months_by_year("First month of each year's wettest 4 consecutive months."),
        "annual_rain_mm": {"type": "array", "items": {"type": ["number", "null"], "minimum": 0},
                           "description": "Each year's rainfall, mm (observed: CHIRPS or the LGA series)."},
    }
    this_year = {"type": ["object", "null"], "description": "This year's rainfall so far against the long-term "
                 "average of the same dekads (WFP rfh_avg; the rfq anomaly is percent_of_average).", "properties": {
                     "year": _int("The year."), "through": _str("Start date of the last dekad counted."),
                     "rain_mm": {"type": "number", "description": "Rain so far this year, mm (state mean)."},
                     "average_mm": {"type": "number", "description": "Long-term average for the same dekads, mm."},
                     "percent_of_average": _int("Rain so far as % of the long-term average: 100 x rain_mm / average_mm "
                                                "(the state's rain, in percent)."),
                     "provisional": {"type": "boolean", "description": "Some dekads are CHIRPS-preliminary."},
                     "onset_date": _nullable("string", "Start of season this year (same rule), the dekad's first "
                                             "day; null: not yet."),
                     "onset_vs_median_dekads": _nullable("integer", "This year's onset minus the median onset, in "
                                                         "dekads (negative: early)."),
                 }}
    rule = _obj({
        "eligibility": _str("Nigeria's eligibility rule."),
        "share_threshold": {"type": "number", "description": "Share of the year's rainfall (0 to 1) the best 4 "
                            "consecutive months must reach for a year to pass: 0.60."},
        "consecutive_years": _int("Consecutive passing years (count of years) needed: 4."),
        "window_years": _int("Years (count of complete years) the rule looks back over: 10."),
        "margin": _str("How the margin is computed."), "timing": _str("The first-cycle and cycles rule."),
        "onset": _str("The onset rule."), "best_4_months": _str("How the 4-month windows are formed."),
        "complete_year": _str("What counts as a complete year."),
        "case_share": _str("What the modelled case share is."),
    }, description="The rules behind every field (docs/smc.md).")
    source = _obj({k: _str(d) for k, d in (("rain", "State rainfall."), ("lga_rain", "LGA rainfall."),
                                           ("children", "Treatments per cycle."), ("delivered", "What was delivered."),
                                           ("case_share", "Where the modelled case share comes from."))},
                  description="Where each figure comes from, with its licence.")
    out: dict[str, Schema] = {}
    out["SmcState"] = _obj({
        "state_code": STATE_CODE, "state": _str("State name."), **plan, "rain_this_year": this_year,
        "last_campaign_year": _nullable("integer", "Newest year with SMC treatments recorded (2013-2021; 2019 missing "
                                        "in the source)."),
        "children_treated_per_cycle": {"type": ["array", "null"], "items": {"type": "integer", "minimum": 0},
                                       "description": "Treatments given in each cycle of the last campaign (children "
                                       "3-59 months reached per cycle; a count, not a target)."},
        "children_treated_mean_per_cycle": _nullable("integer", "Children 3-59 months treated per cycle in the last "
                                                     "campaign, mean over its cycles (count of treatments)."),
        "target_children_3_59_months": {"type": "null", "description": "Always null: see target_reason."},
        "target_reason": _str("Why there is no target population of children 3-59 months."),
        "delivered_years": {"type": "array", "items": {"type": "integer"},
                            "description": "Years with SMC treatments recorded in the state, 2013-2021."},
    }, description="One state's SMC planning.")
    out["SmcStatesResponse"] = _obj({
        "rule": rule,
        "states": {"type": "array", "items": _ref("SmcState"), "description": "By state code."},
        "source": source,
    }, description="SMC planning for every state by Nigeria's rainfall rule.")
    out["SmcLga"] = _obj({
        "lga_code": LGA_CODE, "lga": _str("LGA name."), **plan,
        "rain_sources": {"type": "array", "items": _str("Where the year's rain comes from.", enum=["lga_monthly", "state_dekadal"]),
                         "description": "Per year of the window: `lga_monthly` (the LGA's own rainfall, 2001-2016) "
                                        "or `state_dekadal` (its state's series)."},
        "years_from_lga_rain": _int("How many window years rest on the LGA's own rainfall.", minimum=0),
        "children_treated_per_cycle": {"type": "null", "description": "Always null: see children_reason."},
        "children_reason": _str("Why there is no LGA count."),
        "first_round_dates": {"type": "array", "items": _str("YYYY-MM-DD"),
                              "description": "Date of the first SMC round of each year with rounds recorded in the "
                                             "LGA, 2013-2019, oldest first (approximate: model days); empty: none "
                                             "recorded."},
    }, description="One LGA's SMC planning.")
    out["SmcLgasResponse"] = _obj({
        "state_code": STATE_CODE, "state": _str("State name."), "rule": rule,
        "state_rain_this_year": this_year,
        "lgas": {"type": "array", "items": _ref("SmcLga"), "description": "Alphabetical by LGA name."},
        "source": source,
    }, description="SMC planning for every LGA of a state.")
    return out


RESPONSE_SCHEMA: dict[str, str] = {
    "/v1/periods": "PeriodIndex",
    "/v1/risk/states": "StateRiskReport",
    "/v1/risk/lgas": "LgaRiskReport",
    "/v1/risk/lgas/all": "CountryLgaRiskReport",
    "/v1/history/states": "StateHistory",
    "/v1/history/lgas": "LgaHistory",
    "/v1/forecasts/states": "StateForecastResponse",
    "/v1/forecasts/lgas": "LgaForecastResponse",
    "/v1/context/states": "StateContextResponse",
    "/v1/context/lgas": "LgaContextResponse",
    "/v1/transmission/states": "TransmissionStatesResponse",
    "/v1/transmission/lgas": "LgaTransmissionResponse",
    "/v1/transmission/ratios/states": "StateSeasonRatioResponse",
    "/v1/transmission/ratios/lgas": "LgaSeasonRatioResponse",
    "/v1/transmission/smc/states": "SmcStatesResponse",
    "/v1/transmission/smc/lgas": "SmcLgasResponse",
    "/v1/boundaries/lgas": "BoundaryCollection",
    "/v1/downloads": "DownloadIndex",
    "/v1/releases": "ReleaseList",
}


def problem_schema() -> Schema:
    return {
        "type": "object",
        "description": "RFC 9457 problem details. Branch on `code`; `title` and `detail` are for people.",
        "required": ["type", "title", "status", "code", "detail"],
        "properties": {
            "type": _str("URI reference of the code's entry in the error catalogue.", format="uri-reference"),
            "title": _str("Short summary of the problem type."),
            "status": _int("HTTP status code."),
            "code": _str("Stable machine-readable code.", enum=[p.code for p in CATALOGUE]),
            "detail": _str("What was wrong with this request, for people."),
            "instance": _str("The request path.", format="uri-reference"),
            "parameter": _str("The query parameter at fault (parameter errors only)."),
            "required_scope": _str("The scope the key lacks (SCOPE_REQUIRED only); the first of "
                                   "`missing_scopes`.", enum=list(SCOPES)),
            "missing_scopes": {"type": "array", "items": {"type": "string", "enum": list(SCOPES)},
                               "description": "Every scope the key lacks for this request (SCOPE_REQUIRED only): "
                               "a bundle file can need more than one."},
            "suggestions": {
                "type": "array",
                "description": "UNKNOWN_STATE and UNKNOWN_LGA only, when the value looks like a name, a code in "
                               "another case or a near spelling of one: the codes it most likely means, best "
                               "first (several LGAs can share a name: all are listed). Absent when nothing is "
                               "close. The code and status are the same with or without it.",
                "items": _obj({
                    "state_code": _str("Two-letter state code (UNKNOWN_STATE; for UNKNOWN_LGA the LGA's state)."),
                    "state": _str("The state's name (OCHA COD-AB)."),
                    "lga_code": _str("LGA code, NG + 6 digits (UNKNOWN_LGA only)."),
                    "lga": _str("The LGA's name (OCHA COD-AB; UNKNOWN_LGA only)."),
                }, ["state_code", "state"], "One suggested code with its name."),
            },
        },
    }


# --- per-route derivations ---------------------------------------------------------


# A bundle file's scopes are the file's (its release records them), not the operation's: it can
# answer SCOPE_REQUIRED like every route with a scope.
DOWNLOAD_SCOPE = "per file"


def codes_for_route(route: Route) -> list[Problem]:
    """Every problem the gate can answer for a GET on this route, in catalogue order.

    A code that some route lists in `Route.errors` is route-specific; a code no
    route lists (other than the path-level ones) can happen on every route: the
    key, limit, query-shape and release checks run for all of them. The scope check
    runs only where the route needs a scope.
    """
    return _codes(route.scope, route.errors)


def _codes(scope: str | None, errors: tuple[str, ...]) -> list[Problem]:
    specific = {c for r in ROUTES for c in r.errors} | set(DOWNLOAD_FILE.errors)
    out: list[Problem] = []
    for p in CATALOGUE:
        if p.code in PATH_LEVEL_CODES:
            continue
        if p.code == "SCOPE_REQUIRED":
            if scope is not None:
                out.append(p)
        elif p.code in specific:
            if p.code in errors:
                out.append(p)
        else:
            out.append(p)
    return out


def routes_for_code(code: str) -> list[str]:
    """Paths that can answer `code`; empty for the path-level codes, which apply to any request."""
    paths = [r.path for r in ROUTES if any(p.code == code for p in codes_for_route(r))]
    if any(p.code == code for p in _codes(DOWNLOAD_SCOPE, DOWNLOAD_FILE.errors)):
        paths.append(DOWNLOAD_FILE.path)
    return paths


def param_schema(p: Param, states: tuple[str, ...] = ()) -> Schema:
    """The parameter's wire format, taken from the validator's own pattern or value domain.

    `states`, when given, are the codes the release holds (its facts): the `state`
    parameter is then an enum of exactly the values the gate accepts.
    """
    if p.kind == "state":
        if states:
            return {"type": "string", "enum": sorted(states), "pattern": STATE_RE.pattern}
        return {"type": "string", "pattern": STATE_RE.pattern}
    if p.kind == "period":
        return {"type": "string", "pattern": PERIOD_RE.pattern}
    if p.kind == "format":
        return {"type": "string", "enum": list(FORMATS), "default": p.default}
    if p.kind == "lga":
        return {"type": "string", "pattern": LGA_RE.pattern}
    if p.kind == "include":
        return {"type": "string", "enum": [v for v in INCLUDES if p.scope_for(v)]}
    if p.kind == "months":
        values = [int(v) for v in p.domain(Facts())]
        schema: Schema = {"type": "integer", "enum": values}
        if p.default is not None:
            schema["default"] = int(p.default)
        return schema
    raise ValueError(f"no schema for parameter kind {p.kind!r}")


def _parameter(p: Param, states: tuple[str, ...] = ()) -> Schema:
    desc = p.description
    if p.kind == "state":
        desc += " Lower-case codes are rejected (404 UNKNOWN_STATE, with a hint naming the upper-case code)."
    # one shared StateCode schema rather than an enum per operation: generators make one type of it
    schema = _ref("StateCode") if p.kind == "state" and states else param_schema(p, states)
    return {"name": p.name, "in": "query", "required": p.required, "description": desc,
            "schema": schema, "allowEmptyValue": False}


def _operation_id(path: str) -> str:
    parts = [x for x in path.split("/") if x and x != "v1"]
    return "get" + "".join(x[:1].upper() + x[1:] for x in parts)


def _problem_response(status: int, problems: list[Problem]) -> Schema:
    """One error status of an operation: the shared Problem schema, the codes it can carry listed.

    The schema is a plain reference (no `allOf` narrowing `code` and `status`): code
    generators keep a referenced model but drop an intersection they cannot merge, which
    left generated clients without any error model. The codes per status are in the
    description, in `x-problem-codes` and as one example each.
    """
    codes = [p.code for p in problems]
    desc = "; ".join(f"`{p.code}`: {p.when}" for p in problems)
    headers: Schema = {"Cache-Control": {"$ref": "#/components/headers/NoStore"}}
    if status == 429:
        headers |= {"Retry-After": {"$ref": "#/components/headers/RetryAfter"},
                    "RateLimit": {"$ref": "#/components/headers/RateLimit"},
                    "RateLimit-Policy": {"$ref": "#/components/headers/RateLimitPolicy"}}
    return {
        "description": desc,
        "headers": headers,
        "content": {PROBLEM_JSON: {
            "schema": _ref("Problem"),
            "x-problem-codes": codes,
            "examples": {p.code: {"summary": p.title, "value": {
                "type": TYPE_BASE + p.code, "title": p.title, "status": p.status, "code": p.code,
                "detail": p.when,
            }} for p in problems},
        }},
    }


def _operation(route: Route, states: tuple[str, ...] = (), adopted: tuple[str, ...] = ()) -> Schema:
    responses: dict[str, Schema] = {
        "200": {
            "description": "The response body, precomputed for this release.",
            "headers": {
                "ETag": {"$ref": "#/components/headers/ETag"},
                "Cache-Control": {"$ref": "#/components/headers/CacheControl"},
                "X-Release-Id": {"$ref": "#/components/headers/ReleaseId"},
                "RateLimit": {"$ref": "#/components/headers/RateLimit"},
                "RateLimit-Policy": {"$ref": "#/components/headers/RateLimitPolicy"},
            },
            "content": _content(route),
        },
        "304": {"description": "`If-None-Match` matched the current ETag; no body."},
    }
    by_status: dict[int, list[Problem]] = {}
    for p in codes_for_route(route):
        by_status.setdefault(p.status, []).append(p)
    for status in sorted(by_status):
        responses[str(status)] = _problem_response(status, by_status[status])
    scopes = [route.scope] if route.scope else []
    op: Schema = {
        "operationId": _operation_id(route.path),
        "summary": route.summary,
        "description": (terms.route_description(route.path, adopted) + " " if terms.route_description(route.path)
                        else "")
        + (f"Needs a key with the `{route.scope}` scope." if route.scope else "Needs any valid key.")
        + "".join(f" `{p.name}={v}` needs the `{scope}` scope as well (403 `SCOPE_REQUIRED` otherwise)."
                  for p in route.params for v, scope in p.value_scopes)
        + (f" Served from `{route.file_key}` beside the release pointer (it lists every kept release, so it "
           "lies outside them and changes when a release is published or pruned)." if route.beside_pointer
           else f" Served from the release file `{route.file_key}`."),
        "tags": [route.dataset],
        "parameters": [_parameter(p, states) for p in route.params],
        "security": [{BEARER: scopes}, {HEADER: scopes}],
        "responses": responses,
        "x-required-scope": route.scope,
        "x-file-key": route.file_key,
    }
    return op


def _csv_operation(route: Route, states: tuple[str, ...] = (), adopted: tuple[str, ...] = ()) -> Schema:
    """`<path>.csv`: the route's `format=csv` answer as an operation of its own.

    A response with two media types generates code for the first only (openapi-python-client
    parses every 200 as JSON), so the CSV answer gets its own path and operation, typed as text.
    """
    op = _operation(route, states, adopted)
    op["operationId"] += "Csv"
    op["summary"] = route.summary + " As CSV."
    op["description"] = (f"The same answer as {route.path} with `format=csv`: a header row, then one row per "
                         "record, the report's own fields first. " + op["description"])
    op["parameters"] = [_parameter(p, states) for p in route.params if p.kind != "format"]
    op["responses"]["200"]["content"] = {CSV: {"schema": {
        "type": "string", "description": "UTF-8 CSV; see /docs/api.html#reading-csv for the reader options."}}}
    by_status: dict[int, list[Problem]] = {}
    for p in codes_for_route(route):
        if p.code != "INVALID_FORMAT":  # no `format` to get wrong
            by_status.setdefault(p.status, []).append(p)
    for status in sorted(by_status):
        op["responses"][str(status)] = _problem_response(status, by_status[status])
    op["x-file-key"] = route.file_key.replace("{format}", "csv")
    return op


def _content(route: Route) -> Schema:
    out: Schema = {route.content_type: {"schema": _ref(RESPONSE_SCHEMA[route.path])}}
    if route.param("format") is not None:
        out[CSV] = {"schema": {"type": "string", "description": "With `format=csv`: a header row, then one "
                               "row per record, the report's own fields first (see /docs/downloads.html)."}}
    return out


def _download_file_operation() -> Schema:
    """The bundle files: path segments, not query values, so they sit outside the route table's Route type."""
    from pipeline.datasets.bundle_scopes import download_scope_map, download_scope_text

    by_status: dict[int, list[Problem]] = {}
    for p in _codes(DOWNLOAD_SCOPE, DOWNLOAD_FILE.errors):
        by_status.setdefault(p.status, []).append(p)
    responses: dict[str, Schema] = {
        "200": {
            "description": "The file's bytes, as listed by /v1/downloads (gzip when accepted, for text files).",
            "headers": {"ETag": {"$ref": "#/components/headers/ETag"},
                        "X-Release-Id": {"$ref": "#/components/headers/ReleaseId"}},
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        },
        "304": {"description": "`If-None-Match` matched the file's ETag; no body."},
    }
    for status in sorted(by_status):
        responses[str(status)] = _problem_response(status, by_status[status])
    return {
        "operationId": "getDownloadFile",
        "summary": DOWNLOAD_FILE.summary,
        "description": "The release id is the current release's (see /v1/downloads) or an earlier one's still "
        "kept; names are those /v1/downloads lists. Takes no query parameters. A file needs the scopes of "
        "everything in it, as its release records them (the `scopes` of each file in /v1/downloads); without "
        "them the answer is 403 `SCOPE_REQUIRED` naming every missing scope in `missing_scopes`. "
        + download_scope_text(),
        "tags": ["downloads"],
        "parameters": [
            {"name": "release_id", "in": "path", "required": True, "description": "A release id.",
             "schema": {"type": "string", "pattern": RELEASE_ID_RE.pattern}},
            {"name": "name", "in": "path", "required": True, "description": "A bundle file name.",
             "schema": {"type": "string", "pattern": FILE_NAME_RE.pattern}},
        ],
        "security": [{BEARER: []}, {HEADER: []}],
        "responses": responses,
        "x-required-scope": None,  # per file, not per operation: `x-required-scopes`
        "x-required-scopes": download_scope_map(),
        "x-file-key": DOWNLOAD_FILE.key_prefix + "{name}",
    }


LOCAL_SERVER = "http://127.0.0.1:8080"


def openapi_document(release: str | None = None, states: tuple[str, ...] = (),
                     adopted: tuple[str, ...] = ()) -> dict[str, Any]:
    """OpenAPI 3.1 for every route; `release`, when given, is stamped into `info` for traceability;
    `adopted`, the month terms in the release's score (its /v1/periods `score_terms`).

    `states` are the state codes the release holds; the build passes them so the
    `state` parameter is an enum generators turn into a type.
    """
    info: Schema = {
        "title": "Malaria risk data service for Nigeria",
        "version": API_VERSION + (f" (release {release})" if release else ""),
        "summary": "Read-only, precomputed malaria risk, forecasts, context, seasons and LGA outlines.",
        "description": "Every request needs an API key (`Authorization: Bearer <API_KEY>` or "
        "`x-api-key`). Errors are RFC 9457 problem details with a stable `code`; see /docs/errors.html. "
        "HEAD is accepted wherever GET is; OPTIONS answers CORS preflight without a key.",
        # no `url`: OpenAPI wants an absolute URI there and the base address is deployment-specific
        "license": {"name": "Data sources keep their own licences: see /docs/attribution.html"},
    }
    return {
        "openapi": OPENAPI_VERSION,
        "info": info,
        # absolute, as generators want; the host is a variable because each deployment has its own
        "servers": [{
            "url": "{scheme}://{host}",
            "description": "The deployment serving this document; `make run` serves at " + LOCAL_SERVER + ".",
            "variables": {
                "scheme": {"default": "http", "enum": ["http", "https"]},
                "host": {"default": LOCAL_SERVER.split("//", 1)[1],
                         "description": "Host name and port of the deployment, e.g. the CloudFront domain."},
            },
        }],
        "security": [{BEARER: []}, {HEADER: []}],
        "tags": [{"name": d} for d in dict.fromkeys(r.dataset for r in ROUTES)],
        "paths": {**{r.path: {"get": _operation(r, tuple(states), adopted)} for r in ROUTES},
                  **{r.path + CSV_SUFFIX: {"get": _csv_operation(r, tuple(states), adopted)} for r in ROUTES
                     if r.param("format") is not None},
                  DOWNLOAD_FILE.path: {"get": _download_file_operation()}},
        "components": {
            "securitySchemes": {
                BEARER: {"type": "http", "scheme": "bearer",
                         "description": "`Authorization: Bearer svc_live_…` or `svc_test_…`. Scopes: "
                         + ", ".join(SCOPES) + "."},
                HEADER: {"type": "apiKey", "in": "header", "name": "x-api-key",
                         "description": "The same key in the `x-api-key` header."},
            },
            "headers": {
                "ETag": {"description": "Strong validator of the file's bytes (from the release manifest).",
                         "schema": {"type": "string"}},
                "CacheControl": {"description": "`private, max-age=300, must-revalidate` on data.",
                                 "schema": {"type": "string"}},
                "NoStore": {"description": "`no-store`: errors are never cached.", "schema": {"type": "string"}},
                "ReleaseId": {"description": "The release that answered.", "schema": {"type": "string"}},
                "RateLimit": {"description": "Remaining quota of the per-minute window and seconds until it "
                              "resets, e.g. `\"minute\";r=59;t=42` (IETF RateLimit header fields). Absent "
                              "when the server runs without limits.", "schema": {"type": "string"}},
                "RateLimitPolicy": {"description": "The key's quotas, e.g. `\"minute\";q=60;w=60, "
                                    "\"month\";q=100000;w=2592000` (the monthly policy for live keys only).",
                                    "schema": {"type": "string"}},
                "RetryAfter": {"description": "Seconds to wait before the next request is allowed.",
                               "schema": {"type": "integer", "minimum": 0}},
            },
            "schemas": resource_schemas(adopted) | ({"StateCode": {
                **param_schema(STATE_PARAM, tuple(states)),
                "description": "The state codes of this release: ISO 3166-2:NG suffixes, FC for the Federal "
                               "Capital Territory (table: /docs/state-codes.html)."}} if states else {}),
        },
    }
