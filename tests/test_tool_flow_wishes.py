"""Typed tool and flow wishes: ``tool:…``, ``remove:tool:…``, ``tool_first:…``,
``describe:tool:…``, ``step:add:check``, ``step:input:check+=research``, ``step:prompt:…``.
Parsed and said back like every want; the cycle step changes the tool description, the step's
tools, the step's prompt or the flow edge each names (never a system-prompt line standing in
for it), refuses what the agent may not do with the reason, and ``blame`` names the score and
the wish behind every parameter, tool, step and edge. Through Temporal: the next trace shows
what was asked."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from activities.reading_preview import preview_reading
from client import start_session
from domain import tool_flow, want_labels, wants
from domain.agent import AgentDefinition, AgentRef
from domain.feedback import ScoreInput
from domain.reading_preview import ReadingPreview, change_words, chip
from domain.settings import Settings
from domain.spec import SessionSpec, load_spec
from domain.trainer import describe_change
from runner.model_backend import ChatMessage, ContentBlock, ModelRequest, ToolSpec
from runner.offline_model import OfflineModel
from services import reading_prompt
from tests.conftest import awaiting, starter_cli, training_data_cli, wait_for_state
from tests.test_tool_trace import research_spec
from trainer import cycle_step
from trainer.backends import RulesTrainer, TrainerBackends
from trainer.cycle_step import LineageMemory
from trainer.evolution import apply_changes
from trainer.reading import reader

EXAMPLE = Path(__file__).parent.parent / "examples" / "research-session.yaml"
HANDBOOK = (EXAMPLE.parent / "docs" / "team-handbook.md").read_text()
CORE_HOURS = "Explain how core hours help a distributed team."
# a research step that names neither the handbook nor facts: the offline model searches nothing
QUIET = "Work out the numbers for: {input}"
CHECK = (
    "Check every number and fact in this answer against the findings, correct any that do "
    "not match, and return the corrected answer only: {polish}"
)


def _research_agent(research: str = QUIET, check: bool = False) -> dict[str, Any]:
    agent: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())["lineages"][0]["agent"]
    agent["systemPrompt"] = "You are a precise analyst."
    agent["flow"][0]["prompt"] = research
    if check:  # the check step the issue saw: told of the findings, given only {polish}
        agent["flow"].append({"name": "check", "prompt": CHECK, "tools": []})
    return agent


def _agent(**kwargs: Any) -> AgentDefinition:
    return AgentDefinition.model_validate(_research_agent(**kwargs))


def _step(agent: AgentDefinition, given: list[str], comment: str | None = None):
    memory = LineageMemory(session_id="s", lineage_id="L", wants=given)
    return asyncio.run(cycle_step.take(RulesTrainer(), agent, memory, 4, comment))


# ---- the grammar ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("want", "words"),
    [
        ("tool:search_documents", "use search_documents"),
        ("remove:tool:calculator", "no calculator"),
        ("tool_first:Search_Documents", "search_documents first, before answering"),
        ("describe:tool:calculator", "calculator's description says when to use it"),
        (
            'describe:tool:calculator:"Only for exact sums"',
            "calculator's description: 'Only for exact sums'",
        ),
        ("step:add:check", "a check step at the end, given the findings"),
        ("step:remove:polish", "no polish step"),
        ("remove:step:Polish", "no polish step"),  # the picker's remove, the flow and a step
        ("step:input:check+=research", "the check step given the research step's output"),
        ("step:input:polish-=draft", "the polish step no longer given the draft step's output"),
        ("step:prompt:research", "the research step's prompt"),
    ],
)
def test_a_tool_or_flow_wish_is_a_want_said_in_words_and_back(want: str, words: str):
    wish = wants.parse(want)
    assert wish.want in tool_flow.families() and wish.aspect in ("tools", "flow")
    assert wants.render(wish) == wants.parse(wants.render(wish) or "").detail  # canonical
    assert want_labels.label(want) == words
    assert wants.validated([want]) == [want]


@pytest.mark.parametrize(
    ("want", "why"),
    [
        ("keep:tool:calculator", "takes add or remove"),
        ("tool:", "which tool?"),
        ("step:add:review", "the step adds only check"),
        ("step:input:check+=check", "cannot take its own output"),
        ("step:move:check", "a flow wish is step:add:check"),
        ("remove:step:add:check", r"which step\? remove:step:NAME \(step:remove:NAME\)"),
        ("remove:tool_first:calculator", r"taken out this way are a tool \(remove:tool:NAME\)"),
        ("step:remove:", "a flow wish is step:add:check, step:remove:STEP"),
    ],
)
def test_a_malformed_tool_or_flow_wish_is_refused_with_the_reason(want: str, why: str):
    with pytest.raises(ValueError, match=why):
        wants.parse(want)


def test_using_a_tool_and_removing_it_contradict_each_other():
    with pytest.raises(ValueError, match="contradict"):
        wants.validated(["tool:calculator", "remove:tool:calculator"])
    with pytest.raises(ValueError, match="contradict"):
        wants.validated(["step:add:check", "step:remove:check"])
    with pytest.raises(ValueError, match="contradict"):
        wants.validated(["step:input:polish+=draft", "step:input:polish-=draft"])
    rewired = ["step:remove:draft", "step:input:polish-=draft", "step:input:polish+=research"]
    assert wants.validated(rewired) == rewired
    both = ["tool:calculator", "tool_first:search_documents", "step:add:check"]
    assert wants.validated(both) == both


def _chips(comment: str) -> list[str]:
    """The chips the preview offers for a comment (``trainer/preview.py``: the reading's
    wishes as wants)."""
    memory = LineageMemory(session_id="s", lineage_id="L")
    reading = cycle_step.rules_reading(memory, 4, comment)
    assert all(wants.render(a) for a in reading.aspects if a.want)  # nothing left unsaid
    return wants.wants_of(reading.aspects)


def test_a_tool_the_comment_names_is_offered_as_a_chip():
    """Searching the handbook before answering is read as the search tool, called first: a
    chip the rater can keep, edit or drop, no longer "also read, which no wish can carry"."""
    assert _chips("Search the handbook before answering.") == ["tool_first:search"]
    assert _chips("It should have searched the handbook.") == ["tool:search"]
    assert _chips("Stop using the search tool.") == ["remove:tool:search"]


# ---- the changes ------------------------------------------------------------------------------


def test_tool_first_tells_the_step_that_offers_it_not_the_system_prompt():
    agent = _agent()
    step = _step(agent, ["tool_first:search_documents"], "Search the handbook before answering.")
    (change,) = step.plan.changes
    assert (change.component, change.target, change.want) == ("flow", "research", "tool_first")
    assert step.agent.system_prompt == agent.system_prompt
    assert step.agent.flow[0].prompt == f"Call search_documents first, before answering. {QUIET}"
    assert change.reason.startswith("feedback asked for tool_first:search_documents")
    assert "search_documents called first" in step.plan.hypothesis


def test_a_tool_or_flow_change_is_versioned_like_any_other_and_undone_by_undo():
    """The next score judges it (asked again: nothing to change, said so) and an undo rolls it
    back, byte for byte."""
    agent = _agent()
    step = _step(agent, ["tool_first:search_documents", "step:add:check"])
    assert [c.want for c in step.plan.changes] == ["step", "tool_first"]
    pending = cycle_step.pending_after(step, "L:evolution:v1")
    memory = LineageMemory(session_id="s", lineage_id="L", pending=pending, wants=["undo"])
    undone = asyncio.run(cycle_step.take(RulesTrainer(), step.agent, memory, 3, "Undo that."))
    assert undone.agent == agent
    # each typed change is judged, and rolled back, as its own want
    assert sorted(undone.rolled_back) == ["step:add:check", "tool_first:search_documents"]
    memory = memory.model_copy(update={"wants": ["tool_first:search_documents"]})
    again = asyncio.run(cycle_step.take(RulesTrainer(), step.agent, memory, 5, "Search first."))
    assert not again.plan.changes
    assert again.report == [
        "tool_first:search_documents: nothing to change: the research step is told to call "
        "search_documents first already"
    ]
    assert {v.family: v.verdict for v in again.judged.verdict.aspects} == {
        "tool_first:search_documents": "not_far_enough",  # asked again
        "step:add:check": "validated",  # not mentioned, and the score rose
    }


def test_a_tool_wish_changes_the_description_and_declares_an_allowed_tool():
    used = _step(_agent(), ["tool:search"])  # a word of the tool's name names it
    (change,) = used.plan.changes
    assert (change.component, change.target) == ("tools", "search_documents")
    described = json.loads(change.after or "")["description"]
    # the built-in description the model was shown, and when to use it
    assert described.startswith("Finds the passages of the session's documents")
    assert described.endswith(tool_flow.sentence("use"))
    # an allowed tool the agent has not declared is declared, and a step offers it
    spec = _research_agent()
    spec["tools"] = [{"name": "calculator"}]
    spec["flow"][0]["tools"] = ["calculator"]
    declared = _step(AgentDefinition.model_validate(spec), ["tool:search_documents"])
    assert [t.name for t in declared.agent.tools] == ["calculator", "search_documents"]
    assert declared.agent.flow[0].tools == ["calculator", "search_documents"]


def test_removing_a_tool_takes_it_from_every_step_that_offers_it():
    step = _step(_agent(), ["remove:tool:calculator"])
    assert step.agent.flow[0].tools == ["search_documents", "read_document"]
    assert [t.name for t in step.agent.tools] == ["calculator", "search_documents", "read_document"]


def test_a_tool_the_agent_may_not_use_is_refused_with_the_reason():
    agent = _agent()
    step = _step(agent, ["tool:web_search"])
    assert not step.plan.changes and step.agent == agent
    (refusal,) = step.report
    assert refusal == (
        "refused tool:web_search: the agent may not use 'web_search': its constraints allow "
        "only these tools: calculator, search_documents, read_document; only the agent's "
        "owner changes its constraints"
    )
    assert refusal in step.plan.notes  # recorded with the step
    assert cycle_step.summary(step, 1) == f"kept v1: {refusal}"


def test_step_add_check_gives_the_check_step_the_findings():
    step = _step(_agent(), ["step:add:check"])
    check = step.agent.flow[-1]
    assert check.name == "check" and check.tools == []
    assert check.prompt.endswith(
        "the corrected answer only: {polish}\nThe findings of the research step: {research}"
    )


def test_a_check_step_asked_for_in_plain_words_is_given_the_findings_too():
    """The plain-words wish (``check_step``) and the typed one add the same step: one that has
    findings to check against, not only the polished answer."""
    memory = LineageMemory(session_id="s", lineage_id="L")  # the comment read, no wants sent
    comment = "Add a final pass that checks every figure before it goes out."
    said = asyncio.run(cycle_step.take(RulesTrainer(), _agent(), memory, 4, comment))
    typed = _step(_agent(), ["step:add:check"])
    assert said.agent.flow[-1] == typed.agent.flow[-1]
    assert "{research}" in said.agent.flow[-1].prompt


def test_a_tool_asked_for_first_and_a_call_pointed_at_are_read_so():
    assert _chips("Look it up in the handbook first next time.") == ["tool_first:search"]
    # "first" said of something else leaves the tool as it was asked
    elsewhere = reader.read("Use my notes first; search only when they lack it.").wishes
    assert not any(w.family == "tool_use" and "first" in (w.detail or "") for w in elsewhere)
    memory = LineageMemory(session_id="s", lineage_id="L")
    reading = cycle_step.rules_reading(memory, 4, "The second search was pointless.")
    (tool,) = [a for a in reading.aspects if a.want == "tool_use"]
    # the say-back names which call of the trace it read
    assert want_labels.wish_words(tool) == "use the search tool less (its call 2 in the trace)"


def test_going_back_to_a_version_with_other_tool_descriptions_restores_it():
    """A revert sets each tool back whole (its dump says ``inputSchema``): the tool comes back
    as it was, not refused as a tool with an extra field."""
    first = _agent()
    described = _step(first, ["describe:tool:calculator"]).agent
    assert described.tools != first.tools
    back = cycle_step._changes_to(described, first, "back to v1")
    assert apply_changes(described, back) == first


def test_a_step_named_in_plain_words_is_read_as_that_step():
    """A comment that names a step of the flow is read as a wish about that step, offered as
    its chip: fed an earlier step's output, or the step its other wishes are aimed at."""
    assert _chips("The check step never sees the research notes.") == ["step:input:check+=research"]
    said = "In the research step, cite a source for every figure."
    assert _chips(said) == ["cite_sources", "step:prompt:research"]
    assert _chips("The next step should be shorter.") == ["shorter"]


