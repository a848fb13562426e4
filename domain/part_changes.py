"""A change of a tool or a flow step in words, as a rater reads it in a plan, on the card and
in the history: what the step is now given ("give step 'check' the output of 'research'"),
what its prompt gains or loses ("in step 'research', add 'Call search_documents first, before
answering.'"), which tools it may use, a step added or taken out — never the JSON the change
carries.

Plain functions over a change's fields (``domain.trainer`` describes every change with them,
so this module imports none of it)."""

from __future__ import annotations

import difflib
import json
import re
import string
from collections.abc import Callable
from typing import Any, Protocol

from domain import built_in_tools

# a line after a step's instruction that only hands it some material: "The output of the
# research step: {research}", "The question: {input}"
_GIVEN_LINE = re.compile(r"^[^{}\n]*:\s*\{\w+\}\s*$")
_PLACEHOLDER = re.compile(r"[ \t]*(['\"]?)\{\w+\}\1")


class PartChange(Protocol):
    component: str
    change_type: str
    target: str
    before: str | None
    after: str | None


Quote = Callable[[str], str]


def part_words(change: PartChange, quote: Quote) -> str:
    """What a change of a tool or a flow step does, in one line (its texts through ``quote``):
    "add step 'check', given the output of 'polish', 'research'", "take out step 'polish'",
    "give step 'check' the output of 'research'", "stop giving step 'polish' the output of
    'draft'", "in step 'research', add '…'", "let step 'research' use search_documents",
    "in the description of tool 'search_documents', add '…'"."""
    step = change.component == "flow"
    what = f"step {change.target!r}" if step else f"tool {change.target!r}"
    if change.change_type == "remove":
        return f"take out {what}"
    if change.change_type == "add":
        given = _given(_fields(change.after).get("prompt", "")) if step else []
        return f"add {what}" + (f", given {_listed(given)}" if given else "")
    before, after = _fields(change.before), _fields(change.after)
    parts: list[str] = []
    if step:
        if "prompt" in after and before.get("prompt") != after["prompt"]:
            had = before.get("prompt") or ""
            parts += _prompt_words(change.target, had, after["prompt"], quote)
        if "tools" in after and before.get("tools") != after["tools"]:
            parts.append(_tools_words(change.target, before.get("tools"), after["tools"]))
    elif "description" in after and before.get("description") != after["description"]:
        # an empty description is the built-in one the model was shown: said as changed from it
        had = built_in_tools.shown(change.target, before.get("description"))
        now = built_in_tools.shown(change.target, after["description"])
        parts += _text_words(f"in the description of {what}", had, now, quote)
    return "; ".join(parts) or f"change {what}"


def _fields(text: str | None) -> dict[str, Any]:
    """A change's side as fields: its JSON object, or a step's prompt given as plain text."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {"prompt": text}
    return value if isinstance(value, dict) else {}


def _given(prompt: str) -> list[str]:
    """What a prompt is given, by its placeholders: "the question", "the output of 'draft'",
    "the output of the step before"."""
    fields = dict.fromkeys(f for _, f, _, _ in string.Formatter().parse(prompt) if f is not None)
    return [_source(f) for f in fields]


def _source(field: str) -> str:
    if field == "input":
        return "the question"
    if field == "previous":
        return "the output of the step before"
    return f"the output of {field!r}"


def _listed(given: list[str]) -> str:
    """ "the output of 'polish'", "the output of 'research'" → "the output of 'polish' and of
    'research'"."""
    outputs = [g.removeprefix("the output of ") for g in given if g.startswith("the output of ")]
    others = [g for g in given if not g.startswith("the output of ")]
    said = others + ([f"the output of {' and of '.join(outputs)}"] if outputs else [])
    return " and ".join(said)


def _prompt_words(step: str, before: str, after: str, quote: Quote) -> list[str]:
    """A step's prompt changed: the material it gains and loses, then its text's change."""
    had, has = _given(before), _given(after)
    parts = [f"give step {step!r} {g}" for g in has if g not in had]
    parts += [f"stop giving step {step!r} {g}" for g in had if g not in has]
    return parts + _text_words(f"in step {step!r}", _text(before), _text(after), quote)


def _text(prompt: str) -> str:
    """A prompt's own words: without the lines that only hand it material and without its
    placeholders (what it is given is said apart)."""
    lines = prompt.split("\n")
    kept = lines[:1] + [line for line in lines[1:] if not _GIVEN_LINE.match(line)]
    return _PLACEHOLDER.sub("", "\n".join(kept)).strip()


def _text_words(where: str, before: str, after: str, quote: Quote) -> list[str]:
    """ "in step 'x', add '…'", "…, take out '…'", "…, rewrite '…' as '…'" (none: the same)."""
    # words compared without the space after them: "for:" at the end of one text and "for: "
    # before an added sentence in the other are the same word, not a rewrite
    old, new = before.split(), after.split()
    added, removed = [], []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed.append(" ".join(old[i1:i2]))
            added.append(" ".join(new[j1:j2]))
    gone, came = " … ".join(r for r in removed if r), " … ".join(a for a in added if a)
    if gone and came:
        return [f"{where}, rewrite {quote(gone)} as {quote(came)}"]
    if came:
        return [f"{where}, add {quote(came)}"]
    if gone:
        return [f"{where}, take out {quote(gone)}"]
    return []


def _tools_words(step: str, before: list[str] | None, after: list[str] | None) -> str:
    """The tools a step may use: "let step 'x' use search_documents", "stop step 'x' using
    calculator", "let step 'x' use only: a, b" (from every tool), "let step 'x' use every
    tool"."""
    if after is None:
        return f"let step {step!r} use every tool"
    if before is None:
        return f"let step {step!r} use only: {', '.join(after) or 'no tool'}"
    gained = [t for t in after if t not in before]
    lost = [t for t in before if t not in after]
    parts = [f"let step {step!r} use {', '.join(gained)}"] if gained else []
    parts += [f"stop step {step!r} using {', '.join(lost)}"] if lost else []
    return "; ".join(parts) or f"let step {step!r} use {', '.join(after)} (in this order)"
