"""The review inbox in a terminal (`training-camp inbox`): what awaits a score, oldest first,
and the command that scores the first of it."""

from __future__ import annotations

import json
import shlex

from rich.table import Table

from client import workflow_id
from domain.execution import preview_of
from review.views import Inbox
from services.instructions import command, temporal_cli
from services.terminal import console as make_console
from services.terminal import shown

console = make_console()


def print_inbox(found: Inbox) -> None:
    """The outputs awaiting a score as a table (a row number and the lineage's label, so that
    it fits 80 columns), each lineage's id whole beneath it, and how to score the first."""
    if not found.items:
        console.print("No output awaits a score.")
        return
    table = Table("#", "lineage", "cycle", "waiting since (UTC)", "question", "output", "checks")
    for n, item in enumerate(found.items, 1):
        table.add_row(
            str(n),
            shown(item.label),
            str(item.cycle),
            f"{item.waiting_since:%Y-%m-%d %H:%M}",
            shown(preview_of(" ".join(item.question.split()), 60)),
            shown(preview_of(" ".join(item.preview.split()), 80)),
            shown(item.checks.line()) if item.checks else "",
        )
    console.print(table)
    # ids are what commands take: never cut, whatever the terminal's width
    for n, item in enumerate(found.items, 1):
        console.print(
            f"#{n} {shown(item.lineage_id)} (workflow {shown(workflow_id(item.lineage_id))}, "
            f"output {shown(item.output_id)})",
            soft_wrap=True,
            highlight=False,
        )
    first = found.items[0]
    # several raters: a score names its rater, or it is refused
    team = bool(first.scores_progress)
    console.print(
        f"Score #1 (its reading shown first): {command('training-camp')} score "
        f"{shown(first.lineage_id)} 8 'comment'" + (" --rater NAME" if team else ""),
        soft_wrap=True,
        highlight=False,
    )
    # naming the output: refused, not misapplied, if a correction's re-run replaces it
    sent: dict[str, object] = {"score": 8, "output_id": first.output_id}
    if team:
        sent["rater"] = "NAME"
    example = json.dumps(sent)
    console.print(
        f"Or: {temporal_cli()} workflow update execute -o json --workflow-id "
        f"{workflow_id(first.lineage_id)} --name submit_score --input {shlex.quote(example)}",
        soft_wrap=True,
        highlight=False,
    )
