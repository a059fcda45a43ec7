"""Where every object of a published release lives in the bucket.

The index layout (2, what `publish` writes; pipeline/publish/s3/index.py):

    <prefix>/objects/<sha256><suffix>               the bytes with the file's headers, uploaded once whatever
                                                    release holds them; immutable, cached for a year
    <prefix>/releases/<release_id>/index.json       the release's index shards by route family
    <prefix>/releases/<release_id>/index/...        file key -> [sha256, size, suffix]
    <prefix>/releases/<release_id>/manifest.json    written after its objects and index
    <prefix>/current.json                           the one mutable object: which release is live, its layout

The copy layout (1, releases published before): `releases/<release_id>/<key>` a server-side copy of
the header-less `objects/<sha256>` with the file's headers. The edge (`edge/cloudfront.py`, the same
shard functions in edge/files.py) reads both; CloudFront may read `objects/*` and `releases/*`
(deploy/aws.py's bucket policy). Keep them in step. Costs: docs/operations.md#what-a-month-of-publishing-costs.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge.routes import PUBLISHED_RELEASE_ID_RE
from pipeline.errors import PublishError

CACHE_IMMUTABLE = "public, max-age=31536000, immutable"
# Short enough that a switch (or a rollback) reaches every client within seconds,
# long enough that a CDN does not ask the bucket for the pointer on every request.
CACHE_POINTER = "public, max-age=10, must-revalidate"
POINTER_NAME = "current.json"
POINTER_FORMAT = 1
SHA_META = "sha256"  # sent as x-amz-meta-sha256
JSON = "application/json"
RELEASE_ID_RE = PUBLISHED_RELEASE_ID_RE


@dataclass(frozen=True)
class Target:
    """A bucket and key prefix; every key this package writes is built here."""

    bucket: str
    prefix: str = ""

    @classmethod
    def of(cls, bucket: str, prefix: str | None = None) -> Target:
        clean = "/".join(part for part in (prefix or "").split("/") if part)
        if any(part in (".", "..") for part in clean.split("/")):
            raise PublishError(f"prefix {prefix!r} may not contain '.' or '..' segments")
        return cls(bucket, clean)

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    @property
    def releases_prefix(self) -> str:
        return self.key("releases/")

    def release_prefix(self, release_id: str) -> str:
        return self.key(f"releases/{release_id}/")

    def object_key(self, release_id: str, rel: str) -> str:
        return self.release_prefix(release_id) + rel

    @property
    def objects_prefix(self) -> str:
        return self.key("objects/")

    def content_key(self, sha256: str) -> str:
        """Where the copy layout (1) kept a file's bytes, header-less: the source of its copies."""
        return self.objects_prefix + sha256

    def stored_key(self, name: str) -> str:
        """A stored object of the index layout (2): `objects/<sha256><suffix>` (pipeline/publish/s3/index.py)."""
        return self.objects_prefix + name

    @property
    def pointer_key(self) -> str:
        return self.key(POINTER_NAME)

    def url(self, key: str = "") -> str:
        return f"s3://{self.bucket}/{key}"


def check_release_id(release_id: str) -> str:
    """Release ids become one key segment; anything else could escape the layout."""
    if not RELEASE_ID_RE.match(release_id):
        raise PublishError(
            f"release id {release_id!r} is not a safe key segment ([A-Za-z0-9._-], no '/')"
        )
    return release_id
