"""Durable waits: a lineage survives a worker restart; continue-as-new keeps the cycle, the agent
version and pending signals; saved histories still replay against today's workflow code."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from starter import start_session
from tests.conftest import awaiting, make_spec, wait_for_state
from workflows.lineage import LineageWorkflow

HISTORIES = Path(__file__).parent / "histories"


async def test_restart_and_continue_as_new_keep_everything(client, store, settings, run_worker):
    spec = make_spec(options={"continueAsNewEvery": 1})
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
    first_run = (await handle.describe()).run_id

    # No worker is running: signals wait in Temporal, nothing is lost.
    await handle.signal(LineageWorkflow.directive, {"kind": "sticky", "content": "Cite a source."})
    await handle.signal(LineageWorkflow.score, {"score": 3, "comment": "way too long"})
    await handle.signal(LineageWorkflow.score, {"score": 5, "comment": "use bullets", "cycle": 2})

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
    await _replay(history)


def _ref(agent_id: str, version: int):
    from domain.agent import AgentRef

    return AgentRef(agent_id=agent_id, version=version)


async def _replay(history: WorkflowHistory) -> None:
    replayer = Replayer(workflows=[LineageWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None


async def test_saved_histories_replay():
    """Histories recorded by tests/histories/capture.py; a non-deterministic change fails here."""
    files = sorted(HISTORIES.glob("*.json"))
    assert files, "no saved histories"
    for path in files:
        history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
        await _replay(history)


async def test_continue_as_new_when_the_server_suggests_it(client, store, settings, run_worker):
    """continueAsNewEvery is far away; the server's suggestion (lowered for the suite, see
    conftest) is what makes the lineage cross runs, carrying a score queued for the next cycle."""
    spec = make_spec(options={"continueAsNewEvery": 1000})
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        first_run = (await handle.describe()).run_id
        await handle.signal(LineageWorkflow.score, {"score": 4, "comment": "too long"})
        await handle.signal(LineageWorkflow.score, {"score": 6, "cycle": 2})
        state = await wait_for_state(handle, awaiting(3), timeout=60)
    assert [(p.cycle, p.score) for p in state.score_history] == [(1, 4), (2, 6)]
    assert state.run_cycles < 3  # this run did not do all three cycles
    history = await client.get_workflow_handle(handle.id, run_id=first_run).fetch_history()
    assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert len(history.events) < 200
