"""Read side: what activities, the CLI and tests ask of the store."""

from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from typing import Any, TypeVar

from sqlalchemy import Engine, bindparam, func
from sqlalchemy.orm import configure_mappers
from sqlmodel import Session, SQLModel, col, select

from domain.agent import AgentDefinition, AgentRef
from domain.execution import SpanRecord
from domain.lightning import ResourceSet
from domain.rollout_report import RolloutReport
from domain.trainer import EvolutionChange, LearningInsight, PastChange, SegmentProvenance
from runner.adapter import rollout_report
from store.eventstore import event_log, payload_store
from store.eventstore.event_log import StoredEvent
from store.tables import (
    AgentVersionRow,
    ArtifactRow,
    AttemptRow,
    DirectiveRow,
    EvaluationRow,
    EvolutionRecordRow,
    LearningInsightRow,
    LineageRow,
    PayloadBlob,
    RejectedFeedbackRow,
    ResourceSetRow,
    RolloutRow,
    SessionDocumentRow,
    SpanRow,
    TrainingEvent,
)
from trainer.evolution import ROLLBACK_REASON, STRENGTHEN_REASON
from trainer.prompt_segments import segments

Row = TypeVar("Row", bound=SQLModel)


_artifacts = ArtifactRow.__table__  # type: ignore[attr-defined]
_evolutions = EvolutionRecordRow.__table__  # type: ignore[attr-defined]
_lineages = LineageRow.__table__  # type: ignore[attr-defined]
_insights = LearningInsightRow.__table__  # type: ignore[attr-defined]
_ARTIFACT = select(_artifacts).where(_artifacts.c.id == bindparam("id"))
_EVOLUTION = select(_evolutions).where(_evolutions.c.id == bindparam("id"))
_INSIGHTS = select(_insights).where(_insights.c.session_id == bindparam("session_id"))
_versions = AgentVersionRow.__table__  # type: ignore[attr-defined]
_rollouts = RolloutRow.__table__  # type: ignore[attr-defined]
_DEFINITION_HASH = select(_versions.c.definition_hash).where(_versions.c.id == bindparam("id"))
_RESUME_POINT = select(
    select(func.max(_versions.c.version))
    .where(_versions.c.lineage_id == bindparam("lineage_id"))
    .scalar_subquery(),
    select(func.max(_rollouts.c.cycle))
    .where(_rollouts.c.lineage_id == bindparam("lineage_id"))
    .scalar_subquery(),
)
_spans = SpanRow.__table__  # type: ignore[attr-defined]
_SPANS = (
    select(_spans).where(_spans.c.attempt_id == bindparam("attempt_id")).order_by(_spans.c.sequence)
)
_JUDGED = (
    select(
        _evolutions.c.id,
        _evolutions.c.lineage_id,
        _evolutions.c.changes,
        _evolutions.c.score_delta,
        _evolutions.c.hypothesis_validated,
    )
    .join(_lineages, _lineages.c.id == _evolutions.c.lineage_id)
    .where(_lineages.c.session_id == bindparam("session_id"), _evolutions.c.score_delta.isnot(None))
    .order_by(_evolutions.c.created_at)
)

CACHED_PAYLOAD_CHARS = 64_000  # content-addressed payloads never change: small ones are cached


