"""`malaria-risk`: a thin click layer over the pipeline and edge libraries.

Each command parses options, calls one library function and prints the result;
no logic lives here that a test could not reach through the library. Commands are
grouped by noun where there are several verbs (`keys`, `orgs`, `accounts`,
`release`, `report`). Operator errors (pipeline/errors.py, and the key stores'
AdminError) are caught once, in `Main.invoke`, and print as one line.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import orjson

from edge.keys import AdminError, AdminStore
from pipeline.data_cli import data, refresh_cmd
from pipeline.errors import OperatorError
from pipeline.publish.cli import aliases, example, release
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


def open_key_store(keys_path: str, store_spec: str | None) -> AdminStore:
    """The admin store named by --store, else the SQLite file named by --keys."""
    from edge.stores import open_keys

    spec = store_spec or f"sqlite:{keys_path}"
    refuse_store_inside(spec, None)
    return open_keys(spec)  # never the limit counters: administering keys neither needs nor may damage them


def open_service(keys_path: str, store_spec: str | None, dashboard_store: str | None = None) -> Any:
    """The dashboard's service over the key store (and the dashboard store beside it), so staff
    commands check, change and audit exactly as the dashboard does."""
    from dashboard.app import build as build_dashboard
    from dashboard.settings import DashboardSettings

    spec = store_spec or f"sqlite:{keys_path}"
    refuse_store_inside(spec, None)
    service, _ = build_dashboard(DashboardSettings(store=spec, dashboard=dashboard_store or ""))
    if hasattr(service.store, "require_tables"):  # DynamoDB: nothing changes unless it can be audited
        service.store.require_tables()
    return service


def staff() -> str:
    """Who the audit log says made a change from the command line."""
    import getpass

    try:
        return f"staff:{getpass.getuser()}"
    except (KeyError, OSError):
        return "staff"


dashboard_store_option = click.option(
    "--dashboard-store", default=None, metavar="PATH",
    help="The dashboard's own store (accounts, audit log); default dashboard.sqlite beside the key store.",
)


def refuse_store_inside(spec: str, root: Path | None) -> None:
    """A key store under a build root would be published with the release: refuse it.

    `root` is the build root being served; without one (key administration), any
    directory that looks like a build root (it holds `releases/` or `current`) counts.
    """
    from edge.stores import store_inside_build_root

    problem = store_inside_build_root(spec, root)
    if problem:
        raise click.ClickException(problem)


class Main(click.Group):
    """The root group: turns every operator error into one line and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (OperatorError, AdminError) as exc:
            for problem in getattr(exc, "problems", []):
                click.echo(f"  {problem}", err=True)
            raise click.ClickException(str(exc)) from None


