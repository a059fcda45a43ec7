"""A release on disk: a manifest plus hard links into the store, switched into place atomically.

    <root>/releases/<id>/manifest.json      what the release holds (size, SHA-256, type of each file)
    <root>/releases/<id>/<key>              a hard link to objects/<sha256>: a plain file to the edge
    <root>/current -> releases/<id>          the release being served
    <root>/sparse/<id>/                      a release whose unchanged files only the bucket holds
                                             (the scheduled job's; never served nor switched to)

A release is assembled in `releases/.tmp-<id>-<pid>/`, checked against its manifest, and
renamed into place; only then does `current` move (one `rename` of a symlink). A killed
build leaves its temporary directory, which the next build removes; the objects it had
written stay in the store and are linked, not written again, by the next run. This module
knows nothing of which releases are kept (`pipeline.release.catalogue`) nor of documents
(`pipeline.release.render`).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge.routes import DOWNLOAD_FILE, PRECOMPRESSED_SUFFIXES
from pipeline.errors import RenderError, StaleReuse
from pipeline.release.manifest import MANIFEST_NAME, Manifest, file_entry
from pipeline.release.reuse import Linked
from pipeline.release.store import Store, _pid_alive, sha256_hex

Progress = Callable[[str, int, int], None]
# Threads storing and linking files. Most of the work is system calls and hashing, which release the
# GIL, so a second thread overlaps them; more threads only contend for the GIL between calls (a futex
# handoff per call): on the 2-core development machine a new month's write took 6.2-6.6 CPU s with
# 4 threads, 4.3-5.6 with 2 and 3.9-4.6 with 1, and 3.8-4.0, 3.0-3.4 and 4.0-4.7 s of wall time.
WRITERS = 2
File = tuple[str, str, bytes | Linked]  # (key, content type, identity bytes or the previous release's object)


@dataclass
class Written:
    entries: dict[str, dict[str, Any]]
    written: int = 0  # objects written now (new bytes)
    linked: int = 0  # files linked to objects already in the store
    cleaned: int = 0  # temporary directories of killed builds removed
    bundle_seconds: list[float] = field(default_factory=list)
    relinked: int = 0  # files of a release already in place replaced by the checked object (a rebuild)
    # files recorded in the manifest whose bytes only the bucket holds (a sparse release, `write_release`)
    absent: list[str] = field(default_factory=list)


def current_release_id(root: Path) -> str | None:
    """The release `current` names (even when its directory is gone), or None without a link."""
    try:
        return Path(os.readlink(Path(root) / "current")).name
    except OSError:
        return None


def current_manifest(out: Path) -> tuple[Path, Manifest] | None:
    link = out / "current"
    if not link.is_symlink():
        return None
    target = (out / os.readlink(link)).resolve()
    try:
        return target, Manifest.load(target)
    except (OSError, ValueError, KeyError):
        return None


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
            path.unlink()
        removed.append(path.name)
    return removed


def gzip_known(manifest: Manifest | None) -> dict[str, dict[str, Any]]:
    """identity SHA-256 -> the manifest entry of its gzip copy, from a release's manifest:
    what lets a file unchanged since that release skip its compression."""
    return gzip_known_files(manifest.files) if manifest is not None else {}


def gzip_known_files(files: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["sha256"]: dict(files[k + ".gz"]) for k, e in files.items()
            if e.get("content_encoding") is None and k + ".gz" in files}


def write_release(out: Path, release_id: str, files: list[File], manifest_of: Callable[[dict], Manifest],
                  progress: Progress | None = None, known_gzip: dict[str, dict[str, Any]] | None = None,
                  in_bucket: frozenset[tuple[str, str]] | None = None,
                  digests: Mapping[str, str] | None = None) -> Written:
    """Store every file's bytes (and a gzip copy) and link them into `releases/<release_id>`.

    `manifest_of(entries)` makes the manifest once the entries are known. A release already
    in place with the same files (a forced rebuild of unchanged inputs) is kept as it is.

    `in_bucket` (the objects of the bucket's live release, when that is the previous release: the
    scheduled job in a fresh container) lets a key-matched file, a file made again with bytes that
    release held, and the gzip twin of such bytes be recorded in the manifest without bytes here:
    fetching them to link them would cost what rendering them does, and the job's publish needs none
    of them. Such a release is
    *sparse*: it goes to `sparse/<release_id>`, where no local command looks for releases (serve,
    `current`, verify, prune, bundles, audit), and only `pipeline.publish.s3.open_sparse_release`
    opens it, for a publish that first proves every absent object is in the bucket.

    `digests` (file key -> SHA-256 of its bytes, as the release id hashed them) spares hashing them again.
    """
    store = Store(out)
    releases = out / "releases"
    try:
        releases.mkdir(parents=True, exist_ok=True)
        store.dir.mkdir(parents=True, exist_ok=True)
    except OSError as failed:
        raise RenderError(disk_problem(releases, failed)) from None
    result = Written({}, cleaned=len(clean_killed_builds(out)))
    gz_of = dict(known_gzip or {})
    hashed = digests or {}
    final = releases / release_id
    tmp = releases / f".tmp-{release_id}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)

    base = os.fspath(tmp) + os.sep
    absent_lock = threading.Lock()

    def one(item: File) -> tuple[list[tuple[str, dict]], int, int]:
        key, ctype, data = item
        started = time.thread_time()
        dst = base + key
        if isinstance(data, Linked) and in_bucket is not None and (data.sha256, ctype) in in_bucket:
            # the bucket's live release holds this object (and its twin was recorded with it): the manifest
            # entries are that release's; no byte is read or written here
            pairs = [(key, {"size": data.size, "sha256": data.sha256, "content_type": ctype,
                            "content_encoding": None})]
            if not key.endswith(PRECOMPRESSED_SUFFIXES):
                if data.gz is None:
                    raise StaleReuse(f"{key}: the live release records no gzip twin for it")
                pairs.append((key + ".gz", {"size": data.gz[1], "sha256": data.gz[0], "content_type": ctype,
                                            "content_encoding": "gzip"}))
            with absent_lock:
                result.absent.extend(k for k, _ in pairs)
            return pairs, 0, 0
        if isinstance(data, Linked):
            # made from the same inputs as the previous release's file (pipeline.release.reuse): its
            # object, checked by its contents, is linked; nothing is serialised or compressed
            if not store.sound(data.sha256, data.size):
                raise StaleReuse(f"{key}: object {data.sha256[:16]} is missing or damaged")
            digest, new = data.sha256, False
            store.link(digest, dst)
            pairs = [(key, {"size": data.size, "sha256": digest, "content_type": ctype, "content_encoding": None})]
            if data.gz is not None:
                gz_of.setdefault(digest, {"size": data.gz[1], "sha256": data.gz[0], "content_type": ctype,
                                          "content_encoding": "gzip"})
        else:
            if in_bucket is not None:  # made again with the live release's bytes: its object, and its twin
                digest = hashed.get(key) or sha256_hex(data)
                known = gz_of.get(digest)
                plain = key.endswith(PRECOMPRESSED_SUFFIXES)
                if (digest, ctype) in in_bucket and (plain or known is not None):
                    pairs = [(key, file_entry(data, ctype, digest=digest))]
                    if known is not None and not plain:
                        pairs.append((key + ".gz", {**known, "content_type": ctype}))
                    with absent_lock:
                        result.absent.extend(k for k, _ in pairs)
                    return pairs, 0, 0
            digest, new = store.put(data, hashed.get(key))
            store.link(digest, dst)
            pairs = [(key, file_entry(data, ctype, digest=digest))]
        written = int(new)
        if not key.endswith(PRECOMPRESSED_SUFFIXES):  # already compressed: no gzip sibling (the edge relies on it)
            gz_key = key + ".gz"
            known = gz_of.get(digest)
            if known is not None and in_bucket is not None:  # bytes the live release held: its twin's entry
                pairs.append((gz_key, {**known, "content_type": ctype}))  # (twins are not published)
                with absent_lock:
                    result.absent.append(gz_key)
                return pairs, written, 1 - written
            if known is not None and store.sound(known["sha256"], int(known["size"])):
                store.link(known["sha256"], dst + ".gz")
                pairs.append((gz_key, {**known, "content_type": ctype}))
            else:
                if isinstance(data, Linked):  # the twin is lost: compress the checked object's bytes again
                    data = store.path(digest).read_bytes()
                gz = gzip.compress(data, compresslevel=6, mtime=0)
                gz_sha, gz_new = store.put(gz)
                store.link(gz_sha, dst + ".gz")
                pairs.append((gz_key, file_entry(gz, ctype, "gzip", digest=gz_sha)))
                written += int(gz_new)
        if key.startswith(DOWNLOAD_FILE.key_prefix):
            result.bundle_seconds.append(time.thread_time() - started)
        return pairs, written, len(pairs) - written

    try:
        tmp.mkdir()  # inside the try: a full disk or inode table leaves no `.tmp-*` behind
        for parent in sorted({(tmp / key).parent for key, _, _ in files}):
            parent.mkdir(parents=True, exist_ok=True)
        done = 0
        # batches of 64 files per task: one future per file costs more than linking a small file
        batches = [files[i:i + 64] for i in range(0, len(files), 64)]
        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            for batch in pool.map(lambda b: [one(item) for item in b], batches):
                for pairs, written, linked in batch:
                    result.written += written
                    result.linked += linked
                    result.entries.update(pairs)
                done += len(batch)
                if progress and (done % 640 == 0 or done == len(files)):
                    progress("writing files", done, len(files))
        manifest = manifest_of(dict(sorted(result.entries.items())))
        if result.absent:  # an earlier sparse release is of no further use (it is never served): replaced
            final = out / "sparse" / release_id
            shutil.rmtree(final.parent, ignore_errors=True)
        if final.exists():  # the same inputs and code built this release before: keep it
            try:
                same = Manifest.load(final).files == manifest.files
            except (OSError, ValueError, KeyError):
                same = False
            if not same:
                shutil.rmtree(tmp)
                raise RenderError(f"release {release_id} already exists with other files; "
                                  f"remove {final} or run `malaria-risk verify --root {out} --release {release_id}`")
            # every file of `tmp` is a link to an object checked just now; a file of the release in
            # place that is another inode (an object damaged and healed since, or a file lost) is
            # relinked, one atomic rename per file, so a rebuild repairs it rather than keeping it
            result.relinked = _relink_changed(tmp, final, manifest.files)
            shutil.rmtree(tmp)
            return result
        (tmp / MANIFEST_NAME).write_bytes(manifest.to_bytes())
        if progress:
            progress("verifying", 0, 1)
        # every file is a link made here to an object whose bytes were hashed on their way into
        # the store (or, reused, found as stored): the tree is its manifest by construction, which
        # a count confirms without a second walk of 20,000 files (`verify` reads every byte)
        if len(result.entries) != len(files) + sum(not k.endswith(PRECOMPRESSED_SUFFIXES) for k, _, _ in files):
            raise RenderError("release failed verification: files and manifest differ in number")
        final.parent.mkdir(exist_ok=True)
        os.rename(tmp, final)
    except OSError as failed:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RenderError(disk_problem(releases, failed)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return result


def _relink_changed(fresh: Path, final: Path, files: dict[str, Any]) -> int:
    """Point each file of `final` whose inode differs from `fresh`'s at `fresh`'s (a link renamed over it)."""
    changed = 0
    for key in files:
        src, dst = fresh / key, final / key
        try:
            if os.stat(src).st_ino == os.stat(dst).st_ino:
                continue
        except FileNotFoundError:
            pass
        tmp_link = dst.with_name(f".relink-{dst.name}-{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            tmp_link.unlink()
        os.link(src, tmp_link)
        os.replace(tmp_link, dst)
        changed += 1
    return changed


def remove_release(root: Path, release_id: str) -> None:
    """Remove one release directory (its links); the objects stay until `Store.collect`."""
    target = Path(root) / "releases" / release_id
    if target.is_symlink():  # replaced by a link since it was listed: never follow it
        raise OSError(f"{target} is now a link")
    shutil.rmtree(target)


def disk_problem(where: Path, e: OSError) -> str:
    """One line for a failed write: the operator's fix depends on which resource ran out."""
    hint = {errno.ENOSPC: "the disk (or its inode table) is full: free space, e.g. `malaria-risk prune --root "
                          f"{where.parent if where.name == 'releases' else where} --keep 2`",
            errno.EDQUOT: "the disk quota is used up",
            errno.EROFS: "the file system is read-only",
            errno.EACCES: "permission denied",
            errno.EMFILE: "too many open files"}.get(e.errno or 0)
    if hint is None:  # not a resource that ran out: name the file, so the cause can be found
        hint = e.strerror or type(e).__name__
        if e.filename is not None:
            hint += f" ({e.filename}{' -> ' + str(e.filename2) if e.filename2 is not None else ''})"
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


__all__ = ["sha256_hex"]
