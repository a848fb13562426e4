"""A script on the server SDK with its worker, as a process of its own, that dies between a
task's store write and the start of its batch: python -m tests.lightning_queue_process
ADDRESS DATABASE_URL TASK_QUEUE CLIENT_QUEUE SERVER_ID. Queues one task and waits for a batch
to take it (and for that batch to settle), queues a second, prints both ids and kills itself
(SIGKILL) before the batch for the second goes out."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from dataset_optimization.server import AgentLightningServer
from domain.lightning import PromptTemplate
from domain.settings import Settings
from store import Store
from worker import build_worker


async def settled(client: Client, workflow_id: str) -> None:
    """Until the workflow has no workflow task pending."""
    handle = client.get_workflow_handle(workflow_id)
    while (await handle.describe()).raw_description.HasField("pending_workflow_task"):
        await asyncio.sleep(0.02)


async def main(address: str, database_url: str, queue: str, client_queue: str, sid: str) -> None:
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    store = Store.open(database_url)
    # no workflow cache: the worker's successor takes the dispatcher's next task at once
    settings = Settings(task_queue=queue, database_url=database_url, max_cached_workflows=0)
    async with build_worker(client, store, settings):
        server = AgentLightningServer(
            client, store, sid, task_queue=queue, client_task_queue=client_queue
        )
        await server.start()
        await server.update_resources(prompt_template=PromptTemplate(template="{n}"))
        first = await server.queue_task({"n": 1})
        while not (batch := store.queries.queued_tasks([first])[first].batch_id):
            await asyncio.sleep(0.02)  # a batch took it
        # and is done with it: a workflow task this process still held when it died would
        # wait out Temporal's 10 s workflow task timeout
        await settled(client, f"tasks-{batch.replace(':', '-')}")
        second = await server.queue_task({"n": 2})
        # stored and acknowledged; its batch waits for others to join it (the linger), and
        # never goes out
        print(first, second, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
