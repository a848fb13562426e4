"""Every confirmed wish is measured, with one lever each: a language for one part of the answer
(beside another for the whole), a phrase to avoid and "under 60 words", sent as wants — parsed
and validated, planned (one length instruction saying "under 60", a token budget above what 60
words need), and checked ✓ and ✗ on the outputs of a lineage on the dev server."""

from __future__ import annotations

import asyncio
import re

import pytest

from client import start_session
from domain import want_labels, wants
from domain.agent import AgentConstraints, AgentDefinition, AgentParameters, AgentRef
from domain.answer_parts import LANGUAGES
from tests.conftest import awaiting, make_spec, starter_cli, wait_for_state
from trainer import cycle_step, preview
from trainer.backends import RulesTrainer
from trainer.checks import checkable
from trainer.credit_assignment import families_of
from trainer.cycle_step import CycleStep, LineageMemory
from trainer.evolution_planner import tokens_needed
from trainer.prompt_segments import segments
from trainer.reading import comment_languages

BRIEF = "You are an expert analyst. Provide brief, scannable analysis."
AVOIDED = "the goal is stated up front"  # a sentence the offline analyst writes every time


# ---- wants ------------------------------------------------------------------------------------


def test_a_language_and_a_phrase_to_avoid_are_wants():
    german = wants.parse("language:German@summary")
    assert (german.want, german.detail, german.action) == ("language", "German@summary", "add")
    assert wants.render(german) == "language:german@summary"
    assert want_labels.label("language:german@summary") == "the closing summary in German"
    assert want_labels.label("language:norwegian") == "in Norwegian"
    avoid = wants.parse('avoid:"The evidence is MIXED"')
    assert (avoid.want, avoid.detail) == ("banned", "the evidence is mixed")
    assert wants.render(avoid) == 'avoid:"the evidence is mixed"'
    assert want_labels.label('avoid:"to be fair"') == "avoid 'to be fair'"
    # several languages for several parts stand side by side; two for one part contradict
    both = ["language:norwegian", "language:german@summary", "avoid:x y", "avoid:z w"]
    assert wants.validated(both) == both
    with pytest.raises(ValueError, match="contradict"):
        wants.validated(["language:german", "language:english"])
    # the CLI's --want takes them as it takes any want
    assert wants.from_options(["language:german@summary"], [], []) == ["language:german@summary"]


@pytest.mark.parametrize(
    ("want", "said"),
    [
        ("language:germn", "which language? did you mean german?"),
        ("language:klingon", "which language?"),
        ("language:german@intro", "a part is @summary"),
        ("more:language:german", "a language takes add, remove or keep"),
        ("avoid:", 'avoid:"…" names a phrase'),
    ],
)
def test_a_want_that_names_no_language_or_phrase_is_refused_shortly(want: str, said: str):
    with pytest.raises(ValueError) as refused:
        wants.parse(want)
    assert said in str(refused.value) and len(str(refused.value)) < 80


def test_the_languages_a_want_names_are_the_ones_the_checks_tell_apart():
    told = {
        lang.name.capitalize().replace("Bokmal", "Norwegian") for lang in comment_languages.DETECTED
    }
    assert set(LANGUAGES) == told


# ---- the cycle step ---------------------------------------------------------------------------


def _agent(prompt: str) -> AgentDefinition:
    return AgentDefinition(
        name="Analyst",
        system_prompt=prompt,
        parameters=AgentParameters(model="offline-analyst-1", temperature=0.7, max_tokens=2048),
        constraints=AgentConstraints(max_tokens=4096),
    )


def _play(prompt: str, *sent: list[str]) -> list[CycleStep]:
    """Scores sent with these wants, cycle after cycle, through the cycle step."""
    agent, memory, steps = _agent(prompt), LineageMemory(session_id="s", lineage_id="L"), []
    for number, given in enumerate(sent, start=1):
        memory = memory.model_copy(update={"wants": given, "cycle": number})
        step = asyncio.run(cycle_step.take(RulesTrainer(), agent, memory, 4, None))
        steps.append(step)
        pending = cycle_step.pending_after(step, f"L:evolution:{number}")
        memory = memory.model_copy(
            update={
                "pending": pending if step.changed else memory.pending,
                "asked_for": step.asked_for,
                "wishes": step.wishes,
                "previous_score": 4,
            }
        )
        agent = step.agent
    return steps


