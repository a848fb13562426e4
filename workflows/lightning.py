"""Agent Lightning workflows: resources published by version, dataset tasks (queued together as
a batch workflow, or one at a time through a dispatcher that gathers them into batches; a
workflow per task is kept for callers that want one), and the optimization algorithm that
iterates over a dataset.

Outside the workflow sandbox, as LineageWorkflow (workflows/lineage.py): the sandbox imports
this module afresh for every run, and a batch is a run, a few tasks each; without bytecode on
disk (a fresh clone with PYTHONDONTWRITEBYTECODE) that meant compiling it for every batch. What
the sandbox enforces holds by construction: the module keeps no mutable state (constants only),
reads no clock, environment or file, and the suite replays these workflows' histories inside
the sandbox too (tests/test_lightning.py). ``TRAINING_CAMP_WORKFLOW_SANDBOX=1`` runs them
sandboxed on a worker."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.agent_execution import AgentExecutionActivities
    from activities.lightning import LightningActivities
    from domain.lightning import (
        ClaimedTasks,
        ClaimInput,
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
        ServerInput,
        StoredSample,
        StoredTask,
        StoreSamplesInput,
        StoreTasksInput,
        TaskAttemptsInput,
        TaskRef,
        TaskReportsInput,
        groups_of,
    )
    from domain.lineage import RolloutFailedInput

STORE = {
    "start_to_close_timeout": timedelta(seconds=60),
    "retry_policy": RetryPolicy(maximum_interval=timedelta(seconds=30)),
}
CLIENT_TIMEOUT = timedelta(minutes=10)
TASKS_PER_ACTIVITY = 8  # tasks sent to a client in one activity
STORED_TASKS_PER_STEP = 1000  # an optimization's tasks written per activity (ids and hashes)
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


@workflow.defn(name="LightningServerWorkflow", sandboxed=False)
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


@workflow.defn(name="RolloutBatchWorkflow", sandboxed=False)
class RolloutBatchWorkflow:
    """Dataset tasks run together, by id: their samples wait in the store, where the client
    reads them. The batch claims its tasks (unless given them claimed), sends them to clients a
    few per activity (``tasks_per_activity``, and at most MAX_ACTIVITY_SAMPLE_BYTES of samples),
    and records each group's reports in one step as they return; a task that fails is tried
    again on its own (its attempts recorded one by one), the rest of its group done."""

    @workflow.run
    async def run(self, batch: RolloutBatch) -> list[RolloutOutcome]:
        tasks = batch.tasks
        if not batch.claimed:  # those another batch took already are that batch's to run
            claimed: ClaimedTasks = await workflow.execute_local_activity_method(
                LightningActivities.claim_tasks,
                ClaimInput(
                    server_id=batch.server_id,
                    batch_id=batch.batch_id,
                    rollout_ids=[t.rollout_id for t in tasks],
                    limit=len(tasks),
                ),
                **LOCAL_STORE,
            )
            tasks = claimed.tasks
        groups = groups_of(tasks, batch.tasks_per_activity)
        done = await asyncio.gather(*(self._group(batch, g) for g in groups))
        return [outcome for group in done for outcome in group]

    async def _group(self, batch: RolloutBatch, tasks: list[TaskRef]) -> list[RolloutOutcome]:
        outcomes: dict[str, RolloutOutcome] = {}
        todo, attempt = [t.rollout_id for t in tasks], 1
        while todo:
            await workflow.execute_local_activity_method(
                LightningActivities.record_task_attempts_started,
                TaskAttemptsInput(server_id=batch.server_id, attempt=attempt, rollout_ids=todo),
                **LOCAL_STORE,
            )
            try:
                result = await workflow.execute_activity(
                    "execute_rollouts",
                    ClientBatch(
                        assignments=[ClientAssignment(rollout_id=r, attempt=attempt) for r in todo]
                    ),
                    task_queue=batch.client_task_queue,
                    result_type=ClientBatchReport,
                    start_to_close_timeout=CLIENT_TIMEOUT,
                    # the client beats while it runs: a dead one is noticed within this, and
                    # its tasks are tried again (on another client) below
                    heartbeat_timeout=timedelta(seconds=batch.heartbeat_timeout_seconds),
                    # the workflow owns retries, so that every attempt is recorded
                    retry_policy=RetryPolicy(maximum_attempts=1),
                )
                reports, failures = result.reports, result.errors
                if len(reports) != len(todo) or len(failures) != len(todo):
                    reports = [None] * len(todo)
                    failures = ["the client answered for another number of tasks"] * len(todo)
            except ActivityError as err:
                reports, failures = [None] * len(todo), [str(err.cause or err)] * len(todo)
            # a report counts for the task it was sent for, and only for it
            reports = [
                r if r is not None and r.report.rollout_id == t else None
                for t, r in zip(todo, reports, strict=True)
            ]
            arrived: list[ClientReport] = [r for r in reports if r is not None]
            if arrived:
                await workflow.execute_local_activity_method(
                    LightningActivities.record_task_reports,
                    TaskReportsInput(server_id=batch.server_id, attempt=attempt, reports=arrived),
                    **LOCAL_STORE,
                )
            for one in arrived:
                outcomes[one.report.rollout_id] = RolloutOutcome(
                    rollout_id=one.report.rollout_id,
                    status="completed",
                    final_reward=one.report.final_reward,
                    attempts=attempt,
                )
            failed = [
                (t, e or "no report")
                for t, r, e in zip(todo, reports, failures, strict=True)
                if r is None
            ]
            if failed:
                await workflow.execute_local_activity_method(
                    LightningActivities.record_task_attempts_failed,
                    TaskAttemptsInput(
                        server_id=batch.server_id,
                        attempt=attempt,
                        rollout_ids=[t for t, _ in failed],
                        errors=[e for _, e in failed],
                    ),
                    **LOCAL_STORE,
                )
            todo = [t for t, _ in failed] if attempt < batch.max_attempts else []
            if attempt >= batch.max_attempts:
                for t, error in failed:
                    outcomes[t] = await self._give_up(batch, t, error, attempt)
            if todo:
                await workflow.sleep(timedelta(seconds=min(30, 2 ** (attempt - 1))))
                attempt += 1
        return [outcomes[t.rollout_id] for t in tasks]

    async def _give_up(
        self, batch: RolloutBatch, rollout_id: str, error: str, attempts: int
    ) -> RolloutOutcome:
        await workflow.execute_local_activity_method(
            AgentExecutionActivities.mark_rollout_failed,
            RolloutFailedInput(
                session_id=batch.server_id,
                lineage_id=batch.server_id,
                rollout_id=rollout_id,
                error=error,
            ),
            **LOCAL_STORE,
        )
        return RolloutOutcome(
            rollout_id=rollout_id,
            status="failed",
            final_reward=None,
            attempts=attempts,
            error=error,
        )


@workflow.defn(name="OptimizationWorkflow", sandboxed=False)
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
        # the dataset goes to the store once; every iteration's tasks name its samples there
        samples: list[StoredSample] = await workflow.execute_activity_method(
            LightningActivities.store_samples, StoreSamplesInput(samples=inp.dataset), **STORE
        )
        template, struggling = inp.template, []
        for iteration in range(1, inp.max_iterations + 1):
            version = await self._publish({"prompt_template": template, "llm": inp.llm})
            tasks = [(f"{inp.run_id}:it{iteration}:s{i}", i) for i in range(len(inp.dataset))]
            # curriculum: the samples the agent struggled with are run once more
            repeats = [(f"{inp.run_id}:it{iteration}:s{i}-again", i) for i in struggling]
            outcomes = await self._run_all(inp, iteration, version, samples, [*tasks, *repeats])
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
                    rollout_ids=[rollout_id for rollout_id, _ in tasks],
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

    async def _run_all(
        self,
        inp: OptimizationInput,
        iteration: int,
        version: int,
        samples: list[StoredSample],
        tasks: list[tuple[str, int]],
    ) -> list[RolloutOutcome]:
        """Every task (rollout id, sample index), at most ``max_parallel`` at a time, in order:
        the iteration's tasks written to the store, each given to its child batch workflow
        (a few tasks, one client activity for the few), each task's attempts still its own.
        A workflow per task cost the Temporal server and the worker more than the rollout."""
        per_batch = max(1, min(TASKS_PER_ACTIVITY, inp.max_parallel))
        gate = asyncio.Semaphore(max(1, inp.max_parallel // per_batch))
        chunks = [tasks[i : i + per_batch] for i in range(0, len(tasks), per_batch)]
        batch_ids = [f"{inp.run_id}:it{iteration}:b{n}" for n in range(len(chunks))]
        stored = [
            StoredTask(
                rollout_id=rollout_id,
                sample_hash=samples[i].sample_hash,
                sample_bytes=samples[i].sample_bytes,
                batch_id=batch_ids[n],
            )
            for n, chunk in enumerate(chunks)
            for rollout_id, i in chunk
        ]
        for k in range(0, len(stored), STORED_TASKS_PER_STEP):
            await workflow.execute_activity_method(
                LightningActivities.store_tasks,
                StoreTasksInput(
                    server_id=inp.run_id,
                    iteration=iteration,
                    resources_workflow_id=workflow.info().workflow_id,
                    resources_version=version,
                    client_task_queue=inp.client_task_queue,
                    max_attempts=inp.max_attempts,
                    tasks=stored[k : k + STORED_TASKS_PER_STEP],
                ),
                **STORE,
            )
        run = workflow.info().workflow_id

        async def batch(number: int, chunk: list[tuple[str, int]]) -> list[RolloutOutcome]:
            async with gate:
                return await workflow.execute_child_workflow(
                    RolloutBatchWorkflow.run,
                    RolloutBatch(
                        batch_id=batch_ids[number],
                        server_id=inp.run_id,
                        client_task_queue=inp.client_task_queue,
                        max_attempts=inp.max_attempts,
                        tasks=[
                            TaskRef(rollout_id=rollout_id, sample_bytes=samples[i].sample_bytes)
                            for rollout_id, i in chunk
                        ],
                        tasks_per_activity=per_batch,
                        claimed=True,
                        heartbeat_timeout_seconds=inp.heartbeat_timeout_seconds,
                    ),
                    id=f"{run}-it{iteration}-b{number}",
                )

        done = await asyncio.gather(*(batch(n, c) for n, c in enumerate(chunks)))
        return [outcome for outcomes in done for outcome in outcomes]


@workflow.defn(name="RolloutDispatcherWorkflow", sandboxed=False)
class RolloutDispatcherWorkflow:
    """Where stored tasks no batch took leave for clients: those of a process that died
    between ``queue_task``'s write and the start of the batch it would have sent them in (the
    server SDK's ``start`` wakes this workflow, ``wake``, when tasks wait untaken). Each
    wake-up claims the server's oldest waiting tasks, ``batch_size`` at most, and starts a
    child RolloutBatchWorkflow with their ids; a full batch means more may wait, so it claims
    again at once. A run starts awake. Continues as new after a number of batches, carrying
    nothing: the waiting tasks are in the store."""

    @workflow.init
    def __init__(self, inp: DispatcherInput) -> None:
        self._awake = True
        self._stopped = False

    @workflow.signal(name="wake")
    def wake(self) -> None:
        self._awake = True

    @workflow.signal(name="stop")
    def stop(self) -> None:
        self._stopped = True  # what waits leaves first

    @workflow.run
    async def run(self, inp: DispatcherInput) -> None:
        sent = 0
        while True:
            await workflow.wait_condition(lambda: self._awake or self._stopped)
            self._awake = False  # a wake-up during the claim is another round
            batch_id = f"{inp.server_id}:d-{workflow.uuid4().hex[:16]}"
            claimed: ClaimedTasks = await workflow.execute_local_activity_method(
                LightningActivities.claim_tasks,
                ClaimInput(server_id=inp.server_id, batch_id=batch_id, limit=inp.batch_size),
                **LOCAL_STORE,
            )
            if claimed.tasks:
                await workflow.start_child_workflow(
                    RolloutBatchWorkflow.run,
                    RolloutBatch(
                        batch_id=batch_id,
                        server_id=inp.server_id,
                        client_task_queue=claimed.client_task_queue,
                        max_attempts=claimed.max_attempts,
                        tasks=claimed.tasks,
                        tasks_per_activity=inp.tasks_per_activity,
                        claimed=True,
                        heartbeat_timeout_seconds=inp.heartbeat_timeout_seconds,
                    ),
                    id=f"tasks-{batch_id.replace(':', '-')}",
                    parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                )
                sent += 1
                # a full batch may have left more behind; a repeated claim (this round replayed
                # after a crash) may have absorbed the wake-up of tasks stored since
                self._awake = (
                    self._awake or claimed.repeated or len(claimed.tasks) >= inp.batch_size
                )
            elif self._stopped and not self._awake:
                return
            if self._stopped:
                continue  # drain what waits, then end (above); no new run
            if sent >= inp.continue_after or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(inp)