def test_a_checking_step_taken_back_leaves_the_flow_and_a_question_fed_in_plain_words():
    memory = LineageMemory(session_id="s", lineage_id="L")
    agent = _agent(check=True)
    gone = asyncio.run(
        cycle_step.take(RulesTrainer(), agent, memory, 4, "Take the check step out entirely.")
    )
    assert [s.name for s in gone.agent.flow] == [s.name for s in agent.flow[:-1]]
    assert gone.agent.system_prompt == agent.system_prompt
    asked = "The check step should also be given the original question."
    fed = asyncio.run(cycle_step.take(RulesTrainer(), agent, memory, 4, asked))
    assert fed.agent.flow[-1].prompt == f"{CHECK}\nThe question: {{input}}"


def test_a_step_fed_in_plain_words_changes_that_step_not_the_system_prompt():
    memory = LineageMemory(session_id="s", lineage_id="L")
    agent = _agent(check=True)
    comment = "The check step never sees the research notes."
    fed = asyncio.run(cycle_step.take(RulesTrainer(), agent, memory, 4, comment))
    assert fed.agent.flow[-1].prompt == f"{CHECK}\nThe output of the research step: {{research}}"
    assert fed.agent.system_prompt == agent.system_prompt
    comment = "In the research step, cite a source for every figure."
    aimed = asyncio.run(cycle_step.take(RulesTrainer(), agent, memory, 4, comment))
    assert "cite a source" in aimed.agent.flow[0].prompt.lower()
    assert aimed.agent.system_prompt == agent.system_prompt


