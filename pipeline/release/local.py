"""The releases under a local build root: verify them, prune old ones.

`malaria-risk verify --root build` and `malaria-risk prune --root build --keep N` call
these. Releases are hard links into the content store, whose objects are read-only:
verifying checks every link's bytes against the manifest, and pruning removes a
release's links, then the objects no kept release links (`pipeline.release.catalogue`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from edge.release import MANIFEST_NAME, release_ids, verify_release_files
from pipeline.errors import LocalReleaseError
from pipeline.release.catalogue import retain
from pipeline.release.manifest import Manifest
from pipeline.release.tree import current_release_id


@dataclass
class Verified:
    release_id: str
    current: bool
    files: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_release(root: Path, release_id: str) -> Verified:
    """Every file of one release checked against its manifest (sizes and SHA-256)."""
    release_dir = Path(root) / "releases" / release_id
    is_current = current_release_id(root) == release_id
    if not release_dir.is_dir():
        return Verified(release_id, is_current, 0, [f"missing: the release directory releases/{release_id}"])
    try:
        manifest = Manifest.load(release_dir)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return Verified(release_id, is_current, 0, [f"unreadable {MANIFEST_NAME}: {type(e).__name__}: {e}"])
    return Verified(release_id, is_current, len(manifest.files), verify_release_files(release_dir, manifest.files))


def verify_local(root: Path, release_id: str | None = None, every: bool = False) -> list[Verified]:
    """The current release (default), one named release, or every release under `root`."""
    root = Path(root)
    if every:
        ids = release_ids(root)
        cur = current_release_id(root)
        if cur is not None and cur not in ids:
            ids.insert(0, cur)
        if not ids:
            raise LocalReleaseError(f"no releases under {root / 'releases'}")
        return [verify_release(root, rid) for rid in ids]
    if release_id is None:
        release_id = current_release_id(root)
        if release_id is None:
            raise LocalReleaseError(f"{root / 'current'} does not exist: run `malaria-risk build`, or pass --release")
    return [verify_release(root, release_id)]


@dataclass
class Pruned:
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)  # temporary directories of killed builds
    objects: int = 0  # objects of the store no kept release links any more, removed
    bytes: int = 0
    fallback: str | None = None  # kept: a server serves it while `current` is broken


def prune_local(root: Path, keep: int, dry_run: bool = False) -> Pruned:
    """The retention rule (`catalogue.retain`): keep the `keep` newest, every pinned release, the one
    `current` names and, while that one is broken, the one a server falls back to; remove the rest
    and the objects only they linked."""
    got = retain(root, keep, dry_run)
    return Pruned(got.removed, got.kept, got.cleaned, got.collected.objects, got.collected.bytes, got.fallback)
