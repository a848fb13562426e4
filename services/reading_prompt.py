"""The reading of a comment in a terminal (`training-camp score` and `read`): said before
anything changes, then taken, edited at a prompt (wishes dropped, or added as `training-camp
correct` takes them: --want, --remove, --amount) or cancelled."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console

from domain import wants
from domain.reading_preview import Chip, ReadingPreview, chip
from domain.refusals import excerpt
from services.terminal import shown

EDIT_HELP = (
    "One edit a line: 'drop 2' or 'drop bullets' removes a wish; '--want table', '--remove "
    "example', '--amount length=half' add one, as `training-camp correct` takes them. An "
    "empty line when done."
)


@dataclass
class Confirmed:
    """What the rater confirmed: the wishes, and whether they are the ones to send as wants
    (False: the comment goes to the step to be read, as previewed)."""

    chips: list[Chip]
    as_wants: bool

    @property
    def wants(self) -> list[str]:
        return [c.want for c in self.chips]


def print_reading(console: Console, seen: ReadingPreview, chips: list[Chip] | None = None) -> None:
    """The reading as the step would act on it: the say-back line, the numbered wishes in
    words, what it could not read, and what no wish can carry."""
    chips = seen.chips if chips is None else chips
    console.print(shown(seen.said_back), highlight=False, soft_wrap=True)
    listed = "  ".join(f"[{n}] {shown(c.label)} ({shown(c.want)})" for n, c in enumerate(chips, 1))
    console.print(f"Wishes: {listed or _no_wishes(seen)}", highlight=False, soft_wrap=True)
    for u in seen.unsure:
        proposed = ", ".join(f"--want {shown(c.want)} ({shown(c.label)})" for c in u.proposed)
        said = "in the way" if u.standing else "not understood"
        console.print(
            f"  {said}: {shown(repr(u.quote))} ({shown(u.why)})"
            + (f"; to add: {proposed}" if proposed else ""),
            highlight=False,
            soft_wrap=True,
        )
    if seen.handed_over:
        console.print(
            "  read by Claude: " + shown("; ".join(repr(c) for c in seen.handed_over)),
            highlight=False,
            soft_wrap=True,
        )
    if seen.unsaid:
        console.print(
            "  also read, which no wish can carry (acted on only as read): "
            + shown("; ".join(seen.unsaid)),
            highlight=False,
            soft_wrap=True,
        )
    if seen.incomplete:
        console.print(f"  {shown(seen.incomplete)}", highlight=False, soft_wrap=True)


def _no_wishes(seen: ReadingPreview) -> str:
    """What an empty list of wishes means: nothing changes only when the step would act on
    nothing else (no wish read that no want can carry, nothing left for the step to read)."""
    if seen.unsaid:
        return "none to list; the step acts on what is also read (below)"
    if seen.incomplete:
        return "none read here; the step reads the comment when you send it"
    return "none, nothing changes"


def edited(chips: list[Chip], line: str, undo_to: int | None = None) -> list[Chip]:
    """The wishes after one edit line (``EDIT_HELP``); ValueError says what is wrong."""
    try:
        tokens = shlex.split(line)
    except ValueError as exc:
        raise ValueError(f"cannot read {excerpt(line)}: {exc}") from None
    if not tokens:
        return chips
    if tokens[0] == "drop":
        kept = list(chips)
        for name in tokens[1:] or [""]:
            at = int(name) - 1 if name.isdigit() else None
            found = [
                c
                for n, c in enumerate(chips)
                if n == at or name.lower() in (c.want, wants.parse(c.want).want)
            ]
            if not found:
                raise ValueError(
                    f"drop {excerpt(name)}: no such wish (give its number or its name)"
                )
            kept = [c for c in kept if c not in found]
        return kept
    options: dict[str, list[str]] = {"--want": [], "--remove": [], "--amount": []}
    pairs = iter(tokens)
    for option in pairs:
        if option not in options:
            raise ValueError(f"{excerpt(option)}: expected drop, --want, --remove or --amount")
        value = next(pairs, None)
        if value is None:
            raise ValueError(f"{option} needs a value")
        options[option].append(value)
    added = wants.from_options(options["--want"], options["--remove"], options["--amount"])
    have = {c.want for c in chips}
    return [*chips, *(chip(w, undo_to) for w in added if w not in have)][: wants.MAX_WANTS]


def confirm(
    console: Console, seen: ReadingPreview, ask: Callable[[str], str], undo_to: int | None = None
) -> Confirmed | None:
    """Ask the rater to take, edit or cancel the reading; None when cancelled."""
    chips = list(seen.chips)
    changed = False
    dropped = shown("; ".join(seen.unsaid))
    while True:
        answer = ask("Take it [t], edit it [e] or cancel [c]? ").strip().lower()
        if answer in ("t", "take", "y", "yes", ""):
            return Confirmed(chips, as_wants=seen.exact or changed)
        if answer in ("c", "cancel", "n", "no", "q"):
            return None
        if answer not in ("e", "edit"):
            console.print("t, e or c", highlight=False)
            continue
        console.print(EDIT_HELP, highlight=False, soft_wrap=True)
        while line := ask("edit> ").strip():
            try:
                chips = edited(chips, line, undo_to)
            except ValueError as exc:
                console.print(f"[red]{shown(exc)}[/red]", highlight=False, soft_wrap=True)
                continue
            if not changed and dropped:  # edited wishes are sent as they are: nothing else
                console.print(
                    f"  dropped, since you edited the wishes: {dropped}",
                    highlight=False,
                    soft_wrap=True,
                )
            changed = True
            listed = "  ".join(f"[{n}] {shown(c.label)}" for n, c in enumerate(chips, 1))
            console.print(f"Wishes: {listed or 'none, nothing changes'}", highlight=False)
