"""An ASGI app served by Hypercorn in the background of a running event loop, until stopped
(the review inbox, the codec server)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypercorn.asyncio import serve
from hypercorn.config import Config

from services.dev_server import until_listening


class BackgroundServer:
    def __init__(self, app: Any, host: str, port: int, config: Config | None = None) -> None:
        self.app, self.host, self.port = app, host, port
        self.config = config or Config()
        self.config.bind = [f"{host}:{port}"]
        self.config.accesslog = None
        self._shutdown = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self._shutdown.clear()
        self._task = asyncio.create_task(
            serve(self.app, self.config, shutdown_trigger=self._shutdown.wait)  # type: ignore[arg-type]
        )
        await until_listening(self.host, self.port)

    async def stop(self) -> None:
        self._shutdown.set()
        if self._task is not None:
            await self._task
