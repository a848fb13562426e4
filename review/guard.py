"""What the review app checks before any page or action runs, as plain ASGI middleware (live
streams pass through it unbuffered):

- **Host**: only the names the app is served under (the embedded default: the loopback names),
  so a page that rebinds its own domain to 127.0.0.1 cannot reach it (DNS rebinding);
- **Origin**: a request that changes state (any POST) must come from a page of this very origin
  (scheme, host and port: another port on the same machine is another origin), or carry the
  token as a bearer header, which no other site can make a browser send;
- **size**: a request body over ``max_body`` bytes is refused with 413, declared or chunked:
  a declared one before it is read, any other as soon as it passes the bound (the guard reads
  the body, at most ``max_body`` bytes and one chunk, before the app sees it, so the refusal
  depends on no exception crossing the app's middleware), and nothing large is spooled to disk;
- **live views**: at most ``max_streams`` live-update streams at once;
- **headers**: every response forbids framing and other sites' scripts (Content-Security-Policy,
  X-Frame-Options) and content sniffing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
MAX_BODY_BYTES = 64 * 1024  # a score with its comment, or a directive, is a few kilobytes
MAX_STREAMS = 32
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        b"img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


class Guard:
    def __init__(
        self,
        app: App,
        allowed_hosts: tuple[str, ...] | None = LOOPBACK_HOSTS,
        max_body: int = MAX_BODY_BYTES,
        max_streams: int = MAX_STREAMS,
        stream_path: str = "/events",
    ) -> None:
        """``allowed_hosts``: host names (without port) the app answers to; None: any."""
        self.app = app
        self.allowed_hosts = {h.lower() for h in allowed_hosts} if allowed_hosts else None
        self.max_body = max_body
        self.max_streams = max_streams
        self.stream_path = stream_path
        self.streams = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        refusal = self._refusal(scope, headers, host)
        if refusal is not None:
            await _refuse(send, *refusal)
            return
        streaming = scope["path"] == self.stream_path
        if streaming and self.streams >= self.max_streams:
            await _refuse(send, 503, f"{self.max_streams} live views are open; reload later")
            return

        body = await self._body(receive)
        if body is None:
            await _refuse(send, 413, f"the request body is over {self.max_body} bytes")
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if streaming:
            self.streams += 1
        try:
            await self.app(scope, _replayed(body, receive), send_with_headers)
        finally:
            if streaming:
                self.streams -= 1

    def _refusal(self, scope: Scope, headers: dict[str, str], host: str) -> tuple[int, str] | None:
        name = _host_name(host)
        if self.allowed_hosts is not None and name not in self.allowed_hosts:
            return 421, f"this review app does not answer to the host {host!r}"
        if scope["method"] in SAFE_METHODS:
            return None
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            return 413, f"the request body is over {self.max_body} bytes"
        if headers.get("authorization", "").lower().startswith("bearer "):
            return None  # a header no other site can make a browser send
        origin = headers.get("origin") or _origin_of(headers.get("referer", ""))
        scheme = scope.get("scheme", "http")
        if not origin or origin.lower() != f"{scheme}://{host}".lower():
            return 403, "a request that changes anything must come from this review app's own page"
        return None

    async def _body(self, receive: Receive) -> list[Message] | None:
        """The request's body messages, read whole before the app runs; None as soon as they
        pass ``max_body`` bytes (a chunked body declares no size). A disconnect ends it."""
        messages: list[Message] = []
        seen = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                return None
            if not message.get("more_body", False):
                return messages


def _replayed(messages: list[Message], receive: Receive) -> Receive:
    """The body read by the guard, given to the app as it came; then the server's own
    messages (a disconnect, which a live stream waits for)."""
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _origin_of(referer: str) -> str | None:
    parts = urlsplit(referer)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
