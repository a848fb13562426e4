"""Master Trainer steps as separate activities, so each is retried, timed and visible in the
workflow history on its own. The backend (rules or Claude) is the lineage's explicit choice."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from domain.agent import AgentDefinition, AgentRef
from domain.execution import SpanRecord
from domain.feedback import ScoreInput
from domain.lineage import (
    ApplyEvolutionInput,
    ApplyEvolutionResult,
    CreditInput,
    JudgeEvolutionInput,
    PlanInput,
    RollbackInput,
    TrainerInput,
)
from domain.trainer import (
    CreditAssignment,
    Directives,
    EvolutionChange,
    EvolutionPlan,
    EvolutionTrigger,
    ExpectedImpact,
    JudgedEvolution,
    ScoreAnalysis,
)
from runner.model_backend import ModelError
from store import Store
from store.findings import DatabaseFindingsStore
from store.tables import ArtifactRow
from trainer import evolution, evolution_planner, outcome, rlm_credit
from trainer.backends import TrainerBackend, TrainerBackends, TrainerConfigError
from trainer.change_family import pattern
from trainer.claude_trainer import TrainerOutputError

T = TypeVar("T")


class TrainerActivities:
    def __init__(self, store: Store, backends: TrainerBackends) -> None:
        self.store = store
        self.backends = backends

    @activity.defn(name="judge_evolution")
    def judge_evolution(self, inp: JudgeEvolutionInput) -> JudgedEvolution | None:
        """Validation: the verdict on the pending evolution from the score of its output."""
        return judge_pending(self.store, inp.session_id, inp.evolution_id, inp.score)

    def _backend(self, t: TrainerInput) -> TrainerBackend:
        try:
            return self.backends.get(t.trainer, t.trainer_model)
        except TrainerConfigError as exc:
            raise ApplicationError(
                str(exc), type="TrainerConfigError", non_retryable=True
            ) from None

    @activity.defn(name="analyze_reward")
    async def analyze_reward(self, inp: TrainerInput) -> ScoreAnalysis:
        previous = [] if inp.previous_score is None else [inp.previous_score]
        return await _typed(
            self._backend(inp).analyze(inp.score.score, inp.score.comment, previous)
        )

    @activity.defn(name="assign_credit")
    async def assign_credit(self, inp: CreditInput) -> CreditAssignment:
        agent, artifact, spans = await asyncio.to_thread(self._credited, inp.trainer)
        backend = self._backend(inp.trainer)
        if _fans_out(spans):
            return await _typed(
                self._trajectory_credit(backend, agent, inp.analysis, artifact, spans)
            )
        return await _typed(backend.assign_credit(agent, inp.analysis, spans))

    def _credited(self, t: TrainerInput) -> tuple[AgentDefinition, ArtifactRow, list[SpanRecord]]:
        """What credit is assigned over: the agent, the output and its attempt's spans."""
        q = self.store.queries
        artifact = q.artifact(t.artifact_id)
        return q.agent_definition(t.agent), artifact, q.span_records(artifact.attempt_id)

    def _trajectory_credit(
        self,
        backend: TrainerBackend,
        agent: AgentDefinition,
        analysis: ScoreAnalysis,
        artifact: ArtifactRow,
        spans: list[SpanRecord],
    ) -> Awaitable[CreditAssignment]:
        """A long trajectory's credit, fanned out over its model calls (RLM-style)."""
        findings = DatabaseFindingsStore(
            self.store.engine, f"credit:{artifact.attempt_id}", self.store.read_engine
        )
        return rlm_credit.trajectory_credit(backend, agent, analysis, spans, findings)

    @activity.defn(name="plan_evolution")
    async def plan_evolution(self, inp: PlanInput) -> EvolutionPlan:
        t, q = inp.trainer, self.store.queries
        agent = await asyncio.to_thread(q.agent_definition, t.agent)
        proposal = await _typed(
            self._backend(t).propose(
                agent, inp.analysis, inp.credit, t.sticky_directives + t.oneshot_directives
            )
        )
        past, insights = await asyncio.to_thread(
            lambda: (q.past_changes(t.session_id), q.insights(t.session_id))
        )
        return evolution_planner.finalize(
            agent, proposal, t.sticky_directives, t.oneshot_directives, past, insights
        )

    @activity.defn(name="apply_evolution")
    def apply_evolution(self, inp: ApplyEvolutionInput) -> ApplyEvolutionResult:
        return self._apply(inp, self.store.queries.artifact(inp.trainer.artifact_id))

    def _apply(self, inp: ApplyEvolutionInput, artifact: ArtifactRow) -> ApplyEvolutionResult:
        t, q = inp.trainer, self.store.queries
        trigger = EvolutionTrigger(
            rollout_id=t.rollout_id,
            attempt_id=artifact.attempt_id,
            artifact_id=t.artifact_id,
            evaluation_id=t.evaluation_id,
            score=t.score.score,
            comment=t.score.comment,
            directives=Directives(sticky=t.sticky_directives, oneshot=t.oneshot_directives),
        )
        if not inp.plan.changes:
            self.store.recorder.record_kept(
                session_id=t.session_id,
                lineage_id=t.lineage_id,
                version=t.agent.version,
                trigger=trigger,
                analysis=inp.analysis,
                plan=inp.plan,
            )
            reason = "; ".join(inp.plan.notes) or "the plan held no change"
            return ApplyEvolutionResult(
                evolution_id=None,
                agent=t.agent,
                changes=0,
                summary=f"kept v{t.agent.version}: {reason}",
            )
        agent = q.agent_definition(t.agent)
        evolved = evolution.apply_changes(agent, inp.plan.changes)
        evolution_id = f"{t.lineage_id}:evolution:v{t.agent.version}"
        insights = q.insights(t.session_id)
        applied = [
            (insights[pattern(c)[0]].id, c) for c in inp.plan.changes if pattern(c)[0] in insights
        ]
        ref: AgentRef = self.store.recorder.record_evolution(
            session_id=t.session_id,
            lineage_id=t.lineage_id,
            evolution_id=evolution_id,
            from_version=t.agent.version,
            new_agent=evolved,
            trigger=trigger,
            analysis=inp.analysis,
            credit=inp.credit,
            plan=inp.plan,
            changes=inp.plan.changes,
            applied_insights=applied,
        )
        described = ", ".join(_describe(c) for c in inp.plan.changes)
        return ApplyEvolutionResult(
            evolution_id=evolution_id,
            agent=ref,
            changes=len(inp.plan.changes),
            summary=f"v{t.agent.version}→v{ref.version}: {described}",
        )

    @activity.defn(name="train")
    def train(self, t: TrainerInput) -> ApplyEvolutionResult:
        """Reward analysis → credit assignment → evolution planning → evolution, as one step
        of the rules engine: milliseconds of deterministic work over the store, so one thread
        and one workflow activation instead of four. The result names the changes (the
        evolution record holds the analysis, credit and plan). A model-backed trainer runs the
        four steps one by one."""
        if t.trainer != "rules":
            raise ApplicationError(
                f"train runs the rules engine, not {t.trainer!r}",
                type="TrainerConfigError",
                non_retryable=True,
            )
        rules, q = self.backends.rules, self.store.queries
        previous = [] if t.previous_score is None else [t.previous_score]
        analysis = rules.analyze_now(t.score.score, t.score.comment, previous)
        agent, artifact, spans = self._credited(t)
        if _fans_out(spans):  # rare: the fan-out awaits its parts, on a loop of its own
            credit = asyncio.run(
                _typed(self._trajectory_credit(rules, agent, analysis, artifact, spans))
            )
        else:
            credit = rules.assign_credit_now(agent, analysis, spans)
        plan = evolution_planner.finalize(
            agent,
            rules.propose_now(agent, analysis, credit),
            t.sticky_directives,
            t.oneshot_directives,
            q.past_changes(t.session_id),
            q.insights(t.session_id),
        )
        return self._apply(
            ApplyEvolutionInput(trainer=t, analysis=analysis, credit=credit, plan=plan), artifact
        )

    @activity.defn(name="rollback_evolution")
    def rollback_evolution(self, inp: RollbackInput) -> ApplyEvolutionResult:
        """Restore the version a refuted evolution started from, as a new version."""
        q = self.store.queries
        record = q.evolution_record(inp.evolution_id)
        if record is None:
            raise ApplicationError(f"no evolution {inp.evolution_id}", non_retryable=True)
        made = [EvolutionChange.model_validate(c) for c in json.loads(record.changes)]
        undone = [c for c in made if c.aspect in inp.aspects] if inp.aspects else made
        if inp.aspects and undone and len(undone) < len(made):
            # only the refuted aspects' changes are undone; the rest of the evolution stays
            inverse = [_inverse(c) for c in reversed(undone)]
            try:
                restored = evolution.apply_changes(q.agent_definition(inp.agent), inverse)
            except (evolution.EvolutionError, ValueError) as exc:
                raise ApplicationError(
                    f"cannot undo the {', '.join(inp.aspects)} changes of {inp.evolution_id}: "
                    f"{exc}",
                    type="RollbackError",
                    non_retryable=True,
                ) from None
            hypothesis = (
                f"Undoing the {', '.join(inp.aspects)} changes of {inp.evolution_id}, which the "
                f"score of {inp.score.score:g} refuted, recovers {', '.join(inp.aspects)}."
            )
        else:
            restored = q.agent_definition(
                AgentRef(agent_id=inp.lineage_id, version=record.from_version)
            )
            inverse = [_inverse(c) for c in made]
            hypothesis = (
                f"Restoring v{record.from_version} recovers from the drop to "
                f"{inp.score.score:g} that refuted {inp.evolution_id}."
            )
        plan = EvolutionPlan(changes=inverse, hypothesis=hypothesis)
        evolution_id = f"{inp.lineage_id}:rollback:v{inp.agent.version}"
        artifact = q.artifact(inp.artifact_id)
        ref = self.store.recorder.record_evolution(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            evolution_id=evolution_id,
            from_version=inp.agent.version,
            new_agent=restored,
            trigger=EvolutionTrigger(
                rollout_id=inp.rollout_id,
                attempt_id=artifact.attempt_id,
                artifact_id=inp.artifact_id,
                evaluation_id=inp.evaluation_id,
                score=inp.score.score,
                comment=inp.score.comment,
            ),
            analysis=ScoreAnalysis(
                score=inp.score.score,
                comment=inp.score.comment,
                sentiment="negative",
                trend="declining",
            ),
            credit=CreditAssignment(mode="prompt"),
            plan=plan,
            changes=inverse,
            kind="rollback",
        )
        what = (
            f"undid the {', '.join(inp.aspects)} changes of {inp.evolution_id} (refuted)"
            if len(inverse) < len(made)
            else f"rolled back to v{record.from_version} ({inp.evolution_id} was refuted)"
        )
        return ApplyEvolutionResult(
            evolution_id=evolution_id,
            agent=ref,
            changes=len(inverse),
            summary=f"v{inp.agent.version}→v{ref.version}: {what}",
        )