def test_step_input_feeds_an_earlier_step_and_only_an_earlier_one():
    agent = _agent(check=True)
    fed = _step(agent, ["step:input:check+=research"])
    (change,) = fed.plan.changes
    assert (change.component, change.target, change.want) == ("flow", "check", "step")
    assert fed.agent.flow[-1].prompt == f"{CHECK}\nThe output of the research step: {{research}}"
    again = _step(fed.agent, ["step:input:check+=research"])
    assert again.report == [
        "step:input:check+=research: nothing to change: the check step is given research's "
        "output already"
    ]
    later = _step(agent, ["step:input:research+=polish"])
    assert later.report == [
        "refused step:input:research+=polish: a step may use only the outputs of steps "
        "before it: polish runs after research"
    ]
    missing = _step(_agent(), ["step:input:check+=research"])
    assert "the flow has no step 'check'" in missing.report[0]
    assert "step:add:check adds one" in missing.report[0]
    # added and fed in one score: the step is added first
    both = _step(_agent(), ["step:add:check", "step:input:check+=input"])
    assert both.agent.flow[-1].prompt.endswith("The question: {input}")


def test_step_prompt_aims_the_scores_instructions_at_that_step():
    agent = _agent()
    step = _step(agent, ["bullets", "step:prompt:polish"])
    assert step.agent.system_prompt == agent.system_prompt
    # after the step's own instruction, which keeps what it introduces ("…number: {draft}")
    assert step.agent.flow[-1].prompt == (
        "Tighten this answer without losing any number: {draft}\nUse bullet points, not paragraphs."
    )
    (change,) = step.plan.changes
    assert change.want == "bullets" and "(step:prompt:polish)" in change.reason
    said = _step(agent, ['step:prompt:draft:"Name the handbook section for each {fact}"'])
    # a sentence's braces are text, never a new edge of the flow
    assert said.agent.flow[1].prompt.endswith("\nName the handbook section for each {{fact}}.")


