"""Validation: the verdict on an evolution, from what the next comment says about each change.

Each change family an evolution pursued is judged from the reviewer's words, not the score's
direction alone:

- *validated* when the comment approves of it ("shorter, good", "bullets are great, keep
  them"), praises the whole answer with nothing against it while the score rose ("much
  better"), or says nothing about it while the score rose (the score alone: no lesson);
- *not_far_enough* when the comment asks for it again ("still too wordy", "still no bullets"):
  the direction was right, so the next evolution strengthens it and nothing is rolled back;
- *refuted* when the comment asks for its contrary ("paragraphs again", "too short now"): the
  change is rolled back, and the comment's wish is applied in the same step;
- *untested* otherwise: a comment about another aspect, an adversarial, unreadable or empty
  one, or a lower score with nothing said (weak evidence: it may be the input, or another
  aspect) refutes nothing.

Only verdicts that rest on the reviewer's words become lessons (insight observations).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, Field

from domain import tool_flow as domain_tool_flow
from domain import want_labels
from domain.change_families import contrary_of
from domain.checks import CheckResult
from domain.execution import preview_of
from domain.tool_flow import ToolFlowWish
from domain.trainer import (
    REVERT,
    AspectVerdict,
    EvolutionChange,
    EvolutionOutcome,
    FeedbackAspect,
    InsightObservation,
    JudgedEvolution,
    ScoreAnalysis,
    judged_changes,
)
from trainer import tool_flow
from trainer.change_patterns import insight_id, pattern
from trainer.evolution import TAKE_BACK_REASON

QUOTE_CHARS = 120


class PendingEvolution(BaseModel):
    """An evolution awaiting its verdict: what it changed, and the score that triggered it."""

    evolution_id: str
    trigger_score: float
    changes: list[EvolutionChange] = Field(default_factory=list)
    # the trigger's aspects as "aspect:want" (the contexts its lessons are filed under)
    contexts: list[str] = Field(default_factory=list)
    # a revert's: the version it left, which an undo of it goes back to (wishes and all)
    reverted_from: int | None = None

    @classmethod
    def of(
        cls,
        evolution_id: str,
        trigger: ScoreAnalysis,
        changes: list[EvolutionChange],
        from_version: int | None = None,
    ) -> PendingEvolution | None:
        """What an evolution made, to be judged by the next score: its own changes, not the
        inverse ones of a rollback it carried (None when it made none); a revert's changes
        are its own, judged as one ("back to an earlier version"), from ``from_version``."""
        own = judged_changes(changes)
        if not own:
            return None
        return cls(
            evolution_id=evolution_id,
            trigger_score=trigger.score,
            changes=own,
            contexts=sorted(f"{a.aspect}:{a.want or a.sentiment}" for a in trigger.aspects),
            reverted_from=from_version if any(c.want == REVERT for c in own) else None,
        )


def judge(pending: PendingEvolution, analysis: ScoreAnalysis, session_id: str) -> JudgedEvolution:
    """The verdict on ``pending`` from the next score and comment (read mechanically, whatever
    the trainer backend), and the lessons its changes add to their families' insights."""
    delta = analysis.score - pending.trigger_score
    wished = {
        a.want: a
        for a in analysis.aspects
        if a.sentiment == "negative"
        and a.want
        and a.action != "remove"
        and not tool_flow.is_typed(a.want)  # judged by their own wants (below)
    }
    taken_back = {a.want: a for a in analysis.aspects if a.want and a.action == "remove"}
    approved = {a.want: a for a in analysis.aspects if a.sentiment == "positive" and a.want}
    # praise of an aspect ("length is fine now", "the warmth works") approves the change to it
    praised = {
        a.aspect: a for a in analysis.aspects if a.sentiment == "positive" and a.aspect != "overall"
    }
    criticised_aspects = {a.aspect for a in analysis.aspects if a.sentiment == "negative"}
    silent = analysis.adversarial or not (analysis.comment or "").strip()
    # praise of the whole answer ("much better") and nothing against: the change as a whole
    criticised = any(a.sentiment == "negative" for a in analysis.aspects)
    pleased = next((a for a in analysis.aspects if a.sentiment == "positive" and not a.want), None)
    pleased = None if criticised else pleased
    verdicts: list[AspectVerdict] = []
    # families the last change took back: their verdict says so ("example (taken back)")
    taken_earlier = {
        c.want for c in pending.changes if c.want and c.reason.startswith(TAKE_BACK_REASON)
    }
    # a tool or flow wish is judged by its own want: asking to drop the draft step says
    # nothing of giving polish the findings, though both are the flow's
    typed_wished = {
        a.detail: a
        for a in analysis.aspects
        if a.sentiment == "negative" and a.detail and tool_flow.is_typed(a.want or "")
    }
    for family, aspect in _pursued(pending.changes):
        typed = _typed(family)
        if typed is not None:
            contrary = [w for w in typed_wished if _contradicts(typed, w)]
            again = typed_wished.get(family)
        else:
            contrary = sorted(contrary_of(family) & set(wished))
            again = wished.get(family)
        taken = taken_back.get(family) or _undoes(taken_back, aspect)
        if taken is not None and taken.want == family and family in taken_earlier:
            # "better without the numbering" after it was taken out: the removal is approved
            quote = _quote(taken.quote)
            verdicts.append(
                _verdict(
                    aspect, family, "validated", f"the reviewer approves{_words(quote)}", quote
                )
            )
            continue
        if silent:
            verdicts.append(_verdict(aspect, family, "untested", _silent_reason(analysis)))
        elif taken is not None:
            quote = _quote(taken.quote)
            what = {
                "undo": "undoes the last change",
                "revert": "goes back to an earlier version",
            }.get(taken.want or "", "takes it back")
            verdicts.append(
                _verdict(aspect, family, "refuted", f"the reviewer {what}{_words(quote)}", quote)
            )
        elif typed is None and family in approved:
            quote = _quote(approved[family].quote)
            verdicts.append(
                _verdict(
                    aspect, family, "validated", f"the reviewer approves{_words(quote)}", quote
                )
            )
        elif contrary:
            said = typed_wished[contrary[0]] if typed is not None else wished[contrary[0]]
            quote = _quote(said.quote)
            verdicts.append(
                _verdict(
                    aspect,
                    family,
                    "refuted",
                    f"the reviewer now asks for {want_labels.family_words(contrary[0])}"
                    f"{_words(quote)}",
                    quote,
                )
            )
        elif (
            aspect in praised
            and aspect not in criticised_aspects
            and again is None
            and not contrary_of(family) & set(approved)
        ):
            quote = _quote(praised[aspect].quote)
            verdicts.append(
                _verdict(
                    aspect,
                    family,
                    "validated",
                    f"the reviewer approves the {aspect}{_words(quote)}",
                    quote,
                )
            )
        elif again is not None:
            quote = _quote(again.quote)
            verdicts.append(
                _verdict(
                    aspect,
                    family,
                    "not_far_enough",
                    f"right direction, not far enough{_words(quote)}",
                    quote,
                )
            )
        elif delta > 0 and pleased is not None:
            quote = _quote(pleased.quote)
            verdicts.append(
                _verdict(
                    aspect,
                    family,
                    "validated",
                    f"the score rose by {delta:g} and the reviewer is pleased{_words(quote)}",
                    quote,
                )
            )
        elif delta > 0:
            verdicts.append(
                _verdict(aspect, family, "validated", f"not mentioned; the score rose by {delta:g}")
            )
        else:
            verdicts.append(
                _verdict(
                    aspect,
                    family,
                    "untested",
                    "not mentioned"
                    + (
                        f"; the score fell by {-delta:g}, which alone refutes nothing"
                        if delta
                        else ""
                    ),
                )
            )
    verdicts = [
        v.model_copy(update={"reason": f"taken back, {v.reason}"})
        if v.family in taken_earlier
        else v
        for v in verdicts
    ]
    outcome = _outcome(analysis.score, delta, verdicts)
    return JudgedEvolution(
        evolution_id=pending.evolution_id,
        verdict=outcome,
        insights=_lessons(pending, outcome, session_id),
    )


