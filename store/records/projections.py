"""Projections: relational views folded from events, in the same transaction as the append.

``apply`` is the only code that writes projection tables, and ``rebuild`` replays the whole log
through it, so a dropped projection comes back identical. The write side owns them (the event
writer is handed this module as its ``Projector``); ``store/views`` only reads the tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import Connection, Table, bindparam, case, delete, update

from domain.events import (
    AgentCreated,
    AgentEvolved,
    ArtifactCreated,
    ArtifactScored,
    AttemptCompleted,
    AttemptFailed,
    AttemptStarted,
    DirectiveAdded,
    DocumentAdded,
    Event,
    EvolutionJudged,
    FeedbackRejected,
    InsightDiscovered,
    InsightTested,
    LineageCreated,
    LineageLocked,
    LineageUnlocked,
    ReadingCorrected,
    ResourcesPublished,
    RolloutFailed,
    RolloutReported,
    RolloutStarted,
    SessionCreated,
    SpansRecorded,
    TaskQueued,
)
from store.backends.dialect import DriverSQL, TableInsert, driver_cursor, execute_rows
from store.eventstore import event_log, payload_store
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
    ReadingCorrectionRow,
    RejectedFeedbackRow,
    ResourceSetRow,
    RolloutRow,
    SessionDocumentRow,
    SessionRow,
)


class EventLike(Protocol):
    """A stored event or one on its way in: where it sits, and its typed payload."""

    event_type: str
    payload: dict[str, Any]
    timestamp: int
    session_id: str | None
    lineage_id: str | None
    agent_id: str | None
    artifact_id: str | None
    attempt_id: str | None

    @property
    def data(self) -> Event | None: ...


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


def _session_created(conn: Connection, e: EventLike, d: SessionCreated) -> None:
    _insert(conn, SessionRow, id=d.session_id, name=d.name, created_at=e.timestamp)


def _document_added(conn: Connection, e: EventLike, d: DocumentAdded) -> None:
    _insert(
        conn,
        SessionDocumentRow,
        id=f"{d.session_id}/{d.name}/{d.content_hash}",
        session_id=d.session_id,
        name=d.name,
        content_hash=d.content_hash,
        created_at=e.timestamp,
    )


def _lineage_created(conn: Connection, e: EventLike, d: LineageCreated) -> None:
    _insert(
        conn,
        LineageRow,
        id=d.lineage_id,
        session_id=d.session_id,
        label=d.label,
        workflow_id=d.workflow_id,
        created_at=e.timestamp,
    )


def _agent_version(
    conn: Connection,
    e: EventLike,
    d: AgentCreated | AgentEvolved,
    version: int,
    evolution_id: str | None,
) -> None:
    _insert(
        conn,
        AgentVersionRow,
        id=f"{d.agent_id}@{version}",
        agent_id=d.agent_id,
        lineage_id=e.lineage_id,
        version=version,
        definition_hash=d.definition_hash,
        system_prompt_hash=d.system_prompt_hash,
        tools_hash=d.tools_hash,
        flow_hash=d.flow_hash,
        evolution_id=evolution_id,
        created_at=e.timestamp,
    )


def _agent_created(conn: Connection, e: EventLike, d: AgentCreated) -> None:
    _agent_version(conn, e, d, d.version, None)


def _agent_evolved(conn: Connection, e: EventLike, d: AgentEvolved) -> None:
    _agent_version(conn, e, d, d.to_version, d.evolution_id)
    trigger = d.trigger
    _insert(
        conn,
        EvolutionRecordRow,
        id=d.evolution_id,
        lineage_id=e.lineage_id,
        kind=d.kind,
        from_version=d.from_version,
        to_version=d.to_version,
        rollout_id=trigger.rollout_id,
        attempt_id=trigger.attempt_id,
        artifact_id=trigger.artifact_id,
        evaluation_id=trigger.evaluation_id,
        trigger_score=trigger.score,
        trigger_comment=trigger.comment,
        directives=_json(trigger.directives.model_dump(mode="json")),
        score_analysis=_json(d.score_analysis.model_dump(mode="json")),
        credit_assignment=_json(d.credit_assignment.model_dump(mode="json")),
        plan=_json(d.plan.model_dump(mode="json")),
        changes=_json([c.model_dump(mode="json") for c in d.changes]),
        hypothesis=d.hypothesis,
        created_at=e.timestamp,
    )


def _task_queued(conn: Connection, e: EventLike, d: TaskQueued) -> None:
    _insert(
        conn,
        RolloutRow,
        id=d.rollout_id,
        session_id=e.session_id,
        lineage_id=e.lineage_id,
        cycle=d.iteration,
        input_hash=d.sample_hash,
        status="pending",
        resources_version=d.resources_version,
        created_at=e.timestamp,
    )


def _rollout_reported(conn: Connection, e: EventLike, d: RolloutReported) -> None:
    _update(
        conn,
        RolloutRow,
        d.rollout_id,
        status="completed",
        final_attempt_id=e.attempt_id,
        final_reward=d.final_reward,
        report_hash=d.report_hash,
        client_id=d.client_id,
        completed_at=e.timestamp,
    )


def _resources_published(conn: Connection, e: EventLike, d: ResourcesPublished) -> None:
    _insert(
        conn,
        ResourceSetRow,
        id=f"{d.server_id}@{d.version}",
        server_id=d.server_id,
        version=d.version,
        content_hash=d.content_hash,
        created_at=e.timestamp,
    )


_START_QUEUED = DriverSQL(
    "UPDATE rollouts SET status = 'running' WHERE id = ? AND status = 'pending'"
)


def _rollout_started(conn: Connection, e: EventLike, d: RolloutStarted) -> None:
    # a queued task's row exists already (pending): it starts running now
    cur, dialect = driver_cursor(conn)
    cur.execute(_START_QUEUED.text(dialect), [d.rollout_id])
    _insert(
        conn,
        RolloutRow,
        id=d.rollout_id,
        session_id=e.session_id,
        lineage_id=e.lineage_id,
        cycle=d.cycle,
        input_hash=d.input_hash,
        status="running",
        created_at=e.timestamp,
    )


def _attempt_started(conn: Connection, e: EventLike, d: AttemptStarted) -> None:
    snap, params = d.agent_snapshot, d.parameters
    _insert(
        conn,
        AttemptRow,
        id=e.attempt_id,
        rollout_id=d.rollout_id,
        attempt_number=d.attempt_number,
        status="running",
        agent_id=snap.agent_id,
        agent_version=snap.version,
        system_prompt_hash=snap.system_prompt_hash,
        tools_hash=snap.tools_hash,
        flow_hash=snap.flow_hash,
        input_hash=d.input_hash,
        model_id=d.model_id,
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


def span_rows(
    e: EventLike, d: SpansRecorded, resolve: Callable[[str], Any]
) -> list[tuple[Any, ...]]:
    """One row per span in the batch (events stored under schema v1 arrive upcast to a batch
    of one, their texts still behind content hashes, which ``resolve`` reads)."""
    rows = []
    hashes = d.text_hashes or {}
    for s in d.spans:
        text_in, text_out = s.input, s.output
        input_hash, output_hash = hashes.get(s.span_id, (None, None))
        if text_in is None and input_hash:
            text_in = resolve(input_hash)
        if text_out is None and output_hash:
            text_out = resolve(output_hash)
        rows.append(
            (
                s.span_id,
                e.attempt_id,
                s.parent_span_id,
                s.sequence,
                s.span_type,
                s.name,
                text_in,
                text_out,
                s.model_id,
                s.prompt_tokens,
                s.completion_tokens,
                s.tool_name,
                None if s.tool_args is None else _json(s.tool_args),
                s.tool_result,
                s.tool_error,
                s.duration_ms,
                s.estimated_cost,
                s.started_at,
                s.trace_id,
                s.otel_span_id,
                e.timestamp,
            )
        )
    return rows


def insert_span_rows(cur: Any, dialect: str, rows: list[tuple[Any, ...]]) -> None:
    execute_rows(cur, _INSERT_SPANS.text(dialect), rows)


def _spans_recorded(conn: Connection, e: EventLike, d: SpansRecorded) -> None:
    rows = span_rows(e, d, lambda h: payload_store.get(conn, h))
    insert_span_rows(*driver_cursor(conn), rows)


def _attempt_completed(conn: Connection, e: EventLike, d: AttemptCompleted) -> None:
    _update(
        conn,
        AttemptRow,
        e.attempt_id or "",
        status="succeeded",
        output_hash=d.output_hash,
        duration_ms=d.duration_ms,
        prompt_tokens=d.prompt_tokens,
        completion_tokens=d.completion_tokens,
        total_tokens=d.total_tokens,
        estimated_cost=d.estimated_cost,
        stop_reason=d.stop_reason,
    )


def _attempt_failed(conn: Connection, e: EventLike, d: AttemptFailed) -> None:
    _update(
        conn,
        AttemptRow,
        e.attempt_id or "",
        status="failed",
        error=d.error,
        duration_ms=d.duration_ms,
    )


def _artifact_created(conn: Connection, e: EventLike, d: ArtifactCreated) -> None:
    _insert(
        conn,
        ArtifactRow,
        id=e.artifact_id,
        session_id=e.session_id,
        lineage_id=e.lineage_id,
        rollout_id=d.rollout_id,
        attempt_id=e.attempt_id,
        cycle=d.cycle,
        agent_version=d.agent_version,
        content_hash=d.content_hash,
        created_at=e.timestamp,
    )
    _update(
        conn,
        RolloutRow,
        d.rollout_id,
        status="completed",
        final_attempt_id=e.attempt_id,
        completed_at=e.timestamp,
    )


def _rollout_failed(conn: Connection, e: EventLike, d: RolloutFailed) -> None:
    _update(
        conn,
        RolloutRow,
        d.rollout_id,
        status="failed",
        error=d.error,
        completed_at=e.timestamp,
    )


def _artifact_scored(conn: Connection, e: EventLike, d: ArtifactScored) -> None:
    _insert(
        conn,
        EvaluationRow,
        id=d.evaluation_id,
        artifact_id=e.artifact_id,
        session_id=e.session_id,
        lineage_id=e.lineage_id,
        cycle=d.cycle,
        agent_version=d.agent_version,
        score=d.score,
        comment=d.comment,
        rater=d.rater,
        created_at=e.timestamp,
    )


def _feedback_rejected(conn: Connection, e: EventLike, d: FeedbackRejected) -> None:
    _insert(
        conn,
        RejectedFeedbackRow,
        id=d.rejection_id,
        lineage_id=e.lineage_id,
        cycle=d.cycle,
        kind=d.kind,
        payload_preview=d.payload_preview,
        reason=d.reason,
        created_at=e.timestamp,
    )


def _reading_corrected(conn: Connection, e: EventLike, d: ReadingCorrected) -> None:
    _insert(
        conn,
        ReadingCorrectionRow,
        id=d.correction_id,
        session_id=d.session_id,
        lineage_id=d.lineage_id,
        evaluation_id=d.evaluation_id,
        comment=d.comment,
        read_as=_json(d.read_as),
        corrected=_json(d.corrected),
        rater=d.rater,
        cycle=d.cycle,
        created_at=e.timestamp,
    )


def _directive_added(conn: Connection, e: EventLike, d: DirectiveAdded) -> None:
    _insert(
        conn,
        DirectiveRow,
        id=d.directive_id,
        lineage_id=e.lineage_id,
        cycle=d.cycle,
        kind=d.kind,
        content=d.content,
        created_at=e.timestamp,
    )


def _lineage_locked(conn: Connection, e: EventLike, d: LineageLocked) -> None:
    _update(conn, LineageRow, e.lineage_id or "", locked=True, lock_reason=d.reason)


def _lineage_unlocked(conn: Connection, e: EventLike, d: LineageUnlocked) -> None:
    _update(conn, LineageRow, e.lineage_id or "", locked=False, lock_reason=None)


def _evolution_judged(conn: Connection, e: EventLike, d: EvolutionJudged) -> None:
    _update(
        conn,
        EvolutionRecordRow,
        d.evolution_id,
        next_score=d.next_score,
        score_delta=d.score_delta,
        hypothesis_validated=d.validated,
        outcome_reason=d.reason,
    )


def _insight_discovered(conn: Connection, e: EventLike, d: InsightDiscovered) -> None:
    _insert(
        conn,
        LearningInsightRow,
        id=d.insight_id,
        session_id=e.session_id,
        pattern=d.pattern,
        pattern_type=d.pattern_type,
        contexts=_json(d.contexts),
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


def _insight_tested(conn: Connection, e: EventLike, d: InsightTested) -> None:
    conn.execute(
        _INSIGHT_OUTCOME,
        {
            "insight_id": d.insight_id,
            "won": 1 if d.success else 0,
            "delta": d.score_delta,
            "at": e.timestamp,
        },
    )


Handler = Callable[[Connection, EventLike, Any], None]
HANDLERS: dict[type[Event], Handler] = {
    SessionCreated: _session_created,
    DocumentAdded: _document_added,
    LineageCreated: _lineage_created,
    AgentCreated: _agent_created,
    AgentEvolved: _agent_evolved,
    RolloutStarted: _rollout_started,
    TaskQueued: _task_queued,
    RolloutReported: _rollout_reported,
    ResourcesPublished: _resources_published,
    RolloutFailed: _rollout_failed,
    AttemptStarted: _attempt_started,
    SpansRecorded: _spans_recorded,
    AttemptCompleted: _attempt_completed,
    AttemptFailed: _attempt_failed,
    ArtifactCreated: _artifact_created,
    ArtifactScored: _artifact_scored,
    FeedbackRejected: _feedback_rejected,
    ReadingCorrected: _reading_corrected,
    DirectiveAdded: _directive_added,
    LineageLocked: _lineage_locked,
    LineageUnlocked: _lineage_unlocked,
    EvolutionJudged: _evolution_judged,
    InsightDiscovered: _insight_discovered,
    InsightTested: _insight_tested,
}


def apply_all(conn: Connection, events: list[Any]) -> None:
    """Fold many events: span rows (the bulk of any log) go in with one executemany."""
    spans: list[tuple[Any, ...]] = []
    for event in events:
        data = event.data
        if isinstance(data, SpansRecorded):
            spans += span_rows(event, data, lambda h: payload_store.get(conn, h))
        else:
            _fold(conn, event, data)
    insert_span_rows(*driver_cursor(conn), spans)


def apply_spans(cur: Any, dialect: str, events: list[Any]) -> None:
    """The span rows of new span batches, on a driver cursor (streaming span ingest)."""
    rows = [
        row
        for e in events
        if isinstance(e.event, SpansRecorded)
        for row in span_rows(e, e.event, _no_hashes)
    ]
    insert_span_rows(cur, dialect, rows)


def _no_hashes(digest: str) -> Any:
    raise AssertionError(f"a new span event refers to text by hash ({digest})")


def apply(conn: Connection, event: EventLike) -> None:
    _fold(conn, event, event.data)


def _fold(conn: Connection, event: EventLike, data: Event | None) -> None:
    handler = HANDLERS.get(type(data))  # type: ignore[arg-type]
    if handler is not None:  # views ignore event types they do not know or do not show
        handler(conn, event, data)


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