class StoreQueries:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._payloads: OrderedDict[str, Any] = OrderedDict()
        self._definitions: dict[tuple[str, int], AgentDefinition] = {}
        self._past: dict[str, list[PastChange]] = {}
        self._lock = threading.Lock()
        # Table models built by ``_rows`` (model_construct) need their mappers configured,
        # which otherwise happens at the process's first ORM query.
        configure_mappers()

    def _all(self, statement: Any) -> list[Any]:
        with Session(self.engine) as session:
            return list(session.exec(statement).all())

    def _rows(self, model: type[Row], statement: Any, params: dict[str, Any]) -> list[Row]:
        """A cached Core statement's rows as table models: the hot per-cycle reads skip the ORM
        session, which costs more than the query, and validation (the database typed them;
        constructing a table model validated costs 60 µs a row)."""
        with self.engine.connect() as conn:
            return [
                model.model_construct(**row) for row in conn.execute(statement, params).mappings()
            ]

    def payload(self, digest: str) -> Any:
        with self._lock:
            if digest in self._payloads:
                self._payloads.move_to_end(digest)
                return copy.deepcopy(self._payloads[digest])
        with self.engine.connect() as conn:
            value = payload_store.get(conn, digest)
        if len(str(value)) <= CACHED_PAYLOAD_CHARS:
            with self._lock:
                self._payloads[digest] = copy.deepcopy(value)
                while len(self._payloads) > 4096:
                    self._payloads.popitem(last=False)
        return value

    def agent_definition(self, ref: AgentRef) -> AgentDefinition:
        """An agent version (immutable once written, so cached for the worker's lifetime)."""
        key = (ref.agent_id, ref.version)
        with self._lock:
            cached = self._definitions.get(key)
        if cached is not None:
            return cached.model_copy(deep=True)
        with self.engine.connect() as conn:
            digest = conn.execute(
                _DEFINITION_HASH, {"id": f"{ref.agent_id}@{ref.version}"}
            ).scalar_one_or_none()
        if digest is None:
            raise KeyError(f"agent {ref.agent_id} version {ref.version} is not in the store")
        definition = AgentDefinition.model_validate(self.payload(digest))
        with self._lock:
            self._definitions[key] = definition
        return definition.model_copy(deep=True)

    def resume_point(self, lineage_id: str) -> tuple[int | None, int]:
        """A lineage's latest agent version (None before its first) and the last cycle it
        rolled out (0 before its first): where a lineage started again picks up. One indexed
        statement, read once per lineage start."""
        with self.engine.connect() as conn:
            version, cycle = conn.execute(_RESUME_POINT, {"lineage_id": lineage_id}).one()
        return version, cycle or 0

    def agent_versions(self, lineage_id: str) -> list[AgentVersionRow]:
        return self._all(
            select(AgentVersionRow)
            .where(AgentVersionRow.lineage_id == lineage_id)
            .order_by(col(AgentVersionRow.version))
        )

    def session_documents(self, session_id: str) -> dict[str, str]:
        """name → text of the session's documents (the latest content per name)."""
        rows = self._all(
            select(SessionDocumentRow)
            .where(SessionDocumentRow.session_id == session_id)
            .order_by(col(SessionDocumentRow.created_at))
        )
        latest = {row.name: row.content_hash for row in rows}
        return {name: str(self.payload(digest)) for name, digest in latest.items()}

    def lineage(self, lineage_id: str) -> LineageRow | None:
        rows = self._all(select(LineageRow).where(LineageRow.id == lineage_id))
        return rows[0] if rows else None

    def resolve_lineage(self, name: str) -> str:
        """The lineage named by its id (``essay-demo-A``) or its workflow id
        (``lineage-essay-demo-A``, what Temporal shows); KeyError when neither is known."""
        rows = self._all(
            select(LineageRow).where((LineageRow.id == name) | (LineageRow.workflow_id == name))
        )
        if not rows:
            raise KeyError(f"no lineage {name!r} in this store (by lineage or workflow id)")
        exact = [r for r in rows if r.id == name]
        return (exact or rows)[0].id

    def latest_outputs(
        self, lineage_ids: list[str], unscored: bool = False
    ) -> list[tuple[LineageRow, ArtifactRow]]:
        """Each lineage's latest output with the lineage, oldest output first (one query);
        ``unscored``: only outputs no score has been recorded for yet."""
        if not lineage_ids:
            return []
        a, lin = ArtifactRow, LineageRow
        latest = (
            select(a.lineage_id, func.max(a.cycle).label("cycle"))
            .where(col(a.lineage_id).in_(lineage_ids))
            .group_by(a.lineage_id)
            .subquery()
        )
        query = (
            select(lin, a)
            .join(a, a.lineage_id == lin.id)
            .join(latest, (latest.c.lineage_id == a.lineage_id) & (latest.c.cycle == a.cycle))
            .order_by(col(a.created_at))
        )
        if unscored:
            scored = select(EvaluationRow.id).where(EvaluationRow.artifact_id == a.id).exists()
            query = query.where(~scored)
        with Session(self.engine) as session:
            return [(row[0], row[1]) for row in session.exec(query).all()]

    def session_lineages(self, session_id: str) -> list[LineageRow]:
        return self._all(
            select(LineageRow).where(LineageRow.session_id == session_id).order_by(LineageRow.label)
        )

    def rollouts(self, lineage_id: str) -> list[RolloutRow]:
        return self._all(
            select(RolloutRow)
            .where(RolloutRow.lineage_id == lineage_id)
            .order_by(col(RolloutRow.cycle), col(RolloutRow.created_at))
        )

    def attempts(self, rollout_id: str) -> list[AttemptRow]:
        return self._all(
            select(AttemptRow)
            .where(AttemptRow.rollout_id == rollout_id)
            .order_by(col(AttemptRow.attempt_number))
        )

    def spans(self, attempt_id: str) -> list[SpanRow]:
        return self._rows(SpanRow, _SPANS, {"attempt_id": attempt_id})

    def span_records(self, attempt_id: str) -> list[SpanRecord]:
        """The attempt's spans with their texts resolved (what the runner produced)."""
        records = []
        for row in self.spans(attempt_id):
            records.append(
                SpanRecord(
                    span_id=row.id,
                    parent_span_id=row.parent_span_id,
                    sequence=row.sequence,
                    span_type=row.type,
                    name=row.name,
                    input=row.input,
                    output=row.output,
                    model_id=row.model_id,
                    prompt_tokens=row.prompt_tokens,
                    completion_tokens=row.completion_tokens,
                    tool_name=row.tool_name,
                    tool_args=json.loads(row.tool_args) if row.tool_args else None,
                    tool_result=row.tool_result,
                    tool_error=row.tool_error,
                    duration_ms=row.duration_ms or 0,
                    estimated_cost=row.estimated_cost,
                    started_at=row.started_at,
                    trace_id=row.trace_id,
                    otel_span_id=row.otel_span_id,
                )
            )
        return records

    def rollout_report(self, rollout_id: str) -> RolloutReport:
        """The seed's Rollout report for a completed rollout; the reward is its latest score."""

        rollout = self._all(select(RolloutRow).where(RolloutRow.id == rollout_id))
        if not rollout or rollout[0].final_attempt_id is None:
            raise KeyError(f"rollout {rollout_id} has no successful attempt")
        scores = self._all(
            select(EvaluationRow)
            .join(ArtifactRow, col(ArtifactRow.id) == col(EvaluationRow.artifact_id))
            .where(ArtifactRow.rollout_id == rollout_id)
            .order_by(col(EvaluationRow.created_at))
        )
        spans = self.span_records(rollout[0].final_attempt_id)
        return rollout_report(rollout_id, spans, scores[-1].score if scores else None)

    def resource_set(self, server_id: str, version: int | None = None) -> ResourceSet:
        """A published resource set (the latest when ``version`` is None)."""
        query = select(ResourceSetRow).where(ResourceSetRow.server_id == server_id)
        if version is not None:
            query = query.where(ResourceSetRow.version == version)
        rows = self._all(query.order_by(col(ResourceSetRow.version).desc()).limit(1))
        if not rows:
            raise KeyError(f"no resources v{version} published by {server_id}")
        return ResourceSet.model_validate(self.payload(rows[0].content_hash))

    def lightning_reports(self, rollout_ids: list[str]) -> list[RolloutReport]:
        """The Rollout reports of completed tasks, in the order asked."""
        reports = {}
        for i in range(0, len(rollout_ids), 500):
            rows = self._all(
                select(RolloutRow).where(
                    col(RolloutRow.id).in_(rollout_ids[i : i + 500]),
                    col(RolloutRow.report_hash).is_not(None),
                )
            )
            for row in rows:
                reports[row.id] = RolloutReport.model_validate(self.payload(row.report_hash))
        return [reports[r] for r in rollout_ids if r in reports]

    def finished_rollouts(self, rollout_ids: list[str]) -> set[str]:
        """Those of ``rollout_ids`` that are done: completed or failed for good."""
        done: set[str] = set()
        with self.engine.connect() as conn:
            for i in range(0, len(rollout_ids), 500):
                rows = conn.execute(
                    select(RolloutRow.id).where(
                        col(RolloutRow.id).in_(rollout_ids[i : i + 500]),
                        col(RolloutRow.status).in_(("completed", "failed")),
                    )
                )
                done.update(row[0] for row in rows)
        return done

    def artifact(self, artifact_id: str) -> ArtifactRow:
        rows = self._rows(ArtifactRow, _ARTIFACT, {"id": artifact_id})
        if not rows:
            raise KeyError(f"artifact {artifact_id} is not in the store")
        return rows[0]

    def artifacts(self, lineage_id: str) -> list[ArtifactRow]:
        return self._all(
            select(ArtifactRow)
            .where(ArtifactRow.lineage_id == lineage_id)
            .order_by(col(ArtifactRow.cycle))
        )

    def artifact_text(self, artifact_id: str) -> str:
        return str(self.payload(self.artifact(artifact_id).content_hash))

    def evaluations(self, lineage_id: str) -> list[EvaluationRow]:
        return self._all(
            select(EvaluationRow)
            .where(EvaluationRow.lineage_id == lineage_id)
            .order_by(col(EvaluationRow.created_at))
        )

    def latest_scores(self, session_id: str) -> dict[str, float | None]:
        """Each lineage of the session → its most recent score (None if never scored)."""
        out: dict[str, float | None] = {}
        for lineage in self.session_lineages(session_id):
            evals = self.evaluations(lineage.id)
            out[lineage.id] = evals[-1].score if evals else None
        return out

    def evolution_records(self, lineage_id: str) -> list[EvolutionRecordRow]:
        return self._all(
            select(EvolutionRecordRow)
            .where(EvolutionRecordRow.lineage_id == lineage_id)
            .order_by(col(EvolutionRecordRow.from_version))
        )

    def evolution_record(self, evolution_id: str) -> EvolutionRecordRow | None:
        rows = self._rows(EvolutionRecordRow, _EVOLUTION, {"id": evolution_id})
        return rows[0] if rows else None

    def session_evolution_records(self, session_id: str) -> list[EvolutionRecordRow]:
        return self._all(
            select(EvolutionRecordRow)
            .join(LineageRow, col(LineageRow.id) == col(EvolutionRecordRow.lineage_id))
            .where(LineageRow.session_id == session_id)
            .order_by(col(EvolutionRecordRow.created_at))
        )

    def past_changes(self, session_id: str) -> list[PastChange]:
        """Every change of the session whose outcome is known, with that outcome (read on every
        plan: the few columns it needs, and each judged record parsed once per worker, since a
        judged record no longer changes)."""
        with self.engine.connect() as conn:
            judged = conn.execute(_JUDGED, {"session_id": session_id}).all()
        out = []
        for evolution_id, lineage_id, changes, delta, validated in judged:
            with self._lock:
                parsed = self._past.get(evolution_id)
            if parsed is None:
                if validated and delta > 0:
                    verdict = "improved"
                elif delta < 0:
                    verdict = "worsened"
                else:
                    verdict = "neutral"
                parsed = [
                    PastChange(
                        change=EvolutionChange.model_validate(change),
                        outcome=verdict,  # type: ignore[arg-type]
                        score_delta=delta,
                        lineage_id=lineage_id,
                        evolution_id=evolution_id,
                    )
                    for change in json.loads(changes)
                ]
                with self._lock:
                    self._past[evolution_id] = parsed
            out += [p.model_copy() for p in parsed]
        return out

    def insights(self, session_id: str) -> dict[str, LearningInsight]:
        """pattern → what the session has learned about it."""
        with self.engine.connect() as conn:
            rows = conn.execute(_INSIGHTS, {"session_id": session_id}).mappings().all()
        return {
            row["pattern"]: LearningInsight(
                id=row["id"],
                session_id=row["session_id"],
                pattern=row["pattern"],
                pattern_type=row["pattern_type"],
                contexts=json.loads(row["contexts"]),
                success_count=row["success_count"],
                failure_count=row["failure_count"],
                avg_score_impact=round(row["avg_score_impact"], 4),
                confidence=round(row["confidence"], 4),
            )
            for row in rows
        }

    def prompt_provenance(
        self, lineage_id: str, version: int | None = None
    ) -> list[SegmentProvenance]:
        """For each segment of the prompt (of ``version``, default the latest): the version and
        evolution that introduced it, and the feedback behind that evolution."""

        versions = self.agent_versions(lineage_id)
        if not versions:
            raise KeyError(f"lineage {lineage_id} is not in the store")
        records = {r.to_version: r for r in self.evolution_records(lineage_id)}
        known: dict[str, SegmentProvenance] = {}
        ever: dict[str, SegmentProvenance] = {}  # where each segment first appeared
        for row in versions:
            if version is not None and row.version > version:
                break
            prompt = self.agent_definition(AgentRef(agent_id=row.agent_id, version=row.version))
            record = records.get(row.version)
            changes = json.loads(record.changes) if record else []
            current: dict[str, SegmentProvenance] = {}
            for segment in segments(prompt.system_prompt):
                if segment in known:
                    current[segment] = known[segment]
                    continue
                made = next((c for c in changes if c.get("after") and segment in c["after"]), None)
                if segment in ever and (made is None or made["reason"].startswith(ROLLBACK_REASON)):
                    # restored by a rollback: credit the evolution that first wrote it
                    current[segment] = ever[segment]
                    continue
                current[segment] = SegmentProvenance(
                    segment=segment,
                    version=row.version,
                    evolution_id=record.id if record else None,
                    trigger_score=record.trigger_score if record else None,
                    trigger_comment=record.trigger_comment if record else None,
                    reason=_provenance_reason(made, record is not None),
                )
                ever.setdefault(segment, current[segment])
            known = current
        return list(known.values())

    def rejected_feedback(self, lineage_id: str) -> list[RejectedFeedbackRow]:
        return _in_arrival_order(
            self._all(
                select(RejectedFeedbackRow)
                .where(RejectedFeedbackRow.lineage_id == lineage_id)
                .order_by(col(RejectedFeedbackRow.created_at))
            )
        )

    def directives(self, lineage_id: str) -> list[DirectiveRow]:
        return _in_arrival_order(
            self._all(
                select(DirectiveRow)
                .where(DirectiveRow.lineage_id == lineage_id)
                .order_by(col(DirectiveRow.created_at))
            )
        )

    def events(
        self, lineage_id: str | None = None, event_types: list[str] | None = None
    ) -> list[StoredEvent]:
        with self.engine.connect() as conn:
            return list(event_log.read(conn, lineage_id=lineage_id, event_types=event_types))

    def count(self, table: type[SQLModel]) -> int:
        with Session(self.engine) as session:
            return int(session.exec(select(func.count()).select_from(table)).one())

    def blob_stats(self) -> tuple[int, int]:
        """(number of blobs, total bytes)."""
        with Session(self.engine) as session:
            n, size = session.exec(
                select(func.count(), func.coalesce(func.sum(PayloadBlob.size), 0))
            ).one()
            return int(n), int(size)

    def event_count(self) -> int:
        return self.count(TrainingEvent)


