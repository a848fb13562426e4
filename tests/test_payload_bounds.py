"""Everything that crosses Temporal is bounded by construction: feedback a lineage carries across
continue-as-new, the dispatcher's batches and what it carries, and an RLM cell's calls. Each
test drives a collection past Temporal's 2 MB payload limit and checks what the user sees and
what lands in the store."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from sqlmodel import select
from temporalio.client import Client, WorkflowUpdateFailedError

from client import await_output, start_session
from dataset_optimization.client import AgentLightningClient, Resources
from domain.agent import AgentRef
from domain.checks import (
    MAX_ACTIVE_WISHES,
    MAX_CHECK_TEXT_CHARS,
    MAX_WISH_DETAIL_CHARS,
    MAX_WISH_QUOTE_CHARS,
    ActiveWish,
    CheckResult,
)
from domain.feedback import (
    MAX_COMMENT_CHARS,
    MAX_DIRECTIVE_CHARS,
    MAX_ID_CHARS,
    MAX_RATER_CHARS,
    CorrectionTaken,
    ScoreInput,
)
from domain.lineage import (
    CORRECTIONS_REMEMBERED,
    DIRECTIVES_SHOWN,
    MAX_NOTE_CHARS,
    MAX_QUEUED_CORRECTIONS,
    MAX_QUEUED_SCORES,
    MAX_SUMMARY_CHARS,
    CarriedState,
    QueuedCorrection,
    QueuedScore,
    ScorePoint,
)
from domain.payload_size import json_size
from domain.trainer import MAX_PLANNED_CHANGES, Amount
from domain.wants import MAX_WANT_CHARS, MAX_WANTS
from rlm.repl import ReplConfig, ReplMessage, ReplRunInput, ReplRunResult
from rlm.sandbox import MAX_TRANSCRIPT_BYTES, CellLimits, run_cell
from store.tables import RolloutRow
from tests.conftest import awaiting, eventually, make_spec, wait_for_state
from tests.fake_messages_api import FakeMessagesAPI, text_message
from tests.test_faults import claude_settings
from tests.test_lightning import started_server
from tests.test_rlm_repl import ROOT_MODEL, _cells
from workflows import rlm as rlm_workflow
from workflows.lineage import SCORE_HISTORY_CARRIED, LineageWorkflow
from workflows.lineage_store import RECENT_REJECTIONS
from workflows.rlm import RlmReplWorkflow

PAYLOAD_LIMIT = 2 * 1024 * 1024
MANY = 1_100  # entries of each kind: past 2 MB at 2,000 characters each
CHUNK = 50  # signals sent at once (each chunk is a round of polls: fewer, larger ones)


def _text(n: int, size: int) -> str:
    head = f"Directive {n}: "
    return head + "x" * (size - len(head))


async def _signal_all(handle, name: str, payloads: list[dict], taken, chunk: int = CHUNK) -> None:
    """Signals a chunk at a time, as many users would send them, each chunk once the lineage
    has taken the one before (``taken``: how many, from its state) and committed it: a
    thousand signals in one burst would be a test of something else (Temporal fails a
    workflow task while more than 100 signals wait behind it)."""
    for start in range(0, len(payloads), chunk):
        await asyncio.gather(*(handle.signal(name, p) for p in payloads[start : start + chunk]))
        done = start + len(payloads[start : start + chunk])
        await wait_for_state(handle, lambda s, done=done: taken(s) >= done, timeout=60)
        for _ in range(600):
            described = await handle.describe()
            if not described.raw_description.HasField("pending_workflow_task"):
                break
            await asyncio.sleep(0.05)


def test_the_largest_carried_state_is_far_below_the_payload_limit():
    """The bounds, measured: every carried list at its largest, each entry at its largest and
    in the widest characters (4 bytes each in UTF-8)."""
    wide = "😀"
    score = ScoreInput(
        score=10,
        comment=wide * MAX_COMMENT_CHARS,
        rater=wide * MAX_RATER_CHARS,
        changes=[f"{n:012x}" for n in range(MAX_PLANNED_CHANGES)],  # a confirmed plan's keys
    )
    carried = CarriedState(
        agent=AgentRef(agent_id="x" * 128, version=10**6),
        input_hashes=["0" * 64] * 1000,  # a spec holds at most 1,000 inputs
        score_history=[
            ScorePoint(cycle=10**6, score=10, agent_version=10**6, evaluation_id="e" * 200)
        ]
        * SCORE_HISTORY_CARRIED,
        queued_scores=[QueuedScore(score=score, received_via="update")] * MAX_QUEUED_SCORES,
        sticky_directives=[wide * MAX_DIRECTIVE_CHARS] * DIRECTIVES_SHOWN,
        oneshot_directives=[wide * MAX_DIRECTIVE_CHARS] * DIRECTIVES_SHOWN,
        latest_output_preview=wide * 600,
        last_evolution=wide * MAX_SUMMARY_CHARS,
        last_verdict=wide * MAX_SUMMARY_CHARS,
        last_rejection=wide * MAX_NOTE_CHARS,
        recent_rejections=[wide * MAX_NOTE_CHARS] * RECENT_REJECTIONS,
        last_error=wide * MAX_NOTE_CHARS,
        output_id="o" * MAX_ID_CHARS,
        queued_corrections=[
            QueuedCorrection(
                correction_id="c" * 51,
                evaluation_id="e" * MAX_ID_CHARS,
                wants=["w" * MAX_WANT_CHARS] * MAX_WANTS,
                rater=wide * MAX_RATER_CHARS,
            )
        ]
        * MAX_QUEUED_CORRECTIONS,
        corrections_done=[
            CorrectionTaken(
                correction_id="c" * 51,
                cycle=10**6,
                reading=wide * 600,
                agent_version=10**6,
                error=wide * MAX_NOTE_CHARS,
                rater=wide * MAX_RATER_CHARS,
            )
        ]
        * CORRECTIONS_REMEMBERED,
        active_wishes=[
            ActiveWish(
                family=wide * 40,
                amount=Amount(kind="share", value=0.5, of_words=10**6),
                detail=wide * MAX_WISH_DETAIL_CHARS,
                quote=wide * MAX_WISH_QUOTE_CHARS,
                cycle=10**6,
                made_on_words=10**6,
            )
        ]
        * MAX_ACTIVE_WISHES,
        latest_checks=[
            CheckResult(
                family=wide * 40,
                wish=wide * MAX_CHECK_TEXT_CHARS,
                passed=False,
                measure=wide * MAX_CHECK_TEXT_CHARS,
                value=10**6,
                target=10**6,
                shortfall=wide * MAX_CHECK_TEXT_CHARS,
                cycle=10**6,
            )
        ]
        * MAX_ACTIVE_WISHES,
    )
    size = len(carried.model_dump_json().encode("utf-8"))
    print(f"largest carried state: {size:,} bytes")
    assert size < PAYLOAD_LIMIT // 2


async def test_thousands_of_directives_stay_in_the_store_and_the_lineage_trains(
    client, store, settings, run_worker
):
    """1,100 sticky and 1,100 oneshot directives (2.2 MB of each): the lineage keeps training,
    continues as new every cycle, and answers `state`; the trainer reads them from the store."""
    spec = make_spec(options={"continueAsNewEvery": 1})
    lineage = spec.lineage_id("A")
    sticky = [_text(n, MAX_DIRECTIVE_CHARS) for n in range(MANY)]
    oneshot = [_text(n, MAX_DIRECTIVE_CHARS).replace("Directive", "Oneshot") for n in range(MANY)]
    assert sum(len(d) for d in sticky) > PAYLOAD_LIMIT
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await _signal_all(
            handle,
            "directive",
            [{"kind": "sticky", "content": d} for d in sticky],
            taken=lambda s: s.sticky_count,
        )
        await _signal_all(
            handle,
            "directive",
            [{"kind": "oneshot", "content": d} for d in oneshot],
            taken=lambda s: s.oneshot_count,
        )
        state = await wait_for_state(
            handle, lambda s: s.sticky_count == MANY and s.oneshot_count == MANY, timeout=240
        )
        # what the user sees: the counts, and the latest few of each kind (a chunk's signals
        # arrive in any order)
        assert len(state.sticky_directives) == len(state.oneshot_directives) == DIRECTIVES_SHOWN
        assert set(state.sticky_directives) <= set(sticky[-CHUNK:])
        assert set(state.oneshot_directives) <= set(oneshot[-CHUNK:])
        await handle.signal("score", {"score": 4, "comment": "too long"})
        # the update, not a `state` poll: a query that reaches the run as it continues as new
        # is answered by replaying that run's whole history (its 2,200 signals) from scratch
        state = await asyncio.wait_for(await_output(handle, 2), 120)
        assert state.agent_version == 2, state.last_error
        assert state.last_error is None
        assert (state.sticky_count, state.oneshot_count) == (MANY, 0)  # oneshots used once
        assert state.oneshot_directives == []
        assert state.run_cycles == 1  # a new run, carrying the lineage
        await handle.signal("score", {"score": 6, "comment": "better"})
        state = await asyncio.wait_for(await_output(handle, 3), 120)
        assert state.last_error is None and state.sticky_count == MANY

    rows = store.queries.directives(lineage)
    assert len(rows) == 2 * MANY
    v2 = store.queries.agent_definition(AgentRef(agent_id=lineage, version=2))
    # the earliest directives fit the prompt; the rest are counted in the record's notes
    assert sticky[0] in v2.system_prompt and sticky[-1] not in v2.system_prompt
    first = next(r for r in store.queries.evolution_records(lineage) if r.to_version == 2)
    assert "directive(s) not applied" in " ".join(json.loads(first.plan)["notes"])
    # the record names every directive the step read (from the store, not from Temporal)
    directives = json.loads(first.directives)
    assert (len(directives["sticky"]), len(directives["oneshot"])) == (MANY, MANY)


async def test_scores_past_the_queue_bound_are_refused_with_the_reason(
    client, store, settings, run_worker
):
    """550 scores with 4,000-character comments (2.2 MB) reach a lineage whose rollout failed
    (so none is taken): 25 queue, the signals past them are recorded as rejected with the
    reason, an update is refused with it; after `retry` the lineage takes the queued ones
    cycle after cycle, continuing as new with them. Once it has taken three, its model fails
    again: the rest stay queued, in the new run (taking all 25 would take 25 cycles)."""
    calls = 0
    failing = False

    def model(body: dict) -> tuple[int, dict]:
        nonlocal calls
        calls += 1
        if calls == 1 or failing:  # a rollout that fails for good: the lineage waits for `retry`
            return 400, {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "not now"},
            }
        return 200, text_message("- one\n- two", body["model"])

    spec = make_spec(model=ROOT_MODEL, options={"continueAsNewEvery": 2, "maxAttempts": 1})
    lineage = spec.lineage_id("A")
    sent = 550
    comment = ("Way too long, wanted quick bullets. " * 200)[:MAX_COMMENT_CHARS]
    assert sent * len(comment) > PAYLOAD_LIMIT
    with FakeMessagesAPI() as api:
        api.respond = model
        async with run_worker(claude_settings(settings, api)):
            (handle,) = await start_session(client, spec, settings.task_queue)
            await wait_for_state(handle, lambda s: s.status == "failed")
            await _signal_all(
                handle,
                "score",
                [{"score": 5, "comment": comment}] * sent,
                taken=lambda s: s.queued_scores + s.rejected_feedback,
            )
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update(
                    LineageWorkflow.submit_score, {"score": 7, "comment": "one more"}
                )
            assert f"{MAX_QUEUED_SCORES} scores already wait" in str(refused.value.cause)
            state = await handle.query(LineageWorkflow.state)
            assert state.queued_scores == MAX_QUEUED_SCORES
            assert state.rejected_feedback == sent - MAX_QUEUED_SCORES
            assert f"{MAX_QUEUED_SCORES} scores already wait" in state.last_rejection
            await handle.signal("retry")
            # the store, not `state`: a query waits while the lineage works through its queue
            await eventually(lambda: len(store.queries.evaluations(lineage)) >= 3, timeout=120)
            failing = True
            state = await wait_for_state(handle, lambda s: s.status == "failed", timeout=120)
            taken = len(state.score_history)
            assert [p.cycle for p in state.score_history] == list(range(1, taken + 1))
            assert state.queued_scores == MAX_QUEUED_SCORES - taken  # none lost, none twice
            assert state.run_cycles < state.cycle  # a run after the first holds them
            assert state.agent_version > 1  # it trained

    rejected = store.queries.rejected_feedback(lineage)
    assert len(rejected) == sent - MAX_QUEUED_SCORES
    assert all(r.kind == "score" and "already wait" in r.reason for r in rejected)
    assert len(store.queries.evaluations(lineage)) == taken


async def test_samples_wait_in_the_store_and_never_cross_temporal(
    client, store, settings, run_worker
):
    """40 tasks of 60 KB queued one at a time (2.4 MB) and a small one after them all reach
    the store and run; what crossed Temporal for them (the batches' histories, the clients'
    activities) names them by id and holds none of their text. A task
    over the sample limit is refused at `queue_task` with the reason, and nothing of it
    reaches the store."""
    queue = f"rollouts-{uuid.uuid4().hex[:8]}"
    ran: list[str] = []

    async def agent(task: dict, resources: Resources) -> float:
        ran.append(task["name"])
        return 1.0 if len(task.get("text", "")) in (0, 60_000) else 0.0

    own = Client(**client.config())
    lightning = AgentLightningClient(own, "local", task_queue=queue, settings=settings)
    async with run_worker(), lightning.worker(agent):
        server = await started_server(client, store, settings, queue, "big")
        server_id = server.server_id
        big = [{"name": f"big-{n}", "text": "x" * 60_000} for n in range(40)]
        assert sum(json_size(s) for s in big) > PAYLOAD_LIMIT
        ids = list(await asyncio.gather(*(server.queue_task(s) for s in big)))
        ids.append(await server.queue_task({"name": "small"}))
        with pytest.raises(ValueError, match="65,536 bytes") as refused:
            await server.queue_task({"name": "huge", "text": "x" * 70_000})
        print(f"refused: {refused.value}")
        started = time.monotonic()
        reports = await asyncio.wait_for(server.wait_for_rollouts(ids), 120)
        print(f"41 tasks in batches in {time.monotonic() - started:.1f} s")
        await server.stop()

    assert [r.final_reward for r in reports] == [1.0] * 41  # each agent saw its whole sample
    rows = store.queries._all(select(RolloutRow).where(RolloutRow.session_id == server_id))
    assert len(rows) == 41 and all(r.status == "completed" for r in rows)
    assert sorted(ran) == sorted([s["name"] for s in big] + ["small"])  # "huge" never ran
    query = f'WorkflowId STARTS_WITH "tasks-{server_id}-q"'
    workflows: list[str] = []
    for _ in range(100):  # visibility catches up
        workflows = [w.id async for w in client.list_workflows(query)]
        if len(workflows) >= 2:
            break
        await asyncio.sleep(0.1)
    crossed = 0
    for workflow_id in workflows:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        text = history.to_json()
        assert "x" * 1_000 not in text, f"{workflow_id} carried a sample"
        crossed += len(text)
    print(f"{len(workflows)} workflows, {crossed:,} bytes of history for 2.4 MB of samples")
    assert workflows and crossed < 1_000_000


async def test_a_cell_s_calls_are_bounded_and_a_failed_call_says_why(
    client, store, settings, run_worker, task_queue
):
    """A 3 MB `llm_query` prompt is refused in the cell as CallTooLarge (the model catches it
    and goes on); a model call that fails tells the model why; answers past a cell's bound
    arrive as ResultTooLarge. The run finishes."""
    cells = [
        "r = llm_query('x' * 3_000_000)",
        "try:\n    llm_query('x' * 3_000_000)\nexcept CallTooLarge:\n    print('sending a slice')\n"
        "print(llm_query('x' * 1_000))",
        "answers = []\nfor i in range(6):\n    answers.append(llm_query(f'part {i}'))",
        "print(len(answers), 'answers kept')\nFINAL_VAR('done')",
    ]
    big_answer = "y" * 300_000
    with FakeMessagesAPI() as api:
        api.script = [
            (200, text_message(f"```repl\n{cells[0]}\n```", ROOT_MODEL)),
            (200, text_message(f"```repl\n{cells[1]}\n```", ROOT_MODEL)),
            (
                400,
                {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "prompt is too long"},
                },
            ),
            (200, text_message(f"```repl\n{cells[2]}\n```", ROOT_MODEL)),
            *[(200, text_message(big_answer, ROOT_MODEL))] * 4,
            (200, text_message(f"```repl\n{cells[3]}\n```", ROOT_MODEL)),
        ]
        config = ReplConfig(root_model=ROOT_MODEL, max_depth=0)
        run_id = f"big-{uuid.uuid4().hex[:8]}"
        async with run_worker(claude_settings(settings, api)):
            result: ReplRunResult = await client.execute_workflow(
                RlmReplWorkflow.run,
                ReplRunInput(run_id=run_id, prompt="Go.", context={}, config=config),
                id=f"rlm-{run_id}",
                task_queue=task_queue,
            )
    assert result.final == "done" and result.finished
    turns = [r["messages"][-1]["content"] for r in api.requests if r.get("system")][1:]
    print("\n".join(t[:300] for t in turns))
    # what the model saw after each cell
    assert "CallTooLarge (line 1): llm_query's prompts are 3,000,0" in turns[0]
    assert "the limit is 262,144" in turns[0]
    assert "sending a slice" in turns[1]
    assert "llm_query failed: ModelError: Claude rejected the request (400)" in turns[1]
    assert "prompt is too long" in turns[1]
    assert "Activity task failed" not in turns[1]
    assert "ResultTooLarge (line 3): the answers to this cell's calls would be" in turns[2]
    # the store's record of the cells says the same
    spans = _cells(store, run_id, "root")
    assert any("3 answers kept" in (s.output or "") for s in spans)  # kept what it had
    errors = [s.tool_error for s in spans if s.tool_error]
    assert any("CallTooLarge" in e for e in errors)
    assert any("Claude rejected the request (400)" in e for e in errors)
    assert any("ResultTooLarge" in e for e in errors)
    # nothing larger than the bounds crossed Temporal
    history = await client.get_workflow_handle(f"rlm-{run_id}").fetch_history()
    largest = max(len(e.SerializeToString()) for e in history.events)
    print(f"largest history event: {largest:,} bytes")
    assert largest < PAYLOAD_LIMIT // 2


def test_the_sandbox_refuses_a_call_too_large_even_when_the_cell_bypasses_its_own_check(
    tmp_path,
):
    """The cell's process checks a call's size, but the cell is the model's code and may reach
    past that check to the pipe: the sandbox's side checks again and ends the cell with
    CallTooLarge instead of handing the call to the workflow."""
    code = (
        "import os\n"
        "external = llm_query.__closure__[0].cell_contents\n"
        "host = next(c.cell_contents for c in external.__closure__\n"
        "            if type(c.cell_contents).__name__ == 'Host')\n"
        "host.send({'type': 'suspend', 'call': {'kind': 'llm_query',\n"
        "           'args': {'prompts': ['x' * 3_000_000]}}})\n"
        "os._exit(0)\n"
    )
    outcome = run_cell(
        code,
        workdir=tmp_path / "cell",
        handle=lambda *a: None,
        store_methods=[],
        context={},
        snapshot=None,
        memo=[],
        can_recurse=False,
        limits=CellLimits(timeout_seconds=5, memory_mb=256),
    )
    assert outcome.suspended is None
    assert outcome.error is not None and outcome.error.startswith("CallTooLarge: llm_query's")


def test_a_long_rlm_conversation_is_sent_within_its_bound():
    """A hundred turns of long replies and full cell outputs (2.2 MB): each model turn is sent
    the task and the latest turns within 256 KB, roles still alternating, told how many
    earlier messages were left out."""
    messages = [ReplMessage(role="user", content="The task. " * 2_000)]
    for turn in range(100):
        messages.append(ReplMessage(role="assistant", content=f"reply {turn} " + "r" * 16_000))
        messages.append(ReplMessage(role="user", content=f"output {turn} " + "o" * 6_000))
    assert json_size(messages) > PAYLOAD_LIMIT
    sent = rlm_workflow._within_bounds(messages)
    assert json_size(sent) <= MAX_TRANSCRIPT_BYTES
    assert sent[0].content.startswith("The task.") and "earlier messages are left out" in (
        sent[0].content
    )
    assert all(m.role == ("user" if i % 2 == 0 else "assistant") for i, m in enumerate(sent))
    assert sent[-1] == messages[-1] and len(sent) > 3
    short = messages[:5]
    assert rlm_workflow._within_bounds(short) == short  # within the bound: sent as it is
