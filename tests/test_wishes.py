"""Wishes as typed data, through the dev server: a reviewer who asks for a thing, approves it,
takes it back and asks for an amount; and the token budget as a ceiling that must never cut an
answer (every attempt records whether the model stopped at the limit)."""

from __future__ import annotations

from client import start_session
from domain.agent import AgentRef
from tests.conftest import awaiting, make_spec, wait_for_state

NEUTRAL = "You are a helpful assistant. Answer the question."


async def score(handle, cycle: int, value: float, comment: str):
    await wait_for_state(handle, awaiting(cycle))
    return await handle.execute_update("submit_score", {"score": value, "comment": comment})


def verdicts(store, lineage_id: str) -> list[dict[str, str]]:
    """Each judged evolution's verdict per family, oldest first, from the store's log."""
    return [
        {a["family"]: a["verdict"] for a in e.payload["aspects"]}
        for e in store.queries.events(lineage_id, ["evolution.outcome"])
    ]


def current_agent(store, lineage_id: str):
    """(version, definition) of the lineage's latest agent."""
    latest = store.queries.agent_versions(lineage_id)[-1]
    ref = AgentRef(agent_id=latest.agent_id, version=latest.version)
    return latest.version, store.queries.agent_definition(ref)


async def test_ask_approve_take_back_and_an_amount(client, store, settings, run_worker):
    spec = make_spec(prompt=NEUTRAL, max_tokens=2048)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        # 1. asks for two things, one of them counted
        await score(handle, 1, 4, "Could you sound kinder? And I'd like a single worked example.")
        # 2. approves both by name, then asks for an amount of the length
        await score(handle, 2, 6, "The kinder voice works. Now trim it to about half, please.")
        # 3. approves the length, takes the example back
        await score(handle, 3, 7, "That length is fine now. Actually, lose the example.")
        # 4. praise only, at a high score: nothing changes
        await score(handle, 4, 9, "Warm, short, and nothing made up this time.")
        state = await wait_for_state(handle, awaiting(5))
    version, agent = current_agent(store, lineage)
    assert version == state.agent_version
    prompt = agent.system_prompt
    # the kind voice stays, the example is gone, the amount is stated in words
    assert "warmly" in prompt.lower()
    assert "example" not in prompt.lower()
    assert "about" in prompt and "words" in prompt  # "Keep answers short: about N words."
    # the budget is a ceiling: a length wish without a hard limit never lowered it
    assert agent.parameters.max_tokens == 2048
    judged = verdicts(store, lineage)
    # cycle 2 validates both by the reviewer's words; cycle 3 validates the length and the
    # example change is refuted by the take-back; the praise at cycle 4 validates the rest
    assert judged[0] == {"warmer": "validated", "example": "validated"}
    assert judged[1] == {"shorter": "validated"}
    # nothing the reviewer asked for is in asked_for once taken back
    assert "example" not in state.asked_for and "warmer" in state.asked_for
    # every attempt finished on its own: none stopped at the token limit
    attempts = [
        a for rollout in store.queries.rollouts(lineage) for a in store.queries.attempts(rollout.id)
    ]
    assert attempts and all(a.stop_reason != "max_tokens" for a in attempts)
    assert not state.latest_output_cut_off


async def test_an_output_cut_off_at_the_token_limit_raises_the_ceiling(
    client, store, settings, run_worker
):
    """An answer the model stopped at the token limit is recorded as cut off, says so in
    `state`, and a reviewer missing what the cut took gets more room, not firmer words."""
    # no revision inside the cycle: the attempts are the cycles' own (tests/test_output_checks.py)
    spec = make_spec(prompt=NEUTRAL, max_tokens=200, options={"revisionAttempts": 0})
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        first = await wait_for_state(handle, awaiting(1))
        await score(handle, 1, 5, "Please end with a recap of the main points.")
        second = await wait_for_state(handle, awaiting(2))
        await score(handle, 2, 5, "Still no recap at the end.")
        third = await wait_for_state(handle, awaiting(3))
    # the attempts say why the model stopped, and state tells the rater
    stops = [
        a.stop_reason
        for rollout in store.queries.rollouts(lineage)
        for a in store.queries.attempts(rollout.id)
    ]
    assert stops == ["max_tokens", "max_tokens", "end_turn"]
    assert first.latest_output_cut_off and second.latest_output_cut_off
    assert not third.latest_output_cut_off
    # the recap asked again on a cut-off output: untested, and the ceiling doubled (at least)
    (judged,) = [
        e.payload["aspects"] for e in store.queries.events(lineage, ["evolution.outcome"])
    ][-1:]
    assert {a["family"]: a["verdict"] for a in judged} == {"summary_at_end": "untested"}
    assert "cut off at the token limit" in judged[0]["reason"]
    _, agent = current_agent(store, lineage)
    assert agent.parameters.max_tokens >= 400
    assert "Above all" not in agent.system_prompt  # not made firmer
    assert "cut off at the token limit" in third.last_evolution
    # the third output, with room, has its recap
    text = store.queries.artifact_text(store.queries.artifacts(lineage)[-1].id)
    assert "Summary:" in text


async def test_the_reading_is_said_back_in_state(client, store, settings, run_worker):
    spec = make_spec(prompt=NEUTRAL)
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await score(handle, 1, 4, "Warm it up a little, and add exactly one short example.")
        state = await wait_for_state(handle, awaiting(2))
        await score(handle, 2, 6, "Kinder now, good. On second thoughts, scrap the example.")
        later = await wait_for_state(handle, awaiting(3))
    assert state.last_reading.startswith("Read as: warmer")
    assert "one example ('exactly one short example')" in state.last_reading  # the chip's words
    # a take-back with nothing asked is read as what was asked, never "no change asked for"
    assert later.last_reading.startswith("Read as: take back examples ('On second thoughts")
    assert "kept: warmer" in later.last_reading


async def test_structured_wants_are_taken_as_given_and_bad_ones_refused(
    client, store, settings, run_worker
):
    from temporalio.client import WorkflowUpdateFailedError

    spec = make_spec(prompt=NEUTRAL, max_tokens=2048)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        # an unknown family is refused with the reason, and nothing changes
        try:
            await handle.execute_update(
                "submit_score", {"score": 4, "comment": "meh", "wants": ["sparkly"]}
            )
            raise AssertionError("an unknown want was accepted")
        except WorkflowUpdateFailedError as exc:
            assert "unknown family 'sparkly'" in str(exc.cause)
        accepted = await handle.execute_update(
            "submit_score",
            {
                "score": 4,
                "comment": "see the chips",  # stored, not read
                "wants": ["warmer", "example:1", "shorter:half"],
            },
        )
        assert accepted["wants"] == ["warmer", "example:1", "shorter:half"]
        state = await wait_for_state(handle, awaiting(2))
        await handle.execute_update("submit_score", {"score": 6, "wants": ["remove:example"]})
        later = await wait_for_state(handle, awaiting(3))
    _, agent = current_agent(store, lineage)
    assert "Write warmly" in agent.system_prompt
    assert "example" not in agent.system_prompt.lower()
    assert "about" in agent.system_prompt and "words" in agent.system_prompt
    # wants sent are said back as sent: nothing quoted from the comment, which is not read
    assert state.last_reading.startswith("Read as: warmer, one example, shorter: about half")
    assert "see the chips" not in state.last_reading and "'wants" not in state.last_reading
    assert later.last_reading == "Read as: take back examples"
    (first, _) = store.queries.evaluations(lineage)
    assert (first.score, first.comment) == (4, "see the chips")
