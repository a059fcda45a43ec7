"""The release manifest: the one list of what a release holds.

The renderer writes it, the local server and publisher read it, `verify` checks a
tree against it. A file that is not in the manifest is not part of the release,
and publishing refuses a tree that holds one (so a stray key store or editor
backup can never reach the bucket).

Layout of a release directory::

    releases/<release_id>/manifest.json
    releases/<release_id>/v1/...json        identity bytes
    releases/<release_id>/v1/...json.gz     precompressed copy (content_encoding "gzip")

`files` maps each relative key to size, sha256, content_type and content_encoding
(None or "gzip"; a `.gz` entry carries the content type of what it decompresses to).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from edge.release import MANIFEST_NAME, verify_release_files

FORMAT = 1


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_entry(data: bytes, content_type: str, content_encoding: str | None = None,
               digest: str | None = None) -> dict[str, Any]:
    return {
        "size": len(data),
        "sha256": digest or sha256_hex(data),
        "content_type": content_type,
        "content_encoding": content_encoding,
    }


@dataclass(frozen=True)
class Manifest:
    release_id: str
    updated_at: str
    model_version: str | None
    facts: dict[str, Any]
    files: dict[str, dict[str, Any]]
    # when the build ran: the one place the clock is written (with releases.json); the files
    # themselves depend only on the inputs and the code, so two builds of them are equal
    built_at: str | None = None

    def to_bytes(self) -> bytes:
        doc: dict[str, Any] = {
            "format": FORMAT,
            "release_id": self.release_id,
            "updated_at": self.updated_at,
            "model_version": self.model_version,
            "facts": self.facts,
            "files": self.files,
        }
        if self.built_at is not None:
            doc["built_at"] = self.built_at
        return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)

    @classmethod
    def from_bytes(cls, raw: bytes) -> Manifest:
        doc = orjson.loads(raw)
        if doc.get("format") != FORMAT:
            raise ValueError(f"unsupported manifest format {doc.get('format')!r}")
        return cls(doc["release_id"], doc["updated_at"], doc.get("model_version"), doc["facts"], doc["files"],
                   doc.get("built_at"))

    @classmethod
    def load(cls, release_dir: Path) -> Manifest:
        return cls.from_bytes((release_dir / MANIFEST_NAME).read_bytes())


def verify_release_dir(release_dir: Path, manifest: Manifest | None = None) -> list[str]:
    """Every difference between a release directory and its manifest; empty means sound.

    Checks missing files, wrong size or checksum, and files the manifest does not list
    (the one implementation, shared with the local server: `edge.release`).
    """
    manifest = manifest or Manifest.load(release_dir)
    return verify_release_files(release_dir, manifest.files)
