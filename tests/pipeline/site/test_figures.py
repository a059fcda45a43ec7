"""Docs quote figures of their own release: substitution, unknown names, absent datasets."""

from __future__ import annotations

import pytest

from pipeline.datasets.base import Produced
from pipeline.site.figures import NOT_IN_RELEASE, UnknownFigure, release_figures, substitute
from tests.conftest import synthetic_produced


def with_check(series: int) -> list[Produced]:
    produced = synthetic_produced(with_transmission=False)
    produced.append(Produced("transmission", {"/v1/transmission/states": {(): {"method": {
        "cases_follow_rain_by_months": 1, "high_season_share_of_peak": 0.5,
        "check": {"series": series, "states": ["Kano", "Lagos"], "median_correlation": 0.61,
                  "mean_months_off": 2.5, "mean_months_peak_is_off": None}}}}}))
    return produced


def test_figures_come_from_the_produced_documents():
    figures = release_figures(with_check(7))
    text = substitute("{{ check.series }} series over {{check.states_count}} states, r={{ check.median_correlation }}; "
                      "peak off {{ check.mean_months_peak_is_off }}; to {{ periods.last_forecast }}", figures, "x")
    assert text == f"7 series over 2 states, r=0.61; peak off {NOT_IN_RELEASE}; to 2024-06"
    assert substitute("{{ check.series }}", release_figures(with_check(9)), "x") == "9"


def test_absent_dataset_is_marked_not_blank():
    figures = release_figures(synthetic_produced(with_transmission=False))
    assert substitute("{{ check.median_correlation }}", figures, "seasons") == NOT_IN_RELEASE


def test_unknown_figure_fails_the_build():
    with pytest.raises(UnknownFigure, match="docs/seasons.md quotes"):
        substitute("{{ check.median_corelation }}", release_figures(with_check(1)), "seasons")


def test_a_yes_or_no_figure_reads_as_a_word_not_as_python():
    from pipeline.site.figures import substitute

    text = "Better: **{{ validation.lga.urban_split_beats_state_value }}**; {{ a }} and {{ b }}."
    figures = {"validation.lga.urban_split_beats_state_value": True, "a": False, "b": 0.25}
    assert substitute(text, figures, "validation") == "Better: **yes**; no and 0.25."
