"""A step's prompt as the trainer writes it and the offline model reads it (issue 62's walk,
items 9 to 12). The model answers from what the step is given, never pasting the prompt's
labels or instructions into the answer nor searching for them; a rater's sentence goes into
the step in the rater's case, after the step's own instruction and never between an
instruction and what it introduces; a plan that takes a step out changes nothing in it; a
revision that must drop a phrase keeps the facts it carries. Through Temporal where a cycle
runs."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import yaml

from client import start_session
from domain.agent import AgentDefinition, AgentRef
from domain.checks import ActiveWish, failed
from domain.reading_preview import change_words
from domain.spec import SessionSpec, load_spec
from domain.trainer import Amount, EvolutionChange
from runner.model_backend import ChatMessage, ModelRequest
from runner.offline_model import OfflineModel
from runner.revision import REVISION_PROMPT, reviser
from services import reading_prompt
from tests.conftest import awaiting, wait_for_state
from tests.test_tool_trace import HANDBOOK
from trainer import cycle_step
from trainer.backends import RulesTrainer
from trainer.checks import check_all

EXAMPLE = Path(__file__).parent.parent / "examples" / "research-session.yaml"
RENT = "Estimate the monthly rent saved by 12 remote engineers: compute 12 * 1200 first."
CORE_HOURS = "Explain how core hours help a distributed team."
RESEARCH = "Gather the facts and numbers needed for: {input}"
# the research step after the walk's cycle 13: every sentence raters added, in front of the
# step's own instruction, as the trainer wrote them then
STACKED = (
    "write the total with its unit: 14,400 euros per month, not 14400. Call search_documents "
    "first, before answering. give the calculator result in the answer, with its unit. quote "
    "the handbook lines you found, word for word. Gather the facts and numbers needed for: "
    "{input}"
)
# the same sentences as the trainer writes them now: after the instruction, a line each
LINED = (
    "Call search_documents first, before answering. Gather the facts and numbers needed for: "
    "{input}\nGive the calculator result in the answer, with its unit.\nQuote the handbook "
    "lines you found, word for word.\nWrite the total with its unit: 14,400 euros per month, "
    "not 14400."
)
# the polish step once it was given the findings and no longer the draft (walk cycle 2)
POLISH = (
    "Tighten this answer without losing any number:\nThe output of the research step: {research}"
)


def _spec(tmp_path: Path, flows: dict[str, list[dict[str, Any]]], inputs: list[str]) -> SessionSpec:
    """examples/research-session.yaml under a session id of its own, a lineage per label with
    that flow."""
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["id"] = f"prompts-{uuid.uuid4().hex[:8]}"
    data["documents"] = ["team-handbook.md"]
    data["inputs"] = inputs
    (tmp_path / "team-handbook.md").write_text(HANDBOOK)
    template = data["lineages"][0]
    lineages = []
    for label, flow in flows.items():
        lineage = yaml.safe_load(yaml.safe_dump(template))
        lineage["label"] = label
        if flow:
            lineage["agent"]["flow"] = flow
        lineages.append(lineage)
    data["lineages"] = lineages
    path = tmp_path / "prompts.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_spec(path)


def _research(prompt: str) -> dict[str, Any]:
    return {
        "name": "research",
        "prompt": prompt,
        "tools": ["calculator", "search_documents", "read_document"],
    }


def _latest(store, lineage: str) -> AgentDefinition:
    row = store.queries.agent_versions(lineage)[-1]
    return store.queries.agent_definition(AgentRef(agent_id=row.agent_id, version=row.version))


def _cycle(store, lineage: str, cycle: int) -> tuple[list[Any], str]:
    """The spans of the agent's own try in ``cycle`` and the output shown for it."""
    (rollout,) = [r for r in store.queries.rollouts(lineage) if r.cycle == cycle]
    first = store.queries.attempts(rollout.id)[0]
    spans = sorted(store.queries.span_records(first.id), key=lambda s: s.sequence)
    (artifact,) = [a for a in store.queries.artifacts(lineage) if a.rollout_id == rollout.id]
    return spans, store.queries.artifact_text(artifact.id)


def _changes(store, lineage: str) -> list[EvolutionChange]:
    record = store.queries.evolution_records(lineage)[0]
    return [EvolutionChange.model_validate(c) for c in json.loads(record.changes)]


