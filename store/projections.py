"""Projections: relational views folded from events, in the same transaction as the append.

``apply`` is the only code that writes projection tables, and ``rebuild`` replays the whole log
through it, so a dropped projection comes back identical.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import Connection, Table, bindparam, case, delete, update

from store import event_log, payload_store
from store.dialect import DriverSQL, TableInsert, driver_cursor, execute_rows
from store.tables import (
    PROJECTION_TABLES,
    AgentVersionRow,
    ArtifactRow,
    AttemptRow,
    DirectiveRow,
    EvaluationRow,
    EvolutionRecordRow,
    LearningInsightRow,
    LineageRow,
    RejectedFeedbackRow,
    ResourceSetRow,
    RolloutRow,
    SessionDocumentRow,
    SessionRow,
)


class EventLike(Protocol):
    event_type: str
    payload: dict[str, Any]
    timestamp: int
    session_id: str | None
    lineage_id: str | None
    agent_id: str | None
    artifact_id: str | None
    attempt_id: str | None


def _t(model: type) -> Table:
    return model.__table__  # type: ignore[attr-defined]


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# Statements per (table, columns), as SQL text for the driver's cursor: a cycle writes a dozen
# projection rows, and SQLAlchemy's per-statement work cost more than SQLite's.
_inserts: dict[tuple[str, str], TableInsert] = {}
_updates: dict[tuple[str, tuple[str, ...]], DriverSQL] = {}


def _insert(conn: Connection, model: type, key: str = "id", **values: Any) -> None:
    """INSERT … ON CONFLICT (key) DO NOTHING; columns left out get their model default."""
    table = _t(model)
    insert = _inserts.get((table.name, key))
    if insert is None:
        insert = _inserts[(table.name, key)] = TableInsert(table, conflict=key)
    insert.run(conn, [values])


def _update(conn: Connection, model: type, key: str, **values: Any) -> None:
    """UPDATE … WHERE id = ?, one cached statement per column set."""
    table = _t(model)
    columns = tuple(values)
    sql = _updates.get((table.name, columns))
    if sql is None:
        assignments = ", ".join(f'"{name}" = ?' for name in columns)
        sql = _updates[(table.name, columns)] = DriverSQL(
            f"UPDATE {table.name} SET {assignments} WHERE id = ?"
        )
    cur, dialect = driver_cursor(conn)
    cur.execute(sql.text(dialect), [*values.values(), key])


def _session_created(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _insert(conn, SessionRow, id=p["sessionId"], name=p["name"], created_at=e.timestamp)


def _document_added(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _insert(
        conn,
        SessionDocumentRow,
        id=f"{p['sessionId']}/{p['name']}/{p['contentHash']}",
        session_id=p["sessionId"],
        name=p["name"],
        content_hash=p["contentHash"],
        created_at=e.timestamp,
    )


def _lineage_created(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _insert(
        conn,
        LineageRow,
        id=p["lineageId"],
        session_id=p["sessionId"],
        label=p["label"],
        workflow_id=p["workflowId"],
        created_at=e.timestamp,
    )


def _agent_version(conn: Connection, e: EventLike, version: int, evolution_id: str | None) -> None:
    p = e.payload
    _insert(
        conn,
        AgentVersionRow,
        id=f"{p['agentId']}@{version}",
        agent_id=p["agentId"],
        lineage_id=e.lineage_id,
        version=version,
        definition_hash=p["definitionHash"],
        system_prompt_hash=p["systemPromptHash"],
        tools_hash=p["toolsHash"],
        flow_hash=p["flowHash"],
        evolution_id=evolution_id,
        created_at=e.timestamp,
    )


def _agent_created(conn: Connection, e: EventLike) -> None:
    _agent_version(conn, e, e.payload["version"], None)


def _agent_evolved(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _agent_version(conn, e, p["toVersion"], p["evolutionId"])
    trigger = p["trigger"]
    _insert(
        conn,
        EvolutionRecordRow,
        id=p["evolutionId"],
        lineage_id=e.lineage_id,
        kind=p.get("kind", "evolution"),
        from_version=p["fromVersion"],
        to_version=p["toVersion"],
        rollout_id=trigger["rollout_id"],
        attempt_id=trigger.get("attempt_id"),
        artifact_id=trigger["artifact_id"],
        evaluation_id=trigger["evaluation_id"],
        trigger_score=trigger["score"],
        trigger_comment=trigger.get("comment"),
        directives=_json(trigger.get("directives", {})),
        score_analysis=_json(p["scoreAnalysis"]),
        credit_assignment=_json(p["creditAssignment"]),
        plan=_json(p["plan"]),
        changes=_json(p["changes"]),
        hypothesis=p["hypothesis"],
        created_at=e.timestamp,
    )


def _task_queued(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _insert(
        conn,
        RolloutRow,
        id=p["rolloutId"],
        session_id=e.session_id,
        lineage_id=e.lineage_id,
        cycle=p["iteration"],
        input_hash=p["sampleHash"],
        status="pending",
        resources_version=p["resourcesVersion"],
        created_at=e.timestamp,
    )


def _rollout_reported(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _update(
        conn,
        RolloutRow,
        p["rolloutId"],
        status="completed",
        final_attempt_id=e.attempt_id,
        final_reward=p.get("finalReward"),
        report_hash=p["reportHash"],
        client_id=p.get("clientId"),
        completed_at=e.timestamp,
    )


def _resources_published(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _insert(
        conn,
        ResourceSetRow,
        id=f"{p['serverId']}@{p['version']}",
        server_id=p["serverId"],
        version=p["version"],
        content_hash=p["contentHash"],
        created_at=e.timestamp,
    )


_START_QUEUED = DriverSQL(
    "UPDATE rollouts SET status = 'running' WHERE id = ? AND status = 'pending'"
)


def _rollout_started(conn: Connection, e: EventLike) -> None:
    p = e.payload
    # a queued task's row exists already (pending): it starts running now
    cur, dialect = driver_cursor(conn)
    cur.execute(_START_QUEUED.text(dialect), [p["rolloutId"]])
    _insert(
        conn,
        RolloutRow,
        id=p["rolloutId"],
        session_id=e.session_id,
        lineage_id=e.lineage_id,
        cycle=p["cycle"],
        input_hash=p["inputHash"],
        status="running",
        created_at=e.timestamp,
    )


def _attempt_started(conn: Connection, e: EventLike) -> None:
    p = e.payload
    snap, params = p["agentSnapshot"], p["parameters"]
    _insert(
        conn,
        AttemptRow,
        id=e.attempt_id,
        rollout_id=p["rolloutId"],
        attempt_number=p["attemptNumber"],
        status="running",
        agent_id=snap["agent_id"],
        agent_version=snap["version"],
        system_prompt_hash=snap["system_prompt_hash"],
        tools_hash=snap["tools_hash"],
        flow_hash=snap["flow_hash"],
        input_hash=p["inputHash"],
        model_id=p["modelId"],
        temperature=params.get("temperature"),
        max_tokens=params.get("maxTokens"),
        top_p=params.get("topP"),
        created_at=e.timestamp,
    )


_SPAN_COLUMNS = (
    "id, attempt_id, parent_span_id, sequence, type, name, input, output, model_id,"
    " prompt_tokens, completion_tokens, tool_name, tool_args, tool_result, tool_error,"
    " duration_ms, estimated_cost, started_at, trace_id, otel_span_id, created_at"
)
_INSERT_SPANS = DriverSQL(
    f"INSERT INTO execution_spans ({_SPAN_COLUMNS}) VALUES ({', '.join('?' * 21)})"
    " ON CONFLICT DO NOTHING"
)


def span_rows(e: EventLike, resolve: Callable[[str], Any]) -> list[tuple[Any, ...]]:
    """One row per span in the event (schema v2 holds a batch; v1 events arrive upcast to a
    batch of one, their texts still behind content hashes, which ``resolve`` reads)."""
    rows = []
    for s in e.payload["spans"]:
        text_in, text_out = s.get("input"), s.get("output")
        if text_in is None and s.get("inputHash"):
            text_in = resolve(s["inputHash"])
        if text_out is None and s.get("outputHash"):
            text_out = resolve(s["outputHash"])
        args = s.get("toolArgs")
        rows.append(
            (
                s["spanId"],
                e.attempt_id,
                s.get("parentSpanId"),
                s["sequence"],
                s["spanType"],
                s.get("name"),
                text_in,
                text_out,
                s.get("modelId"),
                s.get("promptTokens"),
                s.get("completionTokens"),
                s.get("toolName"),
                None if args is None else _json(args),
                s.get("toolResult"),
                s.get("toolError"),
                s.get("durationMs"),
                s.get("estimatedCost"),
                s.get("startedAt"),
                s.get("traceId"),
                s.get("otelSpanId"),
                e.timestamp,
            )
        )
    return rows


def insert_span_rows(cur: Any, dialect: str, rows: list[tuple[Any, ...]]) -> None:
    execute_rows(cur, _INSERT_SPANS.text(dialect), rows)


def _span_recorded(conn: Connection, e: EventLike) -> None:
    insert_span_rows(*driver_cursor(conn), span_rows(e, lambda h: payload_store.get(conn, h)))


def _attempt_completed(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _update(
        conn,
        AttemptRow,
        e.attempt_id or "",
        status="succeeded",
        output_hash=p["outputHash"],
        duration_ms=p["durationMs"],
        prompt_tokens=p.get("promptTokens"),
        completion_tokens=p.get("completionTokens"),
        total_tokens=p.get("totalTokens"),
        estimated_cost=p.get("estimatedCost"),
    )


def _attempt_failed(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _update(
        conn,
        AttemptRow,
        e.attempt_id or "",
        status="failed",
        error=p["error"],
        duration_ms=p.get("durationMs"),
    )


def _artifact_created(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _insert(
        conn,
        ArtifactRow,
        id=e.artifact_id,
        session_id=e.session_id,
        lineage_id=e.lineage_id,
        rollout_id=p["rolloutId"],
        attempt_id=e.attempt_id,
        cycle=p["cycle"],
        agent_version=p["agentVersion"],
        content_hash=p["contentHash"],
        created_at=e.timestamp,
    )
    _update(
        conn,
        RolloutRow,
        p["rolloutId"],
        status="completed",
        final_attempt_id=e.attempt_id,
        completed_at=e.timestamp,
    )


def _rollout_failed(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _update(
        conn,
        RolloutRow,
        p["rolloutId"],
        status="failed",
        error=p["error"],
        completed_at=e.timestamp,
    )


def _artifact_scored(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _insert(
        conn,
        EvaluationRow,
        id=p["evaluationId"],
        artifact_id=e.artifact_id,
        session_id=e.session_id,
        lineage_id=e.lineage_id,
        cycle=p["cycle"],
        agent_version=p["agentVersion"],
        score=p["score"],
        comment=p.get("comment"),
        rater=p.get("rater"),
        created_at=e.timestamp,
    )


def _feedback_rejected(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _insert(
        conn,
        RejectedFeedbackRow,
        id=p["rejectionId"],
        lineage_id=e.lineage_id,
        cycle=p["cycle"],
        kind=p["kind"],
        payload_preview=p["payloadPreview"],
        reason=p["reason"],
        created_at=e.timestamp,
    )


def _directive_added(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _insert(
        conn,
        DirectiveRow,
        id=p["directiveId"],
        lineage_id=e.lineage_id,
        cycle=p["cycle"],
        kind=p["type"],
        content=p["content"],
        created_at=e.timestamp,
    )


def _lineage_lock(locked: bool) -> Callable[[Connection, EventLike], None]:
    def apply(conn: Connection, e: EventLike) -> None:
        _update(
            conn,
            LineageRow,
            e.lineage_id or "",
            locked=locked,
            lock_reason=e.payload.get("reason") if locked else None,
        )

    return apply


def _evolution_outcome(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _update(
        conn,
        EvolutionRecordRow,
        p["evolutionId"],
        next_score=p["nextScore"],
        score_delta=p["scoreDelta"],
        hypothesis_validated=p["validated"],
        outcome_reason=p.get("reason"),
    )


def _insight_discovered(conn: Connection, e: EventLike) -> None:
    p = e.payload
    _insert(
        conn,
        LearningInsightRow,
        id=p["insightId"],
        session_id=e.session_id,
        pattern=p["pattern"],
        pattern_type=p["patternType"],
        contexts=_json(p.get("contexts", [])),
        created_at=e.timestamp,
        updated_at=e.timestamp,
    )


def _insight_outcome_statement() -> Any:
    # Arithmetic in SQL: concurrent lineages update one insight without losing counts.
    t = _t(LearningInsightRow)
    n = t.c.success_count + t.c.failure_count
    won = bindparam("won")
    wins, losses = t.c.success_count + won, t.c.failure_count + (1 - won)
    return (
        update(t)
        .where(t.c.id == bindparam("insight_id"))
        .values(
            success_count=wins,
            failure_count=losses,
            avg_score_impact=(t.c.avg_score_impact * n + bindparam("delta")) / (n + 1),
            # how one-sided the evidence is, shrunk while it is thin: majority / (total + 1)
            confidence=case((wins >= losses, wins), else_=losses) * 1.0 / (n + 2),
            updated_at=bindparam("at"),
        )
    )


_INSIGHT_OUTCOME = _insight_outcome_statement()  # built once: building it cost more than running


def _insight_outcome(conn: Connection, e: EventLike) -> None:
    p = e.payload
    conn.execute(
        _INSIGHT_OUTCOME,
        {
            "insight_id": p["insightId"],
            "won": 1 if p["success"] else 0,
            "delta": p["scoreDelta"],
            "at": e.timestamp,
        },
    )


HANDLERS: dict[str, Callable[[Connection, EventLike], None]] = {
    "session.created": _session_created,
    "session.document_added": _document_added,
    "lineage.created": _lineage_created,
    "agent.created": _agent_created,
    "agent.evolved": _agent_evolved,
    "rollout.started": _rollout_started,
    "task.queued": _task_queued,
    "rollout.reported": _rollout_reported,
    "resources.published": _resources_published,
    "rollout.failed": _rollout_failed,
    "attempt.started": _attempt_started,
    "attempt.span_recorded": _span_recorded,
    "attempt.completed": _attempt_completed,
    "attempt.failed": _attempt_failed,
    "artifact.created": _artifact_created,
    "artifact.scored": _artifact_scored,
    "feedback.rejected": _feedback_rejected,
    "directive.added": _directive_added,
    "lineage.locked": _lineage_lock(True),
    "lineage.unlocked": _lineage_lock(False),
    "evolution.outcome": _evolution_outcome,
    "insight.discovered": _insight_discovered,
    "insight.outcome": _insight_outcome,
}


def apply_all(conn: Connection, events: list[Any]) -> None:
    """Fold many events: span rows (the bulk of any log) go in with one executemany."""
    spans: list[tuple[Any, ...]] = []
    for event in events:
        if event.event_type == "attempt.span_recorded":
            spans += span_rows(event, lambda h: payload_store.get(conn, h))
        else:
            apply(conn, event)
    insert_span_rows(*driver_cursor(conn), spans)


def apply(conn: Connection, event: EventLike) -> None:
    handler = HANDLERS.get(event.event_type)
    if handler is not None:  # views ignore event types they do not know
        handler(conn, event)


def rebuild(conn: Connection) -> int:
    """Empty every projection and fold the whole log into it again; returns events replayed."""
    from sqlmodel import SQLModel

    for name in PROJECTION_TABLES:
        conn.execute(delete(SQLModel.metadata.tables[name]))
    count = 0
    for event in event_log.read(conn):
        apply(conn, event)
        count += 1
    return count