def test_a_step_is_removed_only_when_no_later_step_is_given_its_output():
    """``step:remove:STEP`` takes the step out of the flow (the change of the flow it names,
    with the wish in its reason). A step a later one is given the output of is refused, saying
    why and what to send, unless that input is dropped in the same score or that step goes too;
    an undo and a revert put it back where it was."""
    agent = _agent()
    gone = _step(agent, ["step:remove:polish"])
    assert [s.name for s in gone.agent.flow] == ["research", "draft"]
    (change,) = gone.plan.changes
    assert (change.component, change.change_type, change.target, change.want) == (
        "flow",
        "remove",
        "polish",
        "step",
    )
    assert change.reason.startswith("feedback asked for step:remove:polish")
    assert change_words(change) == describe_change(change) == "take out step 'polish'"
    assert "the trace will show no polish step" in gone.plan.hypothesis

    refused = _step(agent, ["step:remove:draft"])
    assert refused.agent == agent and not refused.plan.changes
    assert refused.report == [
        "refused step:remove:draft: the polish step is given its output ({draft}): a step "
        "whose output a later step uses is removed only with that input dropped too; send "
        "step:input:polish-=draft with it, or step:remove:polish too"
    ]
    # the first step's output reaches the next as {previous} too
    spec = _research_agent()
    spec["flow"][1]["prompt"] = "Write an answer from: {previous}"
    previous = _step(AgentDefinition.model_validate(spec), ["step:remove:research"])
    assert "the draft step is given its output ({previous})" in previous.report[0]

    # with that input dropped (polish given the findings instead), or with polish gone too
    sent = ["step:remove:draft", "step:input:polish-=draft", "step:input:polish+=research"]
    rewired = _step(agent, sent)
    assert [s.name for s in rewired.agent.flow] == ["research", "polish"]
    assert rewired.agent.flow[1].prompt == (
        "Tighten this answer without losing any number:\n"
        "The output of the research step: {research}"
    )
    assert [change_words(c) for c in rewired.plan.changes] == [
        "stop giving step 'polish' the output of 'draft'",
        "give step 'polish' the output of 'research'",
        "take out step 'draft'",
    ]
    both = _step(agent, ["step:remove:draft", "step:remove:polish"])
    assert [s.name for s in both.agent.flow] == ["research"] and not both.report
    alone = _step(both.agent, ["step:remove:research"])
    assert alone.report == [
        "refused step:remove:research: research is the flow's only step: without it nothing answers"
    ]
    missing = _step(agent, ["step:remove:check"])
    assert "the flow has no step 'check'" in missing.report[0]

    # an undo, and a revert, put the draft step back where it was, byte for byte
    pending = cycle_step.pending_after(rewired, "L:evolution:v1")
    memory = LineageMemory(session_id="s", lineage_id="L", pending=pending, wants=["undo"])
    undone = asyncio.run(cycle_step.take(RulesTrainer(), rewired.agent, memory, 3, "Undo that."))
    assert undone.agent == agent
    back = cycle_step._changes_to(rewired.agent, agent, "back to v1")
    assert apply_changes(rewired.agent, back) == agent


