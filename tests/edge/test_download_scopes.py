"""Scopes hold for the bundle downloads too: every file of a release, every set of scopes.

A file needs the scopes of everything in it (SPEC §5: every endpoint except /v1/periods needs
its scope). The expectation below is written from the SPEC's route scopes, apart from the
pipeline's rule (`pipeline.datasets.downloads.TABLE_ROUTES`), so a wrong rule fails here.
"""

from __future__ import annotations

import itertools
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from edge.cloudfront import PointerRelease
from edge.gate import Request, handle
from edge.local.app import App
from edge.release import LocalReleases, ManifestRelease
from edge.routes import BUNDLE_ZIP, DOWNLOAD_FILE, GEOJSON, SCOPES
from edge.stores.sqlite import SQLiteKeyStore
from pipeline.datasets import downloads as d
from pipeline.publish.s3.pointer import pointer_document
from pipeline.release.manifest import Manifest
from pipeline.release.render import render_release
from tests.conftest import NOW, LiveServer, synthetic_produced

T1, T2 = "2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z"
SUBSETS = [frozenset(c) for n in range(len(SCOPES) + 1) for c in itertools.combinations(SCOPES, n)]
DESCRIPTIONS = {"README.md", "SHA256SUMS", "datapackage.json"}


def expected_needs(name: str) -> set[str]:
    """What the SPEC's route scopes say a file holding these rows needs."""
    if name in DESCRIPTIONS:
        return set()  # names, columns, checksums and licences: no row of any table
    if name == BUNDLE_ZIP:
        return set(SCOPES)  # every table and outline
    stem = name.split(".", 1)[0]
    if stem in ("risk_lga_month", "risk_state_month"):
        return {"risk_scores", "forecasts"}  # estimated months and forecast months
    if stem in ("lga_outlines", "state_outlines"):
        return {"lga_boundaries"}
    # context, transmission, survey trends, the gazetteer (population, area: context figures)
    return {"risk_scores"}


def full_bundle() -> list:
    """Every file name the real bundle holds (small stand-in bytes), through the real producer."""
    files = [d.BundleFile(f"{stem}.{ext}", d.CSV if ext == "csv" else d.PARQUET, f"{stem} {ext}\n".encode(), stem)
             for stem in d.TABLE_TITLES for ext in ("csv", "parquet")]
    files += [d.BundleFile(f"{stem}.{ext}", GEOJSON if ext == "geojson" else d.PARQUET, b"{}", stem)
              for stem in ("lga_outlines", "state_outlines") for ext in ("geojson", "parquet")]
    produced = [p for p in synthetic_produced() if p.dataset != "downloads"]
    produced.append(d.bundle(files, "2026-11-22T10:00:00Z", "test-1", lambda rid: {"id": rid, "resources": []}))
    return produced


@pytest.fixture
def root(tmp_path: Path) -> Path:
    out = tmp_path / "build"
    render_release(out, full_bundle(), T1)
    return out


def keys_for_every_subset(store: SQLiteKeyStore) -> dict[frozenset[str], str]:
    """One key per subset of the scopes; the empty set (which the dashboard refuses to create) is a
    key whose scopes were emptied in the store."""
    out = {}
    for subset in SUBSETS:
        kid, key = store.create("k", sorted(subset) or ["risk_scores"], "test", now=NOW)
        if not subset:
            with store._conn() as conn:
                conn.execute("UPDATE keys SET scopes = '' WHERE id = ?", (kid,))
        out[subset] = key
    return out


def bundle_names(release: ManifestRelease) -> list[str]:
    names = [k[len(DOWNLOAD_FILE.key_prefix):] for k in release.entries if k.startswith(DOWNLOAD_FILE.key_prefix)]
    assert names
    return sorted(names)


def ordered(scopes: set[str]) -> list[str]:
    return [s for s in SCOPES if s in scopes]


