"""What reviewers do over several cycles, through Temporal: go back to the first version or to
any named one (byte for byte), take back one wish of several, ask for less again with a share
measured on the output they read, bring back what a trim removed, and push one family five
times without the prompt growing a second instruction for it. The comments are this file's own
wording."""

from __future__ import annotations

import re

from client import start_session
from domain.agent import AgentRef
from domain.prompt_segments import segments
from tests.conftest import awaiting, make_spec, wait_for_state
from trainer.credit_assignment import families_of

QUESTIONS = [
    "Explain how a heat pump heats a house in winter.",
    "Explain what a credit score measures.",
    "Explain how vaccines train the immune system.",
    "Explain why the sky is blue.",
    "Explain how a bill becomes law.",
    "Explain what inflation does to savings.",
    "Explain how tides work.",
]
NEUTRAL = "You are a helpful assistant."


async def scored(handle, cycle: int, value: float, comment: str):
    await wait_for_state(handle, awaiting(cycle))
    await handle.signal("score", {"score": value, "comment": comment, "rater": "ines"})
    return await wait_for_state(handle, awaiting(cycle + 1))


def version(store, lineage: str, number: int):
    return store.queries.agent_definition(AgentRef(agent_id=lineage, version=number))


def carrying(prompt: str, family: str) -> list[str]:
    """The instructions asking for ``family`` (a one-line example of a form is not one)."""
    return [
        s for s in segments(prompt) if family in families_of(s) and not s.startswith("Like this:")
    ]


async def test_going_back_to_the_start_and_to_a_named_version_is_byte_identical(
    client, store, settings, run_worker
):
    spec = make_spec(inputs=QUESTIONS, max_tokens=900)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await scored(handle, 1, 4, "Way more than I wanted to read.")
        await scored(handle, 2, 5, "Lay the key numbers out in a table.")
        third = await scored(handle, 3, 5, "Could it sound a little kinder?")
        assert third.agent_version == 4
        back = await scored(handle, 4, 3, "All three edits missed. Back to square one, please.")
        again = await scored(handle, 5, 4, "Actually version 3 was the one. Go back to v3.")
    v1, v3 = version(store, lineage, 1), version(store, lineage, 3)
    assert back.agent_version == 5 and again.agent_version == 6
    v5, v6 = version(store, lineage, 5), version(store, lineage, 6)
    for reverted, target in ((v5, v1), (v6, v3)):
        assert reverted.system_prompt == target.system_prompt  # byte for byte
        assert reverted.parameters == target.parameters
        assert (reverted.tools, reverted.flow) == (target.tools, target.flow)
    assert v1.system_prompt != version(store, lineage, 4).system_prompt  # there was a change
    # what is asked for follows the version gone back to: nothing at the start
    assert back.asked_for == []
    assert "back to v1" in back.last_evolution and "back to v3" in again.last_evolution
    # the record names the step a revert: every change it made is a rollback's
    record = store.queries.evolution_records(lineage)[-2]
    assert (record.from_version, record.to_version) == (4, 5)


async def test_undoing_a_revert_goes_back_to_the_version_it_left(
    client, store, settings, run_worker
):
    """A table asked for (v2), then back to the start (v3): the next score undoes that — v4
    is v2 again, byte for byte, with the table asked for again; the revert's own record holds
    its verdict, refuted, where before a revert was never judged ("nothing to undo")."""
    spec = make_spec(inputs=QUESTIONS, prompt=NEUTRAL)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await scored(handle, 1, 4, "Lay the key numbers out in a table.")
        back = await scored(handle, 2, 5, "Hmm, no. Back to square one, please.")
        undone = await scored(handle, 3, 3, "Going back was a mistake; undo that.")
    v2, v4 = version(store, lineage, 2), version(store, lineage, 4)
    assert (back.agent_version, undone.agent_version) == (3, 4)
    assert back.asked_for == [] and "table" in undone.asked_for
    assert (v4.system_prompt, v4.parameters) == (v2.system_prompt, v2.parameters)
    assert "back to v2" in undone.last_evolution
    revert = next(r for r in store.queries.evolution_records(lineage) if r.to_version == 3)
    assert revert.hypothesis_validated is False
    assert revert.outcome_reason.startswith(
        "refuted: back to an earlier version: the reviewer undoes the last change"
    )


