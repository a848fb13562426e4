"""Judge an evolution's hypothesis once the next cycle is scored."""

from __future__ import annotations

from domain.trainer import EvolutionOutcome, ExpectedImpact, ScoreAnalysis


def judge(
    trigger_score: float, expected: list[ExpectedImpact], next_analysis: ScoreAnalysis
) -> EvolutionOutcome:
    delta = next_analysis.score - trigger_score
    targeted = {e.aspect for e in expected if e.direction == "improve"}
    still_bad = sorted(
        a.aspect
        for a in next_analysis.aspects
        if a.sentiment == "negative" and a.aspect in targeted
    )
    validated = delta > 0 and not still_bad
    if still_bad:
        reason = f"the reviewer still objects to {', '.join(still_bad)}"
    elif delta > 0:
        reason = f"score rose by {delta:g} and no targeted aspect was criticised again"
    else:
        reason = f"score changed by {delta:g}; the change did not help"
    return EvolutionOutcome(
        next_score=next_analysis.score,
        score_delta=delta,
        hypothesis_validated=validated,
        reason=reason,
    )
