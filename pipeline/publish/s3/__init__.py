"""Publishing a rendered release to S3 (or any S3-compatible store) with boto3.

The bucket layout (`layout`) makes a half-published release invisible to clients:
release prefixes are immutable, and the one mutable object, `current.json`
(`pointer`), is switched only after every object of the new release has been
uploaded AND verified (size, SHA-256 metadata, content type, encoding, cache
policy) and its manifest written last (`upload`: the phases plan → upload →
verify → seal → switch, each a function there). A publish that dies halfway leaves the pointer on the previous release.

    layout    Target (bucket + prefix → keys), release ids, header constants
    client    make_client, botocore failures as one-line PublishErrors, retries, pool
    objects   listing, HEAD, delete; check_head (one object against its manifest entry)
    local     the release tree on disk, refused unless it is exactly its manifest
    pointer   current.json: read, build, compare-and-swap write
    index     the index layout: object names, the per-release index (what the edge resolves paths with)
    upload    publish_release and its phases
    remote    published releases: verify, list, rollback, prune

Everything is a plain function over a boto3 client so tests drive it against a
real S3 server; `pipeline.publish.cli` adds the operator's commands.
"""

from pipeline.errors import PointerConflict, PublishError
from pipeline.publish.s3.client import (
    DEFAULT_WORKERS,
    Progress,
    S3Client,
    describe_error,
    make_client,
    preflight,
    retrying,
    run_pool,
    s3_errors,
)
from pipeline.publish.s3.index import (
    index_documents,
    object_name,
    object_suffix,
    published_files,
    release_layout,
    shard_counts,
    stored_objects,
)
from pipeline.publish.s3.layout import (
    CACHE_IMMUTABLE,
    CACHE_POINTER,
    JSON,
    POINTER_FORMAT,
    POINTER_NAME,
    RELEASE_ID_RE,
    SHA_META,
    Target,
    check_release_id,
)
from pipeline.publish.s3.local import (
    LocalRelease,
    check_release_tree,
    expected_objects,
    open_local_release,
    open_sparse_release,
    resolve_release_dir,
)
from pipeline.publish.s3.objects import Expected, Listed, check_head, head_object, list_objects
from pipeline.publish.s3.pointer import Pointer, pointer_document, read_pointer, write_pointer
from pipeline.publish.s3.remote import (
    ReleaseInfo,
    list_releases,
    prune,
    prune_plan,
    read_remote_manifest,
    rollback,
    verify_remote_release,
)
from pipeline.publish.s3.upload import Plan, PublishResult, publish_release

__all__ = [
    "CACHE_IMMUTABLE", "CACHE_POINTER", "DEFAULT_WORKERS", "JSON", "POINTER_FORMAT", "POINTER_NAME",
    "RELEASE_ID_RE", "SHA_META", "Expected", "Listed", "LocalRelease", "Plan", "Pointer",
    "PointerConflict", "Progress", "PublishError", "PublishResult", "ReleaseInfo", "S3Client",
    "Target", "check_head", "check_release_id", "check_release_tree", "describe_error",
    "expected_objects", "head_object", "list_objects", "list_releases", "make_client",
    "open_local_release", "open_sparse_release", "pointer_document", "preflight", "prune", "prune_plan",
    "publish_release", "read_pointer", "read_remote_manifest", "resolve_release_dir", "retrying",
    "rollback", "run_pool", "s3_errors", "verify_remote_release",
    "write_pointer", "index_documents", "object_name", "object_suffix", "published_files", "release_layout", "shard_counts",
    "stored_objects",
]  # fmt: skip
