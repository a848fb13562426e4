"""Group commit: span writes that arrive while a commit runs are committed together, in the
next transaction, by one of their writers.

SQLite commits one transaction at a time, and a commit costs about as much as the span rows in
it; eight threads each writing one span per call would otherwise queue for eight commits. The
first writer to find no commit running leads: it takes every write queued so far, builds their
events, commits them in one transaction, hands the lead to the first writer that queued
meanwhile, and returns. Every caller returns once its own spans are committed (or with its own
error, or the transaction's).

A leader waits briefly for the writers of the previous transaction to queue again before it
takes the queue (a commit delay, as PostgreSQL's ``commit_delay``): each of them was woken by
that commit and is one call away from its next write, and without the wait a transaction took
about half of them, so twice the transactions for the same writes. The wait ends as soon as they
are all back, and after ``delay`` seconds at most; a lone writer never waits.

The leader builds the queued writers' events (for the log: their ids, canonical JSON and
hashes) rather than each writer before it queues: a writer woken from a commit would otherwise
take the GIL back from the leader for every statement of the next one, which costs the eight
writers more than the building itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar


class Item(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=Item)


class _Write(Generic[T]):
    __slots__ = ("error", "events", "inserted", "lead", "prepare", "wake")

    def __init__(self, prepare: Callable[[], list[T]]) -> None:
        self.prepare = prepare
        self.events: list[T] = []
        # A lock held until the write is done (or its writer must lead): cheaper to hand over
        # than an Event, whose condition variable wakes through a second lock.
        self.wake = threading.Lock()
        self.wake.acquire()
        self.lead = False  # woken to commit the queue, not because its write is done
        self.inserted = 0
        self.error: BaseException | None = None


class GroupCommit(Generic[T]):
    """``commit`` writes its events in one transaction and returns the ids of those the log
    did not hold yet."""

    def __init__(self, commit: Callable[[list[T]], set[str]], delay: float = 0.001) -> None:
        self._commit = commit
        self._delay = delay
        self._mutex = threading.Lock()
        self._queue: list[_Write[T]] = []
        self._leading = False
        self._last_batch = 1  # writers in the transaction before: how many to wait for
        self._full: threading.Lock | None = None  # released when the queue is that long

    def write(self, prepare: Callable[[], list[T]]) -> int:
        """Commit the events ``prepare`` builds (with others queued meanwhile); returns how
        many were new. ``prepare`` may run on another writer's thread."""
        mine: _Write[T] = _Write(prepare)
        with self._mutex:
            self._queue.append(mine)
            lead = not self._leading
            self._leading = True
            if self._full is not None and len(self._queue) >= self._last_batch:
                self._full.release()  # the leader waiting for the queue to fill goes on
                self._full = None
        if not lead:
            mine.wake.acquire()
            if not mine.lead:
                return _result(mine)
        self._await_last_writers()
        with self._mutex:
            batch, self._queue = self._queue, []
        self._last_batch = len(batch)
        self._run(batch)
        with self._mutex:
            if self._queue:  # queued while we committed: the first of them leads next
                following = self._queue[0]
                following.lead = True
                following.wake.release()
            else:
                self._leading = False
        return _result(mine)

    def _await_last_writers(self) -> None:
        with self._mutex:
            if len(self._queue) >= self._last_batch:
                return
            full = self._full = threading.Lock()
            full.acquire()
        # Blocked, not polling: a polling leader takes the GIL back from the writers it waits
        # for. The writer that fills the queue releases it; only that one pays for the wake.
        full.acquire(timeout=self._delay)
        with self._mutex:
            self._full = None

    def _run(self, batch: list[_Write[T]]) -> None:
        ready = []
        for w in batch:
            try:  # a writer whose spans cannot be built fails alone
                w.events = w.prepare()
            except BaseException as exc:
                w.error = exc
            else:
                ready.append(w)
        events = [e for w in ready for e in w.events]
        try:
            fresh = self._commit(events) if events else set()
        except BaseException as exc:  # every writer in the batch gets the transaction's error
            for w in ready:
                w.error = exc
        else:
            for w in ready:
                counted = [e.id for e in w.events if e.id in fresh]
                fresh.difference_update(counted)  # an event two writers sent counts once
                w.inserted = len(counted)
        for w in batch:
            w.lead = False
            if w.wake.locked():
                w.wake.release()


def _result(write: _Write[Any]) -> Any:
    if write.error is not None:
        raise write.error
    return write.inserted
