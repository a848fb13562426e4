"""The review inbox in a terminal (`training-camp inbox`): what awaits a score, oldest first,
and the command that scores the first of it."""

from __future__ import annotations

import json
import shlex

from rich.table import Table

from client import workflow_id
from domain.execution import preview_of
from review.views import Inbox
from services.instructions import temporal_cli
from services.terminal import console as make_console
from services.terminal import shown

console = make_console()


def print_inbox(found: Inbox) -> None:
    """The outputs awaiting a score as a table, and how to score the first."""
    if not found.items:
        console.print("No output awaits a score.")
        return
    table = Table("workflow id", "cycle", "waiting since (UTC)", "question", "output", "checks")
    for item in found.items:
        table.add_row(
            shown(workflow_id(item.lineage_id)),
            str(item.cycle),
            f"{item.waiting_since:%Y-%m-%d %H:%M:%S}",
            shown(preview_of(" ".join(item.question.split()), 60)),
            shown(preview_of(" ".join(item.preview.split()), 80)),
            shown(item.checks.line()) if item.checks else "",
        )
    console.print(table)
    first = found.items[0]
    example = json.dumps({"score": 8, "cycle": first.cycle})
    console.print(
        f"Score one: {temporal_cli()} workflow update execute --workflow-id "
        f"{workflow_id(first.lineage_id)} --name submit_score --input {shlex.quote(example)}",
        soft_wrap=True,
        highlight=False,
    )
