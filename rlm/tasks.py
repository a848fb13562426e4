"""What crosses Temporal in an RLM fan-out: tasks, worker inputs, merge requests."""

from __future__ import annotations

from pydantic import BaseModel, Field

from rlm.commit import Commit, CommitResult
from rlm.objects import Card

MAX_CONTEXT_CHARS = 200_000


class RlmTask(BaseModel):
    task_id: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,100}$")
    prompt: str
    context: str = Field(default="", max_length=MAX_CONTEXT_CHARS)
    source_id: str
    subtasks: list[RlmTask] = Field(default_factory=list)


class RlmWorkerInput(BaseModel):
    task: RlmTask
    cards: list[Card] = Field(default_factory=list)  # read-only snapshot of the parent's store
    depth: int = 1
    max_depth: int = 2
    max_parallel: int = 8


class FanOutInput(BaseModel):
    store_id: str
    tasks: list[RlmTask]
    cards: list[Card] = Field(default_factory=list)
    max_depth: int = Field(default=2, ge=1, le=5)
    max_parallel: int = Field(default=8, ge=1, le=64)


class ApplyCommitInput(BaseModel):
    store_id: str
    commit: Commit
    batch_prefix: str
    worker: str | None = None


class FanOutResult(BaseModel):
    results: list[CommitResult]
