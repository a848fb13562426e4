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

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from pydantic import BaseModel, Field, PrivateAttr

from domain import trace, want_labels, wants
from domain.agent import AgentDefinition, FlowStep
from domain.change_families import aspect_of, contrary_of, opposite_of, working_against
from domain.checks import ActiveWish, CheckResult, failed
from domain.corrections import LabelledExample
from domain.cycle_decision import CycleStep
from domain.execution import SpanRecord, preview_of
from domain.reading_preview import change_words
from domain.trainer import (
    REVERT,
    CreditAssignment,
    EvolutionChange,
    EvolutionPlan,
    FeedbackAspect,
    JudgedEvolution,
    LearningInsight,
    PastChange,
    ScoreAnalysis,
    change_key,
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
    tool_flow,
    wish_guard,
)
from trainer.backends import TrainerBackend
from trainer.change_patterns import pattern
from trainer.checks import Document
from trainer.evolution import (
    PARAMETER_TARGETS,
    POSITION,
    ROLLBACK_REASON,
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
# how the report line of a rollback opens: the preview shows the rollback as its changes, and
# lists no such line among what is not done
ROLLED_BACK = "rolled back "
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
    # the keys of the plan's changes the rater saw and confirmed: the step makes those and no
    # other (None: no plan was confirmed, the step makes its own and says it back after)
    confirmed: list[str] | None = None
    # several raters: ``confirmed`` is every key any of them confirmed (a change none of
    # them confirmed is not made; one for a wish they did not agree on is simply not planned)
    confirmed_by_several: bool = False
    # raters' corrections of earlier readings (the session's, or every session's), consulted
    # before the cue tables: a close comment is read as its correction said
    corrections: list[LabelledExample] = Field(default_factory=list)
    # several raters: the verdict on the pending evolution by a majority of those who judged
    # it, each from their own reading (trainer/outcome.by_majority); the step rolls back on it
    raters_judged: JudgedEvolution | None = None
    # the calls of the scored output's run, numbered as its trace shows them: a call pointed
    # at by its place ("the fourth call") is the one at that place (empty: not known here)
    calls: list[trace.TracedCall] = Field(default_factory=list)
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
VersionOf = Callable[[int], AgentDefinition | None]
# the wishes standing on a version and its keep-list, as the store recorded them (None: none
# recorded for it)
StandingOf = Callable[[int], tuple[list[ActiveWish], list[str]] | None]


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
    versions: VersionOf | None = None,
    standing: StandingOf | None = None,
) -> CycleStep:
    """The whole cycle step (see the module's doc). ``credit_of`` replaces the backend's credit
    assignment (a long trajectory's, fanned out); ``versions`` gives the lineage's earlier
    versions, for a reviewer who asks to go back to one, and ``standing`` the wishes that stood
    on each. Bound to the plan the rater confirmed, if one was (``memory.confirmed``)."""
    step = await _planned(
        backend, agent, memory, score, comment, spans, past, insights, credit_of, versions,
        standing,
    )  # fmt: skip
    return bound(agent, step, memory.confirmed, memory.confirmed_by_several, memory)


