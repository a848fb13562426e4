"""The orchestration bench compares like with like: its bare baseline runs as many activities
as the lineages it is measured against, of the same kinds (local or on the task queue) in the
same order, by the time each awaits the score of the last cycle; under its canned activities a
lineage runs the very steps it runs under the real ones."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from bench import canned_activities
from bench.bare_workflow import BareCycleWorkflow, noop
from bench.lineage_load import drive_bare, drive_lineages
from tests.conftest import lineage_history, local_activity_type
from workflows.lineage import LineageWorkflow


async def activities_run(client: Client, handles: list[WorkflowHandle[Any, Any]]) -> list[str]:
    """Per workflow, across its runs: the kinds of its activities in order ("queued" for one
    scheduled on a task queue, "local" for a local one)."""
    return ["".join(kind for kind, _ in steps) for steps in await steps_run(client, handles)]


async def steps_run(
    client: Client, handles: list[WorkflowHandle[Any, Any]]
) -> list[list[tuple[str, str]]]:
    """Per workflow, across its runs: (kind, activity type) of each activity, in order."""
    runs = []
    for handle in handles:
        steps = []
        async for event in lineage_history(client, handle):
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                name = event.activity_task_scheduled_event_attributes.activity_type.name
                steps.append(("Q", name))
            elif (local := local_activity_type(event)) is not None:
                steps.append(("L", local))
        runs.append(steps)
    return runs


async def test_the_bare_baseline_runs_the_same_activities_as_a_lineage(
    client, settings, run_worker
):
    bare_queue = f"{settings.task_queue}-bare"
    canned_queue = f"{settings.task_queue}-canned"
    lineages: list[WorkflowHandle[Any, Any]] = []
    bare: list[WorkflowHandle[Any, Any]] = []
    canned: list[WorkflowHandle[Any, Any]] = []
    async with (
        run_worker(),
        Worker(client, task_queue=bare_queue, workflows=[BareCycleWorkflow], activities=[noop]),
        Worker(
            client,
            task_queue=canned_queue,
            workflows=[LineageWorkflow],
            activities=canned_activities.ALL,
            activity_executor=ThreadPoolExecutor(max_workers=4),
        ),
    ):
        await drive_lineages(client, settings.task_queue, 2, 3, started_out=lineages)
        await drive_bare(client, bare_queue, 2, 3, started_out=bare)
        await drive_lineages(client, canned_queue, 2, 3, started_out=canned)
    # register (local); per cycle the agent (queued); after each of the two scores, the
    # trainer's step and the recording of what it decided (local)
    expected = "L" + "Q" + "LLQ" * 2
    assert await activities_run(client, lineages) == [expected, expected]
    assert await activities_run(client, bare) == [expected, expected]
    real = await steps_run(client, lineages)
    assert real[0][:5] == [
        ("L", "register_lineage"),
        ("Q", "run_agent"),
        ("L", "take_cycle_step"),
        ("L", "record_cycle_step"),
        ("Q", "run_agent"),
    ]
    assert await steps_run(client, canned) == real