def test_a_step_dropped_in_plain_words_is_read_as_its_removal():
    assert _chips("Drop the polish step.") == ["step:remove:polish"]
    assert _chips("Skip the polish pass, it adds nothing.") == ["step:remove:polish"]
    assert _chips("Take the draft stage out.") == ["step:remove:draft"]
    assert _chips("Don't drop the polish step.") == []
    assert _chips("Skip the first step.") == []  # names no step of the flow
    # the check step stays the checking pass, taken back as before
    memory = LineageMemory(session_id="s", lineage_id="L")
    reading = cycle_step.rules_reading(memory, 4, "Take the check step out entirely.")
    assert [(a.want, a.action) for a in reading.aspects] == [("check_step", "remove")]


def test_the_plan_says_what_a_tool_or_flow_change_does():
    """Each change of a tool or a step in words (the plan, the card and the history say it the
    same), never "change flow step 'research'" or the JSON it carries; a step given the
    question is said so, in its hypothesis too."""

    def said(agent: AgentDefinition, given: list[str]) -> tuple[list[str], str]:
        step = _step(agent, given)
        lines = [change_words(c) for c in step.plan.changes]
        assert lines == [describe_change(c) for c in step.plan.changes]
        return lines, step.plan.hypothesis

    checked = _agent(check=True)
    assert said(checked, ["step:input:check+=research"])[0] == [
        "give step 'check' the output of 'research'"
    ]
    lines, hypothesis = said(checked, ["step:input:check+=input"])
    assert lines == ["give step 'check' the question"]
    assert "the check step given the question" in hypothesis
    assert "output of input" not in hypothesis
    assert said(_agent(), ["tool_first:search_documents"])[0] == [
        "in step 'research', add 'Call search_documents first, before answering.'"
    ]
    assert said(_agent(), ['step:prompt:research:"Search the handbook before answering"'])[0] == [
        "in step 'research', add 'Search the handbook before answering.'"
    ]
    assert said(_agent(), ["remove:tool:calculator"])[0] == [
        "stop step 'research' using calculator"
    ]
    assert said(_agent(), ["step:add:check"])[0] == [
        "add step 'check', given the output of 'polish' and of 'research'"
    ]
    (line,) = said(_agent(), ['describe:tool:calculator:"Only for exact sums"'])[0]
    assert line.startswith("in the description of tool 'calculator', add ")
    assert line.endswith("Only for exact sums.'")


def test_the_offline_model_follows_a_tool_description_that_says_to_use_it():
    """The description a tool wish writes is an instruction the offline model follows, as a
    tool-using model does: it searches; "Use only when…" asks for nothing."""

    def first_call(description: str) -> list[str]:
        request = ModelRequest(
            model="offline-researcher-1",
            system="You are a precise analyst.",
            messages=[ChatMessage(role="user", content=f"Work out the numbers for: {CORE_HOURS}")],
            max_tokens=800,
            temperature=0.3,
            tools=[ToolSpec(name="search_documents", description=description, input_schema={})],
        )
        reply = OfflineModel().reply(request)
        return [b.name or "" for b in reply.content if isinstance(b, ContentBlock) and b.name]

    assert first_call("Finds passages.") == []
    assert first_call(f"Finds passages. {tool_flow.sentence('use')}") == ["search_documents"]
    assert first_call("Finds passages. Use only when the answer needs it.") == []


# ---- through Temporal -------------------------------------------------------------------------


def _spec(tmp_path: Path, lineages: dict[str, dict[str, Any]]) -> SessionSpec:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["id"] = f"tools-{uuid.uuid4().hex[:8]}"
    data["documents"] = ["team-handbook.md"]
    data["inputs"] = [CORE_HOURS]
    (tmp_path / "team-handbook.md").write_text(HANDBOOK)
    data["lineages"] = [{"label": label, "agent": agent} for label, agent in lineages.items()]
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_spec(path)


def _latest(store, lineage: str) -> AgentDefinition:
    row = store.queries.agent_versions(lineage)[-1]
    return store.queries.agent_definition(AgentRef(agent_id=row.agent_id, version=row.version))


def _spans(store, lineage: str, cycle: int):
    (rollout,) = [r for r in store.queries.rollouts(lineage) if r.cycle == cycle]
    first = store.queries.attempts(rollout.id)[0]  # the agent's own try
    return sorted(store.queries.span_records(first.id), key=lambda s: s.sequence)


