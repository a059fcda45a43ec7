"""The renderer: exact coverage of the route table, verified releases, atomic switch, reuse."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import orjson
import pytest

from edge.routes import PRECOMPRESSED_SUFFIXES
from pipeline.datasets.base import Produced
from pipeline.release.manifest import Manifest, verify_release_dir
from pipeline.release.render import RenderError, render_release, switch_current
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
        if key.endswith(PRECOMPRESSED_SUFFIXES):
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


def test_unchanged_files_are_links_to_the_objects_the_previous_release_wrote(tmp_path: Path):
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
    assert second.written == 2 + len(stamped)  # new bytes only: everything else is linked
    assert second.linked == second.files - second.written
    old_dir = tmp_path / "releases" / first.release_id
    new_dir = tmp_path / "releases" / second.release_id
    same = new_dir / "v1/context/states.json.gz"
    assert same.stat().st_ino == (old_dir / "v1/context/states.json.gz").stat().st_ino
    assert same.stat().st_nlink == 3  # the object and the two releases: the link count is the reference count
    assert (new_dir / "v1/periods.json").stat().st_ino != (old_dir / "v1/periods.json").stat().st_ino
    assert same.stat().st_mode & 0o222 == 0  # objects are read-only: a stray write is refused
    objects = [p for p in (tmp_path / "objects").rglob("*") if p.is_file()]
    assert all(hashlib.sha256(p.read_bytes()).hexdigest() == p.name for p in objects)
    assert verify_release_dir(new_dir) == [] and verify_release_dir(old_dir) == []


def test_the_next_build_heals_a_damaged_file_and_blames_nothing(tmp_path: Path):
    first = render_release(tmp_path, synthetic_produced(), T1)
    old_dir = tmp_path / "releases" / first.release_id
    gz = old_dir / "v1/context/states.json.gz"
    data = bytearray(gz.read_bytes())
    data[12] ^= 0xFF  # one byte flipped in the current release
    gz.write_bytes(bytes(data))
    second = render_release(tmp_path, synthetic_produced(), T2)  # same documents, new time
    new_dir = tmp_path / "releases" / second.release_id
    assert verify_release_dir(new_dir) == []
    assert current_id(tmp_path) == second.release_id
    healed = gzip.decompress((new_dir / "v1/context/states.json.gz").read_bytes())
    assert healed == (new_dir / "v1/context/states.json").read_bytes()
    m = Manifest.load(new_dir)
    stamped = [k for k in m.files if k.startswith(("downloads/README", "downloads/SHA256SUMS",
                                                   "downloads/malaria_risk_nigeria.zip", "v1/downloads.json"))]
    # only the damaged object written afresh, besides the bundle files that name the new release id
    assert second.written == 1 + len(stamped) and second.linked == second.files - second.written
    # the damaged inode stays where it was, and verify names it there
    assert verify_release_dir(old_dir) == ["checksum differs: v1/context/states.json.gz"]


def test_a_killed_build_leaves_a_temporary_directory_that_the_next_build_removes(tmp_path: Path):
    from tests.pipeline.release.killed import killed

    render_release(tmp_path, synthetic_produced(), T1)
    die = "def die(label, done, total):\n    if label == 'verifying':\n        os.kill(os.getpid(), signal.SIGKILL)\n"
    assert killed(die + f"render_release(Path({str(tmp_path)!r}), synthetic_produced(), {T2!r}, progress=die)\n")
    left = [p.name for p in (tmp_path / "releases").iterdir() if p.name.startswith(".tmp-")]
    assert len(left) == 1  # the killed build's files, never renamed into place
    third = render_release(tmp_path, synthetic_produced(), "2026-11-22T12:00:00Z")
    assert third.cleaned == 1
    assert not [p for p in (tmp_path / "releases").iterdir() if p.name.startswith(".")]


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


def test_a_write_failure_is_one_line_and_leaves_nothing_half_built(tmp_path: Path):
    """The operating system refuses the release's writes part of the way through (here a file-size
    limit, the way a full disk refuses them): one line naming the cause, no `.tmp-*` directory
    left behind, and `current` still names the release it named before."""
    import subprocess
    import sys

    from tests.paths import REPO_ROOT

    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from pipeline.errors import OperatorError\n"
        "from pipeline.release.render import render_release\n"
        "from tests.conftest import synthetic_produced\n"
        "out = Path(sys.argv[1])\n"
        "render_release(out, synthetic_produced(), '2026-11-22T10:00:00Z')\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))\n"
        "try:\n"
        "    render_release(out, synthetic_produced(), '2026-11-22T11:00:00Z')\n"
        "except OperatorError as e:\n"
        "    print(e); sys.exit(1)\n"
    )
    r = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith(f"cannot write the release under {tmp_path / 'releases'}: File too large")
    assert len(r.stdout.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert [p.name for p in (tmp_path / "releases").iterdir()] == [os.readlink(tmp_path / "current").split("/")[-1]]


def test_a_full_disk_names_the_fix():
    import errno

    from pipeline.release.render import _disk_problem

    msg = _disk_problem(Path("/srv/build/releases"), OSError(errno.ENOSPC, "No space left on device"))
    assert "disk (or its inode table) is full" in msg and "prune --root /srv/build --keep 2" in msg
