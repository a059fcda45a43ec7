"""Just enough AWS for the edge: Signature Version 4 and a bounded HTTP client.

Why not boto3: importing it and building two clients costs ~300 ms of CPU, which a
128 MB Lambda@Edge instance (~7 % of a core) turns into a cold start past CloudFront's
5 s limit. The edge needs two calls — S3 GetObject for the pointer and DynamoDB
UpdateItem — so it signs them itself, following AWS's published SigV4 algorithm
(tests/edge/test_aws.py checks the signatures byte for byte against botocore's).

Every call is bounded: a connect timeout, a timeout on the whole answer, at most one
retry, and a deadline shared by all the calls of one viewer request. A dependency that is down or
silent raises `Unavailable` within that deadline, never a hang. Connections are kept
alive across invocations of one function instance.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import ssl

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
ALGORITHM = "AWS4-HMAC-SHA256"
DYNAMODB_TARGET = "DynamoDB_20120810."
DYNAMODB_JSON = "application/x-amz-json-1.0"
# Answers worth one more try: throttling and the server's own faults (never a 4xx about us)
RETRY_STATUS = frozenset({500, 502, 503, 504})
RETRY_DYNAMODB = frozenset({"ThrottlingException", "ProvisionedThroughputExceededException",
                            "RequestLimitExceeded", "InternalServerError"})


class Unavailable(Exception):
    """A dependency did not answer usefully within the request's deadline."""


class AWSError(Exception):
    """A definite error answer from a service (e.g. access denied, condition failed)."""

    def __init__(self, status: int, code: str, message: str, body: dict[str, Any] | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.body = body or {}


class Credentials(NamedTuple):
    access_key: str
    secret_key: str
    token: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Credentials:
        """The function's role credentials, which the Lambda runtime puts in AWS_* variables."""
        try:
            return cls(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env.get("AWS_SESSION_TOKEN") or None)
        except KeyError as e:
            raise Unavailable(f"no AWS credentials in the environment ({e.args[0]} unset)") from None


# --- Signature Version 4 ------------------------------------------------------------------


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


_key_cache: dict[tuple[str, str, str, str], bytes] = {}


def signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    """kSigning for one day × region × service; cached, as it changes once a day."""
    ck = (secret, day, region, service)
    key = _key_cache.get(ck)
    if key is None:
        k = _hmac(("AWS4" + secret).encode(), day)
        key = _hmac(_hmac(_hmac(k, region), service), "aws4_request")
        if len(_key_cache) > 16:
            _key_cache.clear()
        _key_cache[ck] = key
    return key


# URLs: the two helpers below do what urllib.parse's urlsplit and quote do for the edge's own
# http(s) URLs (tests/edge/test_aws.py compares them on generated inputs). Importing urllib.parse,
# which imports ipaddress, costs ~3 ms of CPU: a twelfth of the whole cold start.

_PATH_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def quote_path(text: str) -> str:
    """`urllib.parse.quote(text, safe="/~")`: UTF-8, each byte but the unreserved characters and '/' as %XX."""
    if all(c in _PATH_SAFE for c in text):
        return text
    return "".join(chr(b) if chr(b) in _PATH_SAFE else f"%{b:02X}" for b in text.encode("utf-8"))


def split_url(url: str) -> tuple[str, str, str, str]:
    """(scheme, netloc, path, query) of an absolute URL, as `urllib.parse.urlsplit` gives them."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not an absolute URL: {url!r}")
    end = len(rest)
    for c in "/?#":
        i = rest.find(c)
        if 0 <= i < end:
            end = i
    netloc, rest = rest[:end], rest[end:].partition("#")[0]
    path, _, query = rest.partition("?")
    return scheme.lower(), netloc, path, query


def host_port(netloc: str) -> tuple[str, int | None]:
    """The host (lower case, an IPv6 address without brackets) and the port, as urlsplit's
    `.hostname` and `.port` give them; a port that is not a number from 0 to 65535 raises ValueError."""
    hostinfo = netloc.rpartition("@")[2]
    if hostinfo.startswith("["):
        host, _, rest = hostinfo[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = hostinfo.partition(":")
    if not port:
        return host.lower(), None
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ValueError(f"port out of range or not a number: {port!r}")
    return host.lower(), int(port)


def host_header(url: str) -> str:
    """The Host value botocore signs: the URL's host, with the scheme's default port left out."""
    scheme, netloc, _, _ = split_url(url)
    default = {"http": 80, "https": 443}.get(scheme)
    port = host_port(netloc)[1]
    if port is not None and port == default:
        return netloc.rsplit(":", 1)[0]
    return netloc


def canonical_path(path: str, service: str) -> str:
    """The URL's path is already percent-encoded as sent; S3 signs it as is, every other
    service encodes it once more (AWS's rule)."""
    path = path or "/"
    return path if service == "s3" else quote_path(path)


def canonical_query(query: str) -> str:
    """Already-encoded name=value pairs, sorted."""
    if not query:
        return ""
    pairs = sorted(part.partition("=")[::2] for part in query.split("&"))
    return "&".join(f"{n}={v}" for n, v in pairs)


def sign(method: str, url: str, headers: dict[str, str], body: bytes, creds: Credentials, region: str,
         service: str, now: datetime) -> dict[str, str]:
    """Return `headers` plus X-Amz-Date, the payload hash (S3), the session token and Authorization.

    `url` is percent-encoded as it will be sent. All headers passed in are signed (names
    lower-cased, values trimmed and their inner runs of spaces collapsed), as botocore
    does for the headers it sends.
    """
    _, _, url_path, url_query = split_url(url)
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    payload_hash = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
    out = dict(headers)
    out["X-Amz-Date"] = stamp
    if service == "s3":
        out["X-Amz-Content-SHA256"] = payload_hash
    if creds.token:
        out["X-Amz-Security-Token"] = creds.token
    out.setdefault("Host", host_header(url))
    canon = sorted((k.lower(), " ".join(v.strip().split())) for k, v in out.items())
    signed = ";".join(k for k, _ in canon)
    request = "\n".join([method, canonical_path(url_path, service), canonical_query(url_query),
                         "".join(f"{k}:{v}\n" for k, v in canon), signed, payload_hash])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(request.encode()).hexdigest()])
    signature = hmac.new(signing_key(creds.secret_key, day, region, service), to_sign.encode(),
                         hashlib.sha256).hexdigest()
    out["Authorization"] = f"{ALGORITHM} Credential={creds.access_key}/{scope}, SignedHeaders={signed}, " \
                           f"Signature={signature}"
    return out


