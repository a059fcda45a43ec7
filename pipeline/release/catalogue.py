"""The list of kept releases (`GET /v1/releases`): one small mutable document beside the pointer.

A release is immutable and hashed whole, so it cannot hold a list that changes when a
later release is published or an old one pruned. The list lives where the one other
mutable fact already lives, next to the pointer: `<build root>/releases.json` beside
`current`, and `<prefix>/releases.json` beside `current.json` in the bucket. It is
rewritten whenever the set of kept releases or the live one changes (a build, a local
prune, a publish, a rollback, a bucket prune), and the edge serves it as it is.

Each record is written once, when its release first appears, and carried forward
unchanged afterwards: `published_at` is when the release first went live there and
`changes` compares it with the release that was live before it. Design: docs/local-releases.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from edge.routes import BUNDLE_ZIP, DOWNLOAD_FILE, RELEASE_LIST_NAME

LIST_FORMAT = 1


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
    return rec


def list_document(records: Iterable[Mapping[str, Any]], current: str | None) -> dict[str, Any]:
    """Newest first (by when each went live, then id); `current` marks the one being served."""
    recs = sorted(records, key=lambda r: (r.get("published_at") or "", r["release_id"]), reverse=True)
    return {"format": LIST_FORMAT, "current": current,
            "releases": [{**r, "current": r["release_id"] == current} for r in recs]}


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
    from pipeline.release.manifest import Manifest

    try:
        m = Manifest.load(root / "releases" / rid)
        mtime = datetime.fromtimestamp((root / "releases" / rid / "manifest.json").stat().st_mtime, UTC)
    except (OSError, ValueError, KeyError):
        return None
    return record(rid, m.updated_at, m.model_version, m.facts, stamp(mtime), before)


def refresh_local(root: Path, new_id: str | None = None, before_id: str | None = None) -> dict[str, Any]:
    """Rewrite the root's list for the releases now under `releases/`, the current one marked.

    `new_id` is a release just switched to, compared with `before_id` (the one live before).
    Releases the list does not know yet (built before the list existed) are described from
    their manifests, oldest first, each compared with the one before it; a release's
    `published_at` is then the time its build finished (its manifest's modification time).
    """
    from edge.release import release_ids
    from pipeline.release.local import current_release_id

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
            rec["published_at"] = stamp(datetime.now(UTC))
            by_id[new_id] = rec
    out = updated_list({"releases": list(by_id.values())}, kept, current_release_id(root))
    write_local(root, out)
    return out