KEPT_REASON = "kept: the rater left its rollback out of the plan they confirmed"


def kept(
    pending: PendingEvolution, judged: JudgedEvolution, kept: list[str], session_id: str
) -> JudgedEvolution:
    """The verdict when the rater, shown the rollback of what their words refuted, left it
    out of the plan they confirmed: those stay, so they are not refuted (and teach nothing)."""

    def refuted_but_kept(v: AspectVerdict) -> bool:
        return (v.family or v.aspect) in kept and v.verdict == "refuted"

    verdicts = _relabelled(judged, refuted_but_kept, "validated", KEPT_REASON)
    return _rejudged(pending, judged, session_id, verdicts)


def _relabelled(
    judged: JudgedEvolution, which: Callable[[AspectVerdict], bool], verdict: str, reason: str
) -> list[AspectVerdict]:
    """``judged``'s verdicts, each that ``which`` picks given ``verdict`` and ``reason``."""
    said = {"verdict": verdict, "reason": reason, "quote": None}
    return [v.model_copy(update=said) if which(v) else v for v in judged.verdict.aspects]


def _rejudged(
    pending: PendingEvolution,
    judged: JudgedEvolution,
    session_id: str,
    verdicts: list[AspectVerdict],
) -> JudgedEvolution:
    """``judged`` with its verdicts replaced: the outcome and lessons made from them again."""
    outcome = _outcome(judged.verdict.next_score, judged.verdict.score_delta, verdicts)
    return JudgedEvolution(
        evolution_id=judged.evolution_id,
        verdict=outcome,
        insights=_lessons(pending, outcome, session_id),
    )