async def _planned(
    backend: TrainerBackend,
    agent: AgentDefinition,
    memory: LineageMemory,
    score: float,
    comment: str | None,
    spans: Sequence[SpanRecord],
    past: Sequence[PastChange],
    insights: dict[str, LearningInsight] | None,
    credit_of: CreditOf | None,
    versions: VersionOf | None,
    standing: StandingOf | None = None,
) -> CycleStep:
    # the mechanical reading: verdicts and the keep-list rest on it whatever the backend
    read = _softened(rules_reading(memory, score, comment, spans))
    wished = credit_assignment.wishes(read)
    approved = [a.want for a in read.aspects if a.sentiment == "positive" and a.want]
    taken_back = _about_earlier(credit_assignment.takebacks(read), memory)
    judged = memory.raters_judged or _judged(memory, read)

    reverting = next((w for w in taken_back if w.family == "revert"), None)
    reverting = reverting or _unreverting(memory, judged, taken_back)
    if reverting is not None:
        return _revert(agent, memory, read, judged, reverting, versions, standing)

    # 2. roll back what the reviewer refuted, never a wish the reviewer has not taken back
    standing = wish_guard.protected(memory.wishes, taken_back, memory.cycle)
    report: list[str] = []
    refuted, undo, base = _roll_back(agent, memory, judged, standing, report)
    # 2b. take back what the reviewer takes back, at any age: the instructions its family put
    # there; a family nothing carries is refused instead ("lose the bullets" → prose)
    removals, instead = _take_back(base, taken_back, refuted, report, wished)
    gone = {w.family for w in taken_back} | set(refuted)
    undone: set[str] = set()
    if any(w.family == "undo" for w in taken_back):
        # the rollback answers the complaint about the change ("too flippant now, undo that")
        undone = {c for f in refuted for c in contrary_of(f)}
    wished = [w for w in wished if w.family not in gone | undone] + instead

    # 3. read, credit and propose on the agent as restored
    analysis = await backend_reading(backend, memory, read, score, comment)
    analysis, wished, approved = _joined(analysis, wished, approved, instead, gone | undone)
    # a tool or flow wish changes the tool, step or edge it names (trainer/tool_flow.py), not
    # the prompt: the prompt's planning never sees it
    wished = [w for w in wished if not tool_flow.is_typed(w.family)]
    approved = [a for a in approved if not tool_flow.is_typed(a)]
    report += [f"read by Claude: {c!r}" for c in analysis.handed_over]
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
    still = _carried_after(base, proposal.changes)
    proposal.changes = [
        c for c in proposal.changes if _keeps(base, c, guarded, report, standing, still)
    ]
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
    # a reviewer content with the answer ("That's right. I'll print it.") changes nothing,
    # not even through the levers of a check the agent's first try failed
    content = score >= reward_analyzer.KEEP_SCORE and not (wished or taken_back)
    if analysis.read_by == "rules" and not memory.output_cut_off and not content:
        own_failures = [c for c in failed(memory.own_checks) if c.family not in gone | set(refused)]
        if memory.wants is not None:
            # the rater confirmed what the step acts on: no lever (a moved instruction, a form
            # example) for a check whose wish the rater did not confirm this time
            confirmed = {w.family for w in wished} | {w.family for w in taken_back}
            own_failures = [c for c in own_failures if c.family in confirmed]
        proposal.changes = (
            check_levers.levers(
                base,
                own_failures,
                proposal.changes,
                report,
                {w.family for w in active_wishes.measured(memory.wishes)},
            )
            + proposal.changes
        )
    # a sentence the take-back already removes is not removed a second time by the plan (a
    # wish for prose also takes out the table instruction the rater took back), and one the
    # plan would rewrite is added afresh ("a chatty voice instead of a formal register")
    removed = {c.before for c in removals}
    proposal.changes = removals + [
        c.model_copy(update={"change_type": "add", "target": "instruction", "before": None})
        if c.change_type == "modify" and c.before in removed
        else c
        for c in proposal.changes
        if c.want not in gone | undone | set(refused)
        and not (c.change_type == "remove" and c.before in removed)
    ]

    first = versions(1) if versions is not None else None
    requested |= tool_flow.shape(base, analysis, proposal, report, first, refuted)

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
    after = _one_overriding(agent, after, plan)
    if refuted:
        said = want_labels.families_words(refuted)
        report.insert(0, f"{ROLLED_BACK}{said}: {_reasons(judged, 'refuted')}")
    taken = [c.want for c in removals if c.want]
    strengthened += [
        c.want
        for c in plan.changes
        if c.want and c.reason.startswith(STRENGTHEN_REASON) and c.want not in strengthened
    ]
    if strengthened:
        plan.hypothesis = plan.hypothesis or (
            f"With {want_labels.families_words(strengthened)} asked for more firmly, the "
            "reviewer will stop asking for it."
        )
    takebacks = [c for c in plan.changes if c.reason.startswith(TAKE_BACK_REASON)]
    plan.hypothesis = plan.hypothesis or _hypothesis(plan.changes, refuted, takebacks)
    report += [n for n in plan.notes if n.startswith(("skipped", "refused"))]
    report += [_refusal(request) for request in read.refused]
    if backend.hands_over and analysis.read_by == "claude":
        report.append("read by Claude: the rules engine could not act on this comment")
    report += [f"not understood: {u.quote!r}: {u.why}" for u in analysis.unsure]
    acted = bool(wished or approved or taken_back or refused)
    report += _not_understood_notes(read, memory, score, acted)
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
        dropped=gone | undone,
    )
    # the record keeps what the rater is told beside the planner's own notes
    plan.notes = [*plan.notes, *(r for r in report if r not in plan.notes)]
    if taken_back:  # a take-back said in the report is the wish acted on, though none is added
        plan.notes = [n for n in plan.notes if n != evolution_planner.NO_ACTIONABLE_WISH]
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


