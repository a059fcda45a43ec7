"""`malaria-risk`: a thin click layer over the pipeline and edge libraries.

Each command parses options, calls one library function and prints the result;
no logic lives here that a test could not reach through the library.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from edge.keys import AdminError
from pipeline.settings import default_data_dir

DEFAULT_KEYS = "var/keys.sqlite"


keys_option = click.option(
    "--keys", "keys_path", default=DEFAULT_KEYS, show_default=True, type=click.Path(dir_okay=False),
    help="SQLite key store (keep it outside build/, which is what gets published).",
)
store_option = click.option(
    "--store", "store_spec", default=None, metavar="sqlite:PATH|dynamodb:TABLE_PREFIX",
    help="Key store; overrides --keys (which is shorthand for sqlite:PATH).",
)


def open_key_store(keys_path: str, store_spec: str | None) -> Any:
    """The admin store named by --store, else the SQLite file named by --keys."""
    from edge.stores import open_store

    return open_store(store_spec or f"sqlite:{keys_path}")[0]


@click.group()
@click.version_option(package_name="malaria-risk")
def main() -> None:
    """Malaria risk data service for Nigeria: build, serve and administer the static API."""


# -- build -------------------------------------------------------------------------------


@main.command()
@click.option("--data-dir", default=default_data_dir, show_default="$DATA_DIR, else ../shared/data beside the checkout",
              type=click.Path(file_okay=False, path_type=Path), help="Directory of raw inputs.")
@click.option("--out", default="build", show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output root; the release goes to OUT/releases/<id> and OUT/current points at it.")
@click.option("--quiet", is_flag=True, help="No progress display.")
def build(data_dir: Path, out: Path, quiet: bool) -> None:
    """Render every response into a new immutable release and switch `current` to it."""
    from pipeline.build import build as run_build
    from pipeline.errors import InputError
    from pipeline.release.render import RenderError

    if not data_dir.is_dir():
        raise click.ClickException(f"data directory {data_dir} does not exist (set DATA_DIR or --data-dir)")

    def progress(label: str, done: int, total: int) -> None:
        if not quiet:
            click.echo(f"\r  {label:<28} {done:>6}/{total:<6}", nl=False, err=True)
            if done == total:
                click.echo("", err=True)

    try:
        result = run_build(data_dir, out, progress)
    except (InputError, RenderError) as e:
        raise click.ClickException(str(e)) from e
    s = result.stats
    for name, reason in result.unavailable:
        click.echo(f"note: {name} skipped, its endpoints answer their unavailable error: {reason}", err=True)
    click.echo(
        f"release {s.release_id}: {s.files} files, {s.bytes / 1e6:.1f} MB "
        f"({s.written} written, {s.linked} linked from the previous release) in {result.seconds:.1f} s"
    )
    if s.bundle_files:
        tables = result.timings.get("downloads", 0.0)
        click.echo(
            f"bundles: {s.bundle_files} files, {s.bundle_bytes / 1e6:.1f} MB, zip {s.zip_bytes / 1e6:.1f} MB; "
            f"they add {tables + s.stamp_seconds + s.bundle_write_seconds:.2f} s (tables and outlines "
            f"{tables:.2f} s, README/checksums/zip {s.stamp_seconds:.2f} s, writing {s.bundle_write_seconds:.2f} s)"
        )


# -- serve -------------------------------------------------------------------------------


@main.command()
@click.option("--root", default="build", show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=int)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Worker processes; limits stay exact across them (a shared counters file).")
@click.option("--http", "http_front", type=click.Choice(["uvicorn", "direct"]), default="uvicorn", show_default=True,
              help="HTTP front: the ASGI app on uvicorn, or httptools/uvloop driving the same app directly "
                   "(several times the throughput; docs/limits.md#throughput).")
@click.option("--limits/--no-limits", default=True, show_default=True,
              help="Enforce per-minute limits and monthly allowances (see docs/limits.md).")
@keys_option
@store_option
def serve(root: Path, host: str, port: int, workers: int, http_front: str, limits: bool, keys_path: str,
          store_spec: str | None) -> None:
    """Serve the current release over HTTP, checking keys and limits against the key store."""
    from edge.local.app import create_app
    from edge.local.asgi import serve_workers
    from edge.local.settings import ServerSettings

    if not (root / "current").exists():
        raise click.ClickException(f"no release under {root}: run `malaria-risk build` first")
    base = ServerSettings.from_env()
    settings = ServerSettings(root=root, store=store_spec or f"sqlite:{keys_path}", counters=base.counters,
                              limits=limits, per_minute=base.per_minute, monthly=base.monthly,
                              fixed_now=base.fixed_now, http=http_front)
    os.environ.update(settings.to_env())  # the workers are new processes: settings travel in the environment
    create_app(settings)  # fail here, once, with a readable error rather than in every worker
    serve_workers(host, port, workers, http=http_front)


# -- keys, orgs, accounts ---------------------------------------------------------------


@main.group()
def keys() -> None:
    """Create, list and revoke API keys (the dashboard's Settings → API access)."""


@keys.command("create")
@click.option("--name", required=True, help="A label for the key.")
@click.option("--scope", "scopes", multiple=True, required=True,
              help="risk_scores, forecasts or lga_boundaries; repeat for several.")
@click.option("--kind", type=click.Choice(["live", "test"]), default="live", show_default=True)
@click.option("--expires", default=None, help="YYYY-MM-DD: the key stops working at 00:00 UTC that day.")
@click.option("--org", default=None, help="Owning organisation (its administrators can revoke the key).")
@click.option("--owner", default=None, help="Owning account.")
@click.option("--per-minute", type=int, default=None, help="Per-minute request limit (default: service default).")
@click.option("--monthly", type=int, default=None, help="Monthly allowance, live keys (default: service default).")
@keys_option
@store_option
def keys_create(name: str, scopes: tuple[str, ...], kind: str, expires: str | None, org: str | None,
                owner: str | None, per_minute: int | None, monthly: int | None, keys_path: str,
                store_spec: str | None) -> None:
    """Create a key. The key is printed once, as the last line, and never shown again."""
    store = open_key_store(keys_path, store_spec)
    try:
        kid, key = store.create(name, list(scopes), kind, expires, owner, org, per_minute, monthly)
    except AdminError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"created {kid} ({kind}, scopes: {' '.join(sorted(set(scopes)))}). Store this key now; it is not shown again:", err=True)
    click.echo(key)


