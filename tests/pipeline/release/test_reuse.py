"""Files keyed by what they are made from (pipeline.release.reuse): linked from the previous release when
their inputs and code did not change, and always the bytes a build from scratch makes."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from pipeline.build import CACHE_DIR
from pipeline.release import reuse, tabular
from pipeline.release.manifest import Manifest
from pipeline.release.render import render_release
from pipeline.release.store import Store
from tests.conftest import DATA_DIR, seed_fit_cache, synthetic_produced
from tests.paths import linked_data

T1, T2 = "2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z"
CHIRPS = Path("rainfall/nga_state_chirps_monthly_1981_2026.csv")


def _month(i: int, keys: reuse.Reuse | None = None) -> list:
    """The synthetic release with one changed document (the period index) and one changed CSV. With
    `keys`, the state reports come as a producer that renders its own documents hands them over
    (`tabular.rendered`, the CSVs it can link already linked)."""
    produced = synthetic_produced()
    produced[2].documents["/v1/periods"][()] = {"month": i}
    states = produced[2].documents["/v1/risk/states"]
    first = sorted(states)[0]
    states[first] = {"period": first[0], "kind": "estimated", "month": i,
                     "states": [{"state_code": "KN", "score": 0.1 * i}]}
    if keys is not None:
        produced[2].documents["/v1/risk/states"] = tabular.rendered(states, reuse=keys, route="/v1/risk/states")
    return produced


def tree(root: Path) -> dict[str, bytes]:
    release = (root / "current").resolve()
    return {p.relative_to(release).as_posix(): p.read_bytes() for p in sorted(release.rglob("*"))
            if p.is_file() and p.name != "manifest.json"}


def csv_rendered(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many documents each `to_csv_many` call tabulated (the renderer's CSV work)."""
    calls: list[int] = []
    real = tabular.to_csv_many

    def counting(docs):  # type: ignore[no-untyped-def]
        calls.append(len(docs))
        return real(docs)

    monkeypatch.setattr(tabular, "to_csv_many", counting)
    return calls


def test_a_csv_whose_document_did_not_change_is_linked_and_the_release_is_the_one_made_from_scratch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    render_release(root, _month(1), T1, reuse=reuse.Reuse("code"))
    keys = orjson.loads((root / reuse.KEYS_FILE).read_bytes())
    csvs = [k for k in Manifest.load(root / "current").files if k.startswith("v1/") and k.endswith(".csv")]
    assert csvs and set(csvs) <= set(keys["keys"])  # every CSV's key is recorded for the next build
    calls = csv_rendered(monkeypatch)
    again = render_release(root, _month(2), T2, reuse=reuse.load(root, "code"))
    # only the changed document's CSV is tabulated; every other CSV is linked from the previous release
    assert sum(calls) == 1 and again.reused == len(csvs) - 1
    fresh = render_release(scratch, _month(2), T2)
    assert again.release_id == fresh.release_id and tree(root) == tree(scratch)
    # the linked files are the previous release's objects (the same inodes), gzip twins included
    old = (root / "releases").iterdir()
    previous = next(p for p in old if p.name != again.release_id)
    same = [k for k in csvs if k != "v1/risk/states/" + sorted(_month(2)[2].documents["/v1/risk/states"])[0][0]
            + ".csv"]
    for k in same[:5]:
        for name in (k, k + ".gz"):
            assert os.stat(root / "current" / name).st_ino == os.stat(previous / name).st_ino


def test_keys_made_by_other_code_or_for_another_release_link_nothing(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "root"
    render_release(root, _month(1), T1, reuse=reuse.Reuse("code"))
    calls = csv_rendered(monkeypatch)
    other_code = render_release(root, _month(2), T2, reuse=reuse.load(root, "other code"))
    assert other_code.reused == 0 and sum(calls) > 1
    # keys describing a release `current` no longer names are not read (its objects may be gone)
    render_release(root, _month(3), T1)  # a build without keys: the keys file still names the second release
    assert reuse.load(root, "other code").files == {}


def test_a_damaged_object_the_keys_name_is_made_again_and_the_release_is_the_one_made_from_scratch(
        tmp_path: Path):
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    render_release(root, _month(1), T1, reuse=reuse.Reuse("code"))
    files = Manifest.load(root / "current").files
    # one CSV the renderer would link, one a producer has already linked (`tabular.rendered`)
    damaged = [files["v1/context/states.csv"]["sha256"],
               files["v1/risk/states/" + sorted(_month(1)[2].documents["/v1/risk/states"])[-1][0] + ".csv"]["sha256"]]
    for sha in damaged:
        obj = Store(root).path(sha)
        os.chmod(obj, 0o644)
        obj.write_bytes(b"written in place\n")
    keys = reuse.load(root, "code")
    produced = _month(2, keys)
    assert keys.linked_count > 0  # the producer linked CSVs, one of them damaged
    again = render_release(root, produced, T2, reuse=keys)
    # every file made again from its document (nothing linked by key), the damaged objects healed
    assert again.reused == 0 and all(Store(root).intact(sha) for sha in damaged)
    fresh = render_release(scratch, _month(2), T2)
    assert again.release_id == fresh.release_id and tree(root) == tree(scratch)
    # the next build trusts the keys again
    assert render_release(root, _month(3, reuse.load(root, "code")), T1, reuse=reuse.load(root, "code")).reused > 0


def load_without_last_month(into: Path) -> None:
    """The real data as links, the monthly rainfall without its last month (the month before)."""
    linked_data(into, CHIRPS)
    lines = (DATA_DIR / CHIRPS).read_text().splitlines(keepends=True)
    col = lines[0].strip().split(",").index("month")
    last = max(r.split(",")[col] for r in lines[1:])
    (into / CHIRPS).parent.mkdir(parents=True, exist_ok=True)
    (into / CHIRPS).write_text(lines[0] + "".join(r for r in lines[1:] if r.split(",")[col] != last))


@pytest.mark.slow
@pytest.mark.skipif(not (DATA_DIR / CHIRPS).is_file(), reason="needs the real data directory")
def test_a_new_month_built_on_the_previous_release_is_the_release_built_from_scratch(real_build: Path,
                                                                                    tmp_path: Path):
    """Month N built, then N+1 on it (files linked by their keys): every file of N+1 has the bytes of the
    session's build of N+1 from scratch (tests/conftest.py `real_build`)."""
    from pipeline.build import build

    data = tmp_path / "data"
    load_without_last_month(data)
    root = tmp_path / "build"
    seed_fit_cache(real_build, root / CACHE_DIR)
    build(data, root)
    assert (root / reuse.KEYS_FILE).is_file()
    new = build(DATA_DIR, root)
    assert new.stats.reused > 3000  # the unchanged months' CSVs (and more) were linked, not rendered
    assert new.stats.release_id == Manifest.load(real_build / "current").release_id
    assert tree(root) == tree(real_build)
