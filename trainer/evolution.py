"""Targeted evolution: apply a plan's changes and nothing else (the recorder bumps the version)."""

from __future__ import annotations

import json
import re
from typing import Any

from domain.agent import AgentDefinition, AgentTool, FlowStep
from domain.trainer import ROLLBACK_REASON, STRENGTHEN_REASON, EvolutionChange

PARAMETER_TARGETS = {"maxTokens": "max_tokens", "temperature": "temperature", "topP": "top_p"}


# How the reason of a change the cycle step makes on its own opens (the rollback and
# strengthen prefixes live in domain.trainer: the store's blame view reads them too)
TAKE_BACK_REASON = "take back: "
# A flow step's place in the flow, kept with a removed step (and a revert's added one) so that
# putting it back puts it where it was: a step added without it goes at the end
POSITION = "position"
__all__ = ["POSITION", "ROLLBACK_REASON", "STRENGTHEN_REASON", "TAKE_BACK_REASON"]


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


def _parse(text: str | None, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "")
    except json.JSONDecodeError:
        raise EvolutionError(f"{what} must be a JSON object, got {text!r:.80}") from None
    if not isinstance(value, dict):
        raise EvolutionError(f"{what} must be a JSON object")
    return value


def _fields(update: dict[str, Any], what: str) -> dict[str, Any]:
    """An item's keys as the definition's field names: a change says them as it was dumped,
    by alias ("inputSchema"), and the definition is merged by field name ("input_schema")."""
    model = AgentTool if what == "tool" else FlowStep
    named = {field.alias: name for name, field in model.model_fields.items() if field.alias}
    return {named.get(key, key): value for key, value in update.items()}


def _apply_listed(items: list[dict[str, Any]], change: EvolutionChange, what: str) -> None:
    """Tools and flow steps are lists of named objects: add / remove / modify by name."""
    names = [item["name"] for item in items]
    if change.change_type == "add":
        item = _fields(_parse(change.after, f"the {what} to add"), what)
        if item.get("name") in names:
            raise EvolutionError(f"{what} {item.get('name')!r} already exists")
        at = item.pop(POSITION, None)
        items.insert(at if isinstance(at, int) and at >= 0 else len(items), item)
        return
    if change.target not in names:
        raise EvolutionError(f"no {what} named {change.target!r}")
    index = names.index(change.target)
    if change.change_type == "remove":
        del items[index]
    elif what == "flow step" and change.after and not change.after.lstrip().startswith("{"):
        items[index] = {**items[index], "prompt": change.after}  # a new prompt template
    else:
        items[index] = {**items[index], **_fields(_parse(change.after, f"the {what} update"), what)}


def apply_changes(agent: AgentDefinition, changes: list[EvolutionChange]) -> AgentDefinition:
    """A new definition with exactly ``changes`` applied; untouched fields stay byte-identical.
    Validation re-checks the immutable constraints: a violating result raises ValueError."""
    data = agent.model_dump(mode="json")
    for change in changes:
        if change.component == "systemPrompt":
            data["system_prompt"] = _apply_prompt(data["system_prompt"], change)
        elif change.component == "parameters":
            field = PARAMETER_TARGETS.get(change.target)
            if field is None or change.after is None:
                raise EvolutionError(f"cannot change parameter {change.target!r}")
            try:
                value = float(change.after)
            except ValueError:
                raise EvolutionError(f"{change.target} must be a number") from None
            data["parameters"][field] = int(value) if field == "max_tokens" else value
        elif change.component == "tools":
            _apply_listed(data["tools"], change, "tool")
        else:
            _apply_listed(data["flow"], change, "flow step")
    return AgentDefinition.model_validate(data)


def inverse(change: EvolutionChange) -> EvolutionChange:
    """The change that undoes ``change`` (a rollback's step). It pursues no family of its own:
    whatever the reviewer wants instead is carried by changes of its own."""
    flipped = {"add": "remove", "remove": "add", "modify": "modify"}[change.change_type]
    return change.model_copy(
        update={
            "change_type": flipped,
            "before": change.after,
            "after": change.before,
            "reason": f"{ROLLBACK_REASON}{change.reason}",
            "want": None,
        }
    )
