"""The cycle step: what one score does to a lineage's agent.

One function of (agent, lineage memory, score and comment) that the lineage's activity and the
evaluation command both call:

1. **Judge** the evolution that produced the scored output, family by family, from what the
   comment says (``trainer.outcome``).
2. **Roll back** the families the reviewer refuted (asked for their contrary), and only those.
3. **Train** on the same comment: the backend reads it, assigns credit and proposes changes on
   the agent as restored; a wish the agent already carries, asked for again, is strengthened.
4. **Keep** what the reviewer asked for: no change removes a family the reviewer requested or
   approved in an earlier cycle, unless the reviewer now asks for its contrary.
5. **Check** against history (which never vetoes a request), directives and the immutable
   constraints; then apply, and say plainly what was skipped and why.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from pydantic import BaseModel, Field, PrivateAttr

from domain import wants
from domain.agent import AgentDefinition, FlowStep
from domain.change_families import contrary_of, opposite_of, working_against
from domain.checks import ActiveWish, CheckResult
from domain.corrections import LabelledExample
from domain.cycle_decision import CycleStep
from domain.execution import SpanRecord, preview_of
from domain.trainer import (
    CreditAssignment,
    EvolutionChange,
    EvolutionPlan,
    FeedbackAspect,
    JudgedEvolution,
    LearningInsight,
    PastChange,
    ScoreAnalysis,
    describe_change,
)
from trainer import (
    active_wishes,
    check_levers,
    credit_assignment,
    evolution_planner,
    instructions,
    outcome,
    reward_analyzer,
    wish_guard,
)
from trainer.backends import TrainerBackend
from trainer.change_patterns import pattern
from trainer.checks import Document
from trainer.evolution import (
    STRENGTHEN_REASON,
    TAKE_BACK_REASON,
    apply_changes,
    inverse,
)
from trainer.outcome import PendingEvolution
from trainer.prompt_segments import segments
from trainer.reading import comment_languages
from trainer.reading.memory import ReadingMemory
from trainer.reading.wish import Wish

EXCERPT_CHARS = 120  # a comment quoted in the report
NOT_UNDERSTOOD_BELOW = 7  # a score under this with nothing actionable read is "not understood"


class LineageMemory(BaseModel):
    """What a cycle step needs to know of the lineage beyond its current agent."""

    session_id: str
    lineage_id: str
    pending: PendingEvolution | None = None
    # Families the reviewer asked for or approved and has not reversed since: kept
    asked_for: list[str] = Field(default_factory=list)
    # The wishes outputs are checked against (with their amounts), and the scored cycle
    wishes: list[ActiveWish] = Field(default_factory=list)
    cycle: int = 0
    # the scored output's checks against those wishes: the verdict cites what they measured
    checks: list[CheckResult] = Field(default_factory=list)
    # the checks of the agent's own try at it, before a revision: a failure there while the
    # prompt carries the wish moves its instruction up (trainer/check_levers.py)
    own_checks: list[CheckResult] = Field(default_factory=list)
    previous_score: float | None = None
    sticky_directives: list[str] = Field(default_factory=list)
    oneshot_directives: list[str] = Field(default_factory=list)
    rollback_refuted: bool = True  # the lineage's option: undo what the reviewer refuted
    # the scored output was cut off at the token limit: a wish asked again raises the ceiling
    output_cut_off: bool = False
    # structured wishes sent with the score, taken as given instead of reading the comment
    wants: list[str] | None = None
    # raters' corrections of earlier readings (the session's, or every session's), consulted
    # before the cue tables: a close comment is read as its correction said
    corrections: list[LabelledExample] = Field(default_factory=list)
    _reading: ReadingMemory | None = PrivateAttr(default=None)

    def reading_memory(self) -> ReadingMemory | None:
        """The corrections as the reader matches them (built once per memory)."""
        if not self.corrections:
            return None
        if self._reading is None:
            self._reading = ReadingMemory(self.corrections)
        return self._reading

    def recalled(self, comment: str | None) -> bool:
        """Whether the comment is read from a correction (structured wants win over it)."""
        reading = self.reading_memory()
        return self.wants is None and reading is not None and reading.recall(comment) is not None


CreditOf = Callable[[AgentDefinition, ScoreAnalysis], Awaitable[CreditAssignment]]


async def take(
    backend: TrainerBackend,
    agent: AgentDefinition,
    memory: LineageMemory,
    score: float,
    comment: str | None,
    spans: Sequence[SpanRecord] = (),
    past: Sequence[PastChange] = (),
    insights: dict[str, LearningInsight] | None = None,
    credit_of: CreditOf | None = None,
) -> CycleStep:
    """The whole cycle step (see the module's doc). ``credit_of`` replaces the backend's credit
    assignment (a long trajectory's, fanned out)."""
    previous = [] if memory.previous_score is None else [memory.previous_score]
    # the mechanical reading: verdicts and the keep-list rest on it whatever the backend
    read = _measured(
        reward_analyzer.analyze(score, comment, previous, memory.wants, memory.reading_memory()),
        _output_words(spans),
    )
    wished = credit_assignment.wishes(read)
    approved = [a.want for a in read.aspects if a.sentiment == "positive" and a.want]
    taken_back = credit_assignment.takebacks(read)
    judged = outcome.judge(memory.pending, read, memory.session_id) if memory.pending else None
    if judged and memory.pending and memory.output_cut_off:
        judged = outcome.cut_off(memory.pending, judged, memory.session_id)
    if judged and memory.pending and memory.checks:
        judged = outcome.measured(memory.pending, judged, memory.checks, memory.session_id)

    # 2. roll back what the reviewer refuted, never a wish the reviewer has not taken back
    standing = wish_guard.protected(memory.wishes, taken_back, memory.cycle)
    report: list[str] = []
    refuted, undo, base = _roll_back(agent, memory, judged, standing, report)
    # 2b. take back what the reviewer takes back, at any age: the instructions its family put
    # there; a family nothing carries is refused instead ("lose the bullets" → prose)
    removals, instead = _take_back(base, taken_back, refuted, report)
    gone = {w.family for w in taken_back} | set(refuted)
    undone: set[str] = set()
    if any(w.family == "undo" for w in taken_back):
        # the rollback answers the complaint about the change ("too flippant now, undo that")
        undone = {c for f in refuted for c in contrary_of(f)}
    wished = [w for w in wished if w.family not in gone | undone] + instead

    # 3. read, credit and propose on the agent as restored
    analysis = (
        read
        if backend.reads_with_rules or memory.wants is not None or memory.recalled(comment)
        else await backend.analyze(score, comment, previous)
    )
    if instead:
        analysis = analysis.model_copy(
            update={"aspects": [*analysis.aspects, *(_aspect(w) for w in instead)]}
        )
    if analysis.read_by == "claude":  # its reading of the wishes is the one acted on
        wished = credit_assignment.wishes(analysis)
        approved = [a.want for a in analysis.aspects if a.sentiment == "positive" and a.want]
    # 4. no wish may break an active one the reviewer has not taken back
    refused = wish_guard.breaking(standing, wished)
    report += [wish_guard.kept(broken, family) for family, broken in refused.items()]
    wished = [w for w in wished if w.family not in refused]
    if credit_of is not None:
        credit = await credit_of(base, analysis)
    else:
        credit = await backend.assign_credit(base, analysis, list(spans))
    proposal = await backend.propose(
        base, analysis, credit, memory.sticky_directives + memory.oneshot_directives
    )
    reversed_now = {c for w in wished for c in contrary_of(w.family)} | gone
    keep = (set(memory.asked_for) - reversed_now) | (set(approved) - gone)
    # a family asked for again may have its instruction rewritten (made firmer), not removed
    requested = {w.family for w in wished}
    guarded = keep - requested
    proposal.changes = [c for c in proposal.changes if _keeps(base, c, guarded, report, standing)]
    # a model-backed trainer decides for itself how to go further; the rules engine is told
    if memory.output_cut_off:
        # what the reviewer misses may be what the cut took: more room, not firmer words
        strengthened = _raise_ceiling(base, wished, proposal, report)
    elif analysis.read_by == "rules":
        strengthened = _strengthen(base, wished, proposal, report)
    else:
        strengthened = []
    if analysis.read_by == "rules":
        _ground_the_step(base, wished, list(spans), read.comment or "", proposal)
    if analysis.read_by == "rules" and not memory.output_cut_off:
        own_failures = [
            c for c in memory.own_checks if not c.passed and c.family not in gone | set(refused)
        ]
        proposal.changes = (
            check_levers.levers(
                base, own_failures, proposal.changes, report, {w.family for w in memory.wishes}
            )
            + proposal.changes
        )
    proposal.changes = removals + [
        c for c in proposal.changes if c.want not in gone | undone | set(refused)
    ]

    # 5. history (never vetoing a request), directives, constraints
    plan = evolution_planner.finalize(
        base,
        proposal,
        memory.sticky_directives,
        memory.oneshot_directives,
        list(past),
        insights or {},
        requested=requested,
        lineage_id=memory.lineage_id,
    )
    plan.changes = undo + plan.changes
    after = apply_changes(agent, plan.changes) if plan.changes else agent
    if refuted:
        report.insert(0, f"rolled back {', '.join(refuted)}: {_reasons(judged, 'refuted')}")
    taken = [c.want for c in removals if c.want]
    if strengthened:
        plan.hypothesis = plan.hypothesis or (
            f"After strengthening {', '.join(strengthened)} the reviewer will stop asking for it."
        )
    report += [n for n in plan.notes if n.startswith(("skipped", "refused"))]
    report += [_refusal(request) for request in read.refused]
    if backend.hands_over and analysis.read_by == "claude":
        report.append("read by Claude: the rules engine could not act on this comment")
    understood = wished or approved or taken_back or read.adversarial or read.refused or refused
    if not understood and score < NOT_UNDERSTOOD_BELOW and read.comment:
        report.append(_not_understood(read.comment, read.comment_language))
    asked_for = _asked_for(
        memory.asked_for, reversed_now, wished, [a for a in approved if a not in gone]
    )
    wishes = active_wishes.fold(
        memory.wishes,
        wished=wished,
        approved=[a for a in read.aspects if a.sentiment == "positive" and a.want not in gone],
        taken_back=taken_back,
        asked_for=asked_for,
        comment=read.comment,
        cycle=memory.cycle,
        words=_output_words(spans),
    )
    # the record keeps what the rater is told beside the planner's own notes
    plan.notes = [*plan.notes, *(r for r in report if r not in plan.notes)]
    return CycleStep(
        judged=judged,
        analysis=analysis,
        credit=credit,
        plan=plan,
        agent=after,
        asked_for=asked_for,
        wishes=wishes,
        kept_wishes=wish_guard.said(report),
        rolled_back=refuted,
        taken_back=list(dict.fromkeys(taken)),
        strengthened=strengthened,
        report=report,
    )


def judge(memory: LineageMemory, score: float, comment: str | None) -> JudgedEvolution | None:
    """The verdict on the pending evolution alone, as a locked lineage's score gives it (a
    locked lineage does not train): the same judgement ``take`` makes first."""
    if memory.pending is None:
        return None
    previous = [] if memory.previous_score is None else [memory.previous_score]
    read = reward_analyzer.analyze(score, comment, previous, memory.wants, memory.reading_memory())
    judged = outcome.judge(memory.pending, read, memory.session_id)
    if memory.checks:
        judged = outcome.measured(memory.pending, judged, memory.checks, memory.session_id)
    return judged


def applied_insights(
    step: CycleStep, insights: dict[str, LearningInsight]
) -> list[tuple[str, EvolutionChange]]:
    """The session's insights the step's changes put to use: (insight id, change)."""
    named = ((pattern(c)[0], c) for c in step.plan.changes)
    return [(insights[name].id, c) for name, c in named if name in insights]


def pending_after(step: CycleStep, evolution_id: str) -> PendingEvolution | None:
    """The evolution the next score will judge."""
    return PendingEvolution.of(evolution_id, step.analysis, step.plan.changes)


def summary(step: CycleStep, from_version: int) -> str:
    """One line for people: what changed and why, or why nothing did."""
    if not step.changed:
        said = [r for r in step.report if not r.startswith("kept '") or r in step.kept_wishes]
        why = "; ".join(said or step.plan.notes) or "nothing to change"
        return f"kept v{from_version}: {why}"
    parts = []
    if step.rolled_back:
        parts.append(f"rolled back {', '.join(step.rolled_back)}")
    if step.taken_back:
        parts.append(f"took back {', '.join(step.taken_back)}")
    if step.strengthened:
        parts.append(f"strengthened {', '.join(step.strengthened)}")
    new = [
        c
        for c in step.new_changes
        if not c.reason.startswith((STRENGTHEN_REASON, TAKE_BACK_REASON))
    ]
    parts += [describe_change(c) for c in new]
    line = f"v{from_version}→v{from_version + 1}: " + "; ".join(parts)
    # what was protected is in the record's notes; the line says what did not happen
    skipped = [
        r
        for r in step.report
        if not r.startswith(("rolled back", "kept '")) or r in step.kept_wishes
    ]
    return line + (f" (also: {'; '.join(skipped)})" if skipped else "")


def corrected_summary(step: CycleStep, before: int, current: int) -> str:
    """The line for a step taken again on a corrected reading, in the lineage's versions: the
    version it makes follows ``current`` (the misread one), not ``before``."""
    if not step.changed and current != before:
        made = f"v{current}→v{current + 1}: back to v{before}, the corrected reading asks nothing"
    else:
        made = summary(step, current)
    return f"corrected: {made}"


SAID_BACK_CHARS = 400  # the reading said back: one line a rater reads in two seconds
SAID_QUOTE_CHARS = 40


def said_back(step: CycleStep) -> str:
    """How the comment was read, in one line: "Read as: warmer ('make it warmer'), example,
    one example ('one real example'); kept: casual ('better tone'); taken back: table ('scrap
    the table'); not understood: '…'"."""
    asked, kept, taken = [], [], []
    for a in step.analysis.aspects:
        if not a.want:
            continue
        quote = preview_of(" ".join((a.quote or "").split()), SAID_QUOTE_CHARS)
        if a.quote == f"wants {wants.render(a)}":
            quote = ""  # sent as a want, not read from words: nothing to quote
        what = a.want + (f", {a.amount.says()}" if a.amount else "")
        said = f"{what} ({quote!r})" if quote else what
        if a.action == "remove":
            taken.append(said if a.want != "undo" else f"the last change ({quote!r})")
        elif a.sentiment == "positive":
            kept.append(said)
        else:
            asked.append(said)
    parts = [f"Read as: {', '.join(asked)}" if asked else "Read as: no change asked for"]
    if kept:
        parts.append(f"kept: {', '.join(kept)}")
    if taken:
        parts.append(f"taken back: {', '.join(taken)}")
    parts += step.kept_wishes
    if step.analysis.adversarial:
        parts.append("set aside: words addressed to the trainer")
    missed = [r.removeprefix("not understood: ").split(": ")[0] for r in step.report
              if r.startswith("not understood")]  # fmt: skip
    if missed:
        parts.append(f"not understood: {missed[0]}")
    return preview_of("; ".join(parts), SAID_BACK_CHARS)


def _roll_back(
    agent: AgentDefinition,
    memory: LineageMemory,
    judged: JudgedEvolution | None,
    guarded: dict[str, ActiveWish],
    report: list[str],
) -> tuple[list[str], list[EvolutionChange], AgentDefinition]:
    """(refuted, undo, base): the families the verdict refuted (when the lineage rolls back),
    the inverses of the pending changes that brought them, and the agent with those undone.
    A refuted family the reviewer asked for and has not taken back stays (said back)."""
    refuted = [
        v.family or v.aspect
        for v in (judged.verdict.aspects if judged and memory.rollback_refuted else [])
        if v.verdict == "refuted"
    ]
    report += [wish_guard.kept(guarded[f]) for f in refuted if f in guarded]
    refuted = [f for f in refuted if f not in guarded]
    undo = [
        inverse(c)
        for c in reversed(memory.pending.changes if memory.pending else [])
        if c.want in refuted
    ]
    base = _applied(agent, undo)
    if len(undo) and base is agent:
        undo, refuted = [], []  # the agent moved on since: nothing left to undo
    return refuted, undo, base


def _refusal(request: str) -> str:
    """The note for a request the trainer never acts on: it asks for more than the answer."""
    return (
        f"refused {preview_of(request, EXCERPT_CHARS)!r}: it asks to change what the agent "
        "may do (its tools, permissions or system), not its answer; only the agent's owner "
        "changes those"
    )


def _not_understood(comment: str, language: str | None) -> str:
    """The note for a low score whose comment gave nothing to act on, with the likely cause
    (a language the rules engine does not read), so the rater knows to rephrase."""
    if language and language not in comment_languages.covered():
        why = (
            f"written in {language}, which the rules engine does not read (it reads "
            f"English, {', '.join(comment_languages.covered())})"
        )
    else:
        why = "the rules engine found nothing in it to act on"
    return (
        f"not understood: {preview_of(comment, EXCERPT_CHARS)!r}: {why}; rephrase, or "
        "let the Claude trainer read it"
    )


def _asked_for(
    before: list[str], reversed_now: set[str], wished: list[Wish], approved: list[str]
) -> list[str]:
    """The keep-list after this step: what was asked for and not reversed now, then each
    family newly wished (firmly) or approved; custom and focus name no family to keep."""
    asked_for = [f for f in before if f not in reversed_now]
    for family in [w.family for w in wished if not w.weak] + approved:
        if family not in asked_for and family not in ("custom", "focus"):
            asked_for.append(family)
    return asked_for


def _output_words(spans: Sequence[SpanRecord]) -> int | None:
    """The length in words of the scored output (its output span, else the last model call),
    its Markdown markup not counted (a table's pipes are not words)."""
    for kind in ("output", "llm_call"):
        texts = [s.output for s in sorted(spans, key=lambda s: s.sequence) if s.span_type == kind]
        if texts and texts[-1]:
            return Document.of(texts[-1]).words
    return None


def _measured(analysis: ScoreAnalysis, words: int | None) -> ScoreAnalysis:
    """The analysis with every share ("about half as long") made absolute against the scored
    output's length, so the instruction states the words ("about 250 words")."""
    if not words:
        return analysis
    aspects = [
        a.model_copy(update={"amount": a.amount.model_copy(update={"of_words": words})})
        if a.amount is not None and a.amount.kind == "share"
        else a
        for a in analysis.aspects
    ]
    return analysis.model_copy(update={"aspects": aspects})


CEILING_STEP = 2  # a budget that cut an answer off is doubled (within the constraints)


def _raise_ceiling(
    agent: AgentDefinition, wished: list[Wish], plan: EvolutionPlan, report: list[str]
) -> list[str]:
    """The scored output stopped at the token limit: the token budget goes up (once, for
    every wish the agent already carries) instead of any instruction being made firmer."""
    carried = [
        w
        for w in wished
        if w.family != "shorter"
        and any(w.family in credit_assignment.families_of(s) for s in segments(agent.system_prompt))
    ]
    cap = agent.parameters.max_tokens
    limit = agent.constraints.max_tokens or evolution_planner.LONGEST_MAX_TOKENS
    higher = min(limit, max(cap * CEILING_STEP, evolution_planner.SHORT_MAX_TOKENS))
    report.append(f"the scored output was cut off at the token limit ({cap} tokens)")
    if any(c.target == "maxTokens" for c in plan.changes) or not carried or higher <= cap:
        return []
    wish = carried[0]
    plan.changes.append(
        EvolutionChange(
            component="parameters",
            change_type="modify",
            target="maxTokens",
            before=str(cap),
            after=str(higher),
            reason=f"{STRENGTHEN_REASON}the output was cut off at the token limit before it "
            f"could show {', '.join(w.family for w in carried)} ({wish.quote!r})",
            confidence=wish.confidence,
            aspect=wish.aspect,
            want=wish.family,
        )
    )
    return [w.family for w in carried]


def _aspect(wish: Wish) -> FeedbackAspect:
    return FeedbackAspect(
        aspect=wish.aspect,
        sentiment="negative",
        quote=wish.quote,
        confidence=wish.confidence,
        want=wish.family,
        action=wish.action,
    )


def _take_back(
    agent: AgentDefinition, taken_back: list[Wish], refuted: list[str], report: list[str]
) -> tuple[list[EvolutionChange], list[Wish]]:
    """(changes, wishes): the removal of every instruction that carries a family taken back
    and not already rolled back with the last change; and for a family nothing carries, a
    wish for its opposite, if it has one ("no more tables" on an agent never told to use
    them asks for prose)."""
    changes: list[EvolutionChange] = []
    instead: list[Wish] = []
    for wish in taken_back:
        if wish.family == "undo":
            if not refuted:
                report.append(
                    f"nothing to undo: the last score's evolution changed nothing ({wish.quote!r})"
                )
            continue
        if wish.family in refuted:
            continue
        carrying = [
            s
            for s in segments(agent.system_prompt)
            if wish.family in credit_assignment.families_of(s)
        ]
        for segment in carrying:
            changes.append(
                EvolutionChange(
                    component="systemPrompt",
                    change_type="remove",
                    target="instruction",
                    before=segment,
                    after=None,
                    reason=f"{TAKE_BACK_REASON}the reviewer takes back {wish.family} "
                    f"({preview_of(wish.quote, EXCERPT_CHARS)!r})",
                    confidence=wish.confidence,
                    aspect=wish.aspect,
                    want=wish.family,
                )
            )
        opposite = opposite_of(wish.family)
        if not carrying and opposite:
            instead.append(replace(wish, family=opposite, action="add"))
        elif not carrying:
            report.append(f"{wish.family}: taken back, and no instruction of the agent asks for it")
    return changes, instead


def _applied(agent: AgentDefinition, changes: list[EvolutionChange]) -> AgentDefinition:
    """``agent`` with ``changes`` applied, skipping any the agent has moved away from."""
    for change in changes:
        try:
            agent = apply_changes(agent, [change])
        except ValueError:
            continue
    return agent


def _keeps(
    agent: AgentDefinition,
    change: EvolutionChange,
    keep: set[str],
    report: list[str],
    standing: dict[str, ActiveWish],
) -> bool:
    """False (with a note) when ``change`` would take away a family the reviewer asked for."""
    if change.component == "parameters":
        lost = _parameter_loss(change) & keep
    elif change.component == "systemPrompt" and change.change_type != "add":
        before = credit_assignment.families_of(change.before or "")
        after = credit_assignment.families_of(change.after or "")
        lost = (before - after) & keep
    else:
        lost = set()
    if lost & standing.keys():
        report += [wish_guard.kept(standing[f]) for f in sorted(lost & standing.keys())]
    elif lost:
        report.append(f"kept {change.before!r}: the reviewer asked for {', '.join(sorted(lost))}")
    return not lost


def _parameter_loss(change: EvolutionChange) -> set[str]:
    """The families a parameter move works against."""
    try:
        up = float(change.after or 0) > float(change.before or 0)
    except ValueError:
        return set()
    return working_against(change.target or "", "up" if up else "down")


def _strengthen(
    agent: AgentDefinition, wished: list[Wish], plan: EvolutionPlan, report: list[str]
) -> list[str]:
    """A wish the agent already carries, asked for again, and for which the proposal changes
    nothing: the instruction that carries it becomes firmer (and a length cap tighter)."""
    # an instruction the trainer wrote for the wish is already there: the planner's plain one
    # again would only repeat it, so the wish is strengthened instead
    written = {
        w.family
        for w in wished
        if any(
            t and t in agent.system_prompt
            for t in (instructions.instruction(w), instructions.firmer(w))
        )
    }
    plan.changes = [
        c
        for c in plan.changes
        if not (c.want in written and c.change_type == "add" and c.component == "systemPrompt")
    ]
    done = {c.want for c in plan.changes}
    stronger: list[str] = []
    for wish in wished:
        if wish.weak or wish.family in done or wish.action == "remove":
            continue
        carrying = [
            s
            for s in segments(agent.system_prompt)
            if wish.family in credit_assignment.families_of(s)
        ]
        if not carrying:
            continue
        firmer = instructions.firmer(wish)
        changes: list[EvolutionChange] = []
        if firmer and firmer not in agent.system_prompt:
            changes.append(
                _change(
                    wish,
                    component="systemPrompt",
                    change_type="modify",
                    target="instruction",
                    before=carrying[-1],
                    after=firmer,
                )
            )
        if changes:
            plan.changes += changes
            stronger.append(wish.family)
        else:
            report.append(
                f"{wish.family}: asked for again, and the agent already asks for it as firmly "
                "as the rules engine can; the model did not follow it"
            )
    return stronger


NO_INVENTION = "Use only facts and figures from the material above; never invent any."
_CITED = re.compile(r"\d[\d.,]*\s?%?|'[^']{3,60}'|\"[^\"]{3,60}\"")


def _ground_the_step(
    agent: AgentDefinition,
    wished: list[Wish],
    spans: list[SpanRecord],
    comment: str,
    plan: EvolutionPlan,
) -> None:
    """A flow agent that made something up: the step that first wrote what the reviewer
    points at (a figure, a quoted phrase) is told to use only the material it is given."""
    wish = next((w for w in wished if w.family == "no_fabrication"), None)
    if wish is None or not agent.flow:
        return
    step = _step_that_wrote(agent, spans, comment)
    if step is None or NO_INVENTION in step.prompt:
        return
    plan.changes.append(
        EvolutionChange(
            component="flow",
            change_type="modify",
            target=step.name,
            before=step.prompt,
            after=f"{step.prompt.rstrip()} {NO_INVENTION}",
            reason=f"step {step.name!r} wrote what the reviewer says is not in the material "
            f"({wish.quote!r})",
            confidence=wish.confidence,
            aspect=wish.aspect,
            want=wish.family,
        )
    )


def _step_that_wrote(
    agent: AgentDefinition, spans: list[SpanRecord], comment: str
) -> FlowStep | None:
    """The first flow step whose output holds what the comment cites; else the first step
    that writes from earlier steps' output (the draft), else the last."""
    by_name = {s.name: s for s in agent.flow}
    cited = [c.strip(" '\"") for c in _CITED.findall(comment)]
    calls = sorted(
        (s for s in spans if s.span_type == "llm_call" and s.name in by_name),
        key=lambda s: s.sequence,
    )
    for span in calls:
        if cited and any(c and c in (span.output or "") for c in cited):
            return by_name[span.name or ""]
    earlier = set()
    for step in agent.flow:
        if not step.tools and any(f"{{{name}}}" in step.prompt for name in earlier):
            return step
        earlier.add(step.name)
    return agent.flow[-1]


def _change(wish: Wish, **fields: str) -> EvolutionChange:
    return EvolutionChange(
        **fields,  # type: ignore[arg-type]
        reason=f"{STRENGTHEN_REASON}asked for again ({wish.quote!r})",
        confidence=wish.confidence,
        aspect=wish.aspect,
        want=wish.family,
    )


def _reasons(judged: JudgedEvolution | None, verdict: str) -> str:
    if judged is None:
        return ""
    return "; ".join(v.reason for v in judged.verdict.aspects if v.verdict == verdict)
