"""Evolution Planner: targeted changes from blame, a testable hypothesis, constraints enforced.

High-blame segments are rewritten (or removed), an instruction is added for each unmet wish,
parameters are tuned, directives are honoured; then the plan is checked mechanically against the
immutable constraints and repaired or trimmed before anything is applied.
"""

from __future__ import annotations

import re

from domain.agent import AgentDefinition, constraint_violations
from domain.trainer import (
    CreditAssignment,
    EvolutionChange,
    EvolutionPlan,
    ExpectedImpact,
    LearningInsight,
    PastChange,
    ScoreAnalysis,
)
from trainer import aspects, history_check
from trainer.evolution import EvolutionError, apply_changes

SHORTEST_MAX_TOKENS = 100
SHORT_MAX_TOKENS = 300
LONGEST_MAX_TOKENS = 4096


def _swap(segment: str, want: str) -> str | None:
    swaps = aspects.SWAPS.get(want)
    if not swaps:
        return None

    def repl(match: re.Match[str]) -> str:
        word = match.group(0)
        new = swaps[word.lower()]
        return new.capitalize() if word[0].isupper() else new

    pattern = r"\b(" + "|".join(re.escape(w) for w in swaps) + r")\b"
    swapped = re.sub(pattern, repl, segment, flags=re.IGNORECASE)
    return swapped if swapped != segment else None


def plan(
    agent: AgentDefinition,
    analysis: ScoreAnalysis,
    credit: CreditAssignment,
    sticky_directives: list[str],
    oneshot_directives: list[str],
) -> EvolutionPlan:
    """The rules engine's whole plan: proposal, directives and constraints (no history)."""
    return finalize(
        agent, propose(agent, analysis, credit), sticky_directives, oneshot_directives, [], {}
    )


def propose(
    agent: AgentDefinition, analysis: ScoreAnalysis, credit: CreditAssignment
) -> EvolutionPlan:
    """Targeted changes from blame, plus a hypothesis; directives and checks come later."""
    wants = {a.aspect: a for a in analysis.aspects if a.sentiment == "negative" and a.want}
    changes: list[EvolutionChange] = []
    satisfied: set[str] = set()
    touched: set[str] = set()

    # 1. High-blame components first, then medium.
    for level in ("high", "medium"):
        for c in credit.prompt:
            if c.blame != level or c.segment in touched:
                continue
            aspect = wants.get(c.related_aspect or "")
            if aspect is None or aspect.want is None:
                continue
            if c.segment_index < 0:
                change = _parameter_change(agent, c.segment, aspect.want, c.reason)
                if change:
                    changes.append(change)
                    touched.add(c.segment)
                continue
            swapped = _swap(c.segment, aspect.want) if level == "high" else None
            if swapped:
                changes.append(
                    EvolutionChange(
                        component="systemPrompt",
                        change_type="modify",
                        target=f"segment {c.segment_index}",
                        before=c.segment,
                        after=swapped,
                        reason=c.reason,
                        confidence=aspect.confidence,
                    )
                )
                satisfied.add(aspect.want)
            else:
                changes.append(
                    EvolutionChange(
                        component="systemPrompt",
                        change_type="remove",
                        target=f"segment {c.segment_index}",
                        before=c.segment,
                        after=None,
                        reason=c.reason,
                        confidence=round(aspect.confidence * (0.9 if level == "high" else 0.7), 2),
                    )
                )
            touched.add(c.segment)

    # 2. An explicit instruction for every wish the rewrites did not already cover.
    lowered = agent.system_prompt.lower()
    for aspect in wants.values():
        instruction = aspects.INSTRUCTIONS.get(aspect.want or "")
        if not instruction or aspect.want in satisfied or instruction.lower() in lowered:
            continue
        changes.append(
            EvolutionChange(
                component="systemPrompt",
                change_type="add",
                target="instruction",
                before=None,
                after=instruction,
                reason=f"feedback asked for {aspect.want} output ({aspect.quote!r})",
                confidence=aspect.confidence,
            )
        )

    wished = [a for a in wants.values() if a.want]
    result = EvolutionPlan(changes=changes)
    if changes:
        claims = [aspects.HYPOTHESES[a.want] for a in wished if a.want in aspects.HYPOTHESES]
        body = "; ".join(claims) if claims else "the changed instructions will be followed"
        result.hypothesis = (
            f"After these changes {body}, and the next score will exceed {analysis.score:g}."
        )
        result.expected_impact = [
            ExpectedImpact(aspect=a.aspect, direction="improve") for a in wished
        ] + [
            ExpectedImpact(aspect=a.aspect, direction="maintain")
            for a in analysis.aspects
            if a.sentiment == "positive"
        ]
    elif not wished:
        result.notes.append("no actionable aspect in the feedback; the agent is kept as is")
    return result


