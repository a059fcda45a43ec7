"""The content address of a build (pipeline/buildkey.py): same inputs and code, same key;
any byte of an input or of the code, a different key; hidden fetch records are not inputs."""

from __future__ import annotations

from pathlib import Path

from pipeline import buildkey
from pipeline.release.manifest import MANIFEST_NAME, Manifest


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_key_follows_bytes_not_times_and_skips_hidden_files(tmp_path: Path):
    data = tree(tmp_path / "data", {"rainfall/a.csv": "x,y\n1,2\n", "admin/b.csv": "z\n"})
    docs = tree(tmp_path / "docs", {"page.md": "# Page\n"})
    code = tree(tmp_path / "code", {"m.py": "X = 1\n"})
    key = buildkey.input_key(data, docs, (code,))
    assert len(key) == 64
    (data / "rainfall" / "a.csv").touch()  # a new time, the same bytes
    tree(data, {".fetch/rainfall.json": "{}", ".fetch/previous/a.csv": "old"})
    assert buildkey.input_key(data, docs, (code,)) == key
    for root, rel in ((data, "rainfall/a.csv"), (docs, "page.md"), (code, "m.py")):
        before = (root / rel).read_text()
        (root / rel).write_text(before + " ")
        assert buildkey.input_key(data, docs, (code,)) != key, rel
        (root / rel).write_text(before)
    assert buildkey.input_key(data, docs, (code,)) == key
    (data / "rainfall" / "a.csv").rename(data / "rainfall" / "renamed.csv")
    assert buildkey.input_key(data, docs, (code,)) != key


def test_unchanged_release_only_for_the_current_release_and_its_key(tmp_path: Path):
    out = tmp_path / "build"
    for rid in ("r1", "r2"):
        (out / "releases" / rid).mkdir(parents=True)
        (out / "releases" / rid / MANIFEST_NAME).write_bytes(Manifest(rid, "2026-01-01T00:00:00Z", None, {}, {}).to_bytes())
    assert buildkey.unchanged_release(out, "k1") is None  # no current
    (out / "current").symlink_to("releases/r1")
    buildkey.record_key(out, "r1", "k1")
    buildkey.record_key(out, "r2", "k2")
    same = buildkey.unchanged_release(out, "k1")
    assert same is not None and same.release_id == "r1"
    assert buildkey.unchanged_release(out, "k2") is None  # r2 is not current: a build switches to it
    assert buildkey.unchanged_release(out, "other") is None


def test_the_data_load_time_is_an_input_never_the_clock(tmp_path: Path):
    import hashlib
    import os

    import orjson

    from pipeline.sources.fetch import FETCH_DIR, RECORD
    from pipeline.sources.rainfall import WFP_SUBNATIONAL

    data = tmp_path / "data"
    (data / "rainfall").mkdir(parents=True)
    (data / "admin").mkdir()
    (data / "admin" / "states.csv").write_text("a\n")
    os.utime(data / "admin" / "states.csv", (1_700_000_000, 1_700_000_000))
    target = data / WFP_SUBNATIONAL
    target.write_text("x\n")
    os.utime(target, (1_750_000_000, 1_750_000_000))
    # filled by hand: the newest input file's time, the same however often it is asked
    assert buildkey.data_loaded_at(data) == "2025-06-15T15:06:40Z" == buildkey.data_loaded_at(data)
    # loaded by `data fetch`: when it installed these bytes, while they are the installed ones
    (data / FETCH_DIR).mkdir()
    record = {"sha256": hashlib.sha256(b"x\n").hexdigest(), "installed_at": "2026-11-03T05:00:12Z",
              "fetched_at": "2026-11-26T05:00:09Z"}
    (data / FETCH_DIR / RECORD).write_bytes(orjson.dumps(record))
    assert buildkey.data_loaded_at(data) == "2026-11-03T05:00:12Z"
    target.write_text("y\n")  # replaced by hand since: the record no longer describes it
    os.utime(target, (1_760_000_000, 1_760_000_000))
    assert buildkey.data_loaded_at(data) == "2025-10-09T08:53:20Z"
    # part of the build's key: another load time is another build
    docs = tmp_path / "docs"
    docs.mkdir()
    a = buildkey.build_key(data, docs, "http://x", "2026-11-03T05:00:12Z")
    assert a == buildkey.build_key(data, docs, "http://x", "2026-11-03T05:00:12Z")
    assert a != buildkey.build_key(data, docs, "http://x", "2026-12-03T05:00:12Z")
