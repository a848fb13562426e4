"""The research agent's tools, through Temporal: the offline model searches the handbook and
reads the document it cites when a step's prompt asks for it (and not when it does not), and
`training-camp trace` prints every step's model and tool calls from the store, the documents'
text escaped."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import yaml

from client import start_session
from domain.spec import SessionSpec, load_spec
from tests.conftest import awaiting, run_starter, starter_cli, wait_for_state

EXAMPLE = Path(__file__).parent.parent / "examples" / "research-session.yaml"
HANDBOOK = (EXAMPLE.parent / "docs" / "team-handbook.md").read_text()
CORE_HOURS = "Core hours are 10:00 to 15:00 in every time zone the team works in."


def research_spec(
    tmp_path: Path,
    *,
    research_prompts: dict[str, str] | None = None,
    system_prompt: str | None = None,
    inputs: list[str] | None = None,
    handbook: str = HANDBOOK,
) -> SessionSpec:
    """examples/research-session.yaml under a session id of its own, with its handbook copied
    (or ``handbook`` instead); ``research_prompts`` gives a lineage per label, its research
    step's prompt changed."""
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["id"] = f"research-{uuid.uuid4().hex[:8]}"
    data["documents"] = ["team-handbook.md"]
    (tmp_path / "team-handbook.md").write_text(handbook)
    if inputs:
        data["inputs"] = inputs
    template = data["lineages"][0]
    if system_prompt is not None:
        template["agent"]["systemPrompt"] = system_prompt
    lineages = []
    for label, prompt in (research_prompts or {"A": None}).items():
        lineage = yaml.safe_load(yaml.safe_dump(template))
        lineage["label"] = label
        if prompt is not None:
            lineage["agent"]["flow"][0]["prompt"] = prompt
        lineages.append(lineage)
    data["lineages"] = lineages
    path = tmp_path / "research.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_spec(path)


async def test_the_offline_model_searches_then_reads_the_handbook_when_the_step_asks(
    client, store, settings, run_worker, tmp_path
):
    spec = research_spec(
        tmp_path,
        system_prompt="You are a precise analyst.",
        inputs=["Explain how core hours help a distributed team."],
        research_prompts={
            "asks": "Search the handbook before answering: {input}",
            "silent": "Work out the numbers for: {input}",
        },
    )
    async with run_worker():
        handles = await start_session(client, spec, settings.task_queue)
        for handle in handles:
            await wait_for_state(handle, awaiting(1))

    def calls(label: str) -> tuple[list[str], list[Any], str]:
        """The research step's spans, read_document's arguments, and the output."""
        lineage = spec.lineage_id(label)
        (rollout,) = store.queries.rollouts(lineage)
        (attempt,) = store.queries.attempts(rollout.id)
        spans = store.queries.span_records(attempt.id)
        research = [
            f"{s.span_type} {s.tool_name or ''}".strip() for s in spans if s.name == "research"
        ]
        reads = [
            s.tool_args
            for s in spans
            if s.span_type == "tool_call" and s.tool_name == "read_document"
        ]
        output = store.queries.artifact_text(store.queries.artifacts(lineage)[0].id)
        return research, reads, output

    asked, reads, answer = calls("asks")
    assert asked == [
        "llm_call",
        "reasoning",
        "tool_call search_documents",
        "tool_result search_documents",
        "llm_call",
        "reasoning",
        "tool_call read_document",
        "tool_result read_document",
        "llm_call",  # the step's answer, after both calls
    ]
    assert reads == [{"name": "team-handbook.md"}]  # the document the search cited
    assert "10:00 to 15:00" in answer  # what it read reached the output
    not_asked, reads, plain = calls("silent")
    assert not_asked == ["llm_call"] and reads == []
    assert "10:00" not in plain


