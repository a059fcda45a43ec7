"""`malaria-risk release publish|list|verify|rollback|prune`: operating published releases.

Each command opens an S3 client from the shared options and calls one function of
`pipeline.publish.s3`. Failures are PublishErrors and print as one line (see
pipeline/errors.py). The pre-grouping spellings (`publish`, `verify`, `rollback`,
`prune`, `releases list`) stay as hidden aliases so existing scripts keep working.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pipeline.publish import s3


class ClickProgress(s3.Progress):
    """A progress bar on stderr, one per phase (checking, uploading, verifying)."""

    def __init__(self) -> None:
        self._bar: Any = None

    def start(self, phase: str, total: int) -> None:
        self.finish()
        if total:
            self._bar = click.progressbar(
                length=total, label=f"{phase:<10}", file=sys.stderr, show_pos=True
            )
            self._bar.__enter__()

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def _err(msg: str) -> None:
    click.echo(msg, err=True)


def example(*lines: str) -> str:
    """A --help epilog: one or more command lines, kept as written (click's \\b)."""
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)


def s3_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--bucket/--prefix/--endpoint-url/--workers, turned into (client, target)."""

    @click.option(
        "--bucket", required=True, envvar="MALARIA_BUCKET", help="S3 bucket (or $MALARIA_BUCKET)."
    )
    @click.option(
        "--prefix",
        default="",
        envvar="MALARIA_PREFIX",
        show_default=True,
        help="Key prefix inside the bucket.",
    )
    @click.option(
        "--endpoint-url",
        default=None,
        envvar="MALARIA_S3_ENDPOINT",
        help="S3-compatible endpoint (default: AWS, or $AWS_ENDPOINT_URL).",
    )
    @click.option(
        "--workers", default=s3.DEFAULT_WORKERS, show_default=True, type=click.IntRange(1, 256)
    )
    @functools.wraps(fn)
    def wrapper(
        bucket: str, prefix: str, endpoint_url: str | None, workers: int, **kwargs: Any
    ) -> Any:
        target = s3.Target.of(bucket, prefix)
        # Fail fast on a dead endpoint, wrong key or missing bucket: the main client
        # retries connection errors with backoff for a minute, this one does not.
        s3.preflight(s3.make_client(endpoint_url, max_attempts=2, connect_timeout=5), target)
        client = s3.make_client(endpoint_url, workers=workers)
        return fn(client=client, target=target, workers=workers, **kwargs)

    return wrapper


@click.group("release")
def release() -> None:
    """Publish releases to S3 and operate the published ones (docs/operations.md)."""


@release.command("publish", epilog=example(
    "malaria-risk release publish --bucket malaria-api --prefix prod",
    "malaria-risk release publish --bucket malaria-api --release 20240501T000000Z-3f9a2c1b --no-switch",
))  # fmt: skip
@s3_options
@click.option(
    "--release",
    "release_id",
    default=None,
    help="Release id (default: what build/current points to).",
)
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("build"),
    show_default=True,
)
@click.option("--no-switch", is_flag=True, help="Upload and verify, but leave current.json alone.")
@click.option(
    "--thorough",
    is_flag=True,
    help="HEAD every object already in the bucket, not just the doubtful ones "
    "(checks headers and SHA-256 metadata changed in place).",
)
@click.option(
    "--allow-shrink",
    is_flag=True,
    help="Publish even if the release's estimated months end earlier than the live one's.",
)
def publish_cmd(
    client: Any,
    target: s3.Target,
    workers: int,
    release_id: str | None,
    root: Path,
    no_switch: bool,
    thorough: bool,
    allow_shrink: bool,
) -> None:
    """Upload a release, verify every uploaded object, then switch current.json to it.

    Refused, before any upload, when its estimated months end earlier than the live release's."""
    local = s3.open_local_release(root, release_id)
    result = s3.publish_release(
        client,
        target,
        local,
        workers=workers,
        progress=ClickProgress(),
        switch=not no_switch,
        thorough=thorough,
        log=_err,
        allow_shrink=allow_shrink,
    )
    rate = result.uploaded / result.seconds["upload"] if result.seconds.get("upload") else 0.0
    click.echo(
        f"release {result.release_id}: {result.objects} objects, {result.uploaded} uploaded "
        f"({result.bytes_uploaded / 1e6:.1f} MB, {rate:.0f} objects/s; {result.index_files} index files), "
        f"{result.reused} files' bytes already stored, "
        f"all verified, {result.already_present} already present, "
        f"in {result.seconds['total']:.1f}s"
    )
    if result.headers_unchecked:
        click.echo(
            f"not checked: headers and SHA-256 metadata of the {result.headers_unchecked} object(s) already "
            "present whose size and body (ETag) matched; run `malaria-risk release verify` or publish "
            "with --thorough to check them"
        )
    if result.pointer_switched:
        click.echo(
            f"{target.url(target.pointer_key)} now names {result.release_id} (previous: {result.previous})"
        )
    elif no_switch:
        click.echo(f"{target.url(target.pointer_key)} left unchanged (--no-switch)")
    else:
        click.echo(f"{target.url(target.pointer_key)} already named {result.release_id}; unchanged")


