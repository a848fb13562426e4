"""A revision inside the cycle (runner/revision.py): what the model is told, how the offline
model answers it (it fixes what it is told and may still miss), and how the store records a
revision's attempt — the artifact the try that passes the most checks, a revision left running
by a dead worker marked lost like any attempt."""

from __future__ import annotations

import asyncio
import re

import pytest

from client import start_session
from domain.agent import AgentConstraints, AgentDefinition, AgentParameters
from domain.checks import ActiveWish, CheckResult, failed, passes
from domain.content_hash import content_hash
from domain.execution import Usage
from domain.trainer import Amount
from runner.model_backend import ChatMessage, ModelRequest
from runner.offline_model import OfflineModel
from runner.revision import REVISION_PROMPT, fix, reviser, revision_of
from store import Store
from store.records.attempt_records import CheckedTry
from tests.conftest import awaiting, make_spec, wait_for_state
from tests.fake_messages_api import FakeMessagesAPI, text_message
from tests.store_story import AGENT, register, spans_of, start_attempt
from tests.test_faults import MODEL, claude_settings
from tests.test_wish_checks import AGENTS, SPEC, answer
from trainer import cycle_step
from trainer.backends import RulesTrainer
from trainer.checks import Document, check_all
from trainer.cycle_step import LineageMemory

ABOUT_100 = ActiveWish(
    family="shorter", amount=Amount(kind="limit", value=100), quote="about 100 words", cycle=1
)
NO_HEDGING = ActiveWish(family="direct", quote="no hedging", cycle=1)


def revise(label: str | AgentDefinition, text: str, wishes: list[ActiveWish]) -> str:
    """The offline model's revision of ``text`` as agent ``label`` (or that agent), told what
    failed."""
    base = AGENTS[label] if isinstance(label, str) else label
    agent = reviser(base, failed(check_all(text, wishes)))
    request = ModelRequest(
        model=agent.parameters.model,
        system=agent.system_prompt,
        max_tokens=agent.parameters.max_tokens,
        temperature=agent.parameters.temperature,
        messages=[ChatMessage(role="user", content=REVISION_PROMPT.format(input=text))],
    )
    return OfflineModel().reply(request).text


def test_the_model_is_told_which_checks_failed_and_by_how_much():
    text = answer("A", "Keep answers to about 100 words.", question=2)
    results = check_all(text, [ABOUT_100, NO_HEDGING])
    agent = reviser(AGENTS["A"], failed(results))
    words = Document.of(text).words
    assert agent.tools == [] and agent.flow == []  # one call: a revision, not a new run
    assert agent.system_prompt.startswith(AGENTS["A"].system_prompt)
    assert (
        f"- Make it about 100 words long: it has {words} words ({words - 100} words over "
        "(±15 % is 85 to 115 words))." in agent.system_prompt
    )
    assert "never write these phrases: 'it is worth noting'" in agent.system_prompt
    assert revision_of("L:c2:a1", 1) == "L:c2:a1:r1"


MARKED = "| A | B |\n|---|---|\n| at the end of the day | x |\n\n- one\n- two\n"
PLAIN = "There are several things to weigh here. We will look at each in turn."


@pytest.mark.parametrize(
    ("wish", "text", "told"),
    [
        (ActiveWish(family="table"), PLAIN, "Present it as a table"),
        (ActiveWish(family="table", action="remove"), MARKED, "without a table"),
        (ActiveWish(family="bullets", action="remove"), MARKED, "without bullet points"),
        (ActiveWish(family="prose"), MARKED, "flowing paragraphs only; no lists, no tables"),
        (ActiveWish(family="conclusion_first"), PLAIN, "Lead with the recommendation"),
        (ActiveWish(family="language", detail="German"), PLAIN, "Write the whole answer in German"),
        (
            ActiveWish(family="banned", action="remove", detail="at the end of the day"),
            MARKED,
            "never write these phrases: 'at the end of the day'",
        ),
    ],
)
def test_each_failed_check_is_said_as_a_fix(wish: ActiveWish, text: str, told: str):
    (result,) = check_all(text, [wish])
    assert not result.passed
    assert told in fix(result)


def test_the_offline_model_fixes_the_length_and_the_hedges_it_is_told_of():
    text = answer("A", "Keep answers to about 100 words.", question=2)
    assert passes(check_all(text, [ABOUT_100, NO_HEDGING])) == 0
    revised = revise("A", text, [ABOUT_100, NO_HEDGING])
    results = check_all(revised, [ABOUT_100, NO_HEDGING])
    assert [r.passed for r in results] == [True, True], [r.line() for r in results]
    # a revision keeps to the answer it revises: its sentences are the first answer's
    assert all(s in text for s in revised.split(". ")[:3])


def test_the_offline_model_turns_a_list_into_a_table_and_may_still_miss():
    bullets = answer("B", "Use bullet points, not paragraphs.", question=1)
    wishes = [ActiveWish(family="table"), ActiveWish(family="summary_at_end")]
    revised = revise("B", bullets, wishes)
    table, summary = check_all(revised, wishes)
    assert table.passed and Document.of(revised).bullet_items == 0
    assert not summary.passed  # what a rewrite cannot add, it misses: the card shows ✗


