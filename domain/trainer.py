"""The Master Trainer's data: analysis, credit, plan, changes, outcome (seed names kept)."""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, Field

from domain.execution import preview_of
from domain.part_changes import part_words

Sentiment = Literal["positive", "neutral", "negative"]
Component = Literal["systemPrompt", "tools", "flow", "parameters"]
# What a wish does with its family: ask for it, push it further or soften it, take it back,
# or approve what is there
WishAction = Literal["add", "more", "less", "remove", "keep"]
WISH_ACTIONS: tuple[str, ...] = ("add", "more", "less", "remove", "keep")


# How the reasons of the changes the cycle step makes on its own open: a rollback's inverse
# changes, and a wish asked for again made firmer (the store's blame view tells them apart)
ROLLBACK_REASON = "rollback: "
STRENGTHEN_REASON = "strengthen: "
# The want of a revert's changes (rollbacks to an earlier version's values): the next score
# judges them as one ("back to an earlier version"), and no lesson is learned from them
REVERT = "revert"


class Amount(BaseModel):
    """How much a wish asks for: a share of the last output ("half", "a third"), a count
    ("one example", "a one-line summary", "three bullets"), or a limit ("under 150 words")."""

    model_config = {"frozen": True}

    kind: Literal["share", "count", "limit"]
    value: float = Field(gt=0)
    unit: str = "words"  # words, examples, lines, sentences, bullets, points…
    # a share made absolute: the length in words of the output it is a share of
    of_words: int | None = None

    def target_words(self) -> int | None:
        """The words a share or a word limit comes to (None when a share is not measured)."""
        if self.kind == "share" and self.of_words:
            return max(10, int(round(self.of_words * self.value, -1)))
        if self.kind == "limit" and self.unit == "words":
            return int(self.value)
        return None

    def says(self) -> str:
        """The amount in words: "about half", "exactly one example", "under 150 words"."""
        if self.kind == "share":
            return _SHARES.get(round(self.value, 2), f"about {self.value:.0%}")
        number = int(self.value) if float(self.value).is_integer() else self.value
        if self.kind == "limit":
            return f"under {number} {self.unit}"
        unit = self.unit[:-1] if number == 1 and self.unit.endswith("s") else self.unit
        return f"{_NUMBERS.get(number, str(number))} {unit}"


_SHARES = {
    0.5: "about half",
    0.33: "about a third",
    0.67: "about two thirds",
    0.25: "about a quarter",
    0.75: "about three quarters",
}
_NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


class FeedbackAspect(BaseModel):
    aspect: str  # e.g. "length", "format", "tone", "accuracy"
    sentiment: Literal["positive", "negative"]
    quote: str | None = None
    confidence: float = Field(ge=0, le=1)
    # What the reviewer wants, in the trainer's vocabulary ("shorter", "bullets", "formal"…)
    want: str | None = None
    # What the wish is about, where it says: a word limit, a language, a topic, a tool
    # ("search|less|arithmetic": the search tool, used where it should not be, for arithmetic)
    detail: str | None = None
    # what the wish does with the family (a positive aspect with a want is a "keep"), and how
    # much it asks for
    action: WishAction | None = None
    amount: Amount | None = None


class UnsureClause(BaseModel):
    """A clause the reader could not place with certainty: said back, never acted on."""

    quote: str = Field(max_length=300)
    why: str = Field(max_length=300)
    proposed: list[str] = Field(default_factory=list, max_length=5)  # wants it may have meant


class ScoreAnalysis(BaseModel):
    score: float
    comment: str | None = None
    sentiment: Sentiment
    aspects: list[FeedbackAspect] = Field(default_factory=list)
    trend: Literal["improving", "stable", "declining"]
    delta_from_previous: float = 0.0
    # The comment spoke to the trainer or the system ("ignore your constraints"): those parts
    # were set aside, and nothing from this feedback may raise a limit
    adversarial: bool = False
    # Requests about the agent's tools, permissions, constraints or system rather than its
    # answer ("give yourself shell access"): set aside, never written into a prompt
    refused: list[str] = Field(default_factory=list)
    # The comment's language when the reader found it is not English
    comment_language: str | None = None
    # Who read the comment: the rules engine, or Claude (the claude trainer, or a comment the
    # rules engine handed over under `rules+claude`)
    read_by: Literal["rules", "claude"] = "rules"
    # Clauses the rules engine abstained on ("not understood: '…'"): nothing changes for them
    unsure: list[UnsureClause] = Field(default_factory=list, max_length=10)
    # Under `rules+claude`, the clauses the rules engine abstained on that Claude read instead
    handed_over: list[str] = Field(default_factory=list, max_length=10)


