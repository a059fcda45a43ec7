"""The edge's own AWS client: SigV4 byte for byte against botocore, and bounded calls on loopback.

The stalled and refusing servers are real sockets on 127.0.0.1: one accepts and never
answers, one answers 500 every time, one is not listening at all.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from hypothesis import given
from hypothesis import strategies as st

from edge.aws import (
    S3,
    AWSError,
    Budget,
    Credentials,
    DynamoDB,
    Endpoint,
    Unavailable,
    host_port,
    quote_path,
    sign,
    split_url,
)
from tests import s3server
from tests.conftest import free_port
from tests.s3server import S3Server

s3_server = s3server.s3_server
s3_prefix = s3server.s3_prefix

CASES = [
    # (service, method, url, headers, body)
    ("dynamodb", "POST", "https://dynamodb.eu-west-1.amazonaws.com/",
     {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.UpdateItem"},
     b'{"TableName":"mr-keys","Key":{"pk":{"S":"key#abc"}}}'),
    ("dynamodb", "POST", "http://127.0.0.1:8123/",
     {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.GetItem"}, b"{}"),
    ("s3", "GET", "https://s3.eu-west-1.amazonaws.com/my-bucket/api/current.json", {}, b""),
    ("s3", "GET", "https://my-bucket.s3.eu-central-1.amazonaws.com/api/current.json", {"If-None-Match": '"e"'}, b""),
    ("s3", "GET", "http://127.0.0.1:9000/b/api/releases/2026%20x/docs/caf%C3%A9~1%2B2.json",
     {"If-None-Match": '"abc"'}, b""),
    ("s3", "GET", "https://s3.us-east-1.amazonaws.com:443/b/k?versionId=a%2Fb&acl=", {}, b""),
    ("sqs", "POST", "https://sqs.us-east-1.amazonaws.com/a%20b/q",
     {"Content-Type": "application/x-www-form-urlencoded", "X-Custom": "  spaced   value  "}, b"Action=X"),
]


@pytest.mark.parametrize("token", [None, "FwoGZXIvYXdzEJr//////////wEaDH1SESSION+TOKEN/="])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_signature_is_byte_equal_to_botocore(case, token):
    service, method, url, headers, body = case
    host = url.split("/")[2].split(":")[0]
    region = next((p for p in host.split(".") if re.fullmatch(r"[a-z]{2}-[a-z]+-\d", p)), "us-east-1")
    ref = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    signer = S3SigV4Auth if service == "s3" else SigV4Auth
    signer(BotoCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token), service,
           region).add_auth(ref)
    stamp = ref.headers["X-Amz-Date"]
    ours = sign(method, url, dict(headers), body, Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                                             token), region, service,
                datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC))
    assert ours["Authorization"] == ref.headers["Authorization"]
    for name in ("X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-SHA256"):
        assert ours.get(name) == ref.headers.get(name)


def test_get_object_is_accepted_by_a_signature_checking_s3(s3_server: S3Server, s3_prefix: str):
    """SeaweedFS verifies SigV4: a key with spaces and non-ASCII, a conditional GET, a wrong secret."""
    admin = s3_server.client()
    key = f"{s3_prefix}/odd name/café~+.json"
    admin.put_object(Bucket=s3_server.bucket, Key=key, Body=b'{"x":1}')
    reader = Credentials(s3server.READONLY_ACCESS_KEY, s3server.READONLY_SECRET_KEY)
    s3 = S3(s3_server.bucket, "us-east-1", lambda: reader, s3_server.endpoint_url)
    got = s3.get(key, time.monotonic() + 3)
    assert got.status == 200 and got.body == b'{"x":1}'
    again = s3.get(key, time.monotonic() + 3, if_none_match=got.headers["etag"])
    assert again.status == 304
    with pytest.raises(AWSError) as missing:
        s3.get(f"{s3_prefix}/absent.json", time.monotonic() + 3)
    assert missing.value.status == 404
    wrong = S3(s3_server.bucket, "us-east-1", lambda: Credentials(s3server.READONLY_ACCESS_KEY, "wrong-secret"),
               s3_server.endpoint_url)
    with pytest.raises(AWSError) as denied:
        wrong.get(key, time.monotonic() + 3)
    assert denied.value.status == 403


# --- bounded calls ----------------------------------------------------------------------------


@pytest.fixture
def silent_server() -> Iterator[tuple[str, list[int]]]:
    """Accepts connections, reads the request, never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    accepted: list[int] = []
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            accepted.append(1)
            held.append(conn)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", accepted
    stop.set()
    t.join()
    for c in held:
        c.close()
    sock.close()


