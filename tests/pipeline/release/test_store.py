"""Reproducible releases, the content store under them, and the retention rule."""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import threading
from pathlib import Path

import orjson
import pytest

from edge.release import serving
from pipeline.release.catalogue import kept_by_rule, pin_local, read_local, retain
from pipeline.release.local import verify_local, verify_release
from pipeline.release.manifest import MANIFEST_NAME, Manifest
from pipeline.release.render import render_release
from pipeline.release.store import Store
from tests.conftest import DATA_DIR, synthetic_produced
from tests.pipeline.release.killed import killed

T1, T2, T3 = "2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z", "2026-11-22T12:00:00Z"


def tree(release_dir: Path) -> dict[str, bytes]:
    return {p.relative_to(release_dir).as_posix(): p.read_bytes()
            for p in sorted(release_dir.rglob("*")) if p.is_file()}


def without_build_time(manifest: bytes) -> dict:
    doc = orjson.loads(manifest)
    assert doc.pop("built_at")  # the one field that may differ
    return doc


def assert_same_release(a: Path, b: Path) -> None:
    ta, tb = tree(a), tree(b)
    assert ta.keys() == tb.keys()
    differ = [k for k in ta if k != MANIFEST_NAME and ta[k] != tb[k]]
    assert differ == []
    assert without_build_time(ta[MANIFEST_NAME]) == without_build_time(tb[MANIFEST_NAME])


def test_the_same_documents_make_the_same_bytes_in_two_roots(tmp_path: Path):
    a = render_release(tmp_path / "a", synthetic_produced(), T1, built_at="2026-12-01T00:00:00Z")
    b = render_release(tmp_path / "b", synthetic_produced(), T1, built_at="2026-12-02T09:30:00Z")
    assert a.release_id == b.release_id
    assert_same_release(tmp_path / "a" / "releases" / a.release_id, tmp_path / "b" / "releases" / b.release_id)
    # the build time is in the manifest and the list of kept releases, nowhere else
    assert Manifest.load(tmp_path / "b" / "releases" / b.release_id).built_at == "2026-12-02T09:30:00Z"
    assert read_local(tmp_path / "b")["releases"][0]["published_at"] == "2026-12-02T09:30:00Z"


def test_rendering_the_same_release_again_keeps_it_and_writes_nothing(tmp_path: Path):
    first = render_release(tmp_path, synthetic_produced(), T1)
    again = render_release(tmp_path, synthetic_produced(), T1)
    assert again.release_id == first.release_id and again.written == 0
    assert [r.ok for r in verify_local(tmp_path, every=True)] == [True]


@pytest.mark.slow
@pytest.mark.skipif(not (DATA_DIR / "admin").is_dir(), reason="needs the real data directory")
def test_two_builds_of_the_real_data_are_byte_identical(real_build: Path, tmp_path: Path):
    """A forced rebuild of unchanged inputs, into a second root: no file differs. The first build
    is the session's (tests/conftest.py `real_build`, read only)."""
    from pipeline.build import build
    from pipeline.buildkey import current_manifest

    a = current_manifest(real_build)
    assert a is not None
    a_id = a.release_id
    b = build(DATA_DIR, tmp_path / "b", force=True)
    assert a_id == b.stats.release_id
    assert_same_release(real_build / "current", tmp_path / "b" / "current")
    forced = build(DATA_DIR, tmp_path / "b", force=True)  # the same root: the release is kept, nothing written
    assert forced.stats.release_id == a_id and forced.stats.written == 0
    # ... found by its build key before anything is computed: no producer ran, no phase after the key
    assert forced.unchanged and forced.timings == {} and set(forced.phases) == {"key"}


def test_every_object_is_named_by_its_bytes_and_written_once(tmp_path: Path):
    render_release(tmp_path, synthetic_produced(), T1)
    store = Store(tmp_path)
    names = [e.name for e in store.objects()]
    assert names and all(hashlib.sha256(Path(store.path(n)).read_bytes()).hexdigest() == n for n in names)
    before = {n: os.stat(store.path(n)).st_ino for n in names}
    render_release(tmp_path, synthetic_produced(), T2)
    assert all(os.stat(store.path(n)).st_ino == ino for n, ino in before.items())  # never rewritten


@pytest.mark.parametrize("keep,pinned,served", list(itertools.product([1, 2, 3], [(), (0,), (1, 3)], [0, 2, 4])))
def test_the_retention_rule_never_drops_the_served_or_a_pinned_release(keep: int, pinned: tuple, served: int):
    ordered = [f"r{i}" for i in range(5, 0, -1)]  # newest first
    pins = {ordered[i] for i in pinned}
    kept = kept_by_rule(ordered, keep, pins, ordered[served])
    assert ordered[served] in kept and pins <= set(kept)
    assert set(ordered[:keep]) <= set(kept)
    assert set(kept) == set(ordered[:keep]) | pins | {ordered[served]}


