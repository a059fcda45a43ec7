"""Outgoing mail: sign-in codes and invitations.

One method, `send(to, subject, text)`. Locally the console (stderr) or a file of JSON
lines (what the tests read codes from); in production Amazon SES. Chosen by a spec
string: `console`, `file:PATH`, `ses:FROM_ADDRESS`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Protocol


class Mailer(Protocol):
    def send(self, to: str, subject: str, text: str) -> None: ...


class ConsoleMailer:
    """Prints each message to stderr: `malaria-risk dashboard` on a developer's machine."""

    def send(self, to: str, subject: str, text: str) -> None:
        print(f"--- mail to {to}: {subject}\n{text}\n---", file=sys.stderr, flush=True)


class FileMailer:
    """Appends each message as one JSON line (owner-only file); tests read codes from it."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def send(self, to: str, subject: str, text: str) -> None:
        line = json.dumps({"to": to, "subject": subject, "text": text}) + "\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write(line)

    def messages(self) -> list[dict[str, str]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line]


class SESMailer:
    """Amazon SES (v2 API) from a verified sender address; see docs/dashboard-operations.md."""

    def __init__(self, sender: str, client: Any = None):
        if client is None:
            import boto3

            from edge.settings import home_region

            region = home_region()  # SES is used in the service's home region (docs/dashboard.md)
            kwargs = {}
            endpoint = os.environ.get("AWS_ENDPOINT_URL_SESV2")
            if endpoint:
                kwargs["endpoint_url"] = endpoint
            client = boto3.client("sesv2", region_name=region, **kwargs)
        self.client = client
        self.sender = sender

    def send(self, to: str, subject: str, text: str) -> None:
        self.client.send_email(
            FromEmailAddress=self.sender, Destination={"ToAddresses": [to]},
            Content={"Simple": {"Subject": {"Data": subject, "Charset": "UTF-8"},
                                "Body": {"Text": {"Data": text, "Charset": "UTF-8"}}}},
        )


def open_mailer(spec: str) -> Mailer:
    kind, _, rest = spec.partition(":")
    if kind == "console":
        return ConsoleMailer()
    if kind == "file" and rest:
        return FileMailer(rest)
    if kind == "ses" and rest:
        return SESMailer(rest)
    from edge.errors import OperatorError

    raise OperatorError(f"mailer {spec!r}: use console, file:PATH or ses:FROM_ADDRESS")
