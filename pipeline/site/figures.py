"""Figures of this release that the documentation quotes, taken from the documents the
build just produced, so a page can never disagree with the data it ships with.

Markdown pages refer to them as `{{ name }}` (e.g. `{{ check.median_correlation }}`, or
`{{ score_cases.AK.r_monthly_level }}`); `substitute` replaces every placeholder and refuses an
unknown name or any `{{`/`}}` left over, so a typo fails the build instead of publishing template
syntax. Counts that prose states beside a table (`{{ targets.missed }} of {{ targets.total }}`)
are computed from the same figures as the table's cells (TARGETS).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from pipeline.datasets.base import Produced
from pipeline.errors import UnknownFigure
from pipeline.model import terms

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")
LEFTOVER = re.compile(r"\{\{|\}\}")
NOT_IN_RELEASE = "(not in this release)"


@dataclass(frozen=True)
class Target:
    """A validation target set before the model was built: `figure` must lie in [low, high]."""

    key: str
    figure: str
    low: float | None = None
    high: float | None = None

    def text(self) -> str:
        def f(v: float) -> str:
            return f"{v:.2f}" if round(v, 2) == v else f"{v:g}"

        if self.low is not None and self.high is not None:
            return f"{f(self.low)}–{f(self.high)}"
        return f"≥ {f(self.low)}" if self.low is not None else f"≤ {f(self.high or 0.0)}"

    def met(self, value: Any) -> bool | None:
        """None when the figure is not in the release (neither met nor missed)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


# The model page's targets, one per figure its table compares: the prose counts (`targets.missed`
# of `targets.total`) and the table's target cells (`target.<key>`) come from this one list.
TARGETS: tuple[Target, ...] = (
    Target("map_2018_spearman", "validation.map_2018.spearman", 0.88),
    Target("map_2019_spearman", "validation.map_2019.spearman", 0.85),
    Target("held_out_2021_spearman", "validation.held_out_2021.spearman", 0.70),
    Target("held_out_2021_inside", "validation.held_out_2021.share_inside_80_range", 0.70, 0.90),
    Target("held_out_2018_inside", "validation.held_out_2018.share_inside_80_range", 0.70, 0.90),
    Target("held_out_2018_var_z", "validation.held_out_2018.var_z", 0.8, 1.25),
    Target("held_out_2021_var_z", "validation.held_out_2021.var_z", 0.8, 1.25),
    Target("held_out_2018_mean_z", "validation.held_out_2018.mean_z", -0.2, 0.2),
    Target("held_out_2021_mean_z", "validation.held_out_2021.mean_z", -0.2, 0.2),
    Target("range_holds_2018", "validation.held_out_2018.share_inside_80_range", 0.75, 0.85),
    Target("range_holds_2021", "validation.held_out_2021.share_inside_80_range", 0.75, 0.85),
    Target("lga_deviance", "validation.lga_small_area.deviance_small_area", None, 0.183),
)
NUMBER_WORDS = ("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve")