FeedbackRowT = TypeVar("FeedbackRowT", RejectedFeedbackRow, DirectiveRow)


def _in_arrival_order(rows: list[FeedbackRowT]) -> list[FeedbackRowT]:
    """Directives and rejections in the order the lineage took them: the place in its sequence
    of feedback that each id carries (``domain.lineage.feedback_key``). Signals that one
    workflow task handles are recorded by concurrent steps, whose timestamps need not follow
    that order; rows whose id carries no place keep their timestamps' order."""
    places = [_feedback_place(row.id) for row in rows]
    if None in places:
        return rows
    return [row for _, row in sorted(zip(places, rows, strict=True), key=lambda p: p[0])]


def _feedback_place(feedback_id: str) -> int | None:
    parts = feedback_id.rsplit(":", 2)  # "lineage:kind", place, digest
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def _provenance_reason(change: dict[str, Any] | None, evolved: bool) -> str:
    """Why a segment is in the prompt, read forwards: what it was written for."""
    if change is None:
        return "changed by this evolution" if evolved else "initial definition"
    want = change.get("want")
    if change.get("change_type") == "modify" and change.get("before"):
        done = f"rewritten from {change['before']!r}"
        return f"{done} for {want}" if want else done
    if change.get("reason", "").startswith(STRENGTHEN_REASON):
        return f"written firmer: {change['reason'].removeprefix(STRENGTHEN_REASON)}"
    return str(change.get("reason", ""))