@keys.command("list")
@keys_option
@store_option
def keys_list(keys_path: str, store_spec: str | None) -> None:
    """One line per key: id, name, kind, scopes, status, owner, org, expiry, key hint."""
    rows = open_key_store(keys_path, store_spec).list(datetime.now(UTC))
    for r in rows:
        scopes = ",".join(r["scopes"].split())
        click.echo("\t".join([
            r["id"], r["name"], r["kind"], scopes, r["status"], r["owner"] or "-", r["org"] or "-",
            r["expires_on"] or "never", r["hint"],
        ]))
    if not rows:
        click.echo("no keys", err=True)


@keys.command("revoke")
@click.argument("key_id")
@keys_option
@store_option
def keys_revoke(key_id: str, keys_path: str, store_spec: str | None) -> None:
    """Revoke a key by id; the next request with it gets 401."""
    try:
        open_key_store(keys_path, store_spec).revoke(key_id)
    except AdminError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"revoked {key_id}")


@main.group()
def orgs() -> None:
    """Suspend or restore an organisation (all its keys answer 401 while suspended)."""


@orgs.command("suspend")
@click.argument("org")
@keys_option
@store_option
def orgs_suspend(org: str, keys_path: str, store_spec: str | None) -> None:
    try:
        open_key_store(keys_path, store_spec).set_org_suspended(org, True)
    except AdminError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"suspended {org}")


@orgs.command("restore")
@click.argument("org")
@keys_option
@store_option
def orgs_restore(org: str, keys_path: str, store_spec: str | None) -> None:
    try:
        open_key_store(keys_path, store_spec).set_org_suspended(org, False)
    except AdminError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"restored {org}")


@main.group()
def accounts() -> None:
    """Account administration."""


@accounts.command("remove")
@click.argument("account")
@keys_option
@store_option
def accounts_remove(account: str, keys_path: str, store_spec: str | None) -> None:
    """Remove an account: every key it owns answers 401 from the next request on."""
    try:
        open_key_store(keys_path, store_spec).remove_account(account)
    except AdminError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"removed {account}")


def _register_deploy_targets() -> None:
    """Commands that live in their own modules, one per deploy target (as Datasette's publish/)."""
    from .publish.cli import commands

    for cmd in commands:
        main.add_command(cmd)


_register_deploy_targets()

if __name__ == "__main__":
    sys.exit(main())