def _fans_out(spans: list[SpanRecord]) -> bool:
    return sum(s.span_type == "llm_call" for s in spans) > rlm_credit.RLM_SPAN_THRESHOLD


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


def _describe(change: EvolutionChange) -> str:
    if change.component == "parameters":
        return f"{change.target} {change.before}→{change.after}"
    text = change.after if change.change_type != "remove" else change.before
    if change.component in ("tools", "flow"):
        return f"{change.change_type} {change.component} {change.target} {text!r}"
    return f"{change.change_type} {change.component} {text!r}"


def _inverse(change: EvolutionChange) -> EvolutionChange:
    flipped = {"add": "remove", "remove": "add", "modify": "modify"}[change.change_type]
    return change.model_copy(
        update={
            "change_type": flipped,
            "before": change.after,
            "after": change.before,
            "reason": f"rollback: {change.reason}",
        }
    )


def judge_pending(
    store: Store, session_id: str, evolution_id: str, score: ScoreInput
) -> JudgedEvolution | None:
    """The verdict on an evolution awaiting its outcome (None when its record is gone)."""
    record = store.queries.evolution_record(evolution_id)
    if record is None:
        return None
    plan = json.loads(record.plan)
    return outcome.judge_evolution(
        session_id=session_id,
        evolution_id=evolution_id,
        trigger_score=record.trigger_score,
        trigger_aspects=json.loads(record.score_analysis)["aspects"],
        expected=[ExpectedImpact.model_validate(e) for e in plan["expected_impact"]],
        changes=[EvolutionChange.model_validate(c) for c in json.loads(record.changes)],
        score=score.score,
        comment=score.comment,
    )
