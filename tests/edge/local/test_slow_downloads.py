"""Slow links and interrupted downloads, over real loopback (both fronts).

A client on a slow link keeps reading: it must receive the whole file however long that
takes, while a client that reads nothing is still dropped. The direct front's stall window
is shortened here (a quarter of a second instead of a minute) so the transfer lasts many
windows without the test lasting minutes; the client's small receive buffer keeps the bytes
in the server's write buffer, where the front measures the progress. An interrupted
download resumes with `Range` and the pieces hash to the manifest's SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from edge.local.app import UNSATISFIABLE, App, byte_range
from edge.routes import CSV, DOWNLOAD_FILE
from pipeline.datasets.downloads import BundleFile, bundle
from pipeline.release.render import render_release
from tests.conftest import LiveServer, synthetic_produced

BIG = 3 * 1024 * 1024 + 12_345  # a multi-megabyte file: the real zip is about 3.2 MB
WINDOW = 0.25  # the direct front's stall window in these tests (a minute in service)
SNDBUF = 16 * 1024  # the server's kernel send buffer: on loopback it would otherwise swallow the whole file


@pytest.fixture(scope="module")
def big_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A release whose bundle holds a 3 MB file that does not compress (so no gzip copy helps)."""
    root = tmp_path_factory.mktemp("big") / "build"
    produced = [p for p in synthetic_produced() if p.dataset != "downloads"]
    data = os.urandom(BIG)
    produced.append(bundle([BundleFile("big.csv", CSV, data, "a large table")], "2026-11-22T10:00:00Z", "test-1"))
    render_release(root, produced, "2026-11-22T10:00:00Z")
    return root


@pytest.fixture
def big_live(big_root: Path, store, front: str) -> Iterator[LiveServer]:
    with LiveServer(App(big_root, store), front, stall_window=WINDOW, min_rate=1024, send_buffer=SNDBUF) as server:
        yield server


def _manifest_entry(root: Path, name: str) -> tuple[str, dict[str, object]]:
    manifest = json.loads((root / "current" / "manifest.json").read_bytes())
    key = DOWNLOAD_FILE.key(name)
    return manifest["release_id"], manifest["files"][key]


def _request(port: int, path: str, key: str, extra: str = "", rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket()
    if rcvbuf is not None:  # before connecting, so the advertised window stays small
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n{extra}"
              "Connection: close\r\n\r\n".encode())
    return s


