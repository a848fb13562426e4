"""A Wish: one thing a reviewer's text asks of the answer, in the trainer's change families.
The feedback reader finds them; credit assignment, planning and the phrasebook act on them."""

from __future__ import annotations

from dataclasses import dataclass

from domain.trainer import Amount, WishAction


@dataclass(frozen=True)
class Wish:
    family: str
    aspect: str
    quote: str
    confidence: float
    detail: str | None = None  # a word limit, a language, a topic, a tool's name…
    weak: bool = False  # inferred from a complaint only; yields to an explicit wish
    # add: ask for it; more/less: push what is there further or soften it; remove: take back
    # what is there; keep: approve it (praise is a keep, never an add)
    action: WishAction = "add"
    amount: Amount | None = None
    asked: bool = False  # asked for outright ("use a table"), not inferred from a complaint
    # read from what the answer is said to be or hold ("very bold" → steadier), which irony
    # turns around; a named fault ("wordier") is a complaint however it is said
    described: bool = False
    # the opposite of a form refused ("no bullets" → prose): a form asked for beside it wins
    instead: bool = False

    @property
    def target(self) -> str:
        """What the wish changes: ``prompt``, ``tool:<name>`` (how a tool is used), or
        ``flow:<step>`` (a later step told what to keep)."""
        if self.family == "tool_use":
            return f"tool:{(self.detail or '').split('|')[0] or 'any'}"
        if self.family == "preserve":
            return f"flow:{(self.detail or '').split('|')[0] or 'last'}"
        if self.family == "check_step":
            return "flow:check"
        return "prompt"
