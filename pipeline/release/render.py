"""The renderer: turns producers' documents into an immutable, verified release.

It walks the route table (the one list of endpoints) and, for every parameter
combination the release's facts call for, writes the file the gate will map that
request to. A missing or unexpected document stops the build before anything is
visible: files go to a temporary directory, the manifest is written and verified,
the directory is renamed into `releases/`, and only then is `current` switched —
one atomic `rename` of a symlink.

Files whose bytes equal the previous release's reuse its gzip copy rather than being
re-compressed, which is what makes a one-month data load cheap. They are copied (a
reflink where the filesystem has one), never hard-linked: releases share no inode, so a
write into one release can never change another (a rollback target above all). A reused
file is checked against the previous manifest first; a damaged one is written fresh, so
the next build heals it. Temporary directories of builds that were killed are removed
by the next build.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import hashlib
import os
import shutil
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from edge.routes import (
    DOWNLOAD_FILE,
    PRECOMPRESSED_SUFFIXES,
    PUBLIC_PREFIX,
    ROUTES,
    Facts,
    Route,
    route_values,
)
from pipeline.datasets.base import Produced
from pipeline.errors import RenderError
from pipeline.release import catalogue, tabular
from pipeline.release.manifest import (
    MANIFEST_NAME,
    Manifest,
    file_entry,
    sha256_hex,
    verify_release_dir,
)

Progress = Callable[[str, int, int], None]

STATIC_PREFIXES = (PUBLIC_PREFIX, DOWNLOAD_FILE.key_prefix)


@dataclass
class RenderStats:
    release_id: str
    files: int
    bytes: int
    written: int  # files written fresh
    linked: int  # files copied from the previous release (name kept for callers; no hard links)
    bundle_files: int = 0  # files under downloads/ (identity bytes only)
    bundle_bytes: int = 0
    zip_bytes: int = 0  # the one zip of the bundle, 0 when there is none
    stamp_seconds: float = 0.0  # making the files that name the release id
    cleaned: int = 0  # temporary directories of killed builds removed
    bundle_write_seconds: float = 0.0  # CPU time hashing, gzipping and writing the bundle files


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


def route_files(route: Route, docs: dict, facts: Facts) -> list[tuple[str, str, bytes]]:
    """The files of one route. Producers key documents by the route's non-format parameters;
    the CSV file of a document is derived from the same document here."""
    params = route.document_params
    expected = route_values(route, facts)
    wanted = {tuple(v[p.name] for p in params) for v in expected}
    missing = wanted - docs.keys()
    extra = docs.keys() - wanted
    if missing:
        raise RenderError(f"{route.path}: {len(missing)} documents missing, e.g. {sorted(missing)[:3]}")
    if extra:
        raise RenderError(f"{route.path}: {len(extra)} unexpected documents, e.g. {sorted(extra)[:3]}")
    out: list[tuple[str, str, bytes]] = []
    for values in expected:
        doc = docs[tuple(values[p.name] for p in params)]
        if values.get("format") == "csv":
            data = tabular.to_csv(doc)
        else:
            data = doc if isinstance(doc, bytes) else orjson.dumps(doc)
        out.append((route.key(values), route.media_type(values), data))
    return out


def plan(produced: list[Produced], facts: Facts, pending: frozenset[str] = frozenset(),
         seen: set[str] | None = None) -> list[tuple[str, str, bytes]]:
    """(key, content type, bytes) for every file of the release, in route-table order.

    Every expected combination must have a document and every document must be
    expected: a producer that renders too little or too much is a build error.
    Routes of the `pending` datasets may lack documents: their producers stamp them
    once the release id is known (see `Produced.stamp`), and a second call plans them.
    """
    docs_by_path = _docs_by_path(produced)
    out: list[tuple[str, str, bytes]] = []
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
        out.extend(route_files(route, docs, facts))
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


def release_id_for(updated_at: str, files: list[tuple[str, str, bytes]]) -> str:
    h = hashlib.sha256()
    for key, _, data in files:
        h.update(key.encode())
        h.update(sha256_hex(data).encode())
    stamp = datetime.fromisoformat(updated_at.replace("Z", "+00:00")).astimezone(UTC)
    return stamp.strftime("%Y%m%dT%H%M%SZ") + "-" + h.hexdigest()[:8]


def _previous(out: Path) -> tuple[Path, Manifest] | None:
    link = out / "current"
    if not link.is_symlink():
        return None
    target = (out / os.readlink(link)).resolve()
    try:
        return target, Manifest.load(target)
    except (OSError, ValueError, KeyError):
        return None


_FICLONE = 0x40049409  # linux/fs.h: share extents copy-on-write (btrfs, XFS); never shares the inode


def copy_file(src: Path, dst: Path) -> None:
    """`dst` becomes an independent copy of `src`: a reflink where the filesystem has one, else bytes."""
    with open(src, "rb") as fs, open(dst, "wb") as fd:
        try:
            fcntl.ioctl(fd.fileno(), _FICLONE, fs.fileno())
            return
        except OSError:
            pass
        shutil.copyfileobj(fs, fd, 1 << 20)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_killed_builds(out: Path) -> list[str]:
    """Remove what builds that died left behind: `releases/.tmp-<id>-<pid>` directories and
    `.current-<pid>` links whose process is gone. A running build's are kept."""
    removed: list[str] = []
    candidates = [*Path(out, "releases").glob(".tmp-*"), *Path(out).glob(".current-*")]
    for path in candidates:
        pid_text = path.name.rsplit("-", 1)[-1]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and _pid_alive(int(pid_text)):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        removed.append(path.name)
    return removed


