"""Attempts are Temporal retries: every try is recorded, failed ones with their error, through
the real anthropic SDK talking to a local Messages API."""

from __future__ import annotations

from pydantic import SecretStr

from client import start_session
from store.tables import AttemptRow, SpanRow, TrainingEvent
from tests.conftest import awaiting, make_spec, wait_for_state
from tests.fake_messages_api import OVERLOADED, FakeMessagesAPI, text_message

MODEL = "claude-sonnet-5"


async def test_two_failures_then_success_leave_three_attempts(client, store, settings, run_worker):
    spec = make_spec(model=MODEL, options={"maxAttempts": 3, "retryInitialIntervalSeconds": 0.1})
    with FakeMessagesAPI() as api:
        api.script = [
            OVERLOADED,
            (200, "{not json"),  # a malformed answer is a failed attempt too
            (200, text_message("- short\n- bulleted", MODEL)),
            (200, text_message("- cycle two", MODEL)),
        ]
        claude = settings.model_copy(
            update={
                "anthropic_api_key": SecretStr("sk-test-secret"),
                "anthropic_base_url": api.base_url,
                "anthropic_max_retries": 0,  # let Temporal own the retries here
            }
        )
        async with run_worker(claude):
            (handle,) = await start_session(client, spec, settings.task_queue)
            state = await wait_for_state(handle, awaiting(1))
            assert state.latest_output_preview == "- short\n- bulleted"
            counts_before = (
                store.queries.count(AttemptRow),
                store.queries.count(SpanRow),
                store.queries.count(TrainingEvent),
            )

        # a new worker replays the workflow from history; nothing is recorded twice
        async with run_worker(claude):
            await handle.signal("score", {"score": 6})
            await wait_for_state(handle, awaiting(2))

        # the request carried the agent's system prompt and sampling parameters
        first = api.requests[0]
        agent = spec.lineages[0].agent
        assert first["system"] == agent.system_prompt
        assert first["model"] == MODEL
        assert first["max_tokens"] == agent.parameters.max_tokens
        assert first["temperature"] == agent.parameters.temperature
        assert first["messages"][0]["content"] == spec.inputs[0]
        assert "sk-test-secret" in str(api.headers[0]), api.headers[0]

    rollout = store.queries.rollouts(spec.lineage_id("A"))[0]
    attempts = store.queries.attempts(rollout.id)
    assert [(a.attempt_number, a.status) for a in attempts] == [
        (1, "failed"),
        (2, "failed"),
        (3, "succeeded"),
    ]
    assert "529" in attempts[0].error and "Overloaded" in attempts[0].error
    assert "malformed" in attempts[1].error or "JSON" in attempts[1].error
    assert attempts[2].prompt_tokens == 12 and attempts[2].completion_tokens == 34
    assert attempts[2].estimated_cost and attempts[2].estimated_cost > 0
    assert rollout.status == "completed" and rollout.final_attempt_id == attempts[2].id
    failed_span = store.queries.spans(attempts[0].id)[0]
    assert failed_span.type == "llm_call" and "529" in failed_span.tool_error

    # after the replay: the first cycle's rows are exactly as they were
    assert len(store.queries.attempts(rollout.id)) == 3
    assert store.queries.count(AttemptRow) == counts_before[0] + 1  # only cycle 2's attempt
    # secrets never reach the store
    assert not any("sk-test-secret" in str(e.payload) for e in store.queries.events())


async def test_missing_api_key_fails_fast_and_waits_for_retry(client, store, settings, run_worker):
    spec = make_spec(model=MODEL, options={"maxAttempts": 5})
    async with run_worker():  # this worker has no ANTHROPIC_API_KEY
        (handle,) = await start_session(client, spec, settings.task_queue)
        state = await wait_for_state(handle, lambda s: s.status == "failed")
        assert "ANTHROPIC_API_KEY" in (state.last_error or "")
        rollout = store.queries.rollouts(spec.lineage_id("A"))[0]
        assert rollout.status == "failed"
        assert [a.status for a in store.queries.attempts(rollout.id)] == ["failed"]  # no retries
        await handle.signal("stop")
        result = await handle.result()
    assert result.status == "stopped"


async def test_forbidden_pattern_in_output_is_a_constraint_violation(
    client, store, settings, run_worker
):
    spec = make_spec(constraints={"forbiddenPatterns": ["small software teams"]})
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        state = await wait_for_state(handle, lambda s: s.status == "failed")
        assert "ConstraintViolation" in (state.last_error or "") or "forbidden" in (
            state.last_error or ""
        )
        # `retry` runs the rollout again under a new rollout id
        await handle.signal("retry")
        await wait_for_state(handle, lambda s: s.status == "failed" and s.rejected_feedback == 0)
        await handle.signal("stop")
        await handle.result()
    rollouts = store.queries.rollouts(spec.lineage_id("A"))
    assert [r.status for r in rollouts] == ["failed", "failed"]
    assert rollouts[1].id.endswith("-retry1")
    attempt = store.queries.attempts(rollouts[0].id)[0]
    assert attempt.status == "failed" and "forbidden pattern" in attempt.error
