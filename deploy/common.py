"""What every step of deploy/ shares: its log line, the dry-run switch, comparing wanted with found."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EDGE_EVENTS = ("viewer-request", "viewer-response")  # the two Lambda@Edge functions, `<name>-<event>`


def log(msg: str) -> None:
    print(msg, flush=True)


def change(dry: bool, what: str, fn: Callable[[], Any]) -> Any:
    """Make one change and say so, or with `dry` only say it would be made (every read still happens,
    so a dry run lists exactly what a real run would change, and a dry run after a real one lists nothing)."""
    if dry:
        log(f"would: {what}")
        return None
    result = fn()
    log(what)
    return result


def error_code(e: Exception) -> str:
    return str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))


def subset(wanted: Any, got: Any) -> bool:
    """Whether every value we set is already so (AWS adds defaults we did not ask for)."""
    if isinstance(wanted, dict):
        return isinstance(got, dict) and all(subset(v, got.get(k)) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(got, list) and len(wanted) == len(got) and all(subset(a, b) for a, b in zip(wanted, got, strict=True))
    return bool(wanted == got)
