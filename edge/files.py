"""What the gate needs of a release: its facts and, per file key, an entry (or None).

Kept apart from edge/release.py (the local server's manifest reader and release
follower) so the CDN function imports only this: the local module brings logging,
pathlib and file hashing, none of which the edge uses.
"""

# Annotations are evaluated, not postponed: a NamedTuple compiles each string annotation when the
# class is created, ~30 µs a field of the CDN function's cold start (docs/deploy.md#measurements).

from typing import NamedTuple, Protocol

from .routes import Facts

# The names index inside a release (edge/names.py): not a route, never served; read by the gate
# on an unknown state or LGA, for suggestions. Here so the CDN function names it without
# importing edge/names.py on its cold path.
NAMES_KEY = "edge/names.json"


class FileEntry(NamedTuple):
    key: str
    etag: str  # quoted strong validator
    content_type: str
    gzip_key: str | None  # the precompressed sibling, if the release has one
    gzip_etag: str | None
    # A bundle file's scopes as its release records them (the manifest, or the pointer at the CDN);
    # None where the release records none: a route file (its route's scope applies), a docs page,
    # or a bundle file of a release built before scopes were recorded (then it needs every scope).
    scopes: tuple[str, ...] | None = None


class ReleaseIndex(Protocol):
    """A release as the gate sees it. It may also have `names()`: the release's names index
    (edge.names.Names) or None, for suggestions on an unknown state or LGA (found with getattr, so
    the indexes that do not need it, such as a pinned release's bundle list, stay as they are)."""

    release_id: str
    facts: Facts

    def entry(self, key: str) -> FileEntry | None: ...


class PinnedReleases(Protocol):
    """Earlier releases still kept, looked up by id, so a cited release's bundle stays downloadable."""

    def pinned(self, release_id: str) -> ReleaseIndex | None: ...


class ReleaseList(NamedTuple):
    """The list of kept releases as stored beside the pointer: its bytes and a strong ETag."""

    body: bytes
    etag: str
