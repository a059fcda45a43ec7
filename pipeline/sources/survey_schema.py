"""The normalised schema of survey positivity rows, shared by both survey readers.

Defined apart from either reader so that `pipeline.sources.survey` (which dispatches to
the DHS API reader) and `pipeline.sources.dhs_api` (which returns rows in this schema)
depend on it rather than on each other.
"""

from __future__ import annotations

import polars as pl

from pipeline.sources._csv import Dtype

SCHEMA: dict[str, Dtype] = {
    "survey_year": pl.Int64,
    "survey": pl.Utf8,
    "level": pl.Utf8,
    "area": pl.Utf8,
    "state_code": pl.Utf8,
    "test": pl.Utf8,
    "test_assumed": pl.Boolean,
    "positivity": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
    "clusters": pl.Int64,
    "children_tested": pl.Int64,
    "source": pl.Utf8,
}
LEVELS = ("national", "residence", "zone", "state")
