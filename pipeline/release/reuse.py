"""Files a build does not make again: each file keyed by what it is made from, as fits are (pipeline.cache).

A new month changes a third of a release; the rest is byte-identical to the previous release. A file
whose key (a SHA-256 over the code and the file's inputs) is the key the previous release's file of
the same name was made from holds the same bytes, so the renderer links that object and its gzip
twin (`pipeline.datasets.base.Linked`) instead of serialising, compressing and hashing them again.

    <root>/document-keys.json     {"release_id": the release they describe, "keys": {file key: input key}}

What a key covers:

* **the code**: every source file under `pipeline/` and `edge/` and the versions of the libraries that
  spell the bytes (`pipeline.buildkey`). Any change of code makes every key new: a new month with the
  same code is the case this serves, and a changed spelling can never be linked stale;
* **a CSV response**: the bytes of the JSON document it tabulates (`csv_key`): the CSV is a function
  of that document alone (`pipeline.release.tabular`). Other files may be keyed the same way (`key`
  over what they are made from); a producer that renders its own documents (`tabular.rendered`) looks
  its CSVs up itself.

The keys are trusted only for the release `current` names (its objects are kept while it is current),
or, in the scheduled job's fresh container, for the bucket's live release (`from_published`: its
objects are in the bucket, so the files are recorded, not linked: a sparse release), and are written
after every build. A linked object is still checked by its contents before it is
linked (`Store.sound`); one that no longer hashes to its name stops the write (`StaleReuse`) and the
renderer makes every file again from the documents at hand. A forced build uses no keys. Design: docs/local-releases.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pipeline import buildkey
from pipeline.release.manifest import Manifest


@dataclass(frozen=True)
class Linked:
    """A file whose bytes the previous release already holds, made from the same inputs by the same
    code (this module): the renderer links that object (and its gzip twin) instead of
    serialising, compressing and hashing the bytes again."""

    sha256: str
    size: int
    gz: tuple[str, int] | None = None  # the gzip twin's (SHA-256, size) in the previous release


KEYS_FILE = "document-keys.json"
FORMAT = "malaria-risk document keys 1"


def code_digest(code_dirs: Iterable[Path] = buildkey.CODE_DIRS, libraries: Iterable[str] = buildkey.LIBRARIES) -> str:
    """SHA-256 over every source file of the pipeline and the edge and the libraries' versions."""
    h = hashlib.sha256(FORMAT.encode() + b"\n")
    for root in code_dirs:
        for f in buildkey.source_files(Path(root)):
            with open(f, "rb") as fh:
                h.update(f"{f.relative_to(root.parent).as_posix()}\t"
                         f"{hashlib.file_digest(fh, 'sha256').hexdigest()}\n".encode())
    for name in libraries:
        h.update(f"library\t{name}\t{buildkey._version(name)}\n".encode())
    return h.hexdigest()


class Reuse:
    """The keys of this build's files and, when there is one, the previous release's files and keys."""

    def __init__(self, code: str, previous_id: str | None = None,
                 files: Mapping[str, Mapping[str, Any]] | None = None, keys: Mapping[str, str] | None = None,
                 *, published: bool = False):
        self.code = code
        self.previous_id = previous_id
        self.files = files or {}
        self.keys = keys or {}
        self.linked_count = 0  # files this build linked by key
        # the previous release is the bucket's live one, not a local one (`from_published`): its objects
        # are in the bucket, not in this build root's store
        self.published = published
        self.facts: Mapping[str, Any] = {}  # the previous release's facts, when it is a published one

    def in_bucket(self) -> frozenset[tuple[str, str]] | None:
        """(SHA-256, content type) of every object the previous release stored in the bucket (its files but
        the gzip twins, which the index layout does not store), when it is a published release; else None.
        The type is part of it because an object's name carries it: equal bytes served as another type
        are another object."""
        if not self.published:
            return None
        files = self.files
        return frozenset((e["sha256"], e["content_type"]) for k, e in files.items()
                         if e.get("content_encoding") is None)

    def key(self, *parts: str) -> str:
        h = hashlib.sha256(self.code.encode())
        for p in parts:
            h.update(b"\0" + p.encode())
        return h.hexdigest()

    def csv_key(self, json: bytes) -> str:
        """The key of a CSV response: the JSON document it tabulates."""
        return self.key("csv", hashlib.sha256(json).hexdigest())

    def linked(self, file_key: str, input_key: str) -> Linked | None:
        """The previous release's file `file_key` when it was made from `input_key`, else None."""
        if self.keys.get(file_key) != input_key:
            return None
        entry = self.files.get(file_key)
        if entry is None or entry.get("content_encoding") is not None:
            return None
        gz = self.files.get(file_key + ".gz")
        self.linked_count += 1
        return Linked(entry["sha256"], int(entry["size"]),
                      (gz["sha256"], int(gz["size"])) if gz is not None else None)


def load(out: Path, code: str | None = None) -> Reuse:
    """This build's keys, with the previous release's files when `current` names the release the keys
    file describes (a release whose objects the store keeps while it is current)."""
    code = code or code_digest()
    try:
        raw = orjson.loads((Path(out) / KEYS_FILE).read_bytes())
        current = Path(os.readlink(Path(out) / "current")).name
        if raw.get("format") != FORMAT or raw.get("release_id") != current:
            return Reuse(code)
        manifest = Manifest.load(Path(out) / "releases" / current)
    except (OSError, ValueError, KeyError, TypeError):
        return Reuse(code)
    if manifest.release_id != current or not isinstance(raw.get("keys"), dict):
        return Reuse(code)
    return Reuse(code, current, manifest.files, raw["keys"])


def from_published(manifest: Manifest, keys: Mapping[str, Any], code: str | None = None) -> Reuse:
    """The live release of the bucket as the previous release, for a build root that holds none (the
    scheduled job's fresh container): `keys` is the document keys file the job saved when it published
    `manifest`'s release (pipeline.publish.s3.state). A key-matched file then names an object only the
    bucket holds, and the build is sparse (pipeline.release.tree.write_release): only the job's publish,
    which checks each such object is in the bucket, may use it."""
    code = code or code_digest()
    if keys.get("format") != FORMAT or keys.get("release_id") != manifest.release_id \
            or not isinstance(keys.get("keys"), dict):
        return Reuse(code)
    got = Reuse(code, manifest.release_id, manifest.files, keys["keys"], published=True)
    got.facts = manifest.facts
    return got


def record(out: Path, release_id: str, keys: Mapping[str, str]) -> None:
    """Write the keys of `release_id`'s files (atomically), for the next build."""
    tmp = Path(out) / f".{KEYS_FILE}.{os.getpid()}"
    try:
        tmp.write_bytes(orjson.dumps({"format": FORMAT, "release_id": release_id, "keys": dict(sorted(keys.items()))}))
        os.replace(tmp, Path(out) / KEYS_FILE)
    except OSError:  # the keys only save work: a build without them renders everything
        with contextlib.suppress(OSError):
            tmp.unlink()


def forget(out: Path) -> None:
    """Remove the keys (a forced build, a failed reuse): the next build renders everything."""
    with contextlib.suppress(OSError):
        (Path(out) / KEYS_FILE).unlink()