def _length_instructions(prompt: str) -> list[str]:
    return [s for s in segments(prompt) if families_of(s) & {"shorter", "longer"}]


def test_under_60_words_is_one_instruction_saying_under_60():
    (step,) = _play(BRIEF, ["shorter:60"])
    # "Provide brief, scannable analysis." was a second length lever: it keeps only its bullets
    assert _length_instructions(step.agent.system_prompt) == ["Keep every answer under 60 words."]
    assert "brief" not in step.agent.system_prompt.lower()
    assert "bullet" in step.agent.system_prompt.lower()
    assert tokens_needed(60) < step.agent.parameters.max_tokens < 2048


def test_about_90_words_says_about_and_leaves_the_token_budget():
    (step,) = _play(BRIEF, ["shorter:90"])
    limit = _length_instructions(step.agent.system_prompt)
    assert limit == ["Keep every answer under 90 words."]
    memory = LineageMemory(session_id="s", lineage_id="L")
    about = asyncio.run(
        cycle_step.take(RulesTrainer(), _agent(BRIEF), memory, 4, "About 90 words please.")
    )
    assert _length_instructions(about.agent.system_prompt) == [
        "Keep every answer short: about 90 words."
    ]
    assert about.agent.parameters.max_tokens == 2048  # no hard limit named: no budget moves


def test_languages_for_two_parts_stand_side_by_side_and_are_taken_back_one_by_one():
    _, german, again, dropped = _play(
        BRIEF,
        ["language:norwegian"],
        ["language:german@summary"],
        ["language:german@summary"],
        ["remove:language:german@summary"],
    )
    said = "Write the closing summary in German, whatever the language of the rest."
    assert "Write the whole answer in Norwegian." in german.agent.system_prompt
    assert said in german.agent.system_prompt
    assert {w.detail for w in german.wishes if w.family == "language"} == {
        "Norwegian",
        "German@summary",
    }
    # asked again: the summary's instruction is made firmer, the Norwegian one untouched
    assert "Write the whole answer in Norwegian." in again.agent.system_prompt
    assert "Above all, write the closing summary in German" in again.agent.system_prompt
    # the German summary taken back leaves the Norwegian answer, instruction and check
    assert "German" not in dropped.agent.system_prompt
    assert "Write the whole answer in Norwegian." in dropped.agent.system_prompt
    assert [w.detail for w in dropped.wishes if w.family == "language"] == ["Norwegian"]


def test_a_sentence_quoted_as_the_problem_is_offered_to_avoid_and_checked_gone():
    comment = 'Plain language please. This is jargon: "Leverage synergies to optimise throughput."'
    memory = LineageMemory(session_id="s", lineage_id="L")
    seen = asyncio.run(preview.preview(RulesTrainer(), memory, 4, comment))
    assert [c.want for c in seen.chips] == [
        "simpler",
        'avoid:"Leverage synergies to optimise throughput"',  # as written
    ]
    step = asyncio.run(cycle_step.take(RulesTrainer(), _agent(BRIEF), memory, 4, comment))
    active = {w.family: w.detail for w in step.wishes}
    quoted = "Leverage synergies to optimise throughput"
    assert active == {"simpler": quoted, "banned": quoted}
    # praised under a high score, a quotation is no problem to avoid
    liked = asyncio.run(preview.preview(RulesTrainer(), memory, 9, f'Love "{quoted}".'))
    assert not [c for c in liked.chips if c.want.startswith("avoid:")]