def _research(store, lineage: str, cycle: int) -> list[str]:
    return [
        f"{s.span_type} {s.tool_name or ''}".strip()
        for s in _spans(store, lineage, cycle)
        if s.name == "research" and s.span_type in ("llm_call", "tool_call")
    ]


async def test_a_tool_wish_makes_the_next_trace_search_the_handbook_before_the_answer(
    client, store, settings, run_worker, tmp_path
):
    """ "Search the handbook before answering": confirmed as the chip the page offers
    (``tool_first:search``, the tool's full name here) the research step is told so; "it
    should have searched the handbook", confirmed as its chip (``tool:search``), changes the
    tool's description. Either way the next trace searches before the step answers."""
    spec = _spec(tmp_path, {"first": _research_agent(), "chip": _research_agent()})
    comment = "Search the handbook before answering."
    assert _chips(comment) == ["tool_first:search"]
    said = "It should have searched the handbook."
    chips = _chips(said)
    assert chips == ["tool:search"]
    async with run_worker():
        handles = await start_session(client, spec, settings.task_queue)
        for handle in handles:
            await wait_for_state(handle, awaiting(1))
        first, chip = handles
        await first.execute_update(
            "submit_score",
            {"score": 4, "comment": comment, "wants": _chips(comment)},
        )
        await chip.execute_update("submit_score", {"score": 4, "comment": said, "wants": chips})
        told = await wait_for_state(first, awaiting(2))
        described = await wait_for_state(chip, awaiting(2))

    for label in ("first", "chip"):
        lineage = spec.lineage_id(label)
        assert _research(store, lineage, 1) == ["llm_call"]  # cycle 1: no search
        assert _research(store, lineage, 2) == [
            "llm_call",
            "tool_call search_documents",
            "llm_call",
            "tool_call read_document",
            "llm_call",  # the step's answer, after the search
        ]
        output = store.queries.artifact_text(store.queries.artifacts(lineage)[-1].id)
        assert "10:00 to 15:00" in output  # what it found reached the answer
    assert told.agent_version == described.agent_version == 2
    assert "search first, before answering" in (told.last_reading or "")
    agent = _latest(store, spec.lineage_id("first"))
    assert agent.flow[0].prompt.startswith("Call search_documents first, before answering.")
    assert agent.system_prompt == "You are a precise analyst."
    agent = _latest(store, spec.lineage_id("chip"))
    search = next(t for t in agent.tools if t.name == "search_documents")
    assert search.description.endswith(tool_flow.sentence("use"))


async def test_step_input_gives_the_check_step_the_findings_and_a_forbidden_tool_is_refused(
    client, store, settings, run_worker, temporal_address, tmp_path
):
    """``step:input:check+=research``: the check step's prompt gets ``{research}``, the next
    trace shows the findings in what it was given, and ``blame`` names the score and the wish
    behind the edge. ``tool:web_search``, a tool the constraints do not allow: refused with the
    reason, in ``state`` and in the store, and nothing changes."""
    spec = _spec(tmp_path, {"fed": _research_agent(check=True), "refused": _research_agent()})
    fed_id, refused_id = spec.lineage_id("fed"), spec.lineage_id("refused")
    async with run_worker():
        fed, refused = await start_session(client, spec, settings.task_queue)
        for handle in (fed, refused):
            await wait_for_state(handle, awaiting(1))
        await fed.execute_update(
            "submit_score",
            {
                "score": 5,
                "comment": "The check step never saw the research.",
                "wants": ["step:input:check+=research"],
            },
        )
        await refused.execute_update(
            "submit_score", {"score": 5, "wants": ["tool:web_search"], "rater": "ana"}
        )
        after = await wait_for_state(fed, awaiting(2))
        kept = await wait_for_state(refused, awaiting(2))

    # the check step was given only the polished answer; now the findings too
    def check_input(cycle: int) -> str:
        spans = _spans(store, fed_id, cycle)
        findings = [s.output for s in spans if s.name == "research" and s.span_type == "llm_call"]
        (given,) = [s.input for s in spans if s.name == "check" and s.span_type == "llm_call"]
        assert findings[-1]
        return "yes" if findings[-1] in (given or "") else "no"

    assert check_input(1) == "no"
    assert check_input(2) == "yes"

    # and the trace says what each step was given: the flow that ran, edge by edge; blame
    # says where the edge came from
    def cli(*args: str) -> str:
        return starter_cli(
            *args,
            temporal_address=temporal_address,
            database_url=settings.database_url,
            columns=400,
        )

    traced, blamed = await asyncio.gather(
        asyncio.to_thread(cli, "trace", fed_id, "--cycle", "2"),
        asyncio.to_thread(cli, "blame", fed_id),
    )
    lines = traced.splitlines()
    assert lines[lines.index("step research") + 1] == "  given: the question"
    assert lines[lines.index("step check") + 1] == "  given: polish, research"
    (before,) = [r for r in store.queries.rollouts(fed_id) if r.cycle == 1]
    steps = store.queries.rollout_trace(before.id).attempts[0].steps
    assert [(s.name, s.given) for s in steps] == [
        ("research", ["the question"]),
        ("draft", ["the question", "research"]),
        ("polish", ["draft"]),
        ("check", ["polish"]),
    ]
    assert after.agent_version == 2
    agent = _latest(store, fed_id)
    assert agent.flow[-1].prompt == f"{CHECK}\nThe output of the research step: {{research}}"

    # blame: the edge, the step's prompt, and the parameters and tools as they came
    rows = {(r.part, r.name): r for r in store.queries.agent_provenance(fed_id)}
    edge = rows[("edge", "research → check")]
    assert (edge.version, edge.trigger_score, edge.wish) == (
        2,
        5,
        "step:input:check+=research",
    )
    assert edge.trigger_comment == "The check step never saw the research."
    assert rows[("edge", "polish → check")].version == 1  # as defined
    assert rows[("step", "check")].wish == "step:input:check+=research"
    assert rows[("parameter", "temperature")].reason == "initial definition"
    assert rows[("tool", "search_documents")].version == 1
    (line,) = [x for x in blamed.splitlines() if "edge research → check" in x]
    assert "v2" in line and "step:input:check+=research" in line and "5: The check step" in line

    # refused: said back in state, recorded in the store, the agent as it was
    reason = (
        "refused tool:web_search: the agent may not use 'web_search': its constraints allow "
        "only these tools: calculator, search_documents, read_document"
    )
    _refused(store, kept, refused_id, reason)


