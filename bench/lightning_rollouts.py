"""Dataset-optimization rollouts end to end: tasks queued through the server SDK, taken by one
client process, reported back and recorded in the store.

    .venv/bin/python -m bench.lightning_rollouts [--tasks 500] [--concurrency 8] [--one-by-one]
    .venv/bin/python -m bench.lightning_rollouts --awaited [--rounds 2] [--agent topics]

One Temporal dev server, one worker (this process, which also drives the server SDK), one
client process running the agent with ``--concurrency`` rollouts at once, reading its tasks'
samples from the store (SQLite, WAL). ``--agent trivial`` (the default) returns a reward of
1.0 and calls no model; ``--agent topics`` is examples/lightning_topics.py's agent: it renders
the topic template, calls the offline model (traced: the client reports its span) and scores
the answer. Prints the wall time, CPU per rollout of the server, this process and the client,
the machine's load average, and as its last line ``rollouts/s: N``. ``--one-by-one`` queues
with ``queue_task`` per sample (all at once) instead of ``queue_tasks``, ``--awaited`` with
``queue_task`` awaited one after another, as a script written against the Agent Lightning API
does; it prints what each awaited call took and how many batches carried the tasks.

``--awaited`` runs Agent Lightning 0.3 beside it, alternating ``--rounds`` times within the run
(ours, theirs, ours, theirs): its LightningStoreServer (in-memory store, HTTP in a thread of
the algorithm's process, a process of its own so that neither side's imports weigh on the
other) with ``enqueue_rollout`` awaited one after another, and a client process of
``--concurrency`` runners over HTTP (LightningStoreClient) doing what its LitAgentRunner does
for each rollout: dequeue, fetch the resources, run the same agent, add the reward span, mark
the attempt succeeded; runners poll an empty queue every 10 ms (its default is 5 s). The last
lines give both sides' rates and their ratio (ours / theirs, medians). Agent Lightning is not
a dependency of the project: install it into the venv for this bench
(``.venv/bin/pip install agentlightning==0.3.0``). Target: >= 190 rollouts/s on every path;
awaited >= 1.2x Agent Lightning.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

import psutil

from dataset_optimization.client import AgentLightningClient, Resources, TracedLLM
from dataset_optimization.server import AgentLightningServer
from domain.lightning import LLM, PromptTemplate, ResourceSet
from domain.settings import Settings
from examples import lightning_topics
from runner.backends import ModelBackends
from services.dev_server import start_in_memory
from store import Store
from worker import build_worker

AL_POLL_SECONDS = 0.01
# Agent Lightning imports litellm, which fetches a model price list from the internet at import
# (retrying for seconds when offline): its bundled copy serves the same
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


async def trivial_agent(task: dict[str, Any], resources: Resources) -> float:
    return 1.0


AGENTS = {"trivial": trivial_agent, "topics": lightning_topics.agent}
# What the topic agent is given: the example's first template and its offline model
TOPICS_LLM = LLM(
    model="offline-lightning-1", sampling_params={"temperature": 0.5, "max_tokens": 1024}
)


def bench_samples(agent: str, tasks: int) -> list[dict[str, Any]]:
    """Distinct samples (each read from the store once); the topic agent's cycle the example's
    50 topics."""
    if agent == "topics":
        data = lightning_topics.DATASET
        return [{**data[i % len(data)], "n": i} for i in range(tasks)]
    return [{"x": i} for i in range(tasks)]


async def client_main(
    address: str, queue: str, concurrency: int, database_url: str, agent: str
) -> None:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    client = await Client.connect(address, data_converter=pydantic_data_converter)
    store = Store.open(database_url)
    lightning = AgentLightningClient(client, "bench-client", task_queue=queue, store=store)
    await lightning.run(AGENTS[agent], max_concurrent=concurrency)


def cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


@dataclass
class Figures:
    wall: float
    tasks: int
    cpu_ms: dict[str, float]  # per rollout, by process
    note: str = ""
    acks: list[float] | None = None  # seconds each awaited queueing call took

    @property
    def rate(self) -> float:
        return self.tasks / self.wall

    def cpu_line(self) -> str:
        line = ", ".join(f"{name} {ms:.1f} ms" for name, ms in self.cpu_ms.items())
        return f"{line}{'; ' + self.note if self.note else ''}"

    def ack_line(self) -> str:
        if not self.acks:
            return ""
        ms = sorted(a * 1000 for a in self.acks)
        return (
            f"each awaited call: mean {statistics.mean(ms):.2f} ms, "
            f"median {ms[len(ms) // 2]:.2f}, p95 {ms[int(len(ms) * 0.95)]:.2f}"
        )


def load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


async def ours(
    env: Any, tasks: int, concurrency: int, mode: str, agent: str = "trivial"
) -> Figures:
    me = psutil.Process()
    servers = [p for p in me.children(recursive=True)]
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
                "--database-url",
                settings.database_url,
                "--agent",
                agent,
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
                if agent == "topics":
                    await server.update_resources(
                        prompt_template=lightning_topics.START, llm=TOPICS_LLM
                    )
                else:
                    await server.update_resources(prompt_template=PromptTemplate(template="{x}"))
                samples = bench_samples(agent, tasks)
                warm = [{**s, "warm": True} for s in samples[:25]]
                # warm up: the client connects, the first workflow code loads
                await server.wait_for_rollouts(await server.queue_tasks(warm[:20]))
                await server.wait_for_rollouts([await server.queue_task(s) for s in warm[20:]])
                before = (sum(cpu(p) for p in servers), cpu(me), cpu(client))
                wakeups, batches = server.wakeups, server.batches
                acks: list[float] = []
                started = time.perf_counter()
                if mode == "awaited":  # each queue_task awaited in turn, as scripts do
                    ids = []
                    for s in samples:
                        called = time.perf_counter()
                        ids.append(await server.queue_task(s))
                        acks.append(time.perf_counter() - called)
                elif mode == "gathered":
                    ids = list(await asyncio.gather(*(server.queue_task(s) for s in samples)))
                else:
                    ids = await server.queue_tasks(samples)
                reports = await server.wait_for_rollouts(ids)
                wall = time.perf_counter() - started
                after = (sum(cpu(p) for p in servers), cpu(me), cpu(client))
                wakeups, batches = server.wakeups - wakeups, server.batches - batches
                await server.stop()
        finally:
            client_process.terminate()
            client_process.wait()
            store.close()
    assert len(reports) == tasks, f"{len(reports)} of {tasks} reports"
    names = ("Temporal server", "worker + server SDK", "client")
    return Figures(
        wall,
        tasks,
        {name: (a - b) / tasks * 1000 for name, a, b in zip(names, after, before, strict=True)},
        f"{batches} batches started by the SDK, {wakeups} dispatcher wake-ups" if mode else "",
        acks or None,
    )


# ---- Agent Lightning 0.3, side by side -------------------------------------------------------


async def al_client_main(endpoint: str, concurrency: int, agent: str) -> None:
    """Runners over HTTP doing a LitAgentRunner's calls for each rollout."""
    from agentlightning.reward import emit_reward
    from agentlightning.store.client_server import LightningStoreClient
    from agentlightning.types import Span

    store = LightningStoreClient(endpoint)
    backends = ModelBackends(Settings())

    async def run_agent(sample: dict[str, Any], resources: Any) -> float:
        if agent == "trivial":
            return await trivial_agent(sample, None)  # type: ignore[arg-type]
        # the same agent on the resources Agent Lightning served (its template and LLM)
        template = resources.resources["prompt_template"]
        al_llm = resources.resources["llm"]
        llm = LLM(model=al_llm.model, sampling_params=al_llm.sampling_parameters)
        resource_set = ResourceSet(
            version=1,
            resources={"prompt_template": PromptTemplate(template=template.template), "llm": llm},
        )
        report = await lightning_topics.agent(
            sample, Resources(resource_set, TracedLLM(llm, backends, None))
        )
        return report.final_reward or 0.0

    async def runner(worker_id: str) -> None:
        while True:
            rollout = await store.dequeue_rollout(worker_id=worker_id)
            if rollout is None:
                await asyncio.sleep(AL_POLL_SECONDS)
                continue
            resources = await store.get_resources_by_id(rollout.resources_id)
            assert resources is not None
            reward = await run_agent(rollout.input, resources)
            attempt_id = rollout.attempt.attempt_id
            fields = emit_reward(reward, propagate=False)
            sequence_id = await store.get_next_span_sequence_id(rollout.rollout_id, attempt_id)
            await store.add_span(
                Span.from_core_fields(
                    fields,
                    rollout_id=rollout.rollout_id,
                    attempt_id=attempt_id,
                    sequence_id=sequence_id,
                )
            )
            await store.update_attempt(rollout.rollout_id, attempt_id, status="succeeded")

    await asyncio.gather(*(runner(f"runner-{i}") for i in range(concurrency)))


