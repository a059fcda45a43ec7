"""The renderer: turns producers' documents into the files of a release, and makes it current.

It walks the route table (the one list of endpoints) and, for every parameter
combination the release's facts call for, makes the file the gate will map that
request to. A missing or unexpected document stops the build before anything is
visible. The files are stored by content and linked into a release directory
(`pipeline.release.tree`, over `pipeline.release.store`), `current` is switched, and
the list of kept releases is rewritten (`pipeline.release.catalogue`): store ← release
← catalogue ← renderer, no module importing one above it.

Nothing here reads the clock: the release id is the data load time (`updated_at`, an
input) and a hash of the files, so the same inputs and code make the same release.
`built_at` goes into the manifest and the list only.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from edge.files import NAMES_KEY
from edge.routes import (
    DOWNLOAD_FILE,
    PUBLIC_PREFIX,
    ROUTES,
    Facts,
    Route,
    route_values,
)
from pipeline.datasets.base import Produced, Rendered
from pipeline.errors import RenderError, StaleReuse
from pipeline.release import catalogue, tabular
from pipeline.release.manifest import Manifest, sha256_hex
from pipeline.release.reuse import Linked, Reuse, record
from pipeline.release.store import locked
from pipeline.release.tree import (
    clean_killed_builds,
    current_manifest,
    disk_problem,
    gzip_known,
    gzip_known_files,
    switch_current,
    write_release,
)

_disk_problem = disk_problem  # the name callers knew
__all__ = ["clean_killed_builds", "switch_current"]

Progress = Callable[[str, int, int], None]

STATIC_PREFIXES = (PUBLIC_PREFIX, DOWNLOAD_FILE.key_prefix, NAMES_KEY)  # NAMES_KEY: the one edge-only file


@dataclass
class RenderStats:
    release_id: str
    files: int
    bytes: int
    written: int  # objects written fresh (new bytes)
    linked: int  # files linked to objects already in the store (unchanged bytes: nothing written)
    bundle_files: int = 0  # files under downloads/ (identity bytes only)
    bundle_bytes: int = 0
    zip_bytes: int = 0  # the one zip of the bundle, 0 when there is none
    stamp_seconds: float = 0.0  # making the files that name the release id
    cleaned: int = 0  # temporary directories of killed builds removed
    bundle_write_seconds: float = 0.0  # CPU time hashing, gzipping and writing the bundle files
    reused: int = 0  # files (identity bytes) linked by their inputs' key, never rendered (pipeline.release.reuse)
    # files whose bytes only the bucket holds: the release is sparse (`sparse/<id>`, never `current`)
    absent: int = 0


def merge_facts(produced: Iterable[Produced]) -> tuple[Facts, str | None]:
    merged: dict[str, list[str]] = {"states": [], "estimated": [], "forecast": [], "lgas": []}
    available: list[str] = []
    model_version = None
    for p in produced:
        available.append(p.dataset)
        for k, v in p.facts.items():
            if k not in merged:
                raise RenderError(f"producer {p.dataset} reports unknown fact {k!r}")
            if merged[k] and list(v) != merged[k]:
                raise RenderError(f"producers disagree on {k}")
            merged[k] = list(v)
        model_version = p.model_version or model_version
    facts = Facts(
        states=tuple(merged["states"]), estimated=tuple(merged["estimated"]),
        forecast=tuple(merged["forecast"]), available=tuple(sorted(available)), lgas=tuple(merged["lgas"]),
    )
    return facts, model_version


def _docs_by_path(produced: Iterable[Produced]) -> dict[str, dict]:
    docs_by_path: dict[str, dict] = {}
    for p in produced:
        for path, docs in p.documents.items():
            if path in docs_by_path:
                raise RenderError(f"two producers render {path}")
            docs_by_path[path] = docs
    return docs_by_path


def route_files(route: Route, docs: dict, facts: Facts, reuse: Reuse | None = None,
                keys: dict[str, str] | None = None) -> list[tuple[str, str, bytes | Linked]]:
    """The files of one route. Producers key documents by the route's non-format parameters;
    the CSV file of a document is derived from the same document here.

    With `reuse`, a CSV is keyed by the JSON document it tabulates: when the previous release's CSV
    of the same name was made from the same JSON bytes (and code), it is linked (`Linked`), not
    written again; `keys` collects every file's key for the next build."""
    params = route.document_params
    expected = route_values(route, facts)
    wanted = {tuple(v[p.name] for p in params) for v in expected}
    missing = wanted - docs.keys()
    extra = docs.keys() - wanted
    if missing:
        raise RenderError(f"{route.path}: {len(missing)} documents missing, e.g. {sorted(missing)[:3]}")
    if extra:
        raise RenderError(f"{route.path}: {len(extra)} unexpected documents, e.g. {sorted(extra)[:3]}")
    chosen = [docs[tuple(values[p.name] for p in params)] for values in expected]
    is_csv = [values.get("format") == "csv" for values in expected]
    file_keys = [route.key(values) for values in expected]
    json_of: dict[int, bytes] = {}  # id(document) -> its JSON bytes, made once for the JSON and the CSV key

    def as_json(doc: Any) -> bytes:
        got = json_of.get(id(doc))
        if got is None:
            got = json_of[id(doc)] = doc.json if isinstance(doc, Rendered) else \
                doc if isinstance(doc, bytes) else orjson.dumps(doc)
        return got

    linked: dict[int, Linked] = {}  # position -> the previous release's CSV, made from the same document
    trusted = reuse is not None and reuse.previous_id is not None
    # a document a producer rendered with its CSV linked, when the links are not to be trusted (a
    # retry after a damaged object): its CSV made again from its JSON, the one thing a CSV is made of
    again = {i: orjson.loads(doc.json) for i, (doc, c) in enumerate(zip(chosen, is_csv, strict=True))
             if c and not trusted and isinstance(doc, Rendered) and isinstance(doc.csv, Linked)}
    if reuse is not None:
        for i, (doc, c) in enumerate(zip(chosen, is_csv, strict=True)):
            if not c:
                continue
            if isinstance(doc, Rendered):
                key = doc.csv_key
            elif isinstance(doc, dict):
                key = reuse.csv_key(as_json(doc))
            else:
                key = None
            if key is None:
                continue
            if keys is not None:
                keys[file_keys[i]] = key
            hit = None if isinstance(doc, Rendered) or not trusted else reuse.linked(file_keys[i], key)
            if hit is not None:
                linked[i] = hit
    csv = iter(tabular.to_csv_many([again.get(i, doc) for i, (doc, c) in enumerate(zip(chosen, is_csv, strict=True))
                                    if c and (i in again or not isinstance(doc, Rendered)) and i not in linked]))

    def data(i: int, doc: Any, c: bool) -> bytes | Linked:
        if i in linked:
            return linked[i]
        if i in again:
            return next(csv)
        if isinstance(doc, Rendered):
            if c and doc.csv is None:
                raise RenderError(f"{route.path}: a document rendered without its CSV")
            return doc.csv if c and doc.csv is not None else doc.json
        return next(csv) if c else as_json(doc)

    return [(file_keys[i], route.media_type(values), data(i, doc, c))
            for i, (values, doc, c) in enumerate(zip(expected, chosen, is_csv, strict=True))]


