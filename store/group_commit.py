"""Group commit: span writes that arrive while a commit runs are committed together, in the
next transaction, by one of their writers.

SQLite commits one transaction at a time, and a commit costs about as much as the span rows in
it; eight threads each writing one span per call would otherwise queue for eight commits. The
first writer to find no commit running leads: it takes every write queued so far, commits them
in one transaction, hands the lead to the first writer that queued meanwhile, and returns.
Every caller returns once its own spans are committed (or with the transaction's error).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from store.event_log import NewEvent

Encoded = tuple[str, str]  # (content hash, canonical JSON)
# Writes these events in one transaction; returns the ids of those the log did not hold yet.
Commit = Callable[[list[NewEvent], dict[str, Encoded]], set[str]]


class _Write:
    __slots__ = ("error", "events", "inserted", "lead", "payloads", "wake")

    def __init__(self, events: Sequence[NewEvent], payloads: dict[str, Encoded]) -> None:
        self.events = events
        self.payloads = payloads
        # A lock held until the write is done (or its writer must lead): cheaper to hand over
        # than an Event, whose condition variable wakes through a second lock.
        self.wake = threading.Lock()
        self.wake.acquire()
        self.lead = False  # woken to commit the queue, not because its write is done
        self.inserted = 0
        self.error: BaseException | None = None


class GroupCommit:
    def __init__(self, commit: Commit) -> None:
        self._commit = commit
        self._mutex = threading.Lock()
        self._queue: list[_Write] = []
        self._leading = False

    def write(self, events: Sequence[NewEvent], payloads: dict[str, Encoded]) -> int:
        """Commit ``events`` (with others queued meanwhile); returns how many were new."""
        mine = _Write(events, payloads)
        with self._mutex:
            self._queue.append(mine)
            lead = not self._leading
            self._leading = True
        if not lead:
            mine.wake.acquire()
            if not mine.lead:
                return _result(mine)
        with self._mutex:
            batch, self._queue = self._queue, []
        self._run(batch)
        with self._mutex:
            if self._queue:  # queued while we committed: the first of them leads next
                following = self._queue[0]
                following.lead = True
                following.wake.release()
            else:
                self._leading = False
        return _result(mine)

    def _run(self, batch: list[_Write]) -> None:
        events = [e for w in batch for e in w.events]
        payloads: dict[str, Encoded] = {}
        for w in batch:
            payloads.update(w.payloads)
        try:
            fresh = self._commit(events, payloads)
        except BaseException as exc:  # every writer in the batch gets the transaction's error
            for w in batch:
                w.error = exc
        else:
            for w in batch:
                counted = [e.id for e in w.events if e.id in fresh]
                fresh.difference_update(counted)  # an event two writers sent counts once
                w.inserted = len(counted)
        for w in batch:
            w.lead = False
            if w.wake.locked():
                w.wake.release()


def _result(write: _Write) -> Any:
    if write.error is not None:
        raise write.error
    return write.inserted