async def theirs(tasks: int, concurrency: int, agent: str) -> Figures:
    """Agent Lightning's side, run in a process of its own (``--al-server``)."""
    al = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.lightning_rollouts",
        "--al-server",
        "--tasks",
        str(tasks),
        "--concurrency",
        str(concurrency),
        "--agent",
        agent,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await al.communicate()
    if al.returncode != 0:
        raise RuntimeError(f"Agent Lightning's side exited with {al.returncode}")
    last = [line for line in out.decode().splitlines() if line.startswith("{")][-1]
    return Figures(**json.loads(last))


async def al_server_main(tasks: int, concurrency: int, agent: str) -> None:
    figures = await al_side(tasks, concurrency, agent)
    print(json.dumps(figures.__dict__), flush=True)


async def al_side(tasks: int, concurrency: int, agent: str) -> Figures:
    import portpicker
    from agentlightning.store.client_server import LightningStoreServer
    from agentlightning.store.memory import InMemoryLightningStore
    from agentlightning.types import LLM as AlLLM
    from agentlightning.types import PromptTemplate as AlPromptTemplate

    port = portpicker.pick_unused_port()
    server = LightningStoreServer(
        InMemoryLightningStore(thread_safe=True), host="127.0.0.1", port=port
    )
    await server.start()
    me = psutil.Process()
    client_process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.lightning_rollouts",
            "--al-client",
            server.endpoint,
            "--concurrency",
            str(concurrency),
            "--agent",
            agent,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = psutil.Process(client_process.pid)
    acks: list[float] = []
    try:
        if agent == "topics":
            resources: dict[str, Any] = {
                "prompt_template": AlPromptTemplate(
                    template=lightning_topics.START.template, engine="f-string"
                ),
                "llm": AlLLM(
                    endpoint="offline",
                    model=TOPICS_LLM.model,
                    sampling_parameters=dict(TOPICS_LLM.sampling_params),
                ),
            }
        else:
            resources = {"prompt_template": AlPromptTemplate(template="{x}", engine="f-string")}
        update = await server.add_resources(resources)
        samples = bench_samples(agent, tasks)

        async def run(batch: list[dict[str, Any]]) -> int:
            ids = []
            for sample in batch:
                called = time.perf_counter()
                rollout = await server.enqueue_rollout(
                    input=sample, resources_id=update.resources_id
                )
                acks.append(time.perf_counter() - called)
                ids.append(rollout.rollout_id)
            done = await server.wait_for_rollouts(rollout_ids=ids, timeout=600)
            return sum(r.status == "succeeded" for r in done)

        await run([{**s, "warm": True} for s in samples[:25]])  # warm up: the runners connect
        acks.clear()
        before = (cpu(me), cpu(client))
        started = time.perf_counter()
        succeeded = await run(samples)
        wall = time.perf_counter() - started
        after = (cpu(me), cpu(client))
    finally:
        client_process.terminate()
        client_process.wait()
        await server.stop()
    assert succeeded == tasks, f"{succeeded} of {tasks} rollouts succeeded"
    names = ("store server + algorithm", "client")
    return Figures(
        wall,
        tasks,
        {name: (a - b) / tasks * 1000 for name, a, b in zip(names, after, before, strict=True)},
        acks=acks,
    )


