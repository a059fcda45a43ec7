"""The scheduled job's build state, kept in the bucket between runs (docs/operations.md#the-jobs-state).

The job starts in a fresh container: without this, every daily run would rebuild the live
release from unchanged inputs and every new month would refit what did not change. Two
things carry over, under the ops prefix (never served: CloudFront reads `objects/*` and `releases/*` only):

    <prefix>/ops/state/state.json             which release the last successful run published, from
                                              which build key, and the fit cache's entries
    <prefix>/ops/state/objects/<sha256>       a fit cache entry's bytes, named by their SHA-256, or the
                                              gzip of the document keys of the release published
                                              (pipeline.release.reuse)

Trust is checked like a release's: an entry is restored only when its bytes hash to the
name the state document gives them (a damaged entry is skipped, so its fit is computed
again and the next save replaces it); a state document that is unreadable, of another
format, or written for another bucket or prefix is ignored as a whole (a full build).
The build key recorded in it is used only when the live pointer names the same release
and manifest checksum; the cache entries themselves are keyed by the content of their
inputs and code (pipeline.cache), so an entry that does not fit this build is never read.
The document keys are used only under the same condition as the build key (the live pointer names
their release and manifest checksum) and only with the manifest the bucket holds for that release: a
new month then records the files made from unchanged inputs instead of making them (a sparse release,
pipeline.release.tree), and its publish confirms each such object is in the bucket.
Whoever may write the ops prefix may also replace the job's code (`ops/source.zip`): the
pickled fits trust nothing that the job does not already trust.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from botocore.exceptions import ClientError

from pipeline.publish.s3.client import S3Client, is_missing, retrying, s3_errors
from pipeline.publish.s3.layout import JSON, SHA_META, Target
from pipeline.publish.s3.objects import delete_keys, list_objects

STATE_FORMAT = "malaria-risk job state 1"
CACHE_ENTRY_RE = re.compile(r"^[a-z0-9_.]+(?:-[a-z0-9_.]+)*-[0-9a-f]{32}\.pickle$")
SHA_RE = re.compile(r"^[0-9a-f]{64}$")
PRIVATE = "private, no-store"


def state_prefix(target: Target) -> str:
    return target.key("ops/state/")


def state_key(target: Target) -> str:
    return state_prefix(target) + "state.json"


def entry_key(target: Target, sha256: str) -> str:
    return state_prefix(target) + "objects/" + sha256


@dataclass
class JobState:
    release_id: str | None = None
    manifest_sha256: str | None = None
    build_key: str | None = None
    cache: dict[str, dict[str, Any]] = field(default_factory=dict)  # entry file name -> {sha256, size}
    keys: dict[str, Any] | None = None  # the document keys entry: {sha256, size} of their gzip

    def to_bytes(self, target: Target) -> bytes:
        return orjson.dumps({"format": STATE_FORMAT, "bucket": target.bucket, "prefix": target.prefix,
                             "release_id": self.release_id, "manifest_sha256": self.manifest_sha256,
                             "build_key": self.build_key, "cache": self.cache, "document_keys": self.keys},
                            option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


@dataclass
class Restored:
    state: JobState | None  # None: no usable state (the reason is `ignored`)
    ignored: str | None = None
    restored: list[str] = field(default_factory=list)  # cache entries written under the cache directory
    damaged: list[str] = field(default_factory=list)  # entries whose bytes did not hash to their name (skipped)

    def describe(self) -> str:
        if self.state is None:
            return f"no state restored ({self.ignored})"
        bad = f", {len(self.damaged)} damaged entr{'y' if len(self.damaged) == 1 else 'ies'} ignored " \
              f"({', '.join(self.damaged)})" if self.damaged else ""
        return f"{len(self.restored)} fit cache entr{'y' if len(self.restored) == 1 else 'ies'} restored{bad}"


def parse_state(body: bytes, target: Target) -> tuple[JobState | None, str | None]:
    """The state in `body`, or None and why it is not trusted."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, "state.json is not JSON"
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
        return None, "state.json is of another format"
    if (doc.get("bucket"), doc.get("prefix")) != (target.bucket, target.prefix):
        return None, f"state.json was written for s3://{doc.get('bucket')}/{doc.get('prefix')}, not this prefix"
    cache = doc.get("cache")
    release_id, manifest_sha256, build_key = (doc.get(k) for k in ("release_id", "manifest_sha256", "build_key"))
    strings = (release_id, manifest_sha256, build_key)
    if not isinstance(cache, dict) or not all(s is None or isinstance(s, str) for s in strings):
        return None, "state.json is malformed"
    entries = {name: {"sha256": e["sha256"], "size": e["size"]} for name, e in cache.items()
               if CACHE_ENTRY_RE.match(name) and isinstance(e, dict) and isinstance(e.get("sha256"), str)
               and SHA_RE.match(e["sha256"]) and isinstance(e.get("size"), int)}
    keys = doc.get("document_keys")
    if not (isinstance(keys, dict) and isinstance(keys.get("sha256"), str) and SHA_RE.match(keys["sha256"])
            and isinstance(keys.get("size"), int)):
        keys = None
    return JobState(release_id, manifest_sha256, build_key, entries,
                    {"sha256": keys["sha256"], "size": keys["size"]} if keys else None), None


def read_state(client: S3Client, target: Target) -> tuple[JobState | None, str | None]:
    key = state_key(target)
    with s3_errors(client, target.bucket, f"read {target.url(key)}"):
        try:
            body = retrying(lambda: client.get_object(Bucket=target.bucket, Key=key))["Body"].read()
        except ClientError as exc:
            if is_missing(exc):
                return None, "none saved yet"
            raise
    return parse_state(body, target)


