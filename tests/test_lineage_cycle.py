"""The vertical slice: a session starts, cycle 1 waits, a score sent with the real `temporal`
CLI evolves the agent, cycle 2 is shorter and bulleted, and the store holds everything."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter

import pytest
from sqlmodel import select
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowUpdateFailedError

from client import await_output, start_session
from store.tables import PayloadBlob
from tests.conftest import (
    awaiting,
    eventually,
    make_spec,
    starter_cli,
    steps_run,
    temporal_cli,
    wait_for_state,
)
from workflows.lineage import LineageWorkflow


@pytest.mark.every_backend
async def test_cli_score_evolves_the_lineage_and_the_store_holds_everything(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec(labels=("A", "B"))
    async with run_worker():
        handle_a, handle_b = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle_a, awaiting(1))
        await wait_for_state(handle_b, awaiting(1))

        # the search attributes let the CLI find the session's lineages
        listed = await temporal_cli(
            temporal_address,
            "workflow",
            "list",
            "--query",
            f'TrainingCampSession="{spec.session_id}"',
            "--output",
            "json",
        )
        assert listed.returncode == 0, listed.stderr
        assert {w["execution"]["workflowId"] for w in json.loads(listed.stdout)} == {
            handle_a.id,
            handle_b.id,
        }

        sent = await temporal_cli(
            temporal_address,
            "workflow",
            "signal",
            "--workflow-id",
            handle_a.id,
            "--name",
            "score",
            "--input",
            json.dumps(
                {"score": 3, "comment": "Way too long, wanted quick bullets", "rater": "ana"}
            ),
        )
        assert sent.returncode == 0, sent.stderr
        state = await wait_for_state(handle_a, awaiting(2))
        assert state.agent_version == 2
        # length is steered by the instructions; the token budget is a ceiling and stays
        assert "brief" in state.last_evolution and "maxTokens" not in state.last_evolution
        assert [p.score for p in state.score_history] == [3]
        # The rules engine calls no model: its four steps run on this worker, and so does the
        # recording of what it decided; only the agent's runs go through the task queue.
        queued, local = await steps_run(client, handle_a)
        assert set(queued) == {"run_agent"}
        assert local == ["register_lineage", "take_cycle_step", "record_cycle_step"]

        # score cycle 2 through the update: the outcome of the evolution is judged
        accepted = await handle_a.execute_update(
            LineageWorkflow.submit_score, {"score": 8, "comment": "Much better!"}
        )
        assert accepted.score == 8 and accepted.cycle == 2
        await wait_for_state(handle_a, awaiting(3))

    q = store.queries
    lineage_a = spec.lineage_id("A")
    versions = q.agent_versions(lineage_a)
    assert [v.version for v in versions] == [1, 2]
    v1 = q.agent_definition(_ref(lineage_a, 1))
    v2 = q.agent_definition(_ref(lineage_a, 2))
    assert "bullet" in v2.system_prompt.lower() and "brief" in v2.system_prompt.lower()
    assert "comprehensive" not in v2.system_prompt
    assert v2.parameters.max_tokens == v1.parameters.max_tokens  # a ceiling, not the length
    assert v2.constraints == v1.constraints  # immutable
    assert v2.hashes().system_prompt_hash != v1.hashes().system_prompt_hash
    assert v2.hashes().tools_hash == v1.hashes().tools_hash

    rollouts = q.rollouts(lineage_a)
    assert [(r.cycle, r.status) for r in rollouts[:2]] == [(1, "completed"), (2, "completed")]
    out1 = q.artifact_text(f"{rollouts[0].id}:artifact")
    out2 = q.artifact_text(f"{rollouts[1].id}:artifact")
    assert len(out2.split()) < len(out1.split()) / 3
    assert all(line.startswith("- ") for line in out2.splitlines())
    assert not any(line.startswith("- ") for line in out1.splitlines())

    attempts = q.attempts(rollouts[1].id)
    assert [a.status for a in attempts] == ["succeeded"]
    assert attempts[0].agent_version == 2 and attempts[0].max_tokens == v2.parameters.max_tokens
    assert attempts[0].system_prompt_hash == v2.hashes().system_prompt_hash
    spans = q.spans(attempts[0].id)
    assert [s.type for s in spans] == ["llm_call", "output"]
    assert spans[0].prompt_tokens and spans[0].completion_tokens

    evaluations = q.evaluations(lineage_a)
    assert [(e.cycle, e.score, e.rater) for e in evaluations] == [(1, 3, "ana"), (2, 8, None)]

    (record,) = q.evolution_records(lineage_a)
    assert (record.from_version, record.to_version) == (1, 2)
    assert record.trigger_comment == "Way too long, wanted quick bullets"
    analysis = json.loads(record.score_analysis)
    assert {a["aspect"] for a in analysis["aspects"]} >= {"length", "format"}
    credit = json.loads(record.credit_assignment)
    assert any(c["blame"] == "high" for c in credit["prompt"])
    changes = json.loads(record.changes)
    assert {(c["component"], c["change_type"]) for c in changes} >= {
        ("systemPrompt", "modify"),
        ("systemPrompt", "add"),
    }
    # the token budget is a ceiling: a length wish without a hard limit never moves it
    assert ("parameters", "modify") not in {(c["component"], c["change_type"]) for c in changes}
    assert record.hypothesis
    assert (record.next_score, record.score_delta, record.hypothesis_validated) == (8, 5, True)

    types = Counter(e.event_type for e in q.events(lineage_a))
    for event_type in (
        "lineage.created",
        "agent.created",
        "agent.evolved",
        "rollout.started",
        "attempt.started",
        "attempt.span_recorded",
        "attempt.completed",
        "artifact.created",
        "artifact.scored",
        "evolution.outcome",
    ):
        assert types[event_type] >= 1, event_type

    # identical payloads are stored once: both lineages got the same input and prompt
    b_attempt = q.attempts(q.rollouts(spec.lineage_id("B"))[0].id)[0]
    assert b_attempt.input_hash == q.attempts(rollouts[0].id)[0].input_hash
    assert b_attempt.system_prompt_hash == q.attempts(rollouts[0].id)[0].system_prompt_hash
    references = []
    for event in q.events():
        references.append(event.payload_hash)
        references += [v for k, v in event.payload.items() if k.endswith("Hash")]
    stored = {row.hash for row in q._all(select(PayloadBlob))}
    assert set(references) <= stored  # every reference resolves
    assert len(stored) < len(references)  # and repeats were stored once
    assert Counter(references)[b_attempt.input_hash] >= 4  # 2 lineages x (rollout + attempt)


@pytest.mark.every_backend
async def test_a_lineage_started_again_after_it_stopped_resumes_at_its_latest_version_and_cycle(
    client, store, settings, run_worker
):
    spec = make_spec(labels=("A",))
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 3, "comment": "Way too long, wanted quick bullets"})
        assert (await wait_for_state(handle, awaiting(2))).agent_version == 2
        await handle.signal("stop")
        assert (await handle.result()).status == "stopped"

        (again,) = await start_session(client, spec, settings.task_queue)
        assert again.result_run_id != handle.result_run_id  # a new run, not the stopped one
        state = await wait_for_state(again, awaiting(3))
        assert state.agent_version == 2  # the evolved agent, not the spec's v1

    q = store.queries
    ran = [(r.cycle, q.attempts(r.id)[0].agent_version) for r in q.rollouts(spec.lineage_id("A"))]
    assert ran == [(1, 1), (2, 2), (3, 2)]


def _ref(agent_id: str, version: int):
    from domain.agent import AgentRef

    return AgentRef(agent_id=agent_id, version=version)


async def test_locked_lineage_keeps_producing_but_stops_evolving(
    client, store, settings, run_worker
):
    spec = make_spec(labels=("A", "B"))
    async with run_worker():
        handle_a, handle_b = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle_b, awaiting(1))
        await handle_b.signal("score", {"score": 4})
        await wait_for_state(handle_b, awaiting(2))
        await handle_a.signal("lock", {"reason": "the winner"})
        await wait_for_state(handle_a, lambda s: s.locked)
        await handle_a.signal("score", {"score": 2, "comment": "way too long"})
        state = await wait_for_state(handle_a, awaiting(2))
        assert state.agent_version == 1  # no evolution while locked
        await handle_a.signal("unlock", {})
        await wait_for_state(handle_a, lambda s: not s.locked)
        lineage_a = spec.lineage_id("A")
        await eventually(lambda: store.queries.lineage(lineage_a).locked is False)

    lineage_a = spec.lineage_id("A")
    assert store.queries.evolution_records(lineage_a) == []
    (locked,) = store.queries.events(lineage_a, ["lineage.locked"])
    assert locked.payload["competitorScores"] == {spec.lineage_id("B"): 4}
    assert "preference_signal" in locked.tags
    assert store.queries.lineage(lineage_a).locked is False
    assert len(store.queries.events(lineage_a, ["lineage.unlocked"])) == 1


async def test_directives_shape_the_next_evolution(client, store, settings, run_worker):
    spec = make_spec()
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("directive", {"kind": "sticky", "content": "Always cite one source."})
        await handle.signal("directive", {"kind": "oneshot", "content": "Mention the budget."})
        await handle.signal("directive", {"kind": "forever", "content": "x"})
        await wait_for_state(handle, lambda s: len(s.oneshot_directives) == 1)
        await handle.signal("score", {"score": 5, "comment": "too long"})
        state = await wait_for_state(handle, awaiting(2))
        assert state.oneshot_directives == []  # used once
        assert state.sticky_directives == ["Always cite one source."]
        lineage = spec.lineage_id("A")
        await eventually(lambda: len(store.queries.directives(lineage)) == 2)
        await eventually(lambda: len(store.queries.rejected_feedback(lineage)) == 1)

    v2 = store.queries.agent_definition(_ref(lineage, 2))
    assert "Always cite one source." in v2.system_prompt
    assert "Mention the budget." in v2.system_prompt
    assert [d.kind for d in store.queries.directives(lineage)] == ["sticky", "oneshot"]
    (rejected,) = store.queries.rejected_feedback(lineage)
    assert rejected.kind == "directive" and "kind" in rejected.reason


async def test_await_output_returns_once_the_next_output_awaits_its_score(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec()
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        first = await handle.execute_update(LineageWorkflow.await_output, 1)
        assert (first.status, first.cycle, first.agent_version) == ("awaiting_score", 1, 1)
        assert first.latest_output_preview
        waiting = asyncio.create_task(handle.execute_update(LineageWorkflow.await_output, 2))
        await asyncio.sleep(1)
        assert not waiting.done()  # cycle 2 has not run: nothing to return yet
        with pytest.raises(WorkflowUpdateFailedError) as failure:
            await handle.execute_update(LineageWorkflow.await_output, 0)
        assert "cycle: expected a cycle number >= 1, got 0" in str(failure.value.cause)
        await handle.signal("score", {"score": 4, "comment": "too long"})
        released = await asyncio.wait_for(waiting, timeout=30)
        if released.cycle < 2:  # the run continued as new (the suite suggests it early)
            assert released.status == "training"
        second = await asyncio.wait_for(await_output(handle, 2), timeout=30)
        assert (second.status, second.cycle, second.agent_version) == ("awaiting_score", 2, 2)
        assert [p.score for p in second.score_history] == [4]
        assert len(store.queries.artifacts(lineage)) == 2  # cycle 2's output is in the store
        # From the CLI: blocks until the output is there, prints the state.
        cli = await temporal_cli(
            temporal_address,
            *("workflow", "update", "execute", "--workflow-id", handle.id),
            *("--name", "await_output", "--input", "2", "--output", "json"),
        )
        assert cli.returncode == 0, cli.stderr
        assert '"awaiting_score"' in cli.stdout
        # A stopped lineage releases whoever waits for an output it will never produce.
        never = asyncio.create_task(handle.execute_update(LineageWorkflow.await_output, 5))
        await asyncio.sleep(0.5)
        await handle.signal("stop")
        stopped = await asyncio.wait_for(never, timeout=30)
        assert (stopped.status, stopped.cycle) == ("stopped", 2)


async def test_stop_ends_the_lineage(client, store, settings, run_worker):
    spec = make_spec()
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("stop")
        result = await asyncio.wait_for(handle.result(), timeout=30)
    assert result.status == "stopped" and result.cycles == 1


async def test_waiting_for_outputs_never_locks_out_scoring(client, settings, run_worker):
    # Temporal admits ten updates in flight per workflow: waiters for far-off cycles are
    # refused, at most five wait at once, and submit_score always gets through
    spec = make_spec()
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        for _ in range(10):
            with pytest.raises(WorkflowUpdateFailedError) as far:
                await handle.execute_update(LineageWorkflow.await_output, 10**6)
        assert "more than 100 cycles ahead" in str(far.value.cause)
        waiters = [
            asyncio.create_task(handle.execute_update(LineageWorkflow.await_output, 2))
            for _ in range(5)
        ]
        await asyncio.sleep(1.0)
        with pytest.raises(WorkflowUpdateFailedError) as crowded:
            await handle.execute_update(LineageWorkflow.await_output, 2)
        assert "5 callers already wait" in str(crowded.value.cause)
        accepted = await handle.execute_update(
            LineageWorkflow.submit_score, {"score": 6, "comment": "fine"}
        )
        assert accepted.score == 6
        # every waiter returns: with cycle 2's output, or "call again" if the run continued
        # as new in between
        states = await asyncio.wait_for(asyncio.gather(*waiters), timeout=30)
        assert {s.cycle for s in states} <= {1, 2}
        assert (await asyncio.wait_for(await_output(handle, 2), timeout=30)).cycle == 2


def inbox_cli(temporal_address: str, database_url: str) -> list[tuple[str, int]]:
    """`training-camp inbox` as a user runs it: (workflow id, cycle) of each row, in order
    (each row's output id checked)."""
    shown = starter_cli(
        "inbox", temporal_address=temporal_address, database_url=database_url, columns=200
    )
    cycles, ids, outputs = {}, {}, {}
    for line in shown.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 6 and cells[0].isdigit():
            cycles[cells[0]] = int(cells[2])
        # beneath the table, each row's ids whole: "#1 s-…-A (workflow lineage-s-…-A, output
        # s-…-A:c1)", the output's id, which a score names, its lineage's and its cycle's
        if found := re.fullmatch(r"#(\d+) (\S+) \(workflow (\S+), output (\S+)\)", line):
            ids[found.group(1)] = found.group(3)
            outputs[found.group(1)] = (found.group(2), found.group(4))
    for n, cycle in cycles.items():
        lineage, output_id = outputs[n]
        assert output_id == f"{lineage}:c{cycle}", (lineage, output_id, cycle)
    return [(ids[n], cycle) for n, cycle in cycles.items()]


async def test_the_inbox_lists_what_awaits_a_score_and_visibility_the_lifecycle(
    client, store, settings, run_worker, temporal_address
):
    # A cycle writes nothing to Temporal's visibility store: TrainingCampStatus says running
    # while a lineage produces or awaits a score; the inbox (Temporal for which lineages are
    # live, the store for which outputs no score has reached) lists what awaits one.
    spec = make_spec(labels=("A", "B"))
    url = str(store.engine.url)
    async with run_worker():
        a, b = await start_session(client, spec, settings.task_queue)
        await wait_for_state(a, awaiting(1))
        await wait_for_state(b, awaiting(1))
        await eventually(lambda: len(inbox_cli(temporal_address, url)) >= 2, timeout=30)
        assert sorted(inbox_cli(temporal_address, url)) == [(a.id, 1), (b.id, 1)]
        # the Web UI's current details (and the CLI's) say what visibility no longer does
        details = await temporal_cli(
            temporal_address, "workflow", "metadata", "--workflow-id", b.id
        )
        assert details.returncode == 0, details.stderr
        assert "awaiting score: cycle 1, agent v1" in details.stdout
        await a.signal("score", {"score": 7})
        await wait_for_state(a, awaiting(2))
        assert inbox_cli(temporal_address, url) == [(b.id, 1), (a.id, 2)]  # oldest first
        await b.signal("stop")
        await b.result()

        async def status_of(handle) -> str | None:
            listed = [
                e.search_attributes.get("TrainingCampStatus")
                async for e in client.list_workflows(f'WorkflowId="{handle.id}"')
            ]
            return listed[0][0] if listed and listed[0] else None

        statuses: dict[str, str | None] = {}

        async def settled() -> bool:
            statuses.update({"A": await status_of(a), "B": await status_of(b)})
            return statuses == {"A": "running", "B": "stopped"}

        deadline = asyncio.get_running_loop().time() + 30
        while not await settled():
            assert asyncio.get_running_loop().time() < deadline, statuses
            await asyncio.sleep(0.2)
        assert inbox_cli(temporal_address, url) == [(a.id, 2)]
        history = await a.fetch_history()  # this run's (the suite continues as new early)
    upserts = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    # its patch marker's and the status's first value, however many cycles it ran
    assert len(upserts) <= 2, upserts