def describe(mode: str) -> str:
    return {
        "awaited": "queue_task awaited one after another",
        "gathered": "queue_task one by one",
    }.get(mode, "queue_tasks")


async def main(tasks: int, concurrency: int, mode: str, rounds: int, agent: str) -> None:
    env = await start_in_memory()
    print(
        f"{tasks} rollouts, {agent} agent, client concurrency {concurrency}, {describe(mode)}; "
        f"{load()}",
        flush=True,
    )
    try:
        if mode != "awaited":
            figures = await ours(env, tasks, concurrency, mode, agent)
            print(f"wall: {figures.wall:.2f} s; {load()}")
            print(f"CPU per rollout: {figures.cpu_line()}")
            print(f"rollouts/s: {figures.rate:.0f}")
            return
        mine: list[Figures] = []
        other: list[Figures] = []
        for n in range(rounds):
            mine.append(await ours(env, tasks, concurrency, mode, agent))
            print(
                f"round {n + 1} Training Camp: {mine[-1].rate:.0f} rollouts/s "
                f"(wall {mine[-1].wall:.2f} s; CPU per rollout: {mine[-1].cpu_line()}; "
                f"queue_task {mine[-1].ack_line()}; {load()})",
                flush=True,
            )
            other.append(await theirs(tasks, concurrency, agent))
            print(
                f"round {n + 1} Agent Lightning 0.3: {other[-1].rate:.0f} rollouts/s "
                f"(wall {other[-1].wall:.2f} s; CPU per rollout: {other[-1].cpu_line()}; "
                f"enqueue_rollout {other[-1].ack_line()}; {load()})",
                flush=True,
            )
    finally:
        await env.shutdown()
    ours_rate = statistics.median(f.rate for f in mine)
    theirs_rate = statistics.median(f.rate for f in other)
    print(f"Agent Lightning 0.3 rollouts/s: {', '.join(f'{f.rate:.0f}' for f in other)}")
    print(f"Training Camp rollouts/s: {', '.join(f'{f.rate:.0f}' for f in mine)}")
    print(f"ratio (medians): {ours_rate / theirs_rate:.2f}")
    print(f"rollouts/s: {ours_rate:.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--one-by-one", action="store_true")
    parser.add_argument(
        "--awaited",
        action="store_true",
        help="one by one, each awaited before the next; beside Agent Lightning 0.3",
    )
    parser.add_argument("--rounds", type=int, default=2, help="--awaited: alternations")
    parser.add_argument(
        "--agent",
        choices=sorted(AGENTS),
        default="trivial",
        help="the client's agent: trivial (no model call) or examples/lightning_topics.py's",
    )
    parser.add_argument("--client", help=argparse.SUPPRESS)  # the client process: an address
    parser.add_argument("--queue", help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument("--al-client", help=argparse.SUPPRESS)  # Agent Lightning's client
    parser.add_argument("--al-server", action="store_true", help=argparse.SUPPRESS)  # its side
    args = parser.parse_args()
    if args.client:
        asyncio.run(
            client_main(args.client, args.queue, args.concurrency, args.database_url, args.agent)
        )
    elif args.al_client:
        asyncio.run(al_client_main(args.al_client, args.concurrency, args.agent))
    elif args.al_server:
        asyncio.run(al_server_main(args.tasks, args.concurrency, args.agent))
    else:
        mode = "awaited" if args.awaited else "gathered" if args.one_by_one else ""
        asyncio.run(main(args.tasks, args.concurrency, mode, args.rounds, args.agent))