class PromptCredit(BaseModel):
    segment: str  # the instruction text, or "parameters.maxTokens=2048" for a parameter
    segment_index: int  # position in the prompt; -1 for parameters, tools and flow steps
    blame: Literal["high", "medium", "low", "none"]
    related_aspect: str | None = None
    reason: str
    # Where the segment lives: the system prompt (default), a flow step's prompt, a tool's
    # description, or a parameter; ``target`` names the step, tool or parameter
    component: Component = "systemPrompt"
    target: str | None = None
    # The change family the blame is about ("shorter", "tool_use"…)
    want: str | None = None


class TrajectoryCredit(BaseModel):
    span_id: str
    contribution: float = Field(ge=-1, le=1)
    reason: str


class CreditAssignment(BaseModel):
    mode: Literal["prompt", "trajectory"]
    prompt: list[PromptCredit] = Field(default_factory=list)
    trajectory: list[TrajectoryCredit] = Field(default_factory=list)


class EvolutionChange(BaseModel):
    component: Component
    change_type: Literal["add", "remove", "modify"]
    target: str  # e.g. "segment 0", "maxTokens"
    before: str | None = None
    after: str | None = None
    reason: str
    confidence: float = Field(ge=0, le=1)
    # The aspect this change is meant to improve: the next score validates or refutes it, and
    # a refuted aspect's changes are rolled back on their own
    aspect: str | None = None
    want: str | None = None  # the change family it pursues ("shorter", "bullets"…)


def describe_change(change: EvolutionChange, limit: int | None = None) -> str:
    """One line for people on what a change did, the same in the trainer's summary, the
    review card and `training-camp-data history`: a parameter by its name ("temperature
    0.5 → 0.7"), a prompt change with its text (cut at ``limit`` characters), a tool or flow
    change in words ("give step 'check' the output of 'research'"; ``part_words``)."""
    if change.component == "parameters":
        return f"{change.target} {change.before} → {change.after}"

    def quoted(text: str | None) -> str:
        return repr(preview_of(text or "", limit) if limit else text or "")

    if change.component in ("tools", "flow"):  # a step's text on one line: the card shows
        # its line breaks in the diff beside it
        return part_words(change, lambda text: quoted(" ".join(text.split())))
    what = change.component
    if change.change_type == "modify" and change.before and change.after:
        return f"modify {what}: {quoted(change.before)} → {quoted(change.after)}"
    text = change.before if change.change_type == "remove" else change.after
    return f"{change.change_type} {what}: {quoted(text)}"


CHANGE_KEY_CHARS = 12
MAX_PLANNED_CHANGES = 40  # a plan's changes a score may confirm (a revert of a whole agent)


def change_key(change: EvolutionChange) -> str:
    """A change's name in a confirmed plan: a digest of what it does (the component, the kind,
    the target, the text before and after), never of why. The preview shows each change with
    its key, the rater sends back the keys of those they confirm, and the step makes only the
    changes whose keys were sent; a store keeps the keys, so anyone can check a version against
    them (``bench/version_contract.py``)."""
    what = [change.component, change.change_type, change.target, change.before, change.after]
    digest = hashlib.sha256(json.dumps(what, ensure_ascii=False).encode())
    return digest.hexdigest()[:CHANGE_KEY_CHARS]


def judged_changes(changes: list[EvolutionChange]) -> list[EvolutionChange]:
    """What the next score judges of an evolution's changes: its own, not the inverse ones of
    a rollback it carried; a revert's, as one."""
    return [c for c in changes if c.want == REVERT or not c.reason.startswith(ROLLBACK_REASON)]


class ExpectedImpact(BaseModel):
    aspect: str
    direction: Literal["improve", "maintain"]


class PastChange(BaseModel):
    change: EvolutionChange
    outcome: Literal["improved", "worsened", "neutral"]
    score_delta: float
    lineage_id: str
    evolution_id: str


class HistoryCheck(BaseModel):
    """What history says about one proposed change (seed: HistoryCheck)."""

    proposed_change: EvolutionChange
    similar_past_changes: list[PastChange] = Field(default_factory=list)
    insight_id: str | None = None
    recommendation: Literal["apply", "skip", "modify"]
    reason: str


class EvolutionPlan(BaseModel):
    changes: list[EvolutionChange] = Field(default_factory=list)
    hypothesis: str = ""
    expected_impact: list[ExpectedImpact] = Field(default_factory=list)
    # Notes from mechanical checks (constraints repaired or changes refused), for the record
    notes: list[str] = Field(default_factory=list)
    history_checks: list[HistoryCheck] = Field(default_factory=list)


