"""Pages say true things: every placeholder is filled or the build stops, no page shows template
syntax or a Python blank, and counts in prose come from the figures of the table beside them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.errors import SiteError, UnknownFigure
from pipeline.site.figures import NOT_IN_RELEASE, TARGETS, Target, substitute, target_figures
from pipeline.site.pages import check_prose, prose
from tests.paths import needs_data


def test_a_placeholder_with_upper_case_codes_is_filled() -> None:
    text = substitute("Akwa Ibom r = {{ score_cases.AK.r_monthly_level }}", {"score_cases.AK.r_monthly_level": 0.41},
                      "validation")
    assert text == "Akwa Ibom r = 0.41"


@pytest.mark.parametrize("text", ["{{ 2x }}", "{{ a-b }}", "open {{ only", "close }} only", "{{}}"])
def test_anything_left_that_looks_like_a_placeholder_stops_the_build(text: str) -> None:
    with pytest.raises(UnknownFigure, match="stays unfilled"):
        substitute(text, {}, "model")


@pytest.mark.parametrize("html", [
    "<p>r = {{ x }}</p>", "<p>the value is None.</p>", "<td>nan</td>", "<p>{% if x %}</p>", "<li>(None)</li>"])
def test_a_page_showing_template_syntax_or_a_python_blank_is_refused(html: str) -> None:
    with pytest.raises(SiteError, match="docs/x.html shows"):
        check_prose("docs/x.html", html)


def test_english_and_code_are_not_blanks() -> None:
    check_prose("docs/x.html", "<p>None is ShareAlike. None beyond the common ones.</p>"
                               "<pre><code>{\"a\": {\"b\": null}}</code></pre><script>x = {a: {}}</script>")
    assert "{}" not in prose("<pre>{}</pre><p>text</p>")


def test_target_counts_come_from_the_same_figures_as_the_table() -> None:
    figures = {t.figure: (t.low if t.low is not None else t.high) for t in TARGETS}  # every target met at its bound
    counts = target_figures(figures)
    assert (counts["targets.met"], counts["targets.missed"], counts["targets.total"]) == (len(TARGETS), 0, len(TARGETS))
    figures["validation.map_2018.spearman"] = 0.87  # one misses
    figures["validation.held_out_2021.var_z"] = 1.9  # and another
    counts = target_figures(figures)
    assert counts["targets.missed"] == 2 and counts["targets.missed_words"] == "two"
    assert counts["targets.missed_list"] == "map_2018_spearman, held_out_2021_var_z"
    assert counts["target.map_2018_spearman.met"] is False
    text = substitute("{{ targets.missed_words }} of {{ targets.total }} missed; target {{ target.lga_deviance }}",
                      counts, "model")
    assert text == f"two of {len(TARGETS)} missed; target ≤ 0.183"


def test_a_figure_not_in_the_release_is_neither_met_nor_missed() -> None:
    counts = target_figures({"x": NOT_IN_RELEASE}, [Target("a", "x", 0.5), Target("b", "y", None, 1.0)])
    assert (counts["targets.met"], counts["targets.missed"], counts["targets.unknown"]) == (0, 0, 2)
    assert counts["target.a.met"] == NOT_IN_RELEASE


# --- the real build -----------------------------------------------------------------------------------


def _pages(real_build: Path) -> dict[str, str]:
    docs = (real_build / "current" / "docs").resolve()
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(docs.glob("*.html"))}


@needs_data()
def test_no_built_page_shows_template_syntax_or_a_python_blank(real_build: Path) -> None:
    pages = _pages(real_build)
    assert len(pages) > 10
    bad = {name: re.findall(r"\{\{|\}\}|\bNone\b(?! [a-z])|\bnan\b", prose(html)) for name, html in pages.items()}
    assert {k: v for k, v in bad.items() if v} == {}


WORDS = {w: i for i, w in enumerate(("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                                     "ten", "eleven", "twelve"))}
TARGET_CELL = re.compile(r"^(≥|≤)\s*([\d.]+)$|^([\d.]+)\s*[–-]\s*([\d.]+)$")


def _missed_in_table(html: str) -> tuple[int, int]:
    """(rows whose value in `this release` misses its target, rows with a target) of the model page's
    validation table: the last cell is the target, the one before it the release's value(s)."""
    missed = total = 0
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
        if len(cells) < 2:
            continue
        m = TARGET_CELL.match(cells[-1])
        values = [float(v) for v in re.findall(r"(?<![\d.])\d+\.\d+|(?<![\d.])\d+(?![\d.%])", cells[-2].split("(")[0])]
        if not m or not values:
            continue
        total += 1
        lo, hi = ((float(m.group(2)), None) if m.group(1) == "≥" else (None, float(m.group(2)))) if m.group(1) \
            else (float(m.group(3)), float(m.group(4)))
        if any((lo is not None and v < lo) or (hi is not None and v > hi) for v in values):
            missed += 1
    return missed, total


@needs_data()
def test_the_model_page_counts_what_its_table_shows(real_build: Path) -> None:
    """A count of missed targets in the prose equals the rows of the table that miss theirs."""
    html = _pages(real_build)["model.html"]
    missed, total = _missed_in_table(html)
    assert total >= 5
    text = " ".join(prose(html).split())
    claims = [m.group(1).lower() for m in re.finditer(
        r"\b(\d+|no|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b(?: of \d+)?(?: targets?)?"
        r" (?:are|is|were|was)? ?missed", text, re.I)]
    for claim in claims:
        assert WORDS.get(claim, int(claim) if claim.isdigit() else -1) == missed, (claim, missed, total)


# --- how recent the data are ----------------------------------------------------------------------------