def test_a_numbered_answer_revised_keeps_one_number_a_line():
    # seen on the persona walk: a revision of a warm, numbered answer left "2. 1.", "4. 2."
    prompt = (
        "You are an expert analyst. Write warmly, with empathy for the reader's situation. "
        "Present any steps as a numbered list."
    )
    agent = AGENTS["A"].model_copy(update={"system_prompt": prompt})
    numbered = answer("A", prompt[len("You are an expert analyst. ") :], question=1)
    assert re.search(r"^1\. ", numbered, re.M) and not numbered.startswith("1.")
    about_60 = ActiveWish(
        family="shorter", amount=Amount(kind="limit", value=60), quote="about 60", cycle=1
    )
    lines = [line.strip() for line in revise(agent, numbered, [about_60]).splitlines()]
    assert re.match(r"^1\. \w", "\n".join(line for line in lines if line[:1].isdigit()))
    assert not [line for line in lines if re.fullmatch(r"[\d.\s]+", line)]
    assert not [line for line in lines if re.match(r"^\d+\.\s+\d+\.", line)]


@pytest.mark.every_backend
def test_the_artifact_is_the_try_that_passes_most_and_a_lost_revision_is_marked(store: Store):
    lineage, rollout = "s1-A", "s1-A:c1"
    (ih, *_) = register(store, lineage)
    first, revision = f"{rollout}:a1", revision_of(f"{rollout}:a1", 1)
    start_attempt(store, lineage, rollout, first, 1, ih)
    long_text, short_text = " ".join(["word"] * 300), " ".join(["word"] * 95)
    for attempt, text in ((first, long_text), (revision, short_text)):
        if attempt == revision:
            start_attempt(store, lineage, rollout, attempt, 1, ih)
        store.recorder.record_attempt_succeeded(
            session_id="s1",
            lineage_id=lineage,
            rollout_id=rollout,
            cycle=1,
            agent_version=1,
            attempt_id=attempt,
            artifact_id=f"{rollout}:artifact",
            output=text,
            spans=spans_of(attempt),
            usage=Usage(prompt_tokens=5, completion_tokens=9),
            duration_ms=7,
            artifact=False,
        )
    tried = [
        CheckedTry(attempt_id=a, content_hash=content_hash(t), checks=check_all(t, [ABOUT_100]))
        for a, t in ((first, long_text), (revision, short_text))
    ]
    for _ in range(2):  # a retried write writes nothing twice
        store.recorder.record_output_chosen(
            session_id="s1",
            lineage_id=lineage,
            rollout_id=rollout,
            cycle=1,
            agent_version=1,
            artifact_id=f"{rollout}:artifact",
            tried=tried,
            chosen=1,
        )
    artifact = store.queries.artifact(f"{rollout}:artifact")
    assert artifact.attempt_id == revision
    assert store.queries.artifact_text(artifact.id) == short_text
    found = store.queries.output_checks(lineage)[artifact.id]
    assert (
        found.revised
        and found.tries == 2
        and found.line() == ("✓ about 100 words (95) · revised once in the cycle")
    )
    assert store.queries.output_checks_of(lineage, artifact.id) == found
    assert store.queries.output_checks_of(lineage, "s1-A:c9:artifact") is None
    assert len(store.queries.events(lineage, ["output.checked"])) == 2
    # another cycle: its revision's worker died; the next Temporal attempt marks it lost
    other = "s1-A:c2"
    start_attempt(store, lineage, other, f"{other}:a1", 1, ih)
    start_attempt(store, lineage, other, revision_of(f"{other}:a1", 1), 1, ih)
    start_attempt(store, lineage, other, f"{other}:a2", 2, ih)
    status = {a.id: (a.status, a.error) for a in store.queries.attempts(other)}
    assert status[revision_of(f"{other}:a1", 1)][0] == "failed"
    assert "attempt lost" in (status[revision_of(f"{other}:a1", 1)][1] or "")
    assert status[f"{other}:a2"][0] == "running"
    assert AGENT.name and SPEC.inputs  # the example session's agents answer above


