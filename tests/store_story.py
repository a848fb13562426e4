"""The story the store suites tell: a session whose lineages register, run, score and evolve, and
a dump of every projection to compare after a rebuild."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlmodel import SQLModel

from domain.agent import AgentDefinition, AgentParameters, AgentSnapshot
from domain.execution import SpanRecord, Usage
from domain.trainer import (
    CreditAssignment,
    EvolutionChange,
    EvolutionOutcome,
    EvolutionPlan,
    EvolutionTrigger,
    ScoreAnalysis,
)
from store import Store
from store.records.attempt_records import AttemptStart
from store.tables import (
    PROJECTION_TABLES,
)

AGENT = AgentDefinition(
    name="Analyst",
    system_prompt="You are an expert analyst. Provide comprehensive, detailed analysis.",
    parameters=AgentParameters(model="offline-1", max_tokens=2048),
)
INPUTS = ["Explain the four-day week.", "Explain remote onboarding."]


def register(store: Store, lineage: str, session: str = "s1") -> list[str]:
    registered = store.recorder.register_lineage(
        session_id=session,
        session_name="Session",
        lineage_id=lineage,
        label=lineage[-1],
        workflow_id=f"lineage-{lineage}",
        agent=AGENT,
        inputs=INPUTS,
    )
    return registered.input_hashes


def start_attempt(
    store: Store, lineage: str, rollout: str, attempt: str, number: int, ih: str
) -> None:
    store.recorder.record_attempt_started(
        AttemptStart(
            session_id="s1",
            lineage_id=lineage,
            rollout_id=rollout,
            cycle=1,
            attempt_id=attempt,
            attempt_number=number,
            snapshot=AgentSnapshot(agent_id=lineage, version=1, **AGENT.hashes().model_dump()),
            input_hash=ih,
            model_id="offline-1",
            parameters={"temperature": 0.7, "maxTokens": 2048, "topP": None},
        )
    )


def spans_of(attempt: str) -> list[SpanRecord]:
    return [
        SpanRecord(
            span_id=f"{attempt}:s1",
            sequence=1,
            span_type="llm_call",
            input="q",
            output="a long essay",
            model_id="offline-1",
            prompt_tokens=5,
            completion_tokens=9,
            duration_ms=3,
        ),
        SpanRecord(
            span_id=f"{attempt}:s2",
            parent_span_id=f"{attempt}:s1",
            sequence=2,
            span_type="output",
            output="a long essay",
        ),
    ]


def full_story(store: Store) -> None:
    """One lineage through a failed attempt, a success, a score, an evolution and its outcome."""
    hashes = register(store, "s1-A")
    register(store, "s1-B")
    rec = store.recorder
    start_attempt(store, "s1-A", "s1-A:c1", "s1-A:c1:a1", 1, hashes[0])
    rec.record_attempt_failed(
        session_id="s1",
        lineage_id="s1-A",
        attempt_id="s1-A:c1:a1",
        error="overloaded",
        error_type="AgentRunError",
        retryable=True,
        spans=[],
        duration_ms=4,
    )
    start_attempt(store, "s1-A", "s1-A:c1", "s1-A:c1:a2", 2, hashes[0])
    rec.record_attempt_succeeded(
        session_id="s1",
        lineage_id="s1-A",
        rollout_id="s1-A:c1",
        cycle=1,
        agent_version=1,
        attempt_id="s1-A:c1:a2",
        artifact_id="s1-A:c1:artifact",
        output="a long essay",
        spans=spans_of("s1-A:c1:a2"),
        usage=Usage(prompt_tokens=5, completion_tokens=9),
        duration_ms=7,
    )
    rec.record_score(
        session_id="s1",
        lineage_id="s1-A",
        evaluation_id="e1",
        artifact_id="s1-A:c1:artifact",
        rollout_id="s1-A:c1",
        cycle=1,
        agent_version=1,
        score=3,
        comment="too long",
        rater="ana",
        outcome=None,
    )
    change = EvolutionChange(
        component="parameters",
        change_type="modify",
        target="maxTokens",
        before="2048",
        after="300",
        reason="length",
        confidence=0.8,
    )
    evolved = AGENT.model_copy(
        update={"parameters": AGENT.parameters.model_copy(update={"max_tokens": 300})}
    )
    rec.record_evolution(
        session_id="s1",
        lineage_id="s1-A",
        evolution_id="s1-A:evolution:v1",
        from_version=1,
        new_agent=evolved,
        trigger=EvolutionTrigger(
            rollout_id="s1-A:c1",
            attempt_id="s1-A:c1:a2",
            artifact_id="s1-A:c1:artifact",
            evaluation_id="e1",
            score=3,
        ),
        analysis=ScoreAnalysis(score=3, sentiment="negative", trend="stable"),
        credit=CreditAssignment(mode="prompt"),
        plan=EvolutionPlan(changes=[change], hypothesis="shorter"),
        changes=[change],
    )
    rec.record_score(
        session_id="s1",
        lineage_id="s1-A",
        evaluation_id="e2",
        artifact_id="s1-A:c2:artifact",
        rollout_id="s1-A:c2",
        cycle=2,
        agent_version=2,
        score=8,
        comment=None,
        rater=None,
        outcome=(
            "s1-A:evolution:v1",
            EvolutionOutcome(next_score=8, score_delta=5, hypothesis_validated=True, reason="ok"),
        ),
    )
    rec.record_directive(
        session_id="s1",
        lineage_id="s1-A",
        directive_id="d1",
        cycle=2,
        kind="sticky",
        content="Be brief.",
    )
    rec.record_rejection(
        session_id="s1",
        lineage_id="s1-A",
        rejection_id="r1",
        cycle=2,
        kind="score",
        payload_preview="{'score': 11}",
        reason="too high",
    )
    rec.record_lock(
        session_id="s1",
        lineage_id="s1-A",
        event_key="l1",
        cycle=2,
        locked=True,
        reason="winner",
    )
    rec.record_rollout_failed(
        session_id="s1", lineage_id="s1-B", rollout_id="s1-B:c1", error="boom"
    )


def dump_projections(store: Store) -> dict[str, list[dict[str, Any]]]:
    out = {}
    with store.engine.connect() as conn:
        for name in PROJECTION_TABLES:
            table = SQLModel.metadata.tables[name]
            rows = conn.execute(select(table)).mappings().all()
            out[name] = sorted((dict(r) for r in rows), key=lambda r: str(r["id"]))
    return out


def scored_cycle(store: Store, lineage: str, ih: str, output: str, score: float) -> None:
    rollout, attempt = f"{lineage}:c1", f"{lineage}:c1:a1"
    start_attempt(store, lineage, rollout, attempt, 1, ih)
    store.recorder.record_attempt_succeeded(
        session_id="s1",
        lineage_id=lineage,
        rollout_id=rollout,
        cycle=1,
        agent_version=1,
        attempt_id=attempt,
        artifact_id=f"{rollout}:artifact",
        output=output,
        spans=spans_of(attempt),
        usage=Usage(prompt_tokens=5, completion_tokens=9),
        duration_ms=7,
    )
    store.recorder.record_score(
        session_id="s1",
        lineage_id=lineage,
        evaluation_id=f"{rollout}:e",
        artifact_id=f"{rollout}:artifact",
        rollout_id=rollout,
        cycle=1,
        agent_version=1,
        score=score,
        comment=None,
        rater="ana",
        outcome=None,
    )


def correction_story(store: Store) -> list[str]:
    """After the full story, ana corrects how e1's comment was read, then another session's
    rater corrects one of theirs; returns the correction ids."""
    from domain.corrections import Correction, correction_key

    register(store, "s2-A", session="s2")
    made = [
        ("s1", "s1-A", "e1", "too long", ["shorter"], ["shorter:half", "bullets"], "ana"),
        ("s2", "s2-A", "e9", "make it less stiff", ["formal"], ["casual", "example:1"], "bo"),
    ]
    ids = []
    for session, lineage, evaluation, comment, read_as, corrected, rater in made:
        key = correction_key(lineage, evaluation, corrected)
        store.recorder.record_correction(
            Correction(
                correction_id=key,
                session_id=session,
                lineage_id=lineage,
                evaluation_id=evaluation,
                comment=comment,
                read_as=read_as,
                corrected=corrected,
                rater=rater,
                cycle=1,
            )
        )
        ids.append(key)
    return ids