PERIODS = {"last_estimated": "2026-06", "last_forecast": "2026-10",
           "months": [{"period": "2026-06", "kind": "estimated"}] + [
               {"period": f"2026-{m:02d}", "kind": "forecast"} for m in (7, 8, 9, 10)]}
TRANSMISSION = {"states": [
    {"survey_trend": [{"survey_year": 2018, "survey": "2018 NDHS", "positivity": 0.3},
                      {"survey_year": 2021, "survey": "2021 NMIS", "positivity": 0.2}]},
    {"survey_trend": [{"survey_year": 2024, "survey": "2024 NDHS", "positivity": None}]}]}


def test_freshness_comes_from_the_release_documents_and_the_adopted_terms() -> None:
    from pipeline.model import terms
    from pipeline.site.figures import freshness_figures

    docs = {"/v1/periods": PERIODS, "/v1/transmission/states": TRANSMISSION}
    f = freshness_figures(docs, {"validation.months.adopted": "t2_rain_lags_0_3"})
    assert (f["data.last_estimated"], f["data.last_forecast"], f["data.forecast_months"]) == ("2026-06", "2026-10", 4)
    assert (f["survey.newest_round"], f["survey.newest_year"]) == ("2021 NMIS", 2021)  # 2024 has no figure
    assert f["model.month_after_survey"].startswith(terms.SCORE_TERMS[0].words)
    assert f["model.month_after_survey"].endswith("× " + terms.MONTH_TERMS["t2_rain_lags_0_3"].words)
    plain = freshness_figures(docs, {"validation.months.adopted": "none"})["model.month_after_survey"]
    assert plain.endswith("× the typical season of its calendar month")  # no term adopted: baseline × season
    # the release's own answer (/v1/periods `score_terms`) wins over the validation report
    own = freshness_figures({**docs, "/v1/periods": {**PERIODS, "score_terms": ["baseline", "lga_offset", "season"]}},
                            {"validation.months.adopted": "t2_rain_lags_0_3"})
    assert own["model.month_after_survey"] == terms.made_of(terms.ESTIMATED) and own["model.month_terms"] == "none"
    absent = freshness_figures({}, {})
    assert set(absent.values()) <= {NOT_IN_RELEASE, "none"}


def test_the_landing_page_and_the_map_state_the_facts_and_carry_them_for_the_reader_clock() -> None:
    import orjson

    from pipeline.datasets.base import BuildContext
    from pipeline.datasets.base import Produced as P
    from pipeline.site.pages import produce
    from tests.conftest import synthetic_produced
    from tests.small_geography import small_geo

    produced = [p for p in synthetic_produced(with_transmission=False) if p.dataset != "risk"]
    produced += [P("risk", {"/v1/periods": {(): PERIODS}}), P("transmission", {"/v1/transmission/states": {
        (): {**TRANSMISSION, "method": {"check": {}}}}})]
    ctx = BuildContext(data_dir=Path("no-data"), updated_at="2026-11-22T10:00:00Z", geography=small_geo(),
                       produced=produced)
    files = produce(ctx).files
    for page in ("docs/index.html", "docs/map.html"):
        text = " ".join(prose(files[page][1].decode()).split())
        assert "Latest estimated month: 2026-06" in text and "Forecasts reach 2026-10 (4 months" in text, page
        assert "Newest household survey: 2021 NMIS (fieldwork in 2021)" in text, page
        assert "An estimated month after 2021 is made of the survey baseline of the state" in text, page
        html = files[page][1].decode()
        assert 'data-last-estimated="2026-06"' in html and 'data-last-forecast="2026-10"' in html
        assert "/docs/freshness.js" in html
    config = files["docs/map.html"][1].decode().split('id="map-config">', 1)[1].split("</script>", 1)[0]
    assert orjson.loads(config)["last_forecast"] == "2026-10"
    # the map's month label words come from the model's declared terms (no month term: no rainfall note)
    from pipeline.model import terms

    assert orjson.loads(config)["month_labels"] == terms.month_labels(())
    assert "docs/freshness.js" in files


NODE = __import__("shutil").which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize(("today", "stale"), [("2026-10-31", False), ("2026-11-01", True), ("2027-01-15", True)])
def test_the_reader_clock_decides_when_the_next_load_is_due(today: str, stale: bool) -> None:
    import json
    import subprocess

    from pipeline.site.pages import SITE_DIR

    script = (f"const {{staleNote}} = require({json.dumps(str(SITE_DIR / 'static' / 'freshness.js'))});"
              f"const [y, m, d] = {json.dumps(today)}.split('-').map(Number);"
              "process.stdout.write(staleNote('2026-06', '2026-10', new Date(y, m - 1, d)));")
    out = subprocess.run([NODE, "-e", script], capture_output=True, text=True, check=True).stdout
    assert bool(out) is stale
    if stale:
        assert "The data end at 2026-06" in out and "forecasts to 2026-10" in out and "next data load is due" in out


@needs_data()
def test_the_real_pages_state_the_release_facts(real_build: Path) -> None:
    import orjson

    root = (real_build / "current").resolve()
    periods = orjson.loads((root / "v1" / "periods.json").read_bytes())
    report = orjson.loads((root / "docs" / "validation.json").read_bytes())
    pages = _pages(real_build)
    for page in ("index.html", "map.html"):
        text = " ".join(prose(pages[page]).split())
        assert f"Latest estimated month: {periods['last_estimated']}" in text
        assert f"Forecasts reach {periods['last_forecast']}" in text
        assert "Newest household survey: 20" in text and NOT_IN_RELEASE not in text.split("Newest")[1][:80]
        adopted = ((report.get("months") or {}).get("tests") or {}).get("adopted") or []
        assert ("rain term" in text) == ("b_rain_anomalies_lags_0_3" in adopted)