def count_words(n: int) -> str:
    """A count as prose writes it ("two", "13")."""
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def target_figures(figures: Mapping[str, Any], targets: Iterable[Target] = TARGETS) -> dict[str, Any]:
    """`target.<key>` (the bound as text), `target.<key>.met` and the counts over all targets:
    `targets.total`, `targets.met`, `targets.missed` (digits), `targets.missed_words` ("two"),
    `targets.missed_list` (the keys missed), `targets.unknown` (figures not in the release)."""
    out: dict[str, Any] = {}
    met = missed = unknown = 0
    missed_keys: list[str] = []
    for t in targets:
        ok = t.met(figures.get(t.figure))
        out[f"target.{t.key}"] = t.text()
        out[f"target.{t.key}.met"] = NOT_IN_RELEASE if ok is None else ok
        if ok is None:
            unknown += 1
        elif ok:
            met += 1
        else:
            missed += 1
            missed_keys.append(t.key)
    out.update({"targets.total": met + missed + unknown, "targets.met": met, "targets.missed": missed,
                "targets.missed_words": count_words(missed), "targets.met_words": count_words(met),
                "targets.missed_list": ", ".join(missed_keys) or "none", "targets.unknown": unknown})
    return out


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
    from pipeline.datasets.bundle_scopes import download_scope_text

    figures["downloads.scopes"] = download_scope_text()  # the rule the renderer records, in words
    transmission = docs.get("/v1/transmission/states")
    check = transmission["method"]["check"] if transmission else {}
    method = transmission["method"] if transmission else {}
    for name in ("series", "median_correlation", "mean_months_off", "mean_months_peak_is_off"):
        value = check.get(name, NOT_IN_RELEASE)
        figures[f"check.{name}"] = NOT_IN_RELEASE if value is None else value
    figures["check.states_count"] = len(check["states"]) if check else NOT_IN_RELEASE
    for name in ("mean_centre_months_off", "mean_best_4_month_share_error", "mean_trough_to_peak_error",
                 "recorded_median_trough_to_peak", "recorded_max_best_4_month_share"):
        value = check.get(name, NOT_IN_RELEASE)
        figures[f"check.{name}"] = NOT_IN_RELEASE if value is None else value
    for band in ("north", "middle_belt", "south"):
        by_band = (check.get("by_band") or {}).get(band, {})
        for name in ("series", "median_correlation", "mean_centre_months_off", "mean_best_4_month_share_error",
                     "mean_trough_to_peak_error"):
            figures[f"check.{band}.{name}"] = by_band.get(name, NOT_IN_RELEASE)
    for name in ("cases_follow_rain_by_months", "high_season_share_of_peak", "seasonal_floor",
                 "lag_at_5_dry_months", "lag_per_dry_month", "dry_month_below_mm", "peak_window_share_of_peak",
                 "parameters_fitted_to_series", "floor_at_5_dry_months", "floor_per_dry_month", "season_rule"):
        figures[f"method.{name}"] = method.get(name, NOT_IN_RELEASE)
    for name in ("folds", "archetype_series", "dated_lga_series"):
        figures[f"check.{name}"] = check.get(name, NOT_IN_RELEASE)
    sq = check.get("season_rule_cv_squared_error") or {}
    levels = check.get("levels") or {}
    for rule in SEASON_RULES:
        figures[f"check.cv_squared_error.{rule}"] = sq.get(rule, NOT_IN_RELEASE)
        for level in SEASON_LEVELS:
            lv = levels.get(level) or {}
            for m in SEASON_MEASURES:
                figures[f"check.{level}.{rule}.{m}"] = _given((lv.get(rule) or {}).get(m))
                for zone, key in ZONE_KEYS.items():
                    zv = ((lv.get("by_zone") or {}).get(zone) or {}).get(rule) or {}
                    figures[f"check.{level}.{key}.{rule}.{m}"] = _given(zv.get(m))
    figures["periods.score_range_level"] = (periods or {}).get("score_range_level", NOT_IN_RELEASE)
    figures.update(validation_figures(produced_files(produced)))
    figures.update(skill_figures(produced_files(produced)))
    figures.update(smc_figures(produced_files(produced)))
    figures.update(target_figures(figures))
    figures.update(freshness_figures(docs, figures))
    figures.update(model_text_figures(release_terms(docs, figures)[0]))
    return figures


