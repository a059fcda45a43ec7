"""Headers of any length are read in bounded time with a clear answer, never a 500, and every
answer has its access-log line (both fronts, real HTTP on loopback); the names index is
checked against the manifest's SHA-256 like every file served."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import orjson

from edge.accesslog import AccessLog
from edge.files import NAMES_KEY
from edge.local.app import App
from edge.release import LocalReleases
from edge.stores.sqlite import SQLiteKeyStore
from tests.conftest import LiveServer
from tests.edge.test_gate import get as gate_get
from tests.edge.test_suggestions import INDEX, release_with

HUGE = "9" * 4_400  # past Python's 4,300-digit limit for int()


def _file(release_root: Path) -> tuple[str, int]:
    manifest = json.loads(next(release_root.glob("releases/*/manifest.json")).read_text())
    key = next(k for k in manifest["files"] if k.endswith("gazetteer.csv"))
    return f"/v1/downloads/{manifest['release_id']}/gazetteer.csv", int(manifest["files"][key]["size"])


def test_a_range_of_thousands_of_digits_gets_a_clear_answer_and_a_log_line(release_root: Path, store: SQLiteKeyStore,
                                                                          all_scopes_key: str, front: str):
    lines: list[str] = []
    app = App(release_root, store, access_log=AccessLog(lines.append, ok_every=1))
    path, size = _file(release_root)
    auth = {"Authorization": f"Bearer {all_scopes_key}", "Accept-Encoding": "identity"}
    with LiveServer(app, front) as live, httpx.Client(base_url=live.url, timeout=10) as c:
        r = c.get(path, headers={**auth, "Range": f"bytes={HUGE}-"})  # starts past any file's end
        assert r.status_code == 416 and r.json()["code"] == "RANGE_NOT_SATISFIABLE"
        assert r.headers["content-range"] == f"bytes */{size}"
        r = c.get(path, headers={**auth, "Range": f"bytes=0-{HUGE}"})  # ends past it: clipped
        assert r.status_code == 206 and len(r.content) == size
        r = c.get(path, headers={**auth, "Range": f"bytes=-{HUGE}"})  # a suffix longer than the file
        assert r.status_code == 206 and len(r.content) == size
        r = c.get(path, headers={**auth, "Range": f"bytes=00000000000000000000000000{size - 1}-"})
        assert r.status_code == 206 and len(r.content) == 1  # leading zeros are only zeros
    statuses = [json.loads(line)["status"] for line in lines]
    assert statuses == [416, 206, 206, 206]


def test_a_names_index_changed_after_the_build_is_not_used(tmp_path: Path, store: SQLiteKeyStore,
                                                         all_scopes_key: str):
    release = release_with(tmp_path, orjson.dumps(INDEX))
    path = release.root / NAMES_KEY  # Kano and Katsina's codes swapped: the same size, other bytes
    body = path.read_bytes()
    forged = body.replace(b'["KN","Kano"]', b'["KT","Kano"]').replace(b'["KT","Katsina"]', b'["KN","Katsina"]')
    assert forged != body and len(forged) == len(body)
    path.write_bytes(forged)
    release = LocalReleases(release.root.parent.parent).current()  # a fresh read, as after a restart
    resp = gate_get(release, store, "/v1/history/states", "state=Kano", all_scopes_key)
    doc = json.loads(resp.body)
    assert resp.status == 404 and doc["code"] == "UNKNOWN_STATE"
    assert "KT" not in json.dumps(doc)  # the forged index gave nothing
    assert release.names() is None
