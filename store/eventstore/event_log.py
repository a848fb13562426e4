"""The training event log: append-only, idempotent by event id, payloads content-addressed."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Required, TypedDict, Unpack

from pydantic import BaseModel
from sqlalchemy import Connection, func, select

from domain import events
from domain.events import Event
from store.backends.dialect import DriverSQL, backend, driver_cursor
from store.eventstore import payload_store, upcasters
from store.eventstore.chain_keys import UNKEYED, ChainKeys
from store.tables import EventChainHeadRow, PayloadBlob, TrainingEvent

_NAMESPACE = uuid.UUID("6f1d1f8e-8c1a-4d55-9a39-5b7f0c2e7a10")
_events = TrainingEvent.__table__  # type: ignore[attr-defined]
_head = EventChainHeadRow.__table__  # type: ignore[attr-defined]
_COLUMNS = (
    "id, timestamp, event_type, schema_version, session_id, lineage_id, agent_id, artifact_id,"
    " attempt_id, payload_hash, payload_size, tags, chain_hash"
)
# Appends run on the driver's cursor: at a few statements per write, building SQLAlchemy
# statements cost more than running them.
_HEAD = DriverSQL(
    "SELECT position, chain_hash FROM event_chain_head WHERE id = 1",
    lock_rows=True,
)
_NEW_HEAD = DriverSQL(
    "INSERT INTO event_chain_head (id, position, chain_hash) VALUES (1, 0, '')"
    " ON CONFLICT DO NOTHING"
)
_INSERT = DriverSQL(
    f"INSERT INTO training_events ({_COLUMNS}) VALUES ({', '.join('?' * 13)})"
    " ON CONFLICT DO NOTHING"
)
_MOVE_HEAD = DriverSQL(
    "UPDATE event_chain_head SET chain_hash = ?,"
    " position = (SELECT MAX(position) FROM training_events) WHERE id = 1"
)
_LAST_POSITION = DriverSQL("SELECT MAX(position) FROM training_events")
_MOVE_SEALED_HEAD = DriverSQL(
    "UPDATE event_chain_head SET chain_hash = ?, position = ?, seal = ? WHERE id = 1"
)


_NAMESPACE_BYTES = _NAMESPACE.bytes


def event_id(event_type: str, key: str) -> str:
    """Deterministic id from the writer's identity, so a retried write inserts nothing new:
    ``str(uuid.uuid5(_NAMESPACE, f"{event_type}|{key}"))``, spelled out (uuid.UUID's checks
    were a tenth of a streamed span's Python)."""
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + f"{event_type}|{key}".encode()).digest())
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest[:16].hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class EventRefs(TypedDict, total=False):
    """Where an event sits: the references and time a writer gives ``NewEvent.of``."""

    timestamp: Required[int]
    session_id: str | None
    lineage_id: str | None
    agent_id: str | None
    artifact_id: str | None
    attempt_id: str | None
    tags: list[str]


@dataclass(slots=True)
class NewEvent:
    """An event on its way into the log: its typed payload (``domain.events``) and where it
    sits. Never sent through Temporal (a plain dataclass: validating it again cost more than
    appending it)."""

    id: str
    event_type: str
    payload: dict[str, Any]
    timestamp: int
    session_id: str | None = None
    lineage_id: str | None = None
    agent_id: str | None = None
    artifact_id: str | None = None
    attempt_id: str | None = None
    tags: list[str] = field(default_factory=list)
    schema_version: int = 1
    event: Event | None = None

    @classmethod
    def of(cls, event: Event, key: str, **fields: Unpack[EventRefs]) -> NewEvent:
        """The event keyed by ``key``: the writer's identity in the lineage (its evaluation id,
        attempt id…), so a retried or replayed write gets the same id and inserts nothing."""
        return cls(
            id=event_id(event.event_type, key),
            event_type=event.event_type,
            payload=event.payload(),
            schema_version=event.schema_version,
            event=event,
            **fields,
        )

    @property
    def data(self) -> Event | None:
        if self.event is not None:
            return self.event
        fields = {"id": self.id, "artifact_id": self.artifact_id}
        payload, _ = upcasters.upcast(self.event_type, self.schema_version, self.payload, fields)
        return events.parse(self.event_type, payload)


