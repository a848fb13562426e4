"""Serving the review app in the background of a running event loop."""

from __future__ import annotations

from typing import Any

from hypercorn.config import Config

from services.http_server import BackgroundServer


class ReviewServer(BackgroundServer):
    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 8080) -> None:
        config = Config()
        config.graceful_timeout = 1.0  # live streams stay open; do not wait on them to stop
        super().__init__(app, host, port, config)
