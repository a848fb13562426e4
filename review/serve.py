"""The review inbox as its own service (`training-camp review`): the app, on the configured
Temporal and store, served until cancelled."""

from __future__ import annotations

import asyncio

from client import connect
from domain.settings import Settings
from review.app import create_app
from review.guard import LOOPBACK_HOSTS
from review.server import ReviewServer
from services.terminal import console as make_console
from store import Store

console = make_console()


async def serve(
    settings: Settings, host: str, port: int, token: str, allowed_hosts: list[str] | None
) -> None:
    """Serve the inbox on ``host``:``port`` until cancelled. Without ``allowed_hosts``, one
    listening on a loopback address answers to the loopback names only."""
    store = Store.open(settings.database_url)
    client = await connect(settings)
    hosts = tuple(allowed_hosts) if allowed_hosts else None
    if hosts is None and host in ("127.0.0.1", "localhost", "::1"):
        hosts = LOOPBACK_HOSTS
    server = ReviewServer(create_app(client, store, token=token, allowed_hosts=hosts), host, port)
    await server.start()
    console.print(f"Review inbox on {server.url} (Ctrl-C to stop)")
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
        store.close()
