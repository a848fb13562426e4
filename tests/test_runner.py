"""The Agent Runner against a local Messages API: tools, flows, spans, triplets, constraints."""

from __future__ import annotations

import json

import pytest
from pydantic import SecretStr

from client import start_session
from domain.spec import load_spec
from runner.tools import default_registry
from store.tables import SpanRow
from tests.conftest import awaiting, make_spec, wait_for_state
from tests.fake_messages_api import (
    OVERLOADED_RETRY_SOON,
    FakeMessagesAPI,
    text_message,
    tool_use_message,
)

MODEL = "claude-sonnet-5"
THREE_STEPS = {
    "tools": [{"name": "calculator"}, {"name": "read_document"}],
    "flow": [
        {
            "name": "research",
            "prompt": "Work out the numbers for: {input}",
            "tools": ["calculator"],
        },
        {"name": "draft", "prompt": "Draft an answer from: {research}", "tools": []},
        {"name": "polish", "prompt": "Polish this: {previous}", "tools": []},
    ],
}


@pytest.fixture
def api():
    with FakeMessagesAPI() as server:
        yield server


@pytest.fixture
def claude(settings, api):
    return settings.model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-test"),
            "anthropic_base_url": api.base_url,
            "anthropic_max_retries": 2,
        }
    )


async def run_one_cycle(client, spec, claude, run_worker):
    async with run_worker(claude):
        (handle,) = await start_session(client, spec, claude.task_queue)
        return handle, await wait_for_state(
            handle, lambda s: s.status in ("awaiting_score", "failed")
        )


async def test_three_step_flow_with_a_tool_call(client, store, claude, api, run_worker):
    spec = make_spec(model=MODEL, agent_extra=THREE_STEPS)
    api.script = [
        (
            200,
            tool_use_message(
                MODEL,
                "calculator",
                {"expression": "12 * (3 + 4)"},
                "toolu_1",
                text="Let me compute the hours.",
            ),
        ),
        (200, text_message("Research: 84 hours", MODEL)),
        (200, text_message("Draft: a team saves 84 hours", MODEL)),
        (200, text_message("A team saves 84 hours a month.", MODEL)),
    ]
    handle, state = await run_one_cycle(client, spec, claude, run_worker)
    assert state.status == "awaiting_score"
    assert state.latest_output_preview == "A team saves 84 hours a month."

    first, second, third, fourth = api.requests
    agent = spec.lineages[0].agent
    assert first["system"] == agent.system_prompt and first["model"] == MODEL
    assert first["temperature"] == agent.parameters.temperature
    assert first["max_tokens"] == agent.parameters.max_tokens
    assert first["messages"] == [
        {"role": "user", "content": f"Work out the numbers for: {spec.inputs[0]}"}
    ]
    assert [t["name"] for t in first["tools"]] == ["calculator"]  # the step's subset only
    assert first["tools"][0]["input_schema"] == default_registry().schema("calculator")
    # the tool ran and its result went back to the model, after the model's own turn
    assert second["messages"][1]["content"][1]["type"] == "tool_use"
    assert second["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "84"}],
    }
    assert third["messages"] == [
        {"role": "user", "content": "Draft an answer from: Research: 84 hours"}
    ]
    assert "tools" not in third
    assert fourth["messages"][0]["content"] == "Polish this: Draft: a team saves 84 hours"

    rollout = store.queries.rollouts(spec.lineage_id("A"))[0]
    (attempt,) = store.queries.attempts(rollout.id)
    spans = store.queries.span_records(attempt.id)
    tree = [
        (s.sequence, s.span_type, s.parent_span_id and s.parent_span_id.rsplit(":", 1)[1], s.name)
        for s in spans
    ]
    assert tree == [
        (1, "llm_call", None, "research"),
        (2, "reasoning", "s1", "research"),
        (3, "tool_call", "s1", "research"),
        (4, "tool_result", "s3", "research"),
        (5, "llm_call", "s4", "research"),
        (6, "llm_call", "s5", "draft"),
        (7, "llm_call", "s6", "polish"),
        (8, "output", "s7", "output"),
    ]
    call = spans[2]
    assert (call.tool_name, call.tool_args, call.tool_result) == (
        "calculator",
        {"expression": "12 * (3 + 4)"},
        "84",
    )
    assert spans[3].output == "84"
    assert spans[1].output == "Let me compute the hours."
    assert len({s.trace_id for s in spans}) == 1
    assert all(
        s.prompt_tokens == 12 and s.completion_tokens == 34
        for s in spans
        if s.span_type == "llm_call"
    )
    assert (attempt.prompt_tokens, attempt.completion_tokens) == (48, 136)
    expected_cost = round((48 * 3 + 136 * 15) / 1_000_000, 8)
    assert attempt.estimated_cost == pytest.approx(expected_cost)
    assert sum(s.estimated_cost or 0 for s in spans) == pytest.approx(expected_cost)

    await handle.signal("score", {"score": 7})  # the report's final reward
    async with run_worker(claude):
        api.script = [(200, text_message("x", MODEL))] * 4
        await wait_for_state(handle, awaiting(2))
    report = store.queries.rollout_report(rollout.id)
    assert report.final_reward == 7
    assert [t.metadata["step"] for t in report.triplets] == [
        "research",
        "research",
        "draft",
        "polish",
    ]
    assert report.triplets[0].metadata["tool_calls"] == ["calculator"]
    assert report.triplets[0].prompt == f"Work out the numbers for: {spec.inputs[0]}"
    assert report.triplets[3].response == "A team saves 84 hours a month."
    otel = report.trace_data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    by_span = {s["spanId"]: s for s in otel}
    assert len(otel) == 8
    assert by_span[otel[3]["parentSpanId"]]["name"] == "tool_call research"
    assert report.metrics["tool_calls"] == 1 and report.metrics["llm_calls"] == 4


