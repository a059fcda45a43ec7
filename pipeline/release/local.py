"""The releases under a local build root: verify them, prune old ones.

`malaria-risk verify --root build` and `malaria-risk prune --root build --keep N` call
these. A release is immutable once renamed into `releases/` (the renderer copies, never
hard-links), so verifying one can never be made to pass by another's repair, and
removing one can never damage another.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from edge.release import MANIFEST_NAME, release_ids, verify_release_files
from pipeline.errors import LocalReleaseError
from pipeline.release.manifest import Manifest
from pipeline.release.render import clean_killed_builds


@dataclass
class Verified:
    release_id: str
    current: bool
    files: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def current_release_id(root: Path) -> str | None:
    """The release `current` names (even when its directory is gone), or None without a link."""
    try:
        return Path(os.readlink(Path(root) / "current")).name
    except OSError:
        return None


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


def prune_local(root: Path, keep: int, dry_run: bool = False) -> Pruned:
    """Remove all but the `keep` newest releases; the one `current` names is always kept.

    Removed releases cannot be rolled back to. Nothing else refers to a release's files
    (no hard links), so removing one frees its space and changes no other release.
    """
    if keep < 1:
        raise LocalReleaseError("--keep must be at least 1 (the current release is always kept)")
    root = Path(root)
    if not (root / "releases").is_dir():
        raise LocalReleaseError(f"no releases under {root / 'releases'}")
    ids = release_ids(root)  # newest first; only real release directories, never a link
    cur = current_release_id(root)
    out = Pruned(cleaned=[] if dry_run else clean_killed_builds(root))
    for i, rid in enumerate(ids):
        (out.kept if i < keep or rid == cur else out.removed).append(rid)
    if dry_run:
        return out
    try:
        for n, rid in enumerate(out.removed):
            target = root / "releases" / rid
            try:
                if target.is_symlink():  # replaced by a link since it was listed: never follow it
                    raise OSError(f"{target} is now a link")
                shutil.rmtree(target)
            except OSError as e:
                done = ", ".join(out.removed[:n]) or "none"
                raise LocalReleaseError(f"could not remove release {rid}: {e.strerror or e} "
                                        f"(removed before it: {done}; nothing else was touched)") from None
    finally:
        if out.removed:
            from pipeline.release.catalogue import refresh_local

            refresh_local(root)  # the list of kept releases drops the removed ones, even after a failure
    return out
