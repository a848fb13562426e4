"""What the trainer's cycle step decided, crossing from ``take_cycle_step`` through the workflow
to ``record_cycle_step``: nothing here is written yet. It lives in ``domain`` so that the
deciding and the recording activities, the workflow and the benches share it without importing
one another."""

from __future__ import annotations

from pydantic import BaseModel, Field

from domain.agent import AgentDefinition
from domain.checks import ActiveWish
from domain.panel import Agreement
from domain.trainer import (
    ROLLBACK_REASON,
    CreditAssignment,
    EvolutionChange,
    EvolutionPlan,
    JudgedEvolution,
    ScoreAnalysis,
    judged_changes,
)


class CycleStep(BaseModel):
    """Everything one score did: the verdict on the last change, what was undone, what was
    changed, the agent after, and plain notes for the rater."""

    judged: JudgedEvolution | None = None
    analysis: ScoreAnalysis
    credit: CreditAssignment
    plan: EvolutionPlan  # changes: the rollback's inverse changes first, then the new ones
    agent: AgentDefinition  # after every change
    asked_for: list[str] = Field(default_factory=list)
    wishes: list[ActiveWish] = Field(default_factory=list)  # checked on every later output
    # what no change was let break, said back: "kept 'in a table': asked for in cycle 2"
    kept_wishes: list[str] = Field(default_factory=list)
    rolled_back: list[str] = Field(default_factory=list)  # families undone
    # families whose older instructions the reviewer took back ("drop the example")
    taken_back: list[str] = Field(default_factory=list)
    strengthened: list[str] = Field(default_factory=list)
    report: list[str] = Field(default_factory=list)  # skipped, kept, partial, not understood

    @property
    def changed(self) -> bool:
        return bool(self.plan.changes)

    @property
    def new_changes(self) -> list[EvolutionChange]:
        """The step's own changes (not the inverse ones of its rollback)."""
        return [c for c in self.plan.changes if not c.reason.startswith(ROLLBACK_REASON)]

    @property
    def to_judge(self) -> bool:
        """Whether the next score judges this step's evolution (its own changes, or a
        revert's)."""
        return bool(judged_changes(self.plan.changes))


class CycleDecision(BaseModel):
    """What a cycle step decided, for the step that records it: nothing here is written yet.
    ``step`` is None when the lineage is locked (the score only judges) or training failed."""

    judged: JudgedEvolution | None = None
    step: CycleStep | None = None
    attempt_id: str | None = None  # the attempt that wrote the scored output
    applied_insights: list[tuple[str, EvolutionChange]] = Field(default_factory=list)
    summary: str = ""
    reading: str | None = None  # how the comment was read, said back to the rater
    wants: list[str] = Field(default_factory=list)  # that reading as wants (domain.wants)
    training_error: str | None = None
    agreement: Agreement | None = None  # several raters: what they agreed on, and did not