@release.command("list", epilog=example("malaria-risk release list --bucket malaria-api --prefix prod"))
@s3_options
def releases_list_cmd(client: Any, target: s3.Target, workers: int) -> None:
    """Release ids, newest first, marking current and previous, with object counts."""
    s3.preflight(client, target)
    infos = s3.list_releases(client, target)
    if not infos:
        click.echo(f"no releases under {target.url(target.releases_prefix)}")
        return
    for r in infos:
        mark = "current" if r.current else "previous" if r.previous else ""
        expected = "?" if r.expected is None else str(r.expected)
        state = "complete" if r.complete else "INCOMPLETE"
        click.echo(
            f"{r.release_id:<32} {mark:<8} {r.objects:>7}/{expected:<7} objects  {state:<10} "
            f"updated_at={r.updated_at or '-'}  uploaded={r.last_modified:%Y-%m-%dT%H:%M:%SZ}"
        )


@release.command("verify", epilog=example(
    "malaria-risk release verify --bucket malaria-api --prefix prod --deep",
))  # fmt: skip
@s3_options
@click.option(
    "--release", "release_id", default=None, help="Release id (default: the current one)."
)
@click.option("--deep", is_flag=True, help="Also download every object and check its SHA-256.")
def verify_cmd(
    client: Any, target: s3.Target, workers: int, release_id: str | None, deep: bool
) -> None:
    """Check a published release against its manifest; print every difference."""
    s3.preflight(client, target)
    pointer = s3.read_pointer(client, target)
    if release_id is None:
        if pointer is None or not pointer.release_id:
            raise s3.PublishError(
                f"{target.url(target.pointer_key)} does not exist: nothing is published; pass --release"
            )
        release_id = pointer.release_id
    s3.check_release_id(release_id)
    problems = s3.verify_remote_release(
        client,
        target,
        release_id,
        deep=deep,
        pointer=pointer,
        workers=workers,
        progress=ClickProgress(),
    )
    for problem in problems:
        click.echo(problem)
    if problems:
        raise s3.PublishError(
            f"release {release_id}: {len(problems)} difference(s) from its manifest"
        )
    click.echo(
        f"release {release_id}: every object matches its manifest{' (bodies hashed)' if deep else ''}"
    )


@release.command("rollback", epilog=example(
    "malaria-risk release rollback --bucket malaria-api --prefix prod --to 20240401T000000Z-8e0d4a77",
))  # fmt: skip
@s3_options
@click.option("--to", "release_id", required=True, help="Release id to make current again.")
@click.option(
    "--deep", is_flag=True, help="Hash every object of the target release before switching."
)
def rollback_cmd(client: Any, target: s3.Target, workers: int, release_id: str, deep: bool) -> None:
    """Switch current.json back to an earlier, complete release. Deletes nothing."""
    before, doc = s3.rollback(client, target, release_id, deep=deep, workers=workers)
    if doc is None:
        click.echo(f"{release_id} is already current; nothing changed")
    else:
        click.echo(
            f"{target.url(target.pointer_key)} now names {release_id} (was {before.release_id if before else None})"
        )


@release.command("prune", epilog=example(
    "malaria-risk release prune --bucket malaria-api --prefix prod --keep 5 --dry-run",
))  # fmt: skip
@s3_options
@click.option(
    "--keep",
    required=True,
    type=click.IntRange(min=0),
    help="How many of the newest releases to keep.",
)
@click.option("--dry-run", is_flag=True, help="Only print what would be deleted.")
def prune_cmd(client: Any, target: s3.Target, workers: int, keep: int, dry_run: bool) -> None:
    """Delete old releases; the current and previous ones are always kept."""
    doomed = s3.prune(client, target, keep, dry_run=dry_run, log=_err)
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"{verb} {len(doomed)} release(s){': ' + ', '.join(doomed) if doomed else ''}")
    for rid in doomed:  # each release's bundle goes with it: cited download paths stop answering
        click.echo(f"  {rid}: bundle {'would no longer' if dry_run else 'no longer'} downloadable at "
                   f"/v1/downloads/{rid}/")


def _hidden(cmd: click.Command, name: str | None = None) -> click.Command:
    """The same command under its old name, left out of --help."""
    return click.Command(
        name or cmd.name, callback=cmd.callback, params=cmd.params, help=cmd.help,
        epilog=cmd.epilog, hidden=True,
    )  # fmt: skip


_releases = click.Group("releases", hidden=True, help="Old spelling of `release list`.")
_releases.add_command(_hidden(releases_list_cmd, "list"))

# The top-level spellings from before `release` grouped them.
aliases: list[click.Command] = [
    _hidden(publish_cmd), _releases, _hidden(verify_cmd), _hidden(rollback_cmd), _hidden(prune_cmd),
]  # fmt: skip
