"""The reading previewed: what a score's comment would change, before anything changes.

Where a person scores (the review page, ``training-camp score``) the comment is read as the
lineage's cycle step would read it — the same reader, the same corrections remembered, the same
backend (``rules``, or ``rules+claude`` handing Claude what the rules engine cannot place) — and
shown as wishes the rater confirms or edits. The confirmed wishes are sent with the score as
``wants``, which the step takes as given: it acts on exactly what the rater saw.
"""

from __future__ import annotations

import re
from typing import Any

from domain import want_labels, wants
from domain.corrections import LabelledExample
from domain.execution import preview_of
from domain.reading_preview import ReadingPreview, Unplaced, chip
from domain.redaction import redact
from domain.trainer import FeedbackAspect, ScoreAnalysis
from trainer import credit_assignment, cycle_step, wish_guard
from trainer.backends import HandOverTrainer, TrainerBackend, TrainerBackends, TrainerConfigError
from trainer.cycle_step import LineageMemory
from trainer.measure_budget import OverBudget, warmed, within_budget

QUOTE_CHARS = 120
READ_BUDGET_SECONDS = 10.0  # a 4,000-character comment is read in under a second, idle
NOT_READ = (
    "not read here: the comment took too long to read in time; the step reads it when you "
    "send the score, and says back how"
)


async def preview(
    backend: TrainerBackend,
    memory: LineageMemory,
    score: float,
    comment: str | None,
    undo_to: int | None = None,
    wants: list[str] | None = None,
) -> ReadingPreview:
    """The reading the cycle step would act on for ``score`` and ``comment`` (``memory``
    holds the corrections the reader consults; ``undo_to`` is the version an undo goes back
    to, for its chip's words), or for ``wants``, the wishes as the rater edited them. A
    credential in the comment is masked first, as the lineage's door masks it: the step reads
    it so, and no model endpoint is sent it."""
    comment = redact(comment) if comment else comment
    memory = memory.model_copy(update={"wants": wants})
    await warmed(_warm_reader)
    try:
        # the reading is CPU work: in a measuring thread, so the review app's event loop
        # answers every other rater meanwhile; a comment it cannot read in time is left to
        # the step, said so
        read = await within_budget(
            READ_BUDGET_SECONDS, cycle_step.rules_reading, memory, score, comment
        )
    except OverBudget:
        return ReadingPreview(chips=[], said_back=NOT_READ, incomplete=NOT_READ)
    try:
        analysis = await cycle_step.backend_reading(backend, memory, read, score, comment)
    except ModelNotHere as missing:
        return _guarded(_said(read, undo_to, incomplete=str(missing)), read, memory)
    return _guarded(_said(analysis, undo_to), analysis, memory)


def _warm_reader() -> None:
    """The reader's tables and models loaded (seconds, cold), so the budget times reading."""
    memory = LineageMemory(session_id="", lineage_id="")
    for comment in ("Shorter.", "This misses the point entirely."):  # placed, and not
        cycle_step.rules_reading(memory, 5.0, comment)


def _guarded(said: ReadingPreview, reading: ScoreAnalysis, memory: LineageMemory) -> ReadingPreview:
    """The wishes a standing one would keep the step from acting on, said before sending
    ("prose would break 'the options in a table', asked for in cycle 2"), with the take-back
    that lets them through offered as a chip."""
    taken_back = credit_assignment.takebacks(reading)
    standing = wish_guard.protected(memory.wishes, taken_back, memory.cycle)
    blocked = wish_guard.breaking(standing, credit_assignment.wishes(reading))
    for family, wish in blocked.items():
        said.unsure.append(
            Unplaced(
                quote=_quote(wish.quote or wish.family),
                why=wish_guard.kept(wish, family),
                proposed=[chip(f"remove:{wish.family}")],
                standing=True,
            )
        )
    return said


def _said(
    reading: ScoreAnalysis, undo_to: int | None, incomplete: str | None = None
) -> ReadingPreview:
    report = cycle_step.not_understood(reading)
    unsure = [
        Unplaced(
            quote=_quote(u.quote),
            why=u.why,
            proposed=[chip(w, undo_to) for w in u.proposed if _valid(w)],
        )
        for u in reading.unsure
    ]
    if report and not unsure:  # the whole comment: nothing in it could be read
        unsure = [Unplaced(quote=_quote(reading.comment), why=_why(report[0]))]
    return ReadingPreview(
        chips=[chip(w, undo_to) for w in wants.wants_of(reading.aspects)],
        said_back=cycle_step.say_back(reading, report),
        unsure=unsure,
        unsaid=[_described(a) for a in reading.aspects if a.want and wants.render(a) is None],
        read_by=reading.read_by,
        handed_over=[_quote(c) for c in reading.handed_over],
        undo_to=undo_to,
        incomplete=incomplete,
    )


def _quote(text: str | None) -> str:
    return preview_of(" ".join((text or "").split()), QUOTE_CHARS)


def _why(note: str) -> str:
    """The reason part of a "not understood: '…': why" note (the quote in either quotes: a
    quote holding an apostrophe is written in double ones)."""
    said = re.match(r"""not understood: (?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"): """, note)
    return note[said.end() :] if said else note.rsplit("': ", 1)[-1]


def _valid(want: str) -> bool:
    try:
        wants.parse(want)
    except ValueError:
        return False
    return True


def _described(aspect: FeedbackAspect) -> str:
    """A wish no want names, in words: "more on the costs ('focus on the costs')"."""
    what = want_labels.wish_words(aspect)
    quote = _quote(aspect.quote)
    return f"{what} ({quote!r})" if quote else what


# ---- the backend, where the preview runs --------------------------------------------------


class ModelNotHere(Exception):
    """The lineage's step would ask Claude, and this process has no key to ask it."""


class _NoModel:
    """Stands for Claude where the preview runs without ANTHROPIC_API_KEY: a comment the step
    would hand to Claude is said to be read by the step instead (never read another way). The
    preview only reads: it never asks a backend for credit or a plan."""

    name = "claude"
    reads_with_rules = False
    hands_over = False

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def analyze(
        self, score: float, comment: str | None, previous_scores: list[float]
    ) -> ScoreAnalysis:
        raise ModelNotHere(
            "Claude reads this comment when the step runs; it cannot be previewed here "
            f"({self.reason})"
        )

    async def read_clauses(
        self, score: float, clauses: list[str], examples: list[LabelledExample]
    ) -> dict[str, list[str]]:
        raise ModelNotHere(
            "Claude reads what the rules engine could not place when the step runs; it cannot "
            f"be previewed here ({self.reason})"
        )


def backend_for(backends: TrainerBackends, trainer: str, model: str) -> TrainerBackend:
    """The lineage's backend as the preview uses it: the step's own, or, without a key here,
    the same backend with Claude's reading left to the step."""
    try:
        return backends.get(trainer, model)
    except TrainerConfigError:
        missing: Any = _NoModel("ANTHROPIC_API_KEY is not set where you score")
        return HandOverTrainer(backends.rules, missing) if trainer == "rules+claude" else missing
