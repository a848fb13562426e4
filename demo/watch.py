"""The demo's running commentary: what changes in each lineage, printed once."""

from __future__ import annotations

import asyncio

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from domain.lineage import LineageState
from services.terminal import console as make_console
from services.terminal import shown
from workflows.lineage import LineageWorkflow

console = make_console()


async def watch(handles: list[WorkflowHandle[LineageWorkflow, object]]) -> None:
    """Print what changes in each lineage, once: status, a new output (once per cycle), an
    evolution, accepted directives, locks and unlocks, and every rejection."""
    seen: dict[str, LineageState] = {}
    while True:
        for handle in handles:
            try:
                state: LineageState = await handle.query(LineageWorkflow.state)
            except RPCError:
                continue
            if state.status == "starting":
                continue
            for line in changes(seen.get(handle.id), state):
                console.print(line, highlight=False)
            seen[handle.id] = state
        await asyncio.sleep(0.5)


def changes(before: LineageState | None, now: LineageState) -> list[str]:
    """The lines that tell what happened to a lineage between two looks at its state."""
    lines = []
    label = f"[bold]{shown(now.label)}[/bold]"
    moved = before is None or (before.cycle, before.status, before.agent_version) != (
        now.cycle,
        now.status,
        now.agent_version,
    )
    if moved or (before and len(before.score_history) != len(now.score_history)):
        last = now.score_history[-1] if now.score_history else None
        scored = f" · last score {last.score:g} (cycle {last.cycle})" if last else ""
        lines.append(
            f"{label} cycle {now.cycle} · agent v{now.agent_version} · "
            f"[magenta]{now.status}[/magenta]{scored}"
        )
    if before and now.last_reading and now.score_history != before.score_history:
        lines.append(f"  [cyan]{shown(now.last_reading)}[/cyan]")
    if before and now.agent_version > before.agent_version and now.last_evolution:
        lines.append(f"  [green]{shown(now.last_evolution)}[/green]")
    shown_before = (
        before is not None and before.cycle == now.cycle and (before.status == "awaiting_score")
    )
    if now.status == "awaiting_score" and now.latest_output_preview and not shown_before:
        cut = ", cut off at the token limit" if now.latest_output_cut_off else ""
        lines.append(f"  [dim]output ({now.latest_output_words} words{cut}):[/dim]")
        lines += [
            f"  [dim]│[/dim] {shown(line)}" for line in now.latest_output_preview.splitlines()[:8]
        ]
    if before is not None:
        for kind in ("sticky", "oneshot"):
            old = getattr(before, f"{kind}_directives")
            new = getattr(now, f"{kind}_directives")
            lines += [
                f"  [cyan]{kind} directive accepted:[/cyan] {shown(d)}" for d in new if d not in old
            ]
        if now.locked != before.locked:
            lines.append(f"  [cyan]{'locked' if now.locked else 'unlocked'}[/cyan]")
    new_rejections = now.rejected_feedback - (before.rejected_feedback if before else 0)
    if new_rejections > 0:
        recent = now.recent_rejections[-new_rejections:]
        missed = new_rejections - len(recent)
        if missed > 0:
            lines.append(f"  [yellow]{missed} more rejected (see the store)[/yellow]")
        lines += [f"  [yellow]rejected: {shown(reason)}[/yellow]" for reason in recent]
    return lines
