"""`malaria-risk refresh` end to end: the rainfall file from a loopback HTTP server, a real
build from the real data, the local S3 server (SeaweedFS), the local API server for the
served check. Plus the exit codes of each failing step, on small fixtures."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from edge.local.app import App
from edge.release import release_ids
from edge.stores.sqlite import SQLiteKeyStore
from pipeline.build import CACHE_DIR
from pipeline.cli import main
from pipeline.publish import s3 as s3_publish
from pipeline.publish.s3 import state
from pipeline.publish.s3.upload import absent_objects
from pipeline.refresh import EXIT_CODES
from pipeline.release.manifest import Manifest
from pipeline.sources.rainfall import WFP_SUBNATIONAL
from tests import s3server
from tests.conftest import LiveServer, seed_fit_cache
from tests.paths import DATA_DIR, linked_data, needs_data
from tests.pipeline.publish.test_job_state import client_of, damage
from tests.rainfall_files import wfp_from_real_dekads, wfp_lines
from tests.rainfall_server import Behaviour, serving
from tests.s3server import S3Server

s3_server = s3server.s3_server
s3_prefix = s3server.s3_prefix



def run(*args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner(env=env).invoke(main, ["refresh", *args])


def linked_data_dir(into: Path) -> Path:
    """The real data directory as links (rainfall comes from the fetch)."""
    return linked_data(into)


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


# --- exit codes of the failing steps, on a small data directory (no build reached) -------------


@pytest.fixture
def small_data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    (d / "rainfall").mkdir(parents=True)
    (d / WFP_SUBNATIONAL).write_text("\n".join(wfp_lines(last="2020-05")) + "\n")
    return d


def test_fetch_failure_exits_3_and_changes_nothing(small_data: Path, tmp_path: Path):
    before = snapshot(small_data)
    with serving(Behaviour(b"x", modes=["404"])) as url:
        out = run("--data-dir", str(small_data), "--out", str(tmp_path / "build"), "--url", url)
    assert out.exit_code == EXIT_CODES["fetch"] == 3
    assert out.output.startswith("refresh FAILED at fetch (exit 3): ") and out.output.count("\n") == 1
    assert snapshot(small_data) == before and not (tmp_path / "build").exists()


def test_bad_rows_in_the_download_exit_4(small_data: Path, tmp_path: Path):
    lines = wfp_lines(last="2020-06")
    lines.insert(10, lines[9])
    with serving(Behaviour(("\n".join(lines) + "\n").encode())) as url:
        out = run("--data-dir", str(small_data), "--out", str(tmp_path / "build"), "--url", url)
    assert out.exit_code == EXIT_CODES["check"] == 4, out.output
    assert "row 11" in out.output and "duplicate" in out.output


def test_dry_run_of_a_fetch_changes_nothing(small_data: Path, tmp_path: Path):
    before = snapshot(small_data)
    with serving(Behaviour(("\n".join(wfp_lines(last="2020-06")) + "\n").encode())) as url:
        out = run("--data-dir", str(small_data), "--out", str(tmp_path / "build"), "--url", url, "--dry-run")
    # the small fixture has no geography: the dry run gets as far as the input check and says why
    assert out.exit_code == EXIT_CODES["check"], out.output
    assert snapshot(small_data) == before and not (tmp_path / "build").exists()


# --- end to end -------------------------------------------------------------------------------


@pytest.mark.heavy  # two builds and two publishes: started first (tests/session.py)
@needs_data("rainfall/nga_state_chirps_dekadal_wfp_1981_2026.csv", "admin")
def test_the_scheduled_refresh_end_to_end(tmp_path: Path, s3_server: S3Server, s3_prefix: str, real_build: Path,
                                          monkeypatch: pytest.MonkeyPatch):
    """The monthly job as deploy/job.sh runs it (`refresh --state`, the rainfall fetched, each job in a
    fresh working folder), over three months of its life: the first release; a day with nothing new
    (restored state, nothing built, nothing written); an object lost and healed; a new month with a
    damaged state entry; and a source that went backwards, refused by fetch, build and publish.
    One flow, so the suite builds and publishes the real data twice rather than five times. The first
    job's folder starts with the session build's fits (tests/conftest.py `seed_fit_cache`): fitting
    from nothing is checked by the session build and the reproducibility test, this test checks
    what the job does around the build (restored fits are run 2's and run 3's)."""
    data = linked_data_dir(tmp_path / "data")
    may = wfp_from_real_dekads(DATA_DIR, tmp_path / "src" / "may.csv", last="2026-05").read_bytes()
    june = wfp_from_real_dekads(DATA_DIR, tmp_path / "src" / "june.csv", last="2026-06").read_bytes()
    env = s3_server.env()
    s3 = ["--bucket", s3_server.bucket, "--prefix", s3_prefix, "--endpoint-url", s3_server.endpoint_url]
    raw, target = s3_server.client(), s3_publish.Target.of(s3_server.bucket, s3_prefix)

    def pointer() -> dict:
        return orjson.loads(raw.get_object(Bucket=s3_server.bucket, Key=target.pointer_key)["Body"].read())

    def saved_state() -> dict:
        return orjson.loads(raw.get_object(Bucket=target.bucket, Key=state.state_key(target))["Body"].read())

    def bucket_keys() -> dict[str, str]:
        pages = raw.get_paginator("list_objects_v2").paginate(Bucket=s3_server.bucket, Prefix=s3_prefix + "/")
        return {o["Key"]: o["ETag"] for p in pages for o in p.get("Contents", [])}

    def job(folder: str, url: str, fits: bool = False) -> tuple[Path, str]:
        """One scheduled run in a fresh working folder (`--out build` under it), with the session
        build's fits in its cache when `fits`."""
        work = tmp_path / folder
        work.mkdir()
        if fits:
            seed_fit_cache(real_build, work / "build" / CACHE_DIR)
        monkeypatch.chdir(work)
        out = run("--data-dir", str(data), "--out", "build", "--url", url, "--state", *s3, env=env)
        assert out.exit_code == 0, out.output
        return work / "build", out.output

    # --- the first month: a dry run changes nothing; the first job builds, publishes and saves its state
    with serving(Behaviour(may)) as url:
        before = snapshot(data)
        dry = run("--data-dir", str(data), "--out", str(tmp_path / "dry"), "--url", url, *s3, "--dry-run", env=env)
        assert dry.exit_code == 0, dry.output
        assert "refresh (dry run) ok: would update" in dry.output and "2026-05" in dry.output
        assert snapshot(data) == before and not (tmp_path / "dry").exists()

        out, said = job("run1", url, fits=True)
        assert said.startswith("refresh ok: updated (release ") and "estimated to 2026-05" in said
        assert "no state restored (none saved yet)" in said and "state saved: 3 fit cache entries uploaded" in said
        assert "document keys saved" in said
        releases = sorted(p.name for p in (out / "releases").iterdir())
        assert len(releases) == 1 and pointer()["release_id"] == releases[0]
        assert pointer()["facts"]["estimated"][-1] == "2026-05"
        published_at = pointer()["published_at"]
        saved = saved_state()
        assert saved["release_id"] == pointer()["release_id"]
        assert {n.rsplit("-", 1)[0] for n in saved["cache"]} >= {"geography", "season-model"}

        # served: the local API over the same build root, checked with a key file
        store = SQLiteKeyStore(tmp_path / "keys.sqlite")
        _, key = store.create("canary", ["risk_scores"], "test")
        (tmp_path / "key").write_text(key + "\n")
        with LiveServer(App(out, store)) as live:
            again = run("--data-dir", str(data), "--out", str(out), "--url", url, *s3,
                        "--base-url", live.url, "--key-file", str(tmp_path / "key"), env=env)
        assert again.exit_code == 0, again.output
        assert "ok: nothing changed" in again.output and "/v1/periods shows 2026-05" in again.output
        assert sorted(p.name for p in (out / "releases").iterdir()) == releases  # still one release
        assert pointer()["published_at"] == published_at  # the pointer was not rewritten

        # the next day, nothing new, in a fresh folder: the state comes back, nothing is built or written
        before_keys = bucket_keys()
        second, said = job("run2", url)
        assert "refresh ok: nothing changed" in said and f"{len(saved['cache'])} fit cache entries restored" in said
        assert "is already live" in said
        assert not (second / "releases").exists(), said  # the producers never ran: no release rendered here
        assert bucket_keys() == before_keys  # not one object written, the pointer's ETag included

    # an object lost from the live release: the verify step fails (7); a republish heals it
    e = Manifest.load(out / "releases" / releases[0]).files["v1/periods.json"]
    lost = target.stored_key(s3_publish.object_name(s3_publish.Expected(
        "v1/periods.json", e["size"], e["sha256"], e["content_type"], e.get("content_encoding"))))
    raw.delete_object(Bucket=s3_server.bucket, Key=lost)  # the stored object that file is served from
    broken = run("--data-dir", str(data), "--out", str(out), "--no-fetch", *s3, env=env)
    assert broken.exit_code == EXIT_CODES["verify"] == 7, broken.output
    assert "missing: v1/periods.json" in broken.output
    healed = CliRunner(env=env).invoke(main, ["release", "publish", *s3, "--root", str(out)])
    # exactly that object written again; the index and the manifest were sound
    assert healed.exit_code == 0 and " 1 uploaded" in healed.output and "0 index files" in healed.output, \
        healed.output
    assert run("--data-dir", str(data), "--out", str(out), "--no-fetch", *s3, env=env).exit_code == 0

    # --- a new month, with a damaged state entry: it is detected, that fit computed again, the rest read back
    geo = next(e for n, e in saved["cache"].items() if n.startswith("geography-"))
    before_run3 = {k: (o["Body"].read(), o["ContentType"]) for k in bucket_keys()
                   if k.startswith(state.state_prefix(target)) or k == target.pointer_key
                   for o in [raw.get_object(Bucket=s3_server.bucket, Key=k)]}
    damage(s3_server, target, geo["sha256"])
    with serving(Behaviour(june)) as url:
        third, said = job("run3", url)
    assert "refresh ok: updated" in said and "estimated to 2026-06" in said, said
    assert "1 damaged entry ignored (geography-" in said, said
    # the files made from unchanged inputs were recorded from the live release, not made: the release is
    # sparse (never a release of the job's root), and its publish confirmed their objects in the bucket
    assert f"document keys of {saved['release_id']} restored" in said and "(sparse)" in said, said
    assert release_ids(third) == [] and not (third / "current").exists()
    now = saved_state()
    assert now["release_id"] != saved["release_id"] and pointer()["release_id"] == now["release_id"]
    assert pointer()["facts"]["estimated"][-1] == "2026-06"
    got = state.restore(client_of(s3_server), target, tmp_path / "check")
    assert got.damaged == [] and any(n.startswith("geography-") for n in got.restored)
    # the season model reads no rainfall: the entry restored was used as it was, not refitted
    season = [n for n in saved["cache"] if n.startswith("season-model-")]
    assert season and all(now["cache"].get(n) == saved["cache"][n] for n in season)
    live_id = pointer()["release_id"]

    # --- the same month again from the state run 3 found, with one object that a file recorded from the live
    # release needs gone from the bucket: the sparse publish refuses before it writes; the run renders
    # every file, publishes, and the bucket has the object again
    sparse = s3_publish.open_sparse_release(third, live_id)
    objects = s3_publish.stored_objects(s3_publish.published_files(sparse.manifest))
    gone = sorted(absent_objects(sparse, objects))[0]
    for key, (body, ctype) in before_run3.items():
        raw.put_object(Bucket=s3_server.bucket, Key=key, Body=body, ContentType=ctype)
    raw.delete_object(Bucket=s3_server.bucket, Key=target.stored_key(gone))
    with serving(Behaviour(june)) as url:
        fifth, said = job("run5", url)
    assert "sparse publish: refused (" in said and "every file rendered and published instead" in said, said
    assert "does not hold" in said and gone in said, said
    whole = Manifest.load(fifth / "current")
    # the sparse release is, file for file, the release made from scratch: the same id, the same entries
    assert whole.release_id == live_id and whole.files == sparse.manifest.files
    published = raw.get_object(Bucket=target.bucket, Key=target.object_key(live_id, "manifest.json"))["Body"].read()
    assert Manifest.from_bytes(published).files == whole.files and pointer()["release_id"] == live_id
    assert target.stored_key(gone) in bucket_keys()
    live_at = pointer()["published_at"]
    third = fifth
    third_releases = sorted(p.name for p in (third / "releases").iterdir())

    # --- a source that went backwards: refused by the fetch, by the build and by the publish
    monkeypatch.chdir(third.parent)
    with serving(Behaviour(may)) as url:
        shrink = run("--data-dir", str(data), "--out", str(third), "--url", url, *s3, env=env)
    assert shrink.exit_code == EXIT_CODES["fetch"] and "older than the installed file" in shrink.output
    (data / WFP_SUBNATIONAL).write_bytes(may)  # as if copied in by hand
    built = CliRunner().invoke(main, ["build", "--data-dir", str(data), "--out", str(third), "--quiet"])
    assert built.exit_code == 1 and "would move backwards" in built.output and "2026-05" in built.output
    no_fetch = run("--data-dir", str(data), "--out", str(third), "--no-fetch", *s3, env=env)
    assert no_fetch.exit_code == EXIT_CODES["check"] and "--allow-shrink" in no_fetch.output
    assert sorted(p.name for p in (third / "releases").iterdir()) == third_releases
    # the job in a fresh folder checks the window against the live release (restored with its document keys)
    (tmp_path / "run4").mkdir()
    monkeypatch.chdir(tmp_path / "run4")
    job4 = run("--data-dir", str(data), "--out", "build", "--no-fetch", "--state", *s3, env=env)
    assert job4.exit_code == EXIT_CODES["check"] and "--allow-shrink" in job4.output, job4.output
    assert f"the live release ({live_id})" in job4.output
    assert pointer()["release_id"] == live_id and pointer()["published_at"] == live_at
    # (`release publish` refusing a shrinking window: tests/pipeline/publish/test_publish_window.py)