# --- a bounded HTTP client ----------------------------------------------------------------


class Budget:
    """Timeouts and retries for one dependency, and the trust store for https.

    Plain classes rather than dataclasses on the edge's own types: each dataclass costs
    ~1 ms of CPU to create at import, which a 128 MB instance stretches to ~12 ms.
    """

    __slots__ = ("connect", "read", "attempts", "ca_file")

    def __init__(self, connect: float = 0.3, read: float = 1.0, attempts: int = 2, ca_file: str | None = None):
        self.connect = connect
        self.read = read
        self.attempts = attempts  # 2: one retry
        self.ca_file = ca_file  # None: the system's store


class Reply:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status = status
        self.headers = headers  # lower-case names
        self.body = body


DEFAULT_BUDGET = Budget()


_ssl_contexts: dict[str | None, ssl.SSLContext] = {}  # noqa: F821 (ssl is imported when https is used)
_ssl_lock = threading.Lock()


def ssl_context(ca_file: str | None = None) -> ssl.SSLContext:
    """One verifying TLS context per trust store and process.

    With `ca_file` (the bundle's Amazon Trust Services roots, which sign the S3 and
    DynamoDB endpoints' certificates) loading it costs ~3 ms of CPU; the system store
    (`None`) holds ~140 roots and costs ~40 ms, a tenth of a second at 128 MB.
    """
    import ssl  # only https endpoints need it; the import is part of what it costs

    ctx = _ssl_contexts.get(ca_file)
    if ctx is None:
        with _ssl_lock:
            ctx = _ssl_contexts.get(ca_file)
            if ctx is None:
                if ca_file is None:
                    ctx = ssl.create_default_context()
                else:
                    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the chain and the host name
                    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                    ctx.load_verify_locations(ca_file)
                _ssl_contexts[ca_file] = ctx
    return ctx


MAX_HEAD = 64 * 1024
MAX_BODY = 4 * 1024 * 1024  # the pointer and DynamoDB answers are a few KB


