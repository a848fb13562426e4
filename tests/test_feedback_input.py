"""Bad feedback never breaks a lineage: the update refuses it with a clear message (the CLI
exits non-zero), the signal records it as rejected, and the lineage keeps waiting."""

from __future__ import annotations

import json

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from client import start_session
from tests.conftest import awaiting, eventually, make_spec, temporal_cli, wait_for_state
from workflows.lineage import LineageWorkflow


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"score": 11}, "score: Input should be less than or equal to 10 (got 11)"),
        ({"score": "7"}, "score: Input should be a valid number (got '7')"),
        ({"comment": "no score here"}, "score: field required"),
        ({"score": 5, "colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"score": 5, "comment": "x" * 5000}, "comment: String should have at most 4000"),
        ("seven", "expected a JSON object, got str"),
    ],
)
async def test_submit_score_rejects_bad_payloads_with_the_reason(
    client, settings, run_worker, payload, message
):
    spec = make_spec()
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        with pytest.raises(WorkflowUpdateFailedError) as failure:
            await handle.execute_update(LineageWorkflow.submit_score, payload)
        assert message in str(failure.value.cause)
        # sending the same payload again cannot succeed: the refusal says so
        assert isinstance(failure.value.cause, ApplicationError)
        assert (failure.value.cause.type, failure.value.cause.non_retryable) == (
            "InvalidScore",
            True,
        )
        state = await handle.query(LineageWorkflow.state)
        assert (state.status, state.cycle, state.queued_scores) == ("awaiting_score", 1, 0)


async def test_cli_update_exits_non_zero_and_names_the_problem(
    client, settings, run_worker, temporal_address
):
    spec = make_spec()
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        bad = await temporal_cli(
            temporal_address,
            "workflow",
            "update",
            "execute",
            "--workflow-id",
            handle.id,
            "--name",
            "submit_score",
            "--input",
            '{"score": 11}',
        )
        assert bad.returncode != 0
        assert "less than or equal to 10" in bad.stdout + bad.stderr
        good = await temporal_cli(
            temporal_address,
            "workflow",
            "update",
            "execute",
            "--workflow-id",
            handle.id,
            "--name",
            "submit_score",
            "--input",
            json.dumps({"score": 7, "comment": "fine"}),
            "--output",
            "json",
        )
        assert good.returncode == 0, good.stderr
        assert '"score": 7' in good.stdout.replace('"score":7', '"score": 7')
        await wait_for_state(handle, awaiting(2))


async def test_malformed_score_signal_is_recorded_and_the_lineage_keeps_waiting(
    client, store, settings, run_worker
):
    spec = make_spec()
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 42, "comment": "too high"})
        await handle.signal("score", "not even an object")
        await handle.signal("score", {"score": 6, "cycle": 9})  # wrong cycle
        state = await wait_for_state(handle, lambda s: s.rejected_feedback == 3)
        assert (state.status, state.cycle, state.agent_version) == ("awaiting_score", 1, 1)
        assert "cycle 9" in state.last_rejection
        # all three, in the order sent, each read once ("score: …", not "score: score: …")
        assert state.recent_rejections == [
            "score: Input should be less than or equal to 10 (got 42)",
            "score: expected a JSON object, got str: 'not even an object'",
            "score: cycle: score is for cycle 9, but cycle 1 is awaiting its score",
        ]
        await handle.signal("score", {"score": 6, "comment": "too long", "cycle": 1})
        state = await wait_for_state(handle, awaiting(2))
        assert [p.score for p in state.score_history] == [6]
        lineage = spec.lineage_id("A")
        await eventually(lambda: len(store.queries.rejected_feedback(lineage)) == 3)

    rejected = store.queries.rejected_feedback(lineage)
    assert [r.kind for r in rejected] == ["score", "score", "score"]
    assert "less than or equal to 10 (got 42)" in rejected[0].reason
    assert "expected a JSON object" in rejected[1].reason
    assert "cycle 9" in rejected[2].reason
    assert len(store.queries.events(lineage, ["feedback.rejected"])) == 3
    assert [e.score for e in store.queries.evaluations(lineage)] == [6]


