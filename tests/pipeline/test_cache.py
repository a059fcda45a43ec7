"""Fits kept between builds: recomputed exactly when what they read, or their code, changes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline import cache


def test_a_fit_is_read_back_until_a_file_it_reads_changes(tmp_path: Path):
    data = tmp_path / "data"
    (data / "climate").mkdir(parents=True)
    (data / "climate" / "normals.csv").write_text("m,mm\n1,3\n")
    (data / "rainfall.csv").write_text("month,mm\n2026-01,4\n")
    code = tmp_path / "fit.py"
    code.write_text("VERSION = 1\n")
    runs: list[int] = []

    def fit() -> dict:
        runs.append(1)
        return {"normals": (data / "climate" / "normals.csv").read_text(), "array": np.arange(3)}

    def get() -> dict:
        return cache.cached("season", data, ["climate"], [code], fit)

    assert get()["normals"] == "m,mm\n1,3\n" and len(runs) == 1  # no cache active: computed
    assert get() and len(runs) == 2
    with cache.use(tmp_path / "cache"):
        first = get()
        assert len(runs) == 3
        again = get()
        assert len(runs) == 3 and again["normals"] == first["normals"] and (again["array"] == np.arange(3)).all()
        (data / "rainfall.csv").write_text("month,mm\n2026-01,4\n2026-02,9\n")  # a new month it does not read
        get()
        assert len(runs) == 3
        (data / "climate" / "normals.csv").write_text("m,mm\n1,5\n")  # what it reads
        assert get()["normals"] == "m,mm\n1,5\n" and len(runs) == 4
        code.write_text("VERSION = 2\n")  # its code
        get()
        assert len(runs) == 5
        assert len(list((tmp_path / "cache").glob("season-*.pickle"))) == 1  # the latest entry only
        (tmp_path / "cache" / next((tmp_path / "cache").glob("season-*.pickle")).name).write_bytes(b"torn")
        get()  # an unreadable entry is recomputed
        assert len(runs) == 6


def test_a_pure_call_is_keyed_by_its_arguments(tmp_path: Path):
    calls: list[int] = []

    def total(a: np.ndarray, scale: float = 1.0) -> float:
        calls.append(1)
        return float(a.sum() * scale)

    code = tmp_path / "model.py"
    code.write_text("x = 1\n")
    with cache.use(tmp_path / "cache"):
        assert cache.call("sum", [code], total, np.array([1.0, 2.0])) == 3.0
        assert cache.call("sum", [code], total, np.array([1.0, 2.0])) == 3.0 and len(calls) == 1
        assert cache.call("sum", [code], total, np.array([1.0, 2.5])) == 3.5 and len(calls) == 2
        assert cache.call("sum", [code], total, np.array([1.0, 2.5]), scale=2.0) == 7.0 and len(calls) == 3


def test_a_local_entry_is_kept_apart_from_the_entries_the_scheduled_job_carries(tmp_path: Path):
    """`local=True` entries live under cache/local/: the job's bucket state takes the top-level entries
    only (pipeline/publish/s3/state.py), so a large entry for this build root never travels."""
    runs: list[int] = []

    def fit(x: np.ndarray) -> float:
        runs.append(1)
        return float(x.sum())

    root = tmp_path / "cache"
    with cache.use(root):
        assert cache.call("big-fit", [], fit, np.arange(4), local=True) == 6.0
        assert cache.call("big-fit", [], fit, np.arange(4), local=True) == 6.0 and len(runs) == 1
        cache.call("small-fit", [], fit, np.arange(2))
    assert [p.name.rsplit("-", 1)[0] for p in root.glob("*.pickle")] == ["small-fit"]
    assert [p.name.rsplit("-", 1)[0] for p in (root / cache.LOCAL_DIR).glob("*.pickle")] == ["big-fit"]


def test_columns_computes_only_the_columns_no_earlier_build_kept(tmp_path: Path):
    """`cache.columns`: a new month adds a column; the others, keyed by their own inputs, are read back;
    a changed column or a change of code computes again."""
    asked: list[list[int]] = []
    code = tmp_path / "ranges.py"
    code.write_text("x = 1\n")

    def compute(cols: list[int], values: list[str]) -> list[str]:
        asked.append(cols)
        return [values[i].upper() for i in cols]

    def run(values: list[str]) -> list[str]:
        return cache.columns("ranges", [code], [f"key-{v}" for v in values], lambda cols: compute(cols, values))

    assert run(["a", "b"]) == ["A", "B"] and asked == [[0, 1]]  # no cache active: every column
    with cache.use(tmp_path / "cache"):
        assert run(["a", "b"]) == ["A", "B"] and asked[-1] == [0, 1]
        assert run(["a", "b", "c"]) == ["A", "B", "C"] and asked[-1] == [2]  # the new month only
        n = len(asked)
        assert run(["a", "b", "c"]) == ["A", "B", "C"] and len(asked) == n  # nothing new: nothing computed
        assert run(["a", "x", "c"]) == ["A", "X", "C"] and asked[-1] == [1]  # a changed column
        code.write_text("x = 2\n")
        assert run(["a", "x", "c"]) == ["A", "X", "C"] and asked[-1] == [0, 1, 2]  # new code: all again
        (tmp_path / "cache" / cache.LOCAL_DIR / "ranges.pickle").write_bytes(b"not a pickle")
        assert run(["a", "x"]) == ["A", "X"] and asked[-1] == [0, 1]  # an unreadable entry: all again
    assert [p.name for p in (tmp_path / "cache" / cache.LOCAL_DIR).iterdir()] == ["ranges.pickle"]