def bound(
    agent: AgentDefinition,
    step: CycleStep,
    confirmed: list[str] | None,
    several: bool = False,
    memory: LineageMemory | None = None,
) -> CycleStep:
    """``step`` making only the changes the rater confirmed (``confirmed``: their keys, as the
    preview showed them), each said when left out: one the rater dropped, one the preview did
    not show (the lineage changed between the preview and the score: a directive came, the
    session learned something), one confirmed that the step no longer plans. None: ``step``
    as planned (no plan was confirmed: a raw signal, a correction, a Claude trainer). A
    refuted change whose rollback the rater left out stays: it is not said to be rolled back,
    its verdict says the rater kept it, and its wish stands (``memory``: the step's own)."""
    if confirmed is None:
        return step
    keys = set(confirmed)
    planned = {change_key(c) for c in step.plan.changes}
    if planned == keys:
        return step
    notes: list[str] = []
    made: list[EvolutionChange] = []
    after = agent
    for change in step.plan.changes:
        if change_key(change) not in keys:
            whose = "any rater" if several else "you"
            notes.append(f"not made: {change_words(change)}: not in the plan {whose} confirmed")
            continue
        try:
            after = apply_changes(after, [change])
        except ValueError as exc:  # it rested on a change left out
            notes.append(f"not made: {change_words(change)}: {exc}")
            continue
        made.append(change)
    if keys - planned and not several:
        notes.append(
            f"not made: {len(keys - planned)} change(s) you confirmed that the step no longer "
            "plans (the lineage changed since the preview)"
        )

    def still(families: list[str], reason: str) -> list[str]:
        return [
            f for f in families if any(c.want == f and c.reason.startswith(reason) for c in made)
        ]

    kept = _rollback_left_out(step, made, memory)
    rolled = [f for f in step.rolled_back if f not in kept]
    if not any(c.reason.startswith(ROLLBACK_REASON) for c in made):
        kept, rolled = [f for f in step.rolled_back], []
    if kept and memory is not None:
        step = _keeping(step, kept, rolled, made, memory)
    return step.model_copy(
        update={
            "plan": step.plan.model_copy(
                update={"changes": made, "notes": [*step.plan.notes, *notes]}
            ),
            "agent": after,
            "rolled_back": rolled,
            "taken_back": still(step.taken_back, TAKE_BACK_REASON),
            "strengthened": still(step.strengthened, STRENGTHEN_REASON),
            "report": [*step.report, *notes],
        }
    )


def _rollback_left_out(
    step: CycleStep, made: list[EvolutionChange], memory: LineageMemory | None
) -> list[str]:
    """The refuted families none of whose rollback changes the rater confirmed."""
    if memory is None or memory.pending is None or not step.rolled_back:
        return []
    undone = {c.reason for c in made if c.reason.startswith(ROLLBACK_REASON)}
    kept = []
    for family in step.rolled_back:
        own = [c for c in memory.pending.changes if tool_flow.judged_as(c) == family]
        if own and not any(f"{ROLLBACK_REASON}{c.reason}" in undone for c in own):
            kept.append(family)
    return kept


def _keeping(
    step: CycleStep,
    kept: list[str],
    rolled: list[str],
    made: list[EvolutionChange],
    memory: LineageMemory,
) -> CycleStep:
    """``step`` with the refuted ``kept`` kept (the rater left their rollback out of the
    plan): their verdict says so, their standing wishes and keep-list stay, and the report and
    the hypothesis name only what was rolled back (``rolled``)."""
    judged = step.judged
    if judged is not None and memory.pending is not None:
        judged = outcome.kept(memory.pending, judged, kept, memory.session_id)
    have = {w.key for w in step.wishes}
    wishes = [*step.wishes, *(w for w in memory.wishes if w.family in kept and w.key not in have)]
    asked_for = step.asked_for + [
        f for f in memory.asked_for if f in kept and f not in step.asked_for
    ]
    line = next((r for r in step.report if r.startswith(ROLLED_BACK)), None)
    said = None
    if line and rolled:
        said = f"{ROLLED_BACK}{want_labels.families_words(rolled)}: {line.split(': ', 1)[-1]}"

    def lines(old: list[str]) -> list[str]:
        return [said if r == line else r for r in old if r != line or said]

    hypothesis = step.plan.hypothesis
    takebacks = [c for c in step.plan.changes if c.reason.startswith(TAKE_BACK_REASON)]
    if hypothesis == _hypothesis(step.plan.changes, step.rolled_back, takebacks):
        made_back = [c for c in made if c.reason.startswith(TAKE_BACK_REASON)]
        hypothesis = _hypothesis(made, rolled, made_back)
    plan = step.plan.model_copy(update={"notes": lines(step.plan.notes), "hypothesis": hypothesis})
    return step.model_copy(
        update={
            "judged": judged,
            "wishes": wishes,
            "asked_for": asked_for,
            "report": lines(step.report),
            "plan": plan,
        }
    )


def rules_reading(
    memory: LineageMemory, score: float, comment: str | None, spans: Sequence[SpanRecord] = ()
) -> ScoreAnalysis:
    """The mechanical reading of a score's comment: the wants sent with it, else a correction
    it is close to, else the cue tables; shares made absolute against the scored output."""
    previous = [] if memory.previous_score is None else [memory.previous_score]
    return _pointed(
        _measured(
            reward_analyzer.analyze(
                score, comment, previous, memory.wants, memory.reading_memory()
            ),
            _output_words(spans),
        ),
        memory,
    )


def _pointed(analysis: ScoreAnalysis, memory: LineageMemory) -> ScoreAnalysis:
    """A tool wish that points at a call by its place ("the fourth call was pointless") is
    about the call at that place in the scored cycle's trace: its tool, said back with the
    place; or, when a model call is there or no call at all, said so."""
    if not memory.calls:
        return analysis
    aspects = [
        a.model_copy(update={"detail": trace.pointed(a.detail, memory.calls, memory.cycle)})
        if a.want == "tool_use" and a.detail
        else a
        for a in analysis.aspects
    ]
    return analysis.model_copy(update={"aspects": aspects})


