"""The list of kept releases (`GET /v1/releases`): one small mutable document beside the pointer.

A release is immutable and hashed whole, so it cannot hold a list that changes when a
later release is published or an old one pruned. The list lives where the one other
mutable fact already lives, next to the pointer: `<build root>/releases.json` beside
`current`, and `<prefix>/releases.json` beside `current.json` in the bucket. It is
rewritten whenever the set of kept releases or the live one changes (a build, a local
prune, a publish, a rollback, a bucket prune), and the edge serves it as it is.

Each record is written once, when its release first appears, and carried forward
unchanged afterwards: `published_at` is when the release first went live there and
`changes` compares it with the release that was live before it; `pinned` (false unless an
operator pins the release, `malaria-risk pin`) is the one field that changes afterwards.

The retention rule lives here too, because it is a rule about which releases are kept:
the newest N, every pinned one, and the ones being served: `current`'s and, while it is
broken, the fallback the local server serves by the same rule (`retain`). Layering: this module
uses the release layer (`tree`) and the store, never the renderer. Design: docs/local-releases.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from edge.release import release_ids, serving
from edge.routes import BUNDLE_ZIP, DOWNLOAD_FILE, RELEASE_LIST_NAME
from pipeline.errors import LocalReleaseError
from pipeline.release.manifest import Manifest
from pipeline.release.store import Collected, Store, locked
from pipeline.release.tree import clean_killed_builds, current_release_id, remove_release

LIST_FORMAT = 1
DEFAULT_KEEP = 3  # releases kept by `retain` besides the pinned ones and the one served


def stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def data_window(facts: Mapping[str, Any]) -> dict[str, str | None]:
    est = list(facts.get("estimated") or [])
    fc = list(facts.get("forecast") or [])
    return {"first_estimated": est[0] if est else None, "last_estimated": est[-1] if est else None,
            "last_forecast": fc[-1] if fc else None}


def changes(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[str]:
    """What differs from the release live before, in sentences (from the records' own fields)."""
    if old is None:
        return ["First release in this list."]
    out: list[str] = []
    if new.get("model_version") != old.get("model_version"):
        out.append(f"Model version {old.get('model_version')} → {new.get('model_version')}: scores of every "
                   "month may differ (see the model and validation pages).")
    nw, ow = new["data_window"], old["data_window"]
    if nw["last_estimated"] != ow["last_estimated"]:
        out.append(f"Estimated months now run to {nw['last_estimated']} (were to {ow['last_estimated']}); "
                   f"forecasts to {nw['last_forecast']}.")
    if nw["first_estimated"] != ow["first_estimated"]:
        out.append(f"Estimated months now start at {nw['first_estimated']} (were at {ow['first_estimated']}).")
    added = sorted(set(new.get("datasets", ())) - set(old.get("datasets", ())))
    dropped = sorted(set(old.get("datasets", ())) - set(new.get("datasets", ())))
    if added:
        out.append("New data sets: " + ", ".join(added) + ".")
    if dropped:
        out.append("Data sets no longer served: " + ", ".join(dropped) + ".")
    if not out:
        out.append("Same model and months; data reloaded (figures of recent months may be revised).")
    return out


def record(release_id: str, updated_at: str | None, model_version: str | None, facts: Mapping[str, Any],
           published_at: str | None, before: Mapping[str, Any] | None) -> dict[str, Any]:
    """One kept release as the list shows it; `before` is the record of the release live before it."""
    rec: dict[str, Any] = {
        "release_id": release_id,
        "published_at": published_at,
        "data_loaded_at": updated_at,
        "model_version": model_version,
        "data_window": data_window(facts),
        "datasets": sorted(facts.get("available") or []),
        "bundle": DOWNLOAD_FILE.path_for(release_id, BUNDLE_ZIP),
    }
    rec["changes"] = changes(rec, before)
    rec["pinned"] = False
    return rec


def list_document(records: Iterable[Mapping[str, Any]], current: str | None) -> dict[str, Any]:
    """Newest first (by when each went live, then id); `current` marks the one being served."""
    recs = sorted(records, key=lambda r: (r.get("published_at") or "", r["release_id"]), reverse=True)
    return {"format": LIST_FORMAT, "current": current,
            "releases": [{**r, "pinned": bool(r.get("pinned")), "current": r["release_id"] == current}
                         for r in recs]}


def updated_list(existing: Mapping[str, Any] | None, kept: Iterable[str], current: str | None,
                 new: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`existing` with `new` added (unless its release is listed already) and every release not
    in `kept` dropped; records already listed are carried over unchanged."""
    keep = set(kept)
    recs = {r["release_id"]: dict(r) for r in (existing or {}).get("releases", []) if r["release_id"] in keep}
    for r in recs.values():
        r.pop("current", None)
    if new is not None and new["release_id"] not in recs:
        recs[new["release_id"]] = dict(new)
    return list_document(recs.values(), current)


def newest(doc: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The record that went live last: what a new release's `changes` compare with."""
    recs = (doc or {}).get("releases") or []
    return recs[0] if recs else None


def to_bytes(doc: Mapping[str, Any]) -> bytes:
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"


# --- the local build root -----------------------------------------------------------------


def read_local(root: Path) -> dict[str, Any] | None:
    try:
        doc = orjson.loads((Path(root) / RELEASE_LIST_NAME).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("releases"), list) else None


def write_local(root: Path, doc: Mapping[str, Any]) -> None:
    """Atomically: a reader sees the old list or the new one, never a torn file."""
    path = Path(root) / RELEASE_LIST_NAME
    tmp = path.with_name(f".{RELEASE_LIST_NAME}-{os.getpid()}")
    tmp.write_bytes(to_bytes(doc))
    os.replace(tmp, path)


def _describe(root: Path, rid: str, before: Mapping[str, Any] | None) -> dict[str, Any] | None:
    try:
        m = Manifest.load(root / "releases" / rid)
        mtime = datetime.fromtimestamp((root / "releases" / rid / "manifest.json").stat().st_mtime, UTC)
    except (OSError, ValueError, KeyError):
        return None
    return record(rid, m.updated_at, m.model_version, m.facts, m.built_at or stamp(mtime), before)


def refresh_local(root: Path, new_id: str | None = None, before_id: str | None = None,
                  built_at: str | None = None) -> dict[str, Any]:
    """Rewrite the root's list for the releases now under `releases/`, the current one marked.

    `new_id` is a release just switched to, compared with `before_id` (the one live before).
    Releases the list does not know yet (built before the list existed) are described from
    their manifests, oldest first, each compared with the one before it; a release's
    `published_at` is then the time its build finished (its manifest's modification time).
    """
    root = Path(root)
    kept = [rid for rid in release_ids(root) if (root / "releases" / rid / "manifest.json").is_file()]
    doc: dict[str, Any] = dict(read_local(root) or list_document([], None))
    by_id = {r["release_id"]: r for r in doc["releases"]}
    for rid in sorted(rid for rid in kept if rid not in by_id and rid != new_id):  # ids start with their time
        before = max((r for r in by_id.values() if r["release_id"] < rid), key=lambda r: r["release_id"],
                     default=None)
        rec = _describe(root, rid, before)
        if rec is not None:
            by_id[rid] = rec
    if new_id is not None and new_id not in by_id:
        rec = _describe(root, new_id, by_id.get(before_id) if before_id else None)
        if rec is not None:
            rec["published_at"] = built_at or stamp(datetime.now(UTC))
            by_id[new_id] = rec
    out = updated_list({"releases": list(by_id.values())}, kept, current_release_id(root))
    write_local(root, out)
    return out


# --- retention ------------------------------------------------------------------------------


def pin_local(root: Path, release_id: str, pinned: bool = True) -> dict[str, Any]:
    """Mark a kept release as pinned (never removed by `retain`) or unpin it."""
    root = Path(root)
    with locked(root):
        doc = refresh_local(root)
        recs = {r["release_id"]: dict(r) for r in doc["releases"]}
        if release_id not in recs:
            raise LocalReleaseError(f"no kept release {release_id} under {root / 'releases'}")
        recs[release_id]["pinned"] = pinned
        out = list_document(recs.values(), doc.get("current"))
        write_local(root, out)
        return out


@dataclass
class Retained:
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)  # temporary directories of killed builds
    collected: Collected = field(default_factory=Collected)  # objects no kept release links
    fallback: str | None = None  # kept because a server serves it while `current` is broken


def kept_by_rule(ordered: list[str], keep: int, pinned: set[str], served: str | Iterable[str] | None) -> list[str]:
    """The retention rule over releases ordered newest first: the `keep` newest, every pinned one
    and the ones served (`current`'s, and the fallback a server serves while `current` is broken).
    Everything else may go."""
    live = {served} if isinstance(served, str) else set(served or ())
    return [rid for i, rid in enumerate(ordered) if i < keep or rid in pinned or rid in live]


def retain(root: Path, keep: int = DEFAULT_KEEP, dry_run: bool = False) -> Retained:
    """Apply the retention rule to a build root, then drop the objects no kept release links.

    Newest means the latest to go live here (`published_at` of the list; a release the list
    does not know counts by its id). The release `current` names and the pinned ones are never
    removed, whatever `keep` says. Removing a release removes its links; its bytes go only
    when no other release links them (`Store.collect`).
    """
    if keep < 1:
        raise LocalReleaseError("--keep must be at least 1 (the current release is always kept)")
    root = Path(root)
    if not (root / "releases").is_dir():
        raise LocalReleaseError(f"no releases under {root / 'releases'}")
    with locked(root):
        ids = release_ids(root)  # only real release directories, never a link
        listed = {r["release_id"]: r for r in (read_local(root) or {}).get("releases", [])}
        ordered = sorted(ids, key=lambda rid: (listed.get(rid, {}).get("published_at") or "", rid), reverse=True)
        pinned = {rid for rid, r in listed.items() if r.get("pinned")}
        # the server's own rule (edge.release.serving): `current`'s release, and while that one is
        # broken the newest other release that verifies in full, which a running server serves
        named = current_release_id(root)
        served = {*serving(root), *([named] if named else [])}
        kept = kept_by_rule(ordered, keep, pinned, served)
        out = Retained(removed=[rid for rid in ordered if rid not in kept], kept=kept,
                       cleaned=[] if dry_run else clean_killed_builds(root),
                       fallback=next((rid for rid in sorted(served) if rid != named), None))
        if dry_run:
            return out
        try:
            for n, rid in enumerate(out.removed):
                try:
                    remove_release(root, rid)
                except OSError as e:
                    done = ", ".join(out.removed[:n]) or "none"
                    raise LocalReleaseError(f"could not remove release {rid}: {e.strerror or e} "
                                            f"(removed before it: {done}; nothing else was touched)") from None
        finally:
            refresh_local(root)  # the list drops the removed ones, even after a failure
        out.collected = Store(root).collect()
    return out
