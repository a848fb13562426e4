"""A recursive language-model run: a model driving a Python REPL, turn by turn, and what crosses
Temporal for it (the run's input, a model turn, a cell, the call a cell waits on, the result).

Each turn the model sees what the last cell printed and writes the next cell; the run ends when
a cell calls ``FINAL_VAR(value)``. A worker is the same run one level down (``depth`` + 1), with
a store of its own seeded with the parent's cards, and returns its findings as a commit.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from rlm.commit import Commit
from rlm.objects import Card
from rlm.sandbox import CellLimits

OFFLINE_RLM_MODEL = "offline-rlm-scripted"
MAX_PROMPT_CHARS = 20_000
MAX_CONTEXT_CHARS = 400_000
MAX_TURN_OUTPUT_CHARS = 6_000  # what the model sees of a cell's output

_CODE = re.compile(r"```(?:repl|python)[ \t]*\n(.*?)```", re.DOTALL)


class ReplConfig(BaseModel):
    root_model: str = OFFLINE_RLM_MODEL
    worker_model: str | None = None  # defaults to the root's
    max_depth: int = Field(default=2, ge=0, le=5)
    max_parallel: int = Field(default=8, ge=1, le=64)
    max_turns: int = Field(default=12, ge=1, le=100)
    shared_store: bool = False
    cell_limits: CellLimits = Field(default_factory=CellLimits)
    # A step whose worker stops answering is tried again elsewhere after this long
    heartbeat_seconds: float = Field(default=30.0, ge=1, le=600)

    def model_at(self, depth: int) -> str:
        return self.root_model if depth == 0 else (self.worker_model or self.root_model)


class ReplRunInput(BaseModel):
    run_id: str = Field(pattern=r"^[A-Za-z0-9_.:/-]{1,200}$")
    prompt: str = Field(max_length=MAX_PROMPT_CHARS)
    context: Any = None  # the ``context`` global (a root's; workers get theirs by hash)
    context_hash: str | None = None  # ... or already in the payload store
    config: ReplConfig = Field(default_factory=ReplConfig)
    depth: int = 0
    worker: str = "root"  # its name: the shared store attributes objects to it
    cards: list[Card] = Field(default_factory=list)  # read-only view of the parent's store


class ReplMessage(BaseModel):
    role: Literal["user", "assistant"]
    content: str


class ModelTurnInput(BaseModel):
    run_id: str
    worker: str
    turn: int
    model: str
    depth: int
    max_depth: int
    shared: bool
    context_hash: str  # the system prompt describes the context
    messages: list[ReplMessage]


class CellInput(BaseModel):
    run_id: str
    worker: str
    depth: int
    turn: int
    code: str
    context_hash: str
    snapshot_hash: str | None  # the namespace the previous cell left
    memo: list[Any] = Field(default_factory=list)  # answers to this cell's calls so far
    creates_before: int = 0  # objects this REPL created in earlier cells (stable ids)
    cards: list[Card] = Field(default_factory=list)
    config: ReplConfig


class CellResult(BaseModel):
    output: str  # what the model sees: printed text, then the error if any
    error: str | None = None
    final: Any = None
    final_set: bool = False
    snapshot_hash: str | None = None
    creates: int = 0
    suspended: dict[str, Any] | None = None


class LlmQueryInput(BaseModel):
    run_id: str
    worker: str
    turn: int
    call: int
    model: str
    prompts: list[str]


class ReplRunResult(BaseModel):
    run_id: str
    worker: str
    final: Any = None
    finished: bool  # False: it ran out of turns before FINAL_VAR
    turns: int
    commit: Commit | None = None  # a worker's findings, for its parent to merge


class ExportInput(BaseModel):
    run_id: str
    worker: str
    cards: list[Card] = Field(default_factory=list)
    shared: bool = False


def code_of(reply: str) -> str | None:
    """The ```repl (or ```python) blocks of a model's reply, joined; None when it wrote none."""
    blocks = [b.strip() for b in _CODE.findall(reply)]
    return "\n\n".join(b for b in blocks if b) or None


def worker_store_id(run_id: str, worker: str) -> str:
    """The findings store of one REPL: the root's is the run's; a worker's is its own."""
    return run_id if worker == "root" else f"{run_id}/{worker}"
