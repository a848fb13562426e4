"""Wishes as checks, as they cross Temporal: the wishes a lineage checks every output against
(asked for and not taken back, with their amounts), and what a check found.

The checks themselves are pure functions in ``trainer/checks.py``. Every list here is bounded
by count and each entry by the length of its text, so that a lineage's carried state, the
agent activity's input and its result stay far below Temporal's payload limit however long the
lineage lives (tests/test_payload_bounds.py measures the largest).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from domain.answer_parts import unscoped
from domain.trainer import Amount, WishAction

MAX_ACTIVE_WISHES = 24  # a few families and banned phrases (the oldest unmeasured go first)
MAX_WISH_QUOTE_CHARS = 200
MAX_WISH_DETAIL_CHARS = 120
MAX_CHECK_TEXT_CHARS = 160
PASS, FAIL = "✓", "✗"
# What stands for the checks of an output its measures could not finish within their budget
# (trainer/measure_budget.py): said back, never a pass or a fail, never a reason to revise
UNMEASURED = "unmeasured"
NOT_CHECKED = "not checked: output too large to measure in time"
NOT_MEASURED = "not checked:"  # how a wish this output gives no measure of is said


class ActiveWish(BaseModel):
    """A wish the reviewer made and has not taken back, with what it takes to check it."""

    model_config = ConfigDict(frozen=True)

    family: str = Field(max_length=40)
    # add/more/keep: the output shows it; remove: the output must not ("no table")
    action: WishAction = "add"
    amount: Amount | None = None
    # what else the wish names: a language ("German"), a phrase banned ("worth noting")
    detail: str | None = Field(default=None, max_length=MAX_WISH_DETAIL_CHARS)
    quote: str = Field(default="", max_length=MAX_WISH_QUOTE_CHARS)
    cycle: int = 0  # the cycle whose score asked for it
    # the length in words of the output the wish was made on ("shorter": shorter than that)
    made_on_words: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        """One active wish per key: a family, a family and the phrase it bans, or a language
        and the part it is asked of (several languages stand side by side, one per part)."""
        if self.family == "banned":
            return (self.family, (self.detail or "").lower())
        if self.family == "language":
            return (self.family, unscoped(self.detail)[1] or "")
        return (self.family, "")


class CheckResult(BaseModel):
    """One wish checked on one output: passed or not, and what was measured."""

    model_config = ConfigDict(frozen=True)

    family: str = Field(max_length=40)
    wish: str = Field(max_length=MAX_CHECK_TEXT_CHARS)  # "about 90 words", "no table"
    passed: bool
    measure: str = Field(default="", max_length=MAX_CHECK_TEXT_CHARS)  # "88", "one found"
    # the number measured and the number wished, where there are numbers (words, a count)
    value: float | None = None
    target: float | None = None
    # how far it is off, said to the model in a revision ("31 words over")
    shortfall: str | None = Field(default=None, max_length=MAX_CHECK_TEXT_CHARS)
    cycle: int = 0  # the cycle whose score asked for the wish
    # False: a wish this output gives no measure of (plain language in a language with no
    # readability measure), said as "not checked", never a pass or a fail
    checked: bool = True

    @property
    def measured(self) -> bool:
        return self.family != UNMEASURED and self.checked

    def line(self) -> str:
        """``✓ about 90 words (88)``, ``✗ no table (one found)``, ``not checked: plain
        language (no readability measure for Norwegian)``, or ``NOT_CHECKED``."""
        if self.family == UNMEASURED:
            return self.wish
        if not self.checked:
            return f"{NOT_MEASURED} {self.wish}" + (f" ({self.measure})" if self.measure else "")
        mark = PASS if self.passed else FAIL
        return f"{mark} {self.wish}" + (f" ({self.measure})" if self.measure else "")


def checklist(results: list[CheckResult]) -> str:
    """The results in one line: ``✓ about 90 words (88) · ✗ no table (one found)``."""
    return " · ".join(r.line() for r in results)


def passes(results: list[CheckResult]) -> int:
    return sum(r.passed and r.measured for r in results)


def failed(results: list[CheckResult]) -> list[CheckResult]:
    """The checks the output failed (an output not measured failed none)."""
    return [r for r in results if not r.passed and r.measured]


def not_checked(cycle: int = 0) -> CheckResult:
    """The one result of an output whose measures overran their budget."""
    return CheckResult(family=UNMEASURED, wish=NOT_CHECKED, passed=False, cycle=cycle)


class OutputChecks(BaseModel):
    """What the checks found of the output shown for scoring, for the card, the inbox and
    ``training-camp output``."""

    checks: list[CheckResult]
    tries: int = 1  # the output and its revisions in the cycle
    revised: bool = False  # the output shown is a revision
    # the checks of the agent's own try, before any revision (what its prompt alone produced)
    own: list[CheckResult] = Field(default_factory=list)

    def line(self) -> str:
        """The checklist, and when a revision was tried, what became of it."""
        said = checklist(self.checks)
        if self.revised:
            return f"{said} · revised once in the cycle"
        if self.tries > 1:
            return f"{said} · a revision was tried, passed no more checks, and is not shown"
        return said