class StoredEvent(BaseModel):
    position: int
    id: str
    timestamp: int
    event_type: str
    schema_version: int
    session_id: str | None
    lineage_id: str | None
    agent_id: str | None
    artifact_id: str | None
    attempt_id: str | None
    payload_hash: str
    payload_size: int
    tags: list[str]
    payload: dict[str, Any]

    @property
    def data(self) -> Event | None:
        """The typed event (None for a type this code does not know)."""
        return events.parse(self.event_type, self.payload)


def chain_link(previous: str, row: dict[str, Any], keys: ChainKeys = UNKEYED) -> str:
    """The chain hash of one event: its identity, kind, time, references and payload hash,
    bound to everything before it (signed when ``keys`` hold a key)."""
    return keys.link(_link_material(previous, row))


def _link_material(previous: str, row: dict[str, Any]) -> bytes:
    fields = [
        previous,
        row["id"],
        row["event_type"],
        str(row["schema_version"]),
        str(row["timestamp"]),
        row["session_id"] or "",
        row["lineage_id"] or "",
        row["agent_id"] or "",
        row["artifact_id"] or "",
        row["attempt_id"] or "",
        row["payload_hash"],
        str(row["payload_size"]),
        row["tags"],
    ]
    return "\x1f".join(fields).encode("utf-8")


def encode_payloads(events: list[NewEvent]) -> dict[str, tuple[str, str]]:
    """Each event's payload hash and canonical JSON, by event id (done before taking a lock)."""
    return {e.id: payload_store.encode(e.payload) for e in events}


def append(
    conn: Connection,
    events: list[NewEvent],
    encoded: dict[str, tuple[str, str]] | None = None,
    keys: ChainKeys = UNKEYED,
) -> list[NewEvent]:
    """Insert events that are not already in the log; return the ones actually inserted.

    Appends are serialised on the chain head (SQLite: the write lock; PostgreSQL: the head row),
    so each new event's chain hash extends the one before it in log order."""
    return append_with(*driver_cursor(conn), events, encoded, keys)


def append_with(
    cur: Any,
    dialect: str,
    events: list[NewEvent],
    encoded: dict[str, tuple[str, str]] | None = None,
    keys: ChainKeys = UNKEYED,
) -> list[NewEvent]:
    """``append`` on a DBAPI cursor, inside the caller's transaction."""
    if not events:
        return []
    cur.execute(_HEAD.text(dialect))
    head = cur.fetchone()
    if head is None:
        cur.execute(_NEW_HEAD.text(dialect))
        cur.execute(_HEAD.text(dialect))
        head = cur.fetchone()
    unique, seen = [], set()
    for event in events:
        if event.id not in seen:
            seen.add(event.id)
            unique.append(event)
    encoded = encoded or {}
    pairs = [encoded.get(e.id) or payload_store.encode(e.payload) for e in unique]
    # Blobs first: an event that turns out to be in the log already has its payload stored.
    payload_store.put_encoded_with(cur, dialect, pairs, max(e.timestamp for e in unique))
    fresh, chain, insert = [], head[1], _INSERT.text(dialect)
    for event, (digest, text) in zip(unique, pairs, strict=True):
        row = {
            "id": event.id,
            "timestamp": event.timestamp,
            "event_type": event.event_type,
            "schema_version": event.schema_version,
            "session_id": event.session_id,
            "lineage_id": event.lineage_id,
            "agent_id": event.agent_id,
            "artifact_id": event.artifact_id,
            "attempt_id": event.attempt_id,
            "payload_hash": digest,
            "payload_size": len(text.encode("utf-8")),
            "tags": json.dumps(sorted(set(event.tags))) if event.tags else "[]",
        }
        link = chain_link(chain, row, keys)
        # Idempotent by id: a retried or replayed write inserts nothing and leaves the chain.
        cur.execute(insert, (*row.values(), link))
        if cur.rowcount == 1:
            fresh.append(event)
            chain = link
    if fresh:
        _move_head(cur, dialect, chain, keys)
    return fresh


