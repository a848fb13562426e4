"""Nothing a lineage writes is written twice, whatever the interleaving of a failed workflow
task, its retry and the signals that arrive in between."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest
from temporalio.client import Client, WorkflowHandle

from client import start_session
from store import Store
from tests.conftest import awaiting, eventually, make_spec, spawn_worker, wait_for_state
from tests.store_backends import postgres_database
from tests.test_durability import ShortWorkflowTasks
from worker import build_worker


async def test_a_signal_between_a_failed_workflow_task_and_its_retry_writes_nothing_twice(
    client, settings, task_queue, temporal_address
):
    # The score's workflow task records the score (a local activity that commits), then a
    # training step blocks on a table lock held here; the worker is killed before the task
    # completes, so the task's local-activity results are lost. A directive arrives; the lock
    # is released; a new worker retries the task with the directive ahead of the score's work.
    # The lost task is retried once its timeout passes: 5 s here, not the default 10 (the
    # kill comes about a second into the task, well before the worker would heartbeat it at
    # 80% of the timeout, recording the results so far).
    lasting_5_s = Client(**{**client.config(), "interceptors": [ShortWorkflowTasks(5)]})
    with postgres_database(migrated=True) as url:
        store = Store.open(url)
        pg = settings.model_copy(update={"database_url": url})
        spec = make_spec()
        lineage = spec.lineage_id("A")
        doomed = await spawn_worker(temporal_address, url, task_queue)
        lock = psycopg.connect(url)
        try:
            (handle,) = await start_session(lasting_5_s, spec, task_queue)
            await wait_for_state(handle, awaiting(1), timeout=60)
            # evolving writes a new agent version: that is where the training step waits
            lock.execute("LOCK TABLE agent_versions IN EXCLUSIVE MODE")
            await handle.signal("score", {"score": 3, "comment": "too long"})
            await eventually(lambda: len(store.queries.evaluations(lineage)) == 1, timeout=30)
            await asyncio.sleep(0.5)  # the training steps run up to the blocked write
            doomed.send_signal(signal.SIGKILL)
            await doomed.wait()
            await handle.signal("directive", {"kind": "sticky", "content": "Cite a source."})
        finally:
            lock.rollback()
            lock.close()
        async with build_worker(client, store, pg):
            state = await wait_for_state(handle, awaiting(2), timeout=90)
        assert state.agent_version == 2
        assert [e.score for e in store.queries.evaluations(lineage)] == [3]
        scored = store.queries.events(lineage, ["artifact.scored"])
        assert len(scored) == 1
        assert len(store.queries.events(lineage, ["directive.added"])) == 1
        assert len(store.queries.evolution_records(lineage)) == 1
        store.close()


@contextlib.asynccontextmanager
async def table_gone_while_awaiting(
    client, settings, task_queue, table: str
) -> AsyncIterator[tuple[Store, str, WorkflowHandle[Any, Any], Callable[[], None]]]:
    """A lineage on a throwaway PostgreSQL database, its first output awaiting a score, and
    ``table`` renamed away so that the store refuses its writes for good; yields the store,
    the lineage id, the handle and what puts the table back."""
    with postgres_database(migrated=True) as url:
        store = Store.open(url)
        spec = make_spec()
        async with build_worker(client, store, settings.model_copy(update={"database_url": url})):
            (handle,) = await start_session(client, spec, task_queue)
            await wait_for_state(handle, awaiting(1), timeout=60)
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f"ALTER TABLE {table} RENAME TO {table}_gone")
                yield (
                    store,
                    spec.lineage_id("A"),
                    handle,
                    lambda: admin.execute(f"ALTER TABLE {table}_gone RENAME TO {table}"),
                )
        store.close()


async def test_an_error_no_retry_can_fix_is_surfaced_not_retried_forever(
    client, settings, task_queue
):
    # the store refuses directives for good (their table is gone): the directive changes
    # nothing, the error is in state at once, and scoring and training go on
    gone = table_gone_while_awaiting(client, settings, task_queue, "directives")
    async with gone as (store, lineage, handle, restore):
        await handle.signal("directive", {"kind": "sticky", "content": "Cite a source."})
        state = await wait_for_state(handle, lambda s: s.last_error is not None, timeout=20)
        assert state.last_error.startswith("directive not recorded")
        assert "PermanentStoreError" in state.last_error or "directives" in state.last_error
        assert state.sticky_directives == []
        restore()
        await handle.signal("score", {"score": 3, "comment": "too long"})
        state = await wait_for_state(handle, awaiting(2), timeout=60)
        assert state.agent_version == 2
        assert [e.score for e in store.queries.evaluations(lineage)] == [3]


@pytest.mark.parametrize(
    "table",
    [
        pytest.param("evolution_records", id="the trainer's reads refused"),
        pytest.param("agent_versions", id="the new version refused"),
    ],
)
async def test_a_training_that_fails_for_good_leaves_its_score_recorded(
    client, settings, task_queue, table
):
    # the store refuses for good (a table is gone) what the trainer's step reads, or the new
    # version it decided on: the score stays recorded once, the lineage keeps version 1, says
    # why and runs its next cycle; once the table is back, the next score trains
    gone = table_gone_while_awaiting(client, settings, task_queue, table)
    async with gone as (store, lineage, handle, restore):
        await handle.signal("score", {"score": 3, "comment": "too long"})
        state = await wait_for_state(handle, awaiting(2), timeout=60)
        assert state.last_error.startswith("training failed: ")
        assert table in state.last_error
        assert state.agent_version == 1
        assert [p.score for p in state.score_history] == [3]
        assert [e.score for e in store.queries.evaluations(lineage)] == [3]
        restore()
        await handle.signal("score", {"score": 3, "comment": "still too long"})
        state = await wait_for_state(handle, awaiting(3), timeout=60)
        assert state.agent_version == 2
        assert [e.score for e in store.queries.evaluations(lineage)] == [3, 3]
        assert len(store.queries.events(lineage, ["artifact.scored"])) == 2
        assert len(store.queries.evolution_records(lineage)) == 1


def test_errors_are_classified_transient_or_permanent():
    import sqlite3

    from sqlalchemy import exc as sa

    from activities.error_classification import is_permanent

    def wrapped(cls, orig):
        return cls("INSERT …", {}, orig)

    assert is_permanent(wrapped(sa.DataError, psycopg.DataError("text fields cannot contain NUL")))
    assert is_permanent(wrapped(sa.ProgrammingError, psycopg.ProgrammingError("no such table")))
    assert is_permanent(wrapped(sa.IntegrityError, sqlite3.IntegrityError("CHECK failed")))
    assert not is_permanent(wrapped(sa.OperationalError, psycopg.OperationalError("down")))
    assert not is_permanent(wrapped(sa.OperationalError, sqlite3.OperationalError("locked")))
    assert not is_permanent(ConnectionResetError("peer reset"))
    assert not is_permanent(RuntimeError("anything else keeps its retry policy"))