@pytest.fixture
def failing_server() -> Iterator[tuple[str, list[int]]]:
    """Answers every request with 500 and a DynamoDB-shaped error body."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits: list[int] = []

    class H(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            hits.append(1)
            body = b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"boom"}'
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()
    server.server_close()


CREDS = Credentials("AKID", "secret")


def test_a_silent_dependency_costs_two_read_timeouts_at_most(silent_server):
    url, accepted = silent_server
    ddb = DynamoDB("us-east-1", lambda: CREDS, url, Budget(connect=0.3, read=0.2))
    t = time.monotonic()
    with pytest.raises(Unavailable, match="timed out"):
        ddb("GetItem", {}, time.monotonic() + 3)
    took = time.monotonic() - t
    assert 0.35 < took < 1.0 and len(accepted) == 2  # one retry, each bounded by the read timeout


def test_the_request_deadline_caps_every_attempt(silent_server):
    url, _ = silent_server
    ddb = DynamoDB("us-east-1", lambda: CREDS, url, Budget(connect=0.3, read=1.0))
    t = time.monotonic()
    with pytest.raises(Unavailable):
        ddb("GetItem", {}, time.monotonic() + 0.25)
    assert time.monotonic() - t < 0.6


def test_refused_connection_fails_fast_and_retries_once():
    port = free_port()  # nothing listens there
    ep = Endpoint(f"http://127.0.0.1:{port}", Budget())
    t = time.monotonic()
    with pytest.raises(Unavailable, match="ConnectionRefused"):
        ep.call("GET", "/", dict, b"", time.monotonic() + 3, lambda r: False)
    assert time.monotonic() - t < 0.5 and ep.calls == 2


def test_server_errors_are_retried_once_then_unavailable(failing_server):
    url, hits = failing_server
    ddb = DynamoDB("us-east-1", lambda: CREDS, url)
    with pytest.raises(Unavailable, match="500"):
        ddb("UpdateItem", {"TableName": "t"}, time.monotonic() + 3)
    assert len(hits) == 2


def test_credentials_come_from_the_runtime_environment():
    c = Credentials.from_env({"AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "S", "AWS_SESSION_TOKEN": "T"})
    assert c == Credentials("A", "S", "T")
    with pytest.raises(Unavailable, match="AWS_SECRET_ACCESS_KEY"):
        Credentials.from_env({"AWS_ACCESS_KEY_ID": "A"})


# --- https with the bundle's own trust store --------------------------------------------------


def _ca_and_server_cert(tmp: Path, host: str) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for `host`, written as PEM files."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("test root")).issuer_name(name("test root"))
          .public_key(ca_key.public_key()).serial_number(1).not_valid_before(now - dt.timedelta(days=1))
          .not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name(host)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(2).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem, cert_pem, key_pem = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return ca_pem, cert_pem, key_pem


def test_https_verifies_against_the_bundled_trust_store(tmp_path: Path):
    import ssl
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    ca, cert, key = _ca_and_server_cert(tmp_path, "127.0.0.1")

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        trusted = Endpoint(url, Budget(ca_file=str(ca)))
        reply = trusted.call("GET", "/", dict, b"", time.monotonic() + 3, lambda r: False)
        assert reply.status == 200 and reply.body == b"ok"
        from deploy.build_bundle import ats_roots

        roots = tmp_path / "aws-roots.pem"
        roots.write_bytes(ats_roots())  # the bundle's store: it must not trust this test CA
        with pytest.raises(Unavailable, match="SSL"):
            Endpoint(url, Budget(ca_file=str(roots))).call("GET", "/", dict, b"", time.monotonic() + 3,
                                                           lambda r: False)
    finally:
        server.shutdown()
        server.server_close()


def test_s3_addressing_on_aws_and_elsewhere():
    on_aws = S3("mr-releases", "eu-west-1", lambda: CREDS)
    assert on_aws.endpoint.url(on_aws.path("api/current.json")) == \
        "https://mr-releases.s3.eu-west-1.amazonaws.com/api/current.json"
    dotted = S3("mr.releases", "eu-west-1", lambda: CREDS)  # the wildcard certificate covers one label only
    assert dotted.endpoint.url(dotted.path("a b")) == "https://s3.eu-west-1.amazonaws.com/mr.releases/a%20b"
    local = S3("mr-releases", "us-east-1", lambda: CREDS, "http://127.0.0.1:9000")
    assert local.endpoint.url(local.path("k")) == "http://127.0.0.1:9000/mr-releases/k"


# --- the URL helpers the signer uses instead of urllib.parse (kept out of the cold start) ----------


@given(st.text())
def test_quote_path_is_urllib_quote(text: str):
    from urllib.parse import quote

    try:
        expected = quote(text, safe="/~")
    except UnicodeEncodeError:  # lone surrogates: neither can encode them
        with pytest.raises(UnicodeEncodeError):
            quote_path(text)
        return
    assert quote_path(text) == expected


URL_PART = st.text(alphabet="abcXYZ019-._~%/?#:@[]! é", max_size=12)


@given(st.sampled_from(["http", "https", "HTTPS"]), st.sampled_from(["", "user@", "u:p@"]),
       st.sampled_from(["example.com", "EXAMPLE.com", "127.0.0.1", "[::1]", "[2001:DB8::1]", "my-bucket.s3.aws"]),
       st.sampled_from(["", ":", ":0", ":80", ":443", ":9000", ":65535"]), URL_PART, URL_PART, URL_PART)
def test_split_url_and_host_port_are_urlsplit(scheme, userinfo, host, port, path, query, fragment):
    from urllib.parse import urlsplit

    url = f"{scheme}://{userinfo}{host}{port}/{path}?{query}#{fragment}"
    parts = urlsplit(url)
    assert split_url(url) == (parts.scheme, parts.netloc, parts.path, parts.query)
    assert host_port(parts.netloc) == (parts.hostname, parts.port)


@pytest.mark.parametrize("netloc", ["h:99999", "h:x1", "h:-1", "[::1]:１"])
def test_host_port_refuses_what_urlsplit_refuses(netloc: str):
    from urllib.parse import urlsplit

    with pytest.raises(ValueError):
        _ = urlsplit(f"http://{netloc}/").port
    with pytest.raises(ValueError):
        host_port(netloc)