def test_retain_keeps_served_and_pinned_and_frees_what_only_the_removed_linked(tmp_path: Path):
    ids = [render_release(tmp_path, _month(i), t).release_id for i, t in enumerate([T1, T2, T3])]
    ids.append(render_release(tmp_path, _month(3), "2026-11-22T13:00:00Z").release_id)
    pin_local(tmp_path, ids[0])
    os.replace(tmp_path / "current", tmp_path / "current.bak")  # rolled back to the second
    os.symlink(f"releases/{ids[1]}", tmp_path / "current")
    objects = sum(1 for _ in Store(tmp_path).objects())
    got = retain(tmp_path, keep=1)
    assert sorted(got.kept) == sorted([ids[3], ids[1], ids[0]]) and got.removed == [ids[2]]
    assert sorted(p.name for p in (tmp_path / "releases").iterdir()) == sorted(got.kept)
    assert got.collected.objects > 0 and sum(1 for _ in Store(tmp_path).objects()) == objects - got.collected.objects
    assert all(r.ok for r in verify_local(tmp_path, every=True))
    listed = read_local(tmp_path)
    assert {r["release_id"]: r["pinned"] for r in listed["releases"]} == {ids[3]: False, ids[1]: False, ids[0]: True}
    # every object left is linked by a kept release
    assert all(os.stat(e.path).st_nlink > 1 for e in Store(tmp_path).objects())


def _month(i: int) -> list:
    produced = synthetic_produced()
    produced[2].documents["/v1/periods"][()] = {"month": i}
    return produced


def test_a_build_killed_while_writing_objects_leaves_a_sound_store_the_next_run_completes(tmp_path: Path):
    render_release(tmp_path, synthetic_produced(), T1)
    assert killed(
        "produced = synthetic_produced()\n"
        "produced[2].documents['/v1/periods'][()] = {'month': 7}\n"
        "count = [0]\n"
        "real = store.Store.put\n"
        "def put(self, data, sha256=None, *, check=True):\n"
        "    got = real(self, data, sha256, check=check)\n"
        "    count[0] += got[1]\n"
        "    if count[0] == 3:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return got\n"
        "store.Store.put = put\n"
        f"render_release(Path({str(tmp_path)!r}), produced, {T2!r})\n"
    )
    store = Store(tmp_path)
    # whatever the kill interrupted: every object under a real name holds exactly its bytes
    real = [e for e in store.objects() if not e.name.startswith(".")]
    assert all(hashlib.sha256(Path(e.path).read_bytes()).hexdigest() == e.name for e in real)
    done = render_release(tmp_path, _month(7), T2)
    assert done.written < 2 + 7  # the objects the killed run wrote are linked, not written again
    assert [r.ok for r in verify_local(tmp_path, every=True)] == [True, True]
    assert not [p for p in (tmp_path / "releases").iterdir() if p.name.startswith(".")]


# --- attacks on the store: contents, not dates, decide (issue W-5, W-6) ----------------------


def _damage_in_place(obj: Path, how: str, scratch: Path) -> bytes:
    """Write other bytes (same size) into the object's own inode and set its modification time back,
    as `touch -d` or `cp -p` do; returns the bytes it held."""
    good = obj.read_bytes()
    bad = bytes([good[0] ^ 0x20]) + good[1:]
    stamp = os.stat(obj).st_mtime_ns
    os.chmod(obj, 0o644)
    if how == "touch -d":
        with open(obj, "r+b") as f:
            f.write(bad)
        subprocess.run(["touch", "-d", f"@{stamp // 10**9}", str(obj)], check=True)
    else:  # cp -p: writes into the existing file, then copies the source's mode and times
        src = scratch / "damaged"
        src.write_bytes(bad)
        os.utime(src, ns=(stamp, stamp))
        subprocess.run(["cp", "-p", str(src), str(obj)], check=True)
    os.chmod(obj, 0o444)
    assert os.stat(obj).st_mtime_ns == stamp and os.stat(obj).st_size == len(good) and obj.read_bytes() == bad
    return good


