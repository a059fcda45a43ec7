"""The one flattening behind CSV responses and bundle tables: rows, column order, spelling of values."""

from __future__ import annotations

import csv
import io

import polars as pl
import pytest

from pipeline.release.tabular import frame, to_csv

LGA_REPORT = {
    "period": "2024-01", "kind": "estimated", "state_code": "KN", "state": "Kano",
    "source": {"name": "not a column"},
    "lgas": [
        {"lga_code": "NG020002", "lga": "Nasarawa, Kano", "score": 0.25, "level": "moderate", "is_urban": True,
         "population": 300, "irs": None, "high_months": [8, 9]},
        {"lga_code": "NG020001", "lga": 'Fagge "old"', "score": 1e-05, "level": "very_low", "is_urban": False,
         "population": 200, "irs": None, "high_months": []},
    ],
}
FORECASTS = {"forecasts": [
    {"period": "2024-02", "kind": "forecast", "states": [{"state_code": "KN", "score": 0.5, "lgas": 44}]},
    {"period": "2024-03", "kind": "forecast", "states": [{"state_code": "KN", "score": 0.6, "lgas": 44},
                                                          {"state_code": "LA", "score": 0.1, "lgas": 20}]},
]}


def _rows(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))


def test_one_row_per_record_report_fields_first_values_spelled_for_csv():
    data = to_csv(LGA_REPORT)
    header = data.decode().split("\n", 1)[0]
    assert header == "period,kind,state_code,state,lga_code,lga,score,level,is_urban,population,irs,high_months"
    rows = _rows(data)
    assert [r["lga_code"] for r in rows] == ["NG020002", "NG020001"]  # the JSON's order
    assert rows[0]["lga"] == "Nasarawa, Kano" and rows[1]["lga"] == 'Fagge "old"'  # RFC 4180 quoting
    assert rows[0]["is_urban"] == "true" and rows[1]["is_urban"] == "false"
    assert rows[0]["irs"] == "" and rows[0]["high_months"] == "8;9" and rows[1]["high_months"] == ""
    assert float(rows[1]["score"]) == 1e-05 and rows[0]["period"] == "2024-01"


def test_forecasts_give_each_row_its_period_and_int_fields_named_like_containers_stay_values():
    rows = _rows(to_csv(FORECASTS))
    assert [(r["period"], r["state_code"], r["lgas"]) for r in rows] == [
        ("2024-02", "KN", "44"), ("2024-03", "KN", "44"), ("2024-03", "LA", "20")]
    assert list(rows[0]) == ["period", "kind", "state_code", "score", "lgas"]


def test_frame_equals_the_csv_rows_and_types_columns_over_all_rows():
    df = frame([LGA_REPORT, {**LGA_REPORT, "period": "2024-02", "lgas": LGA_REPORT["lgas"][:1]}])
    assert df.height == 3 and df["period"].to_list() == ["2024-01", "2024-01", "2024-02"]
    assert df.columns[:4] == ["period", "kind", "state_code", "state"] and "source" not in df.columns
    assert df.schema["score"] == pl.Float64 and df.schema["is_urban"] == pl.Boolean
    assert df.schema["population"].is_integer()
    rows = _rows(to_csv(LGA_REPORT))
    for rec, row in zip(df.head(2).iter_rows(named=True), rows, strict=True):
        assert rec["score"] == float(row["score"]) and rec["lga"] == row["lga"]
    f = frame([FORECASTS])
    assert f.select("period", "state_code").rows() == [("2024-02", "KN"), ("2024-03", "KN"), ("2024-03", "LA")]


def test_empty_record_lists_give_a_header_only():
    assert to_csv({"state_code": "KN", "lgas": []}).decode() == "state_code\n"
    assert frame([{"state_code": "KN", "lgas": []}]).height == 0


FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"]


def test_formula_like_text_is_neutralised_in_both_csv_writers_and_nothing_else():
    """OWASP CSV injection: text starting = + - @ tab or CR gets a leading quote in every CSV the
    service writes; numbers keep their sign, and the JSON and Parquet values stay as they are."""
    from pipeline.release.tabular import frame, frame_csv, neutralise

    doc = {"state_code": "KN", "lgas": [{"lga": f, "score": -0.5, "n": -3} for f in FORMULAS]
           + [{"lga": "Kano", "score": 0.25, "n": 2}]}
    rows = _rows(to_csv(doc))
    assert [r["lga"] for r in rows] == ["'" + f for f in FORMULAS] + ["Kano"]
    assert {r["score"] for r in rows[:-1]} == {"-0.5"} and rows[0]["n"] == "-3"
    df = frame([doc])
    assert df["lga"].to_list() == [*FORMULAS, "Kano"]  # the typed table (Parquet) keeps the value
    assert frame_csv(df) == to_csv(doc)  # one writer's spelling: bundle table = CSV response, byte for byte
    assert neutralise("Kano") == "Kano" and neutralise("") == ""
    assert b"\r\n" not in to_csv(doc).replace(b'"\rcmd', b"")  # one line ending, LF


