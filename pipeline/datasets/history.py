"""Producer of the one-call routes: `/v1/history/states`, `/v1/history/lgas` and `/v1/risk/lgas/all`.

Nothing is modelled here. Every figure is taken from the documents the risk producer
returns for `/v1/risk/*` and `/v1/forecasts/*` (`ctx.produced`), flattened by the same
`tabular.frame` the CSV responses and the bundle tables use, and regrouped: by area for
the histories, by month for the whole-country report. A history month therefore holds
exactly the numbers the per-month routes serve, whatever the model computes them from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

from edge.routes import INCLUDE_FORECASTS, INCLUDE_NONE
from pipeline.datasets.base import BuildContext, Produced, Rendered
from pipeline.errors import DatasetUnavailable
from pipeline.release import tabular

if TYPE_CHECKING:
    from pipeline.release.reuse import Reuse

STATES_ROUTE = "/v1/history/states"
LGAS_ROUTE = "/v1/history/lgas"
ALL_LGAS_ROUTE = "/v1/risk/lgas/all"

# The fields of one month of a history, in this order (`provisional`, `basis` and the LGA rank fields
# are additive; a field the risk documents lack is left out).
MONTH_FIELDS = ("period", "kind", "score", "score_low", "score_high", "level", "provisional", "basis")
LGA_MONTH_FIELDS = (*MONTH_FIELDS, "rank", "rank_low", "rank_high", "rank_range_withheld")
STATE_FIELDS = ("state_code", "state", "zone")
LGA_FIELDS = ("lga_code", "lga", "state_code", "state", "is_urban", "evidence", "survey_children_2018_band")


def _documents(produced: Iterable[Produced]) -> dict[str, dict[tuple[str, ...], Any]]:
    out: dict[str, dict[tuple[str, ...], Any]] = {}
    for p in produced:
        out.update(p.documents)
    return out


def _provisional(periods: Mapping[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(
        [(m["period"], bool(m.get("provisional", False))) for m in periods["months"]],
        schema={"period": pl.String, "provisional": pl.Boolean}, orient="row",
    )


def monthly_frame(estimates: Iterable[dict], forecasts: Iterable[dict], periods: Mapping[str, Any]) -> pl.DataFrame:
    """Every record of the estimated reports and of the full (4-month) forecast as one long frame."""
    est = tabular.frame(estimates)
    fc = tabular.frame(forecasts)
    df = pl.concat([est, fc], how="diagonal_relaxed") if fc.height else est
    if "provisional" not in df.columns:
        df = df.join(_provisional(periods), on="period", how="left")
    return df.with_columns(pl.col("provisional").fill_null(False))


def _grouped(df: pl.DataFrame, key: str, static: tuple[str, ...], month_fields: tuple[str, ...]
             ) -> tuple[int, dict[str, pl.DataFrame]]:
    """(number of areas, per include the frame of one history document per row, areas in code order)."""
    static = tuple(c for c in static if c in df.columns)
    months = pl.struct(*(c for c in month_fields if c in df.columns)).alias("months")
    ordered = df.sort(key, "period")
    heads = ordered.group_by(key, maintain_order=True).agg(pl.col(c).first() for c in static if c != key)
    grouped = {include: heads.join(rows.group_by(key, maintain_order=True).agg(months), on=key, how="left")
               .select(*static, "months")
               for include, rows in ((INCLUDE_NONE, ordered.filter(pl.col("kind") == "estimated")),
                                     (INCLUDE_FORECASTS, ordered))}
    return heads.height, grouped


def histories(df: pl.DataFrame, key: str, static: tuple[str, ...], month_fields: tuple[str, ...] = MONTH_FIELDS,
              chunk: int = 128) -> Iterator[dict[tuple[str, ...], dict[str, Any]]]:
    """Per (area code, include), its history document without and with the forecast months, oldest
    month first; `chunk` areas at a time, so a caller can render them and let the dicts go."""
    n, grouped = _grouped(df, key, static, month_fields)
    for start in range(0, n, chunk):
        out: dict[tuple[str, ...], dict[str, Any]] = {}
        for include, frame in grouped.items():
            for doc in frame.slice(start, chunk).to_dicts():
                out[(doc[key], include)] = doc
        yield out


def rendered_histories(df: pl.DataFrame, key: str, static: tuple[str, ...], route: str,
                       month_fields: tuple[str, ...] = MONTH_FIELDS, reuse: Reuse | None = None,
                       chunk: int = 128) -> dict[tuple[str, ...], Rendered]:
    """`histories` as response bytes (`tabular.rendered`), each CSV tabulated from the documents' frame
    (`tabular.frame_csv_rows`: the bytes `to_csv` makes of the document, without its cells as Python
    objects), and from the documents where the frame is not of that shape."""
    n, grouped = _grouped(df, key, static, month_fields)
    out: dict[tuple[str, ...], Rendered] = {}
    for start in range(0, n, chunk):
        for include, frame in grouped.items():
            rows = frame.slice(start, chunk)
            # the JSON too is spelled from the frame (`tabular.frame_json_rows`: the bytes orjson makes of
            # the dicts), so no document is made as dicts
            docs: dict[tuple[str, ...], None] = {(code, include): None for code in rows[key].to_list()}
            out.update(tabular.rendered(docs, reuse=reuse, route=route, made=tabular.frame_csv_rows(rows, "months"),
                                        jsons=tabular.frame_json_rows(rows)))
    return out


def _all_lgas_frame(lga: pl.DataFrame, record_fields: list[str]) -> pl.DataFrame:
    """One row per estimated month: its document's fields, in their order, every LGA of the country
    highest score first and ties by `lga_code` (the per-state reports' order, over all states)."""
    est = lga.filter(pl.col("kind") == "estimated").sort(
        ["period", "score", "lga_code"], descending=[False, True, False], nulls_last=True)
    extra = [pl.col("basis").first()] if "basis" in est.columns else []
    grouped = est.group_by("period", maintain_order=True).agg(pl.struct(*record_fields).alias("lgas"), *extra)
    return grouped.select("period", pl.lit("estimated").alias("kind"), "lgas", *(["basis"] if extra else []))


def rendered_all_lgas(lga: pl.DataFrame, record_fields: list[str], reuse: Reuse | None = None
                      ) -> dict[tuple[str, ...], Rendered]:
    """`all_lgas` as response bytes, the JSON spelled from the frame (`tabular.frame_json_rows`) and a
    CSV made only where the previous release's is not linked (a new month: its own month's)."""
    grouped = _all_lgas_frame(lga, record_fields)
    docs: dict[tuple[str, ...], None] = {(period,): None for period in grouped["period"].to_list()}
    return tabular.rendered(docs, reuse=reuse, route=ALL_LGAS_ROUTE, jsons=tabular.frame_json_rows(grouped))


def build_documents(docs: Mapping[str, Mapping[tuple[str, ...], Any]],
                    reuse: Reuse | None = None) -> tuple[dict[str, dict], list[str]]:
    """The three routes' documents and the LGA codes they are keyed by (with `reuse`, a CSV made from
    the JSON bytes the previous release's CSV was made from is linked: `tabular.rendered`)."""
    periods = docs["/v1/periods"][()]
    risk_lgas = docs["/v1/risk/lgas"]
    lga = monthly_frame(
        (risk_lgas[k] for k in sorted(risk_lgas)),
        (d for k, d in sorted(docs["/v1/forecasts/lgas"].items()) if k[1] == "4"),
        periods,
    )
    state = monthly_frame(
        (docs["/v1/risk/states"][k] for k in sorted(docs["/v1/risk/states"])),
        [docs["/v1/forecasts/states"][("4",)]],
        periods,
    )
    # the /v1/risk/lgas record as served, with its state after the LGA's name
    first = next(iter(risk_lgas.values()))["lgas"]
    own = list(first[0]) if first else ["lga_code", "lga"]
    record = [*own[:2], "state_code", "state", *(c for c in own[2:] if c not in ("state_code", "state"))]

    # no later producer reads these documents: each batch is rendered to its response bytes at once
    # (tabular.rendered), so the build never holds every history as Python objects
    out: dict[str, dict] = {STATES_ROUTE: {}, LGAS_ROUTE: {}, ALL_LGAS_ROUTE: {}}
    out[STATES_ROUTE] = rendered_histories(state, "state_code", STATE_FIELDS, STATES_ROUTE, reuse=reuse)
    out[LGAS_ROUTE] = rendered_histories(lga, "lga_code", LGA_FIELDS, LGAS_ROUTE, LGA_MONTH_FIELDS, reuse)
    out[ALL_LGAS_ROUTE] = rendered_all_lgas(lga, record, reuse)
    return out, sorted({code for code, _ in out[LGAS_ROUTE]})


def produce(ctx: BuildContext) -> Produced:
    docs = _documents(ctx.produced)
    if "/v1/risk/lgas" not in docs or "/v1/periods" not in docs:
        raise DatasetUnavailable("histories need the risk documents")
    documents, lga_codes = build_documents(docs, ctx.reuse)
    return Produced(dataset="history", documents=documents, facts={"lgas": lga_codes})
