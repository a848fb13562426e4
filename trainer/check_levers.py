"""A check that fails while its instruction is already in the prompt pulls a different lever,
never a second copy of the instruction.

The agent's own try at the scored output (before any revision) failed a check of an active
wish, and the prompt already carries an instruction for that wish: writing it again would only
repeat it. The instruction moves up instead, to right after the prompt's opening sentence (the
role), where a model weighs it first; an instruction already there gets a one-line example
of the wanted form (``form_examples`` in ``trainer/check_cues.json``), once, and after that
the step only says so. An output cut off at the token limit gets more room from the cycle step
instead.
"""

from __future__ import annotations

from domain.agent import AgentDefinition
from domain.change_families import aspect_of
from domain.checks import CheckResult
from domain.trainer import EvolutionChange
from trainer.checks import cues
from trainer.credit_assignment import families_of
from trainer.prompt_segments import segments

LEVER_REASON = "check: "


def levers(
    agent: AgentDefinition,
    failed: list[CheckResult],
    planned: list[EvolutionChange],
    report: list[str],
    active: set[str] | frozenset[str] = frozenset(),
) -> list[EvolutionChange]:
    """The changes that move up the instruction of each failed check the prompt carries and
    no planned change touches already (the reviewer's words come first). The instructions of
    the active wishes (``active``) that lead the prompt, right after its opening sentence, form
    its leading block: a moved instruction joins the end of it, and one inside it stays (so two
    failing wishes never take turns at the top)."""
    parts = segments(agent.system_prompt)
    touched = {c.want for c in planned} | {
        f
        for c in planned
        if c.component == "systemPrompt"
        for f in families_of(c.before or "") | families_of(c.after or "")
    }
    lead = 1  # the leading block: parts[1:lead]
    while lead < len(parts) and families_of(parts[lead]) & (active | {c.family for c in failed}):
        lead += 1
    moved: list[str] = []
    examples: list[EvolutionChange] = []
    for check in failed:
        if check.family in touched or len(parts) < 2:
            continue
        carrying = [i for i, s in enumerate(parts) if check.family in families_of(s)]
        if not carrying or parts[carrying[0]] in moved:
            continue
        if carrying[0] >= lead:
            moved.append(parts[carrying[0]])
            continue
        # it leads already: a one-line example of the wanted form, once
        line = example_of(check)
        if line and line not in agent.system_prompt:
            examples.append(_change(check, "add", before=None, after=line, lever="an example"))
        else:
            report.append(
                f"{check.wish}: failed on the agent's own try ({check.measure or 'not found'}), "
                "and its instruction already leads the prompt"
                + (" with an example" if line else "")
            )
    if not moved:
        return examples
    joiner = "\n" if "\n" in agent.system_prompt.strip() else " "
    changes = [
        _change(c, "remove", before=segment, after=None)
        for segment in moved
        for c in [next(c for c in failed if check_moves(c, [segment]))]
    ]
    last = parts[lead - 1]  # the end of the leading block (the opening when there is none)
    first = next(c for c in failed if check_moves(c, moved))
    changes.append(_change(first, "modify", before=last, after=joiner.join([last, *moved])))
    return changes + examples


FORM_EXAMPLE = "Like this:"  # how every form example of the data opens (checked at load)


def is_form_example(segment: str) -> bool:
    """Whether a prompt segment is a form example the levers wrote, not an instruction."""
    return segment.startswith(FORM_EXAMPLE)


def example_of(check: CheckResult) -> str | None:
    """The one-line example of the form ``check`` wants (None: the data has none)."""
    line = cues().form_examples.get(check.family)
    if line is None or (check.family == "shorter" and check.target is None):
        return None
    target = int(check.target or 0)
    return line.format(target=target, sentences=max(1, round(target / 15)), wish=check.wish)


def _change(
    check: CheckResult,
    kind: str,
    before: str | None,
    after: str | None,
    lever: str = "its instruction moves up to lead the prompt",
) -> EvolutionChange:
    return EvolutionChange(
        component="systemPrompt",
        change_type=kind,  # type: ignore[arg-type]
        target="instruction",
        before=before,
        after=after,
        reason=f"{LEVER_REASON}{_said(check)} failed on the agent's own try while the prompt "
        f"asks for it: {lever}, not the instruction twice",
        confidence=0.6,
        aspect=aspect_of(check.family),
        want=check.family,
    )


def check_moves(check: CheckResult, moved: list[str]) -> bool:
    return any(check.family in families_of(s) for s in moved)


def _said(check: CheckResult) -> str:
    return f"{check.wish} ({check.measure})" if check.measure else check.wish
