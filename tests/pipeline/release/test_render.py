"""The renderer: exact coverage of the route table, verified releases, atomic switch, reuse."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import orjson
import pytest

from pipeline.datasets.base import Produced
from pipeline.release.manifest import Manifest, verify_release_dir
from pipeline.release.render import PRECOMPRESSED, RenderError, render_release, switch_current
from tests.conftest import ESTIMATED, STATES, synthetic_produced

T1 = "2026-11-22T10:00:00Z"
T2 = "2026-11-22T11:00:00Z"


def current_id(root: Path) -> str:
    return os.readlink(root / "current").split("/")[-1]


def test_release_is_complete_and_verified(tmp_path: Path):
    stats = render_release(tmp_path, synthetic_produced(), T1)
    rel = tmp_path / "releases" / stats.release_id
    m = Manifest.load(rel)
    assert m.release_id == stats.release_id and m.updated_at == T1 and m.model_version == "test-1"
    assert m.facts["states"] == list(STATES) and m.facts["estimated"] == list(ESTIMATED)
    assert verify_release_dir(rel) == []
    # every identity file has a gzip sibling that decompresses to it, except already compressed ones
    for key, e in m.files.items():
        if e["content_type"] in PRECOMPRESSED:
            assert key + ".gz" not in m.files
        elif e["content_encoding"] is None:
            gz = m.files[key + ".gz"]
            assert gz["content_encoding"] == "gzip" and gz["content_type"] == e["content_type"]
            assert gzip.decompress((rel / (key + ".gz")).read_bytes()) == (rel / key).read_bytes()
    assert orjson.loads((rel / "v1/risk/lgas/KN/2024-01.json").read_bytes())["state_code"] == "KN"
    assert current_id(tmp_path) == stats.release_id
    assert not [p for p in (tmp_path / "releases").iterdir() if p.name.startswith(".tmp")]


def _drop(produced: list[Produced], path: str, key: tuple) -> list[Produced]:
    for p in produced:
        if path in p.documents:
            del p.documents[path][key]
    return produced


def test_missing_document_stops_the_build_and_keeps_current(tmp_path: Path):
    first = render_release(tmp_path, synthetic_produced(), T1)
    broken = _drop(synthetic_produced(), "/v1/risk/lgas", ("LA", ESTIMATED[0]))
    with pytest.raises(RenderError, match="documents missing"):
        render_release(tmp_path, broken, T2)
    assert current_id(tmp_path) == first.release_id
    assert [p.name for p in (tmp_path / "releases").iterdir()] == [first.release_id]


def test_unexpected_documents_are_refused(tmp_path: Path):
    produced = synthetic_produced()
    produced[0].documents["/v1/boundaries/lgas"][("ZZ",)] = {}
    with pytest.raises(RenderError, match="unexpected"):
        render_release(tmp_path, produced, T1)
    produced = synthetic_produced()
    produced.append(Produced("extra", {"/v1/secret": {(): {}}}))
    with pytest.raises(RenderError, match="not in the route table"):
        render_release(tmp_path, produced, T1)
    produced = synthetic_produced()
    produced.append(Produced("bad-site", {}, files={"../escape.html": ("text/html", b"x")}))
    with pytest.raises(RenderError, match="under docs/"):
        render_release(tmp_path, produced, T1)
    assert not (tmp_path / "current").exists()


def test_a_failure_while_writing_leaves_nothing_half_published(tmp_path: Path):
    first = render_release(tmp_path, synthetic_produced(), T1)
    seen = []

    def interrupt(label: str, done: int, total: int) -> None:
        seen.append(label)
        if label == "verifying":  # every file is on disk by now, the switch has not happened
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        render_release(tmp_path, synthetic_produced(), T2, progress=interrupt)
    assert "writing files" in seen
    assert current_id(tmp_path) == first.release_id
    assert sorted(p.name for p in (tmp_path / "releases").iterdir()) == [first.release_id]


def test_unchanged_files_are_linked_from_the_previous_release(tmp_path: Path):
    first = render_release(tmp_path, synthetic_produced(), T1)
    produced = synthetic_produced()
    produced[2].documents["/v1/periods"][()] = {"changed": True}
    second = render_release(tmp_path, produced, T2)
    assert second.release_id != first.release_id
    # the one changed file and its gzip copy, and the bundle files that name the release id
    # (README, SHA256SUMS and the index with their gzip copies, and the zip)
    m = Manifest.load(tmp_path / "releases" / second.release_id)
    stamped = [k for k in m.files if k.startswith(("downloads/README", "downloads/SHA256SUMS",
                                                   "downloads/malaria_risk_nigeria.zip", "v1/downloads.json"))]
    assert len(stamped) == 7
    assert second.written == 2 + len(stamped)
    assert second.linked == second.files - second.written
    for key in ("downloads/gazetteer.csv", "downloads/gazetteer.csv.gz"):  # data files are linked
        assert os.stat(tmp_path / "releases" / first.release_id / key).st_ino == \
            os.stat(tmp_path / "releases" / second.release_id / key).st_ino
    a = tmp_path / "releases" / first.release_id / "v1/context/states.json"
    b = tmp_path / "releases" / second.release_id / "v1/context/states.json"
    assert os.stat(a).st_ino == os.stat(b).st_ino
    assert verify_release_dir(tmp_path / "releases" / second.release_id) == []
    # the old release is untouched and still verifies
    assert verify_release_dir(tmp_path / "releases" / first.release_id) == []


def test_verify_reports_every_difference(tmp_path: Path):
    stats = render_release(tmp_path, synthetic_produced(), T1)
    rel = tmp_path / "releases" / stats.release_id
    (rel / "v1/periods.json").write_bytes(b"{}")
    (rel / "v1/context/states.json.gz").unlink()
    (rel / "stray.txt").write_text("x")
    problems = verify_release_dir(rel)
    assert any("v1/periods.json" in p for p in problems)
    assert any(p.startswith("missing: v1/context/states.json.gz") for p in problems)
    assert any(p.startswith("not in manifest: stray.txt") for p in problems)


def test_switch_current_refuses_incomplete_release(tmp_path: Path):
    (tmp_path / "releases" / "half").mkdir(parents=True)
    with pytest.raises(RenderError):
        switch_current(tmp_path, "half")
