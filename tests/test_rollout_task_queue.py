"""The dataset task queue in the store, on SQLite and PostgreSQL: a queued task is one
transaction (its sample, its ``task.queued`` event, its waiting row), idempotent by rollout id,
refused past the server's cap of waiting tasks with nothing stored; batches claim waiting
tasks once, in queue order, and a claim made again gets the same tasks."""

from __future__ import annotations

import pytest

from domain.lightning import ClaimInput, QueueFull, RolloutTask, StoredTask, StoreTasksInput
from store.tables import RolloutRow, RolloutTaskRow

pytestmark = pytest.mark.every_backend


def task(n: int, server: str = "srv", queue: str = "q", text: str = "") -> RolloutTask:
    return RolloutTask(
        rollout_id=f"{server}:t{n}",
        server_id=server,
        iteration=1,
        sample={"n": n, "text": text},
        resources_workflow_id=f"lightning-{server}",
        resources_version=1,
        client_task_queue=queue,
    )


def test_a_queued_task_is_its_sample_its_event_and_a_waiting_row(store):
    admitted = store.recorder.queue_tasks([task(1, text="é" * 10)], max_waiting=10)
    assert admitted.rollout_ids == ["srv:t1"] and admitted.refused == 0
    row = store.queries.queued_tasks(["srv:t1"])["srv:t1"]
    assert row.batch_id is None and row.client_task_queue == "q"
    assert store.queries.payloads([row.sample_hash])[row.sample_hash] == {"n": 1, "text": "é" * 10}
    assert admitted.sample_bytes["srv:t1"] == row.sample_bytes > 20  # bytes, not characters
    (queued,) = store.queries.events("srv", ["task.queued"])
    assert queued.payload["rolloutId"] == "srv:t1"
    assert queued.payload["sampleHash"] == row.sample_hash
    assert store.queries.waiting_tasks("srv") == 1
    assert store.queries.undispatched_tasks("srv") == 1


def test_queueing_the_same_task_again_stores_nothing_new(store):
    store.recorder.queue_tasks([task(1)], max_waiting=1)
    again = store.recorder.queue_tasks([task(1)], max_waiting=1)  # at the cap: still taken
    assert again.rollout_ids == ["srv:t1"] and again.refused == 0
    assert store.queries.count(RolloutTaskRow) == 1
    assert len(store.queries.events("srv", ["task.queued"])) == 1
    other = task(1).model_copy(update={"sample": {"n": 2}})
    with pytest.raises(ValueError, match="queued already with another sample"):
        store.recorder.queue_tasks([other], max_waiting=10)
    with pytest.raises(ValueError, match="given twice with different samples"):
        store.recorder.queue_tasks([task(5), task(5).model_copy(update={"sample": {}})], 10)


def test_past_the_cap_queue_full_says_why_and_stores_nothing(store):
    store.recorder.queue_tasks([task(n) for n in range(3)], max_waiting=3)
    events = store.queries.event_count()
    with pytest.raises(QueueFull) as full:
        store.recorder.queue_tasks([task(3)], max_waiting=3)
    assert (full.value.waiting, full.value.cap) == (3, 3)
    assert "3 tasks already wait" in str(full.value) and "max_waiting" in str(full.value)
    assert store.queries.event_count() == events
    assert store.queries.queued_tasks(["srv:t3"]) == {}
    # another server's queue is its own
    assert store.recorder.queue_tasks([task(0, server="other")], 3).rollout_ids == ["other:t0"]


def test_many_at_once_admits_what_fits_and_says_how_many(store):
    store.recorder.queue_tasks([task(0)], max_waiting=4)
    admitted = store.recorder.queue_tasks(
        [task(0), task(1), task(2), task(3), task(4)], max_waiting=4, partial=True
    )
    assert admitted.rollout_ids == ["srv:t0", "srv:t1", "srv:t2", "srv:t3"]
    assert admitted.refused == 1
    assert store.queries.queued_tasks(["srv:t4"]) == {}
    # finished tasks no longer wait: room again
    store.recorder.record_rollout_failed(
        session_id="srv", lineage_id="srv", rollout_id="srv:t0", error="gave up"
    )
    assert store.queries.waiting_tasks("srv") == 3
    assert store.recorder.queue_tasks([task(4)], max_waiting=4).rollout_ids == ["srv:t4"]