async def test_a_claude_agent_is_told_what_failed_and_its_revision_is_shown(
    client, store, settings, run_worker
):
    """Through the real `anthropic` SDK against the local Messages API: an output over the
    reviewer's hard limit is sent back with the check that failed and by how much, the model's
    revision is recorded as an attempt with its own model call, and it is the output shown."""
    spec = make_spec(model=MODEL)
    lineage = spec.lineage_id("A")
    long_answer = " ".join(["Long answer sentence with words."] * 24)  # 120 words
    short_answer = " ".join(["Short revised answer here."] * 8)  # 32 words
    with FakeMessagesAPI() as api:
        api.script = [
            (200, text_message(long_answer, MODEL)),  # cycle 1: nothing asked yet
            (200, text_message(long_answer, MODEL)),  # cycle 2: over the limit
            (200, text_message(short_answer, MODEL)),  # its revision
        ]
        async with run_worker(claude_settings(settings, api)):
            (handle,) = await start_session(client, spec, settings.task_queue)
            await wait_for_state(handle, awaiting(1))
            await handle.execute_update("submit_score", {"score": 4, "wants": ["shorter:50"]})
            state = await wait_for_state(handle, awaiting(2), timeout=60)
    assert state.latest_checklist == "✓ at most 50 words (32)" and state.latest_revised
    revision = api.requests[2]
    assert "- Use at most 50 words: it has 120 (70 words over the limit)." in revision["system"]
    assert revision["messages"] == [
        {"role": "user", "content": REVISION_PROMPT.format(input=long_answer)}
    ]
    attempts = {a.id: a for a in store.queries.attempts(f"{lineage}:c2")}
    assert set(attempts) == {f"{lineage}:c2:a1", f"{lineage}:c2:a1:r1"}
    calls = [
        s for s in store.queries.span_records(f"{lineage}:c2:a1:r1") if s.span_type == "llm_call"
    ]
    assert len(calls) == 1 and calls[0].output == short_answer
    artifact = store.queries.artifact(f"{lineage}:c2:artifact")
    assert store.queries.artifact_text(artifact.id) == short_answer


# ---- the lever a check pulls when its instruction is already in the prompt -------------------

WRITER = AgentDefinition(
    name="Writer",
    system_prompt="You are a helpful writer. Cover the question in depth. Write in a warm tone. "
    "Keep answers short: about 90 words.",
    parameters=AgentParameters(model="offline-analyst-1", temperature=0.7, max_tokens=1200),
    constraints=AgentConstraints(max_tokens=4096),
)
OVER = CheckResult(
    family="shorter", wish="about 90 words", passed=False, measure="131", value=131, target=90
)


def step(comment: str, own: list[CheckResult]):
    memory = LineageMemory(session_id="s", lineage_id="L", own_checks=own, cycle=3)
    return asyncio.run(cycle_step.take(RulesTrainer(), WRITER, memory, 6, comment))


def test_a_failed_check_moves_its_instruction_up_never_writes_it_twice():
    taken = step("Fine.", [OVER])
    assert taken.agent.system_prompt == (
        "You are a helpful writer. Keep answers short: about 90 words. Cover the question in "
        "depth. Write in a warm tone."
    )
    reasons = [c.reason for c in taken.plan.changes]
    assert all(r.startswith("check: about 90 words (131) failed") for r in reasons)

    def again(agent: AgentDefinition, cycle: int):
        memory = LineageMemory(session_id="s", lineage_id="L", own_checks=[OVER], cycle=cycle)
        return asyncio.run(cycle_step.take(RulesTrainer(), agent, memory, 6, "Fine."))

    # it leads now: failing again adds a one-line example of the wanted form, once
    second = again(taken.agent, 4)
    assert second.agent.system_prompt == (
        f"{taken.agent.system_prompt} Like this: about 90 words is 6 short sentences."
    )
    third = again(second.agent, 5)
    assert not third.changed
    assert any("already leads the prompt with an example" in r for r in third.report)
    assert third.agent.system_prompt.count("about 90 words") == 2  # the instruction, its example


def test_a_wish_the_comment_asks_for_again_takes_the_comments_way():
    taken = step("Still too long.", [OVER])
    prompt = taken.agent.system_prompt
    assert not any(c.reason.startswith("check: ") for c in taken.plan.changes)
    assert prompt.count("about 90 words") <= 1 and "Cover the question in depth." in prompt


def test_a_reviewer_content_with_the_answer_changes_nothing_even_after_a_failed_try():
    """The levers answer a failed check at a middling score; at a score of 8 with nothing
    asked ("That's right, I'll print it") the agent stays as it is."""
    memory = LineageMemory(session_id="s", lineage_id="L", own_checks=[OVER], cycle=3)
    content = asyncio.run(
        cycle_step.take(RulesTrainer(), WRITER, memory, 8, "That's right. I'll print it.")
    )
    assert not content.changed and content.agent == WRITER


def test_confirmed_wants_bind_the_step_no_lever_for_a_check_nobody_confirmed():
    """A rater who confirms "warmer" gets exactly that: the failed length check of an earlier
    wish moves no instruction and adds no form example (seen on a walk: 'Like this: about 80
    words is 5 short sentences.' came in with a version nobody confirmed it for)."""
    memory = LineageMemory(
        session_id="s", lineage_id="L", own_checks=[OVER], cycle=4, wants=["warmer"]
    )
    taken = asyncio.run(cycle_step.take(RulesTrainer(), WRITER, memory, 6, "Warmer, please."))
    assert {c.want for c in taken.plan.changes} == {"warmer"}
    assert not any(c.reason.startswith("check: ") for c in taken.plan.changes)
    assert "Like this:" not in taken.agent.system_prompt
    # confirmed, the same failed check's wish is carried out with its lever
    confirmed = memory.model_copy(update={"wants": ["shorter"]})
    again = asyncio.run(cycle_step.take(RulesTrainer(), WRITER, confirmed, 6, "Shorter."))
    assert again.changed and {c.want for c in again.plan.changes} <= {"shorter"}