def _split(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _read_slowly(s: socket.socket, chunk: int, pause: float) -> bytes:
    """Read `chunk` bytes at a time with a pause after each, until the server closes."""
    got = bytearray()
    try:
        while True:
            piece = s.recv(chunk)
            if not piece:
                break
            got += piece
            time.sleep(pause)
    except (ConnectionResetError, TimeoutError):
        pass
    return bytes(got)


def test_a_slow_but_steady_reader_receives_the_whole_file(big_live: LiveServer, big_root: Path,
                                                          all_scopes_key: str):
    """About 4 s of transfer against a 0.25 s stall window: some sixteen windows, each with progress.

    Before progress was counted, the front saw no write activity between the moment the
    body was queued and the moment the buffer drained, and cut this client off after one
    window with most of the file missing.
    """
    rid, entry = _manifest_entry(big_root, "big.csv")
    s = _request(big_live.port, f"/v1/downloads/{rid}/big.csv", all_scopes_key, rcvbuf=8192)
    with s:
        raw = _read_slowly(s, 8192, 0.01)
    status, headers, body = _split(raw)
    assert status == 200 and headers["accept-ranges"] == "bytes"
    assert int(headers["content-length"]) == entry["size"] == BIG
    assert len(body) == BIG, f"received {len(body)} of {BIG} bytes"
    assert hashlib.sha256(body).hexdigest() == entry["sha256"]


def test_a_client_that_reads_nothing_is_still_dropped(big_root: Path, store, all_scopes_key: str):
    """The stall bound still holds: a window without progress closes the connection."""
    with LiveServer(App(big_root, store), "direct", stall_window=WINDOW, min_rate=1024, send_buffer=SNDBUF) as live:
        rid, _ = _manifest_entry(big_root, "big.csv")
        s = _request(live.port, f"/v1/downloads/{rid}/big.csv", all_scopes_key, rcvbuf=8192)
        with s:
            assert s.recv(1, socket.MSG_PEEK) == b"H"  # the answer has begun
            _wait_for(lambda: _open(live) == 0, "the server to drop the stalled connection")
            got = _read_slowly(s, 1 << 20, 0)
        assert len(got) < BIG


def _wait_for(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 60  # a hang guard only: the bound itself is a quarter of a second
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.02)


def _open(live: LiveServer) -> int:
    """Open connections of this server (a connection leaves its worker's set when it is lost)."""
    import gc

    from edge.local.direct import _Connection

    return sum(1 for o in gc.get_objects() if isinstance(o, _Connection) and o.worker.app is live.app
               and o in o.worker.connections)


def test_an_interrupted_download_resumes_with_range(big_live: LiveServer, big_root: Path, all_scopes_key: str):
    rid, entry = _manifest_entry(big_root, "big.csv")
    path = f"/v1/downloads/{rid}/big.csv"
    s = _request(big_live.port, path, all_scopes_key)
    first = bytearray()
    with s:  # the link drops part-way: the client keeps what it got
        while len(first) < 1_000_000:
            first += s.recv(65536)
    status, headers, part = _split(bytes(first))
    assert status == 200
    etag = headers["etag"]
    with httpx.Client(base_url=big_live.url, timeout=30) as c:
        r = c.get(path, headers={"Authorization": f"Bearer {all_scopes_key}", "Range": f"bytes={len(part)}-",
                                 "If-Range": etag, "Accept-Encoding": "gzip"})
    assert r.status_code == 206 and "content-encoding" not in r.headers
    assert r.headers["content-range"] == f"bytes {len(part)}-{BIG - 1}/{BIG}"
    assert int(r.headers["content-length"]) == BIG - len(part) == len(r.content)
    assert r.headers["etag"] == etag
    assert hashlib.sha256(part + r.content).hexdigest() == entry["sha256"]


def test_range_rules(client: httpx.Client, release_root: Path, all_scopes_key: str):
    auth = {"Authorization": f"Bearer {all_scopes_key}"}
    rid, entry = _manifest_entry(release_root, "gazetteer.csv")
    path = f"/v1/downloads/{rid}/gazetteer.csv"
    whole = client.get(path, headers={**auth, "Accept-Encoding": "identity"})
    size = len(whole.content)
    assert whole.status_code == 200 and whole.headers["accept-ranges"] == "bytes" and size == entry["size"]
    etag = whole.headers["etag"]

    def get(**h: str) -> httpx.Response:
        return client.get(path, headers={**auth, **{k.replace("_", "-"): v for k, v in h.items()}})

    r = get(Range="bytes=0-9")
    assert r.status_code == 206 and r.content == whole.content[:10]
    assert r.headers["content-range"] == f"bytes 0-9/{size}"
    r = get(Range="bytes=-5")  # the last five bytes
    assert r.status_code == 206 and r.content == whole.content[-5:]
    r = get(Range=f"bytes=5-{size + 100}")  # clipped to the end
    assert r.status_code == 206 and r.content == whole.content[5:]
    r = get(Range=f"bytes={size}-")
    assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{size}"
    assert r.json()["code"] == "RANGE_NOT_SATISFIABLE" and r.headers["content-type"] == "application/problem+json"
    for ignored in ("bytes=0-1,4-5", "items=0-1", "bytes=5-1", "bytes=x-"):
        r = get(Range=ignored)
        assert r.status_code == 200 and r.content == whole.content, ignored
    # If-Range: only the answer's own strong ETag keeps the range; anything else gets the whole file
    assert get(Range="bytes=0-9", If_Range=etag).status_code == 206
    for stale in ('"0123456789abcdef0123456789abcdef"', "W/" + etag, "Sat, 01 Jan 2000 00:00:00 GMT"):
        r = get(Range="bytes=0-9", If_Range=stale)
        assert r.status_code == 200 and r.content == whole.content, stale
    # a Range request is answered from the identity bytes even when gzip is accepted
    r = get(Range="bytes=0-9", Accept_Encoding="gzip")
    assert r.status_code == 206 and "content-encoding" not in r.headers and r.headers["etag"] == etag
    # HEAD ignores Range; If-None-Match comes first
    h = client.head(path, headers={**auth, "Range": "bytes=0-9", "Accept-Encoding": "identity"})
    assert h.status_code == 200 and int(h.headers["content-length"]) == size
    assert get(Range="bytes=0-9", If_None_Match=etag).status_code == 304
    # docs pages and API answers are files too
    d = client.get("/docs/index.html", headers={"Range": "bytes=1-3"})
    assert d.status_code == 206 and d.content == b"h1>"
    a = get(Range="bytes=0-0")
    assert a.status_code == 206


def test_byte_range_parser():
    assert byte_range("bytes=0-0", 10) == (0, 0)
    assert byte_range("bytes=3-", 10) == (3, 9)
    assert byte_range("bytes=-3", 10) == (7, 9)
    assert byte_range("bytes=-30", 10) == (0, 9)
    assert byte_range("BYTES = 2-4", 10) == (2, 4)
    assert byte_range("bytes=10-", 10) == UNSATISFIABLE
    assert byte_range("bytes=-0", 10) == UNSATISFIABLE
    assert byte_range("bytes=0-", 0) == UNSATISFIABLE
    for bad in ("bytes=-", "bytes=1-2,3-4", "bytes=٣-4", "bytes=4-2", "bites=1-2", "bytes 1-2", "bytes=+1-2"):
        assert byte_range(bad, 10) is None, bad
