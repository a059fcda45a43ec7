"""The several-months base (docs/skill-protocol.md, protocol 3, change 2) in both clients: records made
by the pipeline's own ratio table with a k-month base at every horizon, projected by the Python and the R
client from the last three counts, against the formula worked from the seasonal index itself:
base = exp(mean over j < k of log(c(t - j) x I(m) / I(m - j))), expected = base x I(m + h) / I(m)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from malaria_risk_client._project import projection, whole_cases

from pipeline.model import forecast_cv as fc
from pipeline.model import skill
from tests.paths import REPO_ROOT

CLIENT_R = REPO_ROOT / "clients" / "r" / "malariarisk" / "R" / "client.R"
BASE = [2, 3, 3, 2]  # k per horizon 1-4


def grid() -> list[dict[str, Any]]:
    """Areas with random seasons, start months and counts (three months, oldest first)."""
    rng = np.random.default_rng(43)
    out = []
    for _ in range(12):
        index = rng.uniform(0.2, 1.0, 12)
        pub = fc.Published([fc.SIMPLEST] * 4, [{}] * 4, {c: [1.0] * 4 for c in skill.CLASSES}, BASE,
                           {c: [(True, "")] * 4 for c in skill.CLASSES}, [False] * 4,
                           {c: np.tile([-0.4, -0.2, 0.0, 0.2, 0.4], (4, 1)) for c in skill.CLASSES})
        recs = [{**r, "season_class": "moderate"} for r in fc.ratio_rows(index[None, :], ["moderate"], pub, decimals=12)[0]]
        for _ in range(4):
            cal = int(rng.integers(1, 13))
            counts = [float(x) for x in rng.integers(5, 5000, 3)]
            out.append({"index": index.tolist(), "records": recs, "cal": cal, "cases": counts})
    return out


def by_formula(g: dict[str, Any]) -> list[int]:
    ix, m, c = g["index"], g["cal"] - 1, g["cases"]
    out = []
    for h, k in zip((1, 2, 3, 4), BASE, strict=True):
        base = math.exp(sum(math.log(c[-1 - j] * ix[m] / ix[(m - j) % 12]) for j in range(k)) / k)
        out.append(whole_cases(base * ix[(m + h) % 12] / ix[m]))
    return out


def python_answers(cases: list[dict[str, Any]]) -> list[list[Any]]:
    out = []
    for g in cases:
        p = projection(g["records"], "KN", f"2024-{g['cal']:02d}", g["cases"])["projections"]
        out.append([[x["expected"], x["base_months"]] for x in p])
    return out


def test_records_carry_the_k_month_base_and_the_python_client_uses_it() -> None:
    cases = grid()
    assert all(r["base_months"] == BASE[r["horizon"] - 1] for r in cases[0]["records"])
    got = python_answers(cases)
    assert [[e for e, _ in row] for row in got] == [by_formula(g) for g in cases]
    assert all([k for _, k in row] == BASE for row in got)
    # one count: the base is that count (k = 1), and the answer says so
    one = projection(cases[0]["records"], "KN", 6, cases[0]["cases"][-1])["projections"]
    assert [x["base_months"] for x in one] == [1] * 4


def test_the_r_client_uses_the_k_month_base_as_the_python_client(tmp_path: Path) -> None:
    rscript = shutil.which("Rscript")
    if rscript is None:
        pytest.skip("R is not installed (.ci/run installs it)")
    cases = grid()
    (tmp_path / "grid.json").write_text(json.dumps(cases))
    script = f"""
source("{CLIENT_R}")
grid <- jsonlite::fromJSON("{tmp_path / 'grid.json'}", simplifyVector = FALSE)
out <- lapply(grid, function(g) {{
  recs <- do.call(rbind, lapply(g$records, function(r) as.data.frame(lapply(r, function(v) if (is.null(v)) NA else v),
                                                                      stringsAsFactors = FALSE)))
  p <- mr_projection(recs, "KN", g$cal, 2024L, unlist(g$cases), 4)
  lapply(seq_len(nrow(p)), function(i) c(p$expected[[i]], p$base_months[[i]]))
}})
cat(jsonlite::toJSON(out))
"""
    res = subprocess.run([rscript, "--vanilla", "-e", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    got = [[[int(v) for v in x] for x in row] for row in json.loads(res.stdout)]
    assert got == python_answers(cases)
