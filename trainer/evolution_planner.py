"""Evolution Planner: targeted changes from blame, a testable hypothesis, constraints enforced.

Instructions blamed for pushing against a wish are rewritten (or removed), an instruction is
added for each wish no instruction already carries, parameters move where the wish points, a
tool's description changes when the reviewer criticised how it was used, directives are
honoured; then the plan is checked mechanically against the immutable constraints and repaired
or trimmed before anything is applied. An agent the reviewer only praised is left untouched.
"""

from __future__ import annotations

import json
import math
import re

from domain.agent import (
    MAX_SYSTEM_PROMPT_CHARS,
    AgentDefinition,
    FlowStep,
    constraint_violations,
)
from domain.change_families import FAMILIES, contrary_of
from domain.prompt_segments import segments
from domain.trainer import (
    CreditAssignment,
    EvolutionChange,
    EvolutionPlan,
    ExpectedImpact,
    LearningInsight,
    PastChange,
    PromptCredit,
    ScoreAnalysis,
)
from trainer import credit_assignment, history_check, instructions, tool_flow
from trainer.check_levers import is_form_example
from trainer.evolution import STRENGTHEN_REASON, EvolutionError, apply_changes
from trainer.reading.wish import Wish

NO_ACTIONABLE_WISH = "no actionable wish in the feedback; the agent is kept as is"
SHORTEST_MAX_TOKENS = 100
SHORT_MAX_TOKENS = 300
LONG_MAX_TOKENS = 1024
LONGEST_MAX_TOKENS = 4096
TOKENS_PER_WORD = 2  # a word limit's budget, with room for markup
CEILING_ROOM = 1.5  # a lowered budget is half again what the words asked for need
TEMPERATURE_STEP_DOWN = 0.3
TEMPERATURE_STEP_UP = 0.2


def _swap(segment: str, want: str) -> str | None:
    """``segment`` with the words that push against ``want`` swapped, if the result then reads
    as asking for ``want`` (and no longer for its contrary)."""
    swaps = FAMILIES[want].swaps if want in FAMILIES else None
    if not swaps:
        return None

    def repl(match: re.Match[str]) -> str:
        word = match.group(0)
        new = swaps[word.lower()]
        return new.capitalize() if word[0].isupper() else new

    pattern = r"\b(" + "|".join(re.escape(w) for w in swaps) + r")\b"
    swapped = re.sub(pattern, repl, segment, flags=re.IGNORECASE)
    if swapped == segment:
        return None
    asked = credit_assignment.families_of(swapped)
    if asked & contrary_of(want):
        return None
    return swapped


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
    """Targeted changes from blame and wishes, plus a hypothesis per aspect; directives and the
    mechanical checks come later (``finalize``)."""
    planner = _Proposal(agent, analysis)
    # 1. Instructions, flow steps, tools and parameters blamed for pushing the other way.
    for c in credit.prompt:
        if c.blame in ("high", "medium") and c.want in planner.by_family:
            planner.answer_blame(c, planner.by_family[c.want])
    # 1b. A checking step asked for: a flow agent gets a step of its own after its last one.
    planner.add_check_steps()
    # 2. An instruction for every wish no remaining instruction already carries.
    planner.add_instructions()
    return planner.plan()