def _refused(store, state, lineage_id: str, reason: str) -> None:
    """A refused wish: said back in ``state``, recorded in the store, the agent left at v1."""
    assert state.agent_version == 1
    assert reason in (state.last_evolution or "")
    (event,) = store.queries.events(lineage_id, ["evolution.kept"])
    assert any(note.startswith(reason) for note in event.payload["plan"]["notes"])


async def test_a_step_dropped_in_plain_words_leaves_the_next_trace_and_blame_says_why(
    client, store, settings, run_worker, temporal_address, tmp_path
):
    """ "Drop the polish step", confirmed as its chip: the next run has no polish step (the
    draft step's answer is the output), the state and the history say so in words, and
    ``blame`` names the removed step with the score and the wish. ``step:remove:draft`` while
    polish is given ``{draft}``: refused with the reason, in ``state`` and the store."""
    spec = _spec(tmp_path, {"gone": _research_agent(), "kept": _research_agent()})
    gone_id, kept_id = spec.lineage_id("gone"), spec.lineage_id("kept")
    comment = "Drop the polish step, it adds nothing."
    chips = _chips(comment)
    assert chips == ["step:remove:polish"]
    async with run_worker():
        gone, kept = await start_session(client, spec, settings.task_queue)
        for handle in (gone, kept):
            await wait_for_state(handle, awaiting(1))
        await gone.execute_update(
            "submit_score", {"score": 5, "comment": comment, "wants": chips, "rater": "ana"}
        )
        await kept.execute_update(
            "submit_score", {"score": 5, "wants": ["step:remove:draft"], "rater": "ana"}
        )
        after = await wait_for_state(gone, awaiting(2))
        still = await wait_for_state(kept, awaiting(2))

    assert after.agent_version == 2
    assert "take out step 'polish'" in (after.last_evolution or "")
    assert (after.last_reading or "").startswith("Read as: no polish step ('Drop the polish")
    assert [s.name for s in _latest(store, gone_id).flow] == ["research", "draft"]
    spans = _spans(store, gone_id, 2)
    assert [s.name for s in spans if s.span_type == "llm_call"][-1] == "draft"
    draft = [s.output for s in spans if s.name == "draft" and s.span_type == "llm_call"]
    output = store.queries.artifact_text(store.queries.artifacts(gone_id)[-1].id)
    assert output == draft[-1]  # the draft step's answer is the output now

    def cli(*args: str) -> str:
        return starter_cli(
            *args,
            temporal_address=temporal_address,
            database_url=settings.database_url,
            columns=400,
        )

    traced, blamed, history = await asyncio.gather(
        asyncio.to_thread(cli, "trace", gone_id, "--cycle", "2"),
        asyncio.to_thread(cli, "blame", gone_id),
        asyncio.to_thread(
            training_data_cli,
            "history",
            gone_id,
            url=settings.database_url,
            env={"COLUMNS": "400"},
        ),
    )
    assert [x for x in traced.splitlines() if x.startswith("step ")] == [
        "step research",
        "step draft",
    ]
    rows = {(r.part, r.name): r for r in store.queries.agent_provenance(gone_id)}
    removed = rows[("removed step", "polish")]
    assert (removed.version, removed.trigger_score, removed.trigger_comment) == (2, 5, comment)
    assert (removed.wish or "").startswith("step:remove:polish")
    assert removed.segment == "Tighten this answer without losing any number: {draft}"
    (line,) = [x for x in blamed.splitlines() if "removed step polish" in x]
    assert "v2" in line and "step:remove:polish" in line
    assert "take out step 'polish'" in history.stdout

    reason = (
        "refused step:remove:draft: the polish step is given its output ({draft}): a step "
        "whose output a later step uses is removed only with that input dropped too"
    )
    _refused(store, still, kept_id, reason)
    assert [s.name for s in _latest(store, kept_id).flow] == ["research", "draft", "polish"]