async def test_disallowed_and_failing_tool_calls_are_refused_fed_back_and_recorded(
    client, store, claude, api, run_worker
):
    spec = make_spec(
        model=MODEL,
        agent_extra={"tools": [{"name": "calculator"}]},
        constraints={"allowedTools": ["calculator"]},
    )
    api.script = [
        (200, tool_use_message(MODEL, "read_document", {"name": "secrets.txt"}, "toolu_a")),
        (200, tool_use_message(MODEL, "calculator", {"expression": "1 / 0"}, "toolu_b")),
        (200, text_message("I could not compute it.", MODEL)),
    ]
    _, state = await run_one_cycle(client, spec, claude, run_worker)
    assert state.status == "awaiting_score"
    refused = api.requests[1]["messages"][-1]["content"][0]
    assert refused["is_error"] is True
    assert refused["content"].startswith("refused: tool 'read_document' is not allowed")
    failed = api.requests[2]["messages"][-1]["content"][0]
    assert failed == {
        "type": "tool_result",
        "tool_use_id": "toolu_b",
        "content": "division by zero",
        "is_error": True,
    }

    rollout = store.queries.rollouts(spec.lineage_id("A"))[0]
    spans = store.queries.spans(store.queries.attempts(rollout.id)[0].id)
    calls = [(s.tool_name, s.tool_error) for s in spans if s.type == "tool_call"]
    assert calls[0][0] == "read_document" and "not allowed" in calls[0][1]
    assert calls[1] == ("calculator", "division by zero")
    assert sum(s.tool_error is not None for s in spans) == 4  # two tool calls, two results
    # the attempt's span batch is tagged, so errors and tool use are found in the log
    [batch] = store.queries.events(spec.lineage_id("A"), ["attempt.span_recorded"])
    assert {"error", "tool_use"} <= set(batch.tags)
    assert len(batch.payload["spans"]) == len(spans)


