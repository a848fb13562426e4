"""The review inbox as its own service (`training-camp review`): the app, on the configured
Temporal and store, served until cancelled."""

from __future__ import annotations

import asyncio
import os

from client import connect
from domain.settings import Settings
from review.app import create_app
from review.guard import LOOPBACK_HOSTS
from review.server import ReviewServer
from services.terminal import console as make_console
from store import Store

console = make_console()
MIN_TOKEN_CHARS = 16


def review_token() -> str:
    """The token raters sign in with (TRAINING_CAMP_REVIEW_TOKEN); ValueError when unset or
    too short to guard anything."""
    token = os.environ.get("TRAINING_CAMP_REVIEW_TOKEN")
    if not token or len(token) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"set TRAINING_CAMP_REVIEW_TOKEN ({MIN_TOKEN_CHARS} characters or more, e.g. "
            "`openssl rand -base64 24`): raters sign in with it"
        )
    return token


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
    server = ReviewServer(
        create_app(client, store, token=token, allowed_hosts=hosts, settings=settings), host, port
    )
    await server.start()
    console.print(f"Review inbox on {server.url} (Ctrl-C to stop)")
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
        store.close()