def check(resp_status: int, body: bytes | None, needs: set[str], held: frozenset[str], what: str) -> None:
    missing = ordered(needs - held)
    if not missing:
        assert resp_status == 200, (what, body)
        return
    assert resp_status == 403, (what, resp_status)
    doc = json.loads(body or b"{}")
    assert doc["code"] == "SCOPE_REQUIRED" and doc["status"] == 403, what
    assert doc["missing_scopes"] == missing and doc["required_scope"] == missing[0], (what, doc)
    assert all(f"`{s}`" in doc["detail"] for s in missing), doc["detail"]


def test_every_file_with_every_scope_set_through_the_gate(root: Path, store: SQLiteKeyStore):
    release = LocalReleases(root).current()
    keys = keys_for_every_subset(store)
    names = bundle_names(release)
    # the walk covers the real bundle's every file: the tables, the outlines, the description and the zip
    assert {f"{s}.csv" for s in d.TABLE_TITLES} | DESCRIPTIONS | {BUNDLE_ZIP, "lga_outlines.geojson"} <= set(names)
    refused = allowed = 0
    for name in names:
        needs = expected_needs(name)
        for held, key in keys.items():
            path = DOWNLOAD_FILE.path_for(release.release_id, name)
            resp = handle(Request("GET", path, "", {"authorization": f"Bearer {key}"}), NOW, store, release)
            check(resp.status, resp.body, needs, held, f"{name} with {sorted(held)}")
            refused += resp.status == 403
            allowed += resp.status == 200
    assert refused and allowed and refused + allowed == len(names) * len(SUBSETS)


def test_the_index_and_the_manifest_say_what_each_file_needs(root: Path, store: SQLiteKeyStore):
    release_dir = (root / "current").resolve()
    index = json.loads((release_dir / "v1" / "downloads.json").read_bytes())
    assert {f["name"]: set(f["scopes"]) for f in index["files"]} == {
        f["name"]: expected_needs(f["name"]) for f in index["files"]}
    manifest = Manifest.load(release_dir)
    for key, entry in manifest.files.items():
        if key.startswith(DOWNLOAD_FILE.key_prefix) and entry["content_encoding"] is None:
            assert set(entry["scopes"]) == expected_needs(key.split("/", 1)[1]), key
        else:
            assert "scopes" not in entry, key


def test_an_earlier_kept_release_is_gated_by_its_own_record(root: Path, store: SQLiteKeyStore):
    first = os.readlink(root / "current").split("/")[-1]
    produced = full_bundle()
    produced[2].documents["/v1/periods"][()] = {"changed": True}
    render_release(root, produced, T2)
    releases = LocalReleases(root)
    _, risk_only = store.create("r", ["risk_scores"], "test", now=NOW)
    _, everything = store.create("a", list(SCOPES), "test", now=NOW)
    for name, key, status in [(BUNDLE_ZIP, risk_only, 403), ("risk_lga_month.csv", risk_only, 403),
                              ("context_lga.csv", risk_only, 200), (BUNDLE_ZIP, everything, 200)]:
        resp = handle(Request("GET", DOWNLOAD_FILE.path_for(first, name), "", {"authorization": f"Bearer {key}"}),
                      NOW, store, releases.current(), None, releases)
        assert resp.status == status and (status != 200 or resp.release_id == first), (name, resp.body)


def test_a_release_without_scope_records_refuses_its_files_to_keys_without_every_scope(
        root: Path, store: SQLiteKeyStore):
    """A manifest (or pointer) written before scopes were recorded: every bundle file needs every scope."""
    release_dir = (root / "current").resolve()
    doc = json.loads((release_dir / "manifest.json").read_bytes())
    for entry in doc["files"].values():
        entry.pop("scopes", None)
    old = ManifestRelease.from_manifest(doc, release_dir)
    _, two = store.create("t", ["risk_scores", "lga_boundaries"], "test", now=NOW)
    _, everything = store.create("a", list(SCOPES), "test", now=NOW)
    path = DOWNLOAD_FILE.path_for(old.release_id, "README.md")
    refused = handle(Request("GET", path, "", {"authorization": f"Bearer {two}"}), NOW, store, old)
    assert refused.status == 403 and json.loads(refused.body)["missing_scopes"] == ["forecasts"]
    assert handle(Request("GET", path, "", {"authorization": f"Bearer {everything}"}), NOW, store, old).status == 200


