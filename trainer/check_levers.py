"""A check that fails while its instruction is already in the prompt pulls a different lever,
never a second copy of the instruction.

The agent's own try at the scored output (before any revision) failed a check of an active
wish, and the prompt already carries an instruction for that wish: writing it again would only
repeat it. The instruction moves up instead, to right after the prompt's opening sentence (the
role), where a model weighs it first. An instruction already there is left as it is, and the
step says so; an output cut off at the token limit gets more room from the cycle step instead.
"""

from __future__ import annotations

from domain.agent import AgentDefinition
from domain.change_families import aspect_of
from domain.checks import CheckResult
from domain.trainer import EvolutionChange
from trainer.credit_assignment import families_of
from trainer.prompt_segments import segments

LEVER_REASON = "check: "


def levers(
    agent: AgentDefinition,
    failed: list[CheckResult],
    planned: list[EvolutionChange],
    report: list[str],
) -> list[EvolutionChange]:
    """The changes that move up the instruction of each failed check the prompt carries and
    no planned change touches already (the reviewer's words come first)."""
    parts = segments(agent.system_prompt)
    touched = {c.want for c in planned} | {
        f
        for c in planned
        if c.component == "systemPrompt"
        for f in families_of(c.before or "") | families_of(c.after or "")
    }
    moved: list[str] = []
    for check in failed:
        if check.family in touched or len(parts) < 2:
            continue
        carrying = [i for i, s in enumerate(parts) if check.family in families_of(s)]
        if not carrying:
            continue
        where = carrying[0]
        if where <= 1 or parts[where] in moved:
            report.append(
                f"{check.wish}: failed on the agent's own try ({check.measure or 'not found'}), "
                "and its instruction already leads the prompt"
            )
            continue
        moved.append(parts[where])
    if not moved:
        return []
    joiner = "\n" if "\n" in agent.system_prompt.strip() else " "
    changes = [
        _change(c, "remove", before=segment, after=None)
        for segment in moved
        for c in [next(c for c in failed if check_moves(c, [segment]))]
    ]
    opening = parts[0]
    first = next(c for c in failed if check_moves(c, moved))
    changes.append(_change(first, "modify", before=opening, after=joiner.join([opening, *moved])))
    return changes


def _change(check: CheckResult, kind: str, before: str, after: str | None) -> EvolutionChange:
    return EvolutionChange(
        component="systemPrompt",
        change_type=kind,  # type: ignore[arg-type]
        target="instruction",
        before=before,
        after=after,
        reason=f"{LEVER_REASON}{_said(check)} failed on the agent's own try while the prompt "
        "asks for it: its instruction moves up to lead the prompt, not written twice",
        confidence=0.6,
        aspect=aspect_of(check.family),
        want=check.family,
    )


def check_moves(check: CheckResult, moved: list[str]) -> bool:
    return any(check.family in families_of(s) for s in moved)


def _said(check: CheckResult) -> str:
    return f"{check.wish} ({check.measure})" if check.measure else check.wish