async def test_a_label_a_flow_change_adds_never_reaches_the_answer_nor_a_step_it_removes(
    client, store, settings, run_worker, tmp_path
):
    """The walk's cycles 1 and 2 in one score: the polish step given the findings and no
    longer the draft, the draft step taken out, and nothing made up. The plan changes nothing
    in the draft step it takes out; the next answer, the polish step's, begins with what the
    research found, not with "The output of the research step:", the label it was given it
    under."""
    spec = _spec(tmp_path, {"A": []}, [RENT])
    lineage = spec.lineage_id("A")
    given = [
        "no_fabrication",
        "step:input:polish+=research",
        "step:input:polish-=draft",
        "step:remove:draft",
    ]
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.execute_update("submit_score", {"score": 5, "wants": given, "rater": "ana"})
        await wait_for_state(handle, awaiting(2), timeout=60)

    changes = _changes(store, lineage)
    assert [c.change_type for c in changes if c.target == "draft"] == ["remove"]
    (removal,) = [c for c in changes if c.target == "draft"]
    example = yaml.safe_load(EXAMPLE.read_text())["lineages"][0]["agent"]["flow"][1]
    assert json.loads(removal.before or "")["prompt"] == example["prompt"]  # put back as it was
    agent = _latest(store, lineage)
    assert [(s.name, s.prompt) for s in agent.flow] == [("research", RESEARCH), ("polish", POLISH)]

    spans, output = _cycle(store, lineage, 2)
    (polish,) = [s for s in spans if s.name == "polish" and s.span_type == "llm_call"]
    assert "The output of the research step: The result is: 14400." in (polish.input or "")
    assert output.startswith("The result is: 14400.")
    assert "Remote work saves the company office rent of 1,200 euros" in output
    assert "output of" not in output.lower()


async def test_instructions_steer_the_step_and_never_become_its_answer_or_its_search(
    client, store, settings, run_worker, tmp_path
):
    """The walk's cycle 14: a research step under a stack of sentences raters added (about
    the rent question) answers the core-hours question it is given. It searches the handbook
    first, as told, for the question's words; its answer holds what the handbook says on core
    hours and not one of its instructions. The same whether the sentences stand before the
    step's instruction (as the trainer wrote them then) or on lines after it (as now)."""
    spec = _spec(
        tmp_path,
        {"stacked": [_research(STACKED)], "lined": [_research(LINED)]},
        [CORE_HOURS],
    )
    async with run_worker():
        handles = await start_session(client, spec, settings.task_queue)
        for handle in handles:
            await wait_for_state(handle, awaiting(1))

    for label in ("stacked", "lined"):
        spans, output = _cycle(store, spec.lineage_id(label), 1)
        calls = [(s.tool_name, s.tool_args) for s in spans if s.span_type == "tool_call"]
        assert calls == [
            ("search_documents", {"query": "core hours help distributed team"}),
            ("read_document", {"name": "team-handbook.md"}),
        ], label
        assert output.startswith(
            "From team-handbook.md: Core hours are 10:00 to 15:00 in every time zone"
        ), label
        for instruction in (
            "14,400",
            "euros",
            "search_documents",
            "calculator result",
            "word for word",
            "Gather the facts",
            "needed for",
        ):
            assert instruction.lower() not in output.lower(), (label, instruction, output)


async def test_a_raters_sentence_keeps_its_case_and_follows_the_steps_own_instruction(
    client, store, settings, run_worker, tmp_path
):
    """A sentence for a step, typed at the edit prompt (its quotes taken off there) or sent
    in lower case: the step's prompt gets it as a sentence, capital first, on a line after
    the step's instruction: after "…needed for: {input}" (never between the words and the
    question they introduce), and after the findings that "…without losing any number:"
    introduces. The plan says it as an addition; the next trace shows the step given it, and
    the answer does not repeat it."""
    (quoted,) = reading_prompt.edited(
        [], '--want step:prompt:research:"Quote the handbook lines you found, word for word."'
    )
    assert quoted.want == "step:prompt:research:Quote the handbook lines you found, word for word."
    lower = "step:prompt:polish:give the total in euros and the handbook line it rests on"
    spec = _spec(
        tmp_path,
        {
            "research": [],
            "polish": [_research(RESEARCH), {"name": "polish", "prompt": POLISH, "tools": []}],
        },
        [RENT],
    )
    research_id, polish_id = spec.lineage_id("research"), spec.lineage_id("polish")
    async with run_worker():
        research, polish = await start_session(client, spec, settings.task_queue)
        for handle in (research, polish):
            await wait_for_state(handle, awaiting(1))
        await research.execute_update("submit_score", {"score": 5, "wants": [quoted.want]})
        await polish.execute_update("submit_score", {"score": 5, "wants": [lower]})
        for handle in (research, polish):
            await wait_for_state(handle, awaiting(2), timeout=60)

    agent = _latest(store, research_id)
    assert agent.flow[0].prompt == (
        f"{RESEARCH}\nQuote the handbook lines you found, word for word."
    )
    (change,) = _changes(store, research_id)
    assert change_words(change) == (
        "in step 'research', add 'Quote the handbook lines you found, word for word.'"
    )
    spans, output = _cycle(store, research_id, 2)
    first = next(s for s in spans if s.name == "research" and s.span_type == "llm_call")
    assert (
        first.input
        == f"{RESEARCH.format(input=RENT)}\nQuote the handbook lines you found, word for word."
    )
    assert "word for word" not in output and output.startswith("The result is: 14400.")

    agent = _latest(store, polish_id)
    assert agent.flow[1].prompt == (
        f"{POLISH}\nGive the total in euros and the handbook line it rests on."
    )
    (change,) = _changes(store, polish_id)
    assert change_words(change) == (
        "in step 'polish', add 'Give the total in euros and the handbook line it rests on.'"
    )
    _, output = _cycle(store, polish_id, 2)
    assert output.startswith("The result is: 14400.") and "rests on" not in output