def _about_earlier(taken_back: list[Wish], memory: LineageMemory) -> list[Wish]:
    """An undo that names an aspect the last change did not touch ("forget what I said about
    the list" after the list came in earlier) takes back the families of that aspect the
    reviewer asked for, at any age."""
    pursued = {c.aspect for c in (memory.pending.changes if memory.pending else []) if c.want}
    out: list[Wish] = []
    for wish in taken_back:
        if wish.family != "undo" or wish.aspect in ("overall", *pursued):
            out.append(wish)
            continue
        earlier = [f for f in memory.asked_for if aspect_of(f) == wish.aspect]
        out += [replace(wish, family=f, action="remove") for f in earlier] or [wish]
    return out


def _revert(
    agent: AgentDefinition,
    memory: LineageMemory,
    read: ScoreAnalysis,
    judged: JudgedEvolution | None,
    wish: Wish,
    versions: VersionOf | None,
    standing: StandingOf | None = None,
) -> CycleStep:
    """Back to an earlier version, all of it: the prompt, parameters, tools and flow become
    that version's, byte for byte, and nothing else of the comment is acted on (what else it
    says is why). The wishes that stood on that version stand again, with its keep-list (an
    instruction brought back brings back its check); where none were recorded, the families
    that version's instructions ask for are what stays asked for."""
    number = wants.version_of(wish.detail)
    target = versions(number) if versions is not None and number is not None else None
    quote = preview_of(wish.quote, EXCERPT_CHARS)
    credit = CreditAssignment(mode="prompt")
    if target is None:
        report = [f"not understood: {quote!r}: there is no version {wish.detail} to go back to"]
        plan = EvolutionPlan(notes=report)
        return CycleStep(
            judged=judged, analysis=read, credit=credit, plan=plan, agent=agent,
            asked_for=memory.asked_for, wishes=memory.wishes, report=report,
        )  # fmt: skip
    changes = [
        c.model_copy(update={"want": REVERT, "aspect": "overall"})
        for c in _changes_to(agent, target, f"the reviewer goes back to v{number} ({quote!r})")
    ]
    after = apply_changes(agent, changes) if changes else agent
    kept = {f for s in segments(target.system_prompt) for f in credit_assignment.families_of(s)}
    report = [f"back to v{number}: prompt and parameters as they were"]
    plan = EvolutionPlan(
        changes=changes, hypothesis=f"v{number} is what the reviewer wants back.", notes=report
    )
    restored = standing(number) if standing is not None and number is not None else None
    if restored is not None:
        wishes, asked_for = restored
    else:
        asked_for = [f for f in memory.asked_for if f in kept]
        # a wish for a form that version asks for is checked on; a take-back of one it asks
        # for ("no bullets" before going back to a version with bullets) is not
        wishes = [w for w in memory.wishes if (w.action == "remove") != (w.family in kept)]
    return CycleStep(
        judged=judged, analysis=read, credit=credit, plan=plan, agent=after,
        asked_for=list(asked_for), wishes=list(wishes), report=report,
    )  # fmt: skip


def _unreverting(
    memory: LineageMemory, judged: JudgedEvolution | None, taken_back: list[Wish]
) -> Wish | None:
    """A revert refuted (the rater undoes it), on a lineage that rolls back what is refuted:
    back to the version the revert left, its wishes with it, as a revert to it would."""
    pending = memory.pending
    if pending is None or pending.reverted_from is None or not memory.rollback_refuted:
        return None
    verdicts = judged.verdict.aspects if judged else []
    if not any(v.family == REVERT and v.verdict == "refuted" for v in verdicts):
        return None
    undo = next((w for w in taken_back if w.family == "undo"), None)
    quote = undo.quote if undo else "the raters refuted the revert"
    version = str(pending.reverted_from)
    return Wish(REVERT, "overall", quote, 0.9, detail=version, action="remove")


def _changes_to(
    agent: AgentDefinition, target: AgentDefinition, reason: str
) -> list[EvolutionChange]:
    """The changes that turn ``agent`` into ``target``: the whole prompt, each parameter that
    differs, and each tool or flow step by name."""
    changes: list[EvolutionChange] = []

    def change(component: str, kind: str, name: str, before: str | None, after: str | None):
        changes.append(
            EvolutionChange(
                component=component,  # type: ignore[arg-type]
                change_type=kind,  # type: ignore[arg-type]
                target=name,
                before=before,
                after=after,
                reason=f"{ROLLBACK_REASON}{reason}",
                confidence=1.0,
            )
        )

    if agent.system_prompt != target.system_prompt:
        change("systemPrompt", "modify", "prompt", agent.system_prompt, target.system_prompt)
    now, then = agent.parameters, target.parameters
    for name, field in PARAMETER_TARGETS.items():
        if getattr(now, field) != getattr(then, field) and getattr(then, field) is not None:
            change(
                "parameters", "modify", name, str(getattr(now, field)), str(getattr(then, field))
            )
    for component, items, wanted in (
        ("tools", agent.tools, target.tools),
        ("flow", agent.flow, target.flow),
    ):
        had = {i.name: i.model_dump(mode="json", by_alias=True) for i in items}
        want = {i.name: i.model_dump(mode="json", by_alias=True) for i in wanted}
        for name in had.keys() - want.keys():
            change(component, "remove", name, json.dumps(had[name]), None)
        # in the target's order, each at its place there (a step taken out mid-flow comes
        # back where it was, not at the end)
        for at, name in enumerate(want):
            if name not in had:
                placed = {**want[name], POSITION: at} if component == "flow" else want[name]
                change(component, "add", name, None, json.dumps(placed))
        for name in had.keys() & want.keys():
            if had[name] != want[name]:
                change(component, "modify", name, json.dumps(had[name]), json.dumps(want[name]))
    return changes


