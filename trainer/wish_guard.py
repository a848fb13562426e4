"""No change may break an active wish: a plan that would remove a wish the reviewer made and has
not taken back, or add its opposite, is refused and said back ("kept 'in a table': asked for in
cycle 2").

An active wish (``domain.checks.ActiveWish``) is taken back only by the reviewer saying so — a
take-back ("drop the table", ``remove:table``) — never by a wish read as its contrary: a
complaint misread ("so many columns" read as a wish for prose) must not undo what was asked
for plainly. A length is changed by naming another: a new amount replaces the last one, and a
vague contrary ("longer") never undoes an amount the reviewer named ("about 90 words").

Only a measured wish guards: one listed as "not checked" ("warmer", a focus) is kept from
being taken away by the keep-list alone, as before it was listed (``active_wishes.measured``).
"""

from __future__ import annotations

from domain import want_labels
from domain.change_families import contrary_of
from domain.checks import ActiveWish
from domain.execution import preview_of
from trainer.active_wishes import measured
from trainer.reading.wish import Wish

LENGTH = frozenset({"shorter", "longer"})
QUOTE_CHARS = 60
ASKED = "asked for in cycle"  # by the rater, or by the raters who agreed on it


def protected(
    active: list[ActiveWish], taken_back: list[Wish], cycle: int
) -> dict[str, ActiveWish]:
    """The families no change may break now (by family): every active wish for a form, a
    register or a structure that has stood past its first judgement — a wish made in the cycle
    before ``cycle`` (the scored one) is the change this comment judges, and may be refuted —
    unless this comment takes it back (or undoes the last changes)."""
    gone = {w.family for w in taken_back}
    if "undo" in gone:
        return {}
    return {
        w.family: w
        for w in measured(active)
        if w.action != "remove"
        and w.family != "banned"
        and w.family not in gone
        and (w.family not in LENGTH or w.amount is not None)  # a length the reviewer named
        and w.cycle < cycle - 1
    }


def breaking(guarded: dict[str, ActiveWish], wished: list[Wish]) -> dict[str, ActiveWish]:
    """The families wished now whose instructions would contradict a guarded wish: each with
    the wish it would break. A length wish with an amount of its own replaces the last one."""
    found: dict[str, ActiveWish] = {}
    for wish in wished:
        if wish.action in ("remove", "less", "keep"):
            continue
        if wish.family in LENGTH and wish.amount is not None:
            continue
        broken = [guarded[f] for f in sorted(contrary_of(wish.family)) if f in guarded]
        if broken:
            found[wish.family] = broken[0]
    return found


def kept(wish: ActiveWish, instead: str | None = None) -> str:
    """What the rater is told: "kept 'in a table': asked for in cycle 2 (prose would break it;
    take it back to change it)"; a wish sent as a want is said in the chips' words."""
    said = preview_of(_words(wish.quote) or wish.family, QUOTE_CHARS)
    why = f"{instead} would break it" if instead else "a change would break it"
    how = (
        "name another amount to change it"
        if wish.family in LENGTH
        else f"take it back to change it: 'remove:{wish.family}'"
    )
    return f"kept {said!r}: {ASKED} {wish.cycle} ({why}; {how})"


def said(report: list[str]) -> list[str]:
    """The lines of a step's report that say a wish was kept against a change, one a wish."""
    lines: dict[str, str] = {}
    for line in report:
        if ASKED in line:
            lines.setdefault(line.split(f": {ASKED}")[0], line)
    return list(lines.values())


def _words(quote: str | None) -> str | None:
    """A quote as the rater reads it: "wants numbered:5" is "numbered steps: five lines"."""
    want = want_labels.sent_want(quote)
    return want_labels.label(want) if want else quote