class LazyGroup(click.Group):
    """A group whose commands are imported only when named (reports pull in the model)."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy = lazy  # command name -> "module:attribute"

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module, _, attr = self.lazy[cmd_name].partition(":")
        cmd = getattr(importlib.import_module(module), attr)
        if not isinstance(cmd, click.Command):
            raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
        return cmd


@click.group(cls=Main)
@click.version_option(package_name="malaria-risk")
def main() -> None:
    """Malaria risk data service for Nigeria: build, serve and administer the static API."""


# -- build -------------------------------------------------------------------------------


def build_progress(echo: Any, tty: bool, quiet: bool = False,
                   clock: Any = time.monotonic) -> Any:
    """The build's progress display: `echo(text, nl)` prints. On a terminal one line redrawn in place
    (`\\r`); in a log (not a TTY, as under `make run > log`) one line per step with the seconds since
    the build began, so the log reads as a list of steps rather than one very long line."""
    started = clock()
    steps: list[str] = []  # labels seen, in order

    def progress(label: str, done: int, total: int) -> None:
        if quiet:
            return
        if tty:
            echo(f"\r  {label:<28} {done:>6}/{total:<6}", False)
            if done == total:
                echo("", True)
        else:
            if not steps or steps[-1] != label:
                steps.append(label)
                echo(f"  {clock() - started:6.1f} s  {label}", True)
            if done == total and total > 1:
                echo(f"  {clock() - started:6.1f} s  {label}: {done} of {total} done", True)

    return progress


@main.command(epilog=example("malaria-risk build --data-dir ../shared/data --out build"))
@click.option("--data-dir", default=default_data_dir, show_default="$DATA_DIR, else ../shared/data beside the checkout",
              type=click.Path(file_okay=False, path_type=Path), help="Directory of raw inputs.")
@click.option("--out", default="build", show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output root; the release goes to OUT/releases/<id> and OUT/current points at it.")
@click.option("--quiet", is_flag=True, help="No progress display.")
@click.option("--allow-shrink", is_flag=True,
              help="Build even if the estimated months end earlier than in OUT/current (docs/data-load.md).")
@click.option("--force", is_flag=True, help="Build even when inputs and code are unchanged (a kept release built "
                                           "from them that verifies is kept, before anything is computed).")
def build(data_dir: Path, out: Path, quiet: bool, allow_shrink: bool, force: bool) -> None:
    """Render every response into a new immutable release and switch `current` to it.

    Inputs are checked first (docs/data-load.md); unchanged inputs and code build nothing."""
    from pipeline.build import build as run_build

    if not data_dir.is_dir():
        raise click.ClickException(f"data directory {data_dir} does not exist (set DATA_DIR or --data-dir)")

    progress = build_progress(lambda text, nl: click.echo(text, nl=nl, err=True), sys.stderr.isatty(), quiet)

    result = run_build(data_dir, out, progress, allow_shrink=allow_shrink, force=force)
    s = result.stats
    if result.unchanged and force:
        click.echo(f"nothing to build: release {s.release_id} was built from the same inputs and code and every "
                   f"file verifies ({result.seconds:.1f} s)")
        return
    if result.unchanged:
        click.echo(f"nothing changed: release {s.release_id} is current and was built from the same inputs and "
                   f"code ({result.seconds:.1f} s; --force builds anyway)")
        return
    for name, reason in result.unavailable:
        click.echo(f"note: {name} skipped, its endpoints answer their unavailable error: {reason}", err=True)
    click.echo(
        f"release {s.release_id}: {s.files} files, {s.bytes / 1e6:.1f} MB "
        f"({s.written} written, {s.linked} copied from the previous release) in {result.seconds:.1f} s"
    )
    if s.bundle_files:
        tables = result.timings.get("downloads", 0.0)
        click.echo(
            f"bundles: {s.bundle_files} files, {s.bundle_bytes / 1e6:.1f} MB, zip {s.zip_bytes / 1e6:.1f} MB; "
            f"they add {tables + s.stamp_seconds + s.bundle_write_seconds:.2f} s (tables and outlines "
            f"{tables:.2f} s, README/checksums/zip {s.stamp_seconds:.2f} s, writing {s.bundle_write_seconds:.2f} s)"
        )
    if s.cleaned:
        click.echo(f"note: removed {s.cleaned} temporary director{'y' if s.cleaned == 1 else 'ies'} "
                   "left by killed builds", err=True)


# -- serve -------------------------------------------------------------------------------


@main.command(epilog=example("malaria-risk serve --root build --port 8080 --keys var/keys.sqlite --workers 2"))
@click.option("--root", default="build", show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Worker processes; limits stay exact across them (a shared counters file).")
@click.option("--http", "http_front", type=click.Choice(["direct", "uvicorn"]), default="direct", show_default=True,
              help="HTTP front: httptools/uvloop driving the app directly (bounds every client-controlled size "
                   "and time), or the same app as ASGI on uvicorn's h11 (docs/limits.md#http-front).")
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
    from edge.release import LocalReleases, ReleaseUnavailable

    store = store_spec or f"sqlite:{keys_path}"
    refuse_store_inside(store, root)  # a refusal that needs no port: said whether or not the port is free
    _require_free_port(host, port)
    releases = LocalReleases(root)
    try:
        served = releases.current()
    except ReleaseUnavailable as e:
        raise click.ClickException(f"not serving: {e}") from e
    if releases.fallback_reason:
        click.echo(f"warning: {releases.fallback_reason}; serving release {served.release_id}, the newest "
                   "that verifies (`malaria-risk verify --root ... --all` lists what is wrong)", err=True)
    base = ServerSettings.from_env()
    settings = ServerSettings(root=root, store=store, counters=base.counters,
                              limits=limits, per_minute=base.per_minute, monthly=base.monthly,
                              fixed_now=base.fixed_now, http=http_front, access_log=base.access_log,
                              log_ok_every=base.log_ok_every)
    os.environ.update(settings.to_env())  # the workers are new processes: settings travel in the environment
    create_app(settings)  # fail here, once, with a readable error rather than in every worker
    serve_workers(host, port, workers, http=http_front)


def port_problem(host: str, port: int, make_var: str = "PORT") -> str | None:
    """Why `host:port` cannot be listened on, or None when it can: checked before a long build, not after."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        return f"cannot resolve host {host!r}: {e.strerror}"
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            sock.bind(addr)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return (f"port {port} on {host} is already in use (another `make run` or server?). "
                        f"Stop that server, or choose another port: `make run {make_var}={_other_port(port)}`.")
            return f"cannot listen on {host}:{port}: {e.strerror}"
    return None


def _other_port(port: int) -> int:
    return port + 1 if port < 65535 else 8081


def _require_free_port(host: str, port: int, make_var: str = "PORT") -> None:
    problem = port_problem(host, port, make_var)
    if problem is not None:
        raise click.ClickException(problem)


@main.command("check-port", epilog=example("malaria-risk check-port --host 127.0.0.1 --port 8080"))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option("--make-var", default="PORT", show_default=True, hidden=True,
              help="The `make run` variable the fix names (DASH_PORT for the dashboard's port).")
