"""The reading of a comment in a terminal (`training-camp score` and `read`): said before
anything changes, then taken, edited at a prompt (wishes dropped, or added as `training-camp
correct` takes them: --want, --remove, --amount) or cancelled."""

from __future__ import annotations

import re
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
    "example', '--amount length=half' add one, as `training-camp correct` takes them; 'drop "
    "c2' leaves out a change. An empty line when done: wishes edited, the plan is made again."
)


@dataclass
class Confirmed:
    """What the rater confirmed: the wishes, whether they are the ones to send as wants
    (False: the comment goes to the step to be read, as previewed), the keys of the plan's
    changes confirmed (None: no plan was shown; the step plans and says back after), and
    whether the wishes were edited under a plan, which must then be made again for them."""

    chips: list[Chip]
    as_wants: bool
    changes: list[str] | None = None
    replan: bool = False

    @property
    def wants(self) -> list[str]:
        return [c.want for c in self.chips]


def taken_as_read(seen: ReadingPreview) -> Confirmed:
    """The reading and its plan as shown, confirmed whole (``--yes``, or no terminal)."""
    return Confirmed(seen.chips, seen.exact, seen.change_keys if seen.planned else None)


def payload_wants(seen: ReadingPreview, taken: Confirmed, comment: str | None) -> list[str] | None:
    """The wants a score carries: those its plan was made for, when one was shown (the step
    then makes exactly its confirmed changes); else the wishes taken, when they are what the
    step should act on."""
    if seen.planned:
        return seen.plan_wants
    return taken.wants if taken.as_wants and (comment or taken.wants) else None


def print_reading(console: Console, seen: ReadingPreview, chips: list[Chip] | None = None) -> None:
    """The reading as the step would act on it: the say-back line, the numbered wishes in
    words, what it could not read, and what no wish can carry."""
    chips = seen.chips if chips is None else chips
    console.print(shown(seen.said_back), highlight=False, soft_wrap=True)
    if seen.others:  # several raters: the step acts on what a majority asks, none opposing
        console.print(
            f"Other raters so far: {shown('; '.join(seen.others))}", highlight=False, soft_wrap=True
        )
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
    print_plan(console, seen)


def print_plan(console: Console, seen: ReadingPreview, dropped: set[str] | None = None) -> None:
    """Every change the step would make, each with the name that drops it ('drop c2'), and
    what it would leave undone; or that the step plans when the score arrives."""
    if not seen.planned:
        console.print(
            "Changes: planned by the step when the score arrives, and said back after",
            highlight=False,
        )
        return
    kept = [(n, c) for n, c in enumerate(seen.changes, 1) if c.key not in (dropped or set())]
    if not kept:
        console.print("Changes: none, the agent stays as it is", highlight=False)
    else:
        console.print("Changes the step makes, and only these:", highlight=False)
    for n, change in kept:
        console.print(f"  c{n}  {shown(change.label)}", highlight=False, soft_wrap=True)
        if change.why:  # the page shows it on hover: a rollback or a take-out says so here
            console.print(f"       why: {shown(change.why)}", highlight=False, soft_wrap=True)
    for note in seen.plan_notes:
        console.print(f"  not done: {shown(note)}", highlight=False, soft_wrap=True)


def _no_wishes(seen: ReadingPreview) -> str:
    """What an empty list of wishes means: nothing changes only when the step would act on
    nothing else (no wish read that no want can carry, nothing left for the step to read, no
    change in its plan)."""
    if seen.unsaid:
        return "none to list; the step acts on what is also read (below)"
    if seen.incomplete:
        return "none read here; the step reads the comment when you send it"
    if seen.planned and seen.changes:
        return "none"
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


def dropped_change(seen: ReadingPreview, line: str) -> str | None:
    """The key of the change a 'drop cN' line names (None: the line is not one)."""
    tokens = line.split()
    if len(tokens) != 2 or tokens[0] != "drop" or not re.fullmatch(r"c\d+", tokens[1].lower()):
        return None  # "drop creative" drops a wish, not a change
    number = tokens[1][1:]
    if not number.isdigit() or not 1 <= int(number) <= len(seen.changes):
        raise ValueError(f"drop {excerpt(tokens[1])}: no such change (c1 to c{len(seen.changes)})")
    return seen.changes[int(number) - 1].key


def confirm(
    console: Console, seen: ReadingPreview, ask: Callable[[str], str], undo_to: int | None = None
) -> Confirmed | None:
    """Ask the rater to take, edit or cancel the reading and its plan; None when cancelled.
    Wishes edited under a plan come back with ``replan``: the plan is made again for them
    and asked about again."""
    chips = list(seen.chips)
    changed = False
    left_out: set[str] = set()
    dropped = shown("; ".join(seen.unsaid))
    while True:
        answer = ask("Take it [t], edit it [e] or cancel [c]? ").strip().lower()
        if answer in ("t", "take", "y", "yes", ""):
            keys = [k for k in seen.change_keys if k not in left_out] if seen.planned else None
            return Confirmed(chips, seen.exact or changed, keys)
        if answer in ("c", "cancel", "n", "no", "q"):
            return None
        if answer not in ("e", "edit"):
            console.print("t, e or c", highlight=False)
            continue
        console.print(EDIT_HELP, highlight=False, soft_wrap=True)
        while line := ask("edit> ").strip():
            try:
                key = dropped_change(seen, line)
                if key is None:
                    chips = edited(chips, line, undo_to)
            except ValueError as exc:
                console.print(f"[red]{shown(exc)}[/red]", highlight=False, soft_wrap=True)
                continue
            if key is not None:
                left_out.add(key)
                print_plan(console, seen, left_out)
                continue
            if not changed and dropped:  # edited wishes are sent as they are: nothing else
                console.print(
                    f"  dropped, since you edited the wishes: {dropped}",
                    highlight=False,
                    soft_wrap=True,
                )
            changed = True
            listed = "  ".join(f"[{n}] {shown(c.label)}" for n, c in enumerate(chips, 1))
            empty = "none" if seen.planned else "none, nothing changes"
            console.print(f"Wishes: {listed or empty}", highlight=False)
        if changed and seen.planned:  # the plan for the wishes as edited, shown before sending
            return Confirmed(chips, True, None, replan=True)
