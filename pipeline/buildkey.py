"""Content address of a build: what the inputs and the code were, as one hash.

A build whose key equals the key `build/current` was built from makes no new release:
the same inputs through the same code give the same files (only the stamp time would
differ), so `build` and `refresh` say "nothing changed" instead of writing 16,000 files.

The key covers the bytes of every file of the data directory (names starting with "."
are not inputs: `.fetch/` keeps the fetch record and the previous download there), the
code and templates that render a release (`pipeline/`, `edge/`, the docs pages), the
package version and the versions of the libraries whose output lands in files.
Keys are kept in `OUT/build-keys.json` (release id -> key), outside `releases/`, because a
release directory must hold exactly its manifest's files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import orjson

from pipeline.release.manifest import Manifest
from pipeline.settings import REPO_ROOT

KEY_FILE = "build-keys.json"
FORMAT = "malaria-risk build key 1"
CODE_DIRS = (REPO_ROOT / "pipeline", REPO_ROOT / "edge")
SKIP_DIRS = {"__pycache__", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
LIBRARIES = ("malaria-risk", "polars", "numpy", "orjson", "shapely", "jinja2", "pyarrow")


def source_files(root: Path, skip: set[str] = SKIP_DIRS) -> list[Path]:
    """Every file under `root` in a fixed order, without caches and hidden files: what a content key reads."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
        out.extend(Path(dirpath) / f for f in sorted(filenames)
                   if not f.startswith(".") and not f.endswith((".pyc", ".pyo")))
    return out


def _file_sha(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


def input_key(data_dir: Path, docs_dir: Path, code_dirs: tuple[Path, ...] = CODE_DIRS,
              settings: tuple[str, ...] = ()) -> str:
    """One SHA-256 over (role, relative path, content SHA-256) of every input and code file, and the
    settings that change what is written (e.g. the public address the bundles cite)."""
    h = hashlib.sha256(FORMAT.encode() + b"\n")
    for setting in settings:
        h.update(f"setting\t{setting}\n".encode())
    roots = [("data", Path(data_dir), set()), ("docs", Path(docs_dir), SKIP_DIRS)]
    roots += [(f"code:{d.name}", d, SKIP_DIRS) for d in code_dirs]
    for role, root, skip in roots:
        if not root.is_dir():
            h.update(f"{role} absent\n".encode())
            continue
        for path in source_files(root, skip):
            h.update(f"{role}\t{path.relative_to(root).as_posix()}\t{_file_sha(path)}\n".encode())
    for lib in LIBRARIES:
        h.update(f"lib\t{lib}\t{_version(lib)}\n".encode())
    return h.hexdigest()


def data_loaded_at(data_dir: Path) -> str:
    """When the data was loaded: an input of the build, never the clock (docs/local-releases.md).

    The monthly load records when it installed the rainfall file (`.fetch/rainfall.json`,
    `installed_at`); that time holds while the installed bytes are the recorded ones. A data
    directory filled by hand has no such record: its load time is when its newest input file
    was written (modification time). Either way the same directory gives the same time, so
    a rebuild of unchanged inputs gives the same bytes.
    """
    from pipeline.sources.fetch import read_record, sha256_file
    from pipeline.sources.rainfall import WFP_SUBNATIONAL

    data_dir = Path(data_dir)
    record = read_record(data_dir)
    installed = record.get("installed_at") or record.get("fetched_at")
    target = data_dir / WFP_SUBNATIONAL
    if isinstance(installed, str) and target.is_file() and record.get("sha256") == sha256_file(target):
        return installed
    newest = max((p.stat().st_mtime for p in source_files(data_dir, set())), default=0.0) if data_dir.is_dir() else 0.0
    return datetime.fromtimestamp(int(newest), UTC).isoformat().replace("+00:00", "Z")


def build_key(data_dir: Path, docs_dir: Path, base_url: str, loaded_at: str, more: tuple[str, ...] = ()) -> str:
    """The key of a build: its inputs, code, the address citations link to, the data load time and
    any other setting that changes what is written (`more`, "name=value")."""
    return input_key(data_dir, docs_dir, settings=(f"base_url={base_url}", *more, f"data_loaded_at={loaded_at}"))


def release_key(data_dir: Path, base_url: str | None = None, loaded_at: str | None = None) -> str:
    """The build key `pipeline.build.build` compares with the current release's; also what the scheduled
    job compares with the key of the live release it saved in the bucket (without importing the producers)."""
    from pipeline.settings import BuildSettings

    settings = BuildSettings.from_env()
    return build_key(Path(data_dir), BuildSettings().docs_dir, base_url or settings.base_url,
                     loaded_at or data_loaded_at(Path(data_dir)), (f"dashboard_url={settings.dashboard_url}",))


def _read_keys(out: Path) -> dict[str, str]:
    try:
        doc = orjson.loads((Path(out) / KEY_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def record_key(out: Path, release_id: str, key: str) -> None:
    """Remember which key `release_id` was built from (atomically; entries of pruned releases go)."""
    keys = _read_keys(out)
    keys[release_id] = key
    releases = Path(out) / "releases"
    keys = {r: k for r, k in keys.items() if (releases / r).is_dir()}
    tmp = Path(out) / f".{KEY_FILE}.{os.getpid()}"
    tmp.write_bytes(orjson.dumps(keys, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    os.replace(tmp, Path(out) / KEY_FILE)


def current_manifest(out: Path) -> Manifest | None:
    """The manifest `OUT/current` points at, or None (no build yet, or a broken link)."""
    link = Path(out) / "current"
    with contextlib.suppress(OSError, ValueError, KeyError):
        return Manifest.load(link.resolve()) if link.exists() else None
    return None


def unchanged_release(out: Path, key: str) -> Manifest | None:
    """The current release's manifest when it was built from exactly `key`, else None."""
    manifest = current_manifest(out)
    if manifest is None or _read_keys(out).get(manifest.release_id) != key:
        return None
    return manifest


def verified_current(out: Path, key: str) -> Manifest | None:
    """The current release when it was built from exactly `key` and every file still verifies (sizes and
    SHA-256), else None: what a forced build of the same inputs and code would write again, found before
    it computes. A current release that no longer verifies is built again."""
    from edge.release import verify_release_files

    manifest = unchanged_release(out, key)
    with contextlib.suppress(OSError):
        if manifest is not None and not verify_release_files((Path(out) / "current").resolve(), manifest.files):
            return manifest
    return None