def _softened(read: ScoreAnalysis) -> ScoreAnalysis:
    """A wish for less of a family ("less:casual", "tone the cheerfulness down") takes back
    the instruction that asks for it, or where none does asks for its opposite, as any
    take-back does: it never makes that instruction firmer."""
    if not any(a.action == "less" for a in read.aspects):
        return read
    aspects = [
        a.model_copy(update={"action": "remove"}) if a.action == "less" else a for a in read.aspects
    ]
    return read.model_copy(update={"aspects": aspects})


def _joined(
    analysis: ScoreAnalysis,
    wished: list[Wish],
    approved: list[str],
    instead: list[Wish],
    gone: set[str],
) -> tuple[ScoreAnalysis, list[Wish], list[str]]:
    """(analysis, wished, approved) the change is planned on: what Claude read in the clauses
    the rules engine abstained on joins the reading; the opposites of take-backs join the
    analysis; a reading Claude made of the whole comment is the one acted on."""
    if analysis.handed_over:
        handed = [a for a in analysis.aspects if a.quote in analysis.handed_over]
        more = credit_assignment.wishes(analysis.model_copy(update={"aspects": handed}))
        wished = wished + [w for w in more if w.family not in gone]
        approved = approved + [a.want for a in handed if a.sentiment == "positive" and a.want]
    if instead:
        analysis = analysis.model_copy(
            update={"aspects": [*analysis.aspects, *(_aspect(w) for w in instead)]}
        )
    if analysis.read_by == "claude":  # its reading of the wishes is the one acted on
        wished = credit_assignment.wishes(analysis)
        approved = [a.want for a in analysis.aspects if a.sentiment == "positive" and a.want]
    return analysis, wished, approved


async def backend_reading(
    backend: TrainerBackend,
    memory: LineageMemory,
    read: ScoreAnalysis,
    score: float,
    comment: str | None,
) -> ScoreAnalysis:
    """The reading the change is planned on: the rules engine's ``read`` (already made), or the
    backend's; a hand-over backend is given the corrections to show Claude. The preview of a
    reading (``trainer/preview.py``) calls it as the step does."""
    if backend.reads_with_rules or memory.wants is not None or memory.recalled(comment):
        return read
    previous = [] if memory.previous_score is None else [memory.previous_score]
    if backend.hands_over:
        return await backend.analyze(score, comment, previous, memory.reading_memory())
    return await backend.analyze(score, comment, previous)


def _judged(memory: LineageMemory, read: ScoreAnalysis) -> JudgedEvolution | None:
    """The verdict on the pending evolution from one reading of the score: the reviewer's
    words, then the output cut off, then what the output measured."""
    if memory.pending is None:
        return None
    judged = outcome.judge(memory.pending, read, memory.session_id)
    if memory.output_cut_off:
        judged = outcome.cut_off(memory.pending, judged, memory.session_id)
    if memory.checks:
        judged = outcome.measured(memory.pending, judged, memory.checks, memory.session_id)
    return judged


def rater_verdict(
    memory: LineageMemory, score: float, comment: str | None, spans: Sequence[SpanRecord] = ()
) -> JudgedEvolution | None:
    """One rater's verdict on the pending evolution, from their score and their reading (the
    wants they confirmed, ``memory.wants``, or their comment), as ``take`` judges one score."""
    return _judged(memory, _softened(rules_reading(memory, score, comment, spans)))


def judge(memory: LineageMemory, score: float, comment: str | None) -> JudgedEvolution | None:
    """The verdict on the pending evolution alone, as a locked lineage's score gives it (a
    locked lineage does not train): the same judgement ``take`` makes first."""
    if memory.pending is None:
        return None
    if memory.raters_judged is not None:
        return memory.raters_judged
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


