"""The score's terms, declared once: every text that says what a month's score is made of is
generated from here (the /v1/periods description and `provisional` in the OpenAPI document, the
API reference, the `basis` descriptions in /v1/periods, the landing page, the map's month label
and the model page). docs/model.md, "What a month is made of".

The score (pipeline.model.risk) is a product of terms. SCORE_TERMS enter every month; a month term
(MONTH_TERMS, one per registered candidate of pipeline.model.month_tests) enters an estimated
month only when its pre-registered test adopted it in this build, so texts take the adopted terms
as an argument and a term that is not adopted is never named as part of the score. Words that
describe a month term (MONTH_TERM_PHRASES) may appear in published text only when one is adopted:
a test scans every built page, the OpenAPI document and the JSON descriptions for them.

Standard library only; the edge (standard library only as well) never imports this: the pipeline
injects the texts when it renders the OpenAPI document and the pages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

ESTIMATED = "estimated"
FORECAST = "forecast"


@dataclass(frozen=True)
class Term:
    key: str
    words: str  # how a page names it, after "×"
    kinds: tuple[str, ...]  # kinds of month it enters
    uses_recorded_rainfall: bool = False
    short: str = ""  # a few words, for the map's month label


SCORE_TERMS: tuple[Term, ...] = (
    Term("baseline", "the survey baseline of the state (its household survey rounds smoothed over time)",
         (ESTIMATED, FORECAST), short="survey baseline"),
    Term("lga_offset", "the offset of the LGA from its state (from the NDHS 2018 LGA survey data, covariates and "
                       "neighbours; state scores are the population-weighted mean of their LGAs)",
         (ESTIMATED, FORECAST), short="LGA offset"),
    Term("season", "the typical season of its calendar month", (ESTIMATED, FORECAST), short="typical season"),
)
_RAIN = " and enters estimated months only (no rainfall forecast exists)"
MONTH_TERMS: dict[str, Term] = {
    "t1_rain_lags_1_2_wet_months": Term(
        "t1_rain_lags_1_2_wet_months", "a rain term (the recorded rainfall of the two months before, in wet "
        "months, against its usual amount)" + _RAIN, (ESTIMATED,), True, "rain term"),
    "t2_rain_lags_0_3": Term(
        "t2_rain_lags_0_3", "a rain term (the month's recorded rainfall and that of the three months before it, "
        "against their usual amounts)" + _RAIN, (ESTIMATED,), True, "rain term"),
    "t3_rain_three_months_wet": Term(
        "t3_rain_three_months_wet", "a rain term (the recorded rainfall of the three months before, when they "
        "were wet, against its usual amount)" + _RAIN, (ESTIMATED,), True, "rain term"),
}
# Phrases that describe a month term. Published text may contain them only when a month term is in
# the score (the text test scans the built release for them).
MONTH_TERM_PHRASES = ("rainfall adjustment", "adjustment for the rainfall", "× a rain term", "moved month by month by",
                      "term reads preliminary")


def unused_phrases(adopted: Iterable[str] = ()) -> tuple[str, ...]:
    """Words published text must not contain in a release with these month terms: the words of every
    month term not in the score, and, when none is, every phrase that describes one."""
    adopted = tuple(adopted)
    words = tuple(t.words for k, t in MONTH_TERMS.items() if k not in adopted)
    return words + (() if any(k in MONTH_TERMS for k in adopted) else MONTH_TERM_PHRASES)

# `basis` of a month (additive field of /v1/periods months, risk reports, forecasts and histories).
SURVEY_FIT = "survey_fit"
AFTER_SURVEY = "baseline_x_season"
BASES = (SURVEY_FIT, AFTER_SURVEY)


def terms(adopted: Iterable[str] = ()) -> tuple[Term, ...]:
    """The score's terms in this build: SCORE_TERMS and the adopted month terms."""
    extra = [MONTH_TERMS[k] for k in adopted if k in MONTH_TERMS]
    return (*SCORE_TERMS, *extra)


def made_of(kind: str, adopted: Iterable[str] = ()) -> str:
    """'A <kind> month's score is ...': the terms that enter that kind of month, joined by ×."""
    parts = [t.words for t in terms(adopted) if kind in t.kinds]
    return " × ".join(parts)


def uses_rainfall(adopted: Iterable[str] = ()) -> bool:
    return any(t.uses_recorded_rainfall for t in terms(adopted))


def provisional_words(adopted: Iterable[str] = ()) -> str:
    """What `provisional` means for the score, from whether any term reads the month's rainfall."""
    if uses_rainfall(adopted):
        return ("The month's recorded rainfall is CHIRPS-preliminary: the score's term that reads it uses "
                "preliminary rainfall and may change when CHIRPS is final; always false for forecast months.")
    return ("The month's recorded rainfall is CHIRPS-preliminary. Recorded rainfall decides only which months "
            "are estimated: no term of the score reads it, so the score does not change when CHIRPS is final. "
            "Always false for forecast months.")