class _Proposal:
    """One proposal under way: the changes made so far and the prompt's segments as they
    stand after them."""

    def __init__(self, agent: AgentDefinition, analysis: ScoreAnalysis) -> None:
        self.agent, self.analysis = agent, analysis
        self.wanted = credit_assignment.wishes(analysis)
        self.by_family = {w.family: w for w in self.wanted}
        self.changes: list[EvolutionChange] = []
        self.kept_segments = list(segments(agent.system_prompt))
        self.satisfied: set[str] = set()  # wishes a rewrite in this plan already carries

    def made_for(self, wish: Wish, change: EvolutionChange) -> EvolutionChange:
        change.aspect, change.want = wish.aspect, wish.family
        self.changes.append(change)
        return change

    def answer_blame(self, c: PromptCredit, wish: Wish) -> None:
        agent = self.agent
        if c.component == "parameters":
            change = _parameter_change(agent, c.target or "", wish, c.reason, self.analysis)
            if change:
                self.made_for(wish, change)
        elif c.component == "systemPrompt":
            self._answer_blamed_segment(c, wish)
        elif c.component == "flow" and c.blame == "high" and c.target:
            step_change = _flow_change(agent, c.target, c.segment, wish, c.reason)
            if step_change:
                self.made_for(wish, step_change)
                if wish.family == "preserve":  # the step's own prompt carries it
                    self.satisfied.add(wish.family)
        elif c.component == "tools" and c.target:
            self.made_for(wish, _tool_change(agent, c.target, wish, c.reason))
            if "never" in instructions.tool_wish(wish)[2]:
                for step in agent.flow:  # the allowance: steps that may call it no longer can
                    if step.tools and c.target in step.tools:
                        self.made_for(wish, _allowance_change(step, c.target, c.reason))

    def _answer_blamed_segment(self, c: PromptCredit, wish: Wish) -> None:
        # high: words pushing the other way are swapped (or the segment goes); medium: an
        # instruction that shapes the form some other way goes
        change = self.made_for(
            wish,
            _rewrite(c.segment, wish, c.reason, f"segment {c.segment_index}")
            if c.blame == "high"
            else _remove(c.segment, wish, c.reason, f"segment {c.segment_index}", 0.7),
        )
        kept = self.kept_segments
        index = kept.index(c.segment) if c.segment in kept else -1
        if index >= 0:
            if change.after:
                kept[index] = change.after
                self.satisfied.add(wish.family)
            else:
                del kept[index]

    def add_check_steps(self) -> None:
        for wish in self.wanted:
            if wish.family == "check_step" and self.agent.flow:
                step = _check_step(self.agent, wish)
                if step is not None:
                    self.made_for(wish, step)
                    self.satisfied.add(wish.family)

    def add_instructions(self) -> None:
        prompt_now = " ".join(self.kept_segments)
        tool_names = [t.name for t in self.agent.tools]
        tools_changed = {ch.target for ch in self.changes if ch.component == "tools"}
        for wish in self.wanted:
            if (
                wish.family == "tool_use"
                and instructions.tool_for(wish, tool_names) in tools_changed
            ):
                continue  # the tool's own description now says when to use it
            text = instructions.instruction(wish, tool_names)
            if not text or wish.family in self.satisfied or text.lower() in prompt_now.lower():
                continue
            self._add_instruction(wish, text)
            prompt_now += " " + text

    def _add_instruction(self, wish: Wish, text: str) -> None:
        # One instruction per family: an amount rewrites the instruction that carries the
        # family; a wish it already carries, asked again, is made firmer by the cycle step
        # (``_strengthen``), never said a second time beside it.
        support = [
            seg
            for seg in self.kept_segments
            if credit_assignment.carries(seg, wish) and not is_form_example(seg)
        ]
        # the family's own instruction; a sentence that asks for more than it ("brief,
        # scannable analysis") stays as it is, beside it
        own = [seg for seg in support if credit_assignment.carries(seg, wish, only=True)]
        if own and not _counted(wish):
            firmer = instructions.firmer_than(own[-1], wish)
            if firmer and firmer.lower() not in " ".join(self.kept_segments).lower():
                why = f"{STRENGTHEN_REASON}feedback asked for {wish.family} ({wish.quote!r}), "
                self._rewrite(wish, own[-1], firmer, f"{why}which {own[-1]!r} already asks for")
            return
        if support and _counted(wish):
            # the amount replaces what the instructions said before ("brief" → "under 60
            # words", "each point" → "exactly one"): one instruction, the reviewer's latest,
            # and no other sentence left asking for the family ("Provide brief, scannable
            # analysis." keeps only what else it asks: its bullets, unless another has them)
            why = f"feedback asked for {wish.family}, {wish.amount.says()} ({wish.quote!r})"
            target = own[-1] if own else support[-1]
            for seg in support:
                rest = self._besides(seg, wish)
                if seg == target:
                    self._rewrite(wish, seg, " ".join([text, *rest]), why)
                elif rest:
                    self._rewrite(wish, seg, " ".join(rest), f"{why}: one instruction for it")
                else:
                    self.made_for(
                        wish,
                        _remove(seg, wish, f"{why}: one instruction for it", "instruction", 1.0),
                    )
                    self.kept_segments.remove(seg)
            self._drop_form_examples(wish)  # they showed the amount this one replaces
            return
        reason = f"feedback asked for {wish.family} ({wish.quote!r})"
        self.made_for(
            wish,
            EvolutionChange(
                component="systemPrompt",
                change_type="add",
                target="instruction",
                before=None,
                after=text,
                reason=reason,
                confidence=wish.confidence,
            ),
        )

    def _besides(self, segment: str, wish: Wish) -> list[str]:
        """The instructions of what else ``segment`` asks for than ``wish``'s family, for the
        families no other kept sentence carries (so that rewriting it loses none)."""
        others = " ".join(s for s in self.kept_segments if s != segment)
        elsewhere = credit_assignment.families_of(others) if others else frozenset()
        return [
            record.instruction
            for family in sorted(credit_assignment.families_of(segment) - {wish.family})
            if family not in elsewhere
            and (record := FAMILIES.get(family)) is not None
            and record.instruction
        ]

    def _rewrite(self, wish: Wish, before: str, after: str, reason: str) -> None:
        """The family's instruction ``before`` said as ``after``: one instruction, rewritten."""
        change = EvolutionChange(
            component="systemPrompt",
            change_type="modify",
            target="instruction",
            before=before,
            after=after,
            reason=reason,
            confidence=wish.confidence,
        )
        self.made_for(wish, change)
        self.kept_segments[self.kept_segments.index(before)] = after

    def _drop_form_examples(self, wish: Wish) -> None:
        for seg in [
            s
            for s in self.kept_segments
            if is_form_example(s) and wish.family in credit_assignment.families_of(s)
        ]:
            self.made_for(wish, _remove(seg, wish, "its amount changed", "example", 0.9))
            self.kept_segments.remove(seg)

    def plan(self) -> EvolutionPlan:
        changes, wanted, analysis = self.changes, self.wanted, self.analysis
        result = EvolutionPlan(changes=changes)
        if changes:
            claims = [h for w in wanted if (h := instructions.hypothesis(w.family))]
            body = "; ".join(claims) if claims else "the changed instructions will be followed"
            result.hypothesis = (
                f"After these changes {body}, and the next score will exceed {analysis.score:g}."
            )
            improve = sorted({w.aspect for w in wanted})
            result.expected_impact = [
                ExpectedImpact(aspect=a, direction="improve") for a in improve
            ]
            result.expected_impact += [
                ExpectedImpact(aspect=a.aspect, direction="maintain")
                for a in analysis.aspects
                if a.sentiment == "positive" and a.aspect not in improve
            ]
        elif not wanted:
            result.notes.append(NO_ACTIONABLE_WISH)
        elif any(w.family != "banned" for w in wanted):
            result.notes.append("every wish is already carried by the agent's instructions")
        if banned := [f"avoid {w.detail!r}" for w in wanted if w.family == "banned"]:
            # a phrase to avoid is no instruction: said back as what is done with it instead
            result.notes.append(
                f"{', '.join(banned)}: no instruction changes; every later output is checked "
                "for it, and one that uses it goes back to the model once to be revised"
            )
        if analysis.adversarial:
            result.notes.append(
                "parts of the feedback addressed the trainer or the system; they were set aside"
            )
        return result