def summary(step: CycleStep, from_version: int, rebuilt_from: int | None = None) -> str:
    """One line for people: what changed and why, or why nothing did; ``rebuilt_from`` names
    the version a correction planned on, when it is not ``from_version``."""
    if not step.changed:
        said = [r for r in step.report if not r.startswith("kept '") or r in step.kept_wishes]
        why = "; ".join(said or step.plan.notes) or "nothing to change"
        return f"kept v{from_version}: {why}"
    parts = []  # in the chips' words, never a family's name
    if step.rolled_back:
        parts.append(f"rolled back {want_labels.families_words(step.rolled_back)}")
    if step.taken_back:
        parts.append(f"took back {want_labels.families_words(step.taken_back)}")
    if step.strengthened:
        parts.append(f"made firmer: {want_labels.families_words(step.strengthened)}")
    new = [
        c
        for c in step.new_changes
        if not c.reason.startswith((STRENGTHEN_REASON, TAKE_BACK_REASON))
    ]
    parts += [describe_change(c) for c in new]
    parts += [r for r in step.report if r.startswith("back to v")]  # a revert says where to
    base = f" (rebuilt from v{rebuilt_from})" if rebuilt_from not in (None, from_version) else ""
    line = f"v{from_version}→v{from_version + 1}{base}: " + "; ".join(parts)
    # what was protected is in the record's notes; the line says what did not happen
    skipped = [
        r
        for r in step.report
        if not r.startswith(("rolled back", "kept '", "back to v")) or r in step.kept_wishes
    ]
    return line + (f" (also: {'; '.join(skipped)})" if skipped else "")


def corrected_summary(step: CycleStep, before: int, current: int) -> str:
    """The line for a step taken again on a corrected reading, in the lineage's versions: the
    version it makes follows ``current`` (the misread one), not ``before``."""
    if not step.changed and current != before:
        made = f"v{current}→v{current + 1}: back to v{before}, the corrected reading asks nothing"
    else:
        made = summary(step, current, rebuilt_from=before)
    return f"corrected: {made}"


SAID_BACK_CHARS = 400  # the reading said back: one line a rater reads in two seconds
SAID_QUOTE_CHARS = 40


def said_back(step: CycleStep, not_agreed: Sequence[str] = ()) -> str:
    """How the comment was read, in one line and in the words the chips use: "Read as: warmer
    ('make it warmer'), one example ('one real example'); kept: casual tone ('better tone');
    taken back: table ('scrap the table'); not understood: '…'". Several raters: the step
    reads what they agreed on, and ``not_agreed`` (``Agreement.not_agreed``) is what was
    asked and not agreed on, said too: "Read as: no change agreed — shorter (ana) against
    longer (bo)"."""
    return say_back(step.analysis, step.report, step.kept_wishes, not_agreed, step.rolled_back)


def say_back(
    analysis: ScoreAnalysis,
    report: Sequence[str] = (),
    kept_wishes: Sequence[str] = (),
    not_agreed: Sequence[str] = (),
    rolled_back: Sequence[str] = (),
) -> str:
    """``said_back`` of a reading and the step's report lines (the preview says a reading
    before any step is taken); ``rolled_back``: the families the step rolled back."""
    asked, kept, taken = _grouped(analysis)
    if asked:
        parts = [f"Read as: {', '.join(asked)}"]
        if not_agreed:
            parts.append(f"not agreed: {'; '.join(not_agreed)}")
    elif not_agreed:
        # changes were asked for, by too few or against one another: none was agreed on
        # a rollback the same step made is a change: "no change agreed" alone would deny it
        back = want_labels.families_words(list(rolled_back))
        agreed = (
            f"no new change agreed, the last change rolled back ({back})"
            if back
            else "no change agreed"
        )
        parts = [f"Read as: {agreed} — {'; '.join(not_agreed)}"]
    elif taken:
        # a take-back is what was asked: never "no change asked for" beside it
        parts = [f"Read as: take back {', '.join(taken)}"]
        taken = []
    else:
        parts = ["Read as: no change asked for"]
    if kept:
        parts.append(f"kept: {', '.join(kept)}")
    if taken:
        parts.append(f"taken back: {', '.join(taken)}")
    parts += kept_wishes
    if analysis.adversarial:
        parts.append("set aside: words addressed to the trainer")
    missed = [r.removeprefix("not understood: ").split(": ")[0] for r in report
              if r.startswith("not understood")]  # fmt: skip
    if missed:
        parts.append(f"not understood: {missed[0]}")
    return preview_of("; ".join(parts), SAID_BACK_CHARS)


NOT_AGREED_NOTE = "no wish the raters agreed on (see the disagreements)"


def raters_kept(line: str) -> str:
    """A "kept" summary of several raters' step whose wishes were disputed or too few: the
    planner's "no actionable wish" would say no one asked for anything."""
    return line.replace(evolution_planner.NO_ACTIONABLE_WISH, NOT_AGREED_NOTE)


def _grouped(analysis: ScoreAnalysis) -> tuple[list[str], list[str], list[str]]:
    """(asked, kept, taken back): each wish of the reading in the chips' words, with the
    rater's words it was read from."""
    asked, kept, taken = [], [], []
    for a in analysis.aspects:
        if not a.want:
            continue
        quote = preview_of(" ".join((a.quote or "").split()), SAID_QUOTE_CHARS)
        if want_labels.sent_want(a.quote) is not None:
            quote = ""  # sent as a want (or made from one), not read from words: no quote
        quoted = f" ({quote!r})" if quote else ""
        what = want_labels.wish_words(a)  # the rater's words, never a family's name
        if a.want == "revert":
            asked.append(f"back to {'the start' if a.detail == 'start' else f'v{a.detail}'}")
            asked[-1] += quoted
        elif a.action == "remove":
            taken.append(("the last change" if a.want == "undo" else what) + quoted)
        elif a.sentiment == "positive":
            kept.append(what + quoted)
        else:
            asked.append(what + quoted)
    return asked, kept, taken


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
        if tool_flow.judged_as(c) in refuted
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


