"""What the CLI tells people to do next with a session: how to score, wait and look, each as
a command to copy (printed by `training-camp start` and by the demo)."""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from pathlib import Path
from urllib.parse import quote

from client import workflow_id
from domain.settings import Settings
from domain.spec import SessionSpec
from services.terminal import console as make_console
from services.terminal import shown

console = make_console()


def command(name: str) -> str:
    """How to call a console script installed next to this Python (relative when shorter)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        with contextlib.suppress(ValueError):
            return str(beside.relative_to(Path.cwd()))
        return str(beside)
    return name


def temporal_cli() -> str:
    """How to call the `temporal` CLI."""
    return command("temporal")


def print_instructions(
    spec: SessionSpec, settings: Settings, ui_url: str | None, next_cycle: int = 2
) -> None:
    """How to score, wait and look, for this session; ``next_cycle``: the first lineage's next
    cycle (after a restart, not always 2)."""
    name, session = shown(repr(spec.name)), shown(spec.session_id)
    console.print(f"\n[bold]Session[/bold] {name} (id [cyan]{session}[/cyan])")
    if ui_url:
        query = quote(f'TrainingCampSession="{spec.session_id}"')
        # the address on a line of its own, never wrapped: copied, it must work
        console.print("Temporal Web UI (this session's lineages):")
        console.print(
            f"{ui_url}/namespaces/{settings.temporal_namespace}/workflows?query={query}",
            soft_wrap=True,
            highlight=False,
        )
    for lineage in spec.lineages:
        console.print(
            f"  lineage {shown(lineage.label)}: workflow id [cyan]"
            f"{shown(workflow_id(spec.lineage_id(lineage.label)))}[/cyan]"
        )
    first = workflow_id(spec.lineage_id(spec.lineages[0].label))
    default = settings.temporal_address in ("localhost:7233", "127.0.0.1:7233")
    address = "" if default else (f" --address {settings.temporal_address}")
    # our commands find a server on another port through the environment
    ours = "" if default else f"TEMPORAL_ADDRESS={settings.temporal_address} "
    training_camp = ours + command("training-camp")
    score = json.dumps(
        {"score": 3, "comment": "Way too long, wanted quick bullets", "rater": "you"}
    )
    console.print("\nScore the latest output (signal; a bad payload is recorded as rejected):")
    console.print(
        f"  {temporal_cli()} workflow signal{address} --workflow-id {first} --name score "
        f"--input {shlex.quote(score)}",
        soft_wrap=True,
        highlight=False,
    )
    console.print("Or with validation (update; a bad payload is refused, exit code 1):")
    console.print(
        f"  {temporal_cli()} workflow update execute{address} -o json --workflow-id {first} "
        f"--name submit_score --input '{{\"score\": 8}}'",
        soft_wrap=True,
        highlight=False,
    )
    console.print("Or see how your comment is read, edit it, then send (on a terminal):")
    lineage = spec.lineage_id(spec.lineages[0].label)
    console.print(
        f"  {training_camp} score {lineage} 3 {shlex.quote('Way too long, wanted quick bullets')}"
        " --rater you",
        soft_wrap=True,
        highlight=False,
    )
    console.print(
        f"Wait for cycle {next_cycle}'s output (update; returns once it awaits its score):"
    )
    console.print(
        f"  {temporal_cli()} workflow update execute{address} --workflow-id {first} "
        f"--name await_output --input {next_cycle}",
        soft_wrap=True,
        highlight=False,
    )
    console.print("Every output awaiting a score, across sessions:")
    console.print(f"  {training_camp} inbox", soft_wrap=True, highlight=False)
    console.print("Read the whole output you are scoring, and where each instruction came from:")
    console.print(
        f"  {training_camp} output {lineage}\n  {training_camp} blame {lineage}",
        soft_wrap=True,
        highlight=False,
    )
    console.print("Look at a lineage:")
    console.print(
        f"  {temporal_cli()} workflow query{address} --workflow-id {first} --type state",
        soft_wrap=True,
        highlight=False,
    )
    console.print(
        f"  {temporal_cli()} workflow list{address} --query "
        f"{shlex.quote(f'TrainingCampSession={chr(34)}{spec.session_id}{chr(34)}')}\n",
        soft_wrap=True,
        highlight=False,
    )
