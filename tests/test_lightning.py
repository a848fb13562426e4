"""Agent Lightning on Temporal: clients on other processes take dataset tasks, fetch resources
once per version, report rollouts; the optimization raises the reward; the server SDK runs the
seed's pseudo-code."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import psutil
import pytest
from sqlmodel import select
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from dataset_optimization import server as server_sdk
from dataset_optimization.client import AgentLightningClient, Resources
from dataset_optimization.server import AgentLightningServer
from domain.lightning import LLM, PromptTemplate, QueueFull, RolloutTask
from domain.rollout_report import RolloutReport
from examples.lightning_topics import DATASET, optimization_input
from store.tables import RolloutRow
from tests import forked
from workflows.lightning import (
    LightningServerWorkflow,
    OptimizationWorkflow,
    RolloutBatchWorkflow,
    RolloutDispatcherWorkflow,
)

ROOT = Path(__file__).parent.parent


async def start_clients(
    address: str, queue: str, n: int, database_url: str
) -> list[forked.AsyncForked]:
    """``n`` client processes, forked from one that imported the app (tests/forked.py)."""
    procs = []
    for i in range(n):
        proc = await forked.spawn(
            ["-m", "tests.lightning_client_process", address, queue, f"proc-{i}", database_url],
            env=dict(os.environ),
            stdout=True,
        )
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.strip() == b"ready"
        procs.append(proc)
    return procs


async def replay_in_and_out_of_the_sandbox(history: WorkflowHistory) -> None:
    """Replays a Lightning workflow's history as workers run it (outside the sandbox), then
    inside Temporal's sandbox, which refuses a clock, environment or file read."""
    for runner in (UnsandboxedWorkflowRunner(), SandboxedWorkflowRunner()):
        replayer = Replayer(
            workflows=[
                LightningServerWorkflow,
                RolloutBatchWorkflow,
                RolloutDispatcherWorkflow,
                OptimizationWorkflow,
            ],
            data_converter=pydantic_data_converter,
            unsandboxed_workflow_runner=runner,
        )
        result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None


async def started_server(
    client: Client, store, settings, client_queue: str, prefix: str, **options: int
) -> AgentLightningServer:
    """A server SDK on the test's task queue, started, with a prompt template published."""
    server = AgentLightningServer(
        client,
        store,
        f"{prefix}-{uuid.uuid4().hex[:6]}",
        task_queue=settings.task_queue,
        client_task_queue=client_queue,
        **options,
    )
    await server.start()
    await server.update_resources(prompt_template=PromptTemplate(template="{n}"))
    return server


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
    optimization = client.get_workflow_handle(f"opt-{run_id}")
    await replay_in_and_out_of_the_sandbox(await optimization.fetch_history())


