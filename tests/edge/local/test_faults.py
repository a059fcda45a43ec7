"""Faults on disk, as a client and an operator of the default front see them.

A byte flipped in a served file, a truncated manifest, a dangling `current`, a killed
build: the server never sends bytes under an ETag they do not match, falls back to the
newest release that verifies, answers problem+json that names no server path, and
`malaria-risk serve` refuses to start with a clear message when nothing verifies.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from edge.local.app import App
from edge.routes import DOWNLOAD_FILE
from pipeline.release.render import render_release
from tests.conftest import ESTIMATED, LiveServer, free_port, synthetic_produced

T2 = "2026-11-22T11:00:00Z"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Accept-Encoding": "identity"}


def no_server_path(body: bytes, root: Path) -> None:
    text = body.decode()
    assert str(root) not in text and "/tmp" not in text and "releases/" not in text


def current_dir(root: Path) -> Path:
    return (root / "current").resolve()


def two_releases(root: Path) -> tuple[str, str]:
    """`release_root` holds one release; add a second, newer one (different bytes)."""
    first = os.readlink(root / "current").split("/")[-1]
    produced = synthetic_produced()
    produced[2].documents["/v1/periods"][()] = {"last_estimated": ESTIMATED[-1], "changed": True}
    second = render_release(root, produced, T2).release_id
    return first, second


def test_a_flipped_byte_is_never_served_under_the_etag(release_root: Path, store, all_scopes_key: str,
                                                       caplog: pytest.LogCaptureFixture):
    path = current_dir(release_root) / "v1/context/states.json"
    data = bytearray(path.read_bytes())
    data[5] ^= 0x20
    path.write_bytes(bytes(data))
    with LiveServer(App(release_root, store)) as live, httpx.Client(base_url=live.url) as c, \
            caplog.at_level(logging.ERROR, "malaria_risk.server"):
        r = c.get("/v1/context/states", headers=auth(all_scopes_key))
        assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"
        assert r.json()["code"] == "RELEASE_INCOMPLETE" and "damaged" in r.json()["detail"]
        no_server_path(r.content, release_root)
        assert "etag" not in r.headers
        # the log names the file for the operator; other files are served as before
        assert any("v1/context/states.json" in m and "sha256" in m for m in caplog.messages)
        ok = c.get("/v1/context/lgas?state=KN", headers=auth(all_scopes_key))
        assert ok.status_code == 200
        # the gzip copy is intact and is still served to clients that accept it
        gz = c.get("/v1/context/states", headers={**auth(all_scopes_key), "Accept-Encoding": "gzip"})
        assert gz.status_code == 200 and gz.json()["states"][0]["state_code"] == "KN"


def test_a_truncated_manifest_falls_back_to_the_last_release_that_verifies(release_root: Path, store,
                                                                           all_scopes_key: str):
    first, second = two_releases(release_root)
    manifest = release_root / "releases" / second / "manifest.json"
    manifest.write_bytes(manifest.read_bytes()[:200])
    with LiveServer(App(release_root, store)) as live, httpx.Client(base_url=live.url) as c:
        r = c.get("/v1/periods", headers=auth(all_scopes_key))
        assert r.status_code == 200 and r.headers["x-release-id"] == first
        assert "changed" not in r.json()
        assert c.get("/docs/").status_code == 200


def test_a_dangling_current_falls_back_and_recovers_when_fixed(release_root: Path, store, all_scopes_key: str):
    first, second = two_releases(release_root)
    os.rename(release_root / "releases" / second, release_root / "moved-away")
    app = App(release_root, store)
    app.releases.check_every = 0
    with LiveServer(app) as live, httpx.Client(base_url=live.url) as c:
        assert c.get("/v1/periods", headers=auth(all_scopes_key)).headers["x-release-id"] == first
        os.rename(release_root / "moved-away", release_root / "releases" / second)
        assert c.get("/v1/periods", headers=auth(all_scopes_key)).headers["x-release-id"] == second


def test_with_nothing_that_verifies_every_answer_is_a_problem_without_paths(release_root: Path, store,
                                                                            all_scopes_key: str):
    only = current_dir(release_root)
    (only / "manifest.json").write_bytes(b'{"format": 1, "release_id": "x", "fi')
    with LiveServer(App(release_root, store)) as live, httpx.Client(base_url=live.url) as c:
        for url, headers in [("/v1/periods", auth(all_scopes_key)), ("/docs/", {}), ("/v1/periods", {})]:
            r = c.get(url, headers=headers)
            assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json", url
            assert r.json()["code"] == "RELEASE_INCOMPLETE"
            no_server_path(r.content, release_root)


def serve(root: Path, tmp_path: Path) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).with_name("malaria-risk")
    return subprocess.Popen([str(exe), "serve", "--root", str(root), "--port", str(free_port()),
                             "--keys", str(tmp_path / "var" / "keys.sqlite")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_serve_refuses_to_start_when_no_release_verifies(release_root: Path, tmp_path: Path):
    os.remove(release_root / "current")
    os.symlink("releases/20990101T000000Z-deadbeef", release_root / "current")  # dangling
    only = next(p for p in (release_root / "releases").iterdir())
    (only / "v1" / "periods.json").write_bytes(b"{}")  # the only other release is damaged
    proc = serve(release_root, tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    message = err.decode()
    assert "not serving" in message and "is broken" in message and "no other release" in message
    assert "Traceback" not in message


def test_serve_starts_on_the_fallback_and_says_so(release_root: Path, tmp_path: Path):
    first, second = two_releases(release_root)
    (release_root / "releases" / second / "manifest.json").write_bytes(b"")
    proc = serve(release_root, tmp_path)
    try:
        line = b""
        while not line.startswith(b"warning:"):
            line = proc.stderr.readline()
            assert line, "serve exited"
        assert b"is broken" in line and f"serving release {first}".encode() in line
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_killed_build_changes_nothing_served(release_root: Path, store, all_scopes_key: str):
    """What a killed build leaves (a half-written temporary directory) is never served."""
    tmp = release_root / "releases" / ".tmp-20261122T110000Z-0badc0de-999999999"
    (tmp / "v1").mkdir(parents=True)
    (tmp / "v1" / "periods.json").write_bytes(b'{"half": ')
    with LiveServer(App(release_root, store)) as live, httpx.Client(base_url=live.url) as c:
        r = c.get("/v1/periods", headers=auth(all_scopes_key))
        assert r.status_code == 200 and "half" not in r.text
        json.loads(r.content)
    render_release(release_root, synthetic_produced(), T2)
    assert not tmp.exists()


def test_a_stray_file_does_not_make_current_unservable(release_root: Path, store, all_scopes_key: str):
    first, second = two_releases(release_root)
    (release_root / "releases" / second / "notes.txt~").write_text("editor backup")
    with LiveServer(App(release_root, store)) as live, httpx.Client(base_url=live.url) as c:
        assert c.get("/v1/periods", headers=auth(all_scopes_key)).headers["x-release-id"] == second


def test_a_damaged_file_of_a_kept_release_is_a_logged_500_not_an_unknown_release(
        release_root: Path, store, all_scopes_key: str, caplog: pytest.LogCaptureFixture):
    first, second = two_releases(release_root)
    damaged = release_root / "releases" / first / DOWNLOAD_FILE.key("gazetteer.csv")
    # the file replaced by other bytes (a new inode, as an editor saves): releases link one stored
    # object per content, so a write in place would damage every release holding those bytes alike
    spoilt = damaged.with_name("spoilt")
    spoilt.write_bytes(damaged.read_bytes()[:-3] + b"XYZ")
    os.replace(spoilt, damaged)
    with LiveServer(App(release_root, store)) as live, httpx.Client(base_url=live.url) as c, \
            caplog.at_level(logging.ERROR, "malaria_risk.server"):
        r = c.get(f"/v1/downloads/{first}/gazetteer.csv", headers=auth(all_scopes_key))
        assert r.status_code == 500 and r.json()["code"] == "RELEASE_INCOMPLETE", r.text
        assert "damaged" in r.json()["detail"] and first in r.json()["detail"]
        no_server_path(r.content, release_root)
        assert any(first in m and "gazetteer.csv" in m and "sha256" in m for m in caplog.messages), caplog.messages
        # the same file of the current release, and the kept release's other files, are served
        assert c.get(f"/v1/downloads/{second}/gazetteer.csv", headers=auth(all_scopes_key)).status_code == 200
        assert c.get(f"/v1/downloads/{first}/README.md", headers=auth(all_scopes_key)).status_code == 200


def test_an_unknown_file_name_is_echoed_only_as_a_short_prefix(release_root: Path, store, all_scopes_key: str):
    rid = os.readlink(release_root / "current").split("/")[-1]
    name = "x" * 60_000
    with LiveServer(App(release_root, store)) as live, httpx.Client(base_url=live.url) as c:
        r = c.get(f"/v1/downloads/{rid}/{name}", headers=auth(all_scopes_key))
        assert r.status_code == 404 and r.json()["code"] == "UNKNOWN_FILE"
        detail = r.json()["detail"]
        assert "x" * 40 + "…" in detail and "x" * 41 not in detail and len(detail) < 200
        odd = c.get(f"/v1/downloads/{rid}/%1b%5b31mred%60", headers=auth(all_scopes_key)).json()
        assert odd["code"] == "UNKNOWN_FILE" and "31mred" not in odd["detail"]  # not a file name: not echoed


# --- W-5: a server on a fallback, and prune; a lost file put back ----------------------------


def _break_current(root: Path, second: str) -> tuple[Path, bytes]:
    """Lose a file of the current release (one of its own bytes: no other release links them)."""
    lost = root / "releases" / second / "v1" / "periods.json"
    data = lost.read_bytes()
    lost.unlink()
    return lost, data


UNCACHED = ("/v1/periods", "/v1/context/states", "/v1/risk/states", "/v1/context/lgas?state=KN",
            "/v1/boundaries/lgas?state=LA")


def test_prune_never_removes_the_fallback_a_running_server_serves(release_root: Path, store, all_scopes_key: str):
    from pipeline.release.local import prune_local

    first, second = two_releases(release_root)
    _break_current(release_root, second)
    app = App(release_root, store)
    app.releases.check_every = 0
    with LiveServer(app) as live, httpx.Client(base_url=live.url) as c:
        assert c.get("/v1/downloads", headers=auth(all_scopes_key)).headers["x-release-id"] == first
        got = prune_local(release_root, keep=1)
        assert first in got.kept and second in got.kept
        for url in UNCACHED:  # files the server had not read before the prune
            r = c.get(url, headers=auth(all_scopes_key))
            assert r.status_code == 200 and r.headers["x-release-id"] == first, (url, r.text)


def test_a_server_whose_release_lost_its_files_recovers_once_the_file_is_back_without_a_restart(
        release_root: Path, store, all_scopes_key: str):
    first, second = two_releases(release_root)
    lost, data = _break_current(release_root, second)
    app = App(release_root, store)
    app.releases.check_every = 0
    app.releases.recheck_every = 0  # the default re-checks a broken `current` every 10 s
    with LiveServer(app) as live, httpx.Client(base_url=live.url) as c:
        assert c.get("/v1/downloads", headers=auth(all_scopes_key)).headers["x-release-id"] == first
        os.rename(release_root / "releases" / first, release_root / "gone")  # the fallback removed by hand
        r = c.get("/v1/context/states", headers=auth(all_scopes_key))
        assert r.status_code == 500 and r.json()["code"] == "RELEASE_INCOMPLETE"
        no_server_path(r.content, release_root)
        lost.write_bytes(data)  # the operator puts the lost file back: `current` is whole again
        for url in UNCACHED:
            r = c.get(url, headers=auth(all_scopes_key))
            assert r.status_code == 200 and r.headers["x-release-id"] == second, (url, r.text)
        assert r.headers["x-release-id"] == second


def test_a_server_that_loses_a_file_of_current_moves_to_a_whole_release_and_back(
        release_root: Path, store, all_scopes_key: str):
    first, second = two_releases(release_root)
    app = App(release_root, store)
    app.releases.check_every = 0
    app.releases.recheck_every = 0
    with LiveServer(app) as live, httpx.Client(base_url=live.url) as c:
        assert c.get("/v1/downloads", headers=auth(all_scopes_key)).headers["x-release-id"] == second
        lost, data = _break_current(release_root, second)
        assert c.get("/v1/periods", headers=auth(all_scopes_key)).status_code == 500  # noticed on reading it
        r = c.get("/v1/periods", headers=auth(all_scopes_key))
        assert r.status_code == 200 and r.headers["x-release-id"] == first
        lost.write_bytes(data)
        r = c.get("/v1/periods", headers=auth(all_scopes_key))
        assert r.status_code == 200 and r.headers["x-release-id"] == second and r.json()["changed"] is True