class Connection:
    """HTTP/1.1 over one socket, every read bounded by an absolute time.

    Deliberately small: the edge sends two kinds of request to two AWS services and
    reads Content-Length or chunked answers. (The standard library's http.client would
    do, but importing it pulls in the email package: ~20 ms of a cold start's CPU.)
    """

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes, until: float) -> None:
        self.sock.settimeout(max(0.001, until - time.monotonic()))
        self.sock.sendall(data)

    def _fill(self, until: float) -> None:
        left = until - time.monotonic()
        if left <= 0:
            raise TimeoutError("read timed out")
        self.sock.settimeout(left)
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionResetError("the server closed the connection")
        self.buf += data

    def _line(self, until: float) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                return line
            if len(self.buf) > MAX_HEAD:
                raise ValueError("response head too long")
            self._fill(until)

    def _exactly(self, n: int, until: float) -> bytes:
        if n > MAX_BODY:
            raise ValueError(f"response body of {n} bytes is more than the edge reads")
        while len(self.buf) < n:
            self._fill(until)
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def reply(self, method: str, until: float) -> tuple[Reply, bool]:
        """(the answer, whether the connection may be reused)."""
        status_line = self._line(until)
        while status_line == b"":  # tolerate a stray CRLF between answers
            status_line = self._line(until)
        version, _, rest = status_line.partition(b" ")
        if not version.startswith(b"HTTP/1."):
            raise ValueError(f"not an HTTP/1.x answer: {status_line[:40]!r}")
        status = int(rest[:3])
        headers: dict[str, str] = {}
        while True:
            line = self._line(until)
            if not line:
                break
            name, sep, value = line.partition(b":")
            if not sep:
                raise ValueError("malformed header line")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        keep = headers.get("connection", "").lower() != "close" and version != b"HTTP/1.0"
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size = int(self._line(until).split(b";")[0].strip(), 16)
                if size == 0:
                    while self._line(until):  # trailers
                        pass
                    break
                parts.append(self._exactly(size, until))
                self._exactly(2, until)
            body = b"".join(parts)
        elif "content-length" in headers:
            body = self._exactly(int(headers["content-length"]), until)
        else:  # delimited by the end of the connection
            while True:
                try:
                    self._fill(until)
                except ConnectionResetError:
                    break
            body, keep = bytes(self.buf), False
            self.buf.clear()
        return Reply(status, headers, body), keep


class Endpoint:
    """Keep-alive connections to one scheme://host:port, each call bounded by time.

    One connection per thread: a Lambda instance runs one invocation at a time, tests
    and the benchmark may run several threads.
    """

    def __init__(self, url: str, budget: Budget = DEFAULT_BUDGET):
        scheme, netloc, _, _ = split_url(url) if "://" in url else ("", "", "", "")
        host, port = host_port(netloc)
        if scheme not in ("http", "https") or not host:
            raise ValueError(f"not an http(s) endpoint: {url!r}")
        self.scheme = scheme
        self.host = host
        self.host_bytes = self.host.encode("ascii") if self.host.isascii() else self.host.encode("idna")
        self.port = port or (443 if scheme == "https" else 80)
        self.netloc = netloc
        self.budget = budget
        self._local = threading.local()
        self.calls = 0  # attempts sent, for the benchmark and tests

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.netloc}{path}"

    def _connection(self, deadline: float) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # the host as bytes: given a str, getaddrinfo and ssl run it through the idna codec,
            # whose first use imports encodings.idna and unicodedata (~3 ms of a cold start)
            sock = socket.create_connection((self.host_bytes, self.port),  # type: ignore[arg-type]
                                            timeout=max(0.001, min(self.budget.connect, deadline - time.monotonic())))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.scheme == "https":
                sock.settimeout(max(0.001, min(self.budget.read, deadline - time.monotonic())))  # the handshake
                sock = ssl_context(self.budget.ca_file).wrap_socket(
                    sock, server_hostname=self.host_bytes)
            conn = self._local.conn = Connection(sock)
        return conn

    def _drop(self) -> None:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def once(self, method: str, path: str, headers: dict[str, str], body: bytes, deadline: float) -> Reply:
        """One attempt: connect (if needed) within the connect timeout, then the whole exchange within
        the read timeout — a server that trickles bytes is cut off too, not only a silent one."""
        if deadline - time.monotonic() <= 0:
            raise Unavailable(f"{self.netloc}: request deadline passed")
        self.calls += 1
        try:
            reused = getattr(self._local, "conn", None) is not None
            conn = self._connection(deadline)
            until = min(deadline, time.monotonic() + self.budget.read)
            head = [f"{method} {path} HTTP/1.1"]
            head += [f"{k}: {v}" for k, v in headers.items()]
            head.append(f"Content-Length: {len(body)}")
            conn.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body, until)
            reply, keep = conn.reply(method, until)
            if not keep:
                self._drop()
            return reply
        except (OSError, ValueError) as e:
            self._drop()
            kind = "timed out" if isinstance(e, socket.timeout | TimeoutError) else type(e).__name__
            if reused and isinstance(e, ConnectionError):
                kind += " (kept-alive connection)"
            raise Unavailable(f"{self.netloc}: {kind}") from e

    def call(self, method: str, path: str, make_headers: Callable[[], dict[str, str]], body: bytes,
             deadline: float, retryable: Callable[[Reply], bool], attempts: int | None = None) -> Reply:
        """Up to `budget.attempts` attempts inside `deadline`; returns the last reply or raises Unavailable."""
        last: Exception | None = None
        for attempt in range(attempts or self.budget.attempts):
            if attempt and deadline - time.monotonic() < min(self.budget.connect, 0.05):
                break
            try:
                reply = self.once(method, path, make_headers(), body, deadline)
            except Unavailable as e:
                last = e
                continue
            if not retryable(reply):
                return reply
            last = Unavailable(f"{self.netloc}: answered {reply.status}")
        raise last or Unavailable(f"{self.netloc}: no attempt fit in the deadline")