def _move_head(cur: Any, dialect: str, chain: str, keys: ChainKeys) -> None:
    if not keys.keyed:
        cur.execute(_MOVE_HEAD.text(dialect), (chain,))
        return
    cur.execute(_LAST_POSITION.text(dialect))
    position = cur.fetchone()[0]
    cur.execute(_MOVE_SEALED_HEAD.text(dialect), (chain, position, keys.seal(position, chain)))


SCAN_WINDOW = 20_000  # positions per query when filtering by type across the whole log


def read(
    conn: Connection,
    *,
    after_position: int = 0,
    until_position: int | None = None,
    lineage_id: str | None = None,
    event_types: list[str] | None = None,
    batch_size: int = 1000,
) -> Iterator[StoredEvent]:
    """Events in log order, payloads resolved, streamed in batches.

    Filtered by type over the whole log, it walks the primary key in windows of positions:
    an ``event_type IN (...) ORDER BY position LIMIT n`` query would sort every remaining
    match for each batch."""
    cur, dialect = driver_cursor(conn)
    windowed = bool(event_types) and lineage_id is None
    end = until_position
    if windowed and end is None:
        end = last_position(conn)
    position = after_position
    while True:
        where, params = ["e.position > ?"], [position]
        if windowed:
            assert end is not None
            if position >= end:
                return
            window_end = min(position + SCAN_WINDOW, end)
            where.append("e.position <= ?")
            params.append(window_end)
        elif until_position is not None:
            where.append("e.position <= ?")
            params.append(until_position)
        if lineage_id is not None:
            where.append("e.lineage_id = ?")
            params.append(lineage_id)
        if event_types:
            condition, values = backend(dialect).any_of("e.event_type", event_types)
            where.append(condition)
            params += values
        sql = f"{_READ} WHERE {' AND '.join(where)} ORDER BY e.position"
        if not windowed:
            sql += f" LIMIT {int(batch_size)}"
        cur.execute(DriverSQL(sql).text(dialect), params)
        rows = cur.fetchall()
        if not rows and not windowed:
            return
        for row in rows:
            yield _stored(row)
        position = window_end if windowed else rows[-1][0]


# Reads run on the driver's cursor too: a rebuild or a materialization reads every event once,
# and SQLAlchemy's per-row mapping cost more per event than SQLite's lookup.
_READ_COLUMNS = (
    "position",
    "id",
    "timestamp",
    "event_type",
    "schema_version",
    "session_id",
    "lineage_id",
    "agent_id",
    "artifact_id",
    "attempt_id",
    "payload_hash",
    "payload_size",
    "tags",
)
_READ = (
    f"SELECT {', '.join('e.' + c for c in _READ_COLUMNS)}, b.content FROM training_events e"
    " JOIN payload_blobs b ON b.hash = e.payload_hash"
)


def _stored(row: tuple[Any, ...]) -> StoredEvent:
    """A row of ``_READ`` as a StoredEvent, its payload upcast to today's schema."""
    data = dict(zip(_READ_COLUMNS, row[:-1], strict=True))
    data["tags"] = json.loads(data["tags"])
    payload, data["schema_version"] = upcasters.upcast(
        data["event_type"], data["schema_version"], json.loads(row[-1]), data
    )
    return StoredEvent(payload=payload, **data)


def last_position(conn: Connection) -> int:
    return int(conn.execute(select(func.coalesce(func.max(_events.c.position), 0))).scalar_one())


