"""A worker's health endpoint: GET /healthz answers 200 while the worker runs and the store
answers, 503 otherwise (for container probes)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from sqlalchemy import text

from store import Store


class HealthServer:
    def __init__(self, port: int, store: Store, running: Callable[[], bool]) -> None:
        self.port, self.store, self.running = port, store, running
        self._server: asyncio.AbstractServer | None = None

    def _check(self) -> tuple[bool, dict[str, str]]:
        status = {"worker": "running" if self.running() else "stopped"}
        try:
            with self.store.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            status["store"] = "ok"
        except Exception as exc:  # any failure means unhealthy, with the reason
            status["store"] = f"unreachable: {type(exc).__name__}"
        return status["worker"] == "running" and status["store"] == "ok", status

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readline()
        while (await reader.readline()).strip():  # headers
            pass
        if request.split()[1:2] == [b"/healthz"]:
            healthy, status = await asyncio.to_thread(self._check)
            code, body = (200, "OK") if healthy else (503, "Service Unavailable"), status
        else:
            code, body = (404, "Not Found"), {"error": "try /healthz"}
        payload = json.dumps(body).encode()
        writer.write(
            f"HTTP/1.1 {code[0]} {code[1]}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
            + payload
        )
        await writer.drain()
        writer.close()

    async def __aenter__(self) -> HealthServer:
        self._server = await asyncio.start_server(self._handle, "0.0.0.0", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
