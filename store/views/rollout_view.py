"""Reads of the rollout view: each cycle's rollout, its attempts and their spans, and the
outputs (artifacts) they produced."""

from __future__ import annotations

import json

from sqlalchemy import bindparam, func
from sqlmodel import Session, col, select

from domain.agent import AgentDefinition
from domain.execution import SpanRecord
from domain.rollout_report import RolloutReport
from domain.trace import Trace, TracedAttempt, TracedCall, step_inputs, traced_steps
from runner.adapter import rollout_report
from store.tables import (
    AgentVersionRow,
    ArtifactRow,
    AttemptRow,
    EvaluationRow,
    LineageRow,
    RolloutRow,
    SpanRow,
)
from store.views.reader import ViewReader

_artifacts = ArtifactRow.__table__  # type: ignore[attr-defined]
_ARTIFACT = select(_artifacts).where(_artifacts.c.id == bindparam("id"))
_rollouts = RolloutRow.__table__  # type: ignore[attr-defined]
_ROLLOUT_INPUT = select(_rollouts.c.input_hash).where(_rollouts.c.id == bindparam("id"))
_versions = AgentVersionRow.__table__  # type: ignore[attr-defined]
_DEFINITION_HASH = select(_versions.c.definition_hash).where(_versions.c.id == bindparam("id"))
_spans = SpanRow.__table__  # type: ignore[attr-defined]
_SPANS = (
    select(_spans).where(_spans.c.attempt_id == bindparam("attempt_id")).order_by(_spans.c.sequence)
)


class RolloutView(ViewReader):
    """Rollouts, attempts, spans, artifacts."""

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

    def rollout_trace(self, rollout_id: str) -> Trace:
        """Every attempt at a rollout in the order they ran (a revision after the try it
        revised), each with its flow steps and their model and tool calls: the trace a
        reviewer reads beside the output."""
        artifact = self._all(select(ArtifactRow).where(ArtifactRow.rollout_id == rollout_id))
        shown = artifact[-1].attempt_id if artifact else None
        attempts = sorted(
            self.attempts(rollout_id), key=lambda a: (a.attempt_number, a.created_at, a.id)
        )
        return Trace(
            rollout_id=rollout_id,
            attempts=[
                TracedAttempt(
                    attempt_id=a.id,
                    status=a.status,
                    error=a.error,
                    shown=a.id == shown,
                    steps=traced_steps(self.span_records(a.id), self._step_inputs(a)),
                )
                for a in attempts
            ],
        )

    def run_calls(self, rollout_id: str) -> list[TracedCall]:
        """The calls of the run that made the rollout's output, numbered as its trace shows
        them (a revision's: the try it revised; ``Trace.flow_run``)."""
        run = self.rollout_trace(rollout_id).flow_run()
        return run.calls if run else []

    def _step_inputs(self, attempt: AttemptRow) -> dict[str, list[str]]:
        """What each step of the flow the attempt ran was given (empty: its version is gone)."""
        with self.engine.connect() as conn:
            digest = conn.execute(
                _DEFINITION_HASH, {"id": f"{attempt.agent_id}@{attempt.agent_version}"}
            ).scalar_one_or_none()
        if digest is None:
            return {}
        return step_inputs(AgentDefinition.model_validate(self.payload(digest)).flow)

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

    def artifact(self, artifact_id: str) -> ArtifactRow:
        rows = self._rows(ArtifactRow, _ARTIFACT, {"id": artifact_id})
        if not rows:
            raise KeyError(f"artifact {artifact_id} is not in the store")
        return rows[0]

    def artifacts(self, lineage_id: str) -> list[ArtifactRow]:
        return self._all(
            select(ArtifactRow)
            .where(ArtifactRow.lineage_id == lineage_id)
            # a cycle run again after a corrected reading has a second output, the later
            .order_by(col(ArtifactRow.cycle), col(ArtifactRow.created_at))
        )

    def artifact_text(self, artifact_id: str) -> str:
        return str(self.payload(self.artifact(artifact_id).content_hash))

    def rollout_input(self, rollout_id: str) -> str | None:
        """The input a rollout ran on: for a cycle's, the question its output answers (None:
        no such rollout)."""
        with self.engine.connect() as conn:
            digest = conn.execute(_ROLLOUT_INPUT, {"id": rollout_id}).scalar()
        return None if digest is None else str(self.payload(digest))

    def latest_outputs(
        self, lineage_ids: list[str], unscored: bool = False
    ) -> list[tuple[LineageRow, ArtifactRow]]:
        """Each lineage's latest output with the lineage, oldest output first (one query);
        ``unscored``: only outputs no score has been recorded for yet."""
        if not lineage_ids:
            return []
        a, lin = ArtifactRow, LineageRow
        # the newest output: a cycle run again after a corrected reading has two
        latest = (
            select(a.lineage_id, func.max(a.created_at).label("created_at"))
            .where(col(a.lineage_id).in_(lineage_ids))
            .group_by(a.lineage_id)
            .subquery()
        )
        query = (
            select(lin, a)
            .join(a, a.lineage_id == lin.id)
            .join(
                latest,
                (latest.c.lineage_id == a.lineage_id) & (latest.c.created_at == a.created_at),
            )
            .order_by(col(a.created_at))
        )
        if unscored:
            scored = select(EvaluationRow.id).where(EvaluationRow.artifact_id == a.id).exists()
            query = query.where(~scored)
        with Session(self.engine) as session:
            return [(row[0], row[1]) for row in session.exec(query).all()]