def test_the_say_back_words_a_part_language_and_a_phrase_to_avoid_as_the_chips_do():
    """Said back in the chips' words: never the family ids "language" and "banned", nor a
    part's syntax ("German@summary")."""
    (sent,) = _play(BRIEF, ["language:german@summary", 'avoid:"to be fair"', "language:norwegian"])
    assert cycle_step.said_back(sent) == (
        "Read as: the closing summary in German, avoid 'to be fair', in Norwegian"
    )
    (dropped,) = _play(BRIEF, ["remove:language:german@summary"])
    assert cycle_step.said_back(dropped) == "Read as: take back the closing summary in German"
    quoted = 'This is jargon: "Leverage synergies to optimise throughput."'
    memory = LineageMemory(session_id="s", lineage_id="L")
    seen = asyncio.run(preview.preview(RulesTrainer(), memory, 4, quoted))
    assert "avoid 'Leverage synergies to optimise throughput'" in seen.said_back
    assert "banned" not in seen.said_back


# ---- through the dev server -------------------------------------------------------------------


async def _score(handle, cycle: int, value: float, given: list[str]):
    await wait_for_state(handle, awaiting(cycle), timeout=60)
    return await handle.execute_update("submit_score", {"score": value, "wants": given})


def _own_try(store, lineage: str, cycle: int) -> dict[str, dict]:
    """The checks of the agent's own try at a cycle's output (before any revision), by wish."""
    (first,) = [
        e.payload
        for e in store.queries.events(lineage, ["output.checked"])
        if e.payload["cycle"] == cycle and e.payload["revision"] == 0
    ]
    return {c["wish"]: c for c in first["checks"]}


async def test_a_part_language_a_phrase_to_avoid_and_under_60_words_through_a_lineage(
    client, store, settings, run_worker, temporal_address
):
    question = "Explain the four-day work week for small software teams."
    spec = make_spec(prompt=BRIEF, inputs=[question])
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        first = await wait_for_state(handle, awaiting(1))
        assert AVOIDED in (first.latest_output_preview or "").lower()
        wished = ["shorter:60", "language:german@summary", f'avoid:"{AVOIDED}"']
        await _score(handle, 1, 3, wished)
        second = await wait_for_state(handle, awaiting(2))

        # every wish sent is active and checked on the output shown
        assert [(w.family, w.detail) for w in second.active_wishes if checkable(w)] == [
            ("shorter", None),
            ("language", "German@summary"),
            ("banned", AVOIDED),
        ]
        checks = {c.wish: c for c in second.latest_checks}
        # the offline model writes English: the German summary is ✗, said so
        summary = checks["the closing summary in German"]
        assert not summary.passed and summary.measure == "English"
        assert "✗ the closing summary in German (English)" in (second.latest_checklist or "")
        # the phrase to avoid: ✗ on the agent's own try, ✓ on the revision shown
        own = _own_try(store, lineage, 2)
        assert not own[f"no {AVOIDED!r}"]["passed"]
        assert second.latest_revised and checks[f"no {AVOIDED!r}"].passed
        # under 60 words: met by the output shown, counted alike by the header and the checks
        assert checks["at most 60 words"].passed
        assert second.latest_output_words <= 60
        printed = await asyncio.to_thread(
            starter_cli,
            "output",
            lineage,
            temporal_address=temporal_address,
            database_url=settings.database_url,
        )
        header = re.search(r"cycle 2 \((\d+) words", printed)
        assert header is not None and int(header.group(1)) == second.latest_output_words

        # one length instruction, saying "under 60"; the budget above what 60 words need
        agent = _stored_agent(store, lineage)
        assert _length_instructions(agent.system_prompt) == ["Keep every answer under 60 words."]
        assert tokens_needed(60) < agent.parameters.max_tokens < 2048

        # the summary asked in English instead: ✓
        await _score(handle, 2, 5, ["language:english@summary"])
        third = await wait_for_state(handle, awaiting(3))
        checks = {c.wish: c for c in third.latest_checks}
        assert checks["the closing summary in English"].passed
        assert "the closing summary in German" not in checks
        assert checks[f"no {AVOIDED!r}"].passed and checks["at most 60 words"].passed
        agent = _stored_agent(store, lineage)
        assert "German" not in agent.system_prompt
        assert _length_instructions(agent.system_prompt) == ["Keep every answer under 60 words."]


def _stored_agent(store, lineage: str) -> AgentDefinition:
    latest = store.queries.agent_versions(lineage)[-1]
    return store.queries.agent_definition(
        AgentRef(agent_id=latest.agent_id, version=latest.version)
    )
