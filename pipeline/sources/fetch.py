"""`data fetch`: download the newest rainfall file and install it only if it is sound.

The download goes to a hidden temporary file beside the target, is checked (size against
Content-Length, SHA-256 against a published checksum when one is given, not an HTML page,
then every input rule of `pipeline.sources.checks`, and the recorded window must not move
backwards against the installed file), and only then replaces the installed file with one
atomic rename. The file it replaces is kept as `.fetch/previous/<name>`, and
`.fetch/rainfall.json` records what was fetched (URL, SHA-256, size, validators). Any
failure leaves the data directory exactly as it was.

Standard library HTTP (urllib): one GET, streamed, with a per-operation timeout (a stalled
server fails the attempt), an overall deadline, retries with exponential backoff on
network errors, 408/429/5xx and truncation, and none on other 4xx. A conditional GET
(If-None-Match / If-Modified-Since from the last record) makes an unchanged file a 304.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from pipeline.errors import FetchError, InputError
from pipeline.settings import BuildSettings
from pipeline.sources.checks import RainfallReport, check_rainfall_file
from pipeline.sources.rainfall import WFP_SUBNATIONAL
from pipeline.window import shrink_problem

if TYPE_CHECKING:
    from pipeline.geography import Geography

FETCH_DIR = ".fetch"  # hidden: not an input (pipeline.buildkey skips names starting with ".")
RECORD = "rainfall.json"
CHUNK = 1 << 16
MAX_BACKOFF = 120.0
USER_AGENT = "malaria-risk data fetch"


@dataclass(frozen=True)
class FetchResult:
    status: str  # "updated" | "unchanged"
    path: Path
    url: str
    sha256: str
    bytes: int
    attempts: int
    report: RainfallReport | None  # the checked window (None on a 304 with nothing to read)
    previous_sha256: str | None = None
    seconds: float = 0.0


class _Retry(Exception):
    """One attempt failed in a way a later attempt may not (network, 5xx, truncation)."""

    def __init__(self, reason: str, wait: float | None = None):
        super().__init__(reason)
        self.wait = wait


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_record(data_dir: Path) -> dict[str, Any]:
    try:
        doc = orjson.loads((Path(data_dir) / FETCH_DIR / RECORD).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _retry_after(value: str | None) -> float | None:
    if value and value.strip().isdigit():
        return min(float(value.strip()), MAX_BACKOFF)
    return None


def _download(url: str, dest: Path, settings: BuildSettings, headers: dict[str, str],
              deadline: float) -> tuple[int, dict[str, str], str]:
    """One attempt: GET `url` into `dest`. Returns (status, response headers, sha256 hex);
    status 304 means not modified (nothing written). Raises _Retry or FetchError."""
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **headers})
    try:
        resp = urllib.request.urlopen(req, timeout=settings.fetch_timeout)  # noqa: S310 (URL from settings)
    except urllib.error.HTTPError as e:
        if e.code == 304:
            return 304, dict(e.headers.items()), ""
        e.close()
        if e.code in (408, 429) or e.code >= 500:
            raise _Retry(f"HTTP {e.code} {e.reason}", _retry_after(e.headers.get("Retry-After"))) from None
        raise FetchError(f"{url}: HTTP {e.code} {e.reason} (not retried)") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise _Retry(f"cannot connect: {reason}") from None
    with resp:
        got = dict(resp.headers.items())
        ctype = resp.headers.get("Content-Type", "").lower()
        if "html" in ctype:
            raise _Retry(f"the server sent an HTML page ({ctype}), not the CSV file")
        length_text = resp.headers.get("Content-Length")
        length = int(length_text) if length_text and length_text.isdigit() else None
        if length is not None and length > settings.fetch_max_bytes:
            raise FetchError(f"{url}: {length:,} bytes is over the size cap of {settings.fetch_max_bytes:,} bytes")
        h = hashlib.sha256()
        total = 0
        first = b""
        try:
            with open(dest, "wb") as f:
                while True:
                    if time.monotonic() > deadline:
                        raise FetchError(f"{url}: the download took longer than {settings.fetch_deadline:g} s")
                    chunk = resp.read(CHUNK)
                    if not chunk:
                        break
                    if not first:
                        first = chunk[:512]
                    total += len(chunk)
                    if total > settings.fetch_max_bytes:
                        raise FetchError(f"{url}: more than the size cap of {settings.fetch_max_bytes:,} bytes")
                    h.update(chunk)
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
        except http.client.IncompleteRead as e:
            raise _Retry(f"truncated: the connection closed after {total + len(e.partial):,} of "
                         f"{length:,} bytes" if length else "truncated download") from None
        except TimeoutError:
            raise _Retry(f"stalled: no data for {settings.fetch_timeout:g} s after {total:,} bytes") from None
        except (OSError, http.client.HTTPException) as e:
            raise _Retry(f"connection failed after {total:,} bytes: {e}") from None
    if length is not None and total != length:
        raise _Retry(f"truncated: {total:,} of {length:,} bytes (Content-Length)")
    if total == 0:
        raise _Retry("the server sent an empty body")
    if first.lstrip().lower().startswith((b"<!doctype", b"<html", b"<?xml", b"<")):
        raise _Retry("the server sent an HTML/XML page, not the CSV file")
    return 200, got, h.hexdigest()


def fetch_rainfall(
    data_dir: Path,
    settings: BuildSettings | None = None,
    *,
    url: str | None = None,
    sha256: str | None = None,
    geography: Geography | Callable[[], Geography | None] | None = None,
    allow_shrink: bool = False,
    install: bool = True,
    into: Path | None = None,
    log: Callable[[str], None] = lambda _msg: None,
    sleep: Callable[[float], None] = time.sleep,
) -> FetchResult:
    """Download, check and (with `install`) atomically install the WFP subnational rainfall file.

    `geography` (or a function returning it, called only when a new file must be checked)
    gives the states and LGAs every month must have. Without `install` (a dry run) the checked download is left at `into` (or deleted) and the
    data directory is not touched. Raises FetchError (download) or InputError (the file
    breaks an input rule); in both cases nothing in `data_dir` changed.
    """
    settings = settings or BuildSettings.from_env()
    url = url or settings.rainfall_url
    expected_sha = (sha256 or settings.rainfall_sha256 or "").lower() or None
    data_dir = Path(data_dir)
    target = data_dir / WFP_SUBNATIONAL
    if install and not data_dir.is_dir():
        raise FetchError(f"data directory {data_dir} does not exist")
    work_dir = target.parent if install else (into.parent if into else Path(os.environ.get("TMPDIR", "/tmp")))
    work_dir.mkdir(parents=True, exist_ok=True)
    tmp = work_dir / f".{target.name}.part-{os.getpid()}"
    record = read_record(data_dir)
    headers: dict[str, str] = {}
    # ask conditionally only when the installed file is the one recorded (not replaced by hand)
    if target.exists() and record.get("sha256") and sha256_file(target) == record["sha256"]:
        if record.get("etag"):
            headers["If-None-Match"] = str(record["etag"])
        if record.get("last_modified"):
            headers["If-Modified-Since"] = str(record["last_modified"])
    started = time.monotonic()
    deadline = started + settings.fetch_deadline
    attempts = 0
    try:
        while True:
            attempts += 1
            try:
                status, got, digest = _download(url, tmp, settings, headers, deadline)
                break
            except _Retry as e:
                if attempts > settings.fetch_retries:
                    raise FetchError(f"{url}: {e} (gave up after {attempts} attempt(s))") from None
                wait = e.wait if e.wait is not None else min(settings.fetch_backoff * 2 ** (attempts - 1), MAX_BACKOFF)
                if time.monotonic() + wait > deadline:
                    raise FetchError(f"{url}: {e}; no time left for another attempt within "
                                     f"{settings.fetch_deadline:g} s") from None
                log(f"attempt {attempts} failed ({e}); retrying in {wait:g} s")
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
                sleep(wait)
        seconds = time.monotonic() - started
        installed_sha = record.get("sha256") if target.exists() else None
        if status == 304:
            return FetchResult("unchanged", target, url, str(installed_sha), target.stat().st_size, attempts, None,
                               seconds=seconds)
        if callable(geography):
            geography = geography()
        if expected_sha and digest != expected_sha:
            raise FetchError(f"{url}: SHA-256 {digest} differs from the published {expected_sha}")
        size = tmp.stat().st_size
        if target.exists() and sha256_file(target) == digest:
            report = check_rainfall_file(target, geography)  # type: ignore[arg-type]
            if install:
                _write_record(data_dir, url, digest, size, got, record.get("previous_sha256"),
                              (record.get("installed_at") or record.get("fetched_at"))
                              if record.get("sha256") == digest else None)
            return FetchResult("unchanged", target, url, digest, size, attempts, report, seconds=seconds)
        try:
            report = check_rainfall_file(tmp, geography)  # type: ignore[arg-type]
        except InputError as e:  # name what the operator knows: the URL, not our temporary file
            raise InputError(f"{url} (downloaded)", e.reason, e.row) from None
        if target.exists():
            try:
                before = check_rainfall_file(target, geography)  # type: ignore[arg-type]
            except InputError:
                before = None  # the installed file is itself broken: the new one replaces it
            if before is not None and not allow_shrink:
                problem = shrink_problem([before.first, before.last], [report.first, report.last])
                if problem:
                    raise FetchError(f"{url}: the download is older than the installed file ({problem}); "
                                     "nothing was installed (pass --allow-shrink if that is intended)")
        if not install:
            if into is not None:
                os.replace(tmp, into)
            return FetchResult("updated", into or target, url, digest, size, attempts, report,
                               previous_sha256=installed_sha, seconds=seconds)
        previous_sha = _install(tmp, target, data_dir)
        _write_record(data_dir, url, digest, size, got, previous_sha)
        return FetchResult("updated", target, url, digest, size, attempts, report, previous_sha256=previous_sha,
                           seconds=time.monotonic() - started)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _install(tmp: Path, target: Path, data_dir: Path) -> str | None:
    """Keep the installed file as .fetch/previous/<name>, then rename the download over it."""
    previous_sha = None
    if target.exists():
        keep_dir = data_dir / FETCH_DIR / "previous"
        keep_dir.mkdir(parents=True, exist_ok=True)
        keep_tmp = keep_dir / f".{target.name}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            keep_tmp.unlink()
        try:
            os.link(target, keep_tmp)  # the same bytes under a second name; the rename below replaces the first
        except OSError:
            import shutil

            shutil.copy2(target, keep_tmp)
        os.replace(keep_tmp, keep_dir / target.name)
        previous_sha = sha256_file(keep_dir / target.name)
    os.replace(tmp, target)
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return previous_sha


def _write_record(data_dir: Path, url: str, digest: str, size: int, headers: dict[str, str],
                  previous_sha: str | None, installed_at: str | None = None) -> None:
    """`installed_at` is when these bytes were installed (kept by a fetch of the same bytes): the
    data load time a build stamps into its release (pipeline.buildkey.data_loaded_at)."""
    lower = {k.lower(): v for k, v in headers.items()}
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    doc = {
        "file": WFP_SUBNATIONAL,
        "url": url,
        "sha256": digest,
        "bytes": size,
        "fetched_at": now,
        "installed_at": installed_at or now,
        "etag": lower.get("etag"),
        "last_modified": lower.get("last-modified"),
        "previous_sha256": previous_sha,
    }
    d = Path(data_dir) / FETCH_DIR
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{RECORD}.{os.getpid()}"
    tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    os.replace(tmp, d / RECORD)
