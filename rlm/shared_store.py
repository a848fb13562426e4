"""The shared store (opt-in): parallel workers append to one log and see each other's findings.

Every change is an event with a global sequence number; the view of live objects is
materialized from the log and can be rebuilt from it. Object ids are ``{worker}_{seq:06d}``,
numbered per worker, so workers never collide. In memory (threads; here) or in the database
(processes on several machines; ``store.rlm_findings.shared_findings``), with the same behaviour.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Any, Literal

from pydantic import BaseModel

from rlm.objects import Card, SpanRef, StoreObject
from rlm.query import parse_query

EventKind = Literal["create", "invalidate"]


class SharedEvent(BaseModel):
    seq: int
    kind: EventKind
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
    """One algorithm for every shared store: numbering, idempotent creates and invalidations,
    the log and its view. Subclasses say where the log, the view and the per-worker counters
    live, and what makes a write atomic (``_transaction``)."""

    def create(
        self,
        worker: str,
        type: str,
        description: str,
        content: dict[str, Any] | None = None,
        backrefs: list[SpanRef] | None = None,
        parents: list[str] | None = None,
        tags: list[str] | None = None,
        number: int | None = None,
    ) -> str:
        """A new object attributed to ``worker``, id ``{worker}_{n:06d}``. ``number`` pins n:
        then the create is idempotent (a retried step finds the object it made before)."""
        with self._transaction() as tx:
            if number is None:
                n = self._next_number(tx, worker)
            else:
                n = number
                if self._state(tx, _object_id(worker, n)) is not MISSING:
                    return _object_id(worker, n)  # made by an earlier try of the same step
                self._pin_number(tx, worker, n)  # automatic numbers continue after it
            obj = StoreObject(
                id=_object_id(worker, n),
                type=type,
                description=description,
                content=content or {},
                backrefs=backrefs or [],
                parents=parents or [],
                tags=tags or [],
                worker=worker,
            )
            seq = self._append(tx, worker, "create", obj.id, obj.model_dump())
            self._put(tx, obj, seq)
            return obj.id

    def invalidate(self, worker: str, target_id: str, reason: str) -> None:
        with self._transaction() as tx:
            current = self._state(tx, target_id)
            if current is MISSING:
                raise KeyError(f"no object {target_id}")
            if current == reason:
                return  # a retried step: invalidated already, for this reason
            self._mark_invalidated(tx, target_id, reason)
            self._append(tx, worker, "invalidate", target_id, {"reason": reason})

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

    # Where the log, the view and the counters live: all called inside ``_transaction``.

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Any]:
        """One write, atomic against every other writer of the store."""

    @abstractmethod
    def _next_number(self, tx: Any, worker: str) -> int:
        """Take the worker's next automatic number."""

    @abstractmethod
    def _pin_number(self, tx: Any, worker: str, n: int) -> None:
        """``n`` is taken: automatic numbers continue after it."""

    @abstractmethod
    def _state(self, tx: Any, object_id: str) -> str | object | None:
        """``MISSING``, or the object's invalidation reason (None while it is valid)."""

    @abstractmethod
    def _append(
        self, tx: Any, worker: str, kind: EventKind, object_id: str, payload: dict[str, Any]
    ) -> int:
        """Append an event to the log; its sequence number."""

    @abstractmethod
    def _put(self, tx: Any, obj: StoreObject, seq: int) -> None:
        """Add a new object to the view."""

    @abstractmethod
    def _mark_invalidated(self, tx: Any, object_id: str, reason: str) -> None: ...


MISSING = object()


def _object_id(worker: str, n: int) -> str:
    return f"{worker}_{n:06d}"


class InMemorySharedStore(SharedStore):
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._events: list[SharedEvent] = []
        self._view: dict[str, StoreObject] = {}
        self._seq: dict[str, int] = {}

    def _transaction(self) -> AbstractContextManager[Any]:
        return self._lock

    def _next_number(self, tx: Any, worker: str) -> int:
        n = self._seq.get(worker, 0)
        self._seq[worker] = n + 1
        return n

    def _pin_number(self, tx: Any, worker: str, n: int) -> None:
        self._seq[worker] = max(self._seq.get(worker, 0), n + 1)

    def _state(self, tx: Any, object_id: str) -> str | object | None:
        obj = self._view.get(object_id)
        return MISSING if obj is None else obj.invalidated

    def _append(
        self, tx: Any, worker: str, kind: EventKind, object_id: str, payload: dict[str, Any]
    ) -> int:
        seq = len(self._events)
        self._events.append(
            SharedEvent(seq=seq, kind=kind, worker=worker, object_id=object_id, payload=payload)
        )
        return seq

    def _put(self, tx: Any, obj: StoreObject, seq: int) -> None:
        self._view[obj.id] = obj

    def _mark_invalidated(self, tx: Any, object_id: str, reason: str) -> None:
        self._view[object_id].invalidated = reason

    def events_since(self, seq: int = 0) -> list[SharedEvent]:
        with self._lock:
            return [e.model_copy() for e in self._events if e.seq >= seq]

    def live_view(self) -> dict[str, StoreObject]:
        with self._lock:
            return {k: v.model_copy(deep=True) for k, v in self._view.items()}


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

    def events_since(self, seq: int = 0) -> list[SharedEvent]:
        return self.shared.events_since(seq)
