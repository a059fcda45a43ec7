"""What the gate knows about the release it serves: its facts and its files.

The local server reads `build/current/manifest.json`; the CDN adapter reads the
published pointer. Both give the gate the same two things: `facts` (to validate
values) and `entry(key)` (to set ETag and content type, or learn a file is absent).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .routes import DOWNLOAD_FILE, RELEASE_ID_RE, Facts


@dataclass(frozen=True)
class FileEntry:
    key: str
    etag: str  # quoted strong validator
    content_type: str
    gzip_key: str | None  # the precompressed sibling, if the release has one
    gzip_etag: str | None


class ReleaseIndex(Protocol):
    release_id: str
    facts: Facts

    def entry(self, key: str) -> FileEntry | None: ...


class PinnedReleases(Protocol):
    """Earlier releases still kept, looked up by id, so a cited release's bundle stays downloadable."""

    def pinned(self, release_id: str) -> ReleaseIndex | None: ...


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

    def entry(self, key: str) -> FileEntry | None:
        return self.entries.get(key)

    @classmethod
    def from_manifest(cls, doc: dict[str, Any], root: Path | None = None, only_prefix: str = "") -> ManifestRelease:
        """`only_prefix` keeps just the entries under it (a pinned release needs only its bundle)."""
        files = doc["files"]
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
            )
        return cls(doc["release_id"], Facts.from_json(doc["facts"]), entries, root)


class LocalReleases:
    """Follows `<root>/current` so a new build is served without a restart.

    The symlink is re-read at most once a second; a switch is atomic because the
    renderer replaces the link only after the release is complete and verified.
    """

    def __init__(self, root: Path, check_every: float = 1.0):
        self.root = Path(root)
        self.check_every = check_every
        self._lock = threading.Lock()
        self._current: ManifestRelease | None = None
        self._target: str | None = None
        self._checked = 0.0
        self._pinned: dict[str, ManifestRelease] = {}

    def current(self) -> ManifestRelease:
        now = time.monotonic()
        if self._current is not None and now - self._checked < self.check_every:
            return self._current
        with self._lock:
            link = self.root / "current"
            try:
                target = os.readlink(link)
            except OSError as e:
                raise FileNotFoundError(f"no release at {link}: run `malaria-risk build` first") from e
            if target != self._target or self._current is None:
                release_dir = (self.root / target).resolve()
                doc = json.loads((release_dir / "manifest.json").read_bytes())
                self._current = ManifestRelease.from_manifest(doc, release_dir)
                self._target = target
            self._checked = now
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