def test_both_writers_end_lines_alike_and_quote_alike():
    from pipeline.release.tabular import frame, frame_csv

    doc = {"period": "2024-01", "lgas": [{"lga": 'Fagge "old"', "is_urban": True, "irs": None, "high_months": [8, 9]},
                                        {"lga": "Nasarawa, Kano", "is_urban": False, "irs": 0.5, "high_months": []}]}
    df = frame([doc]).with_columns(pl.col("high_months").cast(pl.List(pl.String)).list.join(";"))
    assert frame_csv(df) == to_csv(doc)
    assert to_csv(doc).count(b"\n") == 3 and b"\r" not in to_csv(doc)


# --- many documents at once: the same bytes as one at a time --------------------------------------


def _tricky_docs() -> list[dict]:
    """Documents of one route's shape and odd ones: text needing quotes or neutralising, CR and LF in
    values, lists, nested objects, nulls, booleans, floats Python and polars spell differently."""
    def lga(i: int, **over: object) -> dict:
        rec = {"lga_code": f"NG{i:03d}", "lga": ["Kano", 'Say "hi"', "a,b", "=SUM(A1)", "-3", "line\nbreak", "",
                                                  "tab\tinside", "@x", "+1"][i % 10],
               "risk": [0.25, 1.0, 0.0, None, 12345678.5, -0.125][i % 6], "rank": i, "urban": i % 3 == 0,
               "weeks": [["2024-01", None], [], None, ["=x", "y"]][i % 4], "range": {"low": i / 8, "high": None}}
        rec.update(over)
        return rec

    same = [{"period": f"2024-0{p}", "state_code": s, "lgas": [lga(i) for i in range(p * 3)]}
            for p in range(1, 4) for s in ("KN", "=LA")]
    forecast = [{"state_code": "KN", "forecasts": [{"period": f"2024-0{m}", "lgas": [lga(i) for i in range(4)]}
                                                    for m in range(1, 1 + n)]} for n in (1, 2)]
    odd = [
        {"period": "2024-01", "lgas": [lga(1, risk=1e-05)]},  # a float Python spells 1e-05
        {"period": "2024-01", "lgas": [lga(1, rank=2.5), lga(2)]},  # a column mixing int and float
        {"period": "2024-01", "lgas": [lga(1, lga="carriage\rreturn")]},
        {"period": "2024-01", "lgas": [lga(1), {"lga_code": "X"}]},  # records of two shapes
        {"period": "2024-01", "lgas": []},  # a header only
        {"states": [{"state_code": "KN"}]},  # one column
        {"period": "2024-01", "lgas": [lga(3, period="1999-01")]},  # a field named like a report scalar
        {"period": "2024-01", "lgas": [lga(4, weeks=[True, False, None])]},
        {"period": "2024-01", "lgas": [lga(5, risk=float("nan"))]},
    ]
    return [*same, *forecast, *odd]


def test_many_documents_at_once_are_the_bytes_of_one_at_a_time(monkeypatch: pytest.MonkeyPatch):
    from pipeline.release import tabular

    docs = _tricky_docs()
    expected = [to_csv(d) for d in docs]
    one_at_a_time: list[dict] = []
    monkeypatch.setattr(tabular, "to_csv", lambda d: one_at_a_time.append(d) or to_csv(d))
    assert tabular.to_csv_many(docs) == expected
    assert len(one_at_a_time) == 9  # only the odd ones: every document of a shared shape went through polars
    assert tabular.to_csv_many([]) == []