def test_a_put_that_finds_the_bytes_stored_since_its_check_keeps_that_inode(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch):
    """Two threads storing the same bytes both miss the check; the second must not rename its copy
    over the first, whose inode the first thread may be linking (its link would fail with ENOENT:
    seen as an intermittent 'cannot write the release' when a release holds two equal files)."""
    store = Store(tmp_path)
    data = b'{"same": "bytes"}'
    digest, written = store.put(data)
    assert written
    before = os.stat(store.path(digest)).st_ino
    real_holds = store.holds
    missed = [True]  # this call's check ran before the other writer's rename

    def holds(sha256: str, data: bytes) -> bool:
        return False if missed and missed.pop() else real_holds(sha256, data)

    monkeypatch.setattr(store, "holds", holds)
    assert store.put(data) == (digest, False)
    assert os.stat(store.path(digest)).st_ino == before
    store.link(digest, tmp_path / "linked")
    assert os.stat(tmp_path / "linked").st_ino == before
    # no partial copy is left beside it
    assert [p.name for p in store.path(digest).parent.iterdir()] == [digest]


def test_threads_storing_and_linking_the_same_bytes_at_once_all_link(tmp_path: Path):
    """The race itself, with real threads: before the fix about one link in nine failed here."""
    failed: list[BaseException] = []
    for n in range(100):
        store, out = Store(tmp_path / f"r{n}"), tmp_path / f"r{n}" / "out"
        out.mkdir(parents=True)
        data, start = os.urandom(2000), threading.Barrier(4)

        def writer(i: int, store: Store = store, out: Path = out, data: bytes = data,
                   start: threading.Barrier = start) -> None:
            start.wait()
            try:
                store.link(store.put(data)[0], out / str(i))
            except OSError as e:
                failed.append(e)

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len({os.stat(p).st_ino for p in out.iterdir()}) == 1
    assert failed == []


@pytest.mark.parametrize("how", ["touch -d", "cp -p"])
def test_an_object_written_in_place_with_its_time_set_back_is_healed_before_the_next_build_links_it(
        tmp_path: Path, how: str):
    first = render_release(tmp_path / "b", synthetic_produced(), T1).release_id
    root = tmp_path / "b"
    key = "v1/context/states.json"
    digest = hashlib.sha256((root / "releases" / first / key).read_bytes()).hexdigest()
    store = Store(root)
    good = _damage_in_place(store.path(digest), how, tmp_path)
    second = render_release(root, _month(5), T2).release_id
    assert second != first
    # the new release links an object checked by its bytes: it verifies, and the object is whole again
    assert verify_release(root, second).problems == []
    assert (root / "releases" / second / key).read_bytes() == good and store.intact(digest)
    # the old release keeps the damaged inode, and `verify` names the file there
    assert verify_release(root, first).problems == [f"checksum differs: {key}"]


def test_a_rebuild_of_the_same_inputs_repairs_a_file_whose_object_was_damaged_in_place(tmp_path: Path):
    first = render_release(tmp_path, synthetic_produced(), T1).release_id
    key = "v1/context/states.json"
    digest = hashlib.sha256((tmp_path / "releases" / first / key).read_bytes()).hexdigest()
    _damage_in_place(Store(tmp_path).path(digest), "touch -d", tmp_path / "scratch")
    assert verify_release(tmp_path, first).problems == [f"checksum differs: {key}"]
    again = render_release(tmp_path, synthetic_produced(), T1)
    assert again.release_id == first
    assert verify_release(tmp_path, first).problems == []


def test_an_object_whose_gzip_copy_was_damaged_in_place_is_recompressed_not_reused(tmp_path: Path):
    """A build links the previous release's gzip copy of unchanged bytes without its bytes at hand:
    that object is checked by hashing it."""
    first = render_release(tmp_path, synthetic_produced(), T1).release_id
    key = "v1/context/states.json.gz"
    digest = hashlib.sha256((tmp_path / "releases" / first / key).read_bytes()).hexdigest()
    _damage_in_place(Store(tmp_path).path(digest), "cp -p", tmp_path)
    second = render_release(tmp_path, _month(6), T2).release_id
    assert verify_release(tmp_path, second).problems == []


def test_prune_keeps_the_release_a_server_falls_back_to_while_current_is_broken(tmp_path: Path):
    ids = [render_release(tmp_path, _month(i), t).release_id for i, t in enumerate([T1, T2, T3])]
    assert os.readlink(tmp_path / "current").endswith(ids[2])
    (tmp_path / "releases" / ids[2] / "v1" / "periods.json").unlink()  # current broken: a file lost
    # a server now serves the newest other release that verifies (ids[1]): prune keeps it
    got = retain(tmp_path, keep=1)
    assert sorted(got.kept) == sorted([ids[2], ids[1]]) and got.removed == [ids[0]] and got.fallback == ids[1]
    assert verify_release(tmp_path, ids[1]).ok
    assert serving(tmp_path) == [ids[2], ids[1]]
    # once current is whole again, the same rule keeps only it
    render_release(tmp_path, _month(2), T3)  # the same inputs: the lost file is linked back
    assert serving(tmp_path) == [ids[2]]
    assert retain(tmp_path, keep=1).removed == [ids[1]]