async def test_forbidden_pattern_fails_the_attempt_and_is_recorded(
    client, store, claude, api, run_worker
):
    spec = make_spec(model=MODEL, constraints={"forbiddenPatterns": [r"as an ai language model"]})
    api.script = [(200, text_message("As an AI language model, I cannot.", MODEL))]
    _, state = await run_one_cycle(client, spec, claude, run_worker)
    assert state.status == "failed"
    assert "forbidden pattern" in state.last_error
    rollout = store.queries.rollouts(spec.lineage_id("A"))[0]
    (attempt,) = store.queries.attempts(rollout.id)  # non-retryable: one attempt only
    assert attempt.status == "failed" and "ConstraintViolation" not in attempt.error
    assert "matches forbidden pattern" in attempt.error
    (failed_event,) = store.queries.events(spec.lineage_id("A"), ["attempt.failed"])
    assert failed_event.payload["errorType"] == "ConstraintViolation"
    assert [s.type for s in store.queries.spans(attempt.id)] == ["llm_call"]


async def test_overloaded_is_retried_inside_the_attempt_by_the_sdk(
    client, store, claude, api, run_worker
):
    spec = make_spec(model=MODEL)
    api.script = [OVERLOADED_RETRY_SOON, (200, text_message("fine", MODEL))]
    _, state = await run_one_cycle(client, spec, claude, run_worker)
    assert state.status == "awaiting_score" and len(api.requests) == 2
    rollout = store.queries.rollouts(spec.lineage_id("A"))[0]
    assert [a.status for a in store.queries.attempts(rollout.id)] == ["succeeded"]


async def test_session_documents_reach_the_document_tools(
    client, store, claude, api, run_worker, tmp_path
):
    (tmp_path / "notes.md").write_text("Budgets matter.\n\nRemote work saves office rent.\n")
    (tmp_path / "session.yaml").write_text(
        json.dumps(
            {
                "name": "Docs",
                "id": f"docs-{tmp_path.name[-8:].lower().replace('_', '-')}",
                "inputs": ["Why go remote?"],
                "documents": ["notes.md"],
                "lineages": [
                    {
                        "label": "A",
                        "agent": {
                            "name": "a",
                            "systemPrompt": "Answer from the notes.",
                            "tools": [{"name": "search_documents"}],
                            "parameters": {"model": MODEL, "maxTokens": 500},
                        },
                    }
                ],
            }
        )
    )
    spec = load_spec(tmp_path / "session.yaml")
    api.script = [
        (200, tool_use_message(MODEL, "search_documents", {"query": "office rent"}, "toolu_d")),
        (200, text_message("It saves rent.", MODEL)),
    ]
    _, state = await run_one_cycle(client, spec, claude, run_worker)
    assert state.status == "awaiting_score"
    result = api.requests[1]["messages"][-1]["content"][0]
    assert result["content"] == "[notes.md] Remote work saves office rent."
    assert store.queries.session_documents(spec.session_id) == {
        "notes.md": "Budgets matter.\n\nRemote work saves office rent.\n"
    }


async def test_offline_model_uses_the_calculator_too(client, store, settings, run_worker):
    spec = make_spec(
        inputs=["Explain overtime costs; compute 12 * (3 + 4) first."],
        agent_extra={"tools": [{"name": "calculator"}]},
    )
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        state = await wait_for_state(handle, awaiting(1))
    assert state.latest_output_preview.startswith("The result is: 84.")
    rollout = store.queries.rollouts(spec.lineage_id("A"))[0]
    spans = store.queries.spans(store.queries.attempts(rollout.id)[0].id)
    assert [s.type for s in spans] == [
        "llm_call",
        "reasoning",
        "tool_call",
        "tool_result",
        "llm_call",
        "output",
    ]
    assert store.queries.count(SpanRow) == 6


def test_the_spec_knows_exactly_the_tools_the_runner_implements():
    from domain.spec import BUILT_IN_TOOLS
    from runner.tools import default_registry

    assert sorted(default_registry().names()) == sorted(BUILT_IN_TOOLS)


def test_output_previews_end_at_a_word_and_say_they_were_cut():
    from domain.execution import preview_of

    words = " ".join(f"word{i:03d}" for i in range(200))  # 1,599 characters
    shown = preview_of(words)
    assert shown.endswith(" …") and len(shown) <= 602
    assert shown.removesuffix(" …").split(" ")[-1] in words.split(" ")  # a whole word
    assert preview_of("short answer") == "short answer"
