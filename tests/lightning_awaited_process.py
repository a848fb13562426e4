"""A script on the server SDK (its worker runs elsewhere) killed right after a `queue_task`
returns: python -m tests.lightning_awaited_process ADDRESS DATABASE_URL TASK_QUEUE
CLIENT_QUEUE SERVER_ID. Queues five tasks awaited one after another and asks for their
results (so they leave in a batch), queues five more, printing each id as its call returns,
and kills itself (SIGKILL) right after the last: those five are stored and acknowledged, and
their batch, gathering them for a minute, never goes out."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from dataset_optimization import server as server_sdk
from dataset_optimization.server import AgentLightningServer
from domain.lightning import PromptTemplate
from store import Store


async def main(address: str, database_url: str, queue: str, client_queue: str, sid: str) -> None:
    server_sdk.PAUSE_SECONDS = 60  # a slow call on a busy machine must not send them early
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    store = Store.open(database_url)
    server = AgentLightningServer(
        client, store, sid, task_queue=queue, client_task_queue=client_queue, linger_ms=60_000
    )
    await server.start()
    await server.update_resources(prompt_template=PromptTemplate(template="{n}"))
    first = []
    for n in range(5):
        first.append(await server.queue_task({"n": n}))
        print(first[-1], flush=True)
    await server.get_completed_rollouts(first)  # a script polling for results
    for n in range(5, 10):
        print(await server.queue_task({"n": n}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
