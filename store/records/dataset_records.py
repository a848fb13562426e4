"""Records of Agent Lightning dataset optimization: published resources, queued tasks and the
rollouts clients report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select, update
from sqlmodel import col

from domain.events import ResourcesPublished, RolloutReported, TaskQueued
from domain.execution import SpanRecord, Usage
from domain.lightning import (
    ClaimedTasks,
    ClaimInput,
    QueueFull,
    ResourceSet,
    RolloutTask,
    StoreTasksInput,
    TaskRef,
)
from domain.rollout_report import RolloutReport
from store.backends.database import write_transaction
from store.backends.dialect import DriverSQL, backend, driver_cursor, execute_rows
from store.eventstore import event_log, payload_store
from store.eventstore.event_log import EventRefs, NewEvent
from store.eventstore.event_writer import EventWriter, now_ms
from store.records.attempt_events import completed_event, span_events
from store.tables import RolloutTaskRow

_tasks = RolloutTaskRow.__table__  # type: ignore[attr-defined]
_WAITING = ("pending", "running")


@dataclass(frozen=True, slots=True)
class Admitted:
    """What ``queue_tasks`` took: the ids of the tasks now in the store (in the order given,
    those already there included), their samples' sizes, how many it refused at the cap and
    how many tasks of the server wait now."""

    rollout_ids: list[str]
    sample_bytes: dict[str, int]
    refused: int
    waiting: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskReport:
    """A client's Rollout report of one attempt at a queued task, with the spans it traced and
    the usage and time its metrics give."""

    server_id: str
    rollout_id: str
    attempt_id: str
    client_id: str
    report: RolloutReport
    spans: list[SpanRecord]
    usage: Usage
    duration_ms: int


class DatasetRecords(EventWriter):
    """Lightning resources, tasks and rollout reports."""

    def publish_resources(self, *, server_id: str, version: int, resource_set: ResourceSet) -> str:
        """Append a resource set version (idempotent per server and version)."""
        resources = resource_set.model_dump(mode="json")
        digest = payload_store.encode(resources)[0]
        self._write(
            [
                NewEvent.of(
                    ResourcesPublished(server_id=server_id, version=version, content_hash=digest),
                    f"{server_id}@{version}",
                    session_id=server_id,
                    timestamp=now_ms(),
                )
            ],
            [resources],
        )
        return digest

    def queue_tasks(
        self,
        tasks: Sequence[RolloutTask],
        max_waiting: int,
        *,
        partial: bool = False,
        fresh: bool = False,
    ) -> Admitted:
        """Store one server's tasks in one transaction: each sample a payload blob, each task
        its ``task.queued`` event and a row waiting for a batch. Idempotent by rollout id: a
        task stored already is taken as it is (a different sample under its id is a
        ValueError); ``fresh`` says every id was drawn at random for this call, so none can
        be stored yet and the transaction skips looking (one statement of ten). Past
        ``max_waiting`` tasks waiting (pending or running) on the server, raises QueueFull and
        stores nothing, or with ``partial`` stores the first tasks that fit and says how many
        it refused."""
        if not tasks:
            return Admitted([], {}, 0, 0)
        server_id = tasks[0].server_id
        if any(t.server_id != server_id for t in tasks):
            raise ValueError("queue_tasks: every task must belong to one server")
        # Hash and serialise before the transaction: SQLite holds its write lock from BEGIN.
        samples = [payload_store.encode(t.sample) for t in tasks]
        first: dict[str, int] = {}  # a key given twice in one call is one task
        for i, t in enumerate(tasks):
            if samples[first.setdefault(t.rollout_id, i)][0] != samples[i][0]:
                raise ValueError(f"task {t.rollout_id!r} is given twice with different samples")
        with write_transaction(self.engine) as conn:
            _lock_server(conn, server_id)
            stored = {} if fresh else _stored_samples(conn, list(first))
            for rollout_id, i in first.items():
                if rollout_id in stored and stored[rollout_id] != samples[i][0]:
                    raise ValueError(
                        f"task {rollout_id!r} is queued already with another sample (the "
                        "same key must queue the same sample)"
                    )
            new = [i for rollout_id, i in first.items() if rollout_id not in stored]
            waiting = _waiting(conn, server_id) if new else 0
            room = max(0, max_waiting - waiting)
            if len(new) > room and not partial:
                raise QueueFull(server_id, waiting, max_waiting)
            if new[:room]:
                self._queue_on(
                    conn, [tasks[i] for i in new[:room]], [samples[i] for i in new[:room]]
                )
        refused = {tasks[i].rollout_id for i in new[room:]}
        return Admitted(
            [r for r in first if r not in refused],
            {r: len(samples[i][1].encode("utf-8")) for r, i in first.items() if r not in refused},
            len(refused),
            waiting + len(new[:room]),
        )

    def _queue_on(
        self, conn: Connection, tasks: list[RolloutTask], samples: list[tuple[str, str]]
    ) -> None:
        ts = now_ms()
        events = [
            NewEvent.of(
                TaskQueued(
                    rollout_id=t.rollout_id,
                    iteration=t.iteration,
                    sample_hash=digest,
                    resources_version=t.resources_version,
                ),
                t.rollout_id,
                session_id=t.server_id,
                lineage_id=t.server_id,
                timestamp=ts,
            )
            for t, (digest, _) in zip(tasks, samples, strict=True)
        ]
        self._write_on(conn, events, samples, None, event_log.encode_payloads(events))
        _insert_tasks(
            conn,
            [
                (
                    t.rollout_id,
                    t.server_id,
                    t.iteration,
                    digest,
                    len(canonical.encode("utf-8")),
                    t.resources_workflow_id,
                    t.resources_version,
                    t.client_task_queue,
                    t.max_attempts,
                    None,
                    ts,
                )
                for t, (digest, canonical) in zip(tasks, samples, strict=True)
            ],
        )

    def store_samples(self, samples: list[dict]) -> list[tuple[str, int]]:
        """Samples as payload blobs (each once): their hashes and sizes, in order."""
        encoded = [payload_store.encode(s) for s in samples]
        with write_transaction(self.engine) as conn:
            payload_store.put_encoded(conn, encoded, now_ms())
        return [(digest, len(text.encode("utf-8"))) for digest, text in encoded]

    def store_tasks(self, inp: StoreTasksInput) -> None:
        """An optimization iteration's tasks, their samples stored already, each given to its
        batch (no dispatcher takes them): idempotent by rollout id."""
        ts = now_ms()
        with write_transaction(self.engine) as conn:
            stored = _stored_samples(conn, [t.rollout_id for t in inp.tasks])
            todo = [t for t in inp.tasks if t.rollout_id not in stored]
            if not todo:
                return
            events = [
                NewEvent.of(
                    TaskQueued(
                        rollout_id=t.rollout_id,
                        iteration=inp.iteration,
                        sample_hash=t.sample_hash,
                        resources_version=inp.resources_version,
                    ),
                    t.rollout_id,
                    session_id=inp.server_id,
                    lineage_id=inp.server_id,
                    timestamp=ts,
                )
                for t in todo
            ]
            self._write_on(conn, events, [], None, event_log.encode_payloads(events))
            _insert_tasks(
                conn,
                [
                    (
                        t.rollout_id,
                        inp.server_id,
                        inp.iteration,
                        t.sample_hash,
                        t.sample_bytes,
                        inp.resources_workflow_id,
                        inp.resources_version,
                        inp.client_task_queue,
                        inp.max_attempts,
                        t.batch_id,
                        ts,
                    )
                    for t in todo
                ],
            )

    def claim_tasks(self, inp: ClaimInput) -> ClaimedTasks:
        """Give waiting tasks to a batch (see ClaimInput): all of one client queue and attempt
        budget, in queue order. A batch that claimed already gets the same tasks again, so a
        retried or replayed claim takes nothing more."""
        c = _tasks.c
        refs = (c.position, c.rollout_id, c.sample_bytes, c.client_task_queue, c.max_attempts)
        mine = select(*refs).where(c.batch_id == inp.batch_id).order_by(c.position)
        with write_transaction(self.engine) as conn:
            # claims of one server one at a time (the dispatcher's and queue_tasks' batches)
            _lock_server(conn, inp.server_id)
            rows = conn.execute(mine).all()
            repeated = bool(rows)
            if not rows:
                query = select(*refs).where(c.server_id == inp.server_id, c.batch_id.is_(None))
                if inp.rollout_ids is not None:
                    query = query.where(col(c.rollout_id).in_(inp.rollout_ids))
                waiting = conn.execute(query.order_by(c.position).limit(inp.limit)).all()
                # one client queue and attempt budget per batch
                kind = [(r.client_task_queue, r.max_attempts) for r in waiting]
                cut = next((i for i, k in enumerate(kind) if k != kind[0]), len(kind))
                if waiting:
                    conn.execute(
                        update(_tasks)
                        .where(
                            col(c.position).in_([r.position for r in waiting[:cut]]),
                            c.batch_id.is_(None),
                        )
                        .values(batch_id=inp.batch_id)
                    )
                    rows = conn.execute(mine).all()
        if not rows:
            return ClaimedTasks(tasks=[])
        return ClaimedTasks(
            tasks=[TaskRef(rollout_id=r.rollout_id, sample_bytes=r.sample_bytes) for r in rows],
            client_task_queue=rows[0].client_task_queue,
            max_attempts=rows[0].max_attempts,
            repeated=repeated,
        )

    def record_task_reports(self, reports: list[TaskReport]) -> None:
        """Clients' Rollout reports: spans, the attempt's completion, the rollout done; many in
        one transaction."""
        ts = now_ms()
        events: list[NewEvent] = []
        documents = []
        for r in reports:
            refs: EventRefs = {
                "session_id": r.server_id,
                "lineage_id": r.server_id,
                "attempt_id": r.attempt_id,
                "timestamp": ts,
            }
            document = r.report.model_dump(mode="json")
            documents.append(document)
            report_hash = payload_store.encode(document)[0]
            events += span_events(r.spans, refs)
            events.append(
                completed_event(r.attempt_id, report_hash, r.usage, r.duration_ms, r.spans, refs)
            )
            events.append(
                NewEvent.of(
                    RolloutReported(
                        rollout_id=r.rollout_id,
                        final_reward=r.report.final_reward,
                        report_hash=report_hash,
                        client_id=r.client_id,
                    ),
                    r.rollout_id,
                    **refs,
                )
            )
        self._write(events, documents)


def _lock_server(conn: Connection, server_id: str) -> None:
    """One writer at a time counts and queues a server's tasks."""
    cur, dialect = driver_cursor(conn)
    backend(dialect).lock_key(cur, f"rollout_tasks:{server_id}")


