"""Records of rollouts and attempts: started, spans streamed, succeeded, failed, lost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from domain.agent import AgentSnapshot
from domain.checks import CheckResult
from domain.events import (
    ArtifactCreated,
    AttemptFailed,
    AttemptStarted,
    LoggedAgentSnapshot,
    LoggedCheck,
    OutputChecked,
    RolloutFailed,
    RolloutStarted,
)
from domain.execution import SpanRecord, Usage
from store.eventstore import payload_store
from store.eventstore.event_log import EventRefs, NewEvent
from store.eventstore.event_writer import EventWriter, now_ms
from store.records.attempt_events import attempt_tags, completed_event, span_events
from store.tables import AttemptRow


@dataclass(frozen=True, slots=True)
class CheckedTry:
    """One try at a rollout's output (the first, or a revision) and its checks."""

    attempt_id: str
    content_hash: str
    checks: list[CheckResult]


def checked_event(
    created: ArtifactCreated,
    attempt_id: str,
    artifact_id: str,
    revision: int,
    chosen: bool,
    checks: list[CheckResult],
    refs: EventRefs,
) -> NewEvent:
    return NewEvent.of(
        OutputChecked(
            rollout_id=created.rollout_id,
            cycle=created.cycle,
            agent_version=created.agent_version,
            revision=revision,
            chosen=chosen,
            checks=[LoggedCheck.of(c) for c in checks],
        ),
        f"{attempt_id}:checked",
        artifact_id=artifact_id,
        **refs,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptStart:
    """An attempt that begins: which lineage's rollout it tries, the agent version it runs
    (``snapshot``), its input and the model settings it runs with."""

    session_id: str
    lineage_id: str
    rollout_id: str
    cycle: int
    attempt_id: str
    attempt_number: int
    snapshot: AgentSnapshot
    input_hash: str
    model_id: str
    parameters: dict[str, Any]


class AttemptRecords(EventWriter):
    """Rollouts, attempts and their spans."""

    def record_attempt_started(self, attempt: AttemptStart) -> None:
        """One attempt begins (its rollout too, on the first); see ``record_attempts_started``."""
        self.record_attempts_started([attempt])

    def record_attempts_started(self, attempts: list[AttemptStart]) -> None:
        """Attempts that begin together, in one transaction."""
        ts = now_ms()
        events: list[NewEvent] = []
        for a in attempts:
            refs: EventRefs = {
                "session_id": a.session_id,
                "lineage_id": a.lineage_id,
                "timestamp": ts,
            }
            # An earlier try that never reported (its worker died, or it timed out) is lost.
            events += self._lost_attempts(
                a.rollout_id, a.snapshot.agent_id, refs, before=a.attempt_number
            )
            events.append(
                NewEvent.of(
                    RolloutStarted(rollout_id=a.rollout_id, cycle=a.cycle, input_hash=a.input_hash),
                    a.rollout_id,
                    **refs,
                )
            )
            events.append(
                NewEvent.of(
                    AttemptStarted(
                        rollout_id=a.rollout_id,
                        attempt_number=a.attempt_number,
                        agent_snapshot=LoggedAgentSnapshot.of(a.snapshot),
                        input_hash=a.input_hash,
                        model_id=a.model_id,
                        parameters=a.parameters,
                    ),
                    a.attempt_id,
                    agent_id=a.snapshot.agent_id,
                    attempt_id=a.attempt_id,
                    **refs,
                )
            )
        self._write(events)

    def _lost_attempts(
        self, rollout_id: str, agent_id: str, refs: EventRefs, before: int | None = None
    ) -> list[NewEvent]:
        """``AttemptFailed`` for the rollout's tries still ``running`` (those numbered below
        ``before``): whatever ran them has ended without a word, so none may stay running."""
        if before is not None and before <= 1:
            return []
        attempts = AttemptRow.__table__  # type: ignore[attr-defined]
        # by id: a revision tried within attempt n shares its number (``{a_n}:r1``)
        query = select(attempts.c.id).where(
            attempts.c.rollout_id == rollout_id, attempts.c.status == "running"
        )
        if before is not None:
            query = query.where(attempts.c.attempt_number < before)
        with self.engine.connect() as conn:
            ids = list(conn.execute(query).scalars())
        return [
            NewEvent.of(
                AttemptFailed(
                    error="attempt lost: no result reached the store (the worker stopped "
                    "or the attempt timed out)",
                    error_type="AttemptLost",
                    retryable=True,
                ),
                attempt_id,
                agent_id=agent_id,
                attempt_id=attempt_id,
                tags=["error"],
                **refs,
            )
            for attempt_id in ids
        ]

    def record_spans(
        self, *, session_id: str, lineage_id: str, attempt_id: str, spans: list[SpanRecord]
    ) -> int:
        """Spans as they finish (streaming ingest); the attempt's other events come later."""
        refs = _attempt_refs(session_id, lineage_id, attempt_id)
        return self._stream_spans(lambda: span_events(spans, refs))

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
        stop_reason: str | None = None,
        artifact: bool = True,
        checks: list[CheckResult] | None = None,
    ) -> str:
        """The attempt's spans, its completion and (unless ``artifact`` is False: a revision
        may follow, and the output shown is chosen then) the rollout's artifact with the
        output's checks against the lineage's active wishes, in one transaction."""
        refs = _attempt_refs(session_id, lineage_id, attempt_id)
        span_batch = span_events(spans, refs)
        output_hash = payload_store.encode(output)[0]
        completed = completed_event(
            attempt_id, output_hash, usage, duration_ms, spans, refs, stop_reason
        )
        events = [*span_batch, completed]
        if artifact:
            created = ArtifactCreated(
                rollout_id=rollout_id,
                cycle=cycle,
                agent_version=agent_version,
                content_hash=output_hash,
            )
            events.append(NewEvent.of(created, artifact_id, artifact_id=artifact_id, **refs))
            if checks:
                events.append(
                    checked_event(created, attempt_id, artifact_id, 0, True, checks, refs)
                )
        self._write(events, [output])
        return output_hash

    def record_output_chosen(
        self,
        *,
        session_id: str,
        lineage_id: str,
        rollout_id: str,
        cycle: int,
        agent_version: int,
        artifact_id: str,
        tried: list[CheckedTry],
        chosen: int,
    ) -> None:
        """A rollout's tries (the output and its revisions, each recorded as an attempt),
        each one's checks, and the artifact: the output of try ``chosen``."""
        best = tried[chosen]
        refs = _attempt_refs(session_id, lineage_id, best.attempt_id)
        created = ArtifactCreated(
            rollout_id=rollout_id,
            cycle=cycle,
            agent_version=agent_version,
            content_hash=best.content_hash,
        )
        events = [NewEvent.of(created, artifact_id, artifact_id=artifact_id, **refs)]
        for revision, attempt in enumerate(tried):
            events.append(
                checked_event(
                    created,
                    attempt.attempt_id,
                    artifact_id,
                    revision,
                    revision == chosen,
                    attempt.checks,
                    _attempt_refs(session_id, lineage_id, attempt.attempt_id),
                )
            )
        self._write(events)

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
        refs = _attempt_refs(session_id, lineage_id, attempt_id)
        span_batch = span_events(spans, refs)
        failed = NewEvent.of(
            AttemptFailed(
                error=error, error_type=error_type, retryable=retryable, duration_ms=duration_ms
            ),
            attempt_id,
            tags=attempt_tags(spans, error=True),
            **refs,
        )
        self._write([*span_batch, failed])

    def record_rollout_failed(
        self, *, session_id: str, lineage_id: str, rollout_id: str, error: str
    ) -> None:
        refs: EventRefs = {
            "session_id": session_id,
            "lineage_id": lineage_id,
            "timestamp": now_ms(),
        }
        self._write(
            [
                *self._lost_attempts(rollout_id, lineage_id, refs),
                NewEvent.of(
                    RolloutFailed(rollout_id=rollout_id, error=error),
                    rollout_id,
                    tags=["error"],
                    **refs,
                ),
            ]
        )


def _attempt_refs(session_id: str, lineage_id: str, attempt_id: str) -> EventRefs:
    """The references every event of a lineage's attempt carries (the agent is the lineage's)."""
    return {
        "session_id": session_id,
        "lineage_id": lineage_id,
        "agent_id": lineage_id,
        "attempt_id": attempt_id,
        "timestamp": now_ms(),
    }
