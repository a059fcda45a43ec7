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


# --- the index layout (layout 2): each path resolved through a per-release index ------------------
# A release published in layout 2 has no object per path. `releases/<id>/index.json` names its index
# shards (`shards`: route family -> how many), `releases/<id>/index/<family>/<n>.json` maps each file
# key of the family to its object, `[sha256, size, suffix]`, stored once at `objects/<sha256><suffix>`
# with the file's headers. The publisher (pipeline/publish/s3/index.py) and the edge (edge/cloudfront.py)
# both shard with the functions below; docs/operations.md#what-is-in-the-bucket.

LAYOUT_COPIES = 1  # every file a copy at releases/<id>/<key> (a pointer without "layout")
LAYOUT_INDEX = 2
INDEX_ROOT = "index.json"


def index_family(key: str) -> str:
    """A file key's route family, its first two folders (`v1/risk` of `v1/risk/lgas/KN/2024-01.json`);
    `_` for a file at the top of the release."""
    parts = key.split("/")[:-1]
    return "/".join(parts[:2]) or "_"


def index_shard(key: str, family: str, count: int) -> str:
    """The shard file of `key` within its release (`index/v1/risk/3.json`): the family's files are
    spread over `count` shards by CRC-32 of the key, so no shard grows with the release."""
    from zlib import crc32

    return f"index/{family}/{crc32(key.encode()) % count if count > 1 else 0}.json"
