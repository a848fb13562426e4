"""Targeted evolution: apply a plan's changes and nothing else (the recorder bumps the version)."""

from __future__ import annotations

import re

from domain.agent import AgentDefinition
from domain.trainer import EvolutionChange

PARAMETER_TARGETS = {"maxTokens": "max_tokens", "temperature": "temperature", "topP": "top_p"}


class EvolutionError(ValueError):
    """A change that cannot be applied to this agent (stale ``before``, unknown target…)."""


def _join(prompt: str, addition: str) -> str:
    separator = "\n" if "\n" in prompt.strip() else " "
    return prompt.rstrip() + separator + addition


def _apply_prompt(prompt: str, change: EvolutionChange) -> str:
    if change.change_type == "add":
        if not change.after:
            raise EvolutionError(f"add to systemPrompt without text ({change.target})")
        return _join(prompt, change.after)
    if not change.before or change.before not in prompt:
        raise EvolutionError(f"systemPrompt no longer contains {change.before!r}")
    if change.change_type == "modify":
        return prompt.replace(change.before, change.after or "", 1)
    # remove: drop the segment and the whitespace that followed it
    return re.sub(re.escape(change.before) + r"[ \t]*\n?", "", prompt, count=1).strip()


def apply_changes(agent: AgentDefinition, changes: list[EvolutionChange]) -> AgentDefinition:
    """A new definition with exactly ``changes`` applied; untouched fields stay byte-identical."""
    prompt = agent.system_prompt
    params = agent.parameters.model_dump()
    for change in changes:
        if change.component == "systemPrompt":
            prompt = _apply_prompt(prompt, change)
        elif change.component == "parameters":
            field = PARAMETER_TARGETS.get(change.target)
            if field is None or change.after is None:
                raise EvolutionError(f"cannot change parameter {change.target!r}")
            params[field] = int(change.after) if field == "max_tokens" else float(change.after)
        else:
            raise EvolutionError(f"the rules engine cannot change {change.component} yet")
    data = agent.model_dump()
    data["system_prompt"] = prompt
    data["parameters"] = params
    return AgentDefinition.model_validate(data)