# --- the two services the edge calls -------------------------------------------------------


class S3:
    """GetObject. On AWS the bucket is in the host name (virtual-hosted style, as AWS
    recommends); with an endpoint override, or a bucket name with dots (which the
    wildcard certificate does not cover), it is the first path segment (path style)."""

    def __init__(self, bucket: str, region: str, creds: Callable[[], Credentials], endpoint_url: str | None = None,
                 budget: Budget = DEFAULT_BUDGET, clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.bucket = bucket
        self.region = region
        self.creds = creds
        self.clock = clock
        self.virtual_host = endpoint_url is None and "." not in bucket
        if self.virtual_host:
            endpoint_url = f"https://{bucket}.s3.{region}.amazonaws.com"
        self.endpoint = Endpoint(endpoint_url or f"https://s3.{region}.amazonaws.com", budget)

    def path(self, key: str) -> str:
        return "/" + quote_path(key if self.virtual_host else f"{self.bucket}/{key}")

    def get(self, key: str, deadline: float, if_none_match: str | None = None, attempts: int | None = None) -> Reply:
        """The object, or a 304 reply when `if_none_match` still matches. Other 4xx raise AWSError."""
        path = self.path(key)

        def headers() -> dict[str, str]:
            h = {"If-None-Match": if_none_match} if if_none_match else {}
            return sign("GET", self.endpoint.url(path), h, b"", self.creds(), self.region, "s3", self.clock())

        reply = self.endpoint.call("GET", path, headers, b"", deadline,
                                   lambda r: r.status in RETRY_STATUS, attempts)
        if reply.status in (200, 304):
            return reply
        code = "NoSuchKey" if reply.status == 404 else str(reply.status)
        raise AWSError(reply.status, code, f"GET s3://{self.bucket}/{key}")


class DynamoDB:
    """The JSON protocol: POST / with X-Amz-Target, SigV4 over the body."""

    def __init__(self, region: str, creds: Callable[[], Credentials], endpoint_url: str | None = None,
                 budget: Budget = DEFAULT_BUDGET, clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.region = region
        self.creds = creds
        self.clock = clock
        self.endpoint = Endpoint(endpoint_url or f"https://dynamodb.{region}.amazonaws.com", budget)

    def __call__(self, operation: str, request: Mapping[str, Any], deadline: float) -> dict[str, Any]:
        body = json.dumps(request, separators=(",", ":")).encode()

        def headers() -> dict[str, str]:
            h = {"Content-Type": DYNAMODB_JSON, "X-Amz-Target": DYNAMODB_TARGET + operation}
            return sign("POST", self.endpoint.url("/"), h, body, self.creds(), self.region, "dynamodb", self.clock())

        reply = self.endpoint.call("POST", "/", headers, body, deadline, _dynamodb_retryable)
        doc = _json_or_empty(reply.body)
        if reply.status == 200:
            return doc
        code = str(doc.get("__type", "")).rpartition("#")[2] or str(reply.status)
        raise AWSError(reply.status, code, str(doc.get("message") or doc.get("Message") or ""), doc)


def _json_or_empty(body: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(body) if body else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _dynamodb_retryable(reply: Reply) -> bool:
    if reply.status in RETRY_STATUS:
        return True
    if reply.status == 400:
        code = str(_json_or_empty(reply.body).get("__type", "")).rpartition("#")[2]
        return code in RETRY_DYNAMODB
    return False
