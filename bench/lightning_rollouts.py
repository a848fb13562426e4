"""Dataset-optimization rollouts end to end: tasks queued through the server SDK, taken by one
client process, reported back and recorded in the store.

    .venv/bin/python -m bench.lightning_rollouts [--tasks 500] [--concurrency 8] [--one-by-one]

One Temporal dev server, one worker (this process, which also drives the server SDK), one
client process running a trivial agent (reward 1.0, no model call) with ``--concurrency``
rollouts at once. Prints the wall time, CPU per rollout of the server, this process and the
client, and as its last line ``rollouts/s: N``. ``--one-by-one`` queues with ``queue_task``
per sample (all at once) instead of ``queue_tasks``, ``--awaited`` with ``queue_task`` awaited
one after another, as a script written against the Agent Lightning API does. Target:
>= 190 rollouts/s on every path.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import psutil

from dataset_optimization.client import AgentLightningClient, Resources
from dataset_optimization.server import AgentLightningServer
from domain.lightning import PromptTemplate
from domain.settings import Settings
from services.dev_server import start_in_memory
from store import Store
from worker import build_worker


async def trivial_agent(task: dict[str, Any], resources: Resources) -> float:
    return 1.0


async def client_main(address: str, queue: str, concurrency: int) -> None:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    client = await Client.connect(address, data_converter=pydantic_data_converter)
    lightning = AgentLightningClient(client, "bench-client", task_queue=queue)
    await lightning.run(trivial_agent, max_concurrent=concurrency)


def cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


async def main(tasks: int, concurrency: int, one_by_one: str) -> None:
    env = await start_in_memory()
    me = psutil.Process()
    servers = me.children(recursive=True)
    address = env.client.service_client.config.target_host
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{tmp}/bench.db")
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        rollouts_queue = f"{queue}-rollouts"
        settings = Settings(
            task_queue=queue, database_url=str(store.engine.url), max_concurrent_activities=100
        )
        client_process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.lightning_rollouts",
                "--client",
                address,
                "--queue",
                rollouts_queue,
                "--concurrency",
                str(concurrency),
            ]
        )
        client = psutil.Process(client_process.pid)
        try:
            async with build_worker(env.client, store, settings):
                server = AgentLightningServer(
                    env.client,
                    store,
                    f"bench-{uuid.uuid4().hex[:6]}",
                    task_queue=queue,
                    client_task_queue=rollouts_queue,
                )
                await server.start()
                await server.update_resources(prompt_template=PromptTemplate(template="{x}"))
                samples = [{"x": i} for i in range(tasks)]
                # warm up: the client connects, the first workflow code loads
                await server.wait_for_rollouts(await server.queue_tasks(samples[:20]))
                before = (sum(cpu(p) for p in servers), cpu(me), cpu(client))
                started = time.perf_counter()
                if one_by_one == "awaited":  # each queue_task awaited in turn, as scripts do
                    ids = [await server.queue_task(s) for s in samples]
                elif one_by_one:
                    ids = list(await asyncio.gather(*(server.queue_task(s) for s in samples)))
                else:
                    ids = await server.queue_tasks(samples)
                reports = await server.wait_for_rollouts(ids)
                wall = time.perf_counter() - started
                after = (sum(cpu(p) for p in servers), cpu(me), cpu(client))
                await server.stop()
        finally:
            client_process.terminate()
            client_process.wait()
            store.close()
    await env.shutdown()
    assert len(reports) == tasks, f"{len(reports)} of {tasks} reports"
    server_ms, worker_ms, client_ms = (
        (a - b) / tasks * 1000 for a, b in zip(after, before, strict=True)
    )
    print(f"{tasks} rollouts, client concurrency {concurrency}, ", end="")
    print(
        {
            "awaited": "queue_task awaited one after another",
            "gathered": "queue_task one by one",
        }.get(str(one_by_one), "queue_tasks")
    )
    print(f"wall: {wall:.2f} s")
    print(
        f"CPU per rollout: Temporal server {server_ms:.1f} ms, worker + server SDK "
        f"{worker_ms:.1f} ms, client {client_ms:.1f} ms"
    )
    print(f"rollouts/s: {tasks / wall:.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--one-by-one", action="store_true")
    parser.add_argument(
        "--awaited", action="store_true", help="one by one, each awaited before the next"
    )
    parser.add_argument("--client", help=argparse.SUPPRESS)  # the client process: an address
    parser.add_argument("--queue", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        asyncio.run(client_main(args.client, args.queue, args.concurrency))
    else:
        mode = "awaited" if args.awaited else "gathered" if args.one_by_one else ""
        asyncio.run(main(args.tasks, args.concurrency, mode))
