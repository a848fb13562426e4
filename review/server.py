"""Serving the review app (Hypercorn), in the background of a running event loop."""

from __future__ import annotations

import asyncio
from typing import Any

from hypercorn.asyncio import serve
from hypercorn.config import Config

from services.dev_server import until_listening


class ReviewServer:
    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 8080) -> None:
        self.app, self.host, self.port = app, host, port
        self._shutdown = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        config = Config()
        config.bind = [f"{self.host}:{self.port}"]
        config.accesslog = None
        config.graceful_timeout = 1.0  # live streams stay open; do not wait on them to stop
        self._task = asyncio.create_task(
            serve(self.app, config, shutdown_trigger=self._shutdown.wait)  # type: ignore[arg-type]
        )
        await until_listening(self.host, self.port)

    async def stop(self) -> None:
        self._shutdown.set()
        if self._task is not None:
            await self._task
