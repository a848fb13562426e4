"""Server SDK, for optimization algorithms written as scripts (the Agent Lightning server API):

    server = AgentLightningServer(client, store, "capitals")
    await server.start()
    for iteration in range(max_iterations):
        await server.update_resources(prompt_template=PromptTemplate(template=prompt))
        rollout_ids = [await server.queue_task(sample) for sample in dataset]
        completed = await server.wait_for_rollouts(rollout_ids)
        prompt = optimize(prompt, analyze(completed))

A queued task is a row in the store (one transaction: durable when ``queue_task`` returns);
Temporal carries its id. Clients anywhere take tasks from the rollouts task queue and read the
samples from the store.

Tasks queued one at a time leave in batches the SDK starts itself, one workflow start per
batch: a batch takes the tasks queued while the calls keep coming, up to ``linger_ms`` after
its first (``batch_size`` at most), so its size follows the pace of the calls; it leaves at
once when the script waits for rollouts, and when the calls stop for ``PAUSE_SECONDS``. A loop
of awaited calls slowed down by a busy machine still fills its batches. The dispatcher
workflow takes what a crashed process stored and never sent (``start``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from dataset_optimization.client import DEFAULT_ROLLOUT_QUEUE
from domain.lightning import (
    CLIENT_HEARTBEAT_TIMEOUT_SECONDS,
    DEFAULT_MAX_WAITING_TASKS,
    DispatcherInput,
    QueueFull,
    Resource,
    RolloutBatch,
    RolloutTask,
    ServerInput,
    TaskRef,
)
from domain.rollout_report import RolloutReport
from domain.settings import DEFAULT_TASK_QUEUE
from store import Store
from workflows.lightning import (
    LightningServerWorkflow,
    RolloutBatchWorkflow,
    RolloutDispatcherWorkflow,
)

__all__ = ["AgentLightningServer", "QueueFull"]

log = logging.getLogger(__name__)
FINISHED_POLL_SECONDS = 0.05
WAKE_RETRY_SECONDS = (0.5, 1, 2, 5, 10, 30)
# No task queued for this long: the script has stopped queueing, what it queued leaves. Longer
# than an awaited call takes on a busy machine (p95 under 40 ms at load 4 on two cores).
PAUSE_SECONDS = 0.05


class AgentLightningServer:
    def __init__(
        self,
        client: Client,
        store: Store,
        server_id: str,
        task_queue: str = DEFAULT_TASK_QUEUE,
        client_task_queue: str = DEFAULT_ROLLOUT_QUEUE,
        max_attempts: int = 3,
        linger_ms: int = 250,
        tasks_per_activity: int = 8,
        max_waiting: int = DEFAULT_MAX_WAITING_TASKS,
        batch_size: int = 250,
        heartbeat_timeout: float = CLIENT_HEARTBEAT_TIMEOUT_SECONDS,
    ) -> None:
        """``linger_ms``: how long a task queued with ``queue_task`` waits, at most, for others
        to leave with it in one batch (a batch is a workflow run: about 30 ms of the Temporal
        dev server's CPU, as much as 40 trivial rollouts' activities); the batch leaves sooner
        with ``batch_size`` tasks, when the script waits for rollouts, or when the calls stop
        for ``PAUSE_SECONDS``.
        ``max_waiting``: the tasks that may wait for a client (queued, not yet completed or
        failed) before ``queue_task`` raises QueueFull. ``heartbeat_timeout``: seconds a
        client running a task may go without a heartbeat before it is taken for dead and the
        task is tried again on another client (the dispatcher keeps the value it started
        with)."""
        if max_waiting < 1:
            raise ValueError(f"max_waiting must be at least 1, got {max_waiting}")
        self.client, self.store, self.server_id = client, store, server_id
        self.task_queue, self.client_task_queue = task_queue, client_task_queue
        self.max_attempts = max_attempts
        self.max_waiting = max_waiting
        if not 0 < heartbeat_timeout <= 600:
            raise ValueError(f"heartbeat_timeout is from 0 to 600 seconds, got {heartbeat_timeout}")
        self.heartbeat_timeout = heartbeat_timeout
        self.workflow_id = f"lightning-{server_id}"
        self._version: int | None = None
        self._handle: WorkflowHandle[Any, Any] | None = None
        self._iteration = 0
        self._batches: dict[str, str] = {}  # rollout id -> the batch workflow queue_tasks began
        self.dispatcher_id = f"dispatch-{server_id}"
        self.linger_ms = linger_ms
        self.tasks_per_activity = tasks_per_activity
        self.batch_size = batch_size
        # tasks to store, each with its caller's answer and whether a key named it
        self._to_write: list[tuple[RolloutTask, asyncio.Future[str], bool]] = []
        self._writer: asyncio.Task[None] | None = None
        # tasks queue_task stored and no batch was started for yet, oldest first, each with
        # the time it was stored
        self._unsent: list[tuple[float, TaskRef]] = []
        self._send_now = asyncio.Event()  # a full batch waits, or the script waits for rollouts
        self._flushed_at = float("-inf")  # tasks stored by then leave without the linger
        self._last_stored = float("-inf")
        self._sender: asyncio.Task[None] | None = None
        self.wakeups = 0  # signals sent to the dispatcher
        self.batches = 0  # batch workflows this SDK started

    async def start(self) -> None:
        """Start (or rejoin) the server. Tasks stored earlier and never dispatched (a crash
        between a task's write and its wake-up) leave now."""
        self._handle = await self.client.start_workflow(
            LightningServerWorkflow.run,
            ServerInput(server_id=self.server_id),
            id=self.workflow_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        if self._version is None:  # a restarted script queues with the version it published
            try:
                latest = await asyncio.to_thread(self.store.queries.resource_set, self.server_id)
                self._version = latest.version
            except KeyError:
                pass
        if await asyncio.to_thread(self.store.queries.undispatched_tasks, self.server_id):
            await self._signal_dispatcher()

    async def stop(self) -> None:
        if self._handle is not None:
            await self._handle.signal(LightningServerWorkflow.stop)
        self._flush()
        if self._sender is not None:
            await self._sender  # the last batch goes out first
        if self.wakeups:  # tasks still waiting leave first; then the dispatcher ends
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

    async def queue_task(self, sample: dict[str, Any], key: str | None = None) -> str:
        """Queue one sample: written to the store in one transaction, so durable once this
        returns; it leaves for clients in a batch with the tasks queued around it (see the
        module's docstring). Calls made together share the transaction.

        ``key``: queueing the same key again returns the same rollout id and queues nothing
        (a retried call after a lost answer). A sample over MAX_SAMPLE_BYTES is a ValueError;
        past ``max_waiting`` waiting tasks, QueueFull (nothing stored)."""
        task = self._task(sample, key)
        written: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._to_write.append((task, written, key is not None))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
        return await written

    async def _write_queued(self) -> None:
        """Group commit: tasks queued while a write is under way go together in the next one
        transaction, in the order queued (each caller returns once its own task is
        committed). A task refused at the cap gets QueueFull; one whose write fails for a
        reason of its own (its key queued with another sample) gets that error alone."""
        while self._to_write:
            group, self._to_write = self._to_write[:1000], self._to_write[1000:]
            tasks = [task for task, _, _ in group]
            try:
                admitted = await asyncio.to_thread(
                    self.store.recorder.queue_tasks,
                    tasks,
                    self.max_waiting,
                    partial=True,
                    # ids drawn at random (no key): none can be stored already
                    fresh=not any(keyed for _, _, keyed in group),
                )
            except Exception as err:
                if len(group) == 1:
                    _settle(group[0][1], error=err)
                    continue
                for task, written, _ in group:  # each on its own: whose error it is
                    try:
                        alone = await asyncio.to_thread(
                            self.store.recorder.queue_tasks, [task], self.max_waiting
                        )
                        _settle(written, result=alone.rollout_ids[0])
                        self._to_send(
                            [
                                TaskRef(rollout_id=r, sample_bytes=alone.sample_bytes[r])
                                for r in alone.rollout_ids
                            ]
                        )
                    except Exception as error:
                        _settle(written, error=error)
                continue
            taken = set(admitted.rollout_ids)
            self._to_send(
                [
                    TaskRef(rollout_id=r, sample_bytes=admitted.sample_bytes[r])
                    for r in admitted.rollout_ids
                ]
            )
            for task, written, _ in group:
                if task.rollout_id in taken:
                    _settle(written, result=task.rollout_id)
                else:
                    _settle(
                        written,
                        error=QueueFull(self.server_id, admitted.waiting, self.max_waiting),
                    )

    async def queue_tasks(
        self,
        samples: list[dict[str, Any]],
        batch_size: int = 250,
        tasks_per_activity: int = 8,
        keys: list[str] | None = None,
    ) -> list[str]:
        """Queue many samples: stored in one transaction, then one workflow per
        ``batch_size`` of them, clients sent ``tasks_per_activity`` at a time; each task's
        attempts are still its own. Admits what fits under ``max_waiting``, in order: the ids
        returned are those of the first ``len(ids)`` samples (the rest were refused; queue
        them again once rollouts have finished)."""
        if keys is not None and len(keys) != len(samples):
            raise ValueError(f"{len(keys)} keys for {len(samples)} samples")
        tasks = [
            self._task(sample, keys[i] if keys is not None else None)
            for i, sample in enumerate(samples)
        ]
        admitted = await asyncio.to_thread(
            self.store.recorder.queue_tasks, tasks, self.max_waiting, partial=True
        )
        if admitted.refused:
            log.warning(
                "server %s: %d of %d tasks refused, %d waiting tasks at most (max_waiting)",
                self.server_id,
                admitted.refused,
                len(tasks),
                self.max_waiting,
            )
        ids = admitted.rollout_ids
        for start in range(0, len(ids), batch_size):
            chunk = ids[start : start + batch_size]
            workflow_id = await self._start_batch(
                f"{self.server_id}:batch-{uuid.uuid4().hex[:12]}",
                [TaskRef(rollout_id=r, sample_bytes=admitted.sample_bytes[r]) for r in chunk],
                tasks_per_activity,
            )
            for rollout_id in chunk:
                self._batches[rollout_id] = workflow_id
        return ids

    async def _start_batch(
        self, batch_id: str, tasks: list[TaskRef], tasks_per_activity: int
    ) -> str:
        """A batch workflow for ``tasks``, stored already: its first step claims those no
        other batch took. Starting the same batch again (a retry after a lost answer) starts
        nothing: a batch id runs once."""
        workflow_id = f"tasks-{batch_id.replace(':', '-')}"
        # started by an earlier try whose answer was lost: nothing more to do
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await self.client.start_workflow(
                RolloutBatchWorkflow.run,
                RolloutBatch(
                    batch_id=batch_id,
                    server_id=self.server_id,
                    client_task_queue=self.client_task_queue,
                    max_attempts=self.max_attempts,
                    tasks=tasks,
                    tasks_per_activity=tasks_per_activity,
                    heartbeat_timeout_seconds=self.heartbeat_timeout,
                ),
                id=workflow_id,
                task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        self.batches += 1
        return workflow_id

    def _task(self, sample: dict[str, Any], key: str | None) -> RolloutTask:
        if self._version is None:
            raise RuntimeError("publish resources with update_resources() before queueing tasks")
        if key is not None and (not isinstance(key, str) or not key):
            raise ValueError(f"a task's key is a non-empty string, got {type(key).__name__}")
        if key is None:
            rollout_id = f"{self.server_id}:{uuid.uuid4().hex[:12]}"
        else:  # outside text: only its hash names the task
            rollout_id = f"{self.server_id}:k-{hashlib.sha256(key.encode()).hexdigest()[:24]}"
        return RolloutTask(
            rollout_id=rollout_id,
            server_id=self.server_id,
            iteration=self._iteration,
            sample=sample,
            resources_workflow_id=self.workflow_id,
            resources_version=self._version,
            client_task_queue=self.client_task_queue,
            max_attempts=self.max_attempts,
        )

    def _to_send(self, tasks: list[TaskRef]) -> None:
        """Stored tasks for the next batch."""
        if not tasks:
            return
        now = self._last_stored = asyncio.get_running_loop().time()
        self._unsent += [(now, task) for task in tasks]
        if len(self._unsent) >= self.batch_size:
            self._send_now.set()
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send())

    def _flush(self) -> None:
        """The script waits for rollouts: what it queued leaves now, without the linger."""
        if self._unsent:
            self._flushed_at = asyncio.get_running_loop().time()
            self._send_now.set()

    async def _send(self) -> None:
        """Batches for the stored tasks, one start at a time (tasks queued meanwhile leave
        with the next). A start that fails is tried again; the tasks wait in the store, and a
        process that dies first leaves them to the dispatcher (``start``)."""
        failures = 0
        while self._unsent:
            await self._gather()
            self._send_now.clear()
            tasks = [task for _, task in self._unsent[: self.batch_size]]
            batch_id = f"{self.server_id}:q-{uuid.uuid4().hex[:16]}"
            while True:
                try:
                    await self._start_batch(batch_id, tasks, self.tasks_per_activity)
                    break
                except Exception as err:
                    delay = WAKE_RETRY_SECONDS[min(failures, len(WAKE_RETRY_SECONDS) - 1)]
                    failures += 1
                    log.warning(
                        "starting batch %s failed (%s); again in %s s", batch_id, err, delay
                    )
                    await asyncio.sleep(delay)
            failures = 0
            del self._unsent[: len(tasks)]
            if self._unsent and (
                len(self._unsent) >= self.batch_size or self._unsent[0][0] <= self._flushed_at
            ):
                self._send_now.set()

    async def _gather(self) -> None:
        """Until the oldest task has waited ``linger_ms``, the calls have paused, a full batch
        waits, or the script waits for rollouts."""
        loop = asyncio.get_running_loop()
        deadline = self._unsent[0][0] + self.linger_ms / 1000
        while not self._send_now.is_set():
            wait = min(deadline, self._last_stored + PAUSE_SECONDS) - loop.time()
            if wait <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._send_now.wait(), wait)

    async def _signal_dispatcher(self) -> None:
        await self.client.start_workflow(
            RolloutDispatcherWorkflow.run,
            DispatcherInput(
                server_id=self.server_id,
                batch_size=self.batch_size,
                tasks_per_activity=self.tasks_per_activity,
                heartbeat_timeout_seconds=self.heartbeat_timeout,
            ),
            id=self.dispatcher_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal="wake",
        )
        self.wakeups += 1

    async def get_completed_rollouts(self, rollout_ids: list[str]) -> list[RolloutReport]:
        """The reports of those that are done, from the store (possibly fewer than asked)."""
        self._flush()  # asked for results: nothing more is coming for now
        return await asyncio.to_thread(self.store.queries.lightning_reports, rollout_ids)

    async def wait_for_rollouts(
        self, rollout_ids: list[str], timeout: float | None = None
    ) -> list[RolloutReport]:
        """Wait until every task has completed or failed; the completed ones' reports. Tasks
        queued by ``queue_tasks`` are awaited through their batch workflows, the rest (and any
        another batch took) by the store."""

        self._flush()

        async def finished() -> None:
            batches = sorted({self._batches[r] for r in rollout_ids if r in self._batches})
            await asyncio.gather(*(self.client.get_workflow_handle(w).result() for w in batches))
            waiting = set(rollout_ids)
            while waiting:
                waiting -= await asyncio.to_thread(
                    self.store.queries.finished_rollouts, list(waiting)
                )
                if waiting:
                    await asyncio.sleep(FINISHED_POLL_SECONDS)

        await asyncio.wait_for(finished(), timeout)
        return await self.get_completed_rollouts(rollout_ids)


def _settle(
    future: asyncio.Future[str], result: str | None = None, error: BaseException | None = None
) -> None:
    """Answer a queue_task caller (unless it was cancelled meanwhile)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result or "")