def plan(produced: list[Produced], facts: Facts, pending: frozenset[str] = frozenset(),
         seen: set[str] | None = None, reuse: Reuse | None = None,
         keys: dict[str, str] | None = None) -> list[tuple[str, str, bytes | Linked]]:
    """(key, content type, bytes) for every file of the release, in route-table order.

    Every expected combination must have a document and every document must be
    expected: a producer that renders too little or too much is a build error.
    Routes of the `pending` datasets may lack documents: their producers stamp them
    once the release id is known (see `Produced.stamp`), and a second call plans them.
    """
    docs_by_path = _docs_by_path(produced)
    out: list[tuple[str, str, bytes | Linked]] = []
    for route in ROUTES:
        if route.beside_pointer:  # not part of any release (catalogue.py writes it beside `current`)
            continue
        if route.dataset not in facts.available:
            if route.path in docs_by_path:
                raise RenderError(f"{route.path} rendered by a producer other than {route.dataset}")
            continue
        docs = docs_by_path.pop(route.path, None)
        if docs is None:
            if route.dataset in pending:
                continue
            raise RenderError(f"no documents for {route.path} (dataset {route.dataset})")
        out.extend(route_files(route, docs, facts, reuse, keys))
    if docs_by_path:
        raise RenderError(f"documents for paths not in the route table: {sorted(docs_by_path)}")
    seen = seen if seen is not None else set()
    seen.update(k for k, _, _ in out)
    for p in produced:
        for key, (ctype, data) in sorted(p.files.items()):
            if not key.startswith(STATIC_PREFIXES) or ".." in key.split("/") or key in seen:
                raise RenderError(f"static file {key!r} from {p.dataset} must be a unique path under "
                                  f"{' or '.join(STATIC_PREFIXES)}")
            seen.add(key)
            out.append((key, ctype, data))
    return out


def download_scopes(produced: Iterable[Produced]) -> dict[str, tuple[str, ...]]:
    """Bundle file key -> the scopes a key needs to download it, from the producers (the downloads
    producer derives them from the route table)."""
    out: dict[str, tuple[str, ...]] = {}
    for p in produced:
        for key, needs in p.scopes.items():
            if not key.startswith(DOWNLOAD_FILE.key_prefix) or (key in out and out[key] != tuple(needs)):
                raise RenderError(f"scope record {key!r} from {p.dataset} is not one bundle file's")
            out[key] = tuple(needs)
    return out


def with_scopes(entries: dict[str, dict[str, Any]], scopes: dict[str, tuple[str, ...]]) -> dict[str, dict[str, Any]]:
    """Manifest entries with `scopes` on each bundle file's identity entry (the edge checks a key
    against it; the gzip copy is served under the identity entry's decision)."""
    return {k: ({**e, "scopes": list(scopes[k])} if k in scopes and e.get("content_encoding") is None else e)
            for k, e in entries.items()}


