"""`malaria-risk data fetch|check` and `malaria-risk refresh`: the monthly data load (docs/data-load.md)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.publish.cli import example
from pipeline.settings import BuildSettings, default_data_dir

data_dir_option = click.option(
    "--data-dir", default=default_data_dir, show_default="$DATA_DIR, else ../shared/data beside the checkout",
    type=click.Path(file_okay=False, path_type=Path), help="Directory of raw inputs.",
)


def _geography_loader(data_dir: Path):  # type: ignore[no-untyped-def]
    def load():  # type: ignore[no-untyped-def]
        from pipeline.geography import load_geography

        return load_geography(data_dir) if (data_dir / "admin").is_dir() else None

    return load


@click.group("data")
def data() -> None:
    """Fetch and check the input data (docs/data-load.md)."""


@data.command("fetch", epilog=example(
    "malaria-risk data fetch --data-dir /srv/malaria/data",
    "malaria-risk data fetch --data-dir /srv/malaria/data --url https://mirror.example.org/nga-rainfall-subnat-full.csv",
))  # fmt: skip
@data_dir_option
@click.option("--url", default=None, help="Source URL (default: the build settings' rainfall_url, "
                                          "or $MALARIA_RAINFALL_URL).")
@click.option("--checksum", "sha256", default=None, help="Published SHA-256 to verify the download against "
                                             "(or $MALARIA_RAINFALL_SHA256).")
@click.option("--allow-shrink", is_flag=True, help="Install even if the download ends earlier than the installed file.")
def fetch_cmd(data_dir: Path, url: str | None, sha256: str | None, allow_shrink: bool) -> None:
    """Download the newest rainfall file, check it, and install it atomically, keeping the previous copy.

    Any failure (network, HTTP error, truncation, an HTML page, size cap, checksum, an input rule)
    leaves the data directory unchanged."""
    from pipeline.sources.fetch import fetch_rainfall

    result = fetch_rainfall(data_dir, BuildSettings.from_env(), url=url, sha256=sha256,
                            geography=_geography_loader(data_dir), allow_shrink=allow_shrink,
                            log=lambda m: click.echo(m, err=True))
    r = result.report
    window = f", months {r.first}..{r.last}, provisional {', '.join(r.provisional) or 'none'}" if r else ""
    click.echo(f"{result.status}: {result.path} ({result.bytes:,} bytes, sha256 {result.sha256}{window}) "
               f"in {result.seconds:.1f} s, {result.attempts} attempt(s)")


@data.command("check", epilog=example("malaria-risk data check --data-dir ../shared/data"))
@data_dir_option
def check_cmd(data_dir: Path) -> None:
    """Check a data directory against every input rule, without building; exit 1 naming the file and row."""
    from pipeline.sources.checks import check_data_dir

    if not data_dir.is_dir():
        raise click.ClickException(f"data directory {data_dir} does not exist (set DATA_DIR or --data-dir)")
    c = check_data_dir(data_dir)
    r = c.rainfall
    click.echo(f"ok: {c.states} states, {c.lgas} LGAs; rainfall {r.file}: "
               f"{r.first}..{r.last} ({r.months} months, {r.states} states"
               f"{f', {r.lgas} LGAs' if r.lgas else ''}), provisional {', '.join(r.provisional) or 'none'}; "
               f"survey {c.survey_rows} rows")


@click.command("refresh", epilog=example(
    "malaria-risk refresh --data-dir /srv/malaria/data --out /srv/malaria/build --bucket malaria-api --prefix prod "
    "--base-url https://api.example.org --key-file /run/secrets/canary-key",
    "malaria-risk refresh --dry-run --bucket malaria-api --prefix prod",
))  # fmt: skip
@data_dir_option
@click.option("--out", default="build", show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Build root (releases/ and current).")
@click.option("--no-fetch", is_flag=True, help="Use the data directory as it is.")
@click.option("--url", default=None, help="Rainfall source URL (default: the build settings').")
@click.option("--checksum", "sha256", default=None, help="Published SHA-256 of the rainfall file, when there is one.")
@click.option("--bucket", default=None, envvar="MALARIA_BUCKET", help="Publish to this S3 bucket (or $MALARIA_BUCKET); "
                                                                      "without one, nothing is published.")
@click.option("--prefix", default="", envvar="MALARIA_PREFIX", help="Key prefix inside the bucket.")
@click.option("--endpoint-url", default=None, envvar="MALARIA_S3_ENDPOINT", help="S3-compatible endpoint.")
@click.option("--workers", default=32, show_default=True, type=click.IntRange(1, 256))
@click.option("--base-url", default=None, help="The served API; checks /v1/periods shows the new release.")
@click.option("--key-file", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="File holding an API key for --base-url.")
@click.option("--served-timeout", default=300.0, show_default=True, type=click.FloatRange(0),
              help="Seconds to wait for the served /v1/periods to move (caches).")
@click.option("--allow-shrink", is_flag=True, help="Let the estimated months end earlier than before (fetch, "
                                                   "build and publish).")
@click.option("--dry-run", is_flag=True, help="Read and check everything, change nothing; say what would happen.")
@click.option("--thorough-verify", is_flag=True, help="Verify by a HEAD of every published object "
                                                     "(`release verify`), not one listing.")
@click.option("--keep", default=3, show_default=True, type=click.IntRange(min=1),
              help="Local releases kept after the build (besides pinned ones and the one served; docs/local-releases.md).")
@click.option("--state", is_flag=True,
              help="Keep the build state (fit cache, the live release's build key) in the bucket under "
                   "<prefix>/ops/state/ between runs: a run in a fresh folder with unchanged inputs builds and "
                   "publishes nothing (the scheduled job; docs/operations.md#the-jobs-state).")
def refresh_cmd(data_dir: Path, out: Path, no_fetch: bool, url: str | None, sha256: str | None, bucket: str | None,
                prefix: str, endpoint_url: str | None, workers: int, base_url: str | None, key_file: Path | None,
                served_timeout: float, allow_shrink: bool, dry_run: bool, thorough_verify: bool, keep: int,
                state: bool) -> None:
    """Fetch, check, build, publish, verify and confirm the served /v1/periods moved; one summary line.

    Idempotent: unchanged inputs build and upload nothing. Exit 0 (updated or nothing changed),
    3 fetch, 4 input check, 5 build, 6 publish, 7 verification, 8 served API (docs/data-load.md)."""
    from pipeline.refresh import RefreshOptions, refresh

    if state and not bucket:
        raise click.UsageError("--state keeps the build state in the bucket: give --bucket")
    opts = RefreshOptions(data_dir=data_dir, out=out, fetch=not no_fetch, url=url, sha256=sha256, bucket=bucket,
                          prefix=prefix, endpoint_url=endpoint_url, workers=workers, base_url=base_url,
                          key_file=key_file, served_timeout=served_timeout, allow_shrink=allow_shrink,
                          dry_run=dry_run, thorough_verify=thorough_verify, keep=keep, state=state)
    outcome = refresh(opts, log=lambda m: click.echo(m, err=True))
    click.echo(outcome.summary, err=outcome.code != 0)
    if outcome.code:
        raise SystemExit(outcome.code)