def _get(client: S3Client, target: Target, key: str) -> bytes | None:
    with s3_errors(client, target.bucket, f"read {target.url(key)}"):
        try:
            return bytes(retrying(lambda: client.get_object(Bucket=target.bucket, Key=key))["Body"].read())
        except ClientError as exc:
            if is_missing(exc):
                return None
            raise


def restore(client: S3Client, target: Target, cache_dir: Path) -> Restored:
    """Bring the saved fit cache into `cache_dir`, each entry checked against its SHA-256 and size."""
    state, why = read_state(client, target)
    if state is None:
        return Restored(None, why)
    out = Restored(state)
    cache_dir.mkdir(parents=True, exist_ok=True)
    for name, entry in sorted(state.cache.items()):
        body = _get(client, target, entry_key(target, entry["sha256"]))
        if body is None or len(body) != entry["size"] or hashlib.sha256(body).hexdigest() != entry["sha256"]:
            out.damaged.append(name)
            continue
        tmp = cache_dir / f".{name}.{os.getpid()}"
        tmp.write_bytes(body)
        os.replace(tmp, cache_dir / name)
        out.restored.append(name)
    return out


def restore_keys(client: S3Client, target: Target, saved: JobState) -> tuple[dict[str, Any] | None, str]:
    """The document keys of `saved`'s release (the keys file pipeline.release.reuse reads), checked
    against their SHA-256 and size and that they describe that release; else None and why not."""
    entry = saved.keys
    if entry is None:
        return None, "no document keys saved"
    body = _get(client, target, entry_key(target, entry["sha256"]))
    if body is None or len(body) != entry["size"] or hashlib.sha256(body).hexdigest() != entry["sha256"]:
        return None, "the saved document keys are missing or damaged"
    try:
        doc = orjson.loads(gzip.decompress(body))
    except (OSError, EOFError, orjson.JSONDecodeError):
        return None, "the saved document keys are unreadable"
    if not isinstance(doc, dict) or doc.get("release_id") != saved.release_id or not isinstance(doc.get("keys"), dict):
        return None, f"the saved document keys do not describe {saved.release_id}"
    return doc, f"document keys of {saved.release_id} restored"


def _keys_body(keys_file: Path | None, release_id: str) -> bytes | None:
    """The gzip of the document keys file when it describes `release_id` (the release published)."""
    if keys_file is None:
        return None
    try:
        raw = keys_file.read_bytes()
        doc = orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("release_id") != release_id:
        return None
    return gzip.compress(raw, compresslevel=6, mtime=0)


@dataclass
class Saved:
    uploaded: int = 0
    kept: int = 0
    removed: int = 0
    keys: bool = False  # the document keys of the release were saved (or were there already)


def save(client: S3Client, target: Target, cache_dir: Path, release_id: str, manifest_sha256: str,
         build_key: str | None, keys_file: Path | None = None) -> Saved:
    """Record the live release's key and upload the fit cache entries not yet in the bucket, and the
    document keys when `keys_file` describes the release; then remove stored entries the new state no
    longer names (the cache keeps one entry per fit)."""
    saved = Saved()
    stored = list_objects(client, target, state_prefix(target) + "objects/")
    entries: dict[str, dict[str, Any]] = {}
    files = sorted(p for p in cache_dir.glob("*.pickle") if CACHE_ENTRY_RE.match(p.name)) \
        if cache_dir.is_dir() else []
    bodies: list[tuple[str | None, bytes]] = [(path.name, path.read_bytes()) for path in files]
    keys_body = _keys_body(keys_file, release_id)
    if keys_body is not None:
        bodies.append((None, keys_body))
    keys: dict[str, Any] | None = None
    for name, body in bodies:
        sha = hashlib.sha256(body).hexdigest()
        if name is None:
            keys = {"sha256": sha, "size": len(body)}
        else:
            entries[name] = {"sha256": sha, "size": len(body)}
        key = entry_key(target, sha)
        digest = hashlib.md5(body, usedforsecurity=False).digest()
        if key in stored and stored[key].size == len(body) and stored[key].etag.strip('"') == digest.hex():
            # the listing's ETag is the MD5 of the stored bytes: a damaged one is replaced
            saved.kept += name is not None
            continue
        md5 = base64.b64encode(digest).decode()
        def put(k: str = key, b: bytes = body, m: str = md5, s: str = sha) -> Any:
            return client.put_object(Bucket=target.bucket, Key=k, Body=b, ContentMD5=m, CacheControl=PRIVATE,
                                     ContentType="application/octet-stream", Metadata={SHA_META: s})

        with s3_errors(client, target.bucket, f"write {target.url(key)}"):
            retrying(put)
        saved.uploaded += name is not None
    saved.keys = keys is not None
    state = JobState(release_id, manifest_sha256, build_key, entries, keys)
    with s3_errors(client, target.bucket, f"write {target.url(state_key(target))}"):
        client.put_object(Bucket=target.bucket, Key=state_key(target), Body=state.to_bytes(target),
                          ContentType=JSON, CacheControl=PRIVATE)
    named = {entry_key(target, e["sha256"]) for e in [*entries.values(), *([keys] if keys else [])]}
    gone = sorted(set(stored) - named)
    if gone:
        with contextlib.suppress(Exception):  # the next save tries again; an extra entry is never read
            delete_keys(client, target, gone)
            saved.removed = len(gone)
    return saved
