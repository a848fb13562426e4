"""The reading previewed, as data: what a score's comment would change (``trainer/preview.py``
reads it), as the review page and ``training-camp score`` show it, and the request and answer
that carry it from a lineage's worker to the command line. Plain models, light to import: the
command prints a reading without loading the reader."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field

from domain import want_labels
from domain.execution import preview_of
from domain.part_changes import part_words
from domain.prompt_segments import segments
from domain.trainer import EvolutionChange, change_key
from domain.wants import MAX_WANTS

# The workflow that reads a comment on a lineage's worker (workflows/reading_preview.py), by
# name: the command that starts it does not import the worker's side. It ends within
# PREVIEW_TIMEOUT, answered or not (no worker polls the lineage's queue).
PREVIEW_WORKFLOW = "ReadingPreviewWorkflow"
PREVIEW_TIMEOUT = timedelta(seconds=60)


class Chip(BaseModel):
    """One wish as the rater sees it: the want it sends, and its words ("no table")."""

    want: str
    label: str


class Unplaced(BaseModel):
    """A clause the reader could not place: nothing is changed for it unless the rater adds
    one of the ``proposed`` wishes."""

    quote: str
    why: str
    proposed: list[Chip] = Field(default_factory=list)
    # not a clause misread but a standing wish the reading would run into ("kept 'in a
    # table': asked for in cycle 2"): said as what stands in the way
    standing: bool = False


class PlannedChange(BaseModel):
    """One change the step would make, as the rater sees it: its key (sent back when
    confirmed), what it does in words, and why the step makes it."""

    key: str
    label: str  # "add 'Keep every answer under 60 words.'", "maxTokens 2048 → 240"
    why: str  # the step's reason ("check: under 60 words failed on the agent's own try …")


class ReadingPreview(BaseModel):
    """What a score's comment would change, as the step reads it."""

    chips: list[Chip]  # the wishes the step would act on, as wants
    said_back: str  # "Read as: shorter ('way too long'); kept: table ('the table works')"
    unsure: list[Unplaced] = Field(default_factory=list)
    # wishes read that no want can name (a topic, a request in the rater's own words): the
    # step acts on them only when it reads the comment itself
    unsaid: list[str] = Field(default_factory=list)
    read_by: Literal["rules", "claude"] = "rules"
    handed_over: list[str] = Field(default_factory=list)  # the clauses Claude read
    undo_to: int | None = None  # the version an undo goes back to ("back to v1")
    # why the preview is not the reading the step would act on (Claude is not reachable from
    # here): the comment is then sent to be read by the step, and said back after
    incomplete: str | None = None
    # the step's plan for these wishes: every change it would make (rolled back, taken back,
    # planned, made firmer, a lever for a failed check, a form example, what a revert brings
    # back), each a chip the rater may drop; a score sent with their keys binds the step to
    # them. ``planned`` False: the step plans when the score arrives (a Claude trainer, no
    # output awaiting a score yet), and says back after what it did
    changes: list[PlannedChange] = Field(default_factory=list)
    planned: bool = False
    # the wants the plan was made for, to send with the score (None: none are sent, and the
    # step reads the comment as previewed)
    plan_wants: list[str] | None = None
    # what the step would leave undone and why ("kept 'in a table': asked for in
    # cycle 2", "skipped …"), said before sending
    plan_notes: list[str] = Field(default_factory=list)
    # several raters: what the other raters have asked so far on this output ("ana 3:
    # shorter, table"); the step acts on what a majority asks and none opposes
    others: list[str] = Field(default_factory=list)

    @property
    def wants(self) -> list[str]:
        return [c.want for c in self.chips]

    @property
    def change_keys(self) -> list[str]:
        return [c.key for c in self.changes]

    @property
    def exact(self) -> bool:
        """Whether sending ``wants`` makes the step act on exactly what the comment says."""
        return self.incomplete is None and not self.unsaid


def chip(want: str, undo_to: int | None = None) -> Chip:
    return Chip(want=want, label=want_labels.label(want, undo_to))


# an instruction is quoted whole up to here: a rewrite cut short could hide what it drops
CHANGE_QUOTE_CHARS = 240
WHY_CHARS = 160


def planned_change(change: EvolutionChange) -> PlannedChange:
    """A change of the step's plan as the preview shows it."""
    return PlannedChange(
        key=change_key(change),
        label=change_words(change),
        why=preview_of(want_labels.reason_words(change.reason), WHY_CHARS),
    )


def change_words(change: EvolutionChange) -> str:
    """What a change does, in a line: "add '…'", "take out '…'", "rewrite '…' as '…'",
    "maxTokens 2048 → 240", "give step 'check' the output of 'research'", and for a whole
    prompt put back (a revert) the instructions it brings back and takes out."""

    def q(text: str | None) -> str:
        return repr(preview_of(" ".join((text or "").split()), CHANGE_QUOTE_CHARS))

    if change.component == "parameters":
        return f"{change.target} {change.before} → {change.after}"
    if change.component != "systemPrompt":  # what the tool or step gains or loses, in words
        return part_words(change, q)
    if change.change_type == "add":
        return f"add {q(change.after)}"
    if change.change_type == "remove":
        return f"take out {q(change.before)}"
    if change.target == "prompt":  # the whole prompt, as a revert puts it back
        before, after = segments(change.before or ""), segments(change.after or "")
        back = [s for s in after if s not in before]
        out = [s for s in before if s not in after]
        parts = [f"bring back {', '.join(q(s) for s in back)}"] if back else []
        parts += [f"take out {', '.join(q(s) for s in out)}"] if out else []
        return "; ".join(parts) or "the prompt as it was (its order)"
    return f"rewrite {q(change.before)} as {q(change.after)}"


class PreviewAsked(BaseModel):
    """A reading asked of a lineage's worker: the lineage (its id or workflow id), the score
    and the comment (masked before it left the command)."""

    lineage: str
    score: float = Field(ge=0, le=10)
    comment: str | None = None
    # the wishes as the rater edited them: the reading is these, and the plan is made for them
    wants: list[str] | None = Field(default=None, max_length=MAX_WANTS)
    # who asks (several raters: the others' wishes so far are shown, not theirs)
    rater: str | None = Field(default=None, max_length=200)


class LineagePreview(BaseModel):
    """The worker's answer: the reading, and the output it was read against (a score sent
    after it names that output, and is refused, not misapplied, once it is replaced)."""

    lineage_id: str
    status: str
    cycle: int
    output_id: str | None = None
    reading: ReadingPreview
