"""The index layout (layout 2): a release is its objects, its index and its manifest.

    <prefix>/objects/<sha256><suffix>                a file's bytes with the file's headers, stored once
                                                     whatever release holds them; the suffix (`.json`,
                                                     `.json.gz`, `.csv`, ...) names the content type and
                                                     encoding, so the headers follow from the key and an
                                                     object is shared only by files served alike
    <prefix>/releases/<id>/index/<family>/<n>.json   file key -> [sha256, size, suffix] for the keys of one
                                                     route family (edge/files.py: index_family, index_shard)
    <prefix>/releases/<id>/index.json                the shards: family -> how many
    <prefix>/releases/<id>/manifest.json             written after the index, last of the release

The gzip twins the renderer writes beside each identity file (`x.json.gz`) are neither stored nor
indexed: CloudFront compresses (deploy/aws.py sets `Compress` on the API behaviour) and the edge offers
no precompressed key for a release of this layout. The manifest still lists them; the local build and
server keep them.

The index is a pure function of the manifest (`index_documents`), so verify recomputes it and compares
bytes. A family's keys are spread over ceil(keys / SHARD_FILES) shards: a shard the edge reads on its
first request for a family stays a few tens of KB however large the release grows.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from edge.files import INDEX_ROOT, LAYOUT_COPIES, LAYOUT_INDEX, index_family, index_shard
from pipeline.publish.s3.layout import CACHE_IMMUTABLE, JSON
from pipeline.publish.s3.local import expected_objects
from pipeline.publish.s3.objects import Expected, Listed
from pipeline.release.manifest import MANIFEST_NAME, Manifest

SHARD_FILES = 256  # keys per shard at most: ~35 KB of JSON, parsed in well under a millisecond
INDEX_FORMAT = 1

# content type -> the object key's suffix; an encoding adds `.<encoding>` (`.json.gz`)
TYPE_SUFFIX = {
    "application/json": ".json", "application/geo+json": ".geojson", "text/csv; charset=utf-8": ".csv",
    "text/html; charset=utf-8": ".html", "text/css; charset=utf-8": ".css",
    "text/javascript; charset=utf-8": ".js", "text/plain; charset=utf-8": ".txt",
    "text/markdown; charset=utf-8": ".md", "image/png": ".png", "image/svg+xml": ".svg",
    "application/zip": ".zip", "application/vnd.apache.parquet": ".parquet",
    "application/octet-stream": ".bin", "application/problem+json": ".problem.json",
}  # fmt: skip
ENCODING_SUFFIX = {"gzip": ".gz"}


def object_suffix(content_type: str, content_encoding: str | None) -> str:
    """The suffix that names (content type, encoding); a type outside the table gets one named by its
    hash, so two types never share a suffix (and an object never serves a file with another's headers)."""
    base = TYPE_SUFFIX.get(content_type) or ".t" + hashlib.sha256(content_type.encode()).hexdigest()[:16]
    if content_encoding:
        base += ENCODING_SUFFIX.get(content_encoding) or ".e" + hashlib.sha256(
            content_encoding.encode()).hexdigest()[:16]
    return base


def object_name(exp: Expected) -> str:
    """The object's key under `objects/`: `<sha256><suffix>`."""
    return exp.sha256 + object_suffix(exp.content_type, exp.content_encoding)


def is_twin(key: str, files: Mapping[str, Mapping[str, Any]]) -> bool:
    """A gzip copy the renderer writes beside an identity file (`x.json.gz` beside `x.json`): kept by the
    local build and server, never published in the index layout, where CloudFront compresses."""
    return key.endswith(".gz") and files[key].get("content_encoding") == "gzip" and key[:-3] in files


def published_files(manifest: Manifest) -> list[Expected]:
    """The files of the release that the index layout stores and indexes: all but the gzip twins."""
    return [e for e in expected_objects(manifest) if not is_twin(e.rel, manifest.files)]


def stored_objects(files: Iterable[Expected]) -> dict[str, Expected]:
    """object name -> what the object must look like (headers of the files it serves, which the key fixes)."""
    out: dict[str, Expected] = {}
    for exp in files:
        out.setdefault(object_name(exp), Expected(
            exp.rel, exp.size, exp.sha256, exp.content_type, exp.content_encoding, CACHE_IMMUTABLE))
    return out


def shard_counts(files: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Route family -> index shards, for the files of a manifest (twins left out)."""
    per: dict[str, int] = defaultdict(int)
    for key in files:
        if is_twin(key, files):
            continue
        per[index_family(key)] += 1
    return {fam: max(1, math.ceil(n / SHARD_FILES)) for fam, n in sorted(per.items())}


def index_documents(manifest: Manifest) -> dict[str, bytes]:
    """Every index file of the release (`index.json` and the shards), relative to the release prefix."""
    files = {key: e for key, e in manifest.files.items() if not is_twin(key, manifest.files)}
    counts = shard_counts(files)
    shards: dict[str, dict[str, Any]] = defaultdict(dict)
    for key, e in sorted(files.items()):
        fam = index_family(key)
        shards[index_shard(key, fam, counts[fam])][key] = [
            e["sha256"], int(e["size"]), object_suffix(e["content_type"], e.get("content_encoding"))]
    rid = manifest.release_id
    docs = {name: orjson.dumps({"format": INDEX_FORMAT, "release_id": rid, "shard": name, "files": files},
                               option=orjson.OPT_SORT_KEYS)
            for name, files in sorted(shards.items())}
    docs[INDEX_ROOT] = orjson.dumps({"format": INDEX_FORMAT, "layout": LAYOUT_INDEX, "release_id": rid,
                                     "shards": counts}, option=orjson.OPT_SORT_KEYS)
    return docs


def index_expected(docs: dict[str, bytes]) -> list[tuple[Expected, bytes]]:
    """The index files as release objects: JSON, immutable, their SHA-256 in the metadata."""
    return [(Expected(name, len(body), hashlib.sha256(body).hexdigest(), JSON, None), body)
            for name, body in sorted(docs.items())]


def release_layout(listed: dict[str, Listed], prefix: str) -> int:
    """The layout of a release by the keys under its prefix: an index root, or copies of its files."""
    if prefix + INDEX_ROOT in listed:
        return LAYOUT_INDEX
    others = [k for k in listed if k != prefix + MANIFEST_NAME and not k.startswith(prefix + "index/")]
    return LAYOUT_COPIES if others else LAYOUT_INDEX