def test_the_cdn_pointer_carries_the_same_scopes(root: Path, store: SQLiteKeyStore):
    """The CDN gate reads the scopes from the published pointer, made from the manifest."""
    release_dir = (root / "current").resolve()
    manifest = Manifest.load(release_dir)
    pointer = json.loads(json.dumps(pointer_document(manifest, "0" * 64, None, datetime(2026, 11, 22, tzinfo=UTC))))
    edge_release = PointerRelease.from_pointer(pointer)
    keys = keys_for_every_subset(store)
    for name in pointer["downloads"]:
        for held, key in keys.items():
            path = DOWNLOAD_FILE.path_for(manifest.release_id, name)
            resp = handle(Request("GET", path, "", {"authorization": f"Bearer {key}"}), NOW, store, edge_release)
            check(resp.status, resp.body, expected_needs(name), held, f"cdn {name} {sorted(held)}")
    pointer.pop("download_scopes")  # a pointer published before scopes were recorded: fail closed
    bare = PointerRelease.from_pointer(pointer)
    resp = handle(Request("GET", DOWNLOAD_FILE.path_for(manifest.release_id, "context_lga.csv"), "",
                          {"authorization": f"Bearer {keys[frozenset({'risk_scores'})]}"}), NOW, store, bare)
    assert resp.status == 403


def test_every_file_over_loopback_http_with_the_key_of_the_report(root: Path, store: SQLiteKeyStore):
    """The issue's key (risk_scores and lga_boundaries, no forecasts) and the lga_boundaries-only key,
    over HTTP: the tables with forecast rows and the zip are refused, naming `forecasts`."""
    rid = os.readlink(root / "current").split("/")[-1]
    names = bundle_names(LocalReleases(root).current())
    sets = [frozenset({"risk_scores", "lga_boundaries"}), frozenset({"lga_boundaries"})]
    keys = {s: store.create("k", sorted(s), "test", now=NOW)[1] for s in sets}
    with LiveServer(App(root, store)) as live, httpx.Client(base_url=live.url) as c:
        for held in sets:
            for name in names:
                r = c.get(DOWNLOAD_FILE.path_for(rid, name),
                          headers={"Authorization": f"Bearer {keys[held]}", "Accept-Encoding": "identity"})
                check(r.status_code, r.content, expected_needs(name), held, f"http {name} {sorted(held)}")
                if r.status_code == 403:
                    assert r.headers["content-type"] == "application/problem+json"
        # the index stays readable with any key, and says what each file needs
        index = c.get("/v1/downloads", headers={"Authorization": f"Bearer {keys[sets[1]]}"}).json()
        assert {f["name"]: f["scopes"] for f in index["files"]}["risk_lga_month.csv"] == ["risk_scores", "forecasts"]


@pytest.mark.slow
def test_every_file_of_the_real_release_with_every_scope_set(real_build: Path, tmp_path: Path):
    store = SQLiteKeyStore(tmp_path / "keys.sqlite")
    release = LocalReleases(real_build).current()
    keys = keys_for_every_subset(store)
    names = bundle_names(release)
    assert {"risk_lga_month.csv", "risk_lga_month.parquet", BUNDLE_ZIP, "lga_outlines.geojson"} <= set(names)
    for name in names:
        for held, key in keys.items():
            path = DOWNLOAD_FILE.path_for(release.release_id, name)
            resp = handle(Request("GET", path, "", {"authorization": f"Bearer {key}"}), NOW, store, release)
            check(resp.status, resp.body, expected_needs(name), held, f"{name} with {sorted(held)}")


def test_every_bundle_table_has_its_routes():
    """A table the scope rule does not know would need all three scopes: each table of the bundle
    names the endpoints it is built from, so a new table cannot be gated by accident."""
    from pipeline.datasets.downloads import LEAD, TABLE_ROUTES

    assert set(LEAD) <= set(TABLE_ROUTES)