def not_understood(reading: ScoreAnalysis) -> list[str]:
    """The step's "not understood" lines for a reading, as the preview says them: each clause
    it could not place, else the whole comment of a low score in which it found nothing."""
    lines = [f"not understood: {u.quote!r}: {u.why}" for u in reading.unsure]
    understood = any(a.want for a in reading.aspects) or reading.adversarial or reading.refused
    if not (lines or understood) and reading.score < NOT_UNDERSTOOD_BELOW and reading.comment:
        lines.append(_not_understood(reading.comment, reading.comment_language))
    return lines


def _not_understood_notes(
    read: ScoreAnalysis, memory: LineageMemory, score: float, acted: bool
) -> list[str]:
    """The note for a low score whose comment gave nothing to act on or keep, unless the
    reading already said what it could not place or came from the rater's own wants."""
    praised = any(a.sentiment == "positive" for a in read.aspects)
    understood = acted or praised or read.adversarial or read.refused
    given = memory.wants is not None  # the rater's own wants: nothing to misunderstand
    if understood or given or read.unsure or score >= NOT_UNDERSTOOD_BELOW or not read.comment:
        return []
    return [_not_understood(read.comment, read.comment_language)]


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
            f"could show {want_labels.families_words([w.family for w in carried])} "
            f"({wish.quote!r})",
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
    agent: AgentDefinition,
    taken_back: list[Wish],
    refuted: list[str],
    report: list[str],
    wished: list[Wish],
) -> tuple[list[EvolutionChange], list[Wish]]:
    """(changes, wishes): the removal of every instruction that carries a family taken back,
    on the agent as the rollback left it; and for a family nothing carries, a
    wish for its opposite, if it has one and nothing else of its aspect is asked for ("no
    more tables" on an agent never told to use them asks for prose; "a table, not
    paragraphs" asks for the table only)."""
    asked = {w.aspect for w in wished}
    changes: list[EvolutionChange] = []
    instead: list[Wish] = []
    for wish in taken_back:
        if wish.family == "revert":
            continue  # a revert is a step of its own (``_revert``)
        if wish.family == "undo":
            if not refuted:
                report.append(
                    f"nothing to undo: the last score's evolution changed nothing ({wish.quote!r})"
                )
            continue
        step = _check_step_of(agent) if wish.family == "check_step" else None
        if step is not None:
            # the checking step it asked for is a step of the flow: that step goes
            changes.append(
                EvolutionChange(
                    component="flow",
                    change_type="remove",
                    target=step.name,
                    before=json.dumps(
                        {
                            **step.model_dump(mode="json", by_alias=True),
                            POSITION: agent.flow.index(step),  # an undo puts it back there
                        }
                    ),
                    after=None,
                    reason=f"{TAKE_BACK_REASON}the reviewer takes back the {step.name} step "
                    f"({preview_of(wish.quote, EXCERPT_CHARS)!r})",
                    confidence=wish.confidence,
                    aspect=wish.aspect,
                    want=wish.family,
                )
            )
            continue
        carrying = [s for s in segments(agent.system_prompt) if credit_assignment.carries(s, wish)]
        if wish.family in refuted:
            # the rollback took it out; one that restored an older instruction of its own
            # ("undo that, and drop the chatty tone altogether") leaves that one to take back,
            # never a sentence that asks for more than it ("brief, scannable analysis")
            carrying = [s for s in carrying if credit_assignment.families_of(s) == {wish.family}]
            if not carrying:
                continue
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
        if not carrying and opposite and wish.aspect not in asked:
            instead.append(replace(wish, family=opposite, action="add"))
        elif not carrying and wish.family == "banned":  # checked, never an instruction
            report.append(
                f"avoid {wish.detail!r}: taken back; later outputs are not checked for it"
            )
        elif not carrying:
            said = want_labels.family_words(wish.family)
            report.append(f"{said}: taken back, and no instruction of the agent asks for it")
    return changes, instead