CUT_OFF_REASON = "the output was cut off at the token limit, so it could not show the change"


def cut_off(pending: PendingEvolution, judged: JudgedEvolution, session_id: str) -> JudgedEvolution:
    """The verdict when the scored output was cut off at the token limit: a family the
    reviewer asks for again may be what the cut took away, so it is *untested*, not *not far
    enough* (and teaches nothing)."""

    def not_far_enough(v: AspectVerdict) -> bool:
        return v.verdict == "not_far_enough"

    verdicts = _relabelled(judged, not_far_enough, "untested", CUT_OFF_REASON)
    return _rejudged(pending, judged, session_id, verdicts)


def measured(
    pending: PendingEvolution,
    judged: JudgedEvolution,
    checks: list[CheckResult],
    session_id: str,
) -> JudgedEvolution:
    """The verdict citing what the scored output measured of each family it judges (its check
    against the reviewer's wish): "validated by the output: 88 words for about 90", "not
    honoured: 131 words for about 90". The verdict itself stays the reviewer's words'."""
    by_family = {c.family: c for c in checks if c.measured}
    verdicts = [
        v.model_copy(update={"reason": f"{v.reason}; {_measure(by_family[v.family])}"})
        if v.family in by_family
        else v
        for v in judged.verdict.aspects
    ]
    return _rejudged(pending, judged, session_id, verdicts)


def _measure(check: CheckResult) -> str:
    said = check.wish
    if check.family in ("shorter", "longer") and check.value is not None:
        found = f"{int(check.value)} words for {said.removesuffix(' words')}"
    else:
        found = f"{said} ({check.measure})" if check.measure else said
    return f"{'validated by the output' if check.passed else 'not honoured'}: {found}"


def _outcome(score: float, delta: float, verdicts: list[AspectVerdict]) -> EvolutionOutcome:
    refuted = [v for v in verdicts if v.verdict == "refuted"]
    validated = not refuted and any(v.verdict in ("validated", "not_far_enough") for v in verdicts)
    # every family's verdict, the weightiest first: "refuted: bullets: …; validated: shorter: …"
    groups = [
        (label, [v for v in verdicts if v.verdict == kind])
        for kind, label in (
            ("refuted", "refuted"),
            ("not_far_enough", "not far enough"),
            ("validated", "validated"),
            ("untested", "untested"),
        )
    ]
    reason = "; ".join(
        f"{label}: " + "; ".join(f"{_said(v)}: {v.reason}" for v in members)
        for label, members in groups
        if members
    )
    if not verdicts:
        reason = "untested: the change pursued nothing the reviewer could judge"
    return EvolutionOutcome(
        next_score=score,
        score_delta=delta,
        hypothesis_validated=validated,
        reason=reason,
        aspects=verdicts,
    )


def _pursued(changes: list[EvolutionChange]) -> list[tuple[str, str]]:
    """(what, aspect) of everything the changes pursued, in order, once each: a family, or a
    tool or flow change's own want ("step:input:polish+=research")."""
    seen: dict[str, str] = {}
    for change in changes:
        judged = tool_flow.judged_as(change)
        if judged and judged not in seen:
            seen[judged] = change.aspect or judged
    return list(seen.items())


def _typed(what: str) -> ToolFlowWish | None:
    """The typed wish a verdict's ``what`` is, when it is one (not a family alone)."""
    if ":" not in what:
        return None
    try:
        return domain_tool_flow.parse(what)
    except ValueError:
        return None


def _contradicts(made: ToolFlowWish, want: str) -> bool:
    """Whether ``want``, asked now, is the contrary of the typed change ``made``: a tool used
    and dropped, a step added and removed, an input given and taken away."""
    try:
        asked = domain_tool_flow.parse(want)
    except ValueError:
        return False
    return asked is not None and asked.undoes(made)


def _said(verdict: AspectVerdict) -> str:
    """What a verdict judged, in the chips' words: "cite sources", "the polish step given
    the research step's output"."""
    return want_labels.family_words(verdict.family or verdict.aspect)


def _verdict(
    aspect: str, family: str, verdict: str, reason: str, quote: str | None = None
) -> AspectVerdict:
    return AspectVerdict(
        aspect=aspect,
        family=family,
        verdict=verdict,  # type: ignore[arg-type]
        reason=reason,
        quote=quote,
    )


