"""Credit Assignment: which parts of the agent the feedback blames.

Prompt-level credit reads every instruction of the system prompt, every flow step's prompt and
every tool's description with the same reader that read the comment: an instruction asking for
the contrary of a wish is blamed; one already asking for it is credited as support (and is never
removed). Parameters are blamed where they shape the criticised aspect (maxTokens for length,
temperature for consistency and creativity).

Trajectory credit (several model calls) reads the spans: a tool call the reviewer calls
needless, the model call that wrote the final output for a complaint about the output, the step
whose text carries a criticised topic.
"""

from __future__ import annotations

import re
from functools import lru_cache

from domain.agent import AgentDefinition, FlowStep
from domain.answer_parts import unscoped
from domain.change_families import FAMILIES, contrary_of
from domain.execution import SpanRecord
from domain.prompt_segments import segments
from domain.trainer import (
    CreditAssignment,
    FeedbackAspect,
    PromptCredit,
    ScoreAnalysis,
    TrajectoryCredit,
)
from trainer import instructions
from trainer.reading import reader as feedback_reader
from trainer.reading.wish import Wish

_RANK = {"high": 0, "medium": 1, "low": 2, "none": 3}
# An instruction about the answer's form in general ("Structure your response professionally")
SHAPES_FORMAT = re.compile(r"\b(?:structur\w*|format\w*|layout|organi[sz]\w*|arrang\w*)\b", re.I)


def wishes(analysis: ScoreAnalysis) -> list[Wish]:
    """The analysis's wishes for a change (to add, push or soften a family), back in the
    reader's terms; take-backs are read by ``takebacks``."""
    return [
        Wish(
            a.want,
            a.aspect,
            a.quote or "",
            a.confidence,
            detail=a.detail,
            action=a.action or "add",
            amount=a.amount,
        )
        for a in analysis.aspects
        if a.sentiment == "negative" and a.want and a.action not in ("remove", "keep")
    ]


def takebacks(analysis: ScoreAnalysis) -> list[Wish]:
    """The families the reviewer takes back ("drop the example"; ``undo``: the last change)."""
    return [
        Wish(a.want, a.aspect, a.quote or "", a.confidence, detail=a.detail, action="remove")
        for a in analysis.aspects
        if a.want and a.action == "remove"
    ]


def assign(
    agent: AgentDefinition,
    analysis: ScoreAnalysis,
    spans: list[SpanRecord] | list[str],
) -> CreditAssignment:
    records = [s for s in spans if isinstance(s, SpanRecord)]
    llm_calls = [s for s in spans if isinstance(s, str) or s.span_type == "llm_call"]
    prompt = prompt_credit(agent, analysis)
    if len(llm_calls) > 1:
        ids = [s if isinstance(s, str) else s.span_id for s in llm_calls]
        return CreditAssignment(
            mode="trajectory",
            prompt=prompt,
            trajectory=trajectory_credit(analysis, records or ids),
        )
    return CreditAssignment(mode="prompt", prompt=prompt)