async def test_taking_back_one_wish_of_a_comment_keeps_the_others(
    client, store, settings, run_worker
):
    spec = make_spec(inputs=QUESTIONS, prompt=NEUTRAL)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await scored(handle, 1, 4, "It drags on, and not one claim has a source.")
        both = version(store, lineage, 2).system_prompt
        assert carrying(both, "shorter") and carrying(both, "cite_sources")
        state = await scored(
            handle,
            2,
            6,
            "The citations help. Scratch what I said about the length though; keep the citations.",
        )
    after = version(store, lineage, state.agent_version).system_prompt
    assert state.agent_version == 3
    assert not carrying(after, "shorter")  # the length wish, taken back
    assert carrying(after, "cite_sources") == carrying(both, "cite_sources")  # kept as it was
    assert "cite_sources" in state.asked_for and "shorter" not in state.asked_for


async def test_another_share_off_is_measured_on_the_output_the_rater_read(
    client, store, settings, run_worker
):
    spec = make_spec(inputs=QUESTIONS, prompt=NEUTRAL)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await scored(handle, 1, 4, "Halve it.")
        await wait_for_state(handle, awaiting(2))
        read = store.queries.artifacts(lineage)[-1]
        words = len(store.queries.artifact_text(read.id).split())
        state = await scored(handle, 2, 5, "Better. Another third off, please.")
    prompt = version(store, lineage, state.agent_version).system_prompt
    (length,) = carrying(prompt, "shorter")  # one length instruction, rewritten
    stated = int(re.search(r"about (\d+) words", length).group(1))
    assert abs(stated - words * 2 / 3) <= max(3, words * 0.05), (stated, words)


async def test_what_a_trim_removed_comes_back_when_the_rater_refers_to_it(
    client, store, settings, run_worker
):
    spec = make_spec(inputs=QUESTIONS, prompt=NEUTRAL)
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await scored(handle, 1, 5, "Show it with a real-world example.")
        trimmed = await scored(handle, 2, 5, "Lose the example and tighten the whole thing.")
        assert not carrying(version(store, lineage, trimmed.agent_version).system_prompt, "example")
        state = await scored(
            handle, 3, 5, "That example you took out, put it back, but keep it short."
        )
    prompt = version(store, lineage, state.agent_version).system_prompt
    (example,) = carrying(prompt, "example")
    assert "one" in example.lower()  # brought back, once
    assert carrying(prompt, "shorter") == carrying(
        version(store, lineage, trimmed.agent_version).system_prompt, "shorter"
    )  # "keep it short" sized the example, not the answer again


async def test_five_pushes_on_one_family_leave_one_instruction_for_it(
    client, store, settings, run_worker
):
    spec = make_spec(inputs=QUESTIONS, prompt=NEUTRAL)
    lineage = spec.lineage_id("A")
    comments = [
        "Too wordy.",
        "Still too wordy.",
        "Shorter again, please.",
        "Get it down to 90 words.",
        "Shorter still.",
    ]
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        steps = []
        for cycle, comment in enumerate(comments, start=1):
            state = await scored(handle, cycle, 4, comment)
            steps.append(state.last_evolution)
    prompt = version(store, lineage, state.agent_version).system_prompt
    assert len(carrying(prompt, "shorter")) == 1, (segments(prompt), steps)
    (length,) = carrying(prompt, "shorter")
    assert "90 words" in length
    assert sum(s.startswith("Above all") for s in segments(prompt)) <= 1
