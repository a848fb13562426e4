"""Time travel: a lineage as it stood at any event or moment, and projections rebuilt from the
log and checked row for row."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, Engine, select
from sqlmodel import SQLModel

from domain.agent import AgentDefinition
from store import event_log, payload_store, projections
from store.database import write_transaction
from store.tables import PROJECTION_TABLES


class ScoreAt(BaseModel):
    cycle: int
    score: float
    comment: str | None
    position: int
    timestamp: int


class AsOf(BaseModel):
    lineage_id: str
    position: int  # the last event taken into account
    timestamp: int | None
    version: int | None
    definition: AgentDefinition | None
    scores: list[ScoreAt]


class HistoryEntry(BaseModel):
    position: int
    timestamp: int
    event_type: str
    summary: str


_AGENT_EVENTS = ["agent.created", "agent.evolved"]


def as_of(
    engine: Engine, lineage_id: str, position: int | None = None, at_ms: int | None = None
) -> AsOf:
    """The lineage's agent definition and scores after event ``position`` (or at ``at_ms``)."""
    version: int | None = None
    definition_hash: str | None = None
    scores: list[ScoreAt] = []
    last_position, last_ts = 0, None
    with engine.connect() as conn:
        for event in event_log.read(
            conn,
            lineage_id=lineage_id,
            until_position=position,
            event_types=[*_AGENT_EVENTS, "artifact.scored"],
        ):
            if at_ms is not None and event.timestamp > at_ms:
                break
            last_position, last_ts = event.position, event.timestamp
            p = event.payload
            if event.event_type == "artifact.scored":
                scores.append(
                    ScoreAt(
                        cycle=p["cycle"],
                        score=p["score"],
                        comment=p.get("comment"),
                        position=event.position,
                        timestamp=event.timestamp,
                    )
                )
            else:
                version = p["version"] if event.event_type == "agent.created" else p["toVersion"]
                definition_hash = p["definitionHash"]
        definition = (
            AgentDefinition.model_validate(payload_store.get(conn, definition_hash))
            if definition_hash
            else None
        )
    return AsOf(
        lineage_id=lineage_id,
        position=last_position,
        timestamp=last_ts,
        version=version,
        definition=definition,
        scores=scores,
    )


def _summary(event_type: str, p: dict[str, Any]) -> str:
    if event_type == "agent.created":
        return f"v{p['version']} created"
    if event_type == "agent.evolved":
        kind = p.get("kind", "evolution")
        return f"v{p['fromVersion']} → v{p['toVersion']} ({kind}): {p.get('hypothesis', '')}"
    if event_type == "artifact.scored":
        return f"cycle {p['cycle']} scored {p['score']:g}" + (
            f": {p['comment']}" if p.get("comment") else ""
        )
    if event_type == "evolution.outcome":
        verdict = "validated" if p["validated"] else "refuted"
        return f"{p['evolutionId']} {verdict} ({p['scoreDelta']:+g})"
    if event_type in ("lineage.locked", "lineage.unlocked", "directive.added"):
        return json.dumps({k: v for k, v in p.items() if k != "competitorScores"})
    if event_type == "attempt.failed":
        return p["error"][:120]
    return ""


def history(engine: Engine, lineage_id: str) -> list[HistoryEntry]:
    """The lineage's events, oldest first, spans left out."""
    with engine.connect() as conn:
        return [
            HistoryEntry(
                position=e.position,
                timestamp=e.timestamp,
                event_type=e.event_type,
                summary=_summary(e.event_type, e.payload),
            )
            for e in event_log.read(conn, lineage_id=lineage_id)
            if e.event_type != "attempt.span_recorded"
        ]


def projection_digests(conn: Connection) -> dict[str, tuple[int, str]]:
    """Per projection table: (row count, SHA-256 over its rows in key order)."""
    out = {}
    for name in PROJECTION_TABLES:
        table = SQLModel.metadata.tables[name]
        key = list(table.primary_key.columns)
        rows = conn.execute(select(table).order_by(*key)).mappings().all()
        digest = hashlib.sha256()
        for row in rows:
            digest.update(json.dumps(dict(row), sort_keys=True, default=str).encode())
        out[name] = (len(rows), digest.hexdigest())
    return out


class RebuildReport(BaseModel):
    events_replayed: int
    tables: dict[str, tuple[int, bool]]  # rows after, identical to before

    @property
    def identical(self) -> bool:
        return all(same for _, same in self.tables.values())


def rebuild_and_verify(engine: Engine) -> RebuildReport:
    """Drop every projection table, replay the whole log into new ones, compare row for row."""
    tables = [SQLModel.metadata.tables[name] for name in PROJECTION_TABLES]
    with write_transaction(engine) as conn:
        before = projection_digests(conn)
        SQLModel.metadata.drop_all(conn, tables=tables)
        SQLModel.metadata.create_all(conn, tables=tables)
        replayed = projections.rebuild(conn)
        return _report(replayed, before, projection_digests(conn))


def check_projections(engine: Engine) -> RebuildReport:
    """Replay the whole log into emptied projections, compare them with the stored ones row for
    row, and roll it all back: the stored projections are left as they were, right or wrong.
    Writers wait meanwhile (readers do not)."""
    with write_transaction(engine) as conn:
        before = projection_digests(conn)
        for name in reversed(PROJECTION_TABLES):
            conn.execute(SQLModel.metadata.tables[name].delete())
        replayed = projections.rebuild(conn)
        report = _report(replayed, before, projection_digests(conn))
        conn.rollback()
    return report


def _report(
    replayed: int, before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]
) -> RebuildReport:
    return RebuildReport(
        events_replayed=replayed,
        tables={name: (after[name][0], after[name] == before[name]) for name in PROJECTION_TABLES},
    )
