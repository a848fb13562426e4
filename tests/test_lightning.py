"""Agent Lightning on Temporal: clients on other processes take dataset tasks, fetch resources
once per version, report rollouts; the optimization raises the reward; the server SDK runs the
seed's pseudo-code."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections import Counter, defaultdict
from pathlib import Path

from temporalio.client import Client

from dataset_optimization.client import AgentLightningClient, Resources
from dataset_optimization.server import AgentLightningServer
from domain.lightning import LLM, PromptTemplate
from domain.rollout_report import RolloutReport
from examples.lightning_topics import DATASET, optimization_input
from store.tables import RolloutRow
from workflows.lightning import OptimizationWorkflow

ROOT = Path(__file__).parent.parent


async def start_clients(
    address: str, queue: str, n: int, database_url: str
) -> list[asyncio.subprocess.Process]:
    procs = []
    for i in range(n):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.lightning_client_process",
            address,
            queue,
            f"proc-{i}",
            database_url,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.strip() == b"ready"
        procs.append(proc)
    return procs


async def test_two_client_processes_optimize_a_50_task_dataset(
    client, store, settings, run_worker, temporal_address
):
    queue = f"rollouts-{uuid.uuid4().hex[:8]}"
    run_id = f"topics-{uuid.uuid4().hex[:8]}"
    procs = await start_clients(temporal_address, queue, 2, settings.database_url)
    try:
        async with run_worker():
            inp = optimization_input(run_id, iterations=3, client_task_queue=queue)
            inp.max_parallel = 25
            result = await client.execute_workflow(
                OptimizationWorkflow.run, inp, id=f"opt-{run_id}", task_queue=settings.task_queue
            )
    finally:
        for proc in procs:
            proc.terminate()
            await proc.wait()
    curve = [r.mean_reward for r in result.curve]
    print(f"mean reward by iteration: {curve}")
    assert curve[0] < 0.5 and curve[-1] > curve[0]
    assert result.best_mean_reward == max(curve)
    best = store.queries.resource_set(run_id, result.best_version)
    assert best.resources["prompt_template"].template == result.best_template
    assert "{topic}" in result.best_template

    rows = store.queries._all(
        __import__("sqlmodel").select(RolloutRow).where(RolloutRow.session_id == run_id)
    )
    per_iteration = Counter(r.cycle for r in rows if not r.id.endswith("-again"))
    assert per_iteration == {i + 1: len(DATASET) for i in range(len(result.curve))}
    assert all(r.status == "completed" and r.final_reward is not None for r in rows)
    assert len({r.id for r in rows}) == len(rows)  # each task exactly once per iteration
    assert {r.client_id for r in rows} == {"proc-0", "proc-1"}  # both clients took work
    for row in rows[:5]:
        attempts = store.queries.attempts(row.id)
        assert [a.status for a in attempts] == ["succeeded"]
        spans = store.queries.spans(attempts[0].id)
        assert [s.type for s in spans] == ["llm_call"] and spans[0].prompt_tokens

    reports = store.queries.lightning_reports([r.id for r in rows])
    assert all(r.triplets and r.triplets[0].response for r in reports)
    assert all(r.trace_data["resourceSpans"] for r in reports)
    versions_seen: dict[str, set[int]] = defaultdict(set)
    fetches: dict[str, float] = defaultdict(float)
    hits: dict[str, float] = defaultdict(float)
    for row, report in zip(
        sorted(rows, key=lambda r: r.id),
        store.queries.lightning_reports(sorted(r.id for r in rows)),
        strict=True,
    ):
        versions_seen[row.client_id].add(row.resources_version)
        fetches[row.client_id] = max(fetches[row.client_id], report.metrics["resource_fetches"])
        hits[row.client_id] = max(hits[row.client_id], report.metrics["resource_cache_hits"])
    for client_id, seen in versions_seen.items():
        assert fetches[client_id] == len(seen)  # one fetch per version, then the cache
        assert hits[client_id] > 0


async def test_the_seed_pseudo_code_with_the_server_sdk(client, store, settings, run_worker):
    queue = f"rollouts-{uuid.uuid4().hex[:8]}"
    calls: Counter[str] = Counter()

    async def flaky_agent(task: dict, resources: Resources) -> float:
        calls[task["country"]] += 1
        if task["country"] == "Peru" and calls["Peru"] == 1:
            raise RuntimeError("the model endpoint dropped the connection")
        if task["country"] == "Atlantis":
            raise ValueError("no such country")
        answer = await resources.llm.complete(render_prompt(resources, task))
        return 1.0 if task["country"].lower() in answer.lower() else 0.0

    def render_prompt(resources: Resources, task: dict) -> str:
        return resources.template().template.format(**task)

    own = Client(**client.config())  # a client machine has its own connection
    lightning = AgentLightningClient(own, "local", task_queue=queue, settings=settings)
    async with run_worker(), lightning.worker(flaky_agent):
        server = AgentLightningServer(
            client,
            store,
            f"capitals-{uuid.uuid4().hex[:6]}",
            task_queue=settings.task_queue,
            client_task_queue=queue,
            linger_ms=1000,  # a busy machine still gathers the four awaited tasks together
        )
        await server.start()
        prompt_to_optimize = "What is the capital of {country}?"
        dataset = [{"country": c} for c in ("France", "Peru", "Japan", "Atlantis")]
        for iteration in range(2):
            await server.update_resources(
                prompt_template=PromptTemplate(template=prompt_to_optimize, engine="f-string"),
                llm=LLM(model="offline-capitals", sampling_params={"max_tokens": 200}),
            )
            if iteration == 0:  # one at a time, as the pseudo-code says
                rollout_ids = [await server.queue_task(data) for data in dataset]
            else:  # all at once: one workflow, two tasks per client activity
                rollout_ids = await server.queue_tasks(dataset, tasks_per_activity=2)
            completed_rollouts = await server.wait_for_rollouts(rollout_ids, timeout=120)
            assert len(completed_rollouts) == 3  # Atlantis failed every attempt
            assert all(
                isinstance(r, RolloutReport) and r.final_reward == 1.0 for r in completed_rollouts
            )
            prompt_to_optimize = "Name the capital of {country} in one line."
        await server.stop()
    rollouts = store.queries._all(
        __import__("sqlmodel").select(RolloutRow).where(RolloutRow.session_id == server.server_id)
    )
    by_status = Counter(r.status for r in rollouts)
    assert by_status == {"completed": 6, "failed": 2}
    peru = next(
        r
        for r in rollouts
        if r.cycle == 1
        and r.input_hash
        and store.queries.payload(r.input_hash) == {"country": "Peru"}
    )
    assert [a.status for a in store.queries.attempts(peru.id)] == ["failed", "succeeded"]
    assert "dropped the connection" in store.queries.attempts(peru.id)[0].error
    for failed in [r for r in rollouts if r.status == "failed"]:
        assert [a.status for a in store.queries.attempts(failed.id)] == ["failed"] * 3
        assert "no such country" in failed.error
    # Japan shared a client activity with Atlantis in the batch: one attempt, not three
    japan = [r for r in rollouts if store.queries.payload(r.input_hash) == {"country": "Japan"}]
    assert [len(store.queries.attempts(r.id)) for r in japan] == [1, 1]
    assert lightning.cache.fetches == 2  # two versions, each fetched once
    # tasks queued one at a time went to clients through the dispatcher, in batches: fewer
    # workflows than tasks, each task still recorded on its own (above)
    query = f'WorkflowId STARTS_WITH "tasks-{server.server_id}-d"'
    started: list[str] = []
    for _ in range(100):  # visibility catches up
        started = [w.workflow_type async for w in client.list_workflows(query)]
        if started:
            break
        await asyncio.sleep(0.1)
    assert set(started) == {"RolloutBatchWorkflow"} and len(started) < len(dataset)
    assert [store.queries.resource_set(server.server_id, v).version for v in (1, 2)] == [1, 2]
