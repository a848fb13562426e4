"""A client machine, as a separate process: python -m tests.lightning_client_process ADDRESS
TASK_QUEUE CLIENT_ID DATABASE_URL. Runs the example's agent until terminated, reading its
tasks from the store at DATABASE_URL."""

from __future__ import annotations

import asyncio
import sys

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from dataset_optimization.client import AgentLightningClient
from domain.settings import Settings
from examples.lightning_topics import agent


async def main(address: str, task_queue: str, client_id: str, database_url: str) -> None:
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    settings = Settings.from_env().model_copy(update={"database_url": database_url})
    lightning = AgentLightningClient(client, client_id, task_queue=task_queue, settings=settings)
    async with lightning.worker(agent, max_concurrent=8):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
