"""The cycle step as an activity: a thin adapter that reads what the step needs from the store
by id and calls ``trainer.cycle_step.take`` (the same function the evaluation command calls).
What it decides crosses back to the workflow, which has ``record_cycle_step`` record it.

With the rules engine it runs as a local activity (milliseconds of deterministic work); with
Claude as an activity on the task queue (model calls), which any worker may take.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.error_classification import failure_reason, is_transient
from domain import panel, wants
from domain.agent import AgentDefinition, AgentRef
from domain.checks import CheckResult
from domain.corrections import LabelledExample
from domain.cycle_decision import CycleDecision, CycleStep
from domain.events import RatersAgreed
from domain.execution import CUT_OFF, SpanRecord
from domain.lineage import CycleStepInput
from domain.panel import Agreement
from domain.trace import TracedCall
from domain.trainer import (
    CreditAssignment,
    EvolutionChange,
    JudgedEvolution,
    LearningInsight,
    PastChange,
    ScoreAnalysis,
)
from runner.model_backend import ModelError
from store import Store
from store.rlm_findings.findings import DatabaseFindingsStore
from store.tables import ArtifactRow
from store.views.queries import StoreQueries
from trainer import cycle_step, outcome, rlm_credit
from trainer.backends import TrainerBackend, TrainerBackends, TrainerConfigError
from trainer.claude_trainer import TrainerOutputError
from trainer.cycle_step import LineageMemory
from trainer.outcome import PendingEvolution

T = TypeVar("T")
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
    sticky_directives: list[str]
    oneshot_directives: list[str]
    cut_off: bool = False  # the scored output stopped at the token limit
    corrections: list[LabelledExample] = field(default_factory=list)  # the reader's examples
    checks: list[CheckResult] = field(default_factory=list)  # of the scored output
    own_checks: list[CheckResult] = field(default_factory=list)  # of the agent's own try
    # the calls of the run that made it, as its trace numbers them ("the fourth call")
    calls: list[TracedCall] = field(default_factory=list)
    # each rater's score on the output the pending change was made from: their verdict
    # judges their own rise or fall, not the median's
    trigger_scores: dict[str, float] = field(default_factory=dict)


class TrainerActivities:
    def __init__(
        self, store: Store, backends: TrainerBackends, shared_corrections: bool = False
    ) -> None:
        self.store = store
        self.backends = backends
        # corrections of every session teach the reader, not only the step's own session's
        self.shared_corrections = shared_corrections

    @activity.defn(name="take_cycle_step")
    async def take_cycle_step(self, inp: CycleStepInput) -> CycleDecision:
        """The trainer on one score, over what the store holds of the scored output: judge the
        last change, roll back what the comment refuted, train on the comment. Writes
        nothing; ``record_cycle_step`` records what it decided."""
        context: StepContext | None = None
        agreement: Agreement | None = None
        judged: JudgedEvolution | None = None
        try:
            context = await asyncio.to_thread(self._context, inp)
            inp, agreement, judged = self.agreed(inp, context)
            if not inp.train:  # locked: the score judges, nothing evolves
                memory = self._memory(inp, context, judged)
                return CycleDecision(
                    judged=cycle_step.judge(memory, inp.score.score, inp.score.comment),
                    attempt_id=context.artifact.attempt_id,
                    summary=f"kept v{inp.agent.version}: the lineage is locked",
                    agreement=agreement,
                )
            memory = self._memory(inp, context, judged, several=agreement is not None)
            step = await self._take(inp, context, memory)
        except Exception as error:
            if is_transient(error):
                raise  # the store: retried until it is back
            if _retryable(error) and activity.info().attempt < MODEL_ATTEMPTS:
                raise  # a model call that may succeed next time
            failed = self._failed(inp, context, error, judged)
            return failed.model_copy(update={"agreement": agreement})
        return CycleDecision(
            judged=step.judged,
            step=step,
            attempt_id=context.artifact.attempt_id,
            applied_insights=cycle_step.applied_insights(step, context.insights),
            summary=self._summary(step, inp, agreement),
            # several raters: what was asked and not agreed on is said with what was
            reading=cycle_step.said_back(step, agreement.not_agreed() if agreement else ()),
            wants=wants.wants_of(step.analysis.aspects),
            agreement=agreement,
        )

    @staticmethod
    def _summary(step: CycleStep, inp: CycleStepInput, agreement: Agreement | None) -> str:
        line = (
            cycle_step.summary(step, inp.agent.version)
            if inp.corrects is None
            else cycle_step.corrected_summary(step, inp.agent.version, inp.corrects)
        )
        if agreement is not None and agreement.not_agreed():
            return cycle_step.raters_kept(line)  # wishes there were, none agreed on
        return line

    async def planned(self, inp: CycleStepInput, context: StepContext | None = None) -> CycleStep:
        """The step ``inp`` starts, over what the store holds (``context``, read if not given):
        the verdict, the changes and the notes; nothing is written. The step takes it, and the
        preview of a reading shows its changes (``activities/reading_preview.py``): one
        function, so what is shown is what is made. A score sent with the keys of the changes
        it confirms (``score.changes``) binds the step to those (``cycle_step.bound``)."""
        if context is None:
            context = await asyncio.to_thread(self._context, inp)
        inp, agreement, judged = self.agreed(inp, context)
        memory = self._memory(inp, context, judged, several=agreement is not None)
        return await self._take(inp, context, memory)

    def agreed(
        self, inp: CycleStepInput, context: StepContext
    ) -> tuple[CycleStepInput, Agreement | None, JudgedEvolution | None]:
        """A step on several raters' scores as the one step it is planned as: its score the
        median, its wants what a majority of them asked for and none opposed (each rater's
        confirmed reading, or their comment read by the rules), no plan bound (each rater
        confirmed their own); and the verdict on the pending change, each rater's from their
        own score and reading, refuted only by a majority of those who judged it. Unchanged
        for one rater."""
        if not inp.panel:
            return inp, None, None
        readings = []
        judged_by: list[tuple[str, JudgedEvolution]] = []
        for said in panel.latest(inp.panel):
            alone = inp.score.model_copy(
                update={"score": said.score, "comment": said.comment, "wants": said.wants}
            )
            memory = self._memory(inp.model_copy(update={"score": alone}), context)
            read_as = said.wants
            if read_as is None:
                reading = cycle_step.rules_reading(memory, said.score, said.comment, context.spans)
                read_as = wants.wants_of(reading.aspects)
            readings.append(panel.RaterReading(rater=said.rater, score=said.score, wants=read_as))
            if memory.pending is not None and said.rater.casefold() in context.trigger_scores:
                own = {"trigger_score": context.trigger_scores[said.rater.casefold()]}
                memory = memory.model_copy(
                    update={"pending": memory.pending.model_copy(update=own)}
                )
            verdict = cycle_step.rater_verdict(memory, said.score, said.comment, context.spans)
            if verdict is not None:
                judged_by.append((said.rater, verdict))
        agreement = panel.agree(readings)
        judged = None
        if context.pending is not None and judged_by:
            judged = outcome.by_majority(
                context.pending, judged_by, agreement.score, inp.session_id
            )
            agreement.verdicts = [
                panel.RaterVerdict(
                    rater=rater, family=v.family or v.aspect, verdict=v.verdict, reason=v.reason
                )
                for rater, each in judged_by
                for v in each.verdict.aspects
            ]
        # the changes any rater confirmed bind the step: one every rater who saw it struck
        # (or none saw) is not made
        sent = [said.changes for said in panel.latest(inp.panel) if said.changes is not None]
        confirmed = sorted({key for keys in sent for key in keys}) if sent else None
        score = inp.score.model_copy(
            update={"score": agreement.score, "wants": agreement.agreed, "changes": confirmed}
        )
        return inp.model_copy(update={"score": score, "panel": None}), agreement, judged

    def _memory(
        self,
        inp: CycleStepInput,
        context: StepContext,
        judged: JudgedEvolution | None = None,
        several: bool = False,  # the score is several raters' agreement (``agreed``)
    ) -> LineageMemory:
        return LineageMemory(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            pending=context.pending,
            asked_for=inp.asked_for,
            wishes=inp.wishes,
            cycle=inp.cycle,
            checks=context.checks,
            own_checks=context.own_checks,
            previous_score=inp.previous_score,
            sticky_directives=context.sticky_directives,
            oneshot_directives=context.oneshot_directives,
            rollback_refuted=inp.rollback_refuted,
            output_cut_off=context.cut_off,
            wants=inp.score.wants,
            confirmed=inp.score.changes,
            confirmed_by_several=several,
            corrections=context.corrections,
            raters_judged=judged,
            calls=context.calls,
        )

    def _failed(
        self,
        inp: CycleStepInput,
        context: StepContext | None,
        error: BaseException,
        judged: JudgedEvolution | None = None,
    ) -> CycleDecision:
        """A step that failed for good: the decision carries the reason, and the verdict if
        the pending evolution could be read; the score is recorded all the same and the
        lineage keeps its version."""
        judged = None
        if context is not None:
            judged = cycle_step.judge(
                self._memory(inp, context, judged), inp.score.score, inp.score.comment
            )
        return CycleDecision(
            judged=judged,
            attempt_id=context.artifact.attempt_id if context else None,
            training_error=failure_reason(error),
        )

    # ---- reading -------------------------------------------------------------------------

    def _context(self, inp: CycleStepInput) -> StepContext:
        q = self.store.queries
        artifact = q.artifact(inp.artifact_id)
        pending, trigger_scores = None, {}
        if inp.pending_evolution_id:
            record = q.evolution_record(inp.pending_evolution_id)
            if record is not None:
                pending = PendingEvolution.of(
                    record.id,
                    ScoreAnalysis.model_validate_json(record.score_analysis),
                    [EvolutionChange.model_validate(c) for c in json.loads(record.changes)],
                    record.from_version,
                )
                if inp.panel:
                    trigger_scores = _rater_scores(q, inp.lineage_id, record.evaluation_id)
        found = q.output_checks_of(inp.lineage_id, inp.artifact_id)
        sticky, oneshot = q.step_directives(
            inp.lineage_id, inp.directives_through, inp.oneshot_after
        )
        return StepContext(
            agent=q.agent_definition(inp.agent),
            artifact=artifact,
            spans=q.span_records(artifact.attempt_id),
            pending=pending,
            past=q.past_changes(inp.session_id),
            insights=q.insights(inp.session_id),
            cut_off=any(
                a.id == artifact.attempt_id and a.stop_reason == CUT_OFF
                for a in q.attempts(artifact.rollout_id)
            ),
            sticky_directives=sticky,
            oneshot_directives=oneshot,
            # the latest corrections only (labelled_examples is bounded)
            corrections=q.labelled_examples(None if self.shared_corrections else inp.session_id),
            checks=found.checks if found else [],
            trigger_scores=trigger_scores,
            own_checks=found.own if found else [],
            calls=q.run_calls(artifact.rollout_id),
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
                versions=lambda number: self._version(inp.lineage_id, number),
                standing=lambda number: self.store.queries.recorded_standing(
                    inp.lineage_id, number
                ),
            )
        )

    def _version(self, lineage_id: str, number: int) -> AgentDefinition | None:
        """Version ``number`` of the lineage's agent, or None when it has none (yet)."""
        try:
            return self.store.queries.agent_definition(
                AgentRef(agent_id=lineage_id, version=number)
            )
        except KeyError:
            return None

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


def _rater_scores(q: StoreQueries, lineage_id: str, evaluation_id: str) -> dict[str, float]:
    """Each rater's latest score on the output an evaluation settled (``raters.agreed``)."""
    agreed = [
        e for e in q.lineage_events(lineage_id, RatersAgreed) if e.evaluation_id == evaluation_id
    ]
    return {v.rater.casefold(): v.score for v in agreed[-1].voices} if agreed else {}
