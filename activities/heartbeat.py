"""How a long activity tells Temporal it is alive: beats in the background while it runs, so a
dead worker or client is noticed within the activity's heartbeat timeout and its work moves on.
Not an activity itself: shared by those that run long (the agent's try, a rollout client)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio import activity


class Heartbeat:
    """Beats every ``every_seconds`` (and at least ``per_timeout`` times per heartbeat timeout,
    however short it was set), with ``details`` once there are some to carry. The first beat
    goes after one interval: each beat is a server write, a quick try needs none, and Temporal
    counts the heartbeat timeout from the activity's start."""

    def __init__(self, every_seconds: float, per_timeout: int) -> None:
        self.every_seconds = every_seconds
        self.per_timeout = per_timeout
        self.details: tuple[Any, ...] = ()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _beat(self) -> None:
        timeout = activity.info().heartbeat_timeout
        every = self.every_seconds
        if timeout:
            every = min(every, timeout.total_seconds() / self.per_timeout)
        while True:
            await asyncio.sleep(every)
            activity.heartbeat(*self.details)