def check_port(host: str, port: int, make_var: str) -> None:
    """Fail with the fix when the port is taken; `make run` asks this (API and dashboard ports) before it builds."""
    _require_free_port(host, port, make_var)


@main.command("wait-http", hidden=True, epilog=example("malaria-risk wait-http http://127.0.0.1:8080/docs/"))
@click.argument("url")
@click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait at most.")
@click.option("--since-ns", type=int, default=None,
              help="A `date +%s%N` stamp: the line gives the seconds since then (default: since this started).")
@click.option("--label", default="serve", show_default=True)
def wait_http(url: str, timeout: float, since_ns: int | None, label: str) -> None:
    """Wait until URL answers 200, then print `make run`'s line for the phase: its time and the address."""
    import urllib.error
    import urllib.request

    start = since_ns / 1e9 if since_ns is not None else time.time()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 (a loopback address of our own)
                if r.status == 200:
                    click.echo(f"== {label:<10} {time.time() - start:6.1f} s  (first 200 from {url})")
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise click.ClickException(f"{url} did not answer 200 within {timeout:.0f} s")


# -- keys, orgs, accounts ---------------------------------------------------------------


@main.group()
def keys() -> None:
    """Create, list and revoke API keys (the dashboard's Settings → API access)."""


@keys.command("create", epilog=example(
    'malaria-risk keys create --name "dashboard" --scope risk_scores --scope forecasts --kind live --org ngo',
))  # fmt: skip
@click.option("--name", required=True, help="A label for the key.")
@click.option("--scope", "scopes", multiple=True, required=True,
              help="risk_scores, forecasts or lga_boundaries; repeat for several.")
@click.option("--kind", type=click.Choice(["live", "test"]), default="live", show_default=True)
@click.option("--expires", default=None, help="YYYY-MM-DD: the key stops working at 00:00 UTC that day.")
@click.option("--org", default=None, help="Owning organisation (its administrators can revoke the key).")
@click.option("--owner", default=None, help="Owning account.")
@click.option("--per-minute", type=int, default=None, help="Per-minute request limit (default: service default).")
@click.option("--monthly", type=int, default=None, help="Monthly allowance, live keys (default: service default).")
@click.option("--over-cap", is_flag=True, help="Create it even if the holder has its cap of active keys (logged).")
@keys_option
@store_option
@dashboard_store_option
def keys_create(name: str, scopes: tuple[str, ...], kind: str, expires: str | None, org: str | None,
                owner: str | None, per_minute: int | None, monthly: int | None, over_cap: bool, keys_path: str,
                store_spec: str | None, dashboard_store: str | None) -> None:
    """Create a key. The key is printed once, as the last line, and never shown again.

    An organisation's key (--org) belongs to the organisation: give no --owner, so removing
    an account never stops it. The audit log records who created it.
    """
    if org is not None and owner is not None:
        raise click.ClickException("give --org (the organisation's key) or --owner (an account's own key), not both")
    service = open_service(keys_path, store_spec, dashboard_store)
    kid, key = service.staff_create_key(staff(), name, list(scopes), kind, expires, owner, org, per_minute, monthly,
                                        over_cap=over_cap)
    click.echo(f"created {kid} ({kind}, scopes: {' '.join(sorted(set(scopes)))}). Store this key now; it is not shown again:", err=True)
    click.echo(key)


LOCAL_TEST_SCOPES = ("risk_scores", "forecasts", "lga_boundaries")


