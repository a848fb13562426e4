"""Faults: a worker killed in the middle of a model call, a Temporal server restarted while
lineages wait, an output too large for Temporal. Nothing is lost or recorded twice."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from pydantic import SecretStr
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from client import start_session
from domain.settings import Settings
from services.dev_server import DevServer
from store import Store
from tests.conftest import awaiting, eventually, make_spec, spawn_worker, wait_for_state
from tests.fake_messages_api import FakeMessagesAPI, text_message
from tests.store_backends import DatabaseOutage, postgres_database
from tests.test_demo_command import free_port
from tests.test_durability import replay
from worker import build_worker
from workflows.lineage import LineageWorkflow

MODEL = "claude-sonnet-5"
# a dead worker's try moves on within 2 s, and retries start at once
QUICK_HANDOVER = {
    "heartbeatTimeoutSeconds": 2,
    "maxAttempts": 3,
    "retryInitialIntervalSeconds": 0.1,
}


def claude_env(api: FakeMessagesAPI) -> dict[str, str]:
    """The same, for a worker in a process of its own."""
    return {
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": api.base_url,
        "ANTHROPIC_MAX_RETRIES": "0",
    }


def doomed_env(api: FakeMessagesAPI) -> dict[str, str]:
    """For a worker process to be killed: Claude, and no workflow cache. A worker that caches
    workflows has Temporal send their next tasks to its own (sticky) queue; once it is killed,
    each waits there for the sticky timeout (10 s) before going to the lineage's queue, time
    the tests spent waiting on Temporal rather than on anything of this project's."""
    return {**claude_env(api), "TRAINING_CAMP_MAX_CACHED_WORKFLOWS": "0"}


def claude_settings(settings: Settings, api: FakeMessagesAPI) -> Settings:
    """The suite's settings with the Claude backend pointed at the local Messages API."""
    return settings.model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-test"),
            "anthropic_base_url": api.base_url,
            "anthropic_max_retries": 0,
        }
    )


