"""Local verify and prune, as library functions and as `malaria-risk verify/prune --root`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.release.local import LocalReleaseError, prune_local, verify_local
from pipeline.release.render import render_release
from tests.conftest import synthetic_produced

TIMES = ["2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z", "2026-11-22T12:00:00Z", "2026-11-22T13:00:00Z"]


def build(root: Path, n: int) -> list[str]:
    return [render_release(root, synthetic_produced(), t).release_id for t in TIMES[:n]]


def test_verify_finds_a_flipped_byte_and_names_the_file(tmp_path: Path):
    ids = build(tmp_path, 2)
    [ok] = verify_local(tmp_path)
    assert ok.ok and ok.current and ok.release_id == ids[-1] and ok.files > 10
    target = tmp_path / "releases" / ids[-1] / "v1/periods.json"
    data = bytearray(target.read_bytes())
    data[3] ^= 0x01
    target.write_bytes(bytes(data))
    [bad] = verify_local(tmp_path)
    assert bad.problems == ["checksum differs: v1/periods.json"]
    # a write in place (objects are read-only: it takes root or a chmod) changes the one object
    # every release with those bytes links: verify names it in each
    assert [r.problems for r in verify_local(tmp_path, every=True)] == [["checksum differs: v1/periods.json"]] * 2

    result = CliRunner().invoke(main, ["verify", "--root", str(tmp_path)])
    assert result.exit_code == 1
    assert "checksum differs: v1/periods.json" in result.output
    assert "(current)" in result.output
    # the next build writes a fresh object for those bytes: the new release verifies
    healed = render_release(tmp_path, synthetic_produced(), TIMES[2]).release_id
    assert CliRunner().invoke(main, ["verify", "--root", str(tmp_path), "--release", healed]).exit_code == 0


def test_verify_reports_a_truncated_manifest_and_a_dangling_current(tmp_path: Path):
    ids = build(tmp_path, 1)
    manifest = tmp_path / "releases" / ids[0] / "manifest.json"
    manifest.write_bytes(manifest.read_bytes()[:100])
    [r] = verify_local(tmp_path)
    assert not r.ok and "unreadable manifest.json" in r.problems[0]
    os.replace(tmp_path / "releases" / ids[0], tmp_path / "releases" / "moved")
    [r] = verify_local(tmp_path)
    assert r.problems == [f"missing: the release directory releases/{ids[0]}"]
    with pytest.raises(LocalReleaseError, match="current does not exist"):
        verify_local(tmp_path / "nowhere")


def test_prune_keeps_the_newest_and_always_current(tmp_path: Path):
    ids = build(tmp_path, 4)
    # current rolled back to the oldest: it must survive any --keep
    os.replace(tmp_path / "current", tmp_path / "current.bak")
    os.symlink(f"releases/{ids[0]}", tmp_path / "current")
    dry = prune_local(tmp_path, 2, dry_run=True)
    assert dry.removed == [ids[1]] and len(os.listdir(tmp_path / "releases")) == 4
    result = CliRunner().invoke(main, ["prune", "--root", str(tmp_path), "--keep", "2"])
    assert result.exit_code == 0, result.output
    assert sorted(os.listdir(tmp_path / "releases")) == sorted([ids[0], ids[2], ids[3]])
    assert all(r.ok for r in verify_local(tmp_path, every=True))
    assert CliRunner().invoke(main, ["prune", "--root", str(tmp_path), "--keep", "0"]).exit_code == 2
    with pytest.raises(LocalReleaseError):
        prune_local(tmp_path / "nowhere", 1)


def test_prune_removes_killed_builds_leftovers(tmp_path: Path):
    build(tmp_path, 1)
    dead = tmp_path / "releases" / ".tmp-20261122T110000Z-deadbeef-999999999"
    (dead / "v1").mkdir(parents=True)
    (dead / "v1" / "x.json").write_bytes(b"{}")
    result = prune_local(tmp_path, 1)
    assert result.cleaned == [dead.name] and not dead.exists()


def test_published_verify_and_prune_keep_their_options(tmp_path: Path):
    """`verify`/`prune` without --root are the bucket commands, unchanged."""
    result = CliRunner().invoke(main, ["verify"], env={"MALARIA_BUCKET": ""})
    assert result.exit_code != 0 and "--bucket" in result.output


def _listed(root: Path) -> dict:
    import orjson

    return orjson.loads((root / "releases.json").read_bytes())


def test_release_list_beside_current_follows_builds_and_prunes(tmp_path: Path):
    ids = build(tmp_path, 2)
    doc = _listed(tmp_path)
    assert doc["current"] == ids[1] and [r["release_id"] for r in doc["releases"]] == ids[::-1]
    first = {r["release_id"]: r for r in doc["releases"]}
    assert first[ids[0]]["changes"] == ["First release in this list."]
    assert first[ids[1]]["changes"][0].startswith("Same model and months")
    assert first[ids[1]]["data_loaded_at"] == TIMES[1] and first[ids[1]]["model_version"] == "test-1"
    assert first[ids[1]]["datasets"] == sorted(p.dataset for p in synthetic_produced())

    # a root whose list was lost (or that predates lists): the next build describes every release again
    (tmp_path / "releases.json").unlink()
    ids.append(render_release(tmp_path, synthetic_produced(), TIMES[2]).release_id)
    doc = _listed(tmp_path)
    assert [r["release_id"] for r in doc["releases"]] == ids[::-1]
    assert [r["current"] for r in doc["releases"]] == [True, False, False]
    again = {r["release_id"]: r for r in doc["releases"]}
    assert again[ids[0]]["changes"] == first[ids[0]]["changes"]

    prune_local(tmp_path, 1, dry_run=True)
    assert len(_listed(tmp_path)["releases"]) == 3
    prune_local(tmp_path, 1)
    doc = _listed(tmp_path)
    assert [r["release_id"] for r in doc["releases"]] == [ids[2]] and doc["releases"][0] == {**again[ids[2]]}


def test_prune_and_verify_leave_what_is_not_a_release_alone(tmp_path: Path):
    """Operators keep notes and backups beside releases: neither is counted, verified or removed,
    and a link among the releases is never followed, whatever it points at."""
    ids = build(tmp_path, 4)
    releases = tmp_path / "releases"
    (releases / "notes.txt").write_text("why release 2 was rolled back")
    backup = releases / "00-backup"
    (backup / "v1").mkdir(parents=True)
    (backup / "v1" / "periods.json").write_text("{}")
    outside = tmp_path / "elsewhere"
    (outside / "keep-me").mkdir(parents=True)
    (outside / "keep-me" / "data.txt").write_text("precious")
    os.symlink(outside, releases / "20991231T000000Z-ffffffff")  # a link named like the newest release
    assert [r.release_id for r in verify_local(tmp_path, every=True)] == ids[::-1]
    assert all(r.ok for r in verify_local(tmp_path, every=True))
    pruned = prune_local(tmp_path, 1)
    assert pruned.kept == [ids[-1]] and pruned.removed == ids[-2::-1]
    assert (releases / "notes.txt").read_text() == "why release 2 was rolled back"
    assert (backup / "v1" / "periods.json").exists() and (outside / "keep-me" / "data.txt").exists()
    assert (releases / "20991231T000000Z-ffffffff").is_symlink()
    assert prune_local(tmp_path, 1).removed == []  # a second run deletes nothing more
    assert (backup / "v1" / "periods.json").exists()


def test_verify_refuses_a_link_inside_a_release(tmp_path: Path):
    """A file replaced by a link to identical bytes elsewhere still fails: the release no longer
    holds its own bytes, and the link's target can change under it."""
    [rid] = build(tmp_path, 1)
    target = tmp_path / "releases" / rid / "v1/periods.json"
    copy = tmp_path / "outside.json"
    copy.write_bytes(target.read_bytes())
    target.unlink()
    os.symlink(copy, target)
    [r] = verify_local(tmp_path)
    assert r.problems == ["a link, not a file: v1/periods.json"]