_TASK_COLUMNS = (
    "rollout_id, server_id, iteration, sample_hash, sample_bytes, resources_workflow_id,"
    " resources_version, client_task_queue, max_attempts, batch_id, created_at"
)
_INSERT_TASK = DriverSQL(
    f"INSERT INTO rollout_tasks ({_TASK_COLUMNS}) VALUES ({', '.join('?' * 11)})"
    " ON CONFLICT DO NOTHING"
)
# Counted at every queue_task (an index range: the server's pending and running rollouts)
_WAITING_COUNT = DriverSQL(
    "SELECT COUNT(*) FROM rollouts WHERE session_id = ? AND status IN ('pending', 'running')"
)


def _insert_tasks(conn: Connection, rows: list[tuple[Any, ...]]) -> None:
    cur, dialect = driver_cursor(conn)
    execute_rows(cur, _INSERT_TASK.text(dialect), rows)


def _stored_samples(conn: Connection, rollout_ids: list[str]) -> dict[str, str]:
    """The sample hashes of those of ``rollout_ids`` queued already."""
    cur, dialect = driver_cursor(conn)
    found: dict[str, str] = {}
    for i in range(0, len(rollout_ids), 500):
        where, params = backend(dialect).any_of("rollout_id", rollout_ids[i : i + 500])
        sql = f"SELECT rollout_id, sample_hash FROM rollout_tasks WHERE {where}"
        cur.execute(backend(dialect).driver_text(sql), params)
        found.update({r[0]: r[1] for r in cur.fetchall()})
    return found


def _waiting(conn: Connection, server_id: str) -> int:
    """A server's tasks waiting for a client: pending, or running (an attempt under way)."""
    cur, dialect = driver_cursor(conn)
    cur.execute(_WAITING_COUNT.text(dialect), (server_id,))
    return int(cur.fetchone()[0])