async def test_training_camp_trace_prints_every_step_and_call_of_a_research_cycle(
    client, store, settings, run_worker, tmp_path, temporal_address, backend_url
):
    # a document that holds a terminal escape (erase the screen): a tool result is data
    spec = research_spec(
        tmp_path, handbook=HANDBOOK.replace("(excerpt)", "(excerpt)\x1b[2J\x1b]0;owned\x07")
    )
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))

    out = await asyncio.to_thread(
        starter_cli, "trace", lineage, temporal_address=temporal_address, database_url=backend_url
    )
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[0] == "Question (cycle 1):"
    assert lines[1] == spec.inputs[0]
    assert lines[3].startswith(
        f"{lineage}, cycle 1: 3 steps · 6 model calls · 3 tool calls (output id: "
    )
    steps = [line for line in lines if line.startswith("step ")]
    assert steps == ["step research", "step draft", "step polish"]
    call_lines = [line for line in lines if line.startswith("  ") and line[2].isdigit()]
    heads = [line.split(" (")[0].strip() for line in call_lines]
    assert heads == [
        "1. model offline-researcher-1",
        '2. tool calculator {"expression": "12 * 1200"}',
        "3. model offline-researcher-1",
        '4. tool search_documents {"query": "monthly rent saved remote engineers"}',
        "5. model offline-researcher-1",
        '6. tool read_document {"name": "team-handbook.md"}',
        "7. model offline-researcher-1",
        "8. model offline-researcher-1",
        "9. model offline-researcher-1",
    ]
    results = [line.strip() for line in lines if line.startswith("     ")]
    assert results[0] == "→ I will compute 12 * 1200 with the calculator."
    assert results[1] == "→ 14400"
    assert results[3].startswith("→ [team-handbook.md] Remote work saves the company office rent")
    # the document's escape sequences are shown, not acted on
    assert results[5].startswith("→ # Team handbook (excerpt)\\x1b[2J\\x1b]0;owned\\x07 Core hours")
    assert "\x1b" not in out and "\x07" not in out
    # every call says how long it took; a model call its tokens
    assert all(" ms" in line for line in call_lines)
    assert all("tokens)" in line for line in call_lines if " model " in line)
    # the answer of the polish step is the output itself, cut short
    assert results[-1].startswith("→ The result is: 14400.")

    again = await asyncio.to_thread(
        starter_cli,
        "trace",
        f"lineage-{lineage}",
        "--cycle",
        "1",
        temporal_address=temporal_address,
        database_url=backend_url,
    )
    assert again == out
    missing = await asyncio.to_thread(
        run_starter,
        "trace",
        lineage,
        "--cycle",
        "2",
        temporal_address=temporal_address,
        database_url=backend_url,
    )
    assert missing.returncode == 1
    assert f"{lineage} has run nothing in cycle 2" in missing.stdout


async def test_the_trace_header_counts_every_attempt_it_shows(
    client, store, settings, run_worker, tmp_path, temporal_address, backend_url
):
    """A cycle revised inside itself (its output over the word limit asked for) shows the
    agent's try and the revision; the header counts both, every step and call listed below,
    not only the revision's one call."""
    spec = research_spec(tmp_path, inputs=["Explain how core hours help a distributed team."])
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.execute_update("submit_score", {"score": 4, "wants": ["shorter:20"]})
        state = await wait_for_state(handle, awaiting(2), timeout=60)
    assert state.latest_revised

    out = await asyncio.to_thread(
        starter_cli,
        "trace",
        lineage,
        "--cycle",
        "2",
        temporal_address=temporal_address,
        database_url=backend_url,
    )
    lines = [line.rstrip() for line in out.splitlines()]
    assert [x for x in lines if x.startswith(("attempt ", "revision "))] == [
        "attempt 1 (succeeded)",
        "revision 1 (the output shown)",
    ]
    steps = [x for x in lines if x.startswith("step ")]
    calls = [x for x in lines if x.startswith("  ") and x[2].isdigit()]
    models = [x for x in calls if ". model " in x]
    tools = [x for x in calls if ". tool " in x]
    assert len(steps) == 4 and len(tools) >= 1 and len(models) + len(tools) == len(calls)
    assert lines[3].startswith(
        f"{lineage}, cycle 2: 2 attempts · 4 steps · {len(models)} model calls · "
        f"{len(tools)} tool call{'s' if len(tools) > 1 else ''} (output id: "
    )