@pytest.mark.every_backend
async def test_text_no_store_can_keep_and_huge_text_are_refused_at_the_door(
    client, store, task_queue, run_worker
):
    # NUL (PostgreSQL refuses it in text) and a 1.9 MB comment: each is refused with a short
    # reason, recorded as a rejection on either backend, and the lineage keeps waiting, then
    # takes a good score
    spec = make_spec()
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 4, "comment": "too\x00long"})
        await handle.signal("directive", {"kind": "sticky", "content": "a\x00"})
        await handle.signal("score", {"score": 4, "comment": "x" * 1_900_000})
        with pytest.raises(WorkflowUpdateFailedError) as failure:
            await handle.execute_update(
                LineageWorkflow.submit_score, {"score": 4, "comment": "nul\x00here"}
            )
        assert "NUL character" in str(failure.value.cause)
        await eventually(lambda: len(store.queries.rejected_feedback(lineage)) == 3)
        state = await handle.query(LineageWorkflow.state)
        assert (state.status, state.cycle, state.rejected_feedback) == ("awaiting_score", 1, 3)
        assert len(state.last_rejection) < 400 and "1,900,000 characters" in state.last_rejection
        await handle.signal("score", {"score": 7, "comment": "fine"})
        state = await wait_for_state(handle, awaiting(2))
    rejected = store.queries.rejected_feedback(lineage)
    reasons = " | ".join(r.reason for r in rejected)
    assert reasons.count("NUL character") == 2 and "1,900,000 characters" in reasons
    assert all(len(r.reason) < 400 and len(r.payload_preview) <= 300 for r in rejected)
    assert [e.score for e in store.queries.evaluations(lineage)] == [7]


def test_a_lone_surrogate_is_refused_as_text_no_store_can_keep():
    from domain.feedback import parse_score

    with pytest.raises(ValueError, match="comment: Input should be a valid string"):
        parse_score({"score": 4, "comment": "bad \ud800 text"})


@pytest.mark.every_backend
async def test_every_signal_is_answered_however_malformed(client, store, task_queue, run_worker):
    # Payloads the SDK's converter cannot read, a second argument (which once wedged the
    # lineage) and a name the lineage does not know: each leaves a rejection record with a
    # short reason, and the lineage goes on to take a good score.
    from temporalio.api.common.v1 import Payload
    from temporalio.common import RawValue

    def raw_json(data: bytes) -> RawValue:
        return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=data))

    spec = make_spec()
    lineage = spec.lineage_id("A")
    async with run_worker():
        (handle,) = await start_session(client, spec, task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", raw_json(b"[" * 5000 + b"]" * 5000))
        await handle.signal("directive", raw_json(b'{"kind": "sticky", "content": "\\ud800"}'))
        await handle.signal("score", args=[{"score": 3}, {"score": 4}])
        await handle.signal("bogus", {"score": 9})
        await eventually(lambda: len(store.queries.rejected_feedback(lineage)) == 4)
        state = await handle.query(LineageWorkflow.state)
        assert (state.status, state.cycle, state.rejected_feedback) == ("awaiting_score", 1, 4)
        await handle.signal("score", {"score": 7, "comment": "fine"})
        state = await wait_for_state(handle, awaiting(2))
    rejected = store.queries.rejected_feedback(lineage)
    assert [r.kind for r in rejected] == ["score", "directive", "score", "signal"]
    assert "recursion limit" in rejected[0].reason
    assert "surrogate" in rejected[1].reason or "escape" in rejected[1].reason
    assert "one argument" in rejected[2].reason and "got 2" in rejected[2].reason
    assert "no signal named 'bogus'" in rejected[3].reason
    assert all(len(r.reason) < 400 and len(r.payload_preview) <= 300 for r in rejected)
    assert [e.score for e in store.queries.evaluations(lineage)] == [7]


@pytest.mark.every_backend
def test_rejections_and_directives_list_in_the_order_the_lineage_took_them(store):
    """Signals handled in one workflow task are recorded by concurrent steps, which may commit
    in any order: the store lists them by their place in the lineage's feedback sequence."""
    from domain.lineage import feedback_key
    from tests.store_story import register

    register(store, "lin-1")
    places = [3, 1, 2]  # committed in this order, taken by the lineage as 1, 2, 3
    for place in places:
        store.recorder.record_rejection(
            session_id="s1",
            lineage_id="lin-1",
            rejection_id=feedback_key("lin-1", "rejected", place, {"n": place}),
            cycle=1,
            kind=f"kind-{place}",
            payload_preview="{}",
            reason="test",
        )
        store.recorder.record_directive(
            session_id="s1",
            lineage_id="lin-1",
            directive_id=feedback_key("lin-1", "directive", place + 10, {"n": place}),
            cycle=1,
            kind="sticky",
            content=f"directive {place}",
        )
    assert [r.kind for r in store.queries.rejected_feedback("lin-1")] == [
        "kind-1",
        "kind-2",
        "kind-3",
    ]
    assert [d.content for d in store.queries.directives("lin-1")] == [
        "directive 1",
        "directive 2",
        "directive 3",
    ]


def test_a_wish_named_with_its_amount_on_the_command_line_is_one_wish():
    from domain import wants

    assert wants.from_options(["shorter", "warmer"], ["example"], ["length=half"]) == [
        "warmer",
        "remove:example",
        "shorter:half",
    ]