def _rewrite(segment: str, wish: Wish, reason: str, target: str) -> EvolutionChange:
    # a wish that says how much ("about half", "exactly one") is stated with its amount
    swapped = _counted(wish) or _swap(segment, wish.family)
    if swapped:
        return EvolutionChange(
            component="systemPrompt",
            change_type="modify",
            target=target,
            before=segment,
            after=swapped,
            reason=reason,
            confidence=wish.confidence,
        )
    return _remove(segment, wish, reason, target, 0.9)


def _counted(wish: Wish) -> str | None:
    """The instruction of a wish that states an amount (None without one)."""
    return instructions.instruction(wish) if wish.amount is not None else None


def _remove(segment: str, wish: Wish, reason: str, target: str, weight: float) -> EvolutionChange:
    return EvolutionChange(
        component="systemPrompt",
        change_type="remove",
        target=target,
        before=segment,
        after=None,
        reason=reason,
        confidence=round(wish.confidence * weight, 2),
    )


def _flow_change(
    agent: AgentDefinition, step_name: str, prompt: str, wish: Wish, reason: str
) -> EvolutionChange | None:
    """A flow step whose prompt pushes against the wish: its words swapped where they can be;
    a step that damaged an earlier step's work is told first what it must keep."""
    if wish.family == "preserve":
        keep = instructions.instruction(wish) or ""
        after = None if keep.lower() in prompt.lower() else f"{keep} {prompt}"
        confidence = wish.confidence
    else:
        after = _swap(prompt, wish.family)
        confidence = round(wish.confidence * 0.9, 2)
    if after is None:
        return None
    return EvolutionChange(
        component="flow",
        change_type="modify",
        target=step_name,
        before=prompt,
        after=after,
        reason=reason,
        confidence=confidence,
    )


def _check_step(agent: AgentDefinition, wish: Wish) -> EvolutionChange | None:
    """A step that checks the flow's last output, appended (none if one is there already)."""
    names = [s.name for s in agent.flow]
    if instructions.CHECK_STEP_NAME in names:
        return None
    step = tool_flow.added_step(agent, instructions.CHECK_STEP_NAME)
    return EvolutionChange(
        component="flow",
        change_type="add",
        target=step.name,
        before=None,
        after=json.dumps(step.model_dump(mode="json", by_alias=True, exclude_none=True)),
        reason=f"feedback asked for a checking step ({wish.quote!r})",
        confidence=wish.confidence,
    )


