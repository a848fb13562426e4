"""The shared findings store in the database: parallel workers on several machines append to
one log, with the same behaviour as the in-memory one (``rlm.shared_store``)."""

from __future__ import annotations

import functools
import json
import time
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import bindparam, or_, select, update

from rlm.objects import StoreObject
from rlm.query import parse_query
from rlm.shared_store import MISSING, EventKind, SharedEvent, SharedStore
from store.backends.database import write_transaction
from store.backends.dialect import insert_ignore
from store.rlm_findings.findings import object_from_row, object_to_row
from store.tables import RlmObjectRow, RlmSharedEventRow, RlmSharedWorkerRow


class DatabaseSharedStore(SharedStore):
    """Durable and safe for workers in several processes: the per-worker counter and the
    append happen in one transaction. The algorithm is ``SharedStore``'s; here is where its
    log, view and counters live."""

    def __init__(self, engine: Any, store_id: str, read_engine: Any = None) -> None:
        self.engine, self.store_id = engine, store_id
        self.read_engine = read_engine or engine  # as DatabaseFindingsStore
        self._events_t = RlmSharedEventRow.__table__  # type: ignore[attr-defined]
        self._workers_t = RlmSharedWorkerRow.__table__  # type: ignore[attr-defined]
        self._view_t = RlmObjectRow.__table__  # type: ignore[attr-defined]
        self._view_id = f"shared:{store_id}"  # its view lives beside isolated stores' rows

    def _transaction(self) -> AbstractContextManager[Any]:
        return write_transaction(self.engine)

    def _next_number(self, tx: Any, worker: str) -> int:
        self._ensure_worker(tx, worker)
        return (
            int(
                tx.execute(
                    _next_seq(self._workers_t), {"s": self.store_id, "w": worker}
                ).scalar_one()
            )
            - 1
        )

    def _pin_number(self, tx: Any, worker: str, n: int) -> None:
        self._ensure_worker(tx, worker)
        tx.execute(_skip_to(self._workers_t), {"s": self.store_id, "w": worker, "n": n + 1})

    def _ensure_worker(self, tx: Any, worker: str) -> None:
        tx.execute(
            insert_ignore(tx, self._workers_t, ["store_id", "worker_id"]),
            {"store_id": self.store_id, "worker_id": worker, "next_seq": 0},
        )

    def _state(self, tx: Any, object_id: str) -> str | object | None:
        v = self._view_t
        row = tx.execute(
            select(v.c.invalidated).where(v.c.store_id == self._view_id, v.c.id == object_id)
        ).first()
        return MISSING if row is None else row[0]

    def _append(
        self, tx: Any, worker: str, kind: EventKind, object_id: str, payload: dict[str, Any]
    ) -> int:
        return int(
            tx.execute(
                _append_returning_seq(self._events_t),
                {
                    "store_id": self.store_id,
                    "worker_id": worker,
                    "kind": kind,
                    "object_id": object_id,
                    "payload": json.dumps(payload),
                    "created_at": time.time_ns() // 1_000_000,
                },
            ).scalar_one()
        )

    def _put(self, tx: Any, obj: StoreObject, seq: int) -> None:
        tx.execute(
            _insert(self._view_t),
            object_to_row(
                self._view_id, obj, seq, children="[]", commit_key=None, invalidated=None
            ),
        )

    def _mark_invalidated(self, tx: Any, object_id: str, reason: str) -> None:
        v = self._view_t
        tx.execute(
            update(v)
            .where(v.c.store_id == self._view_id, v.c.id == object_id)
            .values(invalidated=reason)
        )

    def events_since(self, seq: int = 0) -> list[SharedEvent]:
        e = self._events_t
        with self.read_engine.connect() as conn:
            rows = (
                conn.execute(
                    select(e).where(e.c.store_id == self.store_id, e.c.seq >= seq).order_by(e.c.seq)
                )
                .mappings()
                .all()
            )
        return [
            SharedEvent(
                seq=r["seq"],
                kind=r["kind"],
                worker=r["worker_id"],
                object_id=r["object_id"],
                payload=json.loads(r["payload"]),
            )
            for r in rows
        ]

    def live_view(self) -> dict[str, StoreObject]:
        return {o.id: o for o in self._view_objects()}

    def query(
        self, query: str | None = None, exclude_worker: str | None = None
    ) -> list[StoreObject]:
        """As the base class, with the filters pushed into SQL: a session's shared store grows
        every cycle, and reading all of it to find one tag made each score slower than the last.
        JSON columns are narrowed with LIKE, then every object is checked exactly."""
        q, v = parse_query(query), self._view_t
        conditions = [v.c.invalidated.is_(None)]
        if exclude_worker is not None:
            conditions.append(or_(v.c.worker.is_(None), v.c.worker != exclude_worker))
        for key, values in q.equals.items():
            for value in values:
                if key in ("type", "id", "worker"):
                    conditions.append(v.c[key] == value)
                elif key in ("tag", "parent"):
                    column = v.c.tags if key == "tag" else v.c.parents
                    conditions.append(column.contains(json.dumps(value), autoescape=True))
                elif key == "source":
                    conditions.append(v.c.backrefs.contains(json.dumps(value), autoescape=True))
        for text in q.desc_contains:
            conditions.append(v.c.description.icontains(text, autoescape=True))
        return [
            o
            for o in self._view_objects(*conditions)
            if q.matches(o) and o.worker != exclude_worker
        ]

    def _view_objects(self, *conditions: Any) -> list[StoreObject]:
        v = self._view_t
        with self.read_engine.connect() as conn:
            rows = (
                conn.execute(
                    select(v)
                    .where(v.c.store_id == self._view_id, *conditions)
                    .order_by(v.c.position)
                )
                .mappings()
                .all()
            )
        return [object_from_row(r) for r in rows]


# Statements built once per table: building them on every create cost more than running them.
@functools.cache
def _next_seq(workers: Any) -> Any:
    return (
        update(workers)
        .where(workers.c.store_id == bindparam("s"), workers.c.worker_id == bindparam("w"))
        .values(next_seq=workers.c.next_seq + 1)
        .returning(workers.c.next_seq)
    )


@functools.cache
def _skip_to(workers: Any) -> Any:
    """Automatic numbers continue after a pinned one."""
    after = bindparam("n")
    return (
        update(workers)
        .where(
            workers.c.store_id == bindparam("s"),
            workers.c.worker_id == bindparam("w"),
            workers.c.next_seq < after,
        )
        .values(next_seq=after)
    )


@functools.cache
def _append_returning_seq(events: Any) -> Any:
    return events.insert().returning(events.c.seq)


@functools.cache
def _insert(table: Any) -> Any:
    return table.insert()
