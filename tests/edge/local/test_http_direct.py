"""The direct HTTP/1.1 front's own framing rules (the gate's rules are tested on both fronts
by test_server.py): pipelining order, HTTP/1.0, oversized heads, malformed requests."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge.local.app import App
from tests.conftest import LiveServer


@pytest.fixture
def direct(release_root: Path, store) -> Iterator[LiveServer]:
    with LiveServer(App(release_root, store), "direct") as server:
        yield server


def exchange(live: LiveServer, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", live.port), timeout=5) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def test_pipelined_requests_are_answered_in_order(direct: LiveServer, all_scopes_key: str):
    req = "GET {} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + all_scopes_key + "\r\n\r\n"
    data = exchange(direct, (req.format("/v1/context/lgas?state=LA") + req.format("/v1/nothing")
                             + req.format("/v1/context/lgas?state=KN")).encode())
    import re

    starts = re.findall(rb"HTTP/1\.1 \d{3} [A-Za-z ]+?\r\n", data)  # a body has no CRLF before the next status line
    assert starts == [b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 404 Not Found\r\n", b"HTTP/1.1 200 OK\r\n"]
    assert data.index(b'"LA"') < data.index(b"NOT_FOUND") < data.index(b'"KN"')


def test_http_10_closes_after_the_answer(direct: LiveServer, all_scopes_key: str):
    data = exchange(direct, f"GET /v1/periods HTTP/1.0\r\nAuthorization: Bearer {all_scopes_key}\r\n\r\n".encode())
    assert data.startswith(b"HTTP/1.1 200") and b"connection: close" in data.lower()


def test_oversized_head_is_431(direct: LiveServer):
    data = exchange(direct, b"GET /v1/periods HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 70_000 + b"\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 431")


def test_garbage_is_400_and_closed(direct: LiveServer):
    data = exchange(direct, b"NOT HTTP AT ALL\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 400") and b"connection: close" in data.lower()
