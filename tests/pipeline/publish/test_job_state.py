"""The scheduled job's build state in the bucket (pipeline/publish/s3/state.py), against the local S3
server (SeaweedFS): what is restored is hash-checked, a damaged or foreign entry is never trusted, and
the job's refresh path in fresh folders builds and publishes nothing when the inputs are unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from pipeline import cache
from pipeline.publish import s3
from pipeline.publish.s3 import state
from pipeline.publish.s3.client import botocore_session
from tests import s3server
from tests.s3server import S3Server

s3_server = s3server.s3_server
s3_prefix = s3server.s3_prefix

CHIRPS = Path("rainfall/nga_state_chirps_monthly_1981_2026.csv")


def client_of(server: S3Server) -> Any:
    import boto3

    session = boto3.session.Session(aws_access_key_id=server.access_key, aws_secret_access_key=server.secret_key,
                                    botocore_session=botocore_session())
    return s3.make_client(server.endpoint_url, session=session)


def fit(cache_dir: Path, data: Path, calls: list[str], value: str) -> str:
    """One fit through the real cache, keyed by the content of `data/input.txt`."""
    def compute() -> str:
        calls.append(value)
        return value

    with cache.use(cache_dir):
        return cache.cached("toy-fit", data, ["input.txt"], [], compute)


def raw_state(server: S3Server, target: s3.Target) -> dict:
    body = server.client().get_object(Bucket=target.bucket, Key=state.state_key(target))["Body"].read()
    return orjson.loads(body)


def damage(server: S3Server, target: s3.Target, sha256: str) -> None:
    """Flip the first byte of a stored entry, keeping its size."""
    raw, key = server.client(), state.entry_key(target, sha256)
    body = bytearray(raw.get_object(Bucket=target.bucket, Key=key)["Body"].read())
    body[0] ^= 0xFF
    raw.put_object(Bucket=target.bucket, Key=key, Body=bytes(body))


def test_a_damaged_entry_is_detected_recomputed_and_replaced(s3_server: S3Server, s3_prefix: str, tmp_path: Path):
    client, target = client_of(s3_server), s3.Target.of(s3_server.bucket, s3_prefix)
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("rainfall to June")
    calls: list[str] = []
    assert fit(tmp_path / "run1", data, calls, "fitted") == "fitted" and calls == ["fitted"]
    saved = state.save(client, target, tmp_path / "run1", "r1", "a" * 64, "k1")
    assert (saved.uploaded, saved.kept) == (1, 0)

    # a fresh folder: the entry comes back from the bucket and the fit is not computed again
    got = state.restore(client, target, tmp_path / "run2")
    assert got.state is not None and (got.state.release_id, got.state.build_key) == ("r1", "k1")
    assert len(got.restored) == 1 and got.damaged == []
    assert fit(tmp_path / "run2", data, calls, "again") == "fitted" and calls == ["fitted"]

    # the stored bytes damaged in place (same size): never restored, so the fit is computed again
    (entry,) = raw_state(s3_server, target)["cache"].values()
    damage(s3_server, target, entry["sha256"])
    got = state.restore(client, target, tmp_path / "run3")
    assert got.restored == [] and len(got.damaged) == 1 and "damaged" in got.describe()
    assert list((tmp_path / "run3").glob("*.pickle")) == []
    assert fit(tmp_path / "run3", data, calls, "refitted") == "refitted" and calls == ["fitted", "refitted"]
    # ... and the next save replaces the damaged object although its name and size are unchanged
    again = state.save(client, target, tmp_path / "run3", "r1", "a" * 64, "k1")
    assert again.uploaded == 1
    got = state.restore(client, target, tmp_path / "run4")
    assert got.damaged == [] and len(got.restored) == 1


def test_a_foreign_or_unreadable_state_is_ignored(s3_server: S3Server, s3_prefix: str, tmp_path: Path):
    client, target = client_of(s3_server), s3.Target.of(s3_server.bucket, s3_prefix)
    other = s3.Target.of(s3_server.bucket, s3_prefix + "-other")
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("x")
    fit(tmp_path / "a", data, [], "v")
    state.save(client, other, tmp_path / "a", "r1", "a" * 64, "k1")
    raw = s3_server.client()
    # another deployment's state copied under this prefix: written for another prefix, never trusted
    body = raw.get_object(Bucket=target.bucket, Key=state.state_key(other))["Body"].read()
    raw.put_object(Bucket=target.bucket, Key=state.state_key(target), Body=body)
    got = state.restore(client, target, tmp_path / "b")
    assert got.state is None and "not this prefix" in (got.ignored or "") and not (tmp_path / "b").exists()
    raw.put_object(Bucket=target.bucket, Key=state.state_key(target), Body=b"{not json")
    assert state.restore(client, target, tmp_path / "b").state is None
    # an entry name that could escape the cache directory is dropped from the state
    state.save(client, target, tmp_path / "a", "r1", "a" * 64, "k1")
    doc = raw_state(s3_server, target)
    doc["cache"]["../../evil-" + "0" * 32 + ".pickle"] = next(iter(doc["cache"].values()))
    raw.put_object(Bucket=target.bucket, Key=state.state_key(target),
                   Body=orjson.dumps({**doc, "prefix": target.prefix}))
    got = state.restore(client, target, tmp_path / "c")
    assert got.state is not None and all("/" not in n for n in got.state.cache)
    assert [p.name for p in (tmp_path / "c").iterdir()] == got.restored and len(got.restored) == 1


def test_the_document_keys_come_back_only_whole_and_for_their_release(s3_server: S3Server, s3_prefix: str,
                                                                    tmp_path: Path):
    client, target = client_of(s3_server), s3.Target.of(s3_server.bucket, s3_prefix)
    keys_file = tmp_path / "document-keys.json"
    doc = {"format": "malaria-risk document keys 1", "release_id": "r1", "keys": {"v1/a.csv": "k" * 64}}
    keys_file.write_bytes(orjson.dumps(doc))
    saved = state.save(client, target, tmp_path / "no-cache", "r1", "a" * 64, "k1", keys_file)
    assert saved.keys and saved.uploaded == 0  # the keys are not a fit cache entry
    got = state.restore(client, target, tmp_path / "c")
    assert got.state is not None and got.state.keys is not None
    assert state.restore_keys(client, target, got.state) == (doc, "document keys of r1 restored")
    # keys of another release than the one published are not saved
    assert not state.save(client, target, tmp_path / "no-cache", "r2", "b" * 64, "k2", keys_file).keys
    assert state.restore_keys(client, target, state.restore(client, target, tmp_path / "d").state)[0] is None
    # damaged in place (same size): not restored, so the new month renders every file
    state.save(client, target, tmp_path / "no-cache", "r1", "a" * 64, "k1", keys_file)
    entry = raw_state(s3_server, target)["document_keys"]
    damage(s3_server, target, entry["sha256"])
    restored = state.restore(client, target, tmp_path / "e").state
    assert restored is not None
    assert state.restore_keys(client, target, restored) == (None, "the saved document keys are missing or damaged")
    # a state naming another release for the same bytes: not theirs
    other = state.JobState("r9", "a" * 64, "k1", {}, restored.keys)
    state.save(client, target, tmp_path / "no-cache", "r1", "a" * 64, "k1", keys_file)  # heals the entry
    keys, why = state.restore_keys(client, target, other)
    assert keys is None and "do not describe r9" in why


# The job's refresh path end to end (three runs in fresh folders against SeaweedFS: the first release,
# a day with unchanged inputs that renders and writes nothing, a new month with a damaged entry) is
# part of the one scheduled-refresh flow in tests/test_refresh.py::test_the_scheduled_refresh_end_to_end.
