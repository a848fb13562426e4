"""Credit Assignment: which prompt segments and parameters the feedback blames.

Prompt-level for single-call agents; trajectory-level (per span) when the attempt had several
model calls. The rules engine blames by the shared vocabulary in ``trainer.aspects``.
"""

from __future__ import annotations

import re

from domain.agent import AgentDefinition
from domain.trainer import CreditAssignment, PromptCredit, ScoreAnalysis, TrajectoryCredit
from trainer import aspects
from trainer.prompt_segments import segments

LONG_OUTPUT_TOKENS = 400
SHORT_OUTPUT_TOKENS = 600
_ORDER = {"high": 0, "medium": 1, "low": 2, "none": 3}


def assign(
    agent: AgentDefinition,
    analysis: ScoreAnalysis,
    llm_span_ids: list[str],
) -> CreditAssignment:
    if len(llm_span_ids) > 1:
        return CreditAssignment(mode="trajectory", trajectory=_trajectory(analysis, llm_span_ids))
    return CreditAssignment(mode="prompt", prompt=_prompt(agent, analysis))


def _prompt(agent: AgentDefinition, analysis: ScoreAnalysis) -> list[PromptCredit]:
    negative = [a for a in analysis.aspects if a.sentiment == "negative" and a.want]
    credits: list[PromptCredit] = []
    for index, segment in enumerate(segments(agent.system_prompt)):
        best: PromptCredit | None = None
        for aspect in negative:
            for pattern, blame in aspects.OPPOSING.get(aspect.want or "", {}).items():
                match = re.search(pattern, segment, flags=re.IGNORECASE)
                if not match:
                    continue
                credit = PromptCredit(
                    segment=segment,
                    segment_index=index,
                    blame=blame,  # type: ignore[arg-type]
                    related_aspect=aspect.aspect,
                    reason=f"'{match.group(0)}' pushes against the wish for {aspect.want} "
                    f"output (feedback: {aspect.quote!r})",
                )
                if best is None or _ORDER[credit.blame] < _ORDER[best.blame]:
                    best = credit
        credits.append(
            best
            or PromptCredit(
                segment=segment, segment_index=index, blame="none", reason="not related"
            )
        )
    params = agent.parameters
    for aspect in negative:
        if aspect.want == "shorter" and params.max_tokens > LONG_OUTPUT_TOKENS:
            credits.append(
                PromptCredit(
                    segment=f"parameters.maxTokens={params.max_tokens}",
                    segment_index=-1,
                    blame="high",
                    related_aspect="length",
                    reason=f"a budget of {params.max_tokens} tokens allows long answers",
                )
            )
        elif aspect.want == "longer" and params.max_tokens < SHORT_OUTPUT_TOKENS:
            credits.append(
                PromptCredit(
                    segment=f"parameters.maxTokens={params.max_tokens}",
                    segment_index=-1,
                    blame="high",
                    related_aspect="length",
                    reason=f"a budget of {params.max_tokens} tokens cuts answers short",
                )
            )
        elif aspect.aspect == "accuracy" and params.temperature > 0.5:
            credits.append(
                PromptCredit(
                    segment=f"parameters.temperature={params.temperature}",
                    segment_index=-1,
                    blame="medium",
                    related_aspect="accuracy",
                    reason="a high temperature makes unsupported claims more likely",
                )
            )
    return credits


def _trajectory(analysis: ScoreAnalysis, llm_span_ids: list[str]) -> list[TrajectoryCredit]:
    # Without a judge model, the rules engine attributes the reward to the steps in proportion
    # to their closeness to the final output: the last step shaped what the reviewer read.
    reward = (analysis.score - 5) / 5
    n = len(llm_span_ids)
    out = []
    for i, span_id in enumerate(llm_span_ids):
        weight = (i + 1) / n
        out.append(
            TrajectoryCredit(
                span_id=span_id,
                contribution=round(max(-1.0, min(1.0, reward * weight)), 3),
                reason=f"step {i + 1} of {n}; later steps shape the final output more",
            )
        )
    return out