async def test_a_call_pointed_at_by_its_place_is_said_back_as_the_call_there(
    client, store, settings, run_worker, tmp_path
):
    """ "The second search", "the 12th search": the reading (the page's preview, the step's
    say-back) names the call at that place in the scored cycle's trace, whatever tool the
    comment named, or says the call there is a model's or that there is none; the wish is
    about the tool at that place."""
    spec = research_spec(tmp_path)  # cycle 1: 1 model, 2 calculator, 3 model, 4 search, ...
    lineage = spec.lineage_id("A")
    backends = TrainerBackends(Settings())

    async def read(comment: str) -> ReadingPreview:
        _, seen = await preview_reading(client, store, backends, lineage, 3, comment)
        return seen

    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        (rollout,) = store.queries.rollouts(lineage)
        calls = store.queries.run_calls(rollout.id)
        assert [c.name for c in calls if c.kind == "tool"] == [
            "calculator",
            "search_documents",
            "read_document",
        ]
        assert [c.number for c in calls if c.kind == "tool"] == [2, 4, 6] and len(calls) == 9
        second = await read("The second search was pointless.")
        assert "use the calculator tool less (call 2 in cycle 1's trace is calculator)" in (
            second.said_back
        )
        assert second.wants == ["less:tool:calculator"]
        third = await read("The third search was pointless.")
        assert "(call 3 in cycle 1's trace is a model call, not a tool's)" in third.said_back
        missing = await read("The 12th search was pointless.")
        assert "(cycle 1's trace has no call 12: it made 9 calls)" in missing.said_back
        last = await read("The last search was pointless.")
        assert "(the last tool call in cycle 1's trace is read_document)" in last.said_back
        # scored: the step says it back so, and changes the tool at that place
        comment = "The sixth search was pointless."
        await handle.execute_update("submit_score", {"score": 4, "comment": comment})
        state = await wait_for_state(handle, awaiting(2))
    assert "use the read_document tool less (call 6 in cycle 1's trace is read_document)" in (
        state.last_reading or ""
    )
    # the tool at that place is the one used less: its description says when it is worth it
    tools = {t.name: t.description for t in _latest(store, lineage).tools}
    assert tools["read_document"].startswith("Use only when the answer needs")
    assert tools["search_documents"] == tools["calculator"] == ""


def test_a_sentence_given_at_the_edit_prompt_keeps_its_case_and_its_length_is_its_own():
    """The rater's sentence goes into the agent as written, and a want that carries one is
    bounded by its sentence (200 characters), not by the 60 of a family and an amount."""
    sentence = "Only multiply rates the handbook gives; say which section each rate is from."
    (said,) = wants.from_options([f'Step:Prompt:Research:"{sentence}"'], [], [])
    assert said == f'step:prompt:research:"{sentence}"'
    assert ScoreInput.model_validate({"score": 4, "wants": [said]}).wants == [said]
    with pytest.raises(ValueError, match="1 to 60 characters"):
        ScoreInput.model_validate({"score": 4, "wants": ["shorter:" + "9" * 60]})


def test_dropping_a_wish_whose_name_starts_with_c_drops_the_wish():
    seen = ReadingPreview(chips=[chip("creative"), chip("shorter")], said_back="")
    assert reading_prompt.dropped_change(seen, "drop creative") is None
    assert [c.want for c in reading_prompt.edited(seen.chips, "drop creative")] == ["shorter"]


def test_a_tool_used_less_is_a_want_its_description_carries():
    """ "use read_document less" can be sent (`--want less:tool:read_document`), and read from
    plain words; its description then says when a call is worth it, and no step loses it."""
    agent = _agent()
    step = _step(agent, ["less:tool:read_document"])
    (tool,) = [t for t in step.agent.tools if t.name == "read_document"]
    assert tool.description.endswith(tool_flow.sentence("less"))
    assert [s.tools for s in step.agent.flow] == [s.tools for s in agent.flow]
    assert _chips("The second search was pointless.") == ["less:tool:search"]
