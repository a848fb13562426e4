"""Durable waits: a lineage survives a worker restart; continue-as-new keeps the cycle, the agent
version and pending signals; saved histories still replay against today's workflow code."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    OutboundInterceptor,
    StartWorkflowInput,
    WorkflowHandle,
    WorkflowHistory,
)
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Replayer,
    UnsandboxedWorkflowRunner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from client import start_session
from domain.settings import Settings
from tests.conftest import awaiting, make_spec, wait_for_state
from workflows.lineage import LineageWorkflow
from workflows.rlm import RlmReplWorkflow

HISTORIES = Path(__file__).parent / "histories"


async def test_restart_and_continue_as_new_keep_everything(client, store, settings, run_worker):
    spec = make_spec(options={"continueAsNewEvery": 1})
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
    first_run = (await handle.describe()).run_id

    # No worker is running: signals wait in Temporal, nothing is lost.
    await handle.signal("directive", {"kind": "sticky", "content": "Cite a source."})
    await handle.signal("score", {"score": 3, "comment": "way too long"})
    await handle.signal("score", {"score": 5, "comment": "use bullets", "cycle": 2})

    async with run_worker():  # a brand-new worker replays the run and carries on
        state = await wait_for_state(handle, awaiting(3), timeout=60)

    assert [(p.cycle, p.score) for p in state.score_history] == [(1, 3), (2, 5)]
    assert state.agent_version == 3
    assert state.sticky_directives == ["Cite a source."]
    assert state.queued_scores == 0
    assert state.run_cycles == 1  # this run has done one cycle: it continued as new twice

    first = client.get_workflow_handle(handle.id, run_id=first_run)
    history = await first.fetch_history()
    assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert (await handle.describe()).run_id != first_run

    lineage = spec.lineage_id("A")
    assert [e.score for e in store.queries.evaluations(lineage)] == [3, 5]
    records = store.queries.evolution_records(lineage)
    assert [(r.from_version, r.to_version) for r in records] == [(1, 2), (2, 3)]
    assert records[0].next_score == 5 and records[0].score_delta == 2
    v3 = store.queries.agent_definition(_ref(lineage, 3))
    assert "Cite a source." in v3.system_prompt and "bullet" in v3.system_prompt.lower()

    # the first run's history replays deterministically against the current code
    await replay(history)


def _ref(agent_id: str, version: int):
    from domain.agent import AgentRef

    return AgentRef(agent_id=agent_id, version=version)


async def replay(history: WorkflowHistory, lineage: type = LineageWorkflow) -> None:
    """Replays the history as the worker runs it, then with every workflow inside Temporal's
    sandbox: the lineage runs outside it on workers, and this is where the sandbox still
    refuses a non-deterministic call in lineage code."""
    for runner in (UnsandboxedWorkflowRunner(), SandboxedWorkflowRunner()):
        replayer = Replayer(
            workflows=[lineage, RlmReplWorkflow],
            data_converter=pydantic_data_converter,
            unsandboxed_workflow_runner=runner,
        )
        result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None


class ShortWorkflowTasks(ClientInterceptor):
    """Workflows started through this client get a workflow task timeout of ``seconds``."""

    def __init__(self, seconds: float = 1) -> None:
        self.seconds = seconds

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        timeout = timedelta(seconds=self.seconds)

        class Short(OutboundInterceptor):
            async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle[Any, Any]:
                input.task_timeout = timeout
                return await self.next.start_workflow(input)

        return Short(next)


class SlowLocalActivities(Interceptor):
    """Every local activity takes longer than the workflow task it runs in may stay open."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        seconds = self.seconds

        class Slow(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                from temporalio import activity

                if activity.info().is_local:
                    await asyncio.sleep(seconds)
                return await self.next.execute_activity(input)

        return Slow(next)


async def test_local_activities_that_outlast_a_workflow_task_replay(
    client, store, settings, run_worker
):
    """A slow store under load: with a 1 s workflow task timeout, the worker heartbeats the
    task (completes it empty and takes a new one) while a local activity runs, so the
    activity's marker lands workflow tasks after it was scheduled. The lineage still trains,
    and the history replays."""
    spec = make_spec(options={"continueAsNewEvery": 10})
    lineage_id = spec.lineage_id("A")
    short_tasks = Client(**{**client.config(), "interceptors": [ShortWorkflowTasks()]})
    async with run_worker(interceptors=[SlowLocalActivities(1.2)]):
        (handle,) = await start_session(short_tasks, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1), timeout=60)
        await handle.signal("score", {"score": 3, "comment": "way too long"})
        state = await wait_for_state(handle, awaiting(2), timeout=60)
    assert state.agent_version == 2  # the score trained a new version
    assert [e.score for e in store.queries.evaluations(lineage_id)] == [3]
    history = await client.get_workflow_handle(
        handle.id, run_id=handle.first_execution_run_id
    ).fetch_history()
    types = [e.event_type for e in history.events]
    completed, scheduled = (
        EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    )
    heartbeats = sum(1 for a, b in pairwise(types) if (a, b) == (completed, scheduled))
    assert heartbeats >= 3, "the local activities should have outlasted their workflow tasks"
    await replay(history)


