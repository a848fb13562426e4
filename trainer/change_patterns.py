"""Change patterns: when two changes are "the same idea", for the history check and insights."""

from __future__ import annotations

import hashlib
import re

from domain.trainer import EvolutionChange

SIMILARITY = 0.6
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str | None) -> set[str]:
    return set(_WORD.findall((text or "").lower()))


def _direction(change: EvolutionChange) -> str:
    try:
        return "increase" if float(change.after or 0) > float(change.before or 0) else "decrease"
    except ValueError:
        return "set"


def pattern(change: EvolutionChange) -> tuple[str, str]:
    """(pattern, pattern type): a readable name shared by every change of the same family."""
    if change.component == "parameters":
        return f"parameters.{change.target} {_direction(change)}", "param_change"
    if change.component == "tools":
        return f"tools {change.change_type} {change.target}", "tool_change"
    if change.component == "flow":
        return f"flow {change.change_type} {change.target}", "flow_change"
    text = change.after if change.change_type == "add" else change.before
    if change.change_type == "modify":
        text = f"{change.before} -> {change.after}"
    normal = " ".join(_WORD.findall((text or "").lower()))
    return f"systemPrompt {change.change_type}: {normal}", "prompt_change"


def insight_id(session_id: str, pattern_text: str) -> str:
    return "insight-" + hashlib.sha256(f"{session_id}|{pattern_text}".encode()).hexdigest()[:16]


def similar(a: EvolutionChange, b: EvolutionChange) -> bool:
    if (a.component, a.change_type) != (b.component, b.change_type):
        return False
    if a.component == "parameters":
        return a.target == b.target and _direction(a) == _direction(b)
    if a.component in ("tools", "flow"):
        return a.target == b.target
    text_a = a.after if a.change_type != "remove" else a.before
    text_b = b.after if b.change_type != "remove" else b.before
    wa, wb = _words(text_a), _words(text_b)
    if not wa or not wb:
        return False
    return len(wa & wb) / len(wa | wb) >= SIMILARITY
