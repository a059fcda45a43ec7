"""The release tree on disk: the input of a publish, refused unless it is exactly its manifest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import PublishError
from pipeline.publish.s3.layout import check_release_id
from pipeline.publish.s3.objects import Expected
from pipeline.release.manifest import MANIFEST_NAME, Manifest, sha256_hex, verify_release_dir


@dataclass(frozen=True)
class LocalRelease:
    release_id: str
    path: Path
    manifest: Manifest
    manifest_bytes: bytes

    @property
    def manifest_sha256(self) -> str:
        return sha256_hex(self.manifest_bytes)

    def read(self, exp: Expected) -> bytes:
        """The bytes to upload, re-checked: the tree may have changed since it was verified."""
        data = self.manifest_bytes if exp.rel == MANIFEST_NAME else (self.path / exp.rel).read_bytes()
        if len(data) != exp.size or sha256_hex(data) != exp.sha256:
            raise PublishError(
                f"{self.path / exp.rel} changed after it was checked; rebuild and publish again"
            )
        return data


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


def check_release_tree(release_dir: Path, manifest: Manifest) -> list[str]:
    """Reasons a tree must not be published: checksum failures, files the manifest does
    not list (a stray key store, an editor backup), keys or symlinks that escape it."""
    problems = verify_release_dir(release_dir, manifest)
    root = release_dir.resolve()
    for rel in manifest.files:
        parts = rel.split("/")
        if rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or rel == MANIFEST_NAME:
            problems.append(f"unsafe key in manifest: {rel!r}")
            continue
        path = release_dir / rel
        if path.is_symlink() and not path.resolve().is_relative_to(root):
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
    problems = check_release_tree(path, manifest)
    if problems:
        raise PublishError(
            f"refusing to publish {path}: {len(problems)} problem(s), first: {problems[0]}",
            problems,
        )
    return LocalRelease(manifest.release_id, path, manifest, raw)


def expected_objects(manifest: Manifest) -> list[Expected]:
    """Every file of the manifest as the object it must become (the manifest itself excluded)."""
    return [
        Expected(rel, int(e["size"]), e["sha256"], e["content_type"], e.get("content_encoding"))
        for rel, e in sorted(manifest.files.items())
    ]
