"""The one settings object of the edge runtime, read from the bundled `edge_config.json`.

Lambda@Edge has no environment variables for user settings, so `deploy/build_bundle.py`
writes this file into the zip. Every value the function uses is here, checked once at
load: a typo in the bundle fails the first request loudly instead of half-working.
Credentials are not settings: they come from the runtime's AWS_* variables (edge/aws.py).
"""

# Annotations are evaluated, not postponed: a NamedTuple compiles each string annotation when the
# class is created, ~30 µs a field of the CDN function's cold start (docs/deploy.md#measurements).

import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from .accesslog import DEFAULT_OK_EVERY
from .limits import DEFAULT_MONTHLY, DEFAULT_PER_MINUTE

# S3 bucket names and DynamoDB table names, as AWS defines them (the latter shortened by the suffixes)
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_TABLE_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")
_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_URL_RE = re.compile(r"^https?://[A-Za-z0-9.\-\[\]:]+(:\d+)?/?$")


# The one region setting: the home region of the key table and the release bucket, read by the CLI
# (key stores, publishing), written into the bundle by deploy/build_bundle.py and used by deploy/aws.py.
# There is no default: a wrong region fails late and confusingly, a missing one fails here, at once.
REGION_ENV = "MALARIA_RISK_REGION"


class SettingsError(ValueError):
    """The bundled configuration is missing a value or holds one the edge cannot use."""


def home_region(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The home region: `explicit` (a --region option) if given, else $MALARIA_RISK_REGION; never a default.

    Lambda@Edge functions themselves must be created in us-east-1 (an AWS requirement, not this
    setting): deploy/aws.py puts them there whatever the home region is.
    """
    if env is None:
        import os

        env = os.environ
    region = explicit or env.get(REGION_ENV, "")
    if not region:
        raise SettingsError(f"no AWS region: set {REGION_ENV} (the home region of the key table and the "
                            "release bucket, e.g. eu-west-1; docs/deploy.md#home-region) or pass --region")
    if not _REGION_RE.fullmatch(region):
        raise SettingsError(f"{region!r} is not an AWS region name (such as eu-west-1)")
    return region


class EdgeSettings(NamedTuple):
    """Immutable; a NamedTuple rather than a dataclass, which would cost the cold start ~1 ms to create."""

    bucket: str
    table_prefix: str
    prefix: str = ""
    region: str = ""  # the home region of the DynamoDB table (and the bucket): required, no default
    bucket_region: str = ""  # "": the home region
    s3_endpoint_url: str | None = None  # None: the regional AWS endpoint
    dynamodb_endpoint_url: str | None = None
    pointer_ttl: float = 5.0  # seconds between reads of current.json
    key_ttl: float = 2.0  # seconds a refused key (unknown, revoked…) is remembered per instance
    per_minute: int = DEFAULT_PER_MINUTE
    monthly: int = DEFAULT_MONTHLY
    connect_timeout: float = 0.3
    read_timeout: float = 1.0
    deadline: float = 3.0  # all dependency calls of one request, retries included; CloudFront allows 5 s
    retry_after: int = 5  # seconds, on the 503 a silent dependency causes
    ca_file: str | None = None  # trust store for https, relative to the bundle root; None: the system's
    runtime: str | None = None  # the Lambda runtime the bundle's .pyc files were compiled for
    log_ok_every: int = DEFAULT_OK_EVERY  # successful decisions logged one in N (0: none); problems always

    @classmethod
    def from_json(cls, raw: str | bytes) -> "EdgeSettings":
        try:
            doc = json.loads(raw)
        except ValueError as e:
            raise SettingsError(f"edge_config.json is not JSON: {e}") from e
        if not isinstance(doc, dict):
            raise SettingsError("edge_config.json must hold an object")
        return cls.from_mapping(doc)

    @classmethod
    def from_mapping(cls, doc: Mapping[str, Any]) -> "EdgeSettings":
        # the declared type of each field, spelled as in the class body ("str", "str | None", "int", "float")
        known = {name: t.__name__ if isinstance(t, type) else str(t) for name, t in cls.__annotations__.items()}
        unknown = sorted(set(doc) - set(known))
        if unknown:
            raise SettingsError(f"edge_config.json has unknown settings: {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name, value in doc.items():
            if value is None:
                continue
            kind = known[name]
            if kind in ("str", "str | None"):
                if not isinstance(value, str):
                    raise SettingsError(f"{name} must be a string, not {value!r}")
            elif kind == "int":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise SettingsError(f"{name} must be a whole number, not {value!r}")
            elif kind == "float":
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise SettingsError(f"{name} must be a number, not {value!r}")
                value = float(value)
            values[name] = value
        for required in ("bucket", "table_prefix", "region"):
            if not values.get(required):
                raise SettingsError(f"edge_config.json needs {required}")
        values.setdefault("bucket_region", values["region"])
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        if not _BUCKET_RE.fullmatch(self.bucket):
            raise SettingsError(f"bucket {self.bucket!r} is not an S3 bucket name")
        if not _TABLE_PREFIX_RE.fullmatch(self.table_prefix):
            raise SettingsError(f"table_prefix {self.table_prefix!r} holds characters a table name cannot")
        if any(part in (".", "..") for part in self.prefix.split("/")) and self.prefix.strip("/"):
            raise SettingsError(f"prefix {self.prefix!r} may not contain '.' or '..' segments")
        for name in ("region", "bucket_region"):
            if (name == "region" or getattr(self, name)) and not _REGION_RE.fullmatch(getattr(self, name)):
                raise SettingsError(f"{name} {getattr(self, name)!r} is not an AWS region name")
        for name in ("s3_endpoint_url", "dynamodb_endpoint_url"):
            url = getattr(self, name)
            if url is not None and not _URL_RE.fullmatch(url):
                raise SettingsError(f"{name} must be scheme://host[:port] with no path, not {url!r}")
        for name in ("pointer_ttl", "key_ttl"):
            if getattr(self, name) < 0:
                raise SettingsError(f"{name} cannot be negative")
        for name in ("per_minute", "monthly", "retry_after"):
            if getattr(self, name) < 1:
                raise SettingsError(f"{name} must be at least 1")
        if self.log_ok_every < 0:
            raise SettingsError("log_ok_every must be 0 (log no successes) or N ≥ 1 (one in N)")
        if not 0 < self.connect_timeout <= self.deadline or not 0 < self.read_timeout <= self.deadline:
            raise SettingsError("connect_timeout and read_timeout must be positive and within the deadline")
        if not 0 < self.deadline < 5:
            raise SettingsError("deadline must be under CloudFront's 5 s viewer-request limit")

    @property
    def clean_prefix(self) -> str:
        return "/".join(part for part in self.prefix.split("/") if part)