def _words(quote: str) -> str:
    """The reviewer's words a verdict rests on, after a colon; none for a want sent as it is
    ("wants step:add:check"), which the verdict has already said in words."""
    return "" if not quote or quote.startswith("wants ") else f": {quote!r}"


def _quote(text: str | None) -> str:
    """The reviewer's words, cut at a word if long."""
    return preview_of(" ".join((text or "").split()), QUOTE_CHARS)


def _undoes(taken_back: dict[str, FeedbackAspect], aspect: str) -> FeedbackAspect | None:
    """The undo (or revert) that takes back the change to ``aspect``: a revert takes back
    everything, an undo the whole last change or, naming one aspect ("forget what I said about
    length"), the change to that aspect only."""
    undo = taken_back.get("undo")
    if undo is not None and undo.aspect not in ("overall", aspect):
        undo = None
    return taken_back.get("revert") or undo


def _silent_reason(analysis: ScoreAnalysis) -> str:
    if analysis.adversarial:
        return "the feedback addressed the trainer, not the answer; it judges nothing"
    return "no comment; a score alone refutes nothing"


def _lessons(
    pending: PendingEvolution, outcome: EvolutionOutcome, session_id: str
) -> list[InsightObservation]:
    """One observation per change whose family's verdict rests on the reviewer's words."""
    by_family = {v.family: v for v in outcome.aspects if v.quote is not None}
    lessons = []
    for change in pending.changes:
        verdict = by_family.get(tool_flow.judged_as(change) or "")
        if verdict is None or change.want == REVERT:
            continue
        family, family_type = pattern(change)
        lessons.append(
            InsightObservation(
                insight_id=insight_id(session_id, family),
                pattern=family,
                pattern_type=family_type,
                contexts=pending.contexts,
                evolution_id=pending.evolution_id,
                success=verdict.verdict != "refuted",
                score_delta=outcome.score_delta,
            )
        )
    return lessons


VERDICT_LABELS = {
    "refuted": "refuted",
    "not_far_enough": "not far enough",
    "validated": "validated",
    "untested": "untested",
}


def by_majority(
    pending: PendingEvolution,
    judged_by: list[tuple[str, JudgedEvolution]],
    score: float,
    session_id: str,
) -> JudgedEvolution:
    """The verdict of several raters, each of whom judged ``pending`` from their own score and
    reading (``judged_by``: rater, verdict): a family is refuted, and rolled back, only when
    a majority of the raters who judged it (any verdict but untested) refute it; otherwise it
    takes the verdict most of them gave (not far enough before validated among equals), and
    untested when none judged it. Each family's reason says what every rater said. The
    outcome's score is ``score`` (the raters' median)."""
    verdicts: list[AspectVerdict] = []
    for family, aspect in _pursued(pending.changes):
        said = [
            (rater, v)
            for rater, judged in judged_by
            for v in judged.verdict.aspects
            if (v.family or v.aspect) == family
        ]
        judges = [(rater, v) for rater, v in said if v.verdict != "untested"]
        refuters = [(rater, v) for rater, v in judges if v.verdict == "refuted"]
        if judges and 2 * len(refuters) > len(judges):
            kind, basis = "refuted", refuters
            head = f"{len(refuters)} of the {len(judges)} raters who judged it refute it"
        elif judges:
            others = [(rater, v) for rater, v in judges if v.verdict != "refuted"]
            counts = {
                k: sum(v.verdict == k for _, v in others) for k in ("not_far_enough", "validated")
            }
            kind = max(counts, key=lambda k: counts[k])
            basis = [(rater, v) for rater, v in others if v.verdict == kind]
            head = (
                f"{len(refuters)} of the {len(judges)} raters who judged it refute it, not a "
                "majority"
                if refuters
                else f"{len(basis)} of the {len(judges)} raters who judged it"
            )
        else:
            kind, basis = "untested", said
            head = "no rater judged it" + (f": {said[0][1].reason}" if said else "")
        each = [f"{rater}: {VERDICT_LABELS[v.verdict]} ({v.reason})" for rater, v in judges]
        silent = [rater for rater, v in said if v.verdict == "untested"]
        if judges and silent:
            each.append(f"not judged by {', '.join(silent)}")
        reason = f"{head} ({'; '.join(each)})" if judges else head
        quote = next((v.quote for _, v in basis if v.quote is not None), None)
        verdicts.append(_verdict(aspect, family, kind, reason, quote))
    outcome = _outcome(score, score - pending.trigger_score, verdicts)
    return JudgedEvolution(
        evolution_id=pending.evolution_id,
        verdict=outcome,
        insights=_lessons(pending, outcome, session_id),
    )
