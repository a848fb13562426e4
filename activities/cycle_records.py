"""Recording a cycle step: the score, the verdict on the change it judged, and the version the
trainer made (or why it kept the one it had); and a correction of the step's reading, with the
version the corrected reading makes. Recording only: ``take_cycle_step`` decided what."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import activity

from activities.error_classification import failure_reason, is_transient
from domain.agent import AgentDefinition, AgentRef
from domain.checks import MAX_ACTIVE_WISHES
from domain.corrections import Correction
from domain.cycle_decision import CycleDecision, CycleStep
from domain.feedback import escaped
from domain.lineage import CycleStepInput, CycleStepResult, QueuedCorrection
from domain.trainer import Directives, EvolutionTrigger
from store import Store
from store.records.lineage_records import Standing


class RecordCycleStepInput(BaseModel):
    step: CycleStepInput
    decision: CycleDecision


class RecordCorrectionInput(BaseModel):
    step: CycleStepInput  # the corrected score's step, its wants the ones the rater meant
    decision: CycleDecision  # the trainer's step taken again on them
    correction: QueuedCorrection
    read_as: list[str]  # the reading it supersedes, as wants
    current: AgentRef  # the version the lineage runs now, made by the superseded reading
    # several raters: the correcting rater's own comment (the step's is all of theirs)
    comment: str | None = None


class CycleRecordActivities:
    def __init__(self, store: Store) -> None:
        self.store = store

    @activity.defn(name="record_cycle_step")
    def record_cycle_step(self, inp: RecordCycleStepInput) -> CycleStepResult:
        """The score first (a step that failed or kept the version records it all the same),
        then the new version or the record of why there is none. Each write is idempotent:
        its id is the score's and the version's."""
        step, decision = inp.step, inp.decision
        judged = decision.judged
        self.store.recorder.record_score(
            session_id=step.session_id,
            lineage_id=step.lineage_id,
            evaluation_id=step.evaluation_id,
            artifact_id=step.artifact_id,
            rollout_id=step.rollout_id,
            cycle=step.cycle,
            agent_version=step.agent.version,
            score=step.score.score,
            comment=step.score.comment,
            rater=step.score.rater,
            outcome=(judged.evolution_id, judged.verdict) if judged else None,
            insights=judged.insights if judged else [],
            wants=step.score.wants,
            confirmed=step.score.changes,
            agreement=decision.agreement,
        )
        kept = _unchanged(step, decision, step.agent).model_copy(
            update={"verdict": judged.verdict if judged else None}
        )
        taken = decision.step
        if taken is None or decision.attempt_id is None:
            return kept  # locked, or the training failed: the version stays
        trigger = self._trigger(step, decision.attempt_id)
        try:
            return self._record_version(step, decision, trigger, kept)
        except Exception as error:
            if is_transient(error):
                raise  # retried until the store is back; the score is not written twice
            # refused for good: the score stands, the lineage keeps its version and says why
            return kept.model_copy(update={"training_error": failure_reason(error)})

    def _trigger(self, step: CycleStepInput, attempt_id: str) -> EvolutionTrigger:
        """What set off a version: the scored output, the score, and the directives the step
        applied (read where the trainer read them)."""
        sticky, oneshot = self.store.queries.step_directives(
            step.lineage_id, step.directives_through, step.oneshot_after
        )
        return EvolutionTrigger(
            rollout_id=step.rollout_id,
            attempt_id=attempt_id,
            artifact_id=step.artifact_id,
            evaluation_id=step.evaluation_id,
            score=step.score.score,
            comment=step.score.comment,
            directives=Directives(sticky=sticky, oneshot=oneshot),
        )

    def _record_version(
        self,
        step: CycleStepInput,
        decision: CycleDecision,
        trigger: EvolutionTrigger,
        kept: CycleStepResult,
    ) -> CycleStepResult:
        """The new version, or the record of why the lineage keeps the one it has."""
        taken = decision.step
        assert taken is not None
        kept = kept.model_copy(
            update={"asked_for": taken.asked_for, "wishes": taken.wishes, "report": taken.report}
        )
        if not taken.changed:
            self.store.recorder.record_kept(
                session_id=step.session_id,
                lineage_id=step.lineage_id,
                version=step.agent.version,
                trigger=trigger,
                analysis=taken.analysis,
                plan=taken.plan,
                standing=_standing(taken),
            )
            return kept
        evolution_id = f"{step.lineage_id}:evolution:v{step.agent.version}"
        agent = self.store.recorder.record_evolution(
            session_id=step.session_id,
            lineage_id=step.lineage_id,
            evolution_id=evolution_id,
            from_version=step.agent.version,
            new_agent=taken.agent,
            trigger=trigger,
            analysis=taken.analysis,
            credit=taken.credit,
            plan=taken.plan,
            changes=taken.plan.changes,
            kind="rollback" if taken.rolled_back and not taken.new_changes else "evolution",
            applied_insights=decision.applied_insights,
            standing=_standing(taken),
        )
        return kept.model_copy(
            update={"agent": agent, "evolution_id": evolution_id if taken.to_judge else None}
        )

    @activity.defn(name="record_correction")
    def record_correction(self, inp: RecordCorrectionInput) -> CycleStepResult:
        """The correction — a labelled example the reader learns from — and, when the corrected
        step makes another agent than the one the lineage runs, that agent as the next version
        (kind "correction", from the current one: versions stay one line). The score and the
        verdict it gave stand as recorded. Idempotent: the ids are the correction's and the
        version's."""
        step, decision, correction = inp.step, inp.decision, inp.correction
        self.store.recorder.record_correction(
            Correction(
                correction_id=correction.correction_id,
                session_id=step.session_id,
                lineage_id=step.lineage_id,
                evaluation_id=correction.evaluation_id,
                comment=(inp.comment if inp.comment is not None else step.score.comment) or "",
                read_as=inp.read_as,
                corrected=correction.wants,
                rater=correction.rater,
                cycle=step.cycle,
            )
        )
        judged = decision.judged
        if judged is not None:  # the verdict, as the corrected reading gives it
            self.store.recorder.record_judgement(
                session_id=step.session_id,
                lineage_id=step.lineage_id,
                key=f"{judged.evolution_id}:{correction.correction_id}",
                evolution_id=judged.evolution_id,
                outcome=judged.verdict,
            )
        result = _unchanged(step, decision, inp.current).model_copy(
            update={
                # the name is plain text by the door's rule; said back as data all the same
                "reading": f"{decision.reading}; corrected by {escaped(correction.rater)}",
                "verdict": judged.verdict if judged else None,
            }
        )
        taken = decision.step
        if taken is None or decision.attempt_id is None:
            return result  # locked, or the training failed: the version stays
        result = result.model_copy(
            update={"asked_for": taken.asked_for, "wishes": taken.wishes, "report": taken.report}
        )
        current = self.store.queries.agent_definition(inp.current)
        if _same_agent(taken.agent, current):
            # the version stays; the wishes standing on it are the corrected reading's
            self.store.recorder.record_standing(
                session_id=step.session_id,
                lineage_id=step.lineage_id,
                version=inp.current.version,
                key=f"{correction.correction_id}:wishes",
                standing=_standing(taken),
            )
            summary = (
                f"corrected: nothing changes: the corrected reading makes "
                f"v{inp.current.version} again"
            )
            return result.model_copy(update={"summary": summary})
        evolution_id = f"{step.lineage_id}:evolution:v{inp.current.version}"
        agent = self.store.recorder.record_evolution(
            session_id=step.session_id,
            lineage_id=step.lineage_id,
            evolution_id=evolution_id,
            from_version=inp.current.version,
            new_agent=taken.agent.model_copy(update={"version": inp.current.version + 1}),
            trigger=self._trigger(step, decision.attempt_id),
            analysis=taken.analysis,
            credit=taken.credit,
            plan=taken.plan,
            changes=taken.plan.changes,
            kind="correction",
            applied_insights=decision.applied_insights,
            standing=_standing(taken),
        )
        return result.model_copy(
            update={"agent": agent, "evolution_id": evolution_id if taken.to_judge else None}
        )


def _standing(taken: CycleStep) -> Standing:
    """The wishes a step leaves standing, as the lineage carries them (the latest few)."""
    return Standing(wishes=taken.wishes[-MAX_ACTIVE_WISHES:], asked_for=taken.asked_for)


def _unchanged(step: CycleStepInput, decision: CycleDecision, agent: AgentRef) -> CycleStepResult:
    """What a step did when it leaves ``agent`` the version the lineage runs."""
    return CycleStepResult(
        agent=agent,
        asked_for=step.asked_for,
        wishes=step.wishes,
        summary=decision.summary,
        reading=decision.reading,
        wants=decision.wants,
        training_error=decision.training_error,
    )


def _same_agent(a: AgentDefinition, b: AgentDefinition) -> bool:
    return a.model_dump(exclude={"version"}) == b.model_dump(exclude={"version"})