def basis_words(basis: str, adopted: Iterable[str] = ()) -> str:
    """What a month of that `basis` rests on."""
    est, fc = made_of(ESTIMATED, adopted), made_of(FORECAST, adopted)
    score = f"the score is {est}" + ("" if fc == est else f" (in a forecast month {fc})")
    if basis == SURVEY_FIT:
        return ("within the household survey rounds: the baseline is fitted through the rounds before and after "
                f"the month; {score}")
    if basis == AFTER_SURVEY:
        return ("after the newest household survey round: no survey has measured the month; the baseline is the "
                f"last round's level, held unless a drift passed its registered check (`drift_after_last_survey` on "
                f"/v1/periods), its range widening every month; {score}")
    raise ValueError(f"unknown basis {basis!r}; known: {BASES}")


KINDS = (ESTIMATED, FORECAST)


# What the season factor of a month after the newest survey round is (the recorded-rain check,
# docs/model-6-protocol.md item 5, re-run by docs/model-7-protocol.md): the typical season of the calendar month, or that month's own rain.
TYPICAL_SEASON = "typical_season"
RECORDED_RAIN = "recorded_rain"
SEASON_SOURCES = (TYPICAL_SEASON, RECORDED_RAIN)


def season_after_survey_words(source: str = TYPICAL_SEASON) -> str:
    """The one plain sentence of what a month after the newest survey round is (the periods document, the
    map pages and the bundle README)."""
    if source == TYPICAL_SEASON:
        return ("Months after the last survey round are projections with a typical season: the last round's level "
                "times the usual season of that calendar month; no month reads its own year's rain (driving the "
                "season by each month's recorded rain did not earn its place in the model's registered check).")
    if source == RECORDED_RAIN:
        return ("Months after the last survey round are projections whose season reads that month's recorded rain, "
                "times the last round's level.")
    raise ValueError(f"unknown season source {source!r}; known: {SEASON_SOURCES}")


def kind_words(kind: str, adopted: Iterable[str] = ()) -> str:
    """What a month of that `kind` is built from: the one wording of /v1/periods `kind_descriptions`, the
    bundle's README and datapackage.json (change it here, it changes everywhere). What the baseline does
    after the newest survey round is `basis_words`' to say."""
    if kind == ESTIMATED:
        return ("a month up to the latest month with recorded rainfall (the rainfall decides which months are "
                f"estimated); its score is {made_of(ESTIMATED, adopted)}. Its `basis` says what the baseline rests "
                f"on: the household survey rounds before and after the month (`{SURVEY_FIT}`), or, after the newest "
                f"round, that round's level carried on with its range widening every month (`{AFTER_SURVEY}`; "
                "`basis_descriptions`)")
    if kind == FORECAST:
        return ("one of the 1 to 4 months after the latest estimated month; no rainfall of it is known or forecast: "
                f"its score is {made_of(FORECAST, adopted)}, the baseline carried on from the newest survey round as "
                "in an estimated month after it")
    raise ValueError(f"unknown kind {kind!r}; known: {KINDS}")


def kind_descriptions(adopted: Iterable[str] = ()) -> dict[str, str]:
    adopted = tuple(adopted)
    return {k: kind_words(k, adopted) for k in KINDS}


def periods_description(adopted: Iterable[str] = ()) -> str:
    """The /v1/periods route description (route table summary + this, in the OpenAPI document and
    the API reference)."""
    adopted = tuple(adopted)
    return (f"An estimated month's score is {made_of(ESTIMATED, adopted)}; a forecast month's is "
            f"{made_of(FORECAST, adopted)}. Each month's `basis` says whether it lies within the survey rounds "
            f"(`{SURVEY_FIT}`) or after the last one (`{AFTER_SURVEY}`); see docs/model.md.")


def month_labels(adopted: Iterable[str] = ()) -> dict[str, str]:
    """Words for the map's month label: a short tag per basis and for a provisional month (shown), and
    what an estimated and a forecast month are made of, and what reads a provisional month's rainfall
    (the label's title)."""
    def short(kind: str) -> str:
        return " × ".join(t.short for t in terms(adopted) if kind in t.kinds)

    readers = " and ".join(t.short for t in terms(adopted) if t.uses_recorded_rainfall)
    return {
        SURVEY_FIT: "survey fit",
        AFTER_SURVEY: "after last survey",
        ESTIMATED: short(ESTIMATED),
        FORECAST: short(FORECAST),
        "provisional": "provisional",
        "provisional_note": (f"the {readers} reads preliminary CHIRPS rainfall" if readers
                             else "preliminary CHIRPS rainfall, which the score does not read"),
    }


def adopted_from(score_terms: Iterable[str] | None) -> tuple[str, ...]:
    """The month terms among a release's `score_terms` (its /v1/periods answer)."""
    return tuple(k for k in (score_terms or ()) if k in MONTH_TERMS)


ROUTE_DESCRIPTIONS = {"/v1/periods": periods_description}


def route_description(path: str, adopted: Iterable[str] = ()) -> str:
    """The model's words for a route ('' for routes the model has nothing to say about)."""
    f = ROUTE_DESCRIPTIONS.get(path)
    return f(adopted) if f is not None else ""
