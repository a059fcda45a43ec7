"""The release tree on disk: the input of a publish, refused unless it is exactly its manifest."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from edge.release import LINK_PROBLEM, verify_release_files
from pipeline.errors import PublishError, SparseIncomplete
from pipeline.publish.s3.layout import check_release_id
from pipeline.publish.s3.objects import Expected
from pipeline.release.manifest import MANIFEST_NAME, Manifest, sha256_hex


@dataclass(frozen=True)
class LocalRelease:
    release_id: str
    path: Path
    manifest: Manifest
    manifest_bytes: bytes
    # rel -> MD5 hex of the bytes checked against the manifest's SHA-256 when the tree was opened (one
    # read of each file for both digests): what the listing's ETags are compared with, without reading
    # the file again. Only the bytes of new objects are read a second time, to send them.
    md5s: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    # files of a sparse release (`open_sparse_release`) that are not here: the bucket's live release holds
    # their objects, which the publish must find there (pipeline.publish.s3.upload.plan)
    absent: frozenset[str] = field(default_factory=frozenset, compare=False, repr=False)

    @property
    def manifest_sha256(self) -> str:
        return sha256_hex(self.manifest_bytes)

    def read(self, exp: Expected) -> bytes:
        """The bytes to upload, re-checked: the tree may have changed since it was verified."""
        self._held(exp)
        data = self.manifest_bytes if exp.rel == MANIFEST_NAME else (self.path / exp.rel).read_bytes()
        if len(data) != exp.size or sha256_hex(data) != exp.sha256:
            raise PublishError(
                f"{self.path / exp.rel} changed after it was checked; rebuild and publish again"
            )
        return data

    def md5(self, exp: Expected) -> str:
        """The MD5 hex of the file's checked bytes (from the opening check; else read now)."""
        if exp.rel == MANIFEST_NAME:
            return hashlib.md5(self.manifest_bytes, usedforsecurity=False).hexdigest()
        self._held(exp)
        got = self.md5s.get(exp.rel)
        if got is None:
            got = self.md5s[exp.rel] = hashlib.md5(self.read(exp), usedforsecurity=False).hexdigest()
        return got

    def _held(self, exp: Expected) -> None:
        if exp.rel in self.absent:
            raise SparseIncomplete(f"{exp.rel} of the sparse release {self.release_id} is not held locally "
                                   f"and its object {exp.sha256[:16]} is not in the bucket")


def resolve_release_dir(root: Path, release_id: str | None = None) -> Path:
    """`root/releases/<id>`, or where `root/current` points when no id is given."""
    if release_id is not None:
        return root / "releases" / check_release_id(release_id)
    current = root / "current"
    if not current.exists():
        raise PublishError(
            f"no release given and {current} does not exist: run the build first or pass --release"
        )
    return current.resolve()


def _digests(path: str | Path) -> tuple[str, str]:
    """(SHA-256, MD5) of a file in one read."""
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
            md5.update(chunk)
    return sha.hexdigest(), md5.hexdigest()


def check_release_tree(release_dir: Path, manifest: Manifest, md5s: dict[str, str] | None = None) -> list[str]:
    """Reasons a tree must not be published: checksum failures, files the manifest does
    not list (a stray key store, an editor backup), keys or symlinks that escape it.
    Each file is read once; `md5s` receives the MD5 of every file whose SHA-256 matched."""
    problems = verify_release_files(release_dir, manifest.files, checksums=False)
    bad = {p.split(": ", 1)[1].split(" (", 1)[0] for p in problems}
    links = [p.removeprefix(LINK_PROBLEM) for p in problems if p.startswith(LINK_PROBLEM)]
    keys = [k for k in manifest.files if k not in bad]
    # one file after another: the files were just written (or linked) and are read from memory, where
    # a pool of 4 threads took 3.5 times the CPU of this loop, and longer (23,737 files, tmpfs:
    # 2.5 CPU s and 1.9 s against 0.7 and 0.7), the small reads and a future per file dominating
    base = str(release_dir)
    digests = [_digests(os.path.join(base, k)) for k in keys]
    for key, (sha, md5) in zip(keys, digests, strict=True):
        if sha != manifest.files[key]["sha256"]:
            problems.append(f"checksum differs: {key}")
        elif md5s is not None:
            md5s[key] = md5
    root = release_dir.resolve()
    for rel in manifest.files:
        parts = rel.split("/")
        if rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or rel == MANIFEST_NAME:
            problems.append(f"unsafe key in manifest: {rel!r}")
    # the links among the files were found above (every file present was lstat-ed once)
    for rel in links:
        if rel in manifest.files and not (release_dir / rel).resolve().is_relative_to(root):
            problems.append(f"symlink leads outside the release: {rel}")
    return problems


