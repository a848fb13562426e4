"""RLM fan-out on Temporal: workers as child workflows, recursing up to ``max_depth``; each
gets read-only cards and returns a commit; parents merge commits (children's into the worker's
in-memory store, the roots' into the durable store)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.rlm import RlmActivities
    from rlm.commit import Commit
    from rlm.objects import Card
    from rlm.store import InMemoryFindingsStore
    from rlm.tasks import (
        ApplyCommitInput,
        FanOutInput,
        FanOutResult,
        RlmTask,
        RlmWorkerInput,
    )

ACTIVITY = {
    "start_to_close_timeout": timedelta(minutes=5),
    "retry_policy": RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1)),
}


async def rlm_worker_batched(
    tasks: list[RlmTask], cards: list[Card], depth: int, max_depth: int, max_parallel: int
) -> list[Commit]:
    """Run workers as child workflows, at most ``max_parallel`` at once; commits in order."""
    gate = asyncio.Semaphore(max_parallel)
    parent = workflow.info().workflow_id

    async def one(task: RlmTask) -> Commit:
        async with gate:
            return await workflow.execute_child_workflow(
                RlmWorkerWorkflow.run,
                RlmWorkerInput(
                    task=task,
                    cards=cards,
                    depth=depth,
                    max_depth=max_depth,
                    max_parallel=max_parallel,
                ),
                id=f"{parent}/{task.task_id}",
            )

    return list(await asyncio.gather(*(one(t) for t in tasks)))


@workflow.defn(name="RlmWorkerWorkflow")
class RlmWorkerWorkflow:
    @workflow.run
    async def run(self, inp: RlmWorkerInput) -> Commit:
        own = await workflow.execute_activity_method(RlmActivities.rlm_analyze, inp, **ACTIVITY)
        if not inp.task.subtasks or inp.depth >= inp.max_depth:
            return own
        commits = await rlm_worker_batched(
            inp.task.subtasks, inp.cards, inp.depth + 1, inp.max_depth, inp.max_parallel
        )
        # Merge the sub-workers' commits under this worker's own findings (pure, in memory).
        local = InMemoryFindingsStore(external={card.id for card in inp.cards})
        local.apply_commit(own.model_copy(update={"commit_id": "self"}))
        anchor = "self/summary" if local.get("self/summary") else None
        for sub, commit in zip(inp.task.subtasks, commits, strict=True):
            local.apply_commit(commit, batch_prefix=f"sub-{sub.task_id}", batch_parent=anchor)
        return local.export_commit(own.commit_id)


@workflow.defn(name="RlmFanOutWorkflow")
class RlmFanOutWorkflow:
    @workflow.run
    async def run(self, inp: FanOutInput) -> FanOutResult:
        commits = await rlm_worker_batched(inp.tasks, inp.cards, 1, inp.max_depth, inp.max_parallel)
        results = []
        for task, commit in zip(inp.tasks, commits, strict=True):
            results.append(
                await workflow.execute_activity_method(
                    RlmActivities.rlm_apply_commit,
                    ApplyCommitInput(
                        store_id=inp.store_id,
                        commit=commit,
                        batch_prefix=task.task_id,
                        worker=task.task_id,
                    ),
                    **ACTIVITY,
                )
            )
        return FanOutResult(results=results)
