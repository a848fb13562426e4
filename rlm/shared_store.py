"""The shared store (opt-in): parallel workers append to one log and see each other's findings.

Every change is an event with a global sequence number; the view of live objects is
materialized from the log and can be rebuilt from it. Object ids are ``{worker}_{seq:06d}``,
numbered per worker, so workers never collide. In memory (threads; here) or in the database
(processes on several machines; ``store.rlm_findings.shared_findings``), with the same behaviour.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any, Literal

from pydantic import BaseModel

from rlm.objects import Card, SpanRef, StoreObject
from rlm.query import parse_query


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
        number: int | None = None,
    ) -> str:
        """A new object attributed to ``worker``, id ``{worker}_{n:06d}``. ``number`` pins n:
        then the create is idempotent (a retried step finds the object it made before)."""

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
        self,
        worker,
        type,
        description,
        content=None,
        backrefs=None,
        parents=None,
        tags=None,
        number=None,
    ) -> str:  # type: ignore[no-untyped-def]
        with self._lock:
            n = self._seq.get(worker, 0) if number is None else number
            self._seq[worker] = max(self._seq.get(worker, 0), n + 1)
            object_id = f"{worker}_{n:06d}"
            if object_id in self._view:
                return object_id
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
            if self._view[target_id].invalidated == reason:
                return  # a retried step: invalidated already, for this reason
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
