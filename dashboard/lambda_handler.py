"""The dashboard as a Lambda function behind a function URL (payload format 2.0).

A small adapter rather than a dependency: one HTTP request in, the ASGI app run once, one
response out. Cookies travel in the event's and the answer's `cookies` lists, as function
URLs require. The app is built once per container, from the environment
(`DashboardSettings.from_env`: deploy/dashboard.py sets it).
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any
from urllib.parse import quote

_APP: Any = None


def app() -> Any:
    global _APP
    if _APP is None:
        from .app import build
        from .settings import DashboardSettings

        _APP = build(DashboardSettings.from_env())[1]
    return _APP


def scope_from_event(event: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    http = event["requestContext"]["http"]
    headers = [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in (event.get("headers") or {}).items()
               if k.lower() != "cookie"]
    if event.get("cookies"):
        headers.append((b"cookie", "; ".join(event["cookies"]).encode("latin-1")))
    body = event.get("body") or ""
    raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8")
    host = (event.get("headers") or {}).get("host", "localhost")
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": http["method"].upper(),
        "scheme": "https", "path": event.get("rawPath") or http.get("path") or "/",
        "raw_path": quote(event.get("rawPath") or "/").encode(), "root_path": "",
        "query_string": (event.get("rawQueryString") or "").encode("latin-1"), "headers": headers,
        "server": (host, 443), "client": (http.get("sourceIp", "0.0.0.0"), 0),
    }
    return scope, raw


async def run(asgi: Any, scope: dict[str, Any], body: bytes) -> dict[str, Any]:
    sent = False
    out: dict[str, Any] = {"statusCode": 500, "headers": {}, "cookies": [], "body": b""}

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out["statusCode"] = message["status"]
            for name, value in message.get("headers", []):
                n, v = name.decode("latin-1").lower(), value.decode("latin-1")
                if n == "set-cookie":
                    out["cookies"].append(v)
                elif n in out["headers"]:
                    out["headers"][n] += ", " + v
                else:
                    out["headers"][n] = v
        elif message["type"] == "http.response.body":
            out["body"] += message.get("body", b"")

    await asgi(scope, receive, send)
    data: bytes = out["body"]
    try:
        out["body"], out["isBase64Encoded"] = data.decode("utf-8"), False
    except UnicodeDecodeError:
        out["body"], out["isBase64Encoded"] = base64.b64encode(data).decode(), True
    return out


def handle(asgi: Any, event: dict[str, Any]) -> dict[str, Any]:
    scope, body = scope_from_event(event)
    return asyncio.run(run(asgi, scope, body))


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(app(), event)