def _check_step_of(agent: AgentDefinition) -> FlowStep | None:
    """The flow's checking step (``instructions.CHECK_STEP_NAME``), when no later step reads
    its output (taking it away must leave a flow that runs)."""
    names = [s.name for s in agent.flow]
    if instructions.CHECK_STEP_NAME not in names or len(names) < 2:
        return None
    at = names.index(instructions.CHECK_STEP_NAME)
    if any("{" + instructions.CHECK_STEP_NAME + "}" in s.prompt for s in agent.flow[at + 1 :]):
        return None
    return agent.flow[at]


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
    still: frozenset[str] = frozenset(),
) -> bool:
    """False (with a note) when ``change`` would take away a family the reviewer asked for:
    one its sentence carried and no other sentence of the prompt still carries (``still``)."""
    if change.component == "parameters":
        lost = _parameter_loss(change) & keep
    elif change.component == "systemPrompt" and change.change_type != "add":
        before = credit_assignment.families_of(change.before or "")
        after = credit_assignment.families_of(change.after or "")
        lost = (before - after - still) & keep
    else:
        lost = set()
    if lost & standing.keys():
        # the change it would break named, so the rater sees what the wish stands in the way of
        said = change_words(change)
        report += [wish_guard.kept(standing[f], said) for f in sorted(lost & standing.keys())]
    elif lost:
        what = change.before
        if change.component == "parameters":
            what = f"{change.target} {change.before}"
        asked = want_labels.families_words(sorted(lost))
        report.append(f"kept {what!r}: the reviewer asked for {asked}")
    return not lost


def _carried_after(agent: AgentDefinition, changes: list[EvolutionChange]) -> frozenset[str]:
    """The families the prompt's sentences carry that no change of the plan touches: a
    sentence rewritten may let one go that another still asks for."""
    touched = {
        c.before for c in changes if c.component == "systemPrompt" and c.change_type != "add"
    }
    kept = [s for s in segments(agent.system_prompt) if s not in touched]
    return frozenset(f for s in kept for f in credit_assignment.families_of(s))


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
            if credit_assignment.carries(s, wish, only=True)
        ]
        if not carrying:
            continue  # only sentences that ask for more than it: the planner adds its own
        firmer = instructions.firmer_than(carrying[-1], wish)
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
                f"{want_labels.family_words(wish.family)}: asked for again, and the agent "
                "already asks for it as firmly as the rules engine can; the model did not "
                "follow it"
            )
    return stronger


def _one_overriding(
    agent: AgentDefinition, after: AgentDefinition, plan: EvolutionPlan
) -> AgentDefinition:
    """At most one instruction says it overrides the rest: the newest. Older ones that say so
    are said plainly again (their words otherwise unchanged)."""
    marked = [s for s in segments(after.system_prompt) if s.startswith(instructions.OVERRIDING)]
    if len(marked) < 2:
        return after
    older = [s for s in marked if s in agent.system_prompt]
    newest = [s for s in marked if s not in older] or marked[-1:]
    demoted = []
    for segment in marked:
        if segment in newest:
            continue
        plain = segment.removeprefix(instructions.OVERRIDING).strip()
        demoted.append(
            EvolutionChange(
                component="systemPrompt",
                change_type="modify",
                target="instruction",
                before=segment,
                after=plain[:1].upper() + plain[1:],
                reason=f"{STRENGTHEN_REASON}one instruction overrides the rest: {newest[-1]!r} now",
                confidence=1.0,
            )
        )
    plan.changes += demoted
    return apply_changes(after, demoted)


NO_INVENTION = "Use only facts and figures from the material above; never invent any."
# a step that gathers with tools has no material above but the question
NO_INVENTION_WITH_TOOLS = (
    "Use only facts and figures the tools return or the question gives; never invent any."
)
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
    if step is None or any(s in step.prompt for s in (NO_INVENTION, NO_INVENTION_WITH_TOOLS)):
        return
    gathers = bool(agent.tools) and (step.tools is None or bool(step.tools))
    plan.changes.append(
        EvolutionChange(
            component="flow",
            change_type="modify",
            target=step.name,
            before=step.prompt,
            # after the step's instruction, never between it and what it introduces
            after=tool_flow.with_sentence(
                step.prompt, NO_INVENTION_WITH_TOOLS if gathers else NO_INVENTION
            ),
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


def _hypothesis(
    changes: list[EvolutionChange], refuted: list[str], removals: list[EvolutionChange]
) -> str:
    """What the next output shows when a step that only undoes or takes back works (the
    planner's hypothesis speaks of what it adds): never a claim about directives not sent."""
    if not changes:
        return ""
    claims = []
    if refuted:
        claims.append(
            f"with {want_labels.families_words(refuted)} rolled back, the agent is as it was "
            "before that change"
        )
    steps = [c.target for c in removals if c.component == "flow" and c.change_type == "remove"]
    claims += [f"the trace will show no {name} step" for name in steps]
    taken = [c.want for c in removals if c.want and c.component == "systemPrompt"]
    if taken:
        said = want_labels.families_words(list(dict.fromkeys(taken)))
        claims.append(f"with {said} taken back, the next output will no longer follow it")
    if not claims:
        claims.append("the changed instructions will be followed")
    said = "; ".join(claims)
    return f"{said[:1].upper()}{said[1:]}, and the next score will rise."


def _reasons(judged: JudgedEvolution | None, verdict: str) -> str:
    """The reasons of the verdicts ``verdict``, each once (an undo refutes every family of the
    change for one reason)."""
    if judged is None:
        return ""
    reasons = [v.reason for v in judged.verdict.aspects if v.verdict == verdict]
    return "; ".join(dict.fromkeys(reasons))