def release_id_for(updated_at: str, files: list[tuple[str, str, bytes | Linked]],
                   scopes: dict[str, tuple[str, ...]] | None = None, digests: dict[str, str] | None = None) -> str:
    """The load time and a hash of every file (and of the scopes a bundle file needs, which the
    manifest records: a change of the scope rule is a new release, never a rewritten manifest).
    `digests` collects each file's SHA-256, so the store does not hash the same bytes again."""
    h = hashlib.sha256()
    for key, _, data in files:
        h.update(key.encode())
        digest = data.sha256 if isinstance(data, Linked) else sha256_hex(data)
        if digests is not None:
            digests[key] = digest
        h.update(digest.encode())
        if scopes and key in scopes:
            h.update(("scopes:" + " ".join(scopes[key])).encode())
    stamp = datetime.fromisoformat(updated_at.replace("Z", "+00:00")).astimezone(UTC)
    return stamp.strftime("%Y%m%dT%H%M%SZ") + "-" + h.hexdigest()[:8]


def render_release(
    out: Path,
    produced: list[Produced],
    updated_at: str,
    progress: Progress | None = None,
    built_at: str | None = None,
    reuse: Reuse | None = None,
) -> RenderStats:
    """Render, store, link and switch; `built_at` (the clock, default now) is for the manifest
    and the list of kept releases only. With `reuse` (pipeline.release.reuse), files made from the
    same inputs as the previous release's are linked, and this release's keys are recorded."""
    built_at = built_at or catalogue.stamp(datetime.now(UTC))
    facts, model_version = merge_facts(produced)
    stampers = [p for p in produced if p.stamp is not None]
    seen: set[str] = set()
    keys: dict[str, str] = {}
    files = plan(produced, facts, frozenset(p.dataset for p in stampers), seen, reuse, keys)
    scopes = download_scopes(produced)
    digests: dict[str, str] = {}
    release_id = release_id_for(updated_at, files, scopes, digests)
    stamp_started = time.perf_counter()
    if stampers:
        stamped = []
        for p in stampers:
            assert p.stamp is not None
            docs, extra = p.stamp(release_id)
            stamped.append(Produced(p.dataset, docs, files=extra))
        files += plan(stamped, Facts(available=tuple(p.dataset for p in stampers),
                                     states=facts.states, estimated=facts.estimated, forecast=facts.forecast,
                                     lgas=facts.lgas),
                      seen=seen, reuse=reuse, keys=keys)
    stamp_seconds = time.perf_counter() - stamp_started
    unscoped = sorted(k for k, _, _ in files if k.startswith(DOWNLOAD_FILE.key_prefix) and k not in scopes)
    if unscoped:
        raise RenderError(f"bundle files with no scope record (the edge would not know who may read them): "
                          f"{unscoped[:3]}")
    previous = current_manifest(out)
    in_bucket = reuse.in_bucket() if reuse is not None and reuse.previous_id is not None else None
    known = gzip_known_files(reuse.files) if in_bucket is not None and reuse is not None else \
        gzip_known(previous[1] if previous else None)
    with locked(out):
        try:
            written = write_release(
                out, release_id, files,
                lambda entries: Manifest(release_id, updated_at, model_version, facts.to_json(),
                                         with_scopes(entries, scopes), built_at),
                progress, known, in_bucket, digests)
        except StaleReuse as stale:
            if reuse is None or reuse.previous_id is None:
                raise
            # an object the keys named is missing or damaged: nothing was switched; every file is made
            # from its document this time (the documents are all at hand), and the object healed
            if progress:
                progress(f"making every file again: {stale}", 0, 1)
            retry = True
        else:
            retry = False
        if not retry and written.absent:  # sparse: for the job's publish only, never switched to
            if reuse is not None:
                record(out, release_id, keys)
        elif not retry:
            try:
                switch_current(out, release_id)
                if reuse is not None:
                    record(out, release_id, keys)
                catalogue.refresh_local(out, release_id, previous[1].release_id if previous else None, built_at)
            except OSError as failed:
                raise RenderError(disk_problem(out, failed) + f" (release {release_id} is complete; "
                                  f"`current` may still name the previous one)") from None
    if retry:
        assert reuse is not None
        return render_release(out, produced, updated_at, progress, built_at, Reuse(reuse.code))
    entries = written.entries
    total = sum(e["size"] for e in entries.values())
    bundle = {k: e for k, e in entries.items()
              if k.startswith(DOWNLOAD_FILE.key_prefix) and e["content_encoding"] is None}
    zips = [e["size"] for e in bundle.values() if e["content_type"] == "application/zip"]
    return RenderStats(release_id, len(entries), total, written.written, written.linked,
                       len(bundle), sum(e["size"] for e in bundle.values()), sum(zips), stamp_seconds,
                       written.cleaned, sum(written.bundle_seconds),
                       sum(isinstance(data, Linked) for _, _, data in files), len(written.absent))
