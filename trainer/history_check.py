"""History check: before a change is applied, look at similar past changes in the session (any
lineage) and the insights learned from them.

History chooses *how* a wish is carried out, never *whether*: a change that carries what the
reviewer asks for now is applied whatever happened before (a poor record only lowers its
confidence and is noted). Only a change the trainer inferred on its own (a removal, a parameter
moved along) is skipped, and only on this lineage's own evidence: another lineage's outcome is
a weaker prior, so the result does not depend on which lineage trained first."""

from __future__ import annotations

from domain.trainer import EvolutionPlan, HistoryCheck, LearningInsight, PastChange
from trainer.change_patterns import pattern, similar


def check(
    plan: EvolutionPlan,
    past: list[PastChange],
    insights: dict[str, LearningInsight],
    requested: set[str] | None = None,
    lineage_id: str | None = None,
) -> EvolutionPlan:
    """``requested``: the change families the reviewer asks for in this feedback;
    ``lineage_id``: the lineage being trained (its own past outweighs the others')."""
    requested = requested or set()
    kept = []
    for change in plan.changes:
        matches = [p for p in past if similar(p.change, change)]
        own_worse = [p for p in matches if p.outcome == "worsened" and p.lineage_id == lineage_id]
        worse = [p for p in matches if p.outcome == "worsened"]
        better = [p for p in matches if p.outcome == "improved"]
        insight = insights.get(pattern(change)[0])
        recommendation, reason = "apply", "no similar change has been tried in this session"
        if (
            insight
            and insight.failure_count > insight.success_count
            and insight.avg_score_impact < 0
        ):
            recommendation = "skip"
            reason = (
                f"learned: {insight.pattern!r} failed {insight.failure_count} of "
                f"{insight.failure_count + insight.success_count} times "
                f"(average score impact {insight.avg_score_impact:+g})"
            )
            if worse:
                p = worse[-1]
                reason += f"; last in lineage {p.lineage_id} ({p.evolution_id}): {p.score_delta:+g}"
        elif worse and not better:
            p = worse[-1]
            recommendation = "skip"
            reason = (
                f"a similar change in lineage {p.lineage_id} ({p.evolution_id}) was followed by "
                f"a score change of {p.score_delta:+g}"
            )
        elif worse and better:
            recommendation = "modify"
            change.confidence = round(change.confidence * len(better) / len(matches), 2)
            reason = (
                f"mixed history: improved {len(better)} time(s), worsened {len(worse)} time(s); "
                f"confidence lowered to {change.confidence}"
            )
        elif better:
            p = better[-1]
            reason = f"improved the score by {p.score_delta:+g} in lineage {p.lineage_id}"
        if recommendation == "skip" and change.want in requested:
            recommendation = "modify"
            change.confidence = round(change.confidence / 2, 2)
            reason += "; applied all the same: the reviewer asks for it now"
        elif recommendation == "skip" and not own_worse:
            recommendation = "modify"
            change.confidence = round(change.confidence / 2, 2)
            reason += "; applied with lower confidence: not this lineage's own experience"
        plan.history_checks.append(
            HistoryCheck(
                proposed_change=change.model_copy(),
                similar_past_changes=matches,
                insight_id=insight.id if insight else None,
                recommendation=recommendation,
                reason=reason,
            )
        )
        if recommendation == "skip":
            plan.notes.append(f"skipped {change.change_type} {change.target}: {reason}")
        else:
            kept.append(change)
    plan.changes = kept
    return plan