async def test_a_worker_killed_mid_call_hands_the_attempt_over(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec(
        model=MODEL,
        options=QUICK_HANDOVER,
    )
    with FakeMessagesAPI() as api:
        api.script = [
            (200, text_message("never delivered", MODEL), {}, 30),  # the call in flight
            (200, text_message("- delivered by the second worker", MODEL)),
        ]
        doomed = await spawn_worker(
            temporal_address, str(store.engine.url), settings.task_queue, **doomed_env(api)
        )
        (handle,) = await start_session(client, spec, settings.task_queue)
        lineage = spec.lineage_id("A")
        await eventually(lambda: len(api.requests) == 1, timeout=60)
        rollout = f"{lineage}:c1"
        assert [a.status for a in store.queries.attempts(rollout)] == ["running"]
        doomed.send_signal(signal.SIGKILL)  # no goodbye, no heartbeat
        await doomed.wait()
        claude = claude_settings(settings, api)
        async with run_worker(claude):
            state = await wait_for_state(handle, awaiting(1), timeout=60)
    assert state.latest_output_preview == "- delivered by the second worker"
    attempts = store.queries.attempts(rollout)
    assert [(a.attempt_number, a.status) for a in attempts] == [(1, "failed"), (2, "succeeded")]
    assert attempts[0].error.startswith("attempt lost")
    assert store.queries.spans(attempts[0].id) == []
    assert [s.type for s in store.queries.spans(attempts[1].id)] == ["llm_call", "output"]


async def test_a_slow_model_call_outlives_a_short_heartbeat_timeout(
    client, store, settings, run_worker
):
    """The running attempt heartbeats at least twice per heartbeat timeout, however short."""
    spec = make_spec(model=MODEL, options={"heartbeatTimeoutSeconds": 1, "maxAttempts": 2})
    with FakeMessagesAPI() as api:
        api.script = [(200, text_message("- slow but sure", MODEL), {}, 3)]
        claude = claude_settings(settings, api)
        async with run_worker(claude):
            (handle,) = await start_session(client, spec, settings.task_queue)
            state = await wait_for_state(handle, awaiting(1), timeout=60)
    assert state.latest_output_preview == "- slow but sure"
    attempts = store.queries.attempts(f"{spec.lineage_id('A')}:c1")
    assert [(a.attempt_number, a.status) for a in attempts] == [(1, "succeeded")]
    assert len(api.requests) == 1


async def test_lineages_survive_a_temporal_server_restart(tmp_path):
    port = free_port()
    server = DevServer(tmp_path / "temporal", port=port, ui_port=free_port(), headless=True)
    server.start()
    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    settings = Settings(
        task_queue="restart", database_url=str(store.engine.url), temporal_address=server.address
    )
    spec = make_spec(labels=("A", "B", "C"))
    try:
        client = await Client.connect(server.address, data_converter=pydantic_data_converter)
        async with build_worker(client, store, settings):
            handles = await start_session(client, spec, settings.task_queue)
            for h in handles:
                await wait_for_state(h, awaiting(1))
        server.stop()  # the server goes away while three lineages wait for scores
        server.start()
        client = await Client.connect(server.address, data_converter=pydantic_data_converter)
        async with build_worker(client, store, settings):
            for label in "ABC":
                handle = client.get_workflow_handle(f"lineage-{spec.lineage_id(label)}")
                await handle.signal("score", {"score": 4, "comment": "too long"})
            for label in "ABC":
                handle = client.get_workflow_handle(f"lineage-{spec.lineage_id(label)}")
                state = await wait_for_state(handle, awaiting(2), timeout=60)
                assert [p.score for p in state.score_history] == [4]
    finally:
        server.stop()
    for label in "ABC":  # every score reached the store, once
        assert [e.score for e in store.queries.evaluations(spec.lineage_id(label))] == [4]
    store.close()


async def test_an_oversized_output_is_stored_never_sent_through_temporal(
    client, store, settings, run_worker
):
    spec = make_spec(model=MODEL)
    huge = "- " + "word " * 700_000  # about 3.5 MB
    with FakeMessagesAPI() as api:
        api.script = [(200, text_message(huge, MODEL))]
        claude = settings.model_copy(
            update={"anthropic_api_key": SecretStr("sk-test"), "anthropic_base_url": api.base_url}
        )
        async with run_worker(claude):
            (handle,) = await start_session(client, spec, settings.task_queue)
            state = await wait_for_state(handle, awaiting(1), timeout=60)
    assert state.latest_output_words == len(huge.split()) - 1  # words, not the list's marker
    assert len(state.latest_output_preview) <= 601
    text = store.queries.artifact_text(f"{spec.lineage_id('A')}:c1:artifact")
    assert text == huge
    history = await handle.fetch_history()
    assert max(event.ByteSize() for event in history.events) < 100_000  # ids and a preview


async def test_the_database_unreachable_for_a_while_loses_and_duplicates_nothing(
    client, settings, task_queue
):
    from store.views.time_travel import rebuild_and_verify

    with postgres_database(migrated=True) as url, DatabaseOutage(url) as outage:
        store = Store.open(url)
        pg = settings.model_copy(update={"database_url": url})
        spec = make_spec()
        attempts = ActivityAttempts()
        async with build_worker(client, store, pg, interceptors=[attempts]):
            (handle,) = await start_session(client, spec, task_queue)
            await wait_for_state(handle, awaiting(1))
            before = len(attempts.seen)
            outage.begin()
            await handle.signal("score", {"score": 3, "comment": "too long"})
            # the step taking the score fails, and is tried again
            await eventually(lambda: len(attempts.seen) > before + 1, timeout=30)
            during = attempts.seen[before:]
            outage.end()
            await wait_for_state(handle, awaiting(2), timeout=90)
        # while the database was away, that step alone ran: it failed each time, nothing went on
        steps = {name for name, _, _ in during}
        assert len(steps) == 1, during
        (step,) = steps
        assert [(attempt, ok) for _, attempt, ok in during] == [
            (n, False) for n in range(1, len(during) + 1)
        ]
        assert (step, len(during) + 1, True) in attempts.seen  # then it went through
        lineage = spec.lineage_id("A")
        assert [e.score for e in store.queries.evaluations(lineage)] == [3]
        assert len(store.queries.evolution_records(lineage)) == 1
        ids = [e.id for e in store.queries.events()]
        assert len(ids) == len(set(ids))
        assert rebuild_and_verify(store.engine).identical
        store.close()


class ActivityAttempts(Interceptor):
    """Every activity attempt a worker finishes, local or not: (type, attempt, succeeded)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, bool]] = []

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        seen = self.seen

        class Record(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                info = activity.info()
                try:
                    result = await self.next.execute_activity(input)
                except BaseException:
                    seen.append((info.activity_type, info.attempt, False))
                    raise
                seen.append((info.activity_type, info.attempt, True))
                return result

        return Record(next)


async def test_two_workers_racing_on_the_same_lineages(client, store, settings, temporal_address):
    from store.views.time_travel import rebuild_and_verify

    # a second worker, with its own connection as it would have on another machine
    other = await Client.connect(temporal_address, data_converter=pydantic_data_converter)
    spec = make_spec(labels=("A", "B", "C"))
    async with build_worker(client, store, settings), build_worker(other, store, settings):
        handles = await start_session(client, spec, settings.task_queue)
        for cycle in (1, 2, 3):
            for handle in handles:
                await wait_for_state(handle, awaiting(cycle))
                if cycle < 3:
                    await handle.signal("score", {"score": 4, "comment": "too long"})
    for label in "ABC":
        lineage = spec.lineage_id(label)
        assert [e.score for e in store.queries.evaluations(lineage)] == [4, 4]
        assert all(len(store.queries.attempts(r.id)) == 1 for r in store.queries.rollouts(lineage))
    ids = [e.id for e in store.queries.events()]
    assert len(ids) == len(set(ids))
    assert rebuild_and_verify(store.engine).identical


async def test_a_model_result_waits_for_the_store_when_the_database_goes_away(
    client, settings, task_queue
):
    # The database goes away while the model is answering: the answer is kept, the write is
    # retried until the database is back, and the model is not asked again.
    spec = make_spec(model=MODEL, options={"maxAttempts": 3, "retryInitialIntervalSeconds": 0.1})
    with (
        FakeMessagesAPI() as api,
        postgres_database(migrated=True) as url,
        DatabaseOutage(url) as outage,
    ):
        api.script = [(200, text_message("- answered during the outage", MODEL), {}, 2)]
        store = Store.open(url)
        pg = claude_settings(settings, api).model_copy(
            update={"database_url": url, "task_queue": task_queue}
        )
        async with build_worker(client, store, pg):
            (handle,) = await start_session(client, spec, task_queue)
            await eventually(lambda: len(api.requests) == 1, timeout=60)
            outage.begin()
            await asyncio.sleep(6)  # the model answered; its write keeps failing
            state = await handle.query(LineageWorkflow.state)
            assert state.status == "running", state
            outage.end()
            state = await wait_for_state(handle, awaiting(1), timeout=90)
        assert state.latest_output_preview == "- answered during the outage"
        assert len(api.requests) == 1
        rollout = f"{spec.lineage_id('A')}:c1"
        attempts = store.queries.attempts(rollout)
        assert [(a.attempt_number, a.status) for a in attempts] == [(1, "succeeded")]
        assert [s.type for s in store.queries.spans(attempts[0].id)] == ["llm_call", "output"]
        store.close()


async def test_a_rollout_that_fails_leaves_no_attempt_running(
    client, store, settings, run_worker, temporal_address
):
    # The only allowed try dies with its worker: the rollout fails, and the try is closed as
    # lost rather than left running for ever.
    spec = make_spec(model=MODEL, options={"heartbeatTimeoutSeconds": 2, "maxAttempts": 1})
    with FakeMessagesAPI() as api:
        api.script = [(200, text_message("never delivered", MODEL), {}, 30)]
        doomed = await spawn_worker(
            temporal_address, str(store.engine.url), settings.task_queue, **doomed_env(api)
        )
        (handle,) = await start_session(client, spec, settings.task_queue)
        await eventually(lambda: len(api.requests) == 1, timeout=60)
        doomed.send_signal(signal.SIGKILL)
        await doomed.wait()
        async with run_worker(claude_settings(settings, api)):
            state = await wait_for_state(handle, lambda s: s.status == "failed", timeout=60)
    assert "timeout" in state.last_error.lower()
    rollout = store.queries.rollouts(spec.lineage_id("A"))[0]
    assert rollout.status == "failed"
    attempts = store.queries.attempts(rollout.id)
    assert [(a.attempt_number, a.status) for a in attempts] == [(1, "failed")]
    assert attempts[0].error.startswith("attempt lost")


async def test_a_model_result_outlives_its_worker_while_the_database_is_away(
    client, settings, task_queue, temporal_address
):
    # The model answered, the database is away, and the worker holding the answer dies: the
    # next try takes the answer from the last heartbeat and stores it; no second model call.
    spec = make_spec(
        model=MODEL,
        options=QUICK_HANDOVER,
    )
    with (
        FakeMessagesAPI() as api,
        postgres_database(migrated=True) as url,
        DatabaseOutage(url) as outage,
    ):
        api.script = [(200, text_message("- kept in the heartbeat", MODEL), {}, 1)]
        store = Store.open(url)
        doomed = await spawn_worker(temporal_address, url, task_queue, **doomed_env(api))
        (handle,) = await start_session(client, spec, task_queue)
        await eventually(lambda: len(api.requests) == 1, timeout=60)
        outage.begin()
        # answered; the write waits, and the answer rides the heartbeat: Temporal holds it
        await answer_heartbeated(handle)
        doomed.send_signal(signal.SIGKILL)
        await doomed.wait()
        outage.end()
        pg = claude_settings(settings, api).model_copy(
            update={"database_url": url, "task_queue": task_queue}
        )
        async with build_worker(client, store, pg):
            state = await wait_for_state(handle, awaiting(1), timeout=60)
        assert state.latest_output_preview == "- kept in the heartbeat"
        assert len(api.requests) == 1
        attempts = store.queries.attempts(f"{spec.lineage_id('A')}:c1")
        assert [(a.attempt_number, a.status) for a in attempts] == [(1, "succeeded")]
        store.close()


async def answer_heartbeated(handle: WorkflowHandle[Any, Any], timeout: float = 60) -> None:
    """Until the lineage's running step has heartbeated details to Temporal: the step's only
    details are the finished run it carries once its write has had to wait."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        pending = (await handle.describe()).raw_description.pending_activities
        if any(a.heartbeat_details.payloads for a in pending):
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no answer heartbeated: {pending}")
        await asyncio.sleep(0.05)


async def test_stop_ends_the_run_while_the_database_is_away(client, settings, task_queue):
    # The database is away: a score's store step retries, a directive's too. `stop` ends the
    # execution at once, instead of leaving it running until the database returns.
    from temporalio.client import WorkflowExecutionStatus

    with postgres_database(migrated=True) as url, DatabaseOutage(url) as outage:
        store = Store.open(url)
        pg = settings.model_copy(update={"database_url": url, "task_queue": task_queue})
        spec = make_spec()
        async with build_worker(client, store, pg):
            (handle,) = await start_session(client, spec, task_queue)
            await wait_for_state(handle, awaiting(1))
            outage.begin()
            await handle.signal("score", {"score": 3, "comment": "too long"})
            await handle.signal("directive", {"kind": "sticky", "content": "Cite a source."})
            await asyncio.sleep(2)  # both store steps are retrying
            await handle.signal("stop")
            result = await asyncio.wait_for(handle.result(), 20)
            assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
            await replay(await handle.fetch_history())
        assert (result.status, result.cycles, result.agent_version) == ("stopped", 1, 1)
        store.close()


async def test_stop_ends_the_run_during_a_long_model_call(client, store, settings, run_worker):
    spec = make_spec(model=MODEL)
    with FakeMessagesAPI() as api:
        api.script = [(200, text_message("a slow answer", MODEL), {}, 30)]
        async with run_worker(claude_settings(settings, api)):
            (handle,) = await start_session(client, spec, settings.task_queue)
            await eventually(lambda: len(api.requests) == 1, timeout=30)
            await handle.signal("stop")
            result = await asyncio.wait_for(handle.result(), 15)
            assert (result.status, result.cycles) == ("stopped", 1)
            # the try learns of it at its next heartbeat and is recorded as ended, not running
            rollout = f"{spec.lineage_id('A')}:c1"
            await eventually(
                lambda: store.queries.attempts(rollout)[0].status == "failed", timeout=30
            )
    assert store.queries.attempts(rollout)[0].error.startswith("cancelled")
    await replay(await handle.fetch_history())  # the cancelled step replays as it ran