def test_batches_claim_waiting_tasks_once_in_queue_order(store):
    store.recorder.queue_tasks([task(n) for n in range(5)], max_waiting=10)
    store.recorder.queue_tasks([task(9, queue="elsewhere")], max_waiting=10)
    first = store.recorder.claim_tasks(ClaimInput(server_id="srv", batch_id="b1", limit=2))
    assert [t.rollout_id for t in first.tasks] == ["srv:t0", "srv:t1"]
    assert first.client_task_queue == "q" and first.max_attempts == 3
    store.recorder.queue_tasks([task(5)], max_waiting=10)
    # the same claim again (a retried step): the same tasks, nothing more
    again = store.recorder.claim_tasks(ClaimInput(server_id="srv", batch_id="b1", limit=2))
    assert again.model_copy(update={"repeated": False}) == first and not first.repeated
    assert again.repeated  # and says so: the dispatcher then looks again for tasks stored since
    named = store.recorder.claim_tasks(
        ClaimInput(server_id="srv", batch_id="b2", rollout_ids=["srv:t1", "srv:t3"], limit=2)
    )
    assert [t.rollout_id for t in named.tasks] == ["srv:t3"]  # t1 is b1's
    rest = store.recorder.claim_tasks(ClaimInput(server_id="srv", batch_id="b3", limit=100))
    # one client queue per batch: the task bound elsewhere waits for a batch of its own
    assert [t.rollout_id for t in rest.tasks] == ["srv:t2", "srv:t4"]
    last = store.recorder.claim_tasks(ClaimInput(server_id="srv", batch_id="b4", limit=100))
    assert [t.rollout_id for t in last.tasks] == ["srv:t9"]
    assert last.client_task_queue == "elsewhere"
    after = store.recorder.claim_tasks(ClaimInput(server_id="srv", batch_id="b5"))
    assert [t.rollout_id for t in after.tasks] == ["srv:t5"]
    assert store.recorder.claim_tasks(ClaimInput(server_id="srv", batch_id="b6")).tasks == []
    assert store.queries.undispatched_tasks("srv") == 0


def test_an_optimization_s_tasks_name_samples_stored_once(store):
    (stored,) = store.recorder.store_samples([{"topic": "tides"}])
    assert store.recorder.store_samples([{"topic": "tides"}]) == [stored]
    inp = StoreTasksInput(
        server_id="run",
        iteration=2,
        resources_workflow_id="optimization-run",
        resources_version=2,
        client_task_queue="q",
        max_attempts=2,
        tasks=[
            StoredTask(
                rollout_id=f"run:it2:s{n}",
                sample_hash=stored[0],
                sample_bytes=stored[1],
                batch_id="run:it2:b0",
            )
            for n in range(2)
        ],
    )
    store.recorder.store_tasks(inp)
    store.recorder.store_tasks(inp)  # a retried step
    rows = store.queries.queued_tasks(["run:it2:s0", "run:it2:s1"])
    assert {r.batch_id for r in rows.values()} == {"run:it2:b0"}
    assert store.queries.count(RolloutTaskRow) == 2
    claimed = store.recorder.claim_tasks(ClaimInput(server_id="run", batch_id="run:it2:b0"))
    assert [t.rollout_id for t in claimed.tasks] == ["run:it2:s0", "run:it2:s1"]
    assert claimed.max_attempts == 2
    rollouts = store.queries._all(
        __import__("sqlmodel").select(RolloutRow).where(RolloutRow.session_id == "run")
    )
    assert {(r.cycle, r.status, r.input_hash) for r in rollouts} == {(2, "pending", stored[0])}


def test_writers_racing_at_the_cap_store_exactly_the_cap(store):
    """Eight threads queue ten tasks each, one at a time, against a cap of 25: 25 are stored,
    every other call is refused."""
    from concurrent.futures import ThreadPoolExecutor

    def one(n: int) -> bool:
        try:
            store.recorder.queue_tasks([task(n)], max_waiting=25)
            return True
        except QueueFull:
            return False

    with ThreadPoolExecutor(8) as pool:
        taken = list(pool.map(one, range(80)))
    assert sum(taken) == 25
    assert store.queries.count(RolloutTaskRow) == 25
    assert store.queries.waiting_tasks("srv") == 25


def test_batches_claiming_at_once_each_get_different_tasks(store):
    """Eight batches claim a server's 40 waiting tasks at the same moment (the dispatcher and
    `queue_tasks`' batches may): every task goes to exactly one of them."""
    from concurrent.futures import ThreadPoolExecutor

    store.recorder.queue_tasks([task(n) for n in range(40)], max_waiting=100)

    def claim(b: int) -> list[str]:
        ids = [f"srv:t{n}" for n in range(40)] if b % 2 else None  # named, or the oldest
        claimed = store.recorder.claim_tasks(
            ClaimInput(server_id="srv", batch_id=f"b{b}", rollout_ids=ids, limit=7)
        )
        return [t.rollout_id for t in claimed.tasks]

    with ThreadPoolExecutor(8) as pool:
        claimed = [r for batch in pool.map(claim, range(8)) for r in batch]
    assert len(claimed) == len(set(claimed)) == 40