def finalize(
    agent: AgentDefinition,
    proposal: EvolutionPlan,
    sticky_directives: list[str],
    oneshot_directives: list[str],
    past: list[PastChange],
    insights: dict[str, LearningInsight],
) -> EvolutionPlan:
    """What every backend's proposal goes through: the history check, the user's directives
    (sticky ones hold after every evolution, oneshot ones this time), then the immutable
    constraints, checked mechanically — a change that would break one is repaired or refused."""
    result = history_check.check(proposal, past, insights)
    lowered = agent.system_prompt.lower()
    for kind, directives in (("sticky", sticky_directives), ("oneshot", oneshot_directives)):
        for directive in directives:
            if directive.lower() in lowered or any(ch.after == directive for ch in result.changes):
                continue
            result.changes.append(
                EvolutionChange(
                    component="systemPrompt",
                    change_type="add",
                    target=f"{kind} directive",
                    before=None,
                    after=directive,
                    reason=f"{kind} directive from the user",
                    confidence=1.0,
                )
            )
            if kind == "oneshot" and result.hypothesis:
                result.hypothesis += f" It will also follow the directive {directive!r}."
    _enforce_constraints(agent, result)
    if result.changes and not result.hypothesis:
        result.hypothesis = "The agent will follow the added directives."
    if not result.changes:
        result.hypothesis, result.expected_impact = "", []
    return result


def _parameter_change(
    agent: AgentDefinition, segment: str, want: str, reason: str
) -> EvolutionChange | None:
    params = agent.parameters
    if segment.startswith("parameters.maxTokens"):
        current = params.max_tokens
        if want == "shorter":
            new = max(SHORTEST_MAX_TOKENS, min(SHORT_MAX_TOKENS, current // 2))
        elif want == "longer":
            new = min(LONGEST_MAX_TOKENS, current * 2)
        else:
            return None
        if new == current:
            return None
        return EvolutionChange(
            component="parameters",
            change_type="modify",
            target="maxTokens",
            before=str(current),
            after=str(new),
            reason=reason,
            confidence=0.8,
        )
    if segment.startswith("parameters.temperature"):
        new_t = round(max(0.0, params.temperature - 0.3), 2)
        return EvolutionChange(
            component="parameters",
            change_type="modify",
            target="temperature",
            before=str(params.temperature),
            after=str(new_t),
            reason=reason,
            confidence=0.6,
        )
    return None


def _enforce_constraints(agent: AgentDefinition, plan: EvolutionPlan) -> None:
    """Repair or drop changes until the evolved agent satisfies every immutable constraint."""
    limit = agent.constraints.max_tokens
    for change in plan.changes:
        if (
            change.target == "maxTokens"
            and limit is not None
            and change.after is not None
            and int(change.after) > limit
        ):
            plan.notes.append(f"maxTokens {change.after} clamped to constraints.maxTokens {limit}")
            change.after = str(limit)
    kept: list[EvolutionChange] = []
    for change in plan.changes:
        try:
            candidate = apply_changes(agent, [*kept, change])
        except (EvolutionError, ValueError) as exc:
            plan.notes.append(f"refused {change.change_type} {change.target}: {exc}")
            continue
        if constraint_violations(candidate):
            plan.notes.append(
                f"refused {change.change_type} {change.target}: "
                + "; ".join(constraint_violations(candidate))
            )
            continue
        kept.append(change)
    plan.changes = [c for c in kept if not (c.before is not None and c.before == c.after)]
