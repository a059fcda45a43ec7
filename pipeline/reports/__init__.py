"""Reproducible evidence for the risk model, written as Markdown + JSON into reports/.

Each report states the command that made it, so a reader can regenerate it from the
same DATA_DIR and check the figures quoted in docs/model.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from pipeline.settings import default_data_dir

DEFAULT_DATA_DIR = default_data_dir()


def report_command(fn: Callable[[Path, Path], None]) -> click.Command:
    """The one command line every report takes: where the data is, where the report goes."""
    fn = click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=Path("reports"),
                      show_default=True)(fn)
    fn = click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=DEFAULT_DATA_DIR,
                      show_default=True)(fn)
    name = fn.__module__.rsplit(".", 1)[-1]
    epilog = f"\b\nExample:\n  malaria-risk report {name} --data-dir ../shared/data --out reports"
    return click.command(epilog=epilog)(fn)

