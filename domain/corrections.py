"""Corrections of a reading: a rater says how their comment should have been read (issue #46).

A correction is a labelled example — the comment, and the wants it asks for — that the reader
consults before its cue tables (``trainer.reading.memory``). It supersedes the reading of one
score; the score itself stays as recorded.
"""

from __future__ import annotations

import hashlib
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from domain import wants as structured
from domain.feedback import Comment, Rater, Want

MAX_READ_AS = 20  # a superseded reading is the trainer's own, but bounded all the same
# the latest labelled examples a reader loads: enough to remember a rater's habits, bounded so
# a long-lived store does not grow every cycle step's read
MAX_EXAMPLES_LOADED = 2_000


def _normal_wants(wants: list[str]) -> list[str]:
    return sorted({w.strip().lower() for w in wants})


def correction_key(lineage_id: str, evaluation_id: str, corrected: list[str]) -> str:
    """The id of a correction: one per (lineage, score, corrected wants) whatever their order
    or case, so the same correction sent twice (a retried update, a double click) is written
    once, while a second, different correction of the same score is its own."""
    text = "\x1f".join([lineage_id, evaluation_id, *_normal_wants(corrected)])
    return "correction:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


class Correction(BaseModel):
    """A correction as the store records it, validated at the door: the comment is bounded
    like a score's, the corrected wants must parse (``domain.wants``)."""

    model_config = ConfigDict(extra="forbid")

    correction_id: str = Field(min_length=1, max_length=200)
    session_id: str = Field(min_length=1, max_length=128)
    lineage_id: str = Field(min_length=1, max_length=128)
    evaluation_id: str = Field(min_length=1, max_length=220)
    comment: Comment
    read_as: Annotated[list[Want], Field(max_length=MAX_READ_AS)] = Field(default_factory=list)
    corrected: Annotated[
        list[Want],
        Field(max_length=structured.MAX_WANTS),
        AfterValidator(structured.validated),
    ]
    rater: Rater | None = None
    cycle: int | None = Field(default=None, ge=1)


class LabelledExample(BaseModel):
    """A correction as the reader learns from it: comment → corrected wants, in the order the
    corrections were made."""

    model_config = ConfigDict(frozen=True)

    correction_id: str
    session_id: str
    lineage_id: str
    evaluation_id: str
    comment: str
    read_as: list[str] = Field(default_factory=list)
    corrected: list[str]
    rater: str | None = None
    created_at: int = 0