async def test_the_seed_pseudo_code_with_the_server_sdk(
    client, store, settings, run_worker, monkeypatch
):
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
    # a busy machine still gathers the four awaited tasks together (with linger_ms below)
    monkeypatch.setattr(server_sdk, "PAUSE_SECONDS", 1.0)
    async with run_worker(), lightning.worker(flaky_agent):
        server = AgentLightningServer(
            client,
            store,
            f"capitals-{uuid.uuid4().hex[:6]}",
            task_queue=settings.task_queue,
            client_task_queue=queue,
            linger_ms=1000,
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
    # the four samples ran twice (and some again after a failure): each read from the store once
    assert lightning.tasks.reads == len(dataset)
    # tasks queued one at a time went to clients in batches the SDK started: fewer workflows
    # than tasks, each task still recorded on its own (above)
    query = f'WorkflowId STARTS_WITH "tasks-{server.server_id}-q"'
    started: list[str] = []
    for _ in range(100):  # visibility catches up
        started = [w.workflow_type async for w in client.list_workflows(query)]
        if started:
            break
        await asyncio.sleep(0.1)
    assert set(started) == {"RolloutBatchWorkflow"} and len(started) < len(dataset)
    assert [store.queries.resource_set(server.server_id, v).version for v in (1, 2)] == [1, 2]


async def test_a_worker_killed_between_a_task_s_write_and_its_dispatch_loses_nothing(
    client, store, settings, run_worker, temporal_address
):
    """The server SDK's process (worker and script) dies right after `queue_task` stored a
    task, before its batch was started. Restarted, the server finds the stored task (the
    dispatcher takes it): it runs once, and its rollout is stored once."""
    server_id = f"crash-{uuid.uuid4().hex[:6]}"
    queue = f"rollouts-{uuid.uuid4().hex[:8]}"
    doomed = await forked.spawn(
        [
            "-m",
            "tests.lightning_queue_process",
            temporal_address,
            settings.database_url,
            settings.task_queue,
            queue,
            server_id,
        ],
        env=dict(os.environ),
        stdout=True,
        stderr=True,
    )
    line = await asyncio.wait_for(doomed.stdout.readline(), 120)
    assert await doomed.wait() == -signal.SIGKILL
    first, second = line.decode().split()
    # the second task is in the store, acknowledged, and no batch has it
    assert store.queries.queued_tasks([second])[second].batch_id is None
    assert store.queries.queued_tasks([first])[first].batch_id is not None

    ran: Counter[int] = Counter()

    async def agent(task: dict, resources: Resources) -> float:
        ran[task["n"]] += 1
        return 1.0

    lightning = AgentLightningClient(
        Client(**client.config()), "after", task_queue=queue, settings=settings
    )
    async with run_worker(), lightning.worker(agent):  # the worker, restarted
        server = AgentLightningServer(
            client, store, server_id, task_queue=settings.task_queue, client_task_queue=queue
        )
        await server.start()
        reports = await server.wait_for_rollouts([first, second], timeout=120)
        await asyncio.sleep(0.5)  # anything run twice would have shown by now
        await server.stop()
    assert ran == {1: 1, 2: 1}
    assert [r.rollout_id for r in reports] == [first, second]
    for rollout_id in (first, second):
        assert [a.status for a in store.queries.attempts(rollout_id)] == ["succeeded"]
    reported = [
        e.payload["rolloutId"] for e in store.queries.events(server_id, ["rollout.reported"])
    ]
    assert sorted(reported) == sorted([first, second])  # each stored once


async def test_a_script_killed_right_after_queue_task_returns_leaves_each_task_to_run_once(
    client, store, settings, run_worker, temporal_address
):
    """A script dies (SIGKILL) right after a `queue_task` returns, its worker elsewhere: five
    tasks out in a batch, five stored and acknowledged but never sent. Every acknowledged task
    is in the store; the server restarted sends the rest, and each task runs once, its rollout
    reported and stored once."""
    server_id = f"killed-{uuid.uuid4().hex[:6]}"
    queue = f"rollouts-{uuid.uuid4().hex[:8]}"
    ran: Counter[int] = Counter()

    async def agent(task: dict, resources: Resources) -> float:
        ran[task["n"]] += 1
        return 1.0

    lightning = AgentLightningClient(
        Client(**client.config()), "survivor", task_queue=queue, settings=settings
    )
    async with run_worker(), lightning.worker(agent):
        script = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.lightning_awaited_process",
            temporal_address,
            settings.database_url,
            settings.task_queue,
            queue,
            server_id,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(script.communicate(), 120)
        assert script.returncode == -signal.SIGKILL
        ids = out.decode().split()
        assert len(ids) == 10
        # acknowledged means stored: each task, its sample and its task.queued event
        stored = store.queries.queued_tasks(ids)
        assert sorted(stored) == sorted(ids)
        assert [store.queries.payload(stored[r].sample_hash) for r in ids] == [
            {"n": n} for n in range(10)
        ]
        queued = store.queries.events(server_id, ["task.queued"])
        assert sorted(e.payload["rolloutId"] for e in queued) == sorted(ids)
        assert all(stored[r].batch_id is None for r in ids[5:])  # never sent

        server = AgentLightningServer(
            client, store, server_id, task_queue=settings.task_queue, client_task_queue=queue
        )
        await server.start()  # the dispatcher takes what waits untaken
        reports = await server.wait_for_rollouts(ids, timeout=120)
        await asyncio.sleep(0.5)  # anything run twice would have shown by now
        await server.stop()
    assert ran == {n: 1 for n in range(10)}
    assert [r.rollout_id for r in reports] == ids
    for rollout_id in ids:
        assert [a.status for a in store.queries.attempts(rollout_id)] == ["succeeded"]
    reported = [
        e.payload["rolloutId"] for e in store.queries.events(server_id, ["rollout.reported"])
    ]
    assert sorted(reported) == sorted(ids)  # each stored once


async def test_a_thousand_waiting_tasks_cost_the_worker_little_and_the_cap_holds(
    client, store, settings, run_worker
):
    """1,000 tasks of 60 KB (60 MB of samples) queued with no client: the worker's memory
    grows by at most 100 MB, since the samples wait in the store and batches carry ids. At the
    cap, `queue_task` raises QueueFull and `queue_tasks` admits nothing; a client started
    afterwards completes every accepted task, each with its whole sample."""
    cap, size = 1000, 60_000
    warm_queue, queue = (f"rollouts-{uuid.uuid4().hex[:8]}" for _ in range(2))
    seen: Counter[int] = Counter()

    async def agent(task: dict, resources: Resources) -> float:
        seen[task["n"]] += 1
        return 1.0 if len(task["text"]) == size else 0.0

    me = psutil.Process()
    async with run_worker():
        # warm up: the workflows' code loads into the worker, as for any server's first task
        warm = await started_server(client, store, settings, warm_queue, "warm")
        warm_client = AgentLightningClient(
            Client(**client.config()), "warm", task_queue=warm_queue, settings=settings
        )
        async with warm_client.worker(agent):
            ids = [await warm.queue_task({"n": -n, "text": "x" * size}) for n in range(1, 4)]
            await warm.wait_for_rollouts(ids, timeout=60)
            await warm.stop()

        server = await started_server(client, store, settings, queue, "wait", max_waiting=cap)
        server_id = server.server_id
        gc.collect()
        before = me.memory_info().rss
        accepted: list[str] = []
        for start in range(0, cap, 50):  # built as they are queued: the test holds none
            accepted += await asyncio.gather(
                *(
                    server.queue_task({"n": n, "text": chr(97 + n % 26) * size})
                    for n in range(start, start + 50)
                )
            )
        with pytest.raises(QueueFull) as full:
            await server.queue_task({"n": cap, "text": "z" * size})
        assert (full.value.waiting, full.value.cap) == (cap, cap)
        assert await server.queue_tasks([{"n": cap + 1, "text": ""}]) == []
        # every waiting task is out with a batch, its attempt begun: as far as it goes
        # without a client
        for _ in range(600):
            rows = store.queries._all(
                select(RolloutRow.status).where(RolloutRow.session_id == server_id)
            )
            if rows.count("running") == cap and not store.queries.undispatched_tasks(server_id):
                break
            await asyncio.sleep(0.1)
        assert rows.count("running") == cap
        gc.collect()
        grown = (me.memory_info().rss - before) / 2**20
        print(f"worker RSS grew {grown:.0f} MB for {cap} waiting tasks of {size:,} bytes")
        assert grown <= 100

        lightning = AgentLightningClient(
            Client(**client.config()), "late", task_queue=queue, settings=settings
        )
        async with lightning.worker(agent, max_concurrent=16):
            reports = await server.wait_for_rollouts(accepted, timeout=300)
        await server.stop()
    assert len(reports) == cap and all(r.final_reward == 1.0 for r in reports)
    assert seen.keys() >= set(range(cap)) and all(seen[n] == 1 for n in range(cap))
    rows = store.queries._all(select(RolloutRow).where(RolloutRow.session_id == server_id))
    assert len(rows) == cap and {r.status for r in rows} == {"completed"}
    assert store.queries.waiting_tasks(server_id) == 0


async def test_queue_task_is_idempotent_by_key_and_refuses_past_the_cap(
    client, store, settings, run_worker
):
    """A key queued again returns its id and stores nothing, and a key reused for another
    sample is refused. Calls made together share one transaction but answer one by one: with
    a cap of 3 and one task waiting, five at once give two ids and three QueueFull."""
    async with run_worker():
        nobody = f"nobody-{uuid.uuid4().hex[:6]}"
        server = await started_server(client, store, settings, nobody, "keys", max_waiting=3)
        server_id = server.server_id
        first = await server.queue_task({"n": 0}, key="sample-0")
        assert await server.queue_task({"n": 0}, key="sample-0") == first  # a retried call
        with pytest.raises(ValueError, match="another sample"):
            await server.queue_task({"n": 1}, key="sample-0")
        answers = await asyncio.gather(
            *(server.queue_task({"n": n}, key=f"sample-{n}") for n in range(1, 6)),
            return_exceptions=True,
        )
        assert [type(a).__name__ for a in answers] == ["str"] * 2 + ["QueueFull"] * 3
        assert "3 tasks already wait" in str(answers[2])
        # the same keys again (a retry of the whole call): the accepted ones are accepted
        assert await server.queue_tasks(
            [{"n": n} for n in range(3)], keys=[f"sample-{n}" for n in range(3)]
        ) == [first, answers[0], answers[1]]
        await server.stop()
    rows = store.queries._all(select(RolloutRow).where(RolloutRow.session_id == server_id))
    assert len(rows) == 3
    assert len(store.queries.events(server_id, ["task.queued"])) == 3


async def test_a_client_reading_another_database_says_so(
    client, store, settings, run_worker, tmp_path
):
    """A client pointed at a database other than the server's cannot find its tasks: each
    attempt fails with the reason, recorded in the store, and the rollout fails for good."""
    queue = f"rollouts-{uuid.uuid4().hex[:8]}"
    elsewhere = settings.model_copy(update={"database_url": f"sqlite:///{tmp_path}/other.db"})

    async def agent(task: dict, resources: Resources) -> float:
        return 1.0

    lost = AgentLightningClient(
        Client(**client.config()), "lost", task_queue=queue, settings=elsewhere
    )
    async with run_worker(), lost.worker(agent):
        server = await started_server(client, store, settings, queue, "lost", max_attempts=1)
        rollout_id = await server.queue_task({"n": 1})
        assert await server.wait_for_rollouts([rollout_id], timeout=60) == []
        await server.stop()
    (attempt,) = store.queries.attempts(rollout_id)
    assert attempt.status == "failed"
    assert "not in this client's store" in attempt.error
    assert "TRAINING_CAMP_DATABASE_URL" in attempt.error


async def test_a_client_killed_while_holding_a_task_leaves_it_to_another_client_once(
    client, store, settings, run_worker, temporal_address
):
    """A client process dies (SIGKILL) while its agent runs a task. Its heartbeats stop, the
    activity's heartbeat timeout (30 s by default; 5 s here, not to wait it out) ends that
    attempt, and another client runs the task: once, its rollout stored once."""
    queue = f"rollouts-{uuid.uuid4().hex[:8]}"
    holder = await forked.spawn(
        ["-m", "tests.lightning_holding_client", temporal_address, queue, settings.database_url],
        env=dict(os.environ),
        stdout=True,
    )
    ran: Counter[int] = Counter()

    async def agent(task: dict, resources: Resources) -> float:
        ran[task["n"]] += 1
        return 1.0

    try:
        assert await asyncio.wait_for(holder.stdout.readline(), 60) == b"ready\n"
        async with run_worker():
            server = await started_server(
                client, store, settings, queue, "held", heartbeat_timeout=5
            )
            rollout_id = await server.queue_task({"n": 7})
            line = await asyncio.wait_for(holder.stdout.readline(), 60)
            assert line == b"holding 7\n"
            holder.kill()
            await holder.wait()
            # another client, started after the holder died: the task reaches it
            lightning = AgentLightningClient(
                Client(**client.config()), "survivor", task_queue=queue, settings=settings
            )
            async with lightning.worker(agent):
                (report,) = await server.wait_for_rollouts([rollout_id], timeout=60)
                await asyncio.sleep(0.5)  # anything run twice would have shown by now
            await server.stop()
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()
    assert report.rollout_id == rollout_id and report.final_reward == 1.0
    assert ran == {7: 1}
    attempts = store.queries.attempts(rollout_id)
    assert [a.status for a in attempts] == ["failed", "succeeded"]
    assert "heartbeat" in (attempts[0].error or "").lower()
    reported = [
        e.payload["rolloutId"] for e in store.queries.events(server.server_id, ["rollout.reported"])
    ]
    assert reported == [rollout_id]  # stored once


async def test_the_lightning_workflows_replay_inside_the_sandbox(
    client, store, settings, run_worker
):
    """Workers run the Lightning workflows outside Temporal's sandbox. Their histories — the
    server's, batches the SDK started (one with a task tried twice), the dispatcher's, taking a
    task a dead process stored and never sent — replay as workers run them and inside the
    sandbox."""
    queue = f"rollouts-{uuid.uuid4().hex[:8]}"
    ran: Counter[int] = Counter()

    async def agent(task: dict, resources: Resources) -> float:
        ran[task["n"]] += 1
        if task["n"] == 1 and ran[1] == 1:
            raise RuntimeError("the model endpoint dropped the connection")
        return 1.0

    lightning = AgentLightningClient(
        Client(**client.config()), "replay", task_queue=queue, settings=settings
    )
    async with run_worker(), lightning.worker(agent):
        server = await started_server(client, store, settings, queue, "replay")
        ids = [await server.queue_task({"n": n}) for n in range(3)]
        ids += await server.queue_tasks([{"n": n} for n in range(3, 6)])
        orphan = RolloutTask(
            rollout_id=f"{server.server_id}:orphan",
            server_id=server.server_id,
            iteration=1,
            sample={"n": 6},
            resources_workflow_id=server.workflow_id,
            resources_version=1,
            client_task_queue=queue,
            max_attempts=3,
        )
        store.recorder.queue_tasks([orphan], max_waiting=100)
        await server.start()  # finds the orphan: the dispatcher takes it
        reports = await server.wait_for_rollouts([*ids, orphan.rollout_id], timeout=120)
        await server.stop()
        await client.get_workflow_handle(server.dispatcher_id).result()
    assert len(reports) == 7 and ran == {0: 1, 1: 2, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1}
    query = f'WorkflowId STARTS_WITH "tasks-{server.server_id}-"'
    batches: list[str] = []
    for _ in range(100):  # visibility catches up
        batches = [w.id async for w in client.list_workflows(query)]
        if len(batches) >= 3:
            break
        await asyncio.sleep(0.1)
    kinds = {b.removeprefix(f"tasks-{server.server_id}-")[0] for b in batches}
    assert kinds == {"q", "b", "d"}  # queue_task's, queue_tasks' and the dispatcher's batches
    for workflow_id in [server.workflow_id, server.dispatcher_id, *batches]:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        await replay_in_and_out_of_the_sandbox(history)
