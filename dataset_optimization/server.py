"""Server SDK, for optimization algorithms written as scripts (the Agent Lightning server API):

    server = AgentLightningServer(client, store, "capitals")
    await server.start()
    for iteration in range(max_iterations):
        await server.update_resources(prompt_template=PromptTemplate(template=prompt))
        rollout_ids = [await server.queue_task(sample) for sample in dataset]
        completed = await server.wait_for_rollouts(rollout_ids)
        prompt = optimize(prompt, analyze(completed))

Tasks are durable Temporal workflows; clients anywhere take them from the rollouts task queue.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy

from dataset_optimization.client import DEFAULT_ROLLOUT_QUEUE
from domain.lightning import (
    MAX_TASK_BYTES,
    DispatcherInput,
    Resource,
    RolloutBatch,
    RolloutTask,
    ServerInput,
    batches_of,
)
from domain.payload_size import json_size
from domain.rollout_report import RolloutReport
from domain.settings import DEFAULT_TASK_QUEUE
from store import Store
from workflows.lightning import (
    LightningServerWorkflow,
    RolloutBatchWorkflow,
    RolloutDispatcherWorkflow,
)

DISPATCHED_POLL_SECONDS = 0.05


class AgentLightningServer:
    def __init__(
        self,
        client: Client,
        store: Store,
        server_id: str,
        task_queue: str = DEFAULT_TASK_QUEUE,
        client_task_queue: str = DEFAULT_ROLLOUT_QUEUE,
        max_attempts: int = 3,
        linger_ms: int = 5,
        tasks_per_activity: int = 8,
    ) -> None:
        self.client, self.store, self.server_id = client, store, server_id
        self.task_queue, self.client_task_queue = task_queue, client_task_queue
        self.max_attempts = max_attempts
        self.workflow_id = f"lightning-{server_id}"
        self._version: int | None = None
        self._handle: WorkflowHandle[Any, Any] | None = None
        self._iteration = 0
        self._batches: dict[str, str] = {}  # rollout id -> the batch workflow that runs it
        self._dispatched: set[str] = set()  # queued one at a time, through the dispatcher
        self.dispatcher_id = f"dispatch-{server_id}"
        self.linger_ms = linger_ms
        self.tasks_per_activity = tasks_per_activity

    async def start(self) -> None:
        self._handle = await self.client.start_workflow(
            LightningServerWorkflow.run,
            ServerInput(server_id=self.server_id),
            id=self.workflow_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )

    async def stop(self) -> None:
        if self._handle is not None:
            await self._handle.signal(LightningServerWorkflow.stop)
        if self._dispatched:  # tasks still waiting leave first; then the dispatcher ends
            await self.client.get_workflow_handle(self.dispatcher_id).signal("stop")

    async def update_resources(self, **resources: Resource) -> int:
        """Publish a new version of the named resources; tasks queued from now on use it."""
        if self._handle is None:
            raise RuntimeError("call start() first")
        self._version = await self._handle.execute_update(
            LightningServerWorkflow.update_resources, resources
        )
        self._iteration += 1
        return self._version

    async def queue_task(self, sample: dict[str, Any]) -> str:
        """Queue one sample: a signal to the server's dispatcher, which sends what arrives
        within a few milliseconds to clients as one batch (durable once this returns).
        A task that could never fit a batch is refused here (ValueError with the reason)."""
        if self._version is None:
            raise RuntimeError("publish resources with update_resources() before queueing tasks")
        task = self._task(sample)
        if (size := json_size(task)) > MAX_TASK_BYTES:
            raise ValueError(
                f"task is {size:,} bytes; a task may be at most {MAX_TASK_BYTES:,} "
                "(its sample, its ids): it could never leave in a batch"
            )
        await self.client.start_workflow(
            RolloutDispatcherWorkflow.run,
            DispatcherInput(
                server_id=self.server_id,
                linger_ms=self.linger_ms,
                tasks_per_activity=self.tasks_per_activity,
            ),
            id=self.dispatcher_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal="queue",
            start_signal_args=[[task]],
        )
        self._dispatched.add(task.rollout_id)
        return task.rollout_id

    async def queue_tasks(
        self, samples: list[dict[str, Any]], batch_size: int = 250, tasks_per_activity: int = 8
    ) -> list[str]:
        """Queue many samples: one workflow per ``batch_size`` of them (or fewer, so that a
        batch stays within MAX_BATCH_BYTES), clients sent ``tasks_per_activity`` at a time;
        each task's attempts are still its own."""
        if self._version is None:
            raise RuntimeError("publish resources with update_resources() before queueing tasks")
        ids = []
        for tasks in batches_of([self._task(sample) for sample in samples], batch_size):
            batch_id = f"{self.server_id}:batch-{uuid.uuid4().hex[:12]}"
            handle = await self.client.start_workflow(
                RolloutBatchWorkflow.run,
                RolloutBatch(batch_id=batch_id, tasks=tasks, tasks_per_activity=tasks_per_activity),
                id=f"tasks-{batch_id.replace(':', '-')}",
                task_queue=self.task_queue,
            )
            for task in tasks:
                self._batches[task.rollout_id] = handle.id
            ids += [task.rollout_id for task in tasks]
        return ids

    def _task(self, sample: dict[str, Any]) -> RolloutTask:
        assert self._version is not None
        return RolloutTask(
            rollout_id=f"{self.server_id}:{uuid.uuid4().hex[:12]}",
            server_id=self.server_id,
            iteration=self._iteration,
            sample=sample,
            resources_workflow_id=self.workflow_id,
            resources_version=self._version,
            client_task_queue=self.client_task_queue,
            max_attempts=self.max_attempts,
        )

    async def get_completed_rollouts(self, rollout_ids: list[str]) -> list[RolloutReport]:
        """The reports of those that are done, from the store (possibly fewer than asked)."""
        return await asyncio.to_thread(self.store.queries.lightning_reports, rollout_ids)

    async def wait_for_rollouts(
        self, rollout_ids: list[str], timeout: float | None = None
    ) -> list[RolloutReport]:
        """Wait until every task has completed or failed; the completed ones' reports."""

        async def finished(workflow_id: str) -> None:
            await self.client.get_workflow_handle(workflow_id).result()

        async def dispatched(ids: list[str]) -> None:
            # their batch is the dispatcher's to name: the store says when each is done
            waiting = set(ids)
            while waiting:
                waiting -= await asyncio.to_thread(
                    self.store.queries.finished_rollouts, list(waiting)
                )
                if waiting:
                    await asyncio.sleep(DISPATCHED_POLL_SECONDS)

        through_dispatcher = [r for r in rollout_ids if r in self._dispatched]
        # a task queued by this server is in a batch; otherwise it has a workflow of its own
        workflows = {
            self._batches.get(r, f"task-{r.replace(':', '-')}")
            for r in rollout_ids
            if r not in self._dispatched
        }
        await asyncio.wait_for(
            asyncio.gather(
                *(finished(w) for w in sorted(workflows)), dispatched(through_dispatcher)
            ),
            timeout,
        )
        return await self.get_completed_rollouts(rollout_ids)
