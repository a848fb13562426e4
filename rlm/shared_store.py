"""The shared store (opt-in): parallel workers append to one log and see each other's findings.

Every change is an event with a global sequence number; the view of live objects is
materialized from the log and can be rebuilt from it. Object ids are ``{worker}_{seq:06d}``,
numbered per worker, so workers never collide. In memory (threads) or in the database
(processes on several machines), with the same behaviour.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from abc import ABC, abstractmethod
from typing import Any, Literal

from pydantic import BaseModel

from rlm.objects import Card, SpanRef, StoreObject
from rlm.query import parse_query
from rlm.store import object_from_row


class SharedEvent(BaseModel):
    seq: int
    kind: Literal["create", "invalidate"]
    worker: str
    object_id: str
    payload: dict[str, Any]


def fold(events: list[SharedEvent]) -> dict[str, StoreObject]:
    """The view, from the log alone."""
    view: dict[str, StoreObject] = {}
    for event in events:
        if event.kind == "create":
            view[event.object_id] = StoreObject.model_validate(event.payload)
        elif event.object_id in view:
            view[event.object_id].invalidated = event.payload["reason"]
    return view


class SharedStore(ABC):
    @abstractmethod
    def create(
        self,
        worker: str,
        type: str,
        description: str,
        content: dict[str, Any] | None = None,
        backrefs: list[SpanRef] | None = None,
        parents: list[str] | None = None,
        tags: list[str] | None = None,
    ) -> str: ...

    @abstractmethod
    def invalidate(self, worker: str, target_id: str, reason: str) -> None: ...

    @abstractmethod
    def events_since(self, seq: int = 0) -> list[SharedEvent]: ...

    @abstractmethod
    def live_view(self) -> dict[str, StoreObject]:
        """The materialized view as maintained on every write."""

    def rebuilt_view(self) -> dict[str, StoreObject]:
        return fold(self.events_since(0))

    def query(
        self, query: str | None = None, exclude_worker: str | None = None
    ) -> list[StoreObject]:
        q = parse_query(query)
        return [
            o
            for o in self.live_view().values()
            if o.invalidated is None and q.matches(o) and o.worker != exclude_worker
        ]

    @staticmethod
    def _object(
        object_id: str,
        worker: str,
        type: str,
        description: str,
        content: dict[str, Any] | None,
        backrefs: list[SpanRef] | None,
        parents: list[str] | None,
        tags: list[str] | None,
    ) -> StoreObject:
        return StoreObject(
            id=object_id,
            type=type,
            description=description,
            content=content or {},
            backrefs=backrefs or [],
            parents=parents or [],
            tags=tags or [],
            worker=worker,
        )


class InMemorySharedStore(SharedStore):
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._events: list[SharedEvent] = []
        self._view: dict[str, StoreObject] = {}
        self._seq: dict[str, int] = {}

    def create(
        self, worker, type, description, content=None, backrefs=None, parents=None, tags=None
    ) -> str:  # type: ignore[no-untyped-def]
        with self._lock:
            n = self._seq.get(worker, 0)
            self._seq[worker] = n + 1
            object_id = f"{worker}_{n:06d}"
            obj = self._object(
                object_id, worker, type, description, content, backrefs, parents, tags
            )
            self._events.append(
                SharedEvent(
                    seq=len(self._events),
                    kind="create",
                    worker=worker,
                    object_id=object_id,
                    payload=obj.model_dump(),
                )
            )
            self._view[object_id] = obj
            return object_id

    def invalidate(self, worker: str, target_id: str, reason: str) -> None:
        with self._lock:
            if target_id not in self._view:
                raise KeyError(f"no object {target_id}")
            self._events.append(
                SharedEvent(
                    seq=len(self._events),
                    kind="invalidate",
                    worker=worker,
                    object_id=target_id,
                    payload={"reason": reason},
                )
            )
            self._view[target_id].invalidated = reason

    def events_since(self, seq: int = 0) -> list[SharedEvent]:
        with self._lock:
            return [e.model_copy() for e in self._events if e.seq >= seq]

    def live_view(self) -> dict[str, StoreObject]:
        with self._lock:
            return {k: v.model_copy(deep=True) for k, v in self._view.items()}


class DatabaseSharedStore(SharedStore):
    """Durable and safe for workers in several processes: the per-worker counter and the
    append happen in one transaction."""

    def __init__(self, engine: Any, store_id: str, read_engine: Any = None) -> None:
        from store.tables import RlmObjectRow, RlmSharedEventRow, RlmSharedWorkerRow

        self.engine, self.store_id = engine, store_id
        self.read_engine = read_engine or engine  # as DatabaseFindingsStore
        self._events_t = RlmSharedEventRow.__table__  # type: ignore[attr-defined]
        self._workers_t = RlmSharedWorkerRow.__table__  # type: ignore[attr-defined]
        self._view_t = RlmObjectRow.__table__  # type: ignore[attr-defined]
        self._view_id = f"shared:{store_id}"  # its view lives beside isolated stores' rows

    def create(
        self, worker, type, description, content=None, backrefs=None, parents=None, tags=None
    ) -> str:  # type: ignore[no-untyped-def]
        from store.database import write_transaction
        from store.dialect import insert_ignore

        w = self._workers_t
        with write_transaction(self.engine) as conn:
            conn.execute(
                insert_ignore(conn, w, ["store_id", "worker_id"]),
                {"store_id": self.store_id, "worker_id": worker, "next_seq": 0},
            )
            n = conn.execute(_next_seq(w), {"s": self.store_id, "w": worker}).scalar_one() - 1
            object_id = f"{worker}_{n:06d}"
            obj = self._object(
                object_id, worker, type, description, content, backrefs, parents, tags
            )
            seq = self._append(conn, worker, "create", object_id, obj.model_dump())
            conn.execute(_insert(self._view_t), self._view_row(obj, seq))
        return object_id

    def _append(
        self, conn: Any, worker: str, kind: str, object_id: str, payload: dict[str, Any]
    ) -> int:
        return conn.execute(
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

    def _view_row(self, obj: StoreObject, seq: int) -> dict[str, Any]:
        return {
            "store_id": self._view_id,
            "id": obj.id,
            "type": obj.type,
            "description": obj.description,
            "content": json.dumps(obj.content),
            "backrefs": json.dumps([b.model_dump() for b in obj.backrefs]),
            "parents": json.dumps(obj.parents),
            "children": "[]",
            "tags": json.dumps(obj.tags),
            "worker": obj.worker,
            "commit_key": None,
            "invalidated": None,
            "position": seq,
        }

    def invalidate(self, worker: str, target_id: str, reason: str) -> None:
        from sqlalchemy import update

        from store.database import write_transaction

        v = self._view_t
        with write_transaction(self.engine) as conn:
            found = conn.execute(
                update(v)
                .where(v.c.store_id == self._view_id, v.c.id == target_id)
                .values(invalidated=reason)
            ).rowcount
            if found != 1:
                raise KeyError(f"no object {target_id}")
            self._append(conn, worker, "invalidate", target_id, {"reason": reason})

    def events_since(self, seq: int = 0) -> list[SharedEvent]:
        from sqlalchemy import select

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
        from sqlalchemy import or_

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
        from sqlalchemy import select

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
    from sqlalchemy import bindparam, update

    return (
        update(workers)
        .where(workers.c.store_id == bindparam("s"), workers.c.worker_id == bindparam("w"))
        .values(next_seq=workers.c.next_seq + 1)
        .returning(workers.c.next_seq)
    )


@functools.cache
def _append_returning_seq(events: Any) -> Any:
    return events.insert().returning(events.c.seq)


@functools.cache
def _insert(table: Any) -> Any:
    return table.insert()


class WorkerStoreProxy:
    """What one worker sees as ``store``: its writes are attributed to it."""

    def __init__(self, shared: SharedStore, worker: str) -> None:
        self.shared, self.worker = shared, worker

    def create(self, type: str, description: str, **fields: Any) -> str:
        return self.shared.create(self.worker, type, description, **fields)

    def view(self, query: str | None = None) -> list[StoreObject]:
        return self.shared.query(query)

    def view_others(self, query: str | None = None) -> list[StoreObject]:
        return self.shared.query(query, exclude_worker=self.worker)

    def invalidate(self, target_id: str, reason: str) -> None:
        self.shared.invalidate(self.worker, target_id, reason)

    def card_view(self, query: str | None = None) -> list[Card]:
        return [o.card() for o in self.view(query)]
