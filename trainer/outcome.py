"""Judge an evolution's hypothesis once the next cycle is scored, aspect by aspect.

Each aspect the plan set out to improve is *validated* when the next comment no longer
criticises it and the score did not fall, *refuted* when the next comment asks for the contrary
of what the change did (it overshot: "too short now" after a change for brevity) or the score
fell while the comment still criticises it, and *untested* when the next feedback says nothing
either way. An aspect the plan meant to keep ("maintain") is refuted when the reviewer now
criticises it and the score fell: the change broke something that worked.
"""

from __future__ import annotations

from domain.trainer import (
    AspectVerdict,
    EvolutionChange,
    EvolutionOutcome,
    ExpectedImpact,
    InsightObservation,
    JudgedEvolution,
    ScoreAnalysis,
)
from trainer import reward_analyzer
from trainer.change_family import insight_id, pattern
from trainer.instructions import CONTRARY


def _families(changes: list[EvolutionChange], aspect: str) -> set[str]:
    """The change families the plan's changes for ``aspect`` pursued."""
    return {c.want for c in changes if c.aspect == aspect and c.want}


def judge(
    trigger_score: float,
    expected: list[ExpectedImpact],
    next_analysis: ScoreAnalysis,
    changes: list[EvolutionChange] | None = None,
) -> EvolutionOutcome:
    delta = next_analysis.score - trigger_score
    changes = changes or []
    criticised = {a.aspect: a for a in next_analysis.aspects if a.sentiment == "negative"}
    wanted_now = {a.want for a in next_analysis.aspects if a.sentiment == "negative" and a.want}
    praised = {a.aspect for a in next_analysis.aspects if a.sentiment == "positive"}
    verdicts: list[AspectVerdict] = []
    for impact in expected:
        aspect = impact.aspect
        complaint = criticised.get(aspect)
        if impact.direction == "improve":
            pursued = _families(changes, aspect)
            overshot = sorted(f for f in pursued if CONTRARY.get(f, set()) & wanted_now)
            if overshot:
                verdicts.append(
                    AspectVerdict(
                        aspect=aspect,
                        verdict="refuted",
                        reason=f"the change for {', '.join(overshot)} overshot: the reviewer now "
                        f"asks for the contrary ({complaint.quote if complaint else ''!r})",
                    )
                )
            elif complaint is not None and delta < 0:
                verdicts.append(
                    AspectVerdict(
                        aspect=aspect,
                        verdict="refuted",
                        reason=f"still criticised ({complaint.quote!r}) and the score fell by "
                        f"{-delta:g}",
                    )
                )
            elif complaint is not None:
                verdicts.append(
                    AspectVerdict(
                        aspect=aspect,
                        verdict="untested" if delta >= 0 else "refuted",
                        reason=f"the reviewer still objects ({complaint.quote!r}); not far enough",
                    )
                )
            elif delta >= 0 or aspect in praised:
                verdicts.append(
                    AspectVerdict(aspect=aspect, verdict="validated", reason="no longer criticised")
                )
            else:
                verdicts.append(
                    AspectVerdict(
                        aspect=aspect,
                        verdict="untested",
                        reason=f"not mentioned; the score fell by {-delta:g}",
                    )
                )
        elif complaint is not None and delta < 0:
            verdicts.append(
                AspectVerdict(
                    aspect=aspect,
                    verdict="refuted",
                    reason=f"was fine before the change, now criticised ({complaint.quote!r})",
                )
            )
    still_bad = sorted(
        v.aspect
        for v in verdicts
        if v.verdict != "validated"
        and any(e.aspect == v.aspect and e.direction == "improve" for e in expected)
        and v.aspect in criticised
    )
    refuted = [v for v in verdicts if v.verdict == "refuted"]
    validated = delta > 0 and not still_bad and not refuted
    if refuted:
        reason = "refuted by " + "; ".join(f"{v.aspect}: {v.reason}" for v in refuted)
    elif still_bad:
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
        aspects=verdicts,
    )


def judge_evolution(
    *,
    session_id: str,
    evolution_id: str,
    trigger_score: float,
    trigger_aspects: list[dict[str, str]],
    expected: list[ExpectedImpact],
    changes: list[EvolutionChange],
    score: float,
    comment: str | None,
) -> JudgedEvolution:
    """The verdict on an evolution from the next score and comment, and, per change, the
    evidence it adds to its family's insight. Mechanical whatever the trainer backend: the
    aspects the plan named, read from the new comment, and the score delta."""
    verdict = judge(
        trigger_score, expected, reward_analyzer.analyze(score, comment, [trigger_score]), changes
    )
    contexts = sorted(f"{a['aspect']}:{a.get('want') or a['sentiment']}" for a in trigger_aspects)
    insights = []
    for change in changes:
        family, family_type = pattern(change)
        insights.append(
            InsightObservation(
                insight_id=insight_id(session_id, family),
                pattern=family,
                pattern_type=family_type,
                contexts=contexts,
                evolution_id=evolution_id,
                # a change succeeds when its own aspect was validated (a change with no aspect
                # shares the whole hypothesis's fate)
                success=_aspect_validated(verdict, change.aspect),
                score_delta=verdict.score_delta,
            )
        )
    return JudgedEvolution(evolution_id=evolution_id, verdict=verdict, insights=insights)


def _aspect_validated(verdict: EvolutionOutcome, aspect: str | None) -> bool:
    for judged in verdict.aspects:
        if judged.aspect == aspect:
            return judged.verdict == "validated"
    return verdict.hypothesis_validated
