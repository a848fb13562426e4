"""Store objects: typed findings with backrefs into their sources."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

OBJECT_TYPES = ("evidence", "note", "claim", "summary", "hypothesis", "link")
CARD_DESCRIPTION_CHARS = 160


class SpanRef(BaseModel):
    """Where a finding comes from: a source, and a range in it."""

    source_id: str
    start: int | None = None
    end: int | None = None
    unit: str = "chars"


class StoreObject(BaseModel):
    id: str
    type: str
    description: str
    content: dict[str, Any] = Field(default_factory=dict)
    backrefs: list[SpanRef] = Field(default_factory=list)
    parents: list[str] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    worker: str | None = None
    commit: str | None = None
    invalidated: str | None = None  # the reason, once soft-deleted

    def card(self) -> Card:
        text = self.description
        if len(text) > CARD_DESCRIPTION_CHARS:
            text = text[: CARD_DESCRIPTION_CHARS - 1] + "…"
        return Card(
            id=self.id,
            type=self.type,
            description=text,
            tags=self.tags,
            parents=self.parents,
            worker=self.worker,
        )


class Card(BaseModel):
    """The lightweight, read-only view workers get of the parent's store."""

    id: str
    type: str
    description: str
    tags: list[str] = Field(default_factory=list)
    parents: list[str] = Field(default_factory=list)
    worker: str | None = None


class Proposal(BaseModel):
    """A proposed update: stored, then accepted or rejected — never applied directly."""

    id: str
    target_id: str
    patch: dict[str, Any] = Field(default_factory=dict)
    description_update: str | None = None
    status: str = "pending"  # pending | accepted | rejected
    reason: str | None = None
