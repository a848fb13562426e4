"""Serving the review app in the background of a running event loop."""

from __future__ import annotations

from typing import Any

from hypercorn.config import Config

from services.http_server import BackgroundServer

READ_TIMEOUT_SECONDS = 10


class ReviewServer(BackgroundServer):
    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 8080) -> None:
        config = Config()
        config.graceful_timeout = 1.0  # live streams stay open; do not wait on them to stop
        # a client that stops sending mid-request is dropped, not waited on
        config.read_timeout = READ_TIMEOUT_SECONDS
        super().__init__(app, host, port, config)
