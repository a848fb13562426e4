"""The cycle step as an activity: a thin adapter that reads what the step needs from the store,
calls ``trainer.cycle_step.take`` (the same function the evaluation command calls), and records
the score, the verdict on the last change and the new version.

With the rules engine it runs as a local activity (milliseconds of deterministic work); with
Claude as an activity on the task queue (model calls), which any worker may take.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.error_classification import is_transient
from domain.agent import AgentDefinition
from domain.execution import SpanRecord
from domain.lineage import CycleStepInput, CycleStepResult
from domain.trainer import (
    CreditAssignment,
    Directives,
    EvolutionChange,
    EvolutionTrigger,
    JudgedEvolution,
    LearningInsight,
    PastChange,
    ScoreAnalysis,
)
from rlm.shared_store import WorkerStoreProxy
from runner.model_backend import ModelError
from runner.redaction import redact
from store import Store
from store.rlm_findings.findings import DatabaseFindingsStore
from store.rlm_findings.shared_findings import DatabaseSharedStore
from store.tables import ArtifactRow
from trainer import cycle_step, outcome, reward_analyzer, rlm_credit
from trainer.backends import TrainerBackend, TrainerBackends, TrainerConfigError
from trainer.change_patterns import pattern
from trainer.claude_trainer import TrainerOutputError
from trainer.cycle_step import CycleStep, LineageMemory
from trainer.outcome import PendingEvolution

T = TypeVar("T")
TRAINING_ERROR_CHARS = 500
MODEL_ATTEMPTS = 5  # a trainer model still failing after this many tries ends the training


@dataclass
class StepContext:
    """What a cycle step reads from the store."""

    agent: AgentDefinition
    artifact: ArtifactRow
    spans: list[SpanRecord]
    pending: PendingEvolution | None
    past: list[PastChange]
    insights: dict[str, LearningInsight]


class TrainerActivities:
    def __init__(self, store: Store, backends: TrainerBackends) -> None:
        self.store = store
        self.backends = backends

    @activity.defn(name="take_cycle_step")
    async def take_cycle_step(self, inp: CycleStepInput) -> CycleStepResult:
        """Judge the last change, roll back what the comment refuted, train on the comment, and
        record it all (the score first: a training that fails for good leaves it recorded)."""
        context: StepContext | None = None
        try:
            context = await asyncio.to_thread(self._context, inp)
            memory = self._memory(inp, context)
            if not inp.train:  # locked: the score judges, nothing evolves
                judged = self._judge(inp, memory)
                await asyncio.to_thread(self._record_score, inp, judged)
                return CycleStepResult(
                    verdict=judged.verdict if judged else None,
                    agent=inp.agent,
                    asked_for=inp.asked_for,
                    summary=f"kept v{inp.agent.version}: the lineage is locked",
                )
            step = await self._take(inp, context, memory)
        except Exception as error:
            if is_transient(error):
                raise  # the store: retried until it is back
            if _retryable(error) and activity.info().attempt < MODEL_ATTEMPTS:
                raise  # a model call that may succeed next time
            return await asyncio.to_thread(self._record_failed, inp, context, error)
        return await asyncio.to_thread(self._record, inp, context, step)

    def _memory(self, inp: CycleStepInput, context: StepContext) -> LineageMemory:
        return LineageMemory(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            pending=context.pending,
            asked_for=inp.asked_for,
            previous_score=inp.previous_score,
            sticky_directives=inp.sticky_directives,
            oneshot_directives=inp.oneshot_directives,
            rollback_refuted=inp.rollback_refuted,
        )

    def _record_failed(
        self, inp: CycleStepInput, context: StepContext | None, error: BaseException
    ) -> CycleStepResult:
        """A step that failed for good: the score is recorded all the same (with the verdict,
        if the pending evolution could be read), and the lineage keeps its version."""
        judged = self._judge(inp, self._memory(inp, context)) if context else None
        self._record_score(inp, judged)
        reason = redact(" ".join(f"{type(error).__name__}: {error}".split()))
        return CycleStepResult(
            verdict=judged.verdict if judged else None,
            agent=inp.agent,
            asked_for=inp.asked_for,
            training_error=reason[:TRAINING_ERROR_CHARS],
        )

    # ---- reading -------------------------------------------------------------------------

    def _context(self, inp: CycleStepInput) -> StepContext:
        q = self.store.queries
        artifact = q.artifact(inp.artifact_id)
        pending = None
        if inp.pending_evolution_id:
            record = q.evolution_record(inp.pending_evolution_id)
            if record is not None:
                pending = PendingEvolution.of(
                    record.id,
                    ScoreAnalysis.model_validate_json(record.score_analysis),
                    [EvolutionChange.model_validate(c) for c in json.loads(record.changes)],
                )
        return StepContext(
            agent=q.agent_definition(inp.agent),
            artifact=artifact,
            spans=q.span_records(artifact.attempt_id),
            pending=pending,
            past=q.past_changes(inp.session_id),
            insights=q.insights(inp.session_id),
        )

    # ---- the step --------------------------------------------------------------------------

    def _backend(self, inp: CycleStepInput) -> TrainerBackend:
        try:
            return self.backends.get(inp.trainer, inp.trainer_model)
        except TrainerConfigError as exc:
            raise ApplicationError(
                str(exc), type="TrainerConfigError", non_retryable=True
            ) from None

    async def _take(
        self, inp: CycleStepInput, context: StepContext, memory: LineageMemory
    ) -> CycleStep:
        backend = self._backend(inp)
        credit_of = None
        if _fans_out(context.spans):

            def credit_of(
                agent: AgentDefinition, analysis: ScoreAnalysis
            ) -> Awaitable[CreditAssignment]:
                return self._trajectory_credit(backend, agent, analysis, context)

        return await _typed(
            cycle_step.take(
                backend,
                context.agent,
                memory,
                inp.score.score,
                inp.score.comment,
                spans=context.spans,
                past=context.past,
                insights=context.insights,
                credit_of=credit_of,
            )
        )

    def _trajectory_credit(
        self,
        backend: TrainerBackend,
        agent: AgentDefinition,
        analysis: ScoreAnalysis,
        context: StepContext,
    ) -> Awaitable[CreditAssignment]:
        """A long trajectory's credit, fanned out over its model calls (RLM-style)."""
        findings = DatabaseFindingsStore(
            self.store.engine, f"credit:{context.artifact.attempt_id}", self.store.read_engine
        )
        return rlm_credit.trajectory_credit(backend, agent, analysis, context.spans, findings)

    def _judge(self, inp: CycleStepInput, memory: LineageMemory) -> JudgedEvolution | None:
        if memory.pending is None:
            return None
        previous = [] if inp.previous_score is None else [inp.previous_score]
        analysis = reward_analyzer.analyze(inp.score.score, inp.score.comment, previous)
        return outcome.judge(memory.pending, analysis, inp.session_id)

    # ---- recording -------------------------------------------------------------------------

    def _record_score(self, inp: CycleStepInput, judged: JudgedEvolution | None) -> None:
        self.store.recorder.record_score(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            evaluation_id=inp.evaluation_id,
            artifact_id=inp.artifact_id,
            rollout_id=inp.rollout_id,
            cycle=inp.cycle,
            agent_version=inp.agent.version,
            score=inp.score.score,
            comment=inp.score.comment,
            rater=inp.score.rater,
            outcome=(judged.evolution_id, judged.verdict) if judged else None,
            insights=judged.insights if judged else [],
        )
        if judged is not None:
            self._share(inp, judged)

    def _record(
        self, inp: CycleStepInput, context: StepContext, step: CycleStep
    ) -> CycleStepResult:
        self._record_score(inp, step.judged)
        plan = step.plan
        plan.notes = [*plan.notes, *(r for r in step.report if r not in plan.notes)]
        trigger = EvolutionTrigger(
            rollout_id=inp.rollout_id,
            attempt_id=context.artifact.attempt_id,
            artifact_id=inp.artifact_id,
            evaluation_id=inp.evaluation_id,
            score=inp.score.score,
            comment=inp.score.comment,
            directives=Directives(sticky=inp.sticky_directives, oneshot=inp.oneshot_directives),
        )
        verdict = step.judged.verdict if step.judged else None
        summary = cycle_step.summary(step, inp.agent.version)
        if not step.changed:
            self.store.recorder.record_kept(
                session_id=inp.session_id,
                lineage_id=inp.lineage_id,
                version=inp.agent.version,
                trigger=trigger,
                analysis=step.analysis,
                plan=plan,
            )
            return CycleStepResult(
                verdict=verdict,
                agent=inp.agent,
                asked_for=step.asked_for,
                report=step.report,
                summary=summary,
            )
        evolution_id = f"{inp.lineage_id}:evolution:v{inp.agent.version}"
        applied = [
            (context.insights[pattern(c)[0]].id, c)
            for c in plan.changes
            if pattern(c)[0] in context.insights
        ]
        ref = self.store.recorder.record_evolution(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            evolution_id=evolution_id,
            from_version=inp.agent.version,
            new_agent=step.agent,
            trigger=trigger,
            analysis=step.analysis,
            credit=step.credit,
            plan=plan,
            changes=plan.changes,
            kind="rollback" if step.rolled_back and not step.new_changes else "evolution",
            applied_insights=applied,
        )
        return CycleStepResult(
            verdict=verdict,
            evolution_id=evolution_id if step.new_changes else None,
            agent=ref,
            asked_for=step.asked_for,
            report=step.report,
            summary=summary,
        )

    def _share(self, inp: CycleStepInput, judged: JudgedEvolution) -> None:
        """Publish the outcome to the session's shared findings, where every lineage reads
        what the others learned (``view_others``). Once per evolution, even if retried."""
        shared = WorkerStoreProxy(
            DatabaseSharedStore(
                self.store.engine, f"session:{inp.session_id}", self.store.read_engine
            ),
            inp.lineage_id,
        )
        verdict, tag = judged.verdict, f"evolution:{judged.evolution_id}"
        if not judged.insights or shared.shared.query(f"tag={tag}"):
            return
        for observation in judged.insights:
            shared.create(
                "claim",
                f"{observation.pattern}: {'worked' if observation.success else 'failed'}"
                f" ({verdict.score_delta:+g})",
                content={
                    "insight_id": observation.insight_id,
                    "success": observation.success,
                    "score_delta": observation.score_delta,
                    "evolution_id": observation.evolution_id,
                },
                tags=[tag, "insight", f"pattern:{observation.pattern_type}"],
            )


def _fans_out(spans: list[SpanRecord]) -> bool:
    return sum(s.span_type == "llm_call" for s in spans) > rlm_credit.RLM_SPAN_THRESHOLD


def _retryable(error: BaseException) -> bool:
    return isinstance(error, ApplicationError) and not error.non_retryable


async def _typed(call: Awaitable[T]) -> T:
    """Run a backend step; its failures become typed Temporal errors (retryable or not)."""
    try:
        return await call
    except TrainerOutputError as exc:
        raise ApplicationError(str(exc), type="TrainerOutputError", non_retryable=True) from None
    except ModelError as exc:
        raise ApplicationError(
            str(exc), type="ModelError", non_retryable=not exc.retryable
        ) from None