def open_local_release(root: Path, release_id: str | None = None) -> LocalRelease:
    """Load and check a release tree; refuse anything that is not exactly its manifest."""
    path = resolve_release_dir(root, release_id)
    manifest_path = path / MANIFEST_NAME
    if not manifest_path.is_file():
        raise PublishError(f"{manifest_path} does not exist: not a rendered release")
    raw = manifest_path.read_bytes()
    try:
        manifest = Manifest.from_bytes(raw)
    except (ValueError, KeyError) as exc:
        raise PublishError(f"{manifest_path} is not a valid manifest: {exc}") from exc
    check_release_id(manifest.release_id)
    if manifest.release_id != path.name:
        raise PublishError(
            f"{manifest_path} names release {manifest.release_id!r} but sits in {path.name!r}"
        )
    md5s: dict[str, str] = {}
    problems = check_release_tree(path, manifest, md5s)
    if problems:
        raise PublishError(
            f"refusing to publish {path}: {len(problems)} problem(s), first: {problems[0]}",
            problems,
        )
    return LocalRelease(manifest.release_id, path, manifest, raw, md5s)


def expected_objects(manifest: Manifest) -> list[Expected]:
    """Every file of the manifest as the object it must become (the manifest itself excluded)."""
    return [
        Expected(rel, int(e["size"]), e["sha256"], e["content_type"], e.get("content_encoding"))
        for rel, e in sorted(manifest.files.items())
    ]


def open_sparse_release(root: Path, release_id: str) -> LocalRelease:
    """A sparse release of the scheduled job (`root/sparse/<id>`, pipeline.release.tree.write_release):
    the files it holds are checked like a whole release's; those it lacks are `absent`, each the object
    of the bucket's live release it was recorded from, which the publish confirms before it writes
    anything (a missing one: `SparseIncomplete`). No other command opens this directory."""
    path = Path(root) / "sparse" / check_release_id(release_id)
    manifest_path = path / MANIFEST_NAME
    try:
        raw = manifest_path.read_bytes()
        manifest = Manifest.from_bytes(raw)
    except (OSError, ValueError, KeyError) as exc:
        raise PublishError(f"{manifest_path} is not a sparse release's manifest: {exc}") from exc
    if manifest.release_id != path.name:
        raise PublishError(f"{manifest_path} names release {manifest.release_id!r} but sits in {path.name!r}")
    absent = frozenset(k for k in manifest.files if not (path / k).is_file())
    held = dataclasses.replace(manifest, files={k: e for k, e in manifest.files.items() if k not in absent})
    md5s: dict[str, str] = {}
    problems = check_release_tree(path, held, md5s)
    problems += [f"unsafe key in manifest: {k!r}" for k in absent
                 if k.startswith("/") or any(p in ("", ".", "..") for p in k.split("/"))]
    if problems:
        raise PublishError(f"refusing to publish {path}: {len(problems)} problem(s), first: {problems[0]}", problems)
    return LocalRelease(manifest.release_id, path, manifest, raw, md5s, absent)
