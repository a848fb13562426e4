"""The one write path: each write appends events to the log and folds them into the
projections in a single transaction; event ids come from Temporal identity, so retries and
replays insert nothing twice. The record classes (``store.records.recorder``) build on it
and hand it their projections (``Projector``): the event store knows no read model."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine

from domain.events import SpansRecorded
from store.backends.database import SqliteWriter, write_transaction
from store.backends.dialect import SQLiteBackend, backend
from store.eventstore import event_log, payload_store
from store.eventstore.chain_keys import UNKEYED, ChainKeys
from store.eventstore.event_log import NewEvent
from store.eventstore.group_commit import GroupCommit
from store.eventstore.payload_store import Encoded

T = TypeVar("T")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Projector(Protocol):
    """What the writer folds new events into, in the append's transaction."""

    def apply_all(self, conn: Connection, events: list[Any]) -> None: ...

    def apply(self, conn: Connection, event: Any) -> None: ...

    def apply_spans(self, cur: Any, dialect: str, events: list[Any]) -> None:
        """Span batches only, on a driver cursor (streaming ingest)."""
        ...


class EventWriter:
    """Appends events and folds them into the projections, one transaction per write."""

    def __init__(self, engine: Engine, projections: Projector, keys: ChainKeys = UNKEYED) -> None:
        self.engine = engine
        self.projections = projections
        self.keys = keys  # sign the event log's chain (store/eventstore/chain_keys.py)
        self._batch: Connection | None = None
        self._span_writer = SqliteWriter.for_engine(engine)
        self._span_group: GroupCommit[NewEvent] = GroupCommit(self._commit_spans)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group many recorder calls into one transaction (bulk loads, imports, benchmarks).
        Not shared between threads: use one recorder per thread while a batch is open."""
        with write_transaction(self.engine) as conn:
            self._batch = conn
            try:
                yield
            finally:
                self._batch = None

    def _write(
        self,
        events: Sequence[NewEvent],
        blobs: Sequence[Any] = (),
        follow_up: Callable[[Connection], list[NewEvent]] | None = None,
    ) -> int:
        """Append and project in one transaction; ``follow_up`` may derive more events from the
        projections as they now stand (still inside the transaction)."""
        only_spans = all(isinstance(e.event, SpansRecorded) for e in events)
        if self._batch is None and not blobs and follow_up is None and only_spans:
            return self._stream_spans(lambda: list(events))
        return self._transact(events, blobs, follow_up, lambda _, inserted: inserted)

    def _write_then_read(
        self, events: Sequence[NewEvent], blobs: Sequence[Any], read: Callable[[Connection], T]
    ) -> T:
        """``_write``, then ``read`` in the same transaction: what the write leaves, as it
        stands (also when the events were there already and nothing was inserted)."""
        return self._transact(events, blobs, None, lambda conn, _: read(conn))

    def _transact(
        self,
        events: Sequence[NewEvent],
        blobs: Sequence[Any],
        follow_up: Callable[[Connection], list[NewEvent]] | None,
        then: Callable[[Connection, int], T],
    ) -> T:
        """Append and project in one transaction (the batch's, if one is open), then ``then``
        with what was inserted, still inside it."""
        # Hash and serialise before the transaction: SQLite holds its write lock from BEGIN.
        pairs = [payload_store.encode(b) for b in blobs]
        payloads = event_log.encode_payloads(list(events))
        if self._batch is not None:
            inserted = self._write_on(self._batch, events, pairs, follow_up, payloads)
            return then(self._batch, inserted)
        with write_transaction(self.engine) as conn:
            return then(conn, self._write_on(conn, events, pairs, follow_up, payloads))

    def _stream_spans(self, build: Callable[[], list[NewEvent]]) -> int:
        """Streaming span ingest: the same append and span rows as ``_write_on``, on a driver
        connection without a SQLAlchemy transaction around them (which costs as much as the
        writes when spans arrive one by one). SQLite takes one writer at a time, so its span
        writes share one connection, in turn, and concurrent ones commit together
        (``store.eventstore.group_commit``, which builds the events); PostgreSQL's check one out
        of the pool."""
        if self._batch is not None:
            return self._write(build())
        if self._span_writer is not None:
            return self._span_group.write(build)
        events = build()
        payloads = event_log.encode_payloads(events)
        raw = self.engine.raw_connection()
        try:
            return len(self._append_spans(raw, self.engine.dialect.name, events, payloads))
        finally:
            raw.close()  # back to the pool (checked with a ping before its next use)

    def _commit_spans(self, events: list[NewEvent]) -> set[str]:
        """One transaction for every span write queued meanwhile
        (``store.eventstore.group_commit``)."""
        assert self._span_writer is not None
        payloads = event_log.encode_payloads(events)  # before the lock
        with self._span_writer.lock:
            connection = self._span_writer.connection()
            inserted = self._append_spans(connection, SQLiteBackend.name, events, payloads)
            return {e.id for e in inserted}

    def _append_spans(
        self, raw: Any, dialect: str, events: list[NewEvent], payloads: dict[str, Encoded]
    ) -> list[NewEvent]:
        try:
            cur = raw.cursor()
            backend(dialect).begin_on_driver(cur)
            inserted = event_log.append_with(cur, dialect, events, payloads, self.keys)
            self.projections.apply_spans(cur, dialect, inserted)
            raw.commit()
        except BaseException:
            with contextlib.suppress(Exception):  # a dead connection: keep the first error
                raw.rollback()
            raise
        return inserted

    def close(self) -> None:
        if self._span_writer is not None:
            self._span_writer.close()

    def _write_on(
        self,
        conn: Connection,
        events: Sequence[NewEvent],
        blobs: Sequence[Encoded],
        follow_up: Callable[[Connection], list[NewEvent]] | None,
        payloads: dict[str, Encoded],
    ) -> int:
        if blobs:
            payload_store.put_encoded(conn, list(blobs), now_ms())
        inserted = event_log.append(conn, list(events), payloads, self.keys)
        self.projections.apply_all(conn, inserted)
        if follow_up is not None and inserted:
            for event in event_log.append(conn, follow_up(conn), keys=self.keys):
                self.projections.apply(conn, event)
        return len(inserted)
