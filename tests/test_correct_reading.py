"""Correcting a reading, through Temporal, as a rater does it: a comment the trainer misreads,
the correction from the command line, the same cycle run again on the corrected version, the
correction in the store and in the export, and a later comment close to it read as corrected."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateFailedError

from client import correction_outcome, start_session
from domain.agent import AgentRef
from tests.conftest import (
    awaiting,
    exported_corrections,
    make_spec,
    threaded_starter_cli,
    training_data_cli,
    wait_for_state,
)
from workflows.lineage import LineageWorkflow

QUESTIONS = [
    "Explain how to pick a first programming language.",
    "Explain what a mortgage offset account is.",
    "Explain how to prepare for a job interview.",
]
# Read by the cue tables as a wish about hedging; the rater meant warmth
MISREAD = "This sounds like a legal disclaimer."
LATER = "Still sounds like a legal disclaimer to me."


async def test_a_misread_comment_is_corrected_from_the_cli_and_the_cycle_runs_again(
    client, store, settings, run_worker, temporal_address, tmp_path: Path
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    cli = threaded_starter_cli(temporal_address, settings.database_url)

    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 4, "comment": MISREAD, "rater": "ana"})
        misread = await wait_for_state(handle, awaiting(2))
        assert "warmer" not in misread.last_wants and misread.last_wants
        assert misread.agent_version == 2
        first_output = store.queries.artifacts(lineage)[-1]
        assert first_output.cycle == 2 and first_output.agent_version == 2

        # nothing scored can be corrected into an unknown family: refused, nothing changed
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(
                LineageWorkflow.correct_reading, {"wants": ["wrmer"], "rater": "ana", "cycle": 1}
            )
        assert "unknown family 'wrmer'" in str(refused.value.cause)

        said = await cli("correct", lineage, "--want", "warmer", "--rater", "ana")
        assert said.splitlines()[0].startswith("Read as: warmer")
        assert "cycle 2 runs again on v3" in said
        corrected = await wait_for_state(handle, lambda s: awaiting(2)(s) and s.agent_version == 3)
        assert corrected.last_wants == ["warmer"]
        assert corrected.last_reading.startswith("Read as: warmer")
        assert corrected.last_reading.endswith("; corrected by ana")
        # planned on v1, the version the corrected score scored: the log says so
        assert corrected.last_evolution.startswith("corrected: v2→v3 (rebuilt from v1): ")
        # the score judged no change (cycle 1 ran the first version): no verdict, before or after
        assert misread.last_verdict is None and corrected.last_verdict is None
        # `output` prints the output now awaiting a score, and how the comment was read
        shown = (await cli("output", lineage)).splitlines()
        assert shown[-1].startswith("Read as: warmer") and "corrected by ana" in shown[-1]
        assert store.queries.artifact_text(store.queries.artifacts(lineage)[-1].id) in "\n".join(
            shown
        )

        # blame names the version the correction was rebuilt from, not the misread one
        blamed = (await cli("blame", lineage)).splitlines()
        assert any("warm" in line.lower() and "v3, rebuilt from v1" in line for line in blamed)

        # sent again (a double click): the same correction, nothing made twice
        again = await handle.execute_update(
            LineageWorkflow.correct_reading, {"wants": ["WARMER"], "rater": "ana", "cycle": 1}
        )
        assert (again.done.agent_version, again.done.rerun_cycle, again.done.cycle) == (3, 2, 1)

        # the cycle ran again on the corrected version: its output is the one awaiting a score
        outputs = [a for a in store.queries.artifacts(lineage) if a.cycle == 2]
        assert [a.agent_version for a in outputs] == [2, 3]
        assert outputs[-1].rollout_id.endswith(":c2-v3")
        (evolution,) = [r for r in store.queries.evolution_records(lineage) if r.to_version == 3]
        assert evolution.kind == "correction" and evolution.from_version == 2
        misread_prompt = store.queries.agent_definition(AgentRef(agent_id=lineage, version=2))
        corrected_prompt = store.queries.agent_definition(AgentRef(agent_id=lineage, version=3))
        assert corrected_prompt.system_prompt != misread_prompt.system_prompt
        assert "warm" in corrected_prompt.system_prompt.lower()

        (example,) = store.queries.labelled_examples(spec.session_id)
        assert (example.comment, example.corrected, example.rater) == (MISREAD, ["warmer"], "ana")
        assert example.read_as == misread.last_wants

        # a later comment close to the corrected one is read the way the correction said
        await handle.signal("score", {"score": 5, "comment": LATER, "rater": "ana"})
        later = await wait_for_state(handle, awaiting(3))
    assert "warmer" in later.last_wants
    # the corrected example is quoted as the reason
    assert f"as corrected on '{MISREAD[:18]}" in later.last_reading

    rows = await asyncio.to_thread(exported_corrections, settings.database_url, tmp_path)
    assert [(r["comment"], r["corrected"], r["rater"]) for r in rows] == [
        (MISREAD, ["warmer"], "ana")
    ]
    history = await asyncio.to_thread(
        training_data_cli, "history", lineage, url=settings.database_url, env={"COLUMNS": "1000"}
    )
    (evolved,) = [line for line in history.stdout.splitlines() if "v2 → v3" in line]
    assert "(correction, rebuilt from v1)" in evolved


async def test_a_correction_that_makes_nothing_new_says_so(client, store, settings, run_worker):
    spec = make_spec(inputs=QUESTIONS)
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 4, "comment": MISREAD, "rater": "ana"})
        misread = await wait_for_state(handle, awaiting(2))
        # "corrected" to what it was read as: the same agent, no new version, no re-run
        accepted = await handle.execute_update(
            LineageWorkflow.correct_reading,
            {"wants": misread.last_wants, "rater": "ana", "cycle": 1},
        )
        done = await correction_outcome(handle, accepted)
        state = await handle.query(LineageWorkflow.state)
    assert done.outcome() == "nothing changes: the corrected reading makes v2 again"
    assert (done.rerun_cycle, state.agent_version, state.cycle) == (None, 2, 2)
    assert (
        state.last_evolution == "corrected: nothing changes: the corrected reading makes v2 again"
    )
    assert state.last_reading.endswith("; corrected by ana")
    assert [a.agent_version for a in store.queries.artifacts(spec.lineage_id("A"))] == [1, 2]


async def test_a_correction_before_any_score_or_with_a_bad_amount_is_refused(
    client, store, settings, run_worker
):
    spec = make_spec(inputs=QUESTIONS)
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        with pytest.raises(WorkflowUpdateFailedError) as nothing_yet:
            await handle.execute_update(
                LineageWorkflow.correct_reading, {"wants": ["warmer"], "rater": "ana", "cycle": 1}
            )
        assert "no score on this lineage has been read yet" in str(nothing_yet.value.cause)
        await handle.signal("score", {"score": 4, "comment": "Too long.", "rater": "ana"})
        await wait_for_state(handle, awaiting(2))
        for payload, reason in [
            ({"wants": ["shorter:lots"], "rater": "ana"}, "an amount is half"),
            ({"wants": ["warmer"]}, "rater: Field required"),
            ({"rater": "ana"}, "wants: field required"),
        ]:
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update(LineageWorkflow.correct_reading, payload)
            assert reason in str(refused.value.cause)
        state = await handle.query(LineageWorkflow.state)
    assert state.agent_version == 2 and state.status == "awaiting_score"
    assert store.queries.labelled_examples(spec.session_id) == []


async def test_a_correction_gives_the_verdict_again_and_undoes_a_rollback_it_caused(
    client, store, settings, run_worker
):
    spec = make_spec(inputs=QUESTIONS)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 3, "comment": "Far too long.", "rater": "ana"})
        await wait_for_state(handle, awaiting(2))
        # read as a wish for length, it refutes the change that made it shorter; the rater
        # meant depth within the length
        await handle.signal(
            "score", {"score": 7, "comment": "It feels thin now, more depth.", "rater": "ana"}
        )
        misread = await wait_for_state(handle, awaiting(3))
        assert misread.last_verdict.startswith("refuted: shorter")
        (first,) = [r for r in store.queries.evolution_records(lineage) if r.from_version == 1]
        assert store.queries.evolution_record(first.id).hypothesis_validated is False

        accepted = await handle.execute_update(
            LineageWorkflow.correct_reading, {"wants": ["keep:shorter"], "rater": "ana", "cycle": 2}
        )
        done = await correction_outcome(handle, accepted)
        assert (done.cycle, done.rerun_cycle, done.agent_version) == (2, 3, 4)
        corrected = await wait_for_state(handle, lambda s: awaiting(3)(s) and s.agent_version == 4)
    assert corrected.last_verdict.startswith("validated: shorter")
    assert store.queries.evolution_record(first.id).hypothesis_validated is True
    # v4 is v2 again: the rollback the misreading made (v3) is undone
    v2, v4 = (store.queries.agent_definition(AgentRef(agent_id=lineage, version=v)) for v in (2, 4))
    assert v4.system_prompt == v2.system_prompt
    assert corrected.last_evolution.startswith("corrected: v3→v4: back to v2")
