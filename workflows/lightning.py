"""Agent Lightning workflows: resources published by version, dataset tasks (queued together as
a batch workflow, or one at a time through a dispatcher that gathers them into batches; a
workflow per task is kept for callers that want one), and the optimization algorithm that
iterates over a dataset."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.agent_execution import AgentExecutionActivities
    from activities.lightning import LightningActivities
    from domain.lightning import (
        MAX_BATCH_BYTES,
        ClientAssignment,
        ClientBatch,
        ClientBatchReport,
        ClientReport,
        DispatcherInput,
        IterationResult,
        OptimizationInput,
        OptimizationResult,
        ProposeInput,
        PublishInput,
        Resource,
        ResourceSet,
        RolloutBatch,
        RolloutOutcome,
        RolloutTask,
        ServerInput,
        TaskAttemptInput,
        TaskAttemptsInput,
        TaskReportInput,
        TaskReportsInput,
        batches_of,
    )
    from domain.lineage import RolloutFailedInput
    from domain.payload_size import json_size

STORE = {
    "start_to_close_timeout": timedelta(seconds=60),
    "retry_policy": RetryPolicy(maximum_interval=timedelta(seconds=30)),
}
CLIENT_TIMEOUT = timedelta(minutes=10)
TASKS_PER_ACTIVITY = 8  # tasks sent to a client in one activity
# The batch's store steps run as local activities: one transaction each, no task queue between.
LOCAL_STORE = {
    "start_to_close_timeout": timedelta(seconds=60),
    "retry_policy": RetryPolicy(maximum_interval=timedelta(seconds=30)),
}


class ResourcePublisher:
    """Holds every published resource set; clients fetch them with the `resources` query."""

    def _init_resources(self, server_id: str) -> None:
        self._server_id = server_id
        self._sets: dict[int, ResourceSet] = {}

    @workflow.query(name="resources")
    def resources(self, version: int | None = None) -> ResourceSet:
        if not self._sets:
            raise ApplicationError("no resources published yet")
        return self._sets[version if version is not None else max(self._sets)]

    async def _publish(self, resources: dict[str, Resource]) -> int:
        version = max(self._sets, default=0) + 1
        resource_set = ResourceSet(version=version, resources=resources)
        self._sets[version] = resource_set
        await workflow.execute_activity_method(
            LightningActivities.publish_resources,
            PublishInput(server_id=self._server_id, version=version, resource_set=resource_set),
            **STORE,
        )
        return version


@workflow.defn(name="LightningServerWorkflow")
class LightningServerWorkflow(ResourcePublisher):
    """The server for algorithms written as scripts (lightning.server.AgentLightningServer)."""

    @workflow.init
    def __init__(self, inp: ServerInput) -> None:
        self._init_resources(inp.server_id)
        self._stopped = False

    @workflow.run
    async def run(self, inp: ServerInput) -> int:
        await workflow.wait_condition(lambda: self._stopped)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return max(self._sets, default=0)

    @workflow.update(name="update_resources")
    async def update_resources(self, resources: dict[str, Resource]) -> int:
        return await self._publish(resources)

    @update_resources.validator
    def _validate(self, resources: dict[str, Resource]) -> None:
        if not resources:
            raise ValueError("publish at least one resource")

    @workflow.signal(name="stop")
    def stop(self) -> None:
        self._stopped = True


@workflow.defn(name="RolloutTaskWorkflow")
class RolloutTaskWorkflow:
    """One dataset task: pending until a client takes it; each try is a recorded attempt."""

    @workflow.run
    async def run(self, task: RolloutTask) -> RolloutOutcome:
        await workflow.execute_activity_method(
            LightningActivities.record_task_queued, task, **STORE
        )
        error = ""
        for attempt in range(1, task.max_attempts + 1):
            await workflow.execute_activity_method(
                LightningActivities.record_task_attempt_started,
                TaskAttemptInput(task=task, attempt=attempt),
                **STORE,
            )
            try:
                report = await workflow.execute_activity(
                    "execute_rollout",
                    ClientAssignment(task=task, attempt=attempt),
                    task_queue=task.client_task_queue,
                    result_type=ClientReport,
                    start_to_close_timeout=CLIENT_TIMEOUT,
                    # the workflow owns retries, so that every attempt is recorded
                    retry_policy=RetryPolicy(maximum_attempts=1),
                )
            except ActivityError as err:
                error = str(err.cause or err)
                await workflow.execute_activity_method(
                    LightningActivities.record_task_attempt_failed,
                    TaskAttemptInput(task=task, attempt=attempt, error=error),
                    **STORE,
                )
                if attempt < task.max_attempts:
                    await workflow.sleep(timedelta(seconds=min(30, 2 ** (attempt - 1))))
                continue
            await workflow.execute_activity_method(
                LightningActivities.record_task_report,
                TaskReportInput(task=task, attempt=attempt, client_report=report),
                **STORE,
            )
            return RolloutOutcome(
                rollout_id=task.rollout_id,
                status="completed",
                final_reward=report.report.final_reward,
                attempts=attempt,
            )
        failed, outcome = _given_up(task, error)
        await workflow.execute_activity_method(
            AgentExecutionActivities.mark_rollout_failed, failed, **STORE
        )
        return outcome


@workflow.defn(name="RolloutBatchWorkflow")
class RolloutBatchWorkflow:
    """Dataset tasks queued together. They are recorded in one step, sent to clients a few per
    activity (``tasks_per_activity``), and each group's reports recorded in one step as it
    returns; a task that fails is tried again on its own (its attempts recorded one by one),
    the rest of its group done."""

    @workflow.run
    async def run(self, batch: RolloutBatch) -> list[RolloutOutcome]:
        await workflow.execute_local_activity_method(
            LightningActivities.record_tasks_queued, batch, **LOCAL_STORE
        )
        k = batch.tasks_per_activity
        groups = [batch.tasks[i : i + k] for i in range(0, len(batch.tasks), k)]
        done = await asyncio.gather(*(self._group(g) for g in groups))
        return [outcome for group in done for outcome in group]

    async def _group(self, tasks: list[RolloutTask]) -> list[RolloutOutcome]:
        outcomes: dict[str, RolloutOutcome] = {}
        todo, attempt = tasks, 1
        while todo:
            await workflow.execute_local_activity_method(
                LightningActivities.record_task_attempts_started,
                TaskAttemptsInput(
                    attempts=[TaskAttemptInput(task=t, attempt=attempt) for t in todo]
                ),
                **LOCAL_STORE,
            )
            try:
                result = await workflow.execute_activity(
                    "execute_rollouts",
                    ClientBatch(
                        assignments=[ClientAssignment(task=t, attempt=attempt) for t in todo]
                    ),
                    task_queue=todo[0].client_task_queue,
                    result_type=ClientBatchReport,
                    start_to_close_timeout=CLIENT_TIMEOUT,
                    # the workflow owns retries, so that every attempt is recorded
                    retry_policy=RetryPolicy(maximum_attempts=1),
                )
                reports, failures = result.reports, result.errors
            except ActivityError as err:
                reports, failures = [None] * len(todo), [str(err.cause or err)] * len(todo)
            arrived = [
                TaskReportInput(task=t, attempt=attempt, client_report=r)
                for t, r in zip(todo, reports, strict=True)
                if r is not None
            ]
            if arrived:
                await workflow.execute_local_activity_method(
                    LightningActivities.record_task_reports,
                    TaskReportsInput(reports=arrived),
                    **LOCAL_STORE,
                )
            for one in arrived:
                outcomes[one.task.rollout_id] = RolloutOutcome(
                    rollout_id=one.task.rollout_id,
                    status="completed",
                    final_reward=one.client_report.report.final_reward,
                    attempts=attempt,
                )
            failed = [
                TaskAttemptInput(task=t, attempt=attempt, error=e or "no report")
                for t, r, e in zip(todo, reports, failures, strict=True)
                if r is None
            ]
            if failed:
                await workflow.execute_local_activity_method(
                    LightningActivities.record_task_attempts_failed,
                    TaskAttemptsInput(attempts=failed),
                    **LOCAL_STORE,
                )
            todo = [f.task for f in failed if attempt < f.task.max_attempts]
            for f in failed:
                if attempt >= f.task.max_attempts:
                    outcomes[f.task.rollout_id] = await self._give_up(f.task, f.error or "")
            if todo:
                await workflow.sleep(timedelta(seconds=min(30, 2 ** (attempt - 1))))
                attempt += 1
        return [outcomes[t.rollout_id] for t in tasks]

    async def _give_up(self, task: RolloutTask, error: str) -> RolloutOutcome:
        failed, outcome = _given_up(task, error)
        await workflow.execute_local_activity_method(
            AgentExecutionActivities.mark_rollout_failed, failed, **LOCAL_STORE
        )
        return outcome


def _given_up(task: RolloutTask, error: str) -> tuple[RolloutFailedInput, RolloutOutcome]:
    """A task out of attempts: what marks its rollout failed, and its outcome."""
    failed = RolloutFailedInput(
        session_id=task.server_id,
        lineage_id=task.server_id,
        rollout_id=task.rollout_id,
        error=error,
    )
    outcome = RolloutOutcome(
        rollout_id=task.rollout_id,
        status="failed",
        final_reward=None,
        attempts=task.max_attempts,
        error=error,
    )
    return failed, outcome


@workflow.defn(name="OptimizationWorkflow")
class OptimizationWorkflow(ResourcePublisher):
    """Publish resources → queue the dataset (bounded parallelism) → collect rewards → propose a
    better template from the low-reward rollouts → repeat, until the target or the budget."""

    @workflow.init
    def __init__(self, inp: OptimizationInput) -> None:
        self._init_resources(inp.run_id)
        self._curve: list[IterationResult] = []

    @workflow.query(name="progress")
    def progress(self) -> list[IterationResult]:
        return self._curve

    @workflow.run
    async def run(self, inp: OptimizationInput) -> OptimizationResult:
        template, struggling = inp.template, []
        for iteration in range(1, inp.max_iterations + 1):
            version = await self._publish({"prompt_template": template, "llm": inp.llm})
            tasks = [self._task(inp, iteration, version, i, "") for i in range(len(inp.dataset))]
            # curriculum: the samples the agent struggled with are run once more
            repeats = [self._task(inp, iteration, version, i, "-again") for i in struggling]
            outcomes = await self._run_all(inp, [*tasks, *repeats])
            base = outcomes[: len(tasks)]
            rewards = [o.final_reward or 0.0 for o in base]
            result = IterationResult(
                iteration=iteration,
                resources_version=version,
                mean_reward=round(sum(rewards) / len(rewards), 4),
                template=template.template,
                completed=sum(o.status == "completed" for o in outcomes),
                failed=sum(o.status == "failed" for o in outcomes),
                curriculum_repeats=len(repeats),
            )
            self._curve.append(result)
            if result.mean_reward >= inp.target_reward or iteration == inp.max_iterations:
                break
            struggling = (
                [i for i, r in enumerate(rewards) if r < inp.target_reward]
                if inp.curriculum
                else []
            )
            proposal = await workflow.execute_activity_method(
                LightningActivities.propose_template,
                ProposeInput(
                    server_id=inp.run_id,
                    iteration=iteration,
                    template=template,
                    rollout_ids=[t.rollout_id for t in tasks],
                    target_reward=inp.target_reward,
                    trainer=inp.trainer,
                    trainer_model=inp.trainer_model,
                ),
                start_to_close_timeout=timedelta(minutes=5),
                retry_policy=RetryPolicy(maximum_attempts=5),
            )
            result.change = proposal.summary
            template = proposal.template
        best = max(self._curve, key=lambda r: (r.mean_reward, -r.iteration))
        return OptimizationResult(
            run_id=inp.run_id,
            best_version=best.resources_version,
            best_template=best.template,
            best_mean_reward=best.mean_reward,
            curve=self._curve,
        )

    def _task(
        self, inp: OptimizationInput, iteration: int, version: int, index: int, suffix: str
    ) -> RolloutTask:
        return RolloutTask(
            rollout_id=f"{inp.run_id}:it{iteration}:s{index}{suffix}",
            server_id=inp.run_id,
            iteration=iteration,
            sample=inp.dataset[index],
            resources_workflow_id=workflow.info().workflow_id,
            resources_version=version,
            client_task_queue=inp.client_task_queue,
            max_attempts=inp.max_attempts,
        )

    async def _run_all(
        self, inp: OptimizationInput, tasks: list[RolloutTask]
    ) -> list[RolloutOutcome]:
        """Every task, at most ``max_parallel`` at a time, in order: a few tasks to a child
        batch workflow (one client activity for the few), each task's attempts still its own.
        A workflow per task cost the Temporal server and the worker more than the rollout."""
        per_batch = max(1, min(TASKS_PER_ACTIVITY, inp.max_parallel))
        gate = asyncio.Semaphore(max(1, inp.max_parallel // per_batch))
        chunks = batches_of(tasks, per_batch)
        run = workflow.info().workflow_id

        async def batch(number: int, chunk: list[RolloutTask]) -> list[RolloutOutcome]:
            async with gate:
                batch_id = f"{inp.run_id}:{chunk[0].rollout_id.split(':')[1]}:b{number}"
                return await workflow.execute_child_workflow(
                    RolloutBatchWorkflow.run,
                    RolloutBatch(batch_id=batch_id, tasks=chunk, tasks_per_activity=per_batch),
                    id=f"{run}-{batch_id.split(':', 1)[1]}".replace(":", "-"),
                )

        done = await asyncio.gather(*(batch(n, c) for n, c in enumerate(chunks)))
        return [outcome for outcomes in done for outcome in outcomes]


@workflow.defn(name="RolloutDispatcherWorkflow")
class RolloutDispatcherWorkflow:
    """Where tasks queued one at a time gather: each ``queue`` signal adds tasks, and what
    arrived within ``linger`` (or a full batch) leaves as one child RolloutBatchWorkflow — so a
    task queued alone costs a signal, not a workflow of its own, and is durable as soon as the
    signal is. A batch is full at ``batch_size`` tasks or MAX_BATCH_BYTES, whichever comes
    first (its tasks cross Temporal together). Continues as new after a number of batches,
    carrying at most MAX_BATCH_BYTES of what is still waiting (the rest leaves first)."""

    @workflow.init
    def __init__(self, inp: DispatcherInput) -> None:
        self._pending: list[RolloutTask] = list(inp.pending)
        self._pending_bytes = sum(json_size(t) for t in self._pending)
        self._stopped = False

    @workflow.signal(name="queue")
    def queue(self, tasks: list[RolloutTask]) -> None:
        self._pending.extend(tasks)
        self._pending_bytes += sum(json_size(t) for t in tasks)

    @workflow.signal(name="stop")
    def stop(self) -> None:
        self._stopped = True

    @workflow.run
    async def run(self, inp: DispatcherInput) -> None:
        sent = 0
        while True:
            await workflow.wait_condition(lambda: bool(self._pending) or self._stopped)
            if not self._pending and self._stopped:
                return
            # gather what arrives within the linger, unless a batch fills first
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._full(inp) or self._stopped,
                    timeout=timedelta(milliseconds=inp.linger_ms),
                )
            await self._send(inp, inp.batches_before + sent)
            sent += 1
            if sent >= inp.continue_after or workflow.info().is_continue_as_new_suggested():
                # what is carried stays within one batch's bytes: the rest leaves now
                while self._pending_bytes > MAX_BATCH_BYTES:
                    await self._send(inp, inp.batches_before + sent)
                    sent += 1
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    inp.model_copy(
                        update={
                            "pending": self._pending,
                            "batches_before": inp.batches_before + sent,
                        }
                    )
                )

    def _full(self, inp: DispatcherInput) -> bool:
        return len(self._pending) >= inp.batch_size or self._pending_bytes >= MAX_BATCH_BYTES

    async def _send(self, inp: DispatcherInput, number: int) -> None:
        """The first batch of what is pending (by count and bytes) to a child workflow."""
        batch = batches_of(self._pending[: inp.batch_size], inp.batch_size)[0]
        self._pending = self._pending[len(batch) :]
        self._pending_bytes -= sum(json_size(t) for t in batch)
        await workflow.start_child_workflow(
            RolloutBatchWorkflow.run,
            RolloutBatch(
                batch_id=f"{inp.server_id}:d{number}",
                tasks=batch,
                tasks_per_activity=inp.tasks_per_activity,
            ),
            id=f"tasks-{inp.server_id}-d{number}",
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
        )
