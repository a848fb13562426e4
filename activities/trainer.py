"""Master Trainer steps as separate activities, so each is retried, timed and visible in the
workflow history on its own."""

from __future__ import annotations

from temporalio import activity

from domain.agent import AgentRef
from domain.lineage import (
    ApplyEvolutionInput,
    ApplyEvolutionResult,
    CreditInput,
    PlanInput,
    TrainerInput,
)
from domain.trainer import (
    CreditAssignment,
    Directives,
    EvolutionChange,
    EvolutionPlan,
    EvolutionTrigger,
    ScoreAnalysis,
)
from store import Store
from trainer import credit_assignment, evolution, evolution_planner, reward_analyzer


class TrainerActivities:
    def __init__(self, store: Store) -> None:
        self.store = store

    @activity.defn(name="analyze_reward")
    def analyze_reward(self, inp: TrainerInput) -> ScoreAnalysis:
        previous = [p.score for p in inp.score_history if p.evaluation_id != inp.evaluation_id]
        return reward_analyzer.analyze(inp.score.score, inp.score.comment, previous)

    @activity.defn(name="assign_credit")
    def assign_credit(self, inp: CreditInput) -> CreditAssignment:
        agent = self.store.queries.agent_definition(inp.trainer.agent)
        artifact = self.store.queries.artifact(inp.trainer.artifact_id)
        llm_spans = [
            s.id for s in self.store.queries.spans(artifact.attempt_id) if s.type == "llm_call"
        ]
        return credit_assignment.assign(agent, inp.analysis, llm_spans)

    @activity.defn(name="plan_evolution")
    def plan_evolution(self, inp: PlanInput) -> EvolutionPlan:
        agent = self.store.queries.agent_definition(inp.trainer.agent)
        return evolution_planner.plan(
            agent,
            inp.analysis,
            inp.credit,
            inp.trainer.sticky_directives,
            inp.trainer.oneshot_directives,
        )

    @activity.defn(name="apply_evolution")
    def apply_evolution(self, inp: ApplyEvolutionInput) -> ApplyEvolutionResult:
        t = inp.trainer
        if not inp.plan.changes:
            reason = "; ".join(inp.plan.notes) or "the plan held no change"
            return ApplyEvolutionResult(
                evolution_id=None,
                agent=t.agent,
                changes=0,
                summary=f"kept v{t.agent.version}: {reason}",
            )
        agent = self.store.queries.agent_definition(t.agent)
        evolved = evolution.apply_changes(agent, inp.plan.changes)
        artifact = self.store.queries.artifact(t.artifact_id)
        evolution_id = f"{t.lineage_id}:evolution:v{t.agent.version}"
        ref: AgentRef = self.store.recorder.record_evolution(
            session_id=t.session_id,
            lineage_id=t.lineage_id,
            evolution_id=evolution_id,
            from_version=t.agent.version,
            new_agent=evolved,
            trigger=EvolutionTrigger(
                rollout_id=t.rollout_id,
                attempt_id=artifact.attempt_id,
                artifact_id=t.artifact_id,
                evaluation_id=t.evaluation_id,
                score=t.score.score,
                comment=t.score.comment,
                directives=Directives(sticky=t.sticky_directives, oneshot=t.oneshot_directives),
            ),
            analysis=inp.analysis,
            credit=inp.credit,
            plan=inp.plan,
            changes=inp.plan.changes,
        )
        described = ", ".join(_describe(c) for c in inp.plan.changes)
        return ApplyEvolutionResult(
            evolution_id=evolution_id,
            agent=ref,
            changes=len(inp.plan.changes),
            summary=f"v{t.agent.version}→v{ref.version}: {described}",
        )


def _describe(change: EvolutionChange) -> str:
    if change.component == "parameters":
        return f"{change.target} {change.before}→{change.after}"
    text = change.after if change.change_type != "remove" else change.before
    return f"{change.change_type} {text!r}"
