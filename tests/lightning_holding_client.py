"""A client machine that takes a task and never finishes it, as a process of its own, to be
killed while it holds the task: python -m tests.lightning_holding_client ADDRESS TASK_QUEUE
DATABASE_URL. Prints "ready" once it polls, then "holding ROLLOUT_ID" when its agent has a
task, and waits."""

from __future__ import annotations

import asyncio
import sys

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from dataset_optimization.client import AgentLightningClient, Resources
from domain.settings import Settings


async def hold(task: dict, resources: Resources) -> float:
    print(f"holding {task['n']}", flush=True)
    await asyncio.Event().wait()
    return 0.0


async def main(address: str, task_queue: str, database_url: str) -> None:
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    settings = Settings.from_env().model_copy(update={"database_url": database_url})
    lightning = AgentLightningClient(client, "holder", task_queue=task_queue, settings=settings)
    async with lightning.worker(hold):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
