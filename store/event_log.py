"""The training event log: append-only, idempotent by event id, payloads content-addressed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Connection, func, select

from store import payload_store, upcasters
from store.dialect import insert_ignore
from store.tables import TrainingEvent

_NAMESPACE = uuid.UUID("6f1d1f8e-8c1a-4d55-9a39-5b7f0c2e7a10")
_events = TrainingEvent.__table__  # type: ignore[attr-defined]


def event_id(event_type: str, key: str) -> str:
    """Deterministic id from the writer's identity, so a retried write inserts nothing new."""
    return str(uuid.uuid5(_NAMESPACE, f"{event_type}|{key}"))


class NewEvent(BaseModel):
    id: str
    event_type: str
    payload: dict[str, Any]
    timestamp: int
    session_id: str | None = None
    lineage_id: str | None = None
    agent_id: str | None = None
    artifact_id: str | None = None
    attempt_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    schema_version: int = 1

    @classmethod
    def keyed(cls, event_type: str, key: str, payload: dict[str, Any], **fields: Any) -> NewEvent:
        fields.setdefault("schema_version", upcasters.current_version(event_type))
        return cls(id=event_id(event_type, key), event_type=event_type, payload=payload, **fields)


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


def append(conn: Connection, events: list[NewEvent]) -> list[NewEvent]:
    """Insert events that are not already in the log; return the ones actually inserted."""
    if not events:
        return []
    now = max(e.timestamp for e in events)
    encoded = [payload_store.encode(e.payload) for e in events]
    payload_store.put_encoded(conn, encoded, now)
    rows = []
    for event, (digest, text) in zip(events, encoded, strict=True):
        rows.append(
            {
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
                "tags": json.dumps(sorted(set(event.tags))),
            }
        )
    stmt = insert_ignore(conn, _events, ["id"]).returning(_events.c.id)
    inserted = {row[0] for row in conn.execute(stmt, rows)}
    return [e for e in events if e.id in inserted]


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
    from store.tables import PayloadBlob

    blobs = PayloadBlob.__table__  # type: ignore[attr-defined]
    windowed = bool(event_types) and lineage_id is None
    end = until_position
    if windowed and end is None:
        end = last_position(conn)
    position = after_position
    while True:
        query = (
            select(_events, blobs.c.content)
            .join(blobs, blobs.c.hash == _events.c.payload_hash)
            .where(_events.c.position > position)
            .order_by(_events.c.position)
        )
        if windowed:
            assert end is not None
            if position >= end:
                return
            window_end = min(position + SCAN_WINDOW, end)
            query = query.where(_events.c.position <= window_end)
        else:
            query = query.limit(batch_size)
            if until_position is not None:
                query = query.where(_events.c.position <= until_position)
        if lineage_id is not None:
            query = query.where(_events.c.lineage_id == lineage_id)
        if event_types:
            query = query.where(_events.c.event_type.in_(event_types))
        rows = conn.execute(query).mappings().all()
        if not rows and not windowed:
            return
        for row in rows:
            data = dict(row)
            content = data.pop("content")
            data["tags"] = json.loads(data["tags"])
            payload, data["schema_version"] = upcasters.upcast(
                data["event_type"], data["schema_version"], json.loads(content), data
            )
            yield StoredEvent(payload=payload, **data)
        position = window_end if windowed else rows[-1]["position"]


def last_position(conn: Connection) -> int:
    return int(conn.execute(select(func.coalesce(func.max(_events.c.position), 0))).scalar_one())
