"""The orchestration bench compares like with like: its bare baseline runs as many activities
as the lineages it is measured against, of the same kinds (local or on the task queue) in the
same order, by the time each awaits the score of the last cycle."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from bench.bare_workflow import BareCycleWorkflow, noop
from bench.lineage_load import drive_bare, drive_lineages
from tests.conftest import lineage_history, local_activity_type


async def activities_run(client: Client, handles: list[WorkflowHandle[Any, Any]]) -> list[str]:
    """Per workflow, across its runs: the kinds of its activities in order ("queued" for one
    scheduled on a task queue, "local" for a local one)."""
    runs = []
    for handle in handles:
        kinds = ""
        async for event in lineage_history(client, handle):
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                kinds += "Q"
            elif local_activity_type(event) is not None:
                kinds += "L"
        runs.append(kinds)
    return runs


async def test_the_bare_baseline_runs_the_same_activities_as_a_lineage(
    client, settings, run_worker
):
    bare_queue = f"{settings.task_queue}-bare"
    lineages: list[WorkflowHandle[Any, Any]] = []
    bare: list[WorkflowHandle[Any, Any]] = []
    async with (
        run_worker(),
        Worker(client, task_queue=bare_queue, workflows=[BareCycleWorkflow], activities=[noop]),
    ):
        await drive_lineages(client, settings.task_queue, 2, 3, started_out=lineages)
        await drive_bare(client, bare_queue, 2, 3, started_out=bare)
    # register (local); per cycle the agent (queued); after each of the two scores, the score
    # recorded and the training step (local)
    expected = "L" + "Q" + "LLQ" * 2
    assert await activities_run(client, lineages) == [expected, expected]
    assert await activities_run(client, bare) == [expected, expected]