@lru_cache(maxsize=4096)
def _instruction(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(families, languages) an instruction asks for. Read once per text: credit reads every
    segment against every wish, and the planner reads them again."""
    wishes = feedback_reader.read(text, mode="instruction").wishes
    return (
        frozenset(w.family for w in wishes),
        frozenset(w.detail or "" for w in wishes if w.family == "language"),
    )


def families_of(text: str) -> frozenset[str]:
    """The change families an instruction already asks for."""
    return _instruction(text)[0]


def _languages_of(text: str) -> frozenset[str]:
    return _instruction(text)[1]


def carries(text: str, wish: Wish, only: bool = False) -> bool:
    """Whether instruction ``text`` carries ``wish`` (``only``: and nothing else): its family,
    and for a language the same language for the same part ("Write the whole answer in
    Norwegian." does not carry a German summary)."""
    families = families_of(text)
    if wish.family not in families or (only and families != {wish.family}):
        return False
    if wish.family != "language" or not wish.detail:
        return True
    language, part = unscoped(wish.detail)
    return instructions.language_part(text) == part and language in _languages_of(text)


def _blame(text: str, wish: Wish) -> tuple[str, str] | None:
    """("high" | "none", reason) when ``text`` pushes against ``wish`` or supports it."""
    asked = families_of(text)
    if wish.family == "language":
        # only a language asked of the same part stands in the way: a German summary leaves
        # a Norwegian answer as it is
        language, part = unscoped(wish.detail)
        if instructions.language_part(text) != part:
            return None
        others = _languages_of(text) - {language}
        if others:
            return "high", f"asks for {', '.join(sorted(others))}, not {language}"
        return None
    if wish.family in asked:
        return "none", f"already asks for {wish.family} (keep it)"
    contrary = asked & contrary_of(wish.family)
    if contrary:
        return "high", (
            f"asks for {', '.join(sorted(contrary))}, against the wish for {wish.family} "
            f"(feedback: {wish.quote!r})"
        )
    if _shapes_format(wish.family) and SHAPES_FORMAT.search(text):
        return "medium", (
            f"shapes the answer's form without asking for {wish.family} (feedback: {wish.quote!r})"
        )
    return None


def prompt_credit(agent: AgentDefinition, analysis: ScoreAnalysis) -> list[PromptCredit]:
    wanted = wishes(analysis)
    credits: list[PromptCredit] = []
    for index, segment in enumerate(segments(agent.system_prompt)):
        credits.append(_segment_credit(segment, index, wanted, "systemPrompt", None))
    for step in agent.flow:
        credit = _segment_credit(step.prompt, -1, wanted, "flow", step.name)
        if credit.blame != "none" or credit.want:
            credits.append(credit)
    tool_names = [t.name for t in agent.tools]
    for wish in wanted:
        if wish.family != "tool_use":
            continue
        tool = instructions.tool_for(wish, tool_names)
        if tool is not None:
            _, direction, _ = instructions.tool_wish(wish)
            credits.append(
                PromptCredit(
                    segment=next(t.description for t in agent.tools if t.name == tool),
                    segment_index=-1,
                    blame="high",
                    related_aspect="tool_use",
                    reason=f"the {tool} tool was "
                    f"{'overused' if direction == 'less' else 'not used'} (feedback: "
                    f"{wish.quote!r}); its description decides when it is called",
                    component="tools",
                    target=tool,
                    want="tool_use",
                )
            )
    for wish in wanted:
        step = damaging_step(agent, wish) if wish.family == "preserve" else None
        if step is not None:
            earlier = [s.name for s in agent.flow if "{" + s.name + "}" in step.prompt]
            credits.append(
                PromptCredit(
                    segment=step.prompt,
                    segment_index=-1,
                    blame="high",
                    related_aspect=wish.aspect,
                    reason=f"the {step.name} step rewrites what "
                    f"{' and '.join(earlier) or 'the earlier steps'} produced and lost "
                    f"{instructions.preserved(wish)} (feedback: {wish.quote!r})",
                    component="flow",
                    target=step.name,
                    want="preserve",
                )
            )
    credits.extend(_parameter_credit(agent, wanted))
    return credits


_ORDINAL = {"second": 1, "third": 2, "fourth": 3}


def damaging_step(agent: AgentDefinition, wish: Wish) -> FlowStep | None:
    """The flow step a reviewer blames for damaging an earlier step's work: the one named (by
    its name, a word of what it does — "the tightening" — or its place), else the last step
    that reworks an earlier step's output. Never the first step: it has nothing to damage."""
    later = [
        s for s in agent.flow[1:] if any("{" + e.name + "}" in s.prompt for e in agent.flow)
    ] or agent.flow[1:]
    if not later:
        return None
    said = (wish.detail or "").partition("|")[0]
    if said in _ORDINAL and _ORDINAL[said] < len(agent.flow):
        return agent.flow[_ORDINAL[said]]
    stem = said[:5]
    if said and said != "last":
        for step in later:
            words = re.findall(r"[a-z]+", f"{step.name} {step.prompt}".lower())
            if any(w[:5] == stem for w in words[:6]):
                return step
    return later[-1]


def _segment_credit(
    segment: str, index: int, wanted: list[Wish], component: str, target: str | None
) -> PromptCredit:
    best: PromptCredit | None = None
    for wish in wanted:
        found = _blame(segment, wish)
        if found is None:
            continue
        blame, reason = found
        credit = PromptCredit(
            segment=segment,
            segment_index=index,
            blame=blame,  # type: ignore[arg-type]
            related_aspect=wish.aspect,
            reason=reason,
            component=component,  # type: ignore[arg-type]
            target=target,
            want=wish.family,
        )
        if best is None or _RANK[blame] < _RANK[best.blame]:
            best = credit
    return best or PromptCredit(
        segment=segment,
        segment_index=index,
        blame="none",
        reason="not related",
        component=component,  # type: ignore[arg-type]
        target=target,
    )


def _parameter_credit(agent: AgentDefinition, wanted: list[Wish]) -> list[PromptCredit]:
    params = agent.parameters
    out: list[PromptCredit] = []

    def blame(target: str, value: object, wish: Wish, level: str, reason: str) -> None:
        out.append(
            PromptCredit(
                segment=f"parameters.{target}={value}",
                segment_index=-1,
                blame=level,  # type: ignore[arg-type]
                related_aspect=wish.aspect,
                reason=reason,
                component="parameters",
                target=target,
                want=wish.family,
            )
        )

    for wish in wanted:
        effect = FAMILIES[wish.family].parameter if wish.family in FAMILIES else None
        if effect is None:
            continue
        value = params.max_tokens if effect.target == "maxTokens" else params.temperature
        down = effect.direction == "down"
        if value > effect.blamed_past if down else value < effect.blamed_past:
            reason = effect.reason.format(value=f"{value:g}")
            blame(effect.target, value, wish, effect.blame, reason)
    return out


def _about_output(family: str) -> bool:
    """A complaint about the answer as the reviewer read it (the last model call wrote it)."""
    return family in FAMILIES and FAMILIES[family].about_output


def _shapes_format(family: str) -> bool:
    return family in FAMILIES and FAMILIES[family].shapes_format


def trajectory_credit(
    analysis: ScoreAnalysis, spans: list[SpanRecord] | list[str]
) -> list[TrajectoryCredit]:
    """Credit per span from what each span did, against what the reviewer said."""
    reward = max(-1.0, min(1.0, (analysis.score - 5) / 5))
    records = [s for s in spans if isinstance(s, SpanRecord)]
    if not records:  # ids only, no content to read: later steps shaped the output more
        ids = [s for s in spans if isinstance(s, str)]
        return [
            TrajectoryCredit(
                span_id=span_id,
                contribution=round(reward * (i + 1) / len(ids), 3),
                reason=f"step {i + 1} of {len(ids)}; its content was not available, and later "
                "steps shape the final output more",
            )
            for i, span_id in enumerate(ids)
        ]
    wanted = wishes(analysis)
    negative = [a for a in analysis.aspects if a.sentiment == "negative"]
    llm_calls = [s for s in records if s.span_type == "llm_call"]
    last = llm_calls[-1].span_id if llm_calls else None
    out: list[TrajectoryCredit] = []
    for span in records:
        if span.span_type not in ("llm_call", "tool_call"):
            continue
        contribution, reasons = 0.0, []
        if span.span_type == "tool_call":
            for wish in wanted:
                if wish.family != "tool_use":
                    continue
                name, direction, context = instructions.tool_wish(wish)
                if name and name not in (span.tool_name or span.name or ""):
                    continue
                if direction == "less":
                    arithmetic = "arithmetic" in context and _is_arithmetic(span.tool_args)
                    contribution -= 1.0 if arithmetic else 0.7
                    reasons.append(
                        f"called {span.tool_name} with {_args(span.tool_args)}"
                        + (" — arithmetic, which needs no tool" if arithmetic else "")
                        + f" (feedback: {wish.quote!r})"
                    )
            if not reasons:
                contribution = reward * 0.2
                reasons.append(f"tool call {span.tool_name}; not criticised")
        else:
            output_wishes = [w for w in wanted if _about_output(w.family)]
            if span.span_id == last and (output_wishes or reward < 0):
                contribution = reward if not output_wishes else min(reward, -0.5)
                named = ", ".join(w.family for w in output_wishes) or "the overall result"
                reasons.append(f"wrote the final output the reviewer judged ({named})")
            elif span.span_id == last:
                contribution = reward
                reasons.append("wrote the final output the reviewer praised")
            else:
                topics = _criticised_words(negative)
                hit = sorted(t for t in topics if t in (span.output or "").lower())
                if hit:
                    contribution = min(reward, -0.3)
                    reasons.append(
                        f"{span.name or 'step'} produced {', '.join(hit)}, "
                        "which the feedback criticises"
                    )
                else:
                    contribution = reward * 0.3
                    reasons.append(
                        f"{span.name or 'an earlier step'}: an intermediate step; "
                        "nothing criticised traces to it"
                    )
        out.append(
            TrajectoryCredit(
                span_id=span.span_id,
                contribution=round(max(-1.0, min(1.0, contribution)), 3),
                reason="; ".join(reasons),
            )
        )
    return out


# A sum, as a tool's arguments say it: nothing but digits and operators (then perhaps "?"), or
# a number, an operator and a number. Runs are taken whole (possessive) and a number is looked
# for from its first digit only, so neither pattern retries a long run of digits or spaces.
_ONLY_ARITHMETIC = re.compile(r"[\d\s.+\-*/()%^=x\u00d7]++\??")
_OPERATION = re.compile(r"(?<!\d)\d++\s*+[-+*/x\u00d7]\s*+\d")
ARITHMETIC_ARGS_CHARS = 2_000  # a sum is short: a tool call's arguments are read this far


def _is_arithmetic(args: dict[str, object] | None) -> bool:
    text = " ".join(str(v) for v in (args or {}).values()).strip()
    only = len(text) <= ARITHMETIC_ARGS_CHARS and bool(_ONLY_ARITHMETIC.fullmatch(text))
    return only or bool(_OPERATION.search(text[:ARITHMETIC_ARGS_CHARS]))


def _args(args: dict[str, object] | None) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in (args or {}).items())
    return text[:120] or "no arguments"


def _criticised_words(aspects: list[FeedbackAspect]) -> set[str]:
    words: set[str] = set()
    for a in aspects:
        if a.detail and a.want in ("longer", "focus"):
            words |= {w for w in re.findall(r"[a-z]{5,}", a.detail.lower())}
    return words
