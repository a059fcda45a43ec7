"""The exception every runtime of the service may raise on purpose: one base class, importable
by the pipeline, the key dashboard and the edge alike.

The dashboard ships as its own Lambda bundle (the `dashboard` and `edge` packages, no
`pipeline`), so its errors cannot come from `pipeline.errors`; this module is standard
library only, like the rest of `edge/`. `pipeline.errors` builds its tree on this class,
and the command line catches the family once (`pipeline.cli.main`).
"""

from __future__ import annotations


class OperatorError(Exception):
    """A failure the operator can fix; `problems` lists every instance when there are many."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or []