@keys.command("local-test", epilog=example("malaria-risk keys local-test --keys var/keys.sqlite"))
@click.option("--key-file", default="var/local-test-key", show_default=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where the key is kept between runs, readable by its owner only.")
@click.option("--org", default=None, help="The organisation the key belongs to (`make run`: the local one, so its "
              "administrator sees the key in the dashboard's key list).")
@keys_option
def keys_local_test(key_file: Path, keys_path: str, org: str | None) -> None:
    """Print the local test key (all scopes), creating it only when the kept one no longer works.

    Repeated `make run` reuses one key instead of adding a key to the store each time; a kept key of
    another organisation than `--org` is revoked and replaced, so the list shows one local test key.
    """
    from edge.keys import hash_key, looks_like_key
    from edge.stores.sqlite import SQLiteKeyStore

    store = SQLiteKeyStore(keys_path)
    kept = key_file.read_text(encoding="ascii").strip() if key_file.is_file() else ""
    if looks_like_key(kept):
        record = store.lookup(hash_key(kept))
        if record is not None and record.status(datetime.now(UTC)) == "active" \
                and set(LOCAL_TEST_SCOPES) <= set(record.scopes):
            if record.org == org:
                key_file.chmod(0o600)
                click.echo(kept)
                return
            store.revoke(record.id)
    _, key = store.create("local test key", list(LOCAL_TEST_SCOPES), "test", org=org)
    key_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = key_file.with_name(key_file.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(key + "\n")
    os.chmod(tmp, 0o600)  # O_CREAT's mode does not apply to a file left over from an interrupted run
    os.replace(tmp, key_file)
    click.echo(f"created a local test key, kept in {key_file} (owner-only)", err=True)
    click.echo(key)


@keys.command("list", epilog=example("malaria-risk keys list --keys var/keys.sqlite",
                                      "malaria-risk keys list --store dynamodb:malaria-prod"))
@keys_option
@store_option
def keys_list(keys_path: str, store_spec: str | None) -> None:
    """One line per key: id, name, kind, scopes, status, owner, org, expiry, key hint."""
    from dashboard.operator_text import terminal_line

    rows = open_key_store(keys_path, store_spec).list(datetime.now(UTC))
    for r in rows:  # names and owners are typed by users: escapes are shown, never obeyed
        scopes = ",".join(r["scopes"].split())
        click.echo(terminal_line([
            r["id"], r["name"], r["kind"], scopes, r["status"], r["owner"] or "-", r["org"] or "-",
            r["expires_on"] or "never", r["hint"],
        ]))
    if not rows:
        click.echo("no keys", err=True)


@keys.command("revoke", epilog=example("malaria-risk keys revoke key_3f9a2c --keys var/keys.sqlite"))
@click.argument("key_id")
@keys_option
@store_option
@dashboard_store_option
def keys_revoke(key_id: str, keys_path: str, store_spec: str | None, dashboard_store: str | None) -> None:
    """Revoke a key by id; the next request with it gets 401."""
    open_service(keys_path, store_spec, dashboard_store).staff_revoke_key(staff(), key_id)
    click.echo(f"revoked {key_id}")


@keys.command("usage-export", epilog=example(
    "malaria-risk keys usage-export --store dynamodb:mr- --month 2026-10 --out usage-2026-10.csv",
    "malaria-risk keys usage-export --keys var/keys.sqlite --month 2026-11 --format json",
))  # fmt: skip
@click.option("--month", required=True, help="YYYY-MM: the current month (partial) or a finished one whose "
              "counters are still kept (the month before, at the edge; locally, until a day after it ends).")
@click.option("--format", "fmt", type=click.Choice(["csv", "json"]), default=None,
              help="Default: from --out's suffix, else csv.")
@click.option("--out", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Write here (atomically) instead of standard output.")
@keys_option
@store_option
def keys_usage_export(month: str, fmt: str | None, out: Path | None, keys_path: str, store_spec: str | None) -> None:
    """Per-key request totals of one month, before its counters expire (docs/monitoring.md#usage-exports)."""
    from pipeline.usage import render, usage_export, write_atomically

    spec = store_spec or f"sqlite:{keys_path}"
    refuse_store_inside(spec, None)
    rows = usage_export(spec, month)
    text = render(rows, fmt or ("json" if out is not None and out.suffix == ".json" else "csv"))
    if out is None:
        click.echo(text, nl=False)
    else:
        write_atomically(out, text)
        click.echo(f"{out}: {len(rows)} key(s), {month}", err=True)


# -- canary ------------------------------------------------------------------------------


@click.command("canary", epilog=example(
    "malaria-risk canary --base-url https://api.example.org --key-file /run/secrets/canary-key "
    "--max-lag-days 60 --publish-status malaria-api --status-prefix prod",
    "malaria-risk canary --base-url http://127.0.0.1:8080 --key-file var/local-test-key --status-file status.json",
))  # fmt: skip
@click.option("--base-url", required=True, help="The served API, e.g. https://api.example.org.")
@click.option("--key-file", required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="File holding an API key with every scope (its first line).")
@click.option("--max-lag-days", default=60, show_default=True, type=click.IntRange(0),
              help="Days after the newest estimated month's end before /v1/periods counts as stale.")
@click.option("--publish-status", "status_bucket", default=None, metavar="BUCKET",
              help="Put status.json into this bucket, under STATUS_PREFIX/status/.")
@click.option("--status-prefix", default="", help="Key prefix for --publish-status (the releases' prefix).")
@click.option("--endpoint-url", default=None, help="S3-compatible endpoint for --publish-status.")
@click.option("--status-file", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Also write status.json here.")
@click.option("--state", default="KN", show_default=True, help="The state the sampled LGA routes ask for.")
@click.option("--today", default=None, help="YYYY-MM-DD to judge staleness against (default: today, UTC).")
def canary_cmd(base_url: str, key_file: Path, max_lag_days: int, status_bucket: str | None, status_prefix: str,
               endpoint_url: str | None, status_file: Path | None, state: str, today: str | None) -> None:
    """Fail (exit 1, one line) when /v1/periods is stale or a sample of routes fails; write status.json."""
    from datetime import date

    from pipeline.canary import publish_status, run_canary, status_bytes
    from pipeline.usage import write_atomically

    key = key_file.read_text(encoding="utf-8").strip().splitlines()[0] if key_file.stat().st_size else ""
    if not key:
        raise click.ClickException(f"{key_file} holds no key")
    try:
        day = date.fromisoformat(today) if today else None
    except ValueError:
        raise click.ClickException(f"--today {today!r} is not YYYY-MM-DD") from None
    result = run_canary(base_url, key, max_lag_days, day, state)
    if status_file is not None:
        write_atomically(status_file, status_bytes(result).decode())
    if status_bucket:
        publish_status(result, status_bucket, status_prefix, endpoint_url)
    if not result.ok:
        raise click.ClickException(f"canary: {result.reason}")
    click.echo(f"canary {result.reason}")


main.add_command(canary_cmd)


@main.group()
def orgs() -> None:
    """Suspend or restore an organisation (all its keys answer 401 while suspended)."""


@orgs.command("suspend", epilog=example("malaria-risk orgs suspend ngo --keys var/keys.sqlite"))
@click.argument("org")
@keys_option
@store_option
@dashboard_store_option
def orgs_suspend(org: str, keys_path: str, store_spec: str | None, dashboard_store: str | None) -> None:
    """Suspend an organisation: its keys answer 401 from the next request on."""
    open_service(keys_path, store_spec, dashboard_store).set_org_suspended(staff(), org, True)
    click.echo(f"suspended {org}")


@orgs.command("restore", epilog=example("malaria-risk orgs restore ngo --keys var/keys.sqlite"))
@click.argument("org")
@keys_option
@store_option
@dashboard_store_option
def orgs_restore(org: str, keys_path: str, store_spec: str | None, dashboard_store: str | None) -> None:
    """Lift a suspension: the organisation's keys work again (unless revoked or expired)."""
    open_service(keys_path, store_spec, dashboard_store).set_org_suspended(staff(), org, False)
    click.echo(f"restored {org}")


@orgs.command("create", epilog=example(
    'malaria-risk orgs create ngo --name "Health NGO" --admin ann@ngo.example'))  # fmt: skip
@click.argument("org")
@click.option("--name", required=True, help="The organisation's name, as the dashboard shows it.")
@click.option("--admin", required=True, help="Email of its first administrator (who then invites the others).")
@keys_option
@store_option
@dashboard_store_option
def orgs_create(org: str, name: str, admin: str, keys_path: str, store_spec: str | None,
                dashboard_store: str | None) -> None:
    """Create an organisation in the dashboard with its first administrator."""
    open_service(keys_path, store_spec, dashboard_store).create_org(staff(), org, name, admin)
    click.echo(f"created {org}; {admin} signs in to the dashboard with their email and administers it")


@main.group()
def accounts() -> None:
    """Account administration: remove accounts, unlock researchers' API access."""


@accounts.command("remove", epilog=example("malaria-risk accounts remove ann@ngo.example --keys var/keys.sqlite"))
@click.argument("account")
@keys_option
@store_option
@dashboard_store_option
def accounts_remove(account: str, keys_path: str, store_spec: str | None, dashboard_store: str | None) -> None:
    """Remove an account: every key it owns answers 401 from the next request on; its
    organisations' keys keep working (they belong to the organisation)."""
    open_service(keys_path, store_spec, dashboard_store).remove_account(staff(), account)
    click.echo(f"removed {account}")


@accounts.command("unlock", epilog=example("malaria-risk accounts unlock ada@uni.example"))
@click.argument("email")
@keys_option
@store_option
@dashboard_store_option
def accounts_unlock(email: str, keys_path: str, store_spec: str | None, dashboard_store: str | None) -> None:
    """Unlock a researcher's API access: they can then create their own keys in the dashboard."""
    open_service(keys_path, store_spec, dashboard_store).set_unlocked(staff(), email, True)
    click.echo(f"unlocked API access for {email}")


@accounts.command("lock", epilog=example("malaria-risk accounts lock ada@uni.example"))
@click.argument("email")
@keys_option
@store_option
@dashboard_store_option
def accounts_lock(email: str, keys_path: str, store_spec: str | None, dashboard_store: str | None) -> None:
    """Lock a researcher's API access again: no new keys (revoke existing ones with `keys revoke`)."""
    open_service(keys_path, store_spec, dashboard_store).set_unlocked(staff(), email, False)
    click.echo(f"locked API access for {email}")


@accounts.command("requests", epilog=example("malaria-risk accounts requests"))
@keys_option
@store_option
@dashboard_store_option
def accounts_requests(keys_path: str, store_spec: str | None, dashboard_store: str | None) -> None:
    """Researchers' open requests for API access: when, who, and what for (answer with `accounts unlock`)."""
    from dashboard.operator_text import terminal_line

    rows = open_service(keys_path, store_spec, dashboard_store).store.access_requests()
    for r in rows:  # the reason is the researcher's own text: escapes are shown, never obeyed
        click.echo(terminal_line([r["created_at"], r["email"], r["reason"]]))
    if not rows:
        click.echo("no open requests", err=True)


# -- the dashboard -----------------------------------------------------------------------


@main.group("dashboard", invoke_without_command=True,
            epilog=example("malaria-risk dashboard --port 8090 --keys var/keys.sqlite",
                           "malaria-risk dashboard rotate-secret --keys var/keys.sqlite"))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8090, show_default=True, type=click.IntRange(1, 65535))
@click.option("--api-url", default="http://127.0.0.1:8080", show_default=True,
              help="The API's origin, for the ready curl / Python / R lines.")
@click.option("--base-url", default=None, help="The dashboard's own origin (default http://HOST:PORT).")
@click.option("--mailer", default="console", show_default=True, metavar="console|file:PATH|ses:FROM",
              help="Where sign-in codes and invitations go; console prints them here.")
@click.option("--insecure-cookie", is_flag=True,
              help="A plain `session` cookie without Secure, for a plain-HTTP host name that is not loopback.")
@click.option("--local-admin", default=None, metavar="EMAIL",
              help="Make (once) the organisation `local` with EMAIL as its administrator, and say how to sign in.")
@click.option("--forwarded-allow-ips", default=None, metavar="IP[,IP...]",
              help="Proxies whose X-Forwarded-For names the client (e.g. a reverse proxy on 127.0.0.1). By default "
                   "none: the client is the socket's peer, and a forwarded header counts for nothing.")
@keys_option
@store_option
@dashboard_store_option
@click.pass_context
def dashboard_cmd(ctx: click.Context, host: str, port: int, api_url: str, base_url: str | None, mailer: str,
                  insecure_cookie: bool, local_admin: str | None, forwarded_allow_ips: str | None, keys_path: str,
                  store_spec: str | None, dashboard_store: str | None) -> None:
    """Serve the key dashboard (sign-in, API access, members, audit log) on its own port."""
    if ctx.invoked_subcommand is not None:
        return
    import uvicorn

    from dashboard.app import build as build_dashboard
    from dashboard.serve import MAX_CONNECTIONS_PER_CLIENT as DASH_CONNECTIONS_PER_CLIENT
    from dashboard.serve import options as serve_options
    from dashboard.settings import DashboardSettings
    from edge.local.settings import ServerSettings

    spec = store_spec or f"sqlite:{keys_path}"
    refuse_store_inside(spec, None)
    _require_free_port(host, port, "DASH_PORT")
    settings = DashboardSettings(store=spec, dashboard=dashboard_store or "", counters=ServerSettings.from_env().counters,
                                 mailer=mailer, base_url=base_url or f"http://{host}:{port}", api_url=api_url,
                                 secure_cookie=not insecure_cookie)
    service, app = build_dashboard(settings)
    click.echo(f"dashboard on {settings.base_url}/ (sign-in codes go to: {mailer})", err=True)
    if local_admin:
        service.ensure_local_org(local_admin)
        click.echo(f"sign in at {settings.base_url}/ as {local_admin}, administrator of the local organisation "
                   f"(its keys, the local test key among them, are under Settings -> API access); the sign-in code "
                   f"is printed here", err=True)
    # uvicorn would take X-Forwarded-For from any loopback peer by default: only a named proxy may say who the client is
    proxies = {"proxy_headers": True, "forwarded_allow_ips": forwarded_allow_ips} if forwarded_allow_ips \
        else {"proxy_headers": False}
    per_client = None if forwarded_allow_ips else DASH_CONNECTIONS_PER_CLIENT  # behind a proxy, one address is everyone
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, **serve_options(per_client),
                **proxies)


@dashboard_cmd.command("rotate-secret", epilog=example("malaria-risk dashboard rotate-secret --keys var/keys.sqlite",
                                                       "malaria-risk dashboard rotate-secret --store dynamodb:mr-"))
@keys_option
@store_option
@dashboard_store_option
def dashboard_rotate_secret(keys_path: str, store_spec: str | None, dashboard_store: str | None) -> None:
    """Make a new cookie-signing secret; the current one becomes the previous one.

    New cookies are signed with the new secret; cookies signed with the previous one keep
    working (a running dashboard reads the secrets again within a minute). A second rotation
    forgets the oldest: browsers that still carry it get a new browser id, nothing else is lost
    (sessions are server-side). Run it on a schedule, or at once if the secret may have leaked
    (then twice, so the leaked one is forgotten)."""
    open_service(keys_path, store_spec, dashboard_store).rotate_signing_secret(staff())
    click.echo("the dashboard's cookie-signing secret is rotated: new cookies use the new one, "
               "cookies signed with the one before keep working")


@dashboard_cmd.command("budgets", epilog=example("malaria-risk dashboard budgets --keys var/keys.sqlite",
                                                 "malaria-risk dashboard budgets --reset known --store dynamodb:mr-"))
@click.option("--reset", "reset", type=click.Choice(["unknown", "known", "member", "invitations"]), default=None,
              help="Give this pool its whole hour back (writes an audit row).")
@keys_option
@store_option
@dashboard_store_option
def dashboard_budgets(reset: str | None, keys_path: str, store_spec: str | None, dashboard_store: str | None) -> None:
    """The service-wide hourly mail pools: spent, limit, and when the hour ends (docs/dashboard.md#sign-in-limits)."""
    service = open_service(keys_path, store_spec, dashboard_store)
    if reset is not None:
        service.reset_pool(staff(), reset)
        click.echo(f"the {reset} pool starts again from 0 this hour", err=True)
    for b in service.budgets():
        click.echo("\t".join([b["pool"], f"{b['spent']}/{b['limit']}", f"until {b['until']}"]))


# -- local releases: verify, prune ------------------------------------------------------


@click.command("verify", epilog=example("malaria-risk verify --root build --all",
                                        "malaria-risk verify --bucket B   # a published bucket: see `release verify`"))
@click.option("--root", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Build root holding releases/ and current.")
@click.option("--release", "release_id", default=None, help="Release id (default: the one current names).")
@click.option("--all", "every", is_flag=True, help="Verify every release under the root.")
def verify_local_cmd(root: Path, release_id: str | None, every: bool) -> None:
    """Check a local release against its manifest (every file's size and SHA-256); exit 1 on any difference."""
    from pipeline.release.local import verify_local

    reports = verify_local(root, release_id, every)
    for r in reports:
        mark = " (current)" if r.current else ""
        if r.ok:
            click.echo(f"release {r.release_id}{mark}: all {r.files} files match the manifest")
        else:
            click.echo(f"release {r.release_id}{mark}: {len(r.problems)} difference(s) from its manifest")
            for problem in r.problems:
                click.echo(f"  {problem}")
    bad = [r for r in reports if not r.ok]
    if bad:
        raise click.ClickException(f"{len(bad)} of {len(reports)} release(s) do not match their manifest; "
                                   "`malaria-risk build` writes fresh copies of damaged files")


@click.command("prune", epilog=example("malaria-risk prune --root build --keep 3 --dry-run",
                                       "malaria-risk prune --bucket B --keep 5   # a published bucket: see `release prune`"))
@click.option("--root", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Build root holding releases/ and current.")
@click.option("--keep", required=True, type=click.IntRange(min=1), help="How many of the newest releases to keep.")
@click.option("--dry-run", is_flag=True, help="Only print what would be removed.")
def prune_local_cmd(root: Path, keep: int, dry_run: bool) -> None:
    """Remove old local releases; the current one, pinned ones and, while current is broken, the one a
    server falls back to are always kept. Also removes killed builds' leftovers and the stored objects
    no kept release links."""
    from pipeline.release.local import prune_local

    result = prune_local(root, keep, dry_run)
    verb = "would remove" if dry_run else "removed"
    click.echo(f"{verb} {len(result.removed)} release(s){': ' + ', '.join(result.removed) if result.removed else ''}; "
               f"kept {len(result.kept)}" + ("" if dry_run else f"; {result.objects} object(s), "
                                                                 f"{result.bytes / 1e6:.1f} MB freed"))
    if result.fallback:
        click.echo(f"kept {result.fallback}: `current` is broken and a server serves this release instead "
                   "(`malaria-risk verify --root` says what is wrong with current)", err=True)
    if result.cleaned:
        click.echo(f"removed {len(result.cleaned)} temporary director(ies) left by killed builds", err=True)


@click.command("pin", epilog=example("malaria-risk pin --root build 20261101T050000Z-1a2b3c4d",
                                     "malaria-risk pin --root build --unpin 20261101T050000Z-1a2b3c4d"))
@click.option("--root", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Build root holding releases/ and current.")
@click.option("--unpin", is_flag=True, help="Let the retention rule remove it again once it is old.")
@click.argument("release_id")
def pin_cmd(root: Path, release_id: str, unpin: bool) -> None:
    """Keep a local release whatever its age (e.g. one a publication cites): `prune` and `refresh` never
    remove a pinned release. The mark is the record's `pinned` in releases.json."""
    from pipeline.release.catalogue import pin_local

    pin_local(root, release_id, not unpin)
    click.echo(f"release {release_id} {'unpinned' if unpin else 'pinned'}")


class LocalOrPublished(click.Command):
    """One command name for a local build root (`--root`) and a published bucket (`--bucket`).

    `verify` and `prune` exist for both; which one runs is decided by whether `--root` is
    given, and each keeps its own options and help.
    """

    def __init__(self, local: click.Command, published: click.Command):
        super().__init__(local.name, help=f"{local.help}\n\nWith --bucket instead of --root: {published.help}",
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
                         add_help_option=False)
        self.local = local
        self.published = published
        # listed for --help and introspection only: parse_args leaves the arguments to the chosen command
        names = {p.name for p in local.params}
        self.params = [*local.params, *(p for p in published.params if p.name not in names)]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.args = list(args)
        return ctx.args

    def invoke(self, ctx: click.Context) -> Any:
        args = list(ctx.args)
        local = any(a == "--root" or a.startswith("--root=") for a in args)
        if any(a in ("--help", "-h") for a in args) and not local and not any(a.startswith("--bucket") for a in args):
            click.echo(self.local.get_help(ctx))
            click.echo(f"\nPublished releases: `{ctx.command_path} --bucket ...` ({self.published.help})")
            return None
        cmd = self.local if local else self.published
        return cmd.main(args, prog_name=ctx.command_path, standalone_mode=False)


@main.command("audit", epilog=example("malaria-risk audit --root build --data-dir ../shared/data"))
@click.option("--root", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Build root holding releases/ and current.")
@click.option("--release", "release_id", default=None, help="Release id (default: the one current names).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the restricted sources are read from (default: DATA_DIR or ../shared/data).")
@click.option("--verbose", "-v", is_flag=True, help="Also list the arrays found independent of a state's series.")
def audit_cmd(root: Path, release_id: str | None, data_dir: Path | None, verbose: bool) -> None:
    """Check that no file of a release carries a restricted series, however rescaled (correlation
    above 0.97 with the dated DHIS2 series, its profiles or cross-sections); exit 1 on any finding.

    A season the release declares fitted without its state's own series (`fitted_without_own_series`)
    is refitted here without that state; where the release holds exactly that fit, arrays that are it
    are independent of that state's rows, not findings (listed with --verbose)."""
    from pipeline.release.audit import THRESHOLD, audit, held_out_seasons, restricted_references
    from pipeline.settings import default_data_dir

    release_dir = (root / "releases" / release_id) if release_id else (root / "current").resolve()
    if not release_dir.is_dir():
        raise click.ClickException(f"no release at {release_dir}")
    data = data_dir or default_data_dir()
    refs = restricted_references(data)
    result = audit(release_dir, refs, held_out_seasons(data) if len(refs.series) else {})
    if verbose:
        for f in result.independent:
            click.echo(f"{f.file}  {f.where}: |r| = {f.correlation} over {f.length} values, vs {f.reference}")
    for f in result.findings:
        click.echo(f"{f.file}  {f.where}: |r| = {f.correlation} over {f.length} values, vs {f.reference}")
    if result.findings:
        raise click.ClickException(f"{len(result.findings)} array(s) of release {release_dir.name} match a "
                                   f"restricted series above |r| {THRESHOLD}: they may not be published")
    click.echo(f"release {release_dir.name}: no file matches a restricted series "
               f"({len(result.independent)} array(s) independent: seasons fitted without the matched state)")


# -- data, refresh, release, report -----------------------------------------------------

main.add_command(data)
main.add_command(refresh_cmd)
main.add_command(release)
main.add_command(pin_cmd)
_local = {"verify": verify_local_cmd, "prune": prune_local_cmd}
for _alias in aliases:
    # `verify`/`prune` with --root act on a local build root; with --bucket, on a published one
    main.add_command(LocalOrPublished(_local.pop(_alias.name), _alias) if _alias.name in _local else _alias)
for _cmd in _local.values():
    main.add_command(_cmd)


@main.command("score", epilog=example("malaria-risk score --round build/<release>/docs/forecasts/model-output/"
                                      "malaria-risk-ratios/2026-10-01-malaria-risk-ratios.csv --counts my_counts.csv"))
@click.option("--round", "round_file", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An archived round (hubverse CSV) of a release.")
@click.option("--counts", "counts_file", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Your counts: CSV with location (state or LGA code), month (YYYY-MM) and cases; the origin "
                   "month and the target months.")
def score(round_file: Path, counts_file: Path) -> None:
    """Score an archived round of forecasts against counts you supply later (WIS, coverage, skill vs
    persistence on log cases; docs/skill.md). Prints JSON."""
    from pipeline.model import hub

    try:
        rows = hub.read_round(round_file.read_text(encoding="utf-8"))
        counts = hub.read_counts(counts_file.read_text(encoding="utf-8"))
    except (ValueError, KeyError) as e:
        raise click.ClickException(f"{e}") from e
    click.echo(orjson.dumps(hub.score_round(rows, counts), option=orjson.OPT_INDENT_2).decode())


@main.group(cls=LazyGroup, lazy={
    "validation": "pipeline.reports.validation:main",
    "skill": "pipeline.reports.skill:main",
})  # fmt: skip
def report() -> None:
    """Write the model evaluation reports (Markdown + JSON) into reports/."""


if __name__ == "__main__":
    sys.exit(main())
