"""The reading previewed, as data: what a score's comment would change (``trainer/preview.py``
reads it), as the review page and ``training-camp score`` show it, and the request and answer
that carry it from a lineage's worker to the command line. Plain models, light to import: the
command prints a reading without loading the reader."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field

from domain import want_labels

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
    # table': you asked for it in cycle 2"): said as what stands in the way
    standing: bool = False


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

    @property
    def wants(self) -> list[str]:
        return [c.want for c in self.chips]

    @property
    def exact(self) -> bool:
        """Whether sending ``wants`` makes the step act on exactly what the comment says."""
        return self.incomplete is None and not self.unsaid


def chip(want: str, undo_to: int | None = None) -> Chip:
    return Chip(want=want, label=want_labels.label(want, undo_to))


class PreviewAsked(BaseModel):
    """A reading asked of a lineage's worker: the lineage (its id or workflow id), the score
    and the comment (masked before it left the command)."""

    lineage: str
    score: float = Field(ge=0, le=10)
    comment: str | None = None


class LineagePreview(BaseModel):
    """The worker's answer: the reading, and the output it was read against (a score sent
    after it names that output, and is refused, not misapplied, once it is replaced)."""

    lineage_id: str
    status: str
    cycle: int
    output_id: str | None = None
    reading: ReadingPreview