def newest_survey(transmission: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """(round, year) of the newest household survey with a positivity figure in the release."""
    rounds = [(int(t["survey_year"]), str(t.get("survey") or t["survey_year"]))
              for st in (transmission or {}).get("states", []) for t in st.get("survey_trend") or []
              if t.get("positivity") is not None and t.get("survey_year") is not None]
    if not rounds:
        return None
    year, name = max(rounds)
    return name, year


FRESHNESS = ("data.last_estimated", "data.last_forecast", "data.forecast_months", "survey.newest_round",
             "survey.newest_year", "model.month_after_survey", "model.month_terms", "model.score_terms")


def release_terms(docs: Mapping[str, Any], figures: Mapping[str, Any]) -> tuple[tuple[str, ...], bool]:
    """(adopted month terms, whether the release says): from /v1/periods `score_terms` (the API answer),
    else from the validation report's adopted terms."""
    periods = docs.get("/v1/periods") or {}
    if "score_terms" in periods:
        return terms.adopted_from(periods["score_terms"]), True
    raw = figures.get("validation.months.adopted", NOT_IN_RELEASE)
    if raw == NOT_IN_RELEASE:
        return (), False
    return terms.adopted_from(t.strip() for t in str(raw).split(",")), True


def freshness_figures(docs: Mapping[str, Any], figures: Mapping[str, Any]) -> dict[str, Any]:
    """How old the data are and what a month after the newest survey rests on, read from this
    release's own documents (periods, survey trends, the month terms in its score), so the landing
    page and the map never promise more than the release holds. The words come from the model's
    declared terms (pipeline.model.terms)."""
    periods = docs.get("/v1/periods") or {}
    months = periods.get("months") or []
    forecast = [m["period"] for m in months if m.get("kind") == "forecast"]
    survey = newest_survey(docs.get("/v1/transmission/states"))
    adopted, known = release_terms(docs, figures)
    if survey is None:
        made_of = NOT_IN_RELEASE
    else:
        made_of = (terms.made_of(terms.ESTIMATED, adopted)
                   + ("" if known else " (whether a month term is adopted is not in this release)"))
    month_terms = [terms.MONTH_TERMS[k].words for k in adopted]
    return {
        "data.last_estimated": periods.get("last_estimated") or NOT_IN_RELEASE,
        "data.last_forecast": periods.get("last_forecast") or NOT_IN_RELEASE,
        "data.forecast_months": len(forecast) if months else NOT_IN_RELEASE,
        "survey.newest_round": survey[0] if survey else NOT_IN_RELEASE,
        "survey.newest_year": survey[1] if survey else NOT_IN_RELEASE,
        "model.month_after_survey": made_of,
        "model.month_terms": "; ".join(month_terms) if month_terms else "none",
        "model.score_terms": ",".join(adopted) or ("none" if known else NOT_IN_RELEASE),
    }


def model_text_figures(adopted: tuple[str, ...]) -> dict[str, Any]:
    """The model page's words for what a month is made of, from the declared terms."""
    return {
        "model.estimated_month": terms.made_of(terms.ESTIMATED, adopted),
        "model.forecast_month": terms.made_of(terms.FORECAST, adopted),
        "model.provisional": terms.provisional_words(adopted),
        "model.basis_survey_fit": terms.basis_words(terms.SURVEY_FIT, adopted),
        "model.basis_after_survey": terms.basis_words(terms.AFTER_SURVEY, adopted),
        "model.month_term_not_validated": (
            "Each adopted month term in states unlike the dated ones: its coefficients are shared by every LGA."
            if adopted else "No month term is in the score, so none is left unchecked."),
    }


VALIDATION_FILE = "docs/validation.json"
SEASON_RULES = ("model_2", "constant_floor_both_sources", "model_3")
SEASON_LEVELS = ("archetype_groups", "dated_states", "dated_lgas")
SEASON_MEASURES = ("series", "median_correlation", "mean_centre_months_off", "mean_best_4_month_share_error",
                   "mean_trough_to_peak_error")
ZONE_KEYS = {"North West": "nw", "North East": "ne", "North Central": "nc", "South West": "sw", "South East": "se",
             "South South": "ss"}
MONTH_TERMS = ("a_actual_year_rainfall", "b_rain_anomalies_lags_0_3", "c1_smc_rounds", "c2_llin_campaign_timing")
DATED_STATES = ("AK", "BA", "BE", "EB", "KE", "NA", "OY")


def _given(value: Any) -> Any:
    return NOT_IN_RELEASE if value is None else value


def produced_files(produced: Iterable[Produced]) -> dict[str, bytes]:
    return {k: data for p in produced for k, (_, data) in p.files.items()}


SKILL_FILE = "docs/skill.json"
SKILL_METHODS = ("projected", "projected_published", "projected_chosen", "persistence", "flat", "climatology",
                 "api_forecast")
SKILL_MEASURES = ("skill_vs_persistence", "skill_vs_flat", "coverage_80")


SCORECARD_METHODS = ("published", "published_several_months", "protocol_2", "projected_a1", "seasonal_adjustment_k3",
                     "seasonal_naive", "flat", "protocol_1", "persistence")
SCORECARD_MEASURES = ("skill_vs_persistence", "relative_wis_vs_persistence", "coverage_50", "coverage_80")
AIM_FIGURES = ("vs_persistence.before", "vs_persistence.after", "vs_persistence.several_months", "vs_persistence.protocol_1",
               "weak_vs_persistence.before", "weak_vs_persistence.after", "coverage.before_lga_80",
               *(f"coverage.{w}.{c}" for w in ("before", "after", "several_months")
                 for c in ("lga_80", "lga_50", "state_80", "state_50")),
               "vs_seasonal_adjustment_k3.published", "vs_seasonal_adjustment_k3.several_months",
               "vs_seasonal_adjustment_k3.before", "vs_seasonal_adjustment_k3.projected_a1")


def scorecard_figure_names() -> list[str]:
    """The scorecard figures (protocols 2 and 3) docs/skill.md may quote: present (as not in this release) even when the
    scorecard was not run."""
    out = ["skill.published.lgas.picks_by_horizon", "skill.published.lgas.picks_several_months_by_horizon",
           "skill.data.digest", "skill.data.months", "skill.model.season_digest"]
    for h in (1, 2, 3, 4):
        out += [f"skill.aims.{h}.{k}" for k in AIM_FIGURES]
        for level in ("lgas", "states"):
            base = f"skill.levels.{level}.horizons.{h}.all"
            out += [f"{base}.{k}" for k in ("series", "origins", "forecasts")]
            out += [f"{base}.methods.{m}.{k}" for m in SCORECARD_METHODS for k in SCORECARD_MEASURES]
    return out


def skill_figures(files: Mapping[str, bytes]) -> dict[str, Any]:
    """`skill.*` figures from the season-ratio scorecard (pipeline.datasets.ratios); every figure the
    validation page quotes reads as not in this release where the scorecard is absent or was not run."""
    raw = files.get(SKILL_FILE)
    report: dict[str, Any] = orjson.loads(raw) if raw else {}
    out: dict[str, Any] = {}
    for level in ("lgas", "states"):
        out[f"skill.levels.{level}.series"] = NOT_IN_RELEASE
        out[f"skill.levels.{level}.states"] = NOT_IN_RELEASE
        for h in (1, 2, 3, 4):
            out[f"skill.levels.{level}.horizons.{h}.forecasts"] = NOT_IN_RELEASE
            for m in SKILL_METHODS:
                for k in SKILL_MEASURES:
                    out[f"skill.levels.{level}.horizons.{h}.{m}.{k}"] = NOT_IN_RELEASE
    out["skill.published_alpha"] = NOT_IN_RELEASE
    out.update(dict.fromkeys(scorecard_figure_names(), NOT_IN_RELEASE))
    # protocol 1's figures keep their names (the validation page's section on it); protocol 2's rows are
    # a table for machines, not quoted one by one
    p1 = report.get("protocol_1") or {}
    out.update(flatten_report(p1, "skill"))
    out.update(flatten_report({k: v for k, v in report.items() if k not in ("rows", "protocol_1")}, "skill"))
    if isinstance(p1.get("published_alpha"), list):
        out["skill.published_alpha"] = ", ".join(str(a) for a in p1["published_alpha"])
    return out


SMC_FILE = "docs/smc-check.json"
SMC_NAMES = ("delivered_2021", "delivered_2021_eligible", "delivered_ever", "eligible", "coastal_not_eligible",
             "timing.state_years_judged", "timing.state_years_within_1_month", "timing.share_within_1_month",
             "timing.mean_months_off", "timing.reference_july_within_1_month", "timing.lga_years_judged", "timing.lga_share_within_1_month",
             "lgas_delivered", "lgas_delivered_eligible",
             "state_table", "timing_table", "eligible_never_delivered", "delivered_2021_not_eligible",
             "first_cycle_not_july")
SMC_STATE_FIELDS = ("eligible", "margin", "years_passed", "rain_share_median", "case_share_modelled",
                    "onset_month_median", "onset_month_earliest", "onset_month_latest", "best4_start_month",
                    "first_cycle_month", "cycles", "last_campaign_year", "children_treated_mean_per_cycle",
                    "rain_this_year_through", "rain_this_year_percent_of_average", "rain_this_year_onset_date")
MONTH_ABBR = ("", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def smc_figures(files: Mapping[str, bytes]) -> dict[str, Any]:
    """`smc.*` figures and the two comparison tables (Markdown) of the SMC check (pipeline.datasets.smc)."""
    raw = files.get(SMC_FILE)
    report: dict[str, Any] = orjson.loads(raw) if raw else {}
    out: dict[str, Any] = {f"smc.{n}": NOT_IN_RELEASE for n in SMC_NAMES}
    # the walk-through's state, quoted field by field (docs/smc.md)
    out.update({f"smc.states.kn.{f}": NOT_IN_RELEASE for f in SMC_STATE_FIELDS})
    out.update(flatten_report(report, "smc"))
    if not report:
        return out
    out["smc.eligible_never_delivered"] = ", ".join(report["eligible_never_delivered"]) or "none"
    out["smc.delivered_2021_not_eligible"] = ", ".join(report["delivered_2021_not_eligible"]) or "none"
    out["smc.first_cycle_not_july"] = ", ".join(
        f"{st['state']} ({MONTH_ABBR[st['first_cycle_month']]})" for st in report["states"]
        if st["first_cycle_month"] not in (None, 7)) or "none"

    def yn(v: Any) -> str:
        return "—" if v is None else "eligible" if v else "not eligible"

    def years(ys: list[int]) -> str:
        return ", ".join(str(y) for y in ys) if ys else "none"

    rows = ["| state | rule's verdict | margin | years passed (of 10) | SMC delivered (2013–2021) | first cycle |",
            "|---|---|---|---|---|---|"]
    for st in report["states"]:
        m = st["margin"]
        rows.append(f"| {st['state']} | {yn(st['eligible'])} | {'—' if m is None else f'{m:+.3f}'} | "
                    f"{st['years_passed']} | {years(st['delivered_years'])} | "
                    f"{MONTH_ABBR[st['first_cycle_month']] if st['first_cycle_month'] else '—'} |")
    out["smc.state_table"] = "\n".join(rows)
    timing = report.get("timing") or {}
    trows = ["| state | year | LGAs | first round recorded | recommended first cycle | months off |",
             "|---|---|---|---|---|---|"]
    for r in timing.get("state_years", []):
        rec = r["recommended_first_cycle_month"]
        trows.append(f"| {r['state_code']} | {r['year']} | {r['lgas']} | {r['first_round']} | "
                     f"{MONTH_ABBR[rec] if rec else '—'} | {'—' if r['months_off'] is None else r['months_off']} |")
    out["smc.timing_table"] = "\n".join(trows) if timing else NOT_IN_RELEASE
    return out


def validation_figures(files: Mapping[str, bytes]) -> dict[str, Any]:
    """`validation.*` figures from the validation report the risk producer ships."""
    raw = files.get(VALIDATION_FILE)
    report: dict[str, Any] = orjson.loads(raw) if raw else {}
    from pipeline.datasets.validation import quotable_skeleton

    out: dict[str, Any] = dict(flatten_report(quotable_skeleton(), "validation"))
    out.update(flatten_report(report, "validation"))

    def put(name: str, value: Any) -> None:
        out[f"validation.{name}"] = NOT_IN_RELEASE if value is None else value

    held = {h.get("predicted_round"): h for h in report.get("held_out_rounds", [])}
    for year in (2018, 2021):
        h = held.get(year, {})
        ref = h.get("model_1_reference", {})
        for name in ("states", "spearman", "rmse", "share_inside_80_range", "mean_range_width",
                     "random_walk_variance_per_year"):
            put(f"held_out_{year}.{name}", h.get(name))
        for name in ("spearman", "rmse", "share_inside_95_range"):
            put(f"held_out_{year}.model_1_{name}", ref.get(name))
        put(f"held_out_{year}.random_walk_variance_method", h.get("random_walk_variance_method"))
        put(f"held_out_{year}.new_survey_design_effect", h.get("new_survey_design_effect"))
        put(f"held_out_{year}.cluster_icc", h.get("cluster_icc"))
        put(f"held_out_{year}.var_z", (h.get("calibration") or {}).get("var_z"))
        put(f"held_out_{year}.mean_z", (h.get("calibration") or {}).get("mean_z"))
        put(f"held_out_{year}.uncalibrated_var_z", (h.get("uncalibrated") or {}).get("var_z"))
        put(f"held_out_{year}.uncalibrated_mean_z", (h.get("uncalibrated") or {}).get("mean_z"))
        put(f"held_out_{year}.without_season_error_var_z", (h.get("without_season_error") or {}).get("var_z"))
        ref2 = h.get("model_2_reference", {})
        for name in ("var_z", "share_inside_80_range", "random_walk_variance_per_year"):
            put(f"held_out_{year}.model_2_{name}", ref2.get(name))
    agree = {y.get("year"): y for y in report.get("map_agreement", {}).get("years", [])}
    for year in (2018, 2019):
        put(f"map_{year}.spearman", agree.get(year, {}).get("spearman"))
    lga = report.get("lga_comparison", {})
    for name in ("lgas", "children", "deviance_national_value", "deviance_state_value", "deviance_urban_split",
                 "deviance_urban_ratio_fitted_to_lgas", "urban_ratio_fitted_to_lgas", "urban_lgas", "urban_ratio",
                 "urban_split_beats_state_value"):
        put(f"lga.{name}", lga.get(name))
    small = report.get("lga_small_area", {})
    for name in ("lgas", "deviance_small_area", "deviance_small_area_no_neighbours", "small_area_beats_urban_split",
                 "published"):
        put(f"lga_small_area.{name}", small.get(name))
    fitted = small.get("published_model", {})
    for name in ("neighbour_residual_coefficient", "neighbour_state_level_coefficient",
                 "between_lga_variance_logit", "lgas_from_covariates_and_neighbours"):
        put(f"lga_small_area.{name}", fitted.get(name))
    covariates = fitted.get("covariates") or {}
    for name in ("urban", "log population density"):  # always named, so a page never quotes an unknown figure
        put(f"lga_small_area.coefficient_{name.replace(' ', '_')}", covariates.get(name))
    base = report.get("baseline", {})
    for name in ("random_walk_variance_method", "new_survey_design_effect"):
        put(f"baseline.{name}", base.get(name))
    for name in ("random_walk_variance_per_year", "typical_children_per_state_survey"):
        put(f"baseline.{name}", base.get(name))
    months = report.get("months") or {}
    tests = months.get("tests") or {}
    for term in MONTH_TERMS:
        t = tests.get(term) or {}
        for name in ("improved_in", "states"):
            put(f"months.{term}.{name}", t.get(name))
        put(f"months.{term}.adopted", None if not t else ("adopted" if t.get("adopted") else "not adopted"))
        for code in DATED_STATES:
            s = (t.get("by_state") or {}).get(code) or {}
            put(f"months.{term}.{code}.r_reference", s.get("r_reference"))
            put(f"months.{term}.{code}.r_with_term", s.get("r_with_term"))
    coef = (tests.get("b_rain_anomalies_lags_0_3") or {}).get("published_coefficients")
    put("months.rain_coefficients", None if not coef else ", ".join(f"{c:+.3f}" for c in coef))
    put("months.adopted", None if not tests else (", ".join(tests.get("adopted") or []) or "none"))
    put("months.lga_months", months.get("lga_months"))
    put("months.lgas", months.get("lgas"))
    by_code = {s.get("state_code"): s for s in months.get("score_against_cases") or []}
    for code in DATED_STATES:
        for name in ("r_monthly_level", "r_month_to_month"):
            put(f"score_cases.{code}.{name}", (by_code.get(code) or {}).get(name))
    return out


ROW_KEYS = ("key", "state_code", "lga_code", "predicted_round", "months_ahead", "year")


def flatten_report(doc: Any, prefix: str) -> Iterable[tuple[str, Any]]:
    """Every scalar of the validation report as `prefix.path` (lower case; a list of records is keyed by
    its records' key, state code, round or horizon), so a page may quote any figure the report carries.
    Lists of numbers are not quoted in prose and are skipped; null reads as not in this release."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from flatten_report(v, f"{prefix}.{re.sub(r'[^a-z0-9_]+', '_', str(k).lower()).strip('_')}")
    elif isinstance(doc, list):
        if doc and all(isinstance(x, dict) for x in doc):
            key = next((k for k in ROW_KEYS if all(k in x for x in doc)), None)
            for i, x in enumerate(doc):
                yield from flatten_report(x, f"{prefix}.{str(x[key]).lower() if key else i}")
        elif doc and all(isinstance(x, str) for x in doc):
            yield prefix, ", ".join(doc)
    else:
        yield prefix, NOT_IN_RELEASE if doc is None else doc


def substitute(text: str, figures: Mapping[str, Any], page: str) -> str:
    def one(m: re.Match) -> str:
        name = m.group(1)
        if name not in figures:
            raise UnknownFigure(f"docs/{page}.md quotes {{{{ {name} }}}}, which no producer provides; "
                                f"known: {', '.join(sorted(figures))}")
        value = figures[name]
        if isinstance(value, bool):  # prose, not Python: `yes`/`no`, never `True`/`False`
            return "yes" if value else "no"
        return str(value)

    out = PLACEHOLDER.sub(one, text)
    left = LEFTOVER.search(out)
    if left:
        line = out.count("\n", 0, left.start()) + 1
        snippet = out[max(0, left.start() - 30):left.end() + 30].replace("\n", " ")
        raise UnknownFigure(f"docs/{page}.md line {line}: a placeholder that is not `{{{{ name }}}}` "
                            f"(letters, digits, _ and . only) stays unfilled: …{snippet}…")
    return out
