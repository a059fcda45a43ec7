"""What the gate knows about the release it serves: its facts and its files.

The local server reads `build/current/manifest.json`; the CDN adapter reads the
published pointer. Both give the gate the same two things: `facts` (to validate
values) and `entry(key)` (to set ETag and content type, or learn a file is absent).
Those two types are in edge/files.py; this module is the local server's half (manifest,
release follower, file checks) and is never imported by the CDN function.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# the gate's view of a release lives in edge/files.py (the edge imports only that); re-exported here
from .files import FileEntry as FileEntry
from .files import PinnedReleases as PinnedReleases
from .files import ReleaseIndex as ReleaseIndex
from .files import ReleaseList
from .routes import DOWNLOAD_FILE, PUBLISHED_RELEASE_ID_RE, RELEASE_ID_RE, RELEASE_LIST_NAME, Facts

MANIFEST_NAME = "manifest.json"
log = logging.getLogger("malaria_risk.release")


def etag_of(sha256_hex: str) -> str:
    """A strong ETag: 128 bits of the content hash is plenty to tell representations apart."""
    return f'"{sha256_hex[:32]}"'


@dataclass
class ManifestRelease:
    """A release described by a manifest document (already parsed)."""

    release_id: str
    facts: Facts
    entries: dict[str, FileEntry]
    root: Path | None = None
    digests: dict[str, str] = field(default_factory=dict)  # every file (identity and gzip) -> sha256 hex
    _names: Any = field(default=None, repr=False, compare=False)

    def entry(self, key: str) -> FileEntry | None:
        return self.entries.get(key)

    def names(self) -> Any:
        """The release's names index (edge.names.Names), read on first use; None if it has none."""
        if self._names is None:
            from .names import NAMES_KEY, Names

            self._names = False
            if self.root is not None and NAMES_KEY in self.digests:
                try:
                    body = (self.root / NAMES_KEY).read_bytes()
                    # the same check as every file served (edge.local.app.FileCache): bytes that are
                    # not the manifest's never reach an answer
                    if hashlib.sha256(body).hexdigest() != self.digests[NAMES_KEY]:
                        raise ValueError("bytes do not match the manifest's sha256 (damaged after the build)")
                    self._names = Names.from_bytes(body)
                except (OSError, ValueError, TypeError) as e:
                    log.warning("release %s: names index unreadable (%s); no suggestions", self.release_id, e)
        return self._names or None

    @classmethod
    def from_manifest(cls, doc: dict[str, Any], root: Path | None = None, only_prefix: str = "") -> ManifestRelease:
        """`only_prefix` keeps just the entries under it (a pinned release needs only its bundle)."""
        files: dict[str, dict[str, Any]] = doc["files"]
        entries: dict[str, FileEntry] = {}
        for key, e in files.items():
            if e.get("content_encoding") or not key.startswith(only_prefix):
                continue
            gz = files.get(key + ".gz")
            entries[key] = FileEntry(
                key=key,
                etag=etag_of(e["sha256"]),
                content_type=e["content_type"],
                gzip_key=key + ".gz" if gz else None,
                gzip_etag=etag_of(gz["sha256"]) if gz else None,
                scopes=tuple(e["scopes"]) if isinstance(e.get("scopes"), list) else None,
            )
        digests = {key: str(e["sha256"]) for key, e in files.items()}
        return cls(doc["release_id"], Facts.from_json(doc["facts"]), entries, root, digests)


class ReleaseUnavailable(Exception):
    """No release under the build root can be served (for the operator; may name paths)."""


