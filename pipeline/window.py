"""The recorded window never moves backwards without the operator saying so.

A data load whose newest month is older than the release already out (a stale mirror, a
truncated file, the wrong file) would move `last_estimated` back and withdraw months that
clients have already read. The build checks the new window against `build/current` and
`release publish` against the bucket's `current.json`; `--allow-shrink` lets it through.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.errors import WindowShrinks


def shrink_problem(published: Sequence[str], new: Sequence[str]) -> str | None:
    """Why `new` (estimated months, oldest first) is a step back from `published`, or None."""
    if not published:
        return None
    if not new:
        return f"it has no estimated month where {published[0]} to {published[-1]} are out"
    if new[-1] < published[-1]:
        return f"its last estimated month {new[-1]} is older than {published[-1]}"
    if new[0] > published[0]:
        return f"it starts at {new[0]}, after {published[0]}"
    return None


def check_window(published: Sequence[str], new: Sequence[str], against: str, allow_shrink: bool) -> None:
    """Raise WindowShrinks when `new` moves backwards against `published` (described by `against`)."""
    problem = shrink_problem(published, new)
    if problem and not allow_shrink:
        raise WindowShrinks(f"the recorded window would move backwards against {against}: {problem}; "
                            "nothing was changed (pass --allow-shrink if that is intended)")