class VerifyReport(BaseModel):
    events: int
    problems: list[str]
    # Where the head says the log ends, and its seal: what to record outside the store to catch
    # a later rollback or wipe (``verify --expect-at-least``)
    head_position: int = 0
    head_seal: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(conn: Connection, keys: ChainKeys = UNKEYED, max_problems: int = 20) -> VerifyReport:
    """Walk the log in order: every chain hash must extend the previous one (under the key that
    signed it), every payload must still hash to its address, and the chain head must end where
    the log ends (its seal, with a key, must match)."""
    blobs = PayloadBlob.__table__  # type: ignore[attr-defined]
    problems: list[str] = []
    chain, count, last = "", 0, 0
    query = (
        select(_events, blobs.c.content)
        .outerjoin(blobs, blobs.c.hash == _events.c.payload_hash)
        .order_by(_events.c.position)
    )
    # streamed (options on the statement: on the connection they would outlive the walk)
    query = query.execution_options(stream_results=True, yield_per=5000)
    for row in conn.execute(query).mappings():
        count, last = count + 1, row["position"]
        problem = keys.check_link(row["chain_hash"] or "", _link_material(chain, dict(row)))
        if problem:
            problems.append(f"event {row['position']} ({row['id']}): {problem}")
        if row["content"] is None:
            problems.append(f"event {row['position']}: its payload {row['payload_hash']} is gone")
        elif hashlib.sha256(row["content"].encode("utf-8")).hexdigest() != row["payload_hash"]:
            problems.append(f"event {row['position']}: payload content was edited")
        chain = row["chain_hash"] or ""
        if len(problems) >= max_problems:
            return VerifyReport(events=count, problems=problems)
    head = conn.execute(select(_head).where(_head.c.id == 1)).first()
    if head is None and count:
        problems.append(
            f"the chain head is gone while the log holds {count} events: it was deleted outside "
            "the store (with the events after it, the log would look whole)"
        )
    elif head is not None and (head.position != last or head.chain_hash != chain):
        problems.append(
            f"the chain head says the log ends at event {head.position}, but it ends at "
            f"{last or 'nothing'}: events were removed or added outside the store"
        )
    elif head is not None and count:
        problem = keys.check_seal(head.seal, head.position, head.chain_hash)
        if problem:
            problems.append(problem)
    problems += _edited_blobs(conn, max_problems - len(problems))
    return VerifyReport(
        events=count,
        problems=problems,
        head_position=head.position if head is not None else 0,
        head_seal=(head.seal or head.chain_hash) if head is not None else "",
    )


def _edited_blobs(conn: Connection, room: int) -> list[str]:
    """Every stored payload (event payloads and what they reference: outputs, prompts,
    definitions) must still hash to its address: an edited output is found too."""
    blobs = PayloadBlob.__table__  # type: ignore[attr-defined]
    query = select(blobs.c.hash, blobs.c.content).execution_options(
        stream_results=True, yield_per=5000
    )
    problems = []
    for digest, content in conn.execute(query):
        if hashlib.sha256(content.encode("utf-8")).hexdigest() != digest:
            problems.append(f"payload {digest} was edited: its content no longer has that hash")
            if len(problems) >= room:
                break
    return problems


def resign(conn: Connection, keys: ChainKeys) -> int:
    """Re-chain the whole log under ``keys``' current key (or unkeyed, without one), in log
    order, and seal the head: how a log adopts a key, or leaves a rotated-out one behind.
    Run inside a write transaction, after ``verify`` passed with the keys it was signed with."""
    chain, count, last = "", 0, 0
    while True:  # a window at a time: the log may not fit in memory
        rows = (
            conn.execute(
                select(_events)
                .where(_events.c.position > last)
                .order_by(_events.c.position)
                .limit(SCAN_WINDOW)
            )
            .mappings()
            .all()
        )
        if not rows:
            break
        for row in rows:
            chain = chain_link(chain, dict(row), keys)
            conn.execute(
                _events.update()
                .where(_events.c.position == row["position"])
                .values(chain_hash=chain)
            )
            count, last = count + 1, row["position"]
    conn.execute(
        _head.update()
        .where(_head.c.id == 1)
        .values(position=last, chain_hash=chain, seal=keys.seal(last, chain) if count else "")
    )
    return count
