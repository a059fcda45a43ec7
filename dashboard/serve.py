"""The dashboard under uvicorn, as `malaria-risk dashboard` runs it locally (the Lambda function
never imports this module: its requests come through `dashboard.lambda_handler`).

A request head is capped at `settings.MAX_HEAD` (16 KiB) with 431 by the app itself
(`dashboard.app.SecurityHeaders`), for the Lambda adapter and uvicorn alike. uvicorn also
bounds the bytes it buffers before a head is complete (`HEAD_BUFFER`), and answers a head
past that bound with 400; `HeadCappedH11` makes that answer 431 too, so every head that is
too large gets the status that says so, however large it is.
"""

from __future__ import annotations

from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .settings import MAX_HEAD

HEAD_BUFFER = MAX_HEAD + 4 * 1024  # what uvicorn buffers of an unfinished head; the app's 431 applies below it


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


def options() -> dict[str, Any]:
    """uvicorn's settings for the dashboard: one request at a time per connection, a short keep-alive
    (as the API's local server), the head bounded as above, no Server header."""
    return {"http": HeadCappedH11, "h11_max_incomplete_event_size": HEAD_BUFFER, "timeout_keep_alive": 5,
            "server_header": False}
