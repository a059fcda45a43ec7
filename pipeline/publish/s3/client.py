"""The S3 client, its failures as one-line PublishErrors, retries, and the worker pool."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from pipeline.errors import PublishError
from pipeline.publish.s3.layout import Target

DEFAULT_WORKERS = 16
NO_CREDENTIALS = (
    "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
)
_TRANSIENT_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError",
     "ServiceUnavailable", "RequestLimitExceeded", "TooManyRequests"}
)  # fmt: skip

T = TypeVar("T")
R = TypeVar("R")

# boto3 ships no type information; the client is typed as Any at this one place.
S3Client = Any


def make_client(
    endpoint_url: str | None = None,
    *,
    workers: int = DEFAULT_WORKERS,
    max_attempts: int = 8,
    retry_mode: str = "standard",
    connect_timeout: float = 10,
    read_timeout: float = 60,
    session: Any = None,
) -> S3Client:
    """A thread-safe S3 client whose connection pool fits the upload pool.

    botocore's "standard" retry mode already backs off exponentially (with jitter) on
    throttling (SlowDown, 503) and 5xx; "adaptive" adds client-side rate limiting.
    Path-style addressing works with every S3-compatible server, including on AWS.
    """
    import boto3
    from botocore.config import Config

    region = publish_region(endpoint_url)
    session = session or boto3.session.Session(botocore_session=botocore_session())
    if session.get_credentials() is None:
        raise PublishError(NO_CREDENTIALS)
    config = Config(
        signature_version="s3v4",
        s3={"addressing_style": "path"},
        retries={"mode": retry_mode, "max_attempts": max_attempts},
        max_pool_connections=max(workers, 10),
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        # We send Content-MD5 and check bodies ourselves (ETag, SHA-256); botocore's
        # default CRC32 trailer would only add work on every request.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    client = session.client("s3", endpoint_url=endpoint_url, region_name=region, config=config)
    # after botocore's own handler on the same event, which adds the header to every file-like body
    client.meta.events.register_last("before-call.s3", continue_only_large_bodies)
    return client


EXPECT_CONTINUE_FROM = 1 << 20


def continue_only_large_bodies(model: Any, params: dict[str, Any], **_: Any) -> None:
    """Drop `Expect: 100-continue` from a PUT whose body is under EXPECT_CONTINUE_FROM bytes.

    botocore asks every upload to wait for the server's "100 Continue" before it sends the body:
    one more round trip per object, to spare sending a body the server would refuse. Nearly every
    object of a release is a few kilobytes, and the plan only uploads what the bucket lacks, so
    the wait costs more than it could save: a first publish of the real release (23,737 objects)
    to the local S3 server took 19-20 CPU s without it against 22.5-25 with it, and 20-21 s of
    wall time against 24-26. Large bodies (the bundles, the outlines) keep the header."""
    from botocore.utils import determine_content_length

    headers = params.get("headers", {})
    if headers.get("Expect") != "100-continue" or "body" not in params:
        return
    size = determine_content_length(params["body"])
    if size is not None and size < EXPECT_CONTINUE_FROM:
        del headers["Expect"]


_loader_lock = threading.Lock()
_loader: Any = None


def botocore_session() -> Any:
    """A new botocore session (its own credentials, read from the environment when first needed) that
    shares one loader of the service descriptions with the others this process made, and reads the
    times in listings with the standard library (`listing_time`).

    A fresh session loads and parses botocore's S3 description again, about 0.1 CPU s each; a refresh
    makes a client per step. A session is not shared as a whole: its credentials are resolved once,
    and a process (the tests, a long-lived caller) may use other credentials for each client."""
    import botocore.session

    global _loader
    session = botocore.session.Session()
    with _loader_lock:
        if _loader is None:
            _loader = session.get_component("data_loader")
        else:
            session.register_component("data_loader", _loader)
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=listing_time)
    return session


def listing_time(value: Any) -> datetime:
    """An S3 timestamp: ISO 8601 ("2026-11-27T21:19:58.000Z", every LastModified of a listing) by
    `datetime.fromisoformat`, anything else (an HTTP date, epoch seconds) by botocore's own parser.
    botocore's default tries dateutil first, about 50 µs a call: over a second of CPU for each
    listing of a release's 24,000 objects, which a publish and its verify list several times."""
    from botocore.utils import parse_timestamp

    if isinstance(value, str):
        try:
            got = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            if got.tzinfo is not None:
                return got
    result: datetime = parse_timestamp(value)
    return result


def publish_region(endpoint_url: str | None, env: Mapping[str, str] | None = None) -> str:
    """The bucket's region: the one region setting ($MALARIA_RISK_REGION, shared with the key
    store and the edge bundle). Only an S3-compatible server of our own (`--endpoint-url`) may
    go without it, where the region is a signing formality."""
    from edge.settings import REGION_ENV, SettingsError, home_region

    env = os.environ if env is None else env
    if endpoint_url and not env.get(REGION_ENV):
        return "us-east-1"  # any valid name: the server behind --endpoint-url is not AWS
    try:
        return home_region(None, env)
    except SettingsError as e:
        raise PublishError(str(e)) from None


