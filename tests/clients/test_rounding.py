"""One rounding rule for projected cases across the map's form (project.js, under node), the Python client
and the R client: each projects the same ratio records on a grid of counts and ratios, ties included,
and the three answers must be equal, in whole cases."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from malaria_risk_client._project import projection, whole_cases

from tests.paths import REPO_ROOT

PROJECT_JS = REPO_ROOT / "pipeline" / "site" / "static" / "project.js"
CLIENT_R = REPO_ROOT / "clients" / "r" / "malariarisk" / "R" / "client.R"
CASES = [0, 1, 3, 5, 7, 10, 33, 120, 999, 1045, 2500, 12345]
RATIOS = [0.5, 0.9, 0.875, 1.045, 1.5, 2.5, 0.333, 1.2345, 0.1, 3.0]


def records(ratio: float) -> list[dict[str, Any]]:
    """One area's records for start month 6: horizons 1-4 with low/high around `ratio` (exact halves kept)."""
    return [{"start_month": 6, "horizon": h, "ratio": round(ratio * f, 4), "low": round(ratio * f * 0.5, 4),
             "high": round(ratio * f * 1.5, 4), "beats_persistence": True, "forecast": "projected",
             "season_class": "moderate", "base_months": 1} for h, f in zip((1, 2, 3, 4), (1, 1.1, 0.9, 2), strict=True)]


def python_answers() -> list[list[int]]:
    out = []
    for r in RATIOS:
        for c in CASES:
            p = projection(records(r), "KN", "2024-06", c)["projections"]
            out.append([v for x in p for v in (x["expected"], x["low"], x["high"])])
    return out


def test_half_up_on_ties() -> None:
    assert [whole_cases(x) for x in (0.5, 1.5, 2.5, 1044.5, 0.49999, 7.0)] == [1, 2, 3, 1045, 0, 7]


def test_the_map_form_rounds_as_the_python_client() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the map's libraries need npm and node: make install)")
    grid = [{"ratio": r, "cases": c, "records": records(r)} for r in RATIOS for c in CASES]
    script = ("global.window = {}; require(process.argv[1]);"
              "const grid = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "const out = grid.map(g => window.MalariaProject.project(g.records, '2024-06', g.cases)"
              ".flatMap(p => [p.expected, p.low, p.high]));"
              "process.stdout.write(JSON.stringify(out));")
    res = subprocess.run([node, "-e", script, str(PROJECT_JS)], input=json.dumps(grid), capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == python_answers()


def test_the_r_client_rounds_as_the_python_client(tmp_path: Path) -> None:
    rscript = shutil.which("Rscript")
    if rscript is None:
        pytest.skip("R is not installed (.ci/run installs it)")
    grid = [{"ratio": r, "cases": c, "records": records(r)} for r in RATIOS for c in CASES]
    (tmp_path / "grid.json").write_text(json.dumps(grid))
    script = f"""
source("{CLIENT_R}")
grid <- jsonlite::fromJSON("{tmp_path / 'grid.json'}", simplifyVector = FALSE)
out <- lapply(grid, function(g) {{
  recs <- do.call(rbind, lapply(g$records, as.data.frame, stringsAsFactors = FALSE))
  p <- mr_projection(recs, "KN", 6L, 2024L, g$cases, 4)
  as.vector(t(as.matrix(p[, c("expected", "low", "high")])))
}})
cat(jsonlite::toJSON(out))
"""
    res = subprocess.run([rscript, "--vanilla", "-e", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert [[int(v) for v in row] for row in json.loads(res.stdout)] == python_answers()