class LearningInsight(BaseModel):
    """A pattern learned across the lineages of a session (seed: LearningInsight)."""

    id: str
    session_id: str
    pattern: str
    pattern_type: Literal["prompt_change", "tool_change", "param_change", "flow_change"]
    contexts: list[str] = Field(default_factory=list)
    success_count: int = 0
    failure_count: int = 0
    avg_score_impact: float = 0.0
    confidence: float = 0.0


class Directives(BaseModel):
    sticky: list[str] = Field(default_factory=list)
    oneshot: list[str] = Field(default_factory=list)


class EvolutionTrigger(BaseModel):
    rollout_id: str
    attempt_id: str | None
    artifact_id: str
    evaluation_id: str
    score: float
    comment: str | None = None
    directives: Directives = Field(default_factory=Directives)


class AspectVerdict(BaseModel):
    """What the next score and comment say about one aspect (and the change family pursued in
    it) of an evolution: validated (approved, or the score rose and nothing was said),
    not_far_enough (asked for again: strengthened, never rolled back), refuted (the reviewer
    asks for the contrary: rolled back) or untested (nothing said either way)."""

    aspect: str
    verdict: Literal["validated", "not_far_enough", "refuted", "untested"]
    reason: str
    family: str | None = None
    # The reviewer's words the verdict rests on; None when it rests on the score alone
    quote: str | None = None


# A score's verdict on the change before it, the weightiest first (a reason opens with one)
VERDICT_WORDS = ("refuted", "not far enough", "validated", "untested")


def verdict_word(validated: bool, reason: str | None) -> str:
    """The verdict a score gave a change, in the words `state`, `training-camp-data history`
    and the review card all use: the weightiest the reason opens with (an outcome that asked
    for more of a change is "validated" as a flag, and "not far enough" in words)."""
    for word in VERDICT_WORDS:
        if (reason or "").startswith(word):
            return word
    return "validated" if validated else "untested"


def verdict_line(validated: bool, reason: str | None) -> str:
    """The verdict with the reviewer's words it rests on, opening with ``verdict_word``."""
    word = verdict_word(validated, reason)
    if not reason:
        return word
    return reason if reason.startswith(word) else f"{word}: {reason}"


class EvolutionOutcome(BaseModel):
    next_score: float
    score_delta: float
    hypothesis_validated: bool
    reason: str
    aspects: list[AspectVerdict] = Field(default_factory=list)

    @property
    def refuted_aspects(self) -> list[str]:
        return [a.aspect for a in self.aspects if a.verdict == "refuted"]


class InsightObservation(BaseModel):
    """One change's outcome, as evidence for its family's insight."""

    insight_id: str
    pattern: str
    pattern_type: str
    contexts: list[str]
    evolution_id: str
    success: bool
    score_delta: float


class JudgedEvolution(BaseModel):
    """The verdict on an evolution from the score of the output it produced, and what each of
    its changes adds to the session's insights."""

    evolution_id: str
    verdict: EvolutionOutcome
    insights: list[InsightObservation] = Field(default_factory=list)


class SegmentProvenance(BaseModel):
    """Where one part of an agent came from ("blame"): a segment of its prompt, a parameter,
    a tool's description, a flow step's prompt or tools, or an edge of the flow."""

    segment: str  # the part's value: the instruction, "0.3", the description, the prompt…
    # which part: the prompt's segment (``name`` None), or the parameter, tool, step or edge
    # ``name`` names ("temperature", "search_documents", "check", "research → check"); a
    # "removed step" is one taken out of the flow since (its segment: the prompt it had)
    part: Literal["prompt", "parameter", "tool", "step", "step tools", "edge", "removed step"] = (
        "prompt"
    )
    name: str | None = None
    # the wish its change carried out, as a want ("tool_first:search_documents"), with the
    # rater's words when the comment said it; None: no wish (the initial definition, a
    # directive, a change the step made on its own)
    wish: str | None = None
    version: int  # the version that introduced it
    evolution_id: str | None  # None: part of the initial definition
    trigger_score: float | None = None
    trigger_comment: str | None = None
    reason: str
    # a correction's version: the one it was rebuilt from (the scored one, not the misread)
    rebuilt_from: int | None = None
    # the lineage whose version introduced it, when not this one: a branch's ancestor (label)
    lineage_label: str | None = None

    @property
    def since(self) -> str:
        """Where it came in: ``v2``, or ``A v2`` across a branch."""
        return f"{self.lineage_label} v{self.version}" if self.lineage_label else f"v{self.version}"