def _allowance_change(step: FlowStep, tool: str, reason: str) -> EvolutionChange:
    kept = [t for t in step.tools or [] if t != tool]
    return EvolutionChange(
        component="flow",
        change_type="modify",
        target=step.name,
        before=json.dumps({"tools": step.tools}),
        after=json.dumps({"tools": kept}),
        reason=f"the reviewer does not want {tool} called at all; {reason}",
        confidence=0.8,
    )


def _tool_change(
    agent: AgentDefinition, tool_name: str, wish: Wish, reason: str
) -> EvolutionChange:
    """A tool's description says when to call it; the reviewer's complaint about its use
    changes that sentence."""
    tool = next(t for t in agent.tools if t.name == tool_name)
    guidance = instructions.tool_guidance(wish, tool_name)
    description = tool.description.rstrip()
    new = f"{description} {guidance}".strip() if guidance not in description else description
    return EvolutionChange(
        component="tools",
        change_type="modify",
        target=tool_name,
        before=json.dumps({"description": tool.description}),
        after=json.dumps({"description": new}),
        reason=reason,
        confidence=wish.confidence,
    )


def finalize(
    agent: AgentDefinition,
    proposal: EvolutionPlan,
    sticky_directives: list[str],
    oneshot_directives: list[str],
    past: list[PastChange],
    insights: dict[str, LearningInsight],
    requested: set[str] | None = None,
    lineage_id: str | None = None,
) -> EvolutionPlan:
    """What every backend's proposal goes through: the history check (which never vetoes a
    ``requested`` family), the user's directives (sticky ones hold after every evolution,
    oneshot ones this time), then the immutable constraints, checked mechanically — a change
    that would break one is repaired or refused."""
    result = history_check.check(proposal, past, insights, requested, lineage_id)
    lowered = agent.system_prompt.lower()
    # Directives are not bounded in number, the prompt is: those that would not fit are left
    # out (counted in a note) rather than each refused by the constraint check, one by one
    room = MAX_SYSTEM_PROMPT_CHARS - len(agent.system_prompt)
    room -= sum(
        len(ch.after or "") + 1
        for ch in result.changes
        if ch.component == "systemPrompt" and ch.change_type == "add"
    )
    left_out = 0
    for kind, directives in (("sticky", sticky_directives), ("oneshot", oneshot_directives)):
        for directive in directives:
            if directive.lower() in lowered or any(ch.after == directive for ch in result.changes):
                continue
            if len(directive) + 1 > room:
                left_out += 1
                continue
            room -= len(directive) + 1
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
    if left_out:
        result.notes.append(
            f"{left_out} directive(s) not applied: the system prompt would pass its "
            f"{MAX_SYSTEM_PROMPT_CHARS:,}-character limit"
        )
    _enforce_constraints(agent, result)
    if not result.hypothesis and any(ch.target.endswith(" directive") for ch in result.changes):
        result.hypothesis = "The agent will follow the added directives."
    if not result.changes:
        result.hypothesis, result.expected_impact = "", []
    return result


def tokens_needed(words: int) -> int:
    """The tokens an answer of ``words`` words needs, with room for its markup."""
    return words * TOKENS_PER_WORD


def ceiling_for(words: int) -> int:
    """The token budget for answers of ``words`` words: half again as much as they need, so
    that the budget never cuts an answer the amount allows."""
    return math.ceil(tokens_needed(words) * CEILING_ROOM)


def _parameter_change(
    agent: AgentDefinition, target: str, wish: Wish, reason: str, analysis: ScoreAnalysis
) -> EvolutionChange | None:
    params = agent.parameters
    effect = FAMILIES[wish.family].parameter if wish.family in FAMILIES else None
    if effect is None or effect.target != target:
        return None
    if target == "maxTokens":
        current = params.max_tokens
        if effect.direction == "down":
            # the budget is a ceiling, never the length control: it comes down only to a hard
            # limit the reviewer named, with room to spare, so that it never cuts an answer
            if not (wish.detail and wish.detail.isdigit()) or instructions.approximate(wish.quote):
                return None  # "about 90 words" names no limit: the instruction carries it
            new = max(SHORTEST_MAX_TOKENS, ceiling_for(int(wish.detail)))
            if new >= current:
                return None
        elif not analysis.adversarial:
            # proposed as the wish points; the constraint check clamps it to the limit
            new = min(LONGEST_MAX_TOKENS, max(LONG_MAX_TOKENS, current * 2))
            if new <= current:
                return None
        else:
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
    if target == "temperature":
        t = params.temperature
        if effect.direction == "up":
            new_t = round(min(1.0, t + TEMPERATURE_STEP_UP), 2)
        else:
            new_t = round(max(0.0, t - TEMPERATURE_STEP_DOWN), 2)
        if new_t == t:
            return None
        return EvolutionChange(
            component="parameters",
            change_type="modify",
            target="temperature",
            before=str(t),
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