def test_a_plan_that_takes_a_step_out_proposes_no_change_to_it():
    """A comment that something was made up grounds the step that wrote it (the draft); the
    same score taking the draft step out leaves it as it was: the plan takes it out and
    changes nothing in it."""
    agent = AgentDefinition.model_validate(
        yaml.safe_load(EXAMPLE.read_text())["lineages"][0]["agent"]
    )
    memory = cycle_step.LineageMemory(
        session_id="s",
        lineage_id="L",
        wants=["no_fabrication", "step:input:polish+=research", "step:input:polish-=draft",
               "step:remove:draft"],
    )  # fmt: skip
    step = asyncio.run(cycle_step.take(RulesTrainer(), agent, memory, 5, None))
    words = [change_words(c) for c in step.plan.changes]
    assert "take out step 'draft'" in words
    assert [w for w in words if "'draft'" in w and "polish" not in w] == ["take out step 'draft'"]
    # grounding a step that stays goes after its instruction: never "rewrite 'for:' as …"
    memory = cycle_step.LineageMemory(session_id="s", lineage_id="L", wants=["no_fabrication"])
    grounded = asyncio.run(cycle_step.take(RulesTrainer(), agent, memory, 5, None))
    (draft,) = [c for c in grounded.plan.changes if c.target == "draft"]
    assert change_words(draft) == (
        "in step 'draft', add 'Use only facts and figures from the material above; never "
        "invent any.'"
    )
    # a step that gathers with tools has no material above: it is told where facts come from
    alone = agent.model_copy(update={"flow": agent.flow[:1]})
    grounded = asyncio.run(cycle_step.take(RulesTrainer(), alone, memory, 5, None))
    (research,) = [c for c in grounded.plan.changes if c.target == "research"]
    assert change_words(research).startswith("in step 'research', add 'Use only facts")
    assert grounded.agent.flow[0].prompt == (
        f"{RESEARCH}\nUse only facts and figures the tools return or the question gives; never "
        "invent any."
    )


def test_a_revision_that_must_drop_a_phrase_keeps_the_facts_it_carries():
    """The walk's cycle 5: the answer opened with the label the reviewer asked to avoid, in
    the sentence that held the calculator's total, and was over the length asked for. The
    revision loses the label and the filler, and keeps the total and the handbook's line."""
    text = (
        "The output of the research step: The result is: 14400. From team-handbook.md: Remote "
        "work saves the company office rent of 1,200 euros per person per month. Here is an "
        "overview of the monthly rent saved by 12 remote engineers. Teams that try the monthly "
        "rent saved by 12 remote engineers usually start small and expand what works. People "
        "adopt the monthly rent saved by 12 remote engineers faster when they see an early, "
        "concrete win."
    )
    wishes = [
        ActiveWish(family="banned", action="remove", detail="the output of the research step:"),
        ActiveWish(family="shorter", amount=Amount(kind="limit", value=40), cycle=1),
    ]
    agent = reviser(
        AgentDefinition.model_validate(yaml.safe_load(EXAMPLE.read_text())["lineages"][0]["agent"]),
        failed(check_all(text, wishes)),
    )
    request = ModelRequest(
        model=agent.parameters.model,
        system=agent.system_prompt,
        max_tokens=agent.parameters.max_tokens,
        temperature=agent.parameters.temperature,
        messages=[ChatMessage(role="user", content=REVISION_PROMPT.format(input=text))],
    )
    revised = OfflineModel().reply(request).text
    assert [r.passed for r in check_all(revised, wishes)] == [True, True]
    assert revised.startswith("The result is: 14400.")
    assert "Remote work saves the company office rent of 1,200 euros per person" in revised
    assert "usually start small" not in revised
