"""Server SDK, for optimization algorithms written as scripts (the seed's pseudo-code):

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
from domain.lightning import Resource, RolloutOutcome, RolloutTask, ServerInput
from domain.rollout_report import RolloutReport
from domain.settings import DEFAULT_TASK_QUEUE
from store import Store
from workflows.lightning import LightningServerWorkflow, RolloutTaskWorkflow


class AgentLightningServer:
    def __init__(
        self,
        client: Client,
        store: Store,
        server_id: str,
        task_queue: str = DEFAULT_TASK_QUEUE,
        client_task_queue: str = DEFAULT_ROLLOUT_QUEUE,
        max_attempts: int = 3,
    ) -> None:
        self.client, self.store, self.server_id = client, store, server_id
        self.task_queue, self.client_task_queue = task_queue, client_task_queue
        self.max_attempts = max_attempts
        self.workflow_id = f"lightning-{server_id}"
        self._version: int | None = None
        self._handle: WorkflowHandle[Any, Any] | None = None
        self._iteration = 0

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
        if self._version is None:
            raise RuntimeError("publish resources with update_resources() before queueing tasks")
        rollout_id = f"{self.server_id}:{uuid.uuid4().hex[:12]}"
        await self.client.start_workflow(
            RolloutTaskWorkflow.run,
            RolloutTask(
                rollout_id=rollout_id,
                server_id=self.server_id,
                iteration=self._iteration,
                sample=sample,
                resources_workflow_id=self.workflow_id,
                resources_version=self._version,
                client_task_queue=self.client_task_queue,
                max_attempts=self.max_attempts,
            ),
            id=f"task-{rollout_id.replace(':', '-')}",
            task_queue=self.task_queue,
        )
        return rollout_id

    async def get_completed_rollouts(self, rollout_ids: list[str]) -> list[RolloutReport]:
        """The reports of those that are done, from the store (possibly fewer than asked)."""
        return await asyncio.to_thread(self.store.queries.lightning_reports, rollout_ids)

    async def wait_for_rollouts(
        self, rollout_ids: list[str], timeout: float | None = None
    ) -> list[RolloutReport]:
        """Wait until every task has completed or failed; the completed ones' reports."""

        async def outcome(rollout_id: str) -> RolloutOutcome:
            handle = self.client.get_workflow_handle(
                f"task-{rollout_id.replace(':', '-')}", result_type=RolloutOutcome
            )
            return await handle.result()

        await asyncio.wait_for(asyncio.gather(*(outcome(r) for r in rollout_ids)), timeout)
        return await self.get_completed_rollouts(rollout_ids)
