"""Bundle downloads over real HTTP (both fronts): index, files by pinned path, keys, ETags, 404s.

The release comes from the real renderer with a small bundle (tests/conftest.py); a second
build shows that an earlier release's files stay downloadable by id while it is kept.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import time
import zipfile
from pathlib import Path

import httpx

from edge.routes import RELEASE_ID_RE
from pipeline.release.render import render_release
from tests.conftest import synthetic_produced


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_index_lists_files_with_pinned_paths_that_serve_those_bytes(client: httpx.Client, all_scopes_key: str):
    r = client.get("/v1/downloads", headers=_auth(all_scopes_key))
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    doc = r.json()
    assert RELEASE_ID_RE.fullmatch(doc["release_id"]) and doc["model_version"] == "test-1"
    assert r.headers["x-release-id"] == doc["release_id"]
    names = [f["name"] for f in doc["files"]]
    assert names[:2] == ["gazetteer.csv", "lga_outlines.geojson"]
    assert {"README.md", "SHA256SUMS", "malaria_risk_nigeria.zip"} <= set(names)
    for f in doc["files"]:
        assert f["path"] == f"/v1/downloads/{doc['release_id']}/{f['name']}"
        assert set(f) == {"name", "path", "media_type", "bytes", "sha256", "description", "scopes"} \
            and f["description"]
        got = client.get(f["path"], headers=_auth(all_scopes_key))
        assert got.status_code == 200, (f["path"], got.text)
        assert got.headers["content-type"] == f["media_type"]
        assert len(got.content) == f["bytes"] and hashlib.sha256(got.content).hexdigest() == f["sha256"]


def test_zip_holds_every_file_and_matches_sha256sums(client: httpx.Client, all_scopes_key: str):
    doc = client.get("/v1/downloads", headers=_auth(all_scopes_key)).json()
    by_name = {f["name"]: f for f in doc["files"]}
    raw = client.get(by_name["malaria_risk_nigeria.zip"]["path"], headers=_auth(all_scopes_key)).content
    sums = client.get(by_name["SHA256SUMS"]["path"], headers=_auth(all_scopes_key)).text
    listed = dict(reversed(line.split("  ", 1)) for line in sums.splitlines())
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        # the zip unpacks into one folder named by the release (docs/downloads.md)
        folder = f"malaria-risk-nigeria-{doc['release_id']}/"
        assert all(m.startswith(folder) for m in z.namelist())
        members = [m[len(folder):] for m in z.namelist()]
        assert set(members) == set(by_name) - {"malaria_risk_nigeria.zip"}
        assert set(listed) == set(members) - {"SHA256SUMS"}
        for name, digest in listed.items():
            assert hashlib.sha256(z.read(folder + name)).hexdigest() == digest == by_name[name]["sha256"]
    readme = client.get(by_name["README.md"]["path"], headers=_auth(all_scopes_key)).text
    assert doc["release_id"] in readme and "test-1" in readme


def test_etag_304_gzip_and_key_required(client: httpx.Client, all_scopes_key: str):
    rid = client.get("/v1/downloads", headers=_auth(all_scopes_key)).json()["release_id"]
    path = f"/v1/downloads/{rid}/gazetteer.csv"
    plain = client.get(path, headers={**_auth(all_scopes_key), "Accept-Encoding": "identity"})
    assert plain.status_code == 200 and plain.headers["content-type"] == "text/csv; charset=utf-8"
    etag = plain.headers["etag"]
    again = client.get(path, headers={**_auth(all_scopes_key), "If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    raw = httpx.get(client.base_url.join(path), headers={**_auth(all_scopes_key), "Accept-Encoding": "gzip"})
    assert raw.headers["content-encoding"] == "gzip" and raw.content == plain.content  # httpx decodes it
    zipped = client.get(f"/v1/downloads/{rid}/malaria_risk_nigeria.zip",
                        headers={**_auth(all_scopes_key), "Accept-Encoding": "gzip"})
    assert zipped.status_code == 200 and "content-encoding" not in zipped.headers  # already compressed
    for p in (path, "/v1/downloads"):
        r = client.get(p)
        assert r.status_code == 401 and r.json()["code"] == "API_KEY_MISSING"
    assert client.get(path, headers=_auth("svc_test_" + "a" * 32)).json()["code"] == "API_KEY_INVALID"


TRICKS = [
    ("20200101T000000Z-00000000/gazetteer.csv", "UNKNOWN_RELEASE"),
    ("latest/gazetteer.csv", "UNKNOWN_RELEASE"),
    ("..%2fmanifest.json", "UNKNOWN_RELEASE"),
    ("%2e%2e/%2e%2e/keys.sqlite", "UNKNOWN_RELEASE"),
    ("{rid}/nope.csv", "UNKNOWN_FILE"),
    ("{rid}/../manifest.json", "UNKNOWN_RELEASE"),  # the client resolves the dot segment first
    ("{rid}/..%2fmanifest.json", "UNKNOWN_FILE"),
    ("{rid}/%2e%2e%2fmanifest.json", "UNKNOWN_FILE"),
    ("{rid}/gazetteer.csv.gz", "UNKNOWN_FILE"),
    ("{rid}/GAZETTEER.CSV", "UNKNOWN_FILE"),
    ("{rid}//gazetteer.csv", "UNKNOWN_FILE"),
    ("{rid}/sub/gazetteer.csv", "UNKNOWN_FILE"),
    ("{rid}/", "UNKNOWN_FILE"),
    ("{rid}", "UNKNOWN_FILE"),
    ("", "UNKNOWN_RELEASE"),
]


def test_unknown_releases_names_and_path_tricks_are_404_problems(client: httpx.Client, all_scopes_key: str):
    rid = client.get("/v1/downloads", headers=_auth(all_scopes_key)).json()["release_id"]
    for tail, code in TRICKS:
        r = client.get("/v1/downloads/" + tail.format(rid=rid), headers=_auth(all_scopes_key))
        assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json", tail
        assert r.json()["code"] == code, tail


def test_query_parameters_are_refused_on_files(client: httpx.Client, all_scopes_key: str):
    rid = client.get("/v1/downloads", headers=_auth(all_scopes_key)).json()["release_id"]
    r = client.get(f"/v1/downloads/{rid}/gazetteer.csv?format=csv", headers=_auth(all_scopes_key))
    assert r.status_code == 400 and r.json()["code"] == "UNKNOWN_PARAMETER"


def test_an_earlier_release_stays_downloadable_by_id_until_it_is_removed(
        live, release_root: Path, all_scopes_key: str):
    with httpx.Client(base_url=live.url, headers=_auth(all_scopes_key), timeout=10) as c:
        first = c.get("/v1/downloads").json()
        old = {f["name"]: f for f in first["files"]}
        produced = synthetic_produced()
        for p in produced:
            if p.dataset == "risk":
                p.documents["/v1/periods"][()] = {"changed": True}
        second = render_release(release_root, produced, "2026-11-22T11:00:00Z")
        assert second.release_id != first["release_id"]
        # the server follows `current` within a second; wait for the new index
        for _ in range(50):
            now = c.get("/v1/downloads").json()
            if now["release_id"] == second.release_id:
                break
            time.sleep(0.05)
        assert now["release_id"] == second.release_id
        for name in ("README.md", "gazetteer.csv", "malaria_risk_nigeria.zip"):
            r = c.get(old[name]["path"])
            assert r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == old[name]["sha256"]
            assert r.headers["x-release-id"] == first["release_id"]
        readme = c.get(old["README.md"]["path"]).text
        assert first["release_id"] in readme and second.release_id not in readme
        # gzip of a pinned file is served from that release too
        gz = httpx.get(live.url + old["gazetteer.csv"]["path"],
                       headers={**_auth(all_scopes_key), "Accept-Encoding": "gzip"})
        assert gz.headers["content-encoding"] == "gzip"
        assert gz.content == c.get(old["gazetteer.csv"]["path"]).content
        # once the earlier release is removed, its paths are a clear 404
        shutil.rmtree(release_root / "releases" / first["release_id"])
        r = c.get(old["gazetteer.csv"]["path"])
        assert r.status_code == 404 and r.json()["code"] == "UNKNOWN_RELEASE"
