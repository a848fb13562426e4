"""The orchestration bench compares like with like: its bare baseline runs as many activities
as the lineages it is measured against, by the time each awaits the score of the last cycle."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from bench.bare_workflow import BareCycleWorkflow, noop
from bench.lineage_load import drive_bare, drive_lineages
from tests.conftest import lineage_history, local_activity_type


async def activities_run(client: Client, handles: list[WorkflowHandle[Any, Any]]) -> list[int]:
    """Per workflow, across its runs: activities scheduled on a queue plus local ones."""
    counts = []
    for handle in handles:
        count = 0
        async for event in lineage_history(client, handle):
            scheduled = event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            count += scheduled or local_activity_type(event) is not None
        counts.append(count)
    return counts


async def test_the_bare_baseline_runs_as_many_activities_as_a_lineage(client, settings, run_worker):
    bare_queue = f"{settings.task_queue}-bare"
    lineages: list[WorkflowHandle[Any, Any]] = []
    bare: list[WorkflowHandle[Any, Any]] = []
    async with (
        run_worker(),
        Worker(client, task_queue=bare_queue, workflows=[BareCycleWorkflow], activities=[noop]),
    ):
        await drive_lineages(client, settings.task_queue, 2, 3, started_out=lineages)
        await drive_bare(client, bare_queue, 2, 3, started_out=bare)
    # register; then per cycle the agent; after each of the two scores, five steps
    expected = 1 + 3 + 5 * 2
    assert await activities_run(client, lineages) == [expected, expected]
    assert await activities_run(client, bare) == [expected, expected]