def _matches(path: Path, sha256: str) -> bool:
    try:
        return sha256_hex(path.read_bytes()) == sha256
    except OSError:
        return False


def render_release(
    out: Path,
    produced: list[Produced],
    updated_at: str,
    progress: Progress | None = None,
) -> RenderStats:
    facts, model_version = merge_facts(produced)
    stampers = [p for p in produced if p.stamp is not None]
    seen: set[str] = set()
    files = plan(produced, facts, frozenset(p.dataset for p in stampers), seen)
    release_id = release_id_for(updated_at, files)
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
                      seen=seen)
    stamp_seconds = time.perf_counter() - stamp_started
    releases = out / "releases"
    try:
        releases.mkdir(parents=True, exist_ok=True)
    except OSError as failed:
        raise RenderError(_disk_problem(releases, failed)) from None
    cleaned = clean_killed_builds(out)
    final = releases / release_id
    if final.exists():
        raise RenderError(f"release {release_id} already exists")
    tmp = releases / f".tmp-{release_id}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    previous = _previous(out)
    prev_files = previous[1].files if previous else {}
    prev_dir = previous[0] if previous else None

    entries: dict[str, dict] = {}
    counters = {"written": 0, "linked": 0, "done": 0}
    made_dirs: set[Path] = set()

    # CPU seconds per bundle file (thread time: waiting for a core or the GIL is not the bundle's cost)
    bundle_seconds: list[float] = []

    def write_one(item: tuple[str, str, bytes]) -> tuple[list[tuple[str, dict]], bool]:
        if item[0].startswith(DOWNLOAD_FILE.key_prefix):
            started = time.thread_time()
            try:
                return _write_one(item)
            finally:
                bundle_seconds.append(time.thread_time() - started)
        return _write_one(item)

    def _write_one(item: tuple[str, str, bytes]) -> tuple[list[tuple[str, dict]], bool]:
        key, ctype, data = item
        target = tmp / key
        digest = sha256_hex(data)
        prev = prev_files.get(key)
        gz_key = key + ".gz"
        if key.endswith(PRECOMPRESSED_SUFFIXES):  # already compressed: no gzip sibling (the edge relies on it)
            if (prev_dir is not None and prev is not None and prev["sha256"] == digest
                    and _matches(prev_dir / key, digest)):
                copy_file(prev_dir / key, target)  # a copy, never a shared inode
                return [(key, file_entry(data, ctype))], True
            target.write_bytes(data)
            return [(key, file_entry(data, ctype))], False
        prev_gz = prev_files.get(gz_key)
        if (prev_dir is not None and prev is not None and prev["sha256"] == digest and prev_gz is not None
                and _matches(prev_dir / gz_key, prev_gz["sha256"])):
            # the identity bytes are in hand; only the compression is worth reusing (checked first,
            # so a damaged file of the previous release is written fresh here, never carried on)
            target.write_bytes(data)
            copy_file(prev_dir / gz_key, tmp / gz_key)
            return [(key, file_entry(data, ctype)), (gz_key, prev_gz)], True
        target.write_bytes(data)
        gz = gzip.compress(data, compresslevel=6, mtime=0)
        (tmp / gz_key).write_bytes(gz)
        return [(key, file_entry(data, ctype)), (gz_key, file_entry(gz, ctype, "gzip"))], False

    try:
        tmp.mkdir()  # inside the try: a full disk or inode table leaves no `.tmp-*` behind
        for key, _, _ in files:
            parent = (tmp / key).parent
            if parent not in made_dirs:
                parent.mkdir(parents=True, exist_ok=True)
                made_dirs.add(parent)
        # batches of 64 files per task: a thread pool ignores map's chunksize, and one future per
        # file costs more than writing a small file
        batches = [files[i:i + 64] for i in range(0, len(files), 64)]
        with ThreadPoolExecutor(max_workers=4) as pool:
            for done in pool.map(lambda batch: [write_one(item) for item in batch], batches):
                for pairs, linked in done:
                    counters["linked" if linked else "written"] += len(pairs)
                    for k, e in pairs:
                        entries[k] = e
                counters["done"] += len(done)
                if progress and (counters["done"] % 640 == 0 or counters["done"] == len(files)):
                    progress("writing files", counters["done"], len(files))

        manifest = Manifest(release_id, updated_at, model_version, facts.to_json(), dict(sorted(entries.items())))
        (tmp / MANIFEST_NAME).write_bytes(manifest.to_bytes())
        if progress:
            progress("verifying", 0, 1)
        problems = verify_release_dir(tmp, manifest)
        if problems:
            raise RenderError("release failed verification: " + "; ".join(problems[:5]))
        os.rename(tmp, final)
    except OSError as failed:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RenderError(_disk_problem(releases, failed)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        switch_current(out, release_id)
        catalogue.refresh_local(out, release_id, previous[1].release_id if previous else None)
    except OSError as failed:
        raise RenderError(_disk_problem(out, failed) + f" (release {release_id} is complete; "
                          f"`current` may still name the previous one)") from None
    total = sum(e["size"] for e in entries.values())
    bundle = {k: e for k, e in entries.items()
              if k.startswith(DOWNLOAD_FILE.key_prefix) and e["content_encoding"] is None}
    zips = [e["size"] for e in bundle.values() if e["content_type"] == "application/zip"]
    return RenderStats(release_id, len(entries), total, counters["written"], counters["linked"],
                       len(bundle), sum(e["size"] for e in bundle.values()), sum(zips), stamp_seconds,
                       len(cleaned), sum(bundle_seconds))


def _disk_problem(where: Path, e: OSError) -> str:
    """One line for a failed write: the operator's fix depends on which resource ran out."""
    hint = {errno.ENOSPC: "the disk (or its inode table) is full: free space, e.g. `malaria-risk prune --root "
                          f"{where.parent if where.name == 'releases' else where} --keep 2`",
            errno.EDQUOT: "the disk quota is used up",
            errno.EROFS: "the file system is read-only",
            errno.EACCES: "permission denied",
            errno.EMFILE: "too many open files"}.get(e.errno or 0, e.strerror or type(e).__name__)
    return f"cannot write the release under {where}: {hint}; nothing was switched"


def switch_current(out: Path, release_id: str) -> None:
    """Point `current` at a release atomically: a new symlink renamed over the old one."""
    if not (out / "releases" / release_id / MANIFEST_NAME).exists():
        raise RenderError(f"no complete release {release_id}")
    tmp_link = out / f".current-{os.getpid()}"
    if tmp_link.is_symlink() or tmp_link.exists():
        tmp_link.unlink()
    os.symlink(f"releases/{release_id}", tmp_link)
    os.replace(tmp_link, out / "current")
