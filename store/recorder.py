"""TrainingSignalRecorder: the one write path. Each call appends events and folds them into the
projections in a single transaction; event ids come from Temporal identity, so retries and replays
insert nothing twice."""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, func, select

from domain.agent import AgentDefinition, AgentRef, AgentSnapshot
from domain.execution import SpanRecord, Usage
from domain.trainer import (
    CreditAssignment,
    EvolutionChange,
    EvolutionOutcome,
    EvolutionPlan,
    EvolutionTrigger,
    InsightObservation,
    ScoreAnalysis,
)
from store import event_log, payload_store, projections
from store.chain_keys import UNKEYED, ChainKeys
from store.database import sqlite_writer_lock, write_transaction
from store.event_log import NewEvent
from store.tables import AttemptRow, EvaluationRow, LineageRow, SessionRow

HIGH_SCORE = 8
SPANS = "attempt.span_recorded"
Encoded = tuple[str, str]  # (content hash, canonical JSON)
LOW_SCORE = 3


_OPTIONAL_SPAN_FIELDS = (
    ("parentSpanId", "parent_span_id"),
    ("name", "name"),
    ("input", "input"),
    ("output", "output"),
    ("modelId", "model_id"),
    ("promptTokens", "prompt_tokens"),
    ("completionTokens", "completion_tokens"),
    ("toolName", "tool_name"),
    ("toolArgs", "tool_args"),
    ("toolResult", "tool_result"),
    ("toolError", "tool_error"),
    ("durationMs", "duration_ms"),
    ("estimatedCost", "estimated_cost"),
    ("startedAt", "started_at"),
    ("traceId", "trace_id"),
    ("otelSpanId", "otel_span_id"),
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class SqliteWriter:
    """One SQLite connection kept for streaming writes, used in this process's turn to write
    (hold ``lock``, the one ``exclusive_writer`` takes). SQLite admits one writer at a time
    anyway; a pooled connection checked out and back in for every span cost a fifth of the
    write. Opened at the first write."""

    def __init__(self, engine: Engine, lock: threading.Lock) -> None:
        self.engine = engine
        self.lock = lock
        self._connection: Any = None

    @classmethod
    def for_engine(cls, engine: Engine) -> SqliteWriter | None:
        # An in-memory database is one connection's: stay on the pool.
        lock = sqlite_writer_lock(engine)
        return cls(engine, lock) if lock is not None else None

    def connection(self) -> Any:
        if self._connection is None:
            fairy = self.engine.raw_connection()  # made by the engine: its PRAGMAs applied
            fairy.detach()  # ours from now on, not the pool's
            self._connection = fairy.dbapi_connection
        return self._connection

    def close(self) -> None:
        with self.lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


class TrainingSignalRecorder:
    def __init__(self, engine: Engine, keys: ChainKeys = UNKEYED) -> None:
        self.engine = engine
        self.keys = keys  # sign the event log's chain (store/chain_keys.py)
        self._batch: Connection | None = None
        self._span_writer = SqliteWriter.for_engine(engine)

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
        # Hash and serialise before the transaction: SQLite holds its write lock from BEGIN.
        pairs = [payload_store.encode(b) for b in blobs]
        payloads = event_log.encode_payloads(list(events))
        if self._batch is not None:
            return self._write_on(self._batch, events, pairs, follow_up, payloads)
        if not blobs and follow_up is None and all(e.event_type == SPANS for e in events):
            return self._write_spans(list(events), payloads)
        with write_transaction(self.engine) as conn:
            return self._write_on(conn, events, pairs, follow_up, payloads)

    def _write_spans(self, events: list[NewEvent], payloads: dict[str, Encoded]) -> int:
        """Streaming span ingest: the same append and span rows as ``_write_on``, on a driver
        connection without a SQLAlchemy transaction around them (which costs as much as the
        writes when spans arrive one by one). SQLite takes one writer at a time, so its span
        writes share one connection, in turn; PostgreSQL's check one out of the pool."""
        if self._span_writer is not None:
            with self._span_writer.lock:
                connection = self._span_writer.connection()
                return self._append_spans(connection, "sqlite", events, payloads)
        raw = self.engine.raw_connection()
        try:
            return self._append_spans(raw, self.engine.dialect.name, events, payloads)
        finally:
            raw.close()  # back to the pool (checked with a ping before its next use)

    def _append_spans(
        self, raw: Any, dialect: str, events: list[NewEvent], payloads: dict[str, Encoded]
    ) -> int:
        try:
            cur = raw.cursor()
            if dialect == "sqlite":
                cur.execute("BEGIN IMMEDIATE")  # autocommit driver: we open the transaction
            inserted = event_log.append_with(cur, dialect, events, payloads, self.keys)
            rows = [row for e in inserted for row in projections.span_rows(e, _no_hashes)]
            projections.insert_span_rows(cur, dialect, rows)
            raw.commit()
        except BaseException:
            with contextlib.suppress(Exception):  # a dead connection: keep the first error
                raw.rollback()
            raise
        return len(inserted)

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
        projections.apply_all(conn, inserted)
        if follow_up is not None and inserted:
            for event in event_log.append(conn, follow_up(conn), keys=self.keys):
                projections.apply(conn, event)
        return len(inserted)

    # ---- sessions, lineages, agents --------------------------------------------------------

    def register_lineage(
        self,
        *,
        session_id: str,
        session_name: str,
        lineage_id: str,
        label: str,
        workflow_id: str,
        agent: AgentDefinition,
        inputs: list[str],
        documents: list[tuple[str, str]] = (),  # type: ignore[assignment]
    ) -> list[str]:
        """Record the session, the lineage and agent v1; returns the inputs' content hashes."""
        ts = now_ms()
        definition = agent.model_dump(mode="json")
        hashes = agent.hashes()
        input_hashes = [payload_store.encode(text)[0] for text in inputs]
        refs = {"session_id": session_id, "lineage_id": lineage_id, "timestamp": ts}
        events = [
            NewEvent.keyed(
                "session.created",
                session_id,
                {"sessionId": session_id, "name": session_name},
                session_id=session_id,
                timestamp=ts,
            ),
            NewEvent.keyed(
                "lineage.created",
                lineage_id,
                {
                    "sessionId": session_id,
                    "lineageId": lineage_id,
                    "label": label,
                    "workflowId": workflow_id,
                },
                **refs,
            ),
            NewEvent.keyed(
                "agent.created",
                f"{lineage_id}@1",
                {
                    "agentId": lineage_id,
                    "lineageId": lineage_id,
                    "version": 1,
                    "definitionHash": payload_store.encode(definition)[0],
                    "systemPromptHash": hashes.system_prompt_hash,
                    "toolsHash": hashes.tools_hash,
                    "flowHash": hashes.flow_hash,
                },
                agent_id=lineage_id,
                **refs,
            ),
        ]
        for name, content in documents:
            digest = payload_store.encode(content)[0]
            events.append(
                NewEvent.keyed(
                    "session.document_added",
                    f"{session_id}/{name}/{digest}",
                    {"sessionId": session_id, "name": name, "contentHash": digest},
                    session_id=session_id,
                    timestamp=ts,
                )
            )
        contents = [content for _, content in documents]
        self._write(events, [definition, *agent.hashed_components(), *inputs, *contents])
        return input_hashes

    def record_evolution(
        self,
        *,
        session_id: str,
        lineage_id: str,
        evolution_id: str,
        from_version: int,
        new_agent: AgentDefinition,
        trigger: EvolutionTrigger,
        analysis: ScoreAnalysis,
        credit: CreditAssignment,
        plan: EvolutionPlan,
        changes: list[EvolutionChange],
        kind: str = "evolution",
        applied_insights: list[tuple[str, EvolutionChange]] = (),  # type: ignore[assignment]
    ) -> AgentRef:
        ts = now_ms()
        definition = new_agent.model_dump(mode="json")
        hashes = new_agent.hashes()
        to_version = from_version + 1
        event = NewEvent.keyed(
            "agent.evolved",
            evolution_id,
            {
                "agentId": lineage_id,
                "evolutionId": evolution_id,
                "fromVersion": from_version,
                "toVersion": to_version,
                "definitionHash": payload_store.encode(definition)[0],
                "systemPromptHash": hashes.system_prompt_hash,
                "toolsHash": hashes.tools_hash,
                "flowHash": hashes.flow_hash,
                "changes": [c.model_dump(mode="json") for c in changes],
                "hypothesis": plan.hypothesis,
                "trigger": trigger.model_dump(mode="json"),
                "scoreAnalysis": analysis.model_dump(mode="json"),
                "creditAssignment": credit.model_dump(mode="json"),
                "plan": plan.model_dump(mode="json"),
                "kind": kind,
            },
            session_id=session_id,
            lineage_id=lineage_id,
            agent_id=lineage_id,
            timestamp=ts,
            tags=["evolution"] if kind == "evolution" else ["evolution", kind],
        )
        applied = [
            NewEvent.keyed(
                "insight.applied",
                f"{insight_id}/{evolution_id}",
                {
                    "insightId": insight_id,
                    "agentId": lineage_id,
                    "evolutionId": evolution_id,
                    "change": change.model_dump(mode="json"),
                },
                session_id=session_id,
                lineage_id=lineage_id,
                agent_id=lineage_id,
                timestamp=ts,
            )
            for insight_id, change in applied_insights
        ]
        self._write([event, *applied], [definition, *new_agent.hashed_components()])
        return AgentRef(agent_id=lineage_id, version=to_version)

    def record_kept(
        self,
        *,
        session_id: str,
        lineage_id: str,
        version: int,
        trigger: EvolutionTrigger,
        analysis: ScoreAnalysis,
        plan: EvolutionPlan,
    ) -> None:
        """A training step that changed nothing, with the plan's notes and history checks."""
        self._write(
            [
                NewEvent.keyed(
                    "evolution.kept",
                    f"{lineage_id}:{trigger.evaluation_id}",
                    {
                        "agentId": lineage_id,
                        "version": version,
                        "trigger": trigger.model_dump(mode="json"),
                        "scoreAnalysis": analysis.model_dump(mode="json"),
                        "plan": plan.model_dump(mode="json"),
                    },
                    session_id=session_id,
                    lineage_id=lineage_id,
                    agent_id=lineage_id,
                    timestamp=now_ms(),
                )
            ]
        )

    # ---- Agent Lightning: resources and dataset tasks ----------------------------------------

    def publish_resources(self, *, server_id: str, version: int, resources: dict[str, Any]) -> str:
        """Append a resource set version (idempotent per server and version)."""
        digest = payload_store.encode(resources)[0]
        self._write(
            [
                NewEvent.keyed(
                    "resources.published",
                    f"{server_id}@{version}",
                    {"serverId": server_id, "version": version, "contentHash": digest},
                    session_id=server_id,
                    timestamp=now_ms(),
                )
            ],
            [resources],
        )
        return digest

    def record_task_queued(
        self,
        *,
        server_id: str,
        rollout_id: str,
        iteration: int,
        sample: dict[str, Any],
        resources_version: int,
    ) -> str:
        digest = payload_store.encode(sample)[0]
        self._write(
            [
                NewEvent.keyed(
                    "task.queued",
                    rollout_id,
                    {
                        "rolloutId": rollout_id,
                        "iteration": iteration,
                        "sampleHash": digest,
                        "resourcesVersion": resources_version,
                    },
                    session_id=server_id,
                    lineage_id=server_id,
                    timestamp=now_ms(),
                )
            ],
            [sample],
        )
        return digest

    def record_task_report(
        self,
        *,
        server_id: str,
        rollout_id: str,
        attempt_id: str,
        client_id: str,
        report: dict[str, Any],
        final_reward: float | None,
        spans: list[SpanRecord],
        usage: Usage,
        duration_ms: int,
    ) -> None:
        """A client's Rollout report: its spans, the attempt's completion, the rollout done."""
        ts = now_ms()
        refs = {
            "session_id": server_id,
            "lineage_id": server_id,
            "attempt_id": attempt_id,
            "timestamp": ts,
        }
        span_events = self._span_events(spans, refs)
        report_hash = payload_store.encode(report)[0]
        completed = self._completed(attempt_id, report_hash, usage, duration_ms, spans, refs)
        reported = NewEvent.keyed(
            "rollout.reported",
            rollout_id,
            {
                "rolloutId": rollout_id,
                "finalReward": final_reward,
                "reportHash": report_hash,
                "clientId": client_id,
            },
            **refs,
        )
        self._write([*span_events, completed, reported], [report])

    # ---- rollouts and attempts -------------------------------------------------------------

    def record_attempt_started(
        self,
        *,
        session_id: str,
        lineage_id: str,
        rollout_id: str,
        cycle: int,
        attempt_id: str,
        attempt_number: int,
        snapshot: AgentSnapshot,
        input_hash: str,
        model_id: str,
        parameters: dict[str, Any],
    ) -> None:
        ts = now_ms()
        refs = {"session_id": session_id, "lineage_id": lineage_id, "timestamp": ts}
        # An earlier try that never reported (its worker died, or it timed out) is lost.
        lost = self._lost_attempts(rollout_id, snapshot.agent_id, refs, before=attempt_number)
        self._write(
            [
                *lost,
                NewEvent.keyed(
                    "rollout.started",
                    rollout_id,
                    {"rolloutId": rollout_id, "cycle": cycle, "inputHash": input_hash},
                    **refs,
                ),
                NewEvent.keyed(
                    "attempt.started",
                    attempt_id,
                    {
                        "rolloutId": rollout_id,
                        "attemptNumber": attempt_number,
                        "agentSnapshot": snapshot.model_dump(mode="json"),
                        "inputHash": input_hash,
                        "modelId": model_id,
                        "parameters": parameters,
                    },
                    agent_id=snapshot.agent_id,
                    attempt_id=attempt_id,
                    **refs,
                ),
            ]
        )

    def _lost_attempts(
        self, rollout_id: str, agent_id: str, refs: dict[str, Any], before: int | None = None
    ) -> list[NewEvent]:
        """``attempt.failed`` for the rollout's tries still ``running`` (those numbered below
        ``before``): whatever ran them has ended without a word, so none may stay running."""
        if before is not None and before <= 1:
            return []
        attempts = AttemptRow.__table__  # type: ignore[attr-defined]
        query = select(attempts.c.attempt_number).where(
            attempts.c.rollout_id == rollout_id, attempts.c.status == "running"
        )
        if before is not None:
            query = query.where(attempts.c.attempt_number < before)
        with self.engine.connect() as conn:
            numbers = list(conn.execute(query).scalars())
        return [
            NewEvent.keyed(
                "attempt.failed",
                f"{rollout_id}:a{n}",
                {
                    "error": "attempt lost: no result reached the store (the worker stopped "
                    "or the attempt timed out)",
                    "errorType": "AttemptLost",
                    "retryable": True,
                    "durationMs": None,
                },
                agent_id=agent_id,
                attempt_id=f"{rollout_id}:a{n}",
                tags=["error"],
                **refs,
            )
            for n in numbers
        ]

    @staticmethod
    def _span_events(spans: list[SpanRecord], refs: dict[str, Any]) -> list[NewEvent]:
        """One ``attempt.span_recorded`` event for a batch of spans, texts inline: spans come
        in bursts (an attempt's trace, a client's report), and one log entry per burst keeps
        ingest at the cost of the span rows themselves."""
        if not spans:
            return []
        items, tags = [], set()
        for span in spans:
            item = {"spanId": span.span_id, "sequence": span.sequence, "spanType": span.span_type}
            fields = span.__dict__
            for key, attr in _OPTIONAL_SPAN_FIELDS:  # absent rather than null: smaller batches
                value = fields[attr]
                if value is not None:
                    item[key] = value
            items.append(item)
            if span.span_type == "tool_call":
                tags.add("tool_use")
            if span.tool_error:
                tags.add("error")
        # Keyed by the spans it holds, so a retried write of the same batch inserts nothing.
        key = hashlib.sha256("\x1f".join([s.span_id for s in spans]).encode()).hexdigest()
        return [
            NewEvent.keyed(
                "attempt.span_recorded",
                f"{refs['attempt_id']}|{key}",
                {"spans": items},
                tags=sorted(tags),
                **refs,
            )
        ]

    def record_spans(
        self, *, session_id: str, lineage_id: str, attempt_id: str, spans: list[SpanRecord]
    ) -> int:
        """Spans as they finish (streaming ingest); the attempt's other events come later."""
        refs = {
            "session_id": session_id,
            "lineage_id": lineage_id,
            "agent_id": lineage_id,
            "attempt_id": attempt_id,
            "timestamp": now_ms(),
        }
        return self._write(self._span_events(spans, refs))

    def _completed(
        self,
        attempt_id: str,
        output_hash: str,
        usage: Usage,
        duration_ms: int,
        spans: list[SpanRecord],
        refs: dict[str, Any],
    ) -> NewEvent:
        return NewEvent.keyed(
            "attempt.completed",
            attempt_id,
            {
                "outputHash": output_hash,
                "promptTokens": usage.prompt_tokens,
                "completionTokens": usage.completion_tokens,
                "totalTokens": usage.total_tokens,
                "durationMs": duration_ms,
                "estimatedCost": usage.estimated_cost,
                "success": True,
            },
            tags=self._attempt_tags(spans, error=False),
            **refs,
        )

    @staticmethod
    def _attempt_tags(spans: list[SpanRecord], error: bool) -> list[str]:
        tags = []
        if any(s.span_type == "tool_call" for s in spans):
            tags.append("tool_use")
        if sum(1 for s in spans if s.span_type == "llm_call") > 1 or len(spans) > 3:
            tags.append("multi_step")
        if error:
            tags.append("error")
        return tags

    def record_attempt_succeeded(
        self,
        *,
        session_id: str,
        lineage_id: str,
        rollout_id: str,
        cycle: int,
        agent_version: int,
        attempt_id: str,
        artifact_id: str,
        output: str,
        spans: list[SpanRecord],
        usage: Usage,
        duration_ms: int,
    ) -> str:
        ts = now_ms()
        refs = {
            "session_id": session_id,
            "lineage_id": lineage_id,
            "agent_id": lineage_id,
            "attempt_id": attempt_id,
            "timestamp": ts,
        }
        span_events = self._span_events(spans, refs)
        output_hash = payload_store.encode(output)[0]
        completed = self._completed(attempt_id, output_hash, usage, duration_ms, spans, refs)
        artifact = NewEvent.keyed(
            "artifact.created",
            artifact_id,
            {
                "rolloutId": rollout_id,
                "cycle": cycle,
                "agentVersion": agent_version,
                "contentHash": output_hash,
            },
            artifact_id=artifact_id,
            **refs,
        )
        self._write([*span_events, completed, artifact], [output])
        return output_hash

    def record_attempt_failed(
        self,
        *,
        session_id: str,
        lineage_id: str,
        attempt_id: str,
        error: str,
        error_type: str,
        retryable: bool,
        spans: list[SpanRecord],
        duration_ms: int,
    ) -> None:
        ts = now_ms()
        refs = {
            "session_id": session_id,
            "lineage_id": lineage_id,
            "agent_id": lineage_id,
            "attempt_id": attempt_id,
            "timestamp": ts,
        }
        span_events = self._span_events(spans, refs)
        failed = NewEvent.keyed(
            "attempt.failed",
            attempt_id,
            {
                "error": error,
                "errorType": error_type,
                "retryable": retryable,
                "durationMs": duration_ms,
            },
            tags=self._attempt_tags(spans, error=True),
            **refs,
        )
        self._write([*span_events, failed])

    def record_rollout_failed(
        self, *, session_id: str, lineage_id: str, rollout_id: str, error: str
    ) -> None:
        refs = {"session_id": session_id, "lineage_id": lineage_id, "timestamp": now_ms()}
        self._write(
            [
                *self._lost_attempts(rollout_id, lineage_id, refs),
                NewEvent.keyed(
                    "rollout.failed",
                    rollout_id,
                    {"rolloutId": rollout_id, "error": error},
                    tags=["error"],
                    **refs,
                ),
            ]
        )

    # ---- human feedback --------------------------------------------------------------------

    def record_score(
        self,
        *,
        session_id: str,
        lineage_id: str,
        evaluation_id: str,
        artifact_id: str,
        rollout_id: str,
        cycle: int,
        agent_version: int,
        score: float,
        comment: str | None,
        rater: str | None,
        outcome: tuple[str, EvolutionOutcome] | None,
        insights: list[InsightObservation] = (),  # type: ignore[assignment]
    ) -> None:
        ts = now_ms()
        refs = {"session_id": session_id, "lineage_id": lineage_id, "timestamp": ts}
        tags = (
            ["high_score"] if score >= HIGH_SCORE else ["low_score"] if score <= LOW_SCORE else []
        )
        events = [
            NewEvent.keyed(
                "artifact.scored",
                evaluation_id,
                {
                    "evaluationId": evaluation_id,
                    "rolloutId": rollout_id,
                    "cycle": cycle,
                    "agentVersion": agent_version,
                    "score": score,
                    "comment": comment,
                    "rater": rater,
                },
                artifact_id=artifact_id,
                tags=tags,
                **refs,
            )
        ]
        if outcome is not None:
            evolution_id, result = outcome
            events.append(
                NewEvent.keyed(
                    "evolution.outcome",
                    evolution_id,
                    {
                        "evolutionId": evolution_id,
                        "nextScore": result.next_score,
                        "scoreDelta": result.score_delta,
                        "validated": result.hypothesis_validated,
                        "reason": result.reason,
                        "aspects": [a.model_dump() for a in result.aspects],
                    },
                    **refs,
                )
            )
        for seen in insights:
            events.append(
                NewEvent.keyed(
                    "insight.discovered",
                    seen.insight_id,
                    {
                        "insightId": seen.insight_id,
                        "pattern": seen.pattern,
                        "patternType": seen.pattern_type,
                        "contexts": seen.contexts,
                    },
                    **refs,
                )
            )
            events.append(
                NewEvent.keyed(
                    "insight.outcome",
                    f"{seen.insight_id}/{seen.evolution_id}",
                    {
                        "insightId": seen.insight_id,
                        "evolutionId": seen.evolution_id,
                        "success": seen.success,
                        "scoreDelta": seen.score_delta,
                    },
                    **refs,
                )
            )
        self._write(events, follow_up=lambda conn: _comparison(conn, session_id, cycle, ts))

    def record_rejection(
        self,
        *,
        session_id: str,
        lineage_id: str,
        rejection_id: str,
        cycle: int,
        kind: str,
        payload_preview: str,
        reason: str,
    ) -> None:
        self._write(
            [
                NewEvent.keyed(
                    "feedback.rejected",
                    rejection_id,
                    {
                        "rejectionId": rejection_id,
                        "cycle": cycle,
                        "kind": kind,
                        "payloadPreview": payload_preview,
                        "reason": reason,
                    },
                    session_id=session_id,
                    lineage_id=lineage_id,
                    timestamp=now_ms(),
                    tags=["rejected"],
                )
            ]
        )

    def record_directive(
        self,
        *,
        session_id: str,
        lineage_id: str,
        directive_id: str,
        cycle: int,
        kind: str,
        content: str,
    ) -> None:
        self._write(
            [
                NewEvent.keyed(
                    "directive.added",
                    directive_id,
                    {"directiveId": directive_id, "type": kind, "content": content, "cycle": cycle},
                    session_id=session_id,
                    lineage_id=lineage_id,
                    timestamp=now_ms(),
                )
            ]
        )

    def record_lock(
        self,
        *,
        session_id: str,
        lineage_id: str,
        event_key: str,
        cycle: int,
        locked: bool,
        reason: str | None,
        competitor_scores: dict[str, float | None],
    ) -> None:
        payload: dict[str, Any] = {"reason": reason, "cycle": cycle}
        if locked:
            payload["competingLineageIds"] = sorted(competitor_scores)
            payload["competitorScores"] = competitor_scores
        self._write(
            [
                NewEvent.keyed(
                    "lineage.locked" if locked else "lineage.unlocked",
                    event_key,
                    payload,
                    session_id=session_id,
                    lineage_id=lineage_id,
                    timestamp=now_ms(),
                    tags=["preference_signal"] if locked else [],
                )
            ]
        )


def _no_hashes(digest: str) -> Any:
    raise AssertionError(f"a new span event refers to text by hash ({digest})")


def _comparison_statements() -> tuple[Any, Any, Any]:
    sessions, lineages = SessionRow.__table__, LineageRow.__table__  # type: ignore[attr-defined]
    evaluations = EvaluationRow.__table__  # type: ignore[attr-defined]
    session, cycle = bindparam("session_id"), bindparam("cycle")
    of_cycle = (evaluations.c.session_id == session) & (evaluations.c.cycle == cycle)
    lock = select(sessions.c.id).where(sessions.c.id == session).with_for_update()
    counts = select(
        select(func.count()).where(lineages.c.session_id == session).scalar_subquery(),
        select(func.count(evaluations.c.lineage_id.distinct())).where(of_cycle).scalar_subquery(),
    )
    scores = (
        select(evaluations.c.lineage_id, evaluations.c.artifact_id, evaluations.c.score)
        .where(of_cycle)
        .order_by(evaluations.c.created_at)
    )
    return lock, counts, scores


# Built once: a score's transaction runs them while holding the write lock.
_LOCK_SESSION, _MEMBERS_AND_SCORED, _CYCLE_SCORES = _comparison_statements()


def _comparison(conn: Connection, session_id: str, cycle: int, ts: int) -> list[NewEvent]:
    """artifact.compared once every lineage of the session has scored this cycle's output.
    Every score asks, in one row, whether all have; only the last one reads the scores: each
    row read is a step out of the GIL and back, inside the write transaction."""
    params = {"session_id": session_id, "cycle": cycle}
    if conn.dialect.name != "sqlite":  # SQLite already writes one transaction at a time
        conn.execute(_LOCK_SESSION, params)  # serialise concurrent scorers of one session
    members, scored = conn.execute(_MEMBERS_AND_SCORED, params).one()
    if members < 2 or scored != members:
        return []
    rows = conn.execute(_CYCLE_SCORES, params).all()
    latest = {lineage: (artifact, score) for lineage, artifact, score in rows}
    ranked = sorted(latest.items(), key=lambda item: (-item[1][1], item[0]))
    return [
        NewEvent.keyed(
            "artifact.compared",
            f"{session_id}:c{cycle}",
            {
                "cycle": cycle,
                "artifacts": [
                    {"id": artifact, "lineageId": lineage, "score": score}
                    for lineage, (artifact, score) in sorted(latest.items())
                ],
                "ranking": [artifact for _, (artifact, _) in ranked],
            },
            session_id=session_id,
            timestamp=ts,
            tags=["comparison"],
        )
    ]