def endpoint_of(client: S3Client) -> str:
    return getattr(getattr(client, "meta", None), "endpoint_url", None) or "S3"


def describe_error(exc: Exception, *, endpoint: str, bucket: str, action: str) -> str:
    """Turn a botocore failure into one line an operator can act on."""
    if isinstance(exc, NoCredentialsError):
        return NO_CREDENTIALS
    if isinstance(exc, EndpointConnectionError | ConnectionClosedError | ReadTimeoutError):
        return f"cannot reach S3 endpoint {endpoint} while trying to {action}: {exc}"
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "SignatureDoesNotMatch":
            return (
                f"S3 at {endpoint} rejected the request signature while trying to {action}: "
                "the secret access key is wrong for this access key id (SignatureDoesNotMatch)"
            )
        if code == "InvalidAccessKeyId":
            return f"S3 at {endpoint} does not know the access key id in use (InvalidAccessKeyId)"
        if code in ("NoSuchBucket",) or (
            code in ("404", "NotFound") and action.startswith("reach bucket")
        ):
            return f"bucket {bucket!r} does not exist at {endpoint}"
        if code == "RequestTimeTooSkewed":
            return f"S3 at {endpoint} refused the request: this machine's clock is wrong (RequestTimeTooSkewed)"
        if code in ("AccessDenied", "403", "Forbidden") or status == 403:
            return (
                f"access denied by S3 at {endpoint} while trying to {action} in bucket {bucket!r}: "
                "the credentials lack a permission listed in docs/operations.md"
            )
        message = err.get("Message") or ""
        return f"S3 at {endpoint} failed to {action}: {code or status} {message}".rstrip()
    if isinstance(exc, BotoCoreError):
        return f"S3 at {endpoint}: {action} failed: {exc}"
    return f"{action} failed: {exc}"


@contextmanager
def s3_errors(client: S3Client, bucket: str, action: str) -> Iterator[None]:
    """Re-raise botocore failures as PublishError with a one-line explanation."""
    try:
        yield
    except (BotoCoreError, ClientError) as exc:
        raise PublishError(
            describe_error(exc, endpoint=endpoint_of(client), bucket=bucket, action=action)
        ) from exc


def is_missing(exc: ClientError) -> bool:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    return code in ("404", "NoSuchKey", "NotFound")


def is_transient(exc: Exception) -> bool:
    if isinstance(exc, EndpointConnectionError | ConnectionClosedError | ReadTimeoutError):
        return True
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return code in _TRANSIENT_CODES or status >= 500 or status == 429
    return False


def retrying(
    fn: Callable[[], T],
    *,
    attempts: int = 4,
    base_delay: float = 0.2,
    retry_missing: bool = False,
) -> T:
    """Our own backoff on top of botocore's, for verification.

    botocore gives up after its attempts; a verification failure would then block
    the pointer switch over a blip. Optionally a 404 is retried too: some
    S3-compatible stores are not read-after-write consistent for a just-written key.
    """
    for attempt in range(attempts):
        try:
            return fn()
        except ClientError as exc:
            retry = is_transient(exc) or (retry_missing and is_missing(exc))
            if not retry or attempt == attempts - 1:
                raise
        except (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError):
            if attempt == attempts - 1:
                raise
        time.sleep(base_delay * (2**attempt))
    raise AssertionError("unreachable")


def preflight(client: S3Client, target: Target) -> None:
    """Fail fast, with a clear message, on a wrong key, a missing bucket or a dead endpoint.

    A ListObjectsV2 (a GET) rather than HeadBucket: a HEAD answer has no body, so a
    wrong secret key and a missing permission would both read as a bare 403.
    """
    with s3_errors(client, target.bucket, f"reach bucket {target.bucket!r}"):
        client.list_objects_v2(Bucket=target.bucket, Prefix=target.key(""), MaxKeys=1)


class Progress:
    """Progress reporting hook; the CLI draws a bar, tests and library use stay silent."""

    def start(self, phase: str, total: int) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def finish(self) -> None:
        pass


def run_pool(
    items: Iterable[T], fn: Callable[[T], R], workers: int, progress: Progress
) -> list[R]:
    """Run fn over items on a bounded pool; on the first failure cancel what has not
    started and re-raise it (in-flight calls finish: each is one whole object)."""
    todo = list(items)
    results: list[R | None] = [None] * len(todo)
    if not todo:
        return []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures: dict[Future[R], int] = {pool.submit(fn, item): i for i, item in enumerate(todo)}
        pending: set[Future[R]] = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for fut in done:
                exc = fut.exception()
                if exc is not None:
                    for other in pending:
                        other.cancel()
                    raise exc
                results[futures[fut]] = fut.result()
                progress.advance()
    return results  # type: ignore[return-value]  # every slot was filled above