@pytest.mark.slow
def test_every_csv_of_a_real_build_is_the_bytes_of_one_at_a_time(real_build):
    """The vectorised writer against the per-document one, on every CSV route document of a real build."""
    import orjson

    from edge.routes import ROUTES, Facts, route_values
    from pipeline.release.manifest import Manifest
    from pipeline.release.tabular import to_csv_many

    release = (real_build / "current").resolve()
    manifest = Manifest.load(release)
    facts = Facts.from_json(manifest.facts)
    checked = 0
    for route in ROUTES:
        if route.beside_pointer or route.dataset not in facts.available:
            continue
        docs = []
        for values in route_values(route, facts):
            if values.get("format") == "csv":
                key = route.key(values)
                source = route.key({**values, "format": "json"})
                docs.append((key, orjson.loads((release / source).read_bytes())))
        written = to_csv_many([d for _, d in docs])
        assert written == [(release / key).read_bytes() for key, _ in docs]
        assert written == [to_csv(d) for _, d in docs]
        checked += len(docs)
    assert checked > 1000


def test_a_frame_of_documents_is_tabulated_to_the_bytes_of_its_dicts():
    """`frame_csv_rows` (the histories' CSVs, made from their frame) against `to_csv` of each row's dict:
    text to neutralise and quote, nulls, a column null in every row, booleans, integers and floats."""
    from pipeline.release import tabular

    months = pl.List(pl.Struct({"period": pl.String, "score": pl.Float64, "rank": pl.Int64,
                                "provisional": pl.Boolean, "note": pl.String, "empty": pl.Float64}))
    rows = pl.DataFrame({
        "lga_code": ["NG001", "NG002", "NG003"],
        "lga": ["=Abak", 'Obi, "North"', None],
        "is_urban": [True, None, False],
        "band": [None, None, None],
        "months": [[{"period": "2020-01", "score": 0.1234, "rank": 1, "provisional": False, "note": "+x",
                     "empty": None},
                    {"period": "2020-02", "score": None, "rank": 2, "provisional": True, "note": "a\nb",
                     "empty": None}],
                   [{"period": "2020-01", "score": 1.0, "rank": None, "provisional": None, "note": "",
                     "empty": None}],
                   [{"period": "2020-01", "score": 0.5, "rank": 3, "provisional": False, "note": None,
                     "empty": None}]],
    }, schema_overrides={"band": pl.String, "months": months})
    made = tabular.frame_csv_rows(rows, "months")
    assert made is not None  # the shape the histories have: tabulated from the frame
    assert made == [to_csv(d) for d in rows.to_dicts()] == tabular.to_csv_many(rows.to_dicts())
    # a float Python and polars spell differently, or a document without records: left to the dicts
    tiny = rows.with_columns(pl.lit(0.00001).alias("x"))
    assert tabular.frame_csv_rows(tiny, "months") is None
    assert tabular.frame_csv_rows(rows.with_columns(pl.col("months").list.head(0)), "months") is None


def test_a_frame_of_documents_is_encoded_to_the_json_bytes_of_its_dicts():
    """`frame_json_rows` (the histories' JSON, made from their frame) against `orjson.dumps` of each row's
    dict: numbers at the edges of their spelling, non-finite numbers, text that JSON escapes or does
    not, nulls, booleans, nested record lists, a column null in every row."""
    import orjson

    from pipeline.release import tabular

    floats = [0.0001, 1e-05, 1e-06, 1e-07, 1e15, 1e16, 1e21, 1.5e300, -0.0, 5e-324, 0.30000000000000004, 2.0,
              123456.789, float("nan"), float("inf"), None]
    texts = ["é", "\u2028", "\x1f", "<>&/", '"q"', "\\", "tab\t", "nl\n", "\x7f", "𝄞", "=cmd", None]
    n = max(len(floats), len(texts))
    months = pl.List(pl.Struct({"period": pl.String, "score": pl.Float64, "rank": pl.Int64,
                                "provisional": pl.Boolean, "note": pl.String}))
    rows = pl.DataFrame({
        "code": [f"NG{i:03d}" for i in range(n)],
        "x": [floats[i % len(floats)] for i in range(n)],
        "name": [texts[i % len(texts)] for i in range(n)],
        "big": [2**53 + i if i % 3 else None for i in range(n)],
        "flag": [[True, False, None][i % 3] for i in range(n)],
        "band": [None] * n,
        "months": [[{"period": "2020-01", "score": floats[(i + 1) % len(floats)], "rank": i, "provisional": i % 2 == 0,
                     "note": texts[(i + 2) % len(texts)]}] * (i % 3) for i in range(n)],
    }, schema_overrides={"band": pl.String, "months": months})
    assert tabular.frame_json_rows(rows) == [orjson.dumps(d) for d in rows.to_dicts()]
    assert tabular.frame_json_rows(rows.select("months")) == [orjson.dumps(d) for d in rows.select("months").to_dicts()]
