"""Producer of the validation report shipped in every release (docs/validation.json and its plots).

Its own dataset producer, run after the risk and transmission producers: it reuses the risk
model's run for this build (`risk.model_run`) and the season fit with its leave-state-out
check, and writes the report (pipeline.reports.validation) and the static SVG plots of the
validation page (pipeline.site.plots). Nothing here feeds back into a published score.
"""

from __future__ import annotations

import orjson

from pipeline.datasets import risk
from pipeline.datasets.base import BuildContext, Produced
from pipeline.reports.validation import validation_report
from pipeline.site import plots

VALIDATION_FILE = "docs/validation.json"
SVG = "image/svg+xml"


def produce(ctx: BuildContext) -> Produced:
    md, res = risk.model_run(ctx)
    report = validation_report(ctx.data_dir, ctx.geography, md, res, ctx.inputs)
    files = {VALIDATION_FILE: ("application/json", orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")}
    for name, svg in plots.validation_plots(report).items():
        files[f"docs/figures/{name}"] = (SVG, svg.encode())
    return Produced(dataset="validation", documents={}, files=files)