def _sha256_file(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


LINK_PROBLEM = "a link, not a file: "


def verify_release_files(release_dir: Path, files: dict[str, dict[str, Any]], checksums: bool = True,
                         strays: bool = True) -> list[str]:
    """Every difference between a release directory and its manifest's `files`; empty means sound.

    Missing files, wrong sizes, wrong checksums (unless `checksums` is false: a quick
    structural check) and files the manifest does not list. The renderer, `verify`
    and the local server's fallback all use this one check. `strays=False` leaves out
    files the manifest does not list: nothing serves them, so they do not make a release
    unservable (publishing and `verify` still refuse them).
    """
    problems: list[str] = []
    on_disk: set[str] = set()
    for dirpath, _, names in os.walk(release_dir):
        rel = os.path.relpath(dirpath, release_dir)
        for name in names:
            on_disk.add(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/"))
    on_disk.discard(MANIFEST_NAME)
    base = str(release_dir)
    for key, entry in files.items():
        if key not in on_disk:
            problems.append(f"missing: {key}")
            continue
        # one lstat a file, on a string path: a publish checks some 24,000 files this way, and
        # pathlib and a second stat were half its cost
        st = os.lstat(os.path.join(base, key))
        if stat.S_ISLNK(st.st_mode):
            # a release holds regular files only: a link may point anywhere, so its bytes are
            # not the release's even when they happen to match today
            problems.append(f"{LINK_PROBLEM}{key}")
            continue
        if st.st_size != entry["size"]:
            problems.append(f"size differs: {key} ({st.st_size} on disk, {entry['size']} in manifest)")
        elif checksums and _sha256_file(release_dir / key) != entry["sha256"]:
            problems.append(f"checksum differs: {key}")
    if strays:
        for key in sorted(on_disk - files.keys()):
            problems.append(f"not in manifest: {key}")
    return problems


def load_release_dir(release_dir: Path, checksums: bool = False) -> ManifestRelease:
    """A release directory as the gate sees it, after checking it against its manifest.

    Raises ReleaseUnavailable with the reason when the manifest is unreadable or the
    files do not match it (sizes always; contents too when `checksums`).
    """
    try:
        doc = json.loads((release_dir / MANIFEST_NAME).read_bytes())
        release = ManifestRelease.from_manifest(doc, release_dir)
        problems = verify_release_files(release_dir, doc["files"], checksums, strays=False)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ReleaseUnavailable(f"release {release_dir.name}: unreadable manifest ({type(e).__name__}: {e})") from e
    if problems:
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise ReleaseUnavailable(f"release {release_dir.name}: {'; '.join(problems[:3])}{more}")
    return release


def release_ids(root: Path) -> list[str]:
    """Completed releases under `<root>/releases`, newest first (ids start with their UTC time).

    Only what is certainly a release: a real directory (never a link, which prune would follow
    out of the build root) named as the renderer names releases, or, for a release named by
    hand, a publishable id with a manifest inside. Anything else an operator keeps there (a
    note, a backup folder) is neither verified, nor counted as kept, nor removed.
    """
    base = Path(root) / "releases"
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    ids = []
    for e in entries:
        if e.name.startswith(".") or not e.is_dir(follow_symlinks=False):
            continue
        if RELEASE_ID_RE.fullmatch(e.name) or (
                PUBLISHED_RELEASE_ID_RE.fullmatch(e.name)
                and (base / e.name / MANIFEST_NAME).is_file()
                and not (base / e.name / MANIFEST_NAME).is_symlink()):
            ids.append(e.name)
    return sorted(ids, reverse=True)


def fallback_release(root: Path, skip: str | None) -> ManifestRelease | None:
    """The release a local server serves when `current` is broken: the newest other release under
    `<root>/releases` that verifies in full (every SHA-256). `prune` keeps it by the same rule
    (`serving`), so a server on a fallback never loses the release it serves."""
    for rid in release_ids(root):
        if rid == skip:
            continue
        try:
            return load_release_dir(Path(root) / "releases" / rid, checksums=True)
        except ReleaseUnavailable as e:
            log.warning("not falling back to %s: %s", rid, e)
    return None


def serving(root: Path) -> list[str]:
    """The releases a local server over `root` serves now, by the server's own rule: the one
    `current` names, and, when that one is broken, the fallback (`fallback_release`)."""
    root = Path(root)
    try:
        target: str | None = os.readlink(root / "current")
    except OSError:
        target = None
    name = Path(target).name if target else None
    if target is not None:
        try:
            load_release_dir((root / target).resolve())
            return [name] if name else []
        except ReleaseUnavailable:
            pass
    fallback = fallback_release(root, name)
    return [n for n in (name, fallback.release_id if fallback else None) if n]


class LocalReleases:
    """Follows `<root>/current` so a new build is served without a restart.

    The symlink is re-read at most once a second; a switch is atomic because the
    renderer replaces the link only after the release is complete and verified. When
    `current` is broken (dangling, unreadable manifest, files missing or of the wrong
    size) the newest other release that verifies in full (every checksum) is served
    instead, with a log line, until `current` is sound again; with no such release,
    `current()` raises ReleaseUnavailable and the server answers a problem that names
    no path. Contents are checked file by file as they are first served (see the app's
    file cache), since hashing a whole release on every switch would stall a worker.
    """

    def __init__(self, root: Path, check_every: float = 1.0):
        self.root = Path(root)
        self.check_every = check_every
        self._lock = threading.Lock()
        self._current: ManifestRelease | None = None
        self._target: str | None = None
        self._checked = 0.0
        self._pinned: dict[str, ManifestRelease] = {}
        self._failure: ReleaseUnavailable | None = None
        self.fallback_reason: str | None = None  # why `current` is not what is served, if it is not
        self._broken: tuple[int, int, int] | None = None  # the broken manifest's identity, to see it repaired
        self._list: tuple[tuple[int, int, int], ReleaseList] | None = None
        # While `current` is broken (on a fallback, or nothing to serve) it is checked again every
        # `recheck_every` seconds even if its manifest did not change: a lost file put back makes it
        # whole again. A file the served release lost (`lost_file`) asks for the same check.
        self.recheck_every = 10.0
        self._retry_at = 0.0
        self._suspect = False

    def lost_file(self) -> None:
        """A file of the release being served could not be read (removed, or its release pruned):
        the next request after `recheck_every` re-checks `current` and, if it is still broken, the
        fallback (a re-check at most that often, so a burst of failures costs one)."""
        self._suspect = True
        self._checked = 0.0

    def release_list(self) -> ReleaseList | None:
        """`<root>/releases.json` (written by builds and prunes), re-read when the file changes."""
        path = self.root / RELEASE_LIST_NAME
        try:
            st = os.stat(path)
            sig = (st.st_ino, st.st_mtime_ns, st.st_size)
            hit = self._list
            if hit is not None and hit[0] == sig:
                return hit[1]
            body = path.read_bytes()
        except OSError:
            return None
        listing = ReleaseList(body, etag_of(hashlib.sha256(body).hexdigest()))
        self._list = (sig, listing)
        return listing

    def current(self) -> ManifestRelease:
        now = time.monotonic()
        if now - self._checked < self.check_every:
            if self._current is not None:
                return self._current
            if self._failure is not None:
                raise self._failure
        with self._lock:
            link = self.root / "current"
            try:
                target: str | None = os.readlink(link)
            except OSError:
                target = None
            degraded = self.fallback_reason is not None
            if target != self._target or (self._current is None and self._failure is None) or (
                    degraded and self._signature(target) != self._broken) or (
                    (degraded or self._suspect) and now >= self._retry_at):
                self._suspect = False
                self._retry_at = now + self.recheck_every
                self._switch(link, target)
            self._checked = now
            if self._current is None:
                assert self._failure is not None
                raise self._failure
            return self._current

    def pinned(self, release_id: str) -> ManifestRelease | None:
        """A kept release's bundle files: `<root>/releases/<id>/` while its manifest is there.

        The manifest's presence is checked on every call, so a pruned release stops being
        served at once; its parsed entries are remembered (a release never changes in place).
        """
        if not RELEASE_ID_RE.fullmatch(release_id):
            return None
        release_dir = self.root / "releases" / release_id
        manifest = release_dir / "manifest.json"
        if not manifest.is_file():
            self._pinned.pop(release_id, None)
            return None
        hit = self._pinned.get(release_id)
        if hit is None:
            try:
                doc = json.loads(manifest.read_bytes())
            except (OSError, ValueError):
                return None
            if doc.get("release_id") != release_id:
                return None
            hit = ManifestRelease.from_manifest(doc, release_dir, only_prefix=DOWNLOAD_FILE.key_prefix)
            if len(self._pinned) >= 16:
                self._pinned.clear()
            self._pinned[release_id] = hit
        return hit
    def _signature(self, target: str | None) -> tuple[int, int, int] | None:
        """What a repair of a broken `current` would change: its manifest's identity."""
        if target is None:
            return None
        try:
            st = os.stat(self.root / target / MANIFEST_NAME)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _switch(self, link: Path, target: str | None) -> None:
        self._target = target
        self._broken = self._signature(target)
        reason = f"{link} does not exist" if target is None else None
        if target is not None:
            try:
                self._current = load_release_dir((self.root / target).resolve())
                self._failure = None
                if self.fallback_reason is not None:
                    log.warning("%s is sound again; serving release %s", link, self._current.release_id)
                self.fallback_reason = None
                return
            except ReleaseUnavailable as e:
                reason = f"{link} -> {target} is broken: {e}"
        assert reason is not None
        kept = self._current if self.fallback_reason is not None else None
        if kept is not None and kept.root is not None and kept.release_id != (Path(target).name if target else None):
            try:  # a re-check while on a fallback: keep it while it is still whole (sizes), no re-hash
                load_release_dir(kept.root)
                self.fallback_reason = reason
                return
            except ReleaseUnavailable as e:
                log.warning("the fallback release %s is no longer whole: %s", kept.release_id, e)
        release = fallback_release(self.root, Path(target).name if target else None)
        if release is not None:
            self._current, self._failure, self.fallback_reason = release, None, reason
            log.warning("%s; serving release %s instead, the newest that verifies", reason, release.release_id)
            return
        self._current = None
        self.fallback_reason = reason
        self._failure = ReleaseUnavailable(
            f"{reason}, and no other release under {self.root / 'releases'} verifies: "
            "run `malaria-risk build`, or point current at a sound release")
        log.error("%s", self._failure)
