"""The dashboard under uvicorn, as `malaria-risk dashboard` runs it locally (the Lambda function
never imports this module: its requests come through `dashboard.lambda_handler`).

A request head is capped at `settings.MAX_HEAD` (16 KiB) with 431 by the app itself
(`dashboard.app.SecurityHeaders`), for the Lambda adapter and uvicorn alike. uvicorn also
bounds the bytes it buffers before a head is complete (`HEAD_BUFFER`), and answers a head
past that bound with 400; `HeadCappedH11` makes that answer 431 too, so every head that is
too large gets the status that says so, however large it is.

uvicorn has no deadline for a request that trickles in (it times out only an idle keep-alive),
and no bound on connections per client. `DashboardH11` adds both: a request's head and body
must arrive within `REQUEST_SECONDS` of the connection opening or the previous answer (else
408 and close; a connection that sends nothing is closed then too), and one client (an IPv4
address, an IPv6 /64: `edge.clients.client_group`) holds at most `MAX_CONNECTIONS_PER_CLIENT`
connections (one more is answered 429 and closed). Each is one JSON line on stderr
(`dashboard.request_timeout`, `dashboard.connection_refused`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from edge.clients import ConnectionCap, client_group

from .service import log_event
from .settings import MAX_HEAD

HEAD_BUFFER = MAX_HEAD + 4 * 1024  # what uvicorn buffers of an unfinished head; the app's 431 applies below it
REQUEST_SECONDS = 10.0  # a whole request (head and form) arrives within this; a person's browser takes milliseconds
MAX_CONNECTIONS_PER_CLIENT = 16  # a browser opens at most 6 to one host; a few people behind one address fit


def _plain(status: bytes, text: bytes, extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n" + extra
            + b"content-length: " + str(len(text)).encode() + b"\r\n\r\n" + text)


TOO_MANY_CONNECTIONS = _plain(b"429 Too Many Requests", b"Too many open connections from your network.",
                              b"retry-after: 10\r\n")
TOO_SLOW = _plain(b"408 Request Timeout", b"Request not received in time.")


class HeadCappedH11(H11Protocol):
    """uvicorn's h11 protocol, answering 431 instead of 400 when the head outgrew the buffer."""

    def send_400_response(self, msg: str) -> None:
        if len(self.conn.trailing_data[0]) <= HEAD_BUFFER:
            super().send_400_response(msg)
            return
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
        for event in (h11.Response(status_code=431, headers=headers, reason=b"Request Header Fields Too Large"),
                      h11.Data(data=b"Request header fields too large"), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()


class DashboardH11(HeadCappedH11):
    """`HeadCappedH11` with a deadline for each request and a cap on connections per client
    (`cap`: one per server, set by `options`; None when a proxy is every client's address)."""

    cap: ConnectionCap | None = None
    request_seconds: float = REQUEST_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._group: str | None = None
        if self.cap is not None:
            group = client_group(str(self.client[0])) if self.client else "unknown"
            if not self.cap.admit(group):
                log_event("dashboard.connection_refused", client=group, cap=self.cap.per_client)
                transport.write(TOO_MANY_CONNECTIONS)
                transport.close()
                return
            self._group = group
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._group is not None and self.cap is not None:
            self.cap.release(self._group)
            self._group = None
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_seconds, self._too_slow)

    def _disarm(self) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()  # type: ignore[union-attr]
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        log_event("dashboard.request_timeout", client=self._group or "unknown", seconds=self.request_seconds)
        self.transport.write(TOO_SLOW)
        self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and self.conn.their_state in (h11.DONE, h11.MUST_CLOSE):
            self._disarm()  # the whole request is in: the answer has no deadline here

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request's time starts now (an idle one is closed at 5 s anyway)


def protocol(per_client: int | None = MAX_CONNECTIONS_PER_CLIENT,
             request_seconds: float = REQUEST_SECONDS) -> type[DashboardH11]:
    """The protocol class for one server, with its own count of connections per client."""
    return type("DashboardH11", (DashboardH11,), {
        "cap": ConnectionCap(per_client) if per_client else None, "request_seconds": request_seconds})


def options(per_client: int | None = MAX_CONNECTIONS_PER_CLIENT) -> dict[str, Any]:
    """uvicorn's settings for the dashboard: one request at a time per connection, a short keep-alive
    (as the API's local server), the head bounded and timed as above, connections capped per client
    (`per_client`; None behind a proxy, whose address would be every client's), no Server header."""
    return {"http": protocol(per_client), "h11_max_incomplete_event_size": HEAD_BUFFER, "timeout_keep_alive": 5,
            "server_header": False}