async def test_saved_histories_replay():
    """Histories recorded by tests/histories/capture.py; a non-deterministic change fails here."""
    files = sorted(HISTORIES.glob("*.json"))
    assert files, "no saved histories"
    for path in files:
        history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
        await replay(history)


async def test_the_sandboxed_replay_refuses_lineage_code_that_reads_the_clock():
    """The guard that stands in for the sandbox on workers: a lineage that reads the clock
    replays without complaint outside the sandbox, and fails inside it."""
    from tests.nondeterministic_lineage import ClockReadingLineage

    path = HISTORIES / "lineage-two-cycles.json"
    history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
    with pytest.raises(Exception, match=r"datetime\.datetime\.now"):
        await replay(history, lineage=ClockReadingLineage)
    unguarded = Replayer(workflows=[ClockReadingLineage], data_converter=pydantic_data_converter)
    result = await unguarded.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None


async def test_a_worker_asked_for_the_sandbox_runs_lineages_in_it(
    client, store, settings, run_worker, monkeypatch
):
    """TRAINING_CAMP_WORKFLOW_SANDBOX=1 (for whoever changes lineage code): the lineage runs
    its cycles inside the sandbox, and what it writes is the same."""
    monkeypatch.setenv("TRAINING_CAMP_WORKFLOW_SANDBOX", "1")
    assert Settings.from_env().workflow_sandbox is True
    monkeypatch.setenv("TRAINING_CAMP_WORKFLOW_SANDBOX", "maybe")
    with pytest.raises(ValueError, match=r"TRAINING_CAMP_WORKFLOW_SANDBOX.*'maybe'"):
        Settings.from_env()
    spec = make_spec()
    async with run_worker(settings.model_copy(update={"workflow_sandbox": True})) as worker:
        runner = worker.config()["unsandboxed_workflow_runner"]  # the lineage's runner
        assert isinstance(runner, SandboxedWorkflowRunner)
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 3, "comment": "too long, use bullets"})
        state = await wait_for_state(handle, awaiting(2))
    assert state.agent_version == 2
    assert [e.score for e in store.queries.evaluations(spec.lineage_id("A"))] == [3]
    await replay(await handle.fetch_history())


async def test_continue_as_new_when_the_server_suggests_it(client, store, settings, run_worker):
    """continueAsNewEvery is far away; the server's suggestion (lowered for the suite, see
    conftest) is what makes the lineage cross runs, carrying a score queued for the next cycle."""
    spec = make_spec(options={"continueAsNewEvery": 1000})
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        first_run = (await handle.describe()).run_id
        await handle.signal("score", {"score": 4, "comment": "too long"})
        await handle.signal("score", {"score": 6, "cycle": 2})
        state = await wait_for_state(handle, awaiting(3), timeout=60)
    assert [(p.cycle, p.score) for p in state.score_history] == [(1, 4), (2, 6)]
    assert state.run_cycles < 3  # this run did not do all three cycles
    history = await client.get_workflow_handle(handle.id, run_id=first_run).fetch_history()
    assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert len(history.events) < 200
