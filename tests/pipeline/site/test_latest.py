"""The latest month as the map page prints it (pipeline.site.latest), on made-up documents: both levels
where the 80 % range straddles a threshold, the season in words, and pages that render whatever the
LGA records hold (a withheld rank range, no transmission data)."""

from __future__ import annotations

from typing import Any

from pipeline.site.latest import latest_month, levels_spanned, season_text
from pipeline.site.pages import SITE_DIR, level_bands, render_site

BANDS = level_bands()


def _docs(rank_low: int | None) -> dict[str, dict[tuple[str, ...], Any]]:
    state = {"state_code": "KN", "state": "Kano", "zone": "North West", "score": 0.3, "score_low": 0.2,
             "score_high": 0.45, "level": "moderate", "lgas": 2, "population": 10}
    lgas = [{"lga_code": c, "lga": n, "score": s, "score_low": s - 0.05, "score_high": s + 0.05, "level": "moderate",
             "is_urban": False, "population": 5, "evidence": "some", "rank": k,
             "rank_low": rank_low, "rank_high": None if rank_low is None else 2}
            for k, (c, n, s) in enumerate((("NG020002", "Bebeji", 0.33), ("NG020001", "Ajingi", 0.2)), start=1)]
    return {"/v1/periods": {(): {"last_estimated": "2026-06", "last_forecast": "2026-10"}},
            "/v1/risk/states": {("2026-06",): {"period": "2026-06", "states": [state], "basis": "baseline_x_season"}},
            "/v1/risk/lgas": {("KN", "2026-06"): {"lgas": lgas}, ("KN", "2026-05"): {"lgas": []}}}


def test_both_levels_where_the_range_straddles_and_one_where_it_does_not():
    moderate = next(b for b in BANDS if b["level"] == "moderate")
    assert levels_spanned(moderate["lower"] + 0.01, moderate["upper"] - 0.01, BANDS) is None
    assert levels_spanned(moderate["lower"] - 0.01, moderate["upper"] + 0.01, BANDS) == "low to high"


def test_the_season_in_words():
    season = {"season_start_month": 6, "season_end_month": 10, "peak_month": 8, "high_months": [7, 8, 9]}
    assert season_text(season, 8) == "Jun–Oct, peak Aug; Aug high"
    assert season_text(season, 1) == "Jun–Oct, peak Aug; Jan not high"
    assert season_text({**season, "peak_month": None}, 7) == "Jun–Oct; Jul high"
    assert season_text(None, 7) == season_text({"season_start_month": None}, 7) == "no clear season"


def test_the_latest_month_from_the_documents_and_its_pages():
    latest = latest_month(_docs(1), BANDS)
    assert latest is not None and latest.period == "2026-06" and list(latest.lgas) == ["KN"]
    assert latest.states[0]["spans"] == "moderate to high" and latest.states[0]["season"] == "no clear season"
    assert latest_month({}, BANDS) is None  # a site built without data prints no table
    site = render_site({}, SITE_DIR / "templates", b"", "2026-11-22T10:00:00Z", latest=latest,
                       facts={"data.last_estimated": "2026-06", "data.last_forecast": "2026-10"})
    page = site["docs/map/KN.html"][1].decode()
    assert page.index("NG020002") < page.index("NG020001") and "(1–2)" in page
    assert 'id="passed-note"' in site["docs/map.html"][1].decode()  # built after every month had passed
    # a withheld rank range renders as words, never as a Python blank (the build refuses `None` in prose)
    withheld = render_site({}, SITE_DIR / "templates", b"", "2026-11-22T10:00:00Z",
                           latest=latest_month(_docs(None), BANDS))
    assert "(range withheld)" in withheld["docs/map/KN.html"][1].decode()
