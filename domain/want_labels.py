"""The human words for wants (``domain/want_labels.json``): "shorter: about half", "no table",
"back to v1". The review page's chips and picker, ``training-camp score``, ``read`` and
``correct`` and docs/scoring.md's list of families all say a want this way."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from domain import tool_flow, trace, wants
from domain.answer_parts import part_words, unscoped
from domain.trainer import FeedbackAspect

FILE = Path(__file__).with_name("want_labels.json")


@cache
def _labels() -> dict[str, dict[str, str]]:
    """Every family's words, checked against the families a want may name: one missing or
    left over is a broken install, said at once."""
    found: dict[str, dict[str, str]] = json.loads(FILE.read_text(encoding="utf-8"))["families"]
    missing = set(wants.families()) - set(found)
    extra = set(found) - set(wants.families())
    if missing or extra or not all(entry.get("label") for entry in found.values()):
        raise ValueError(
            f"{FILE.name}: every family needs a label (missing {sorted(missing)}, "
            f"unknown {sorted(extra)})"
        )
    return found


def family_label(family: str) -> str:
    """The words for a family asked for: ``cite_sources`` → "cite sources"."""
    return _labels()[family]["label"]


def sent_want(quote: str | None) -> str | None:
    """The want a wish's quote holds when the wish was sent as one ("wants remove:table"),
    else None (the quote is the rater's own words)."""
    if not quote or not quote.startswith("wants "):
        return None
    want = quote.removeprefix("wants ")
    try:
        wants.parse(want)
    except ValueError:
        return None
    return want


_ASKED = re.compile(r"feedback asked for (?P<want>[^\s,()']+)")
_SENT = re.compile(r" \('wants (?P<want>[^']+)'\)")


def reason_words(reason: str) -> str:
    """A change's stored reason in the chips' words, for people: "feedback asked for
    conclusion_first ('wants conclusion_first')" → "feedback asked for answer first"; a quote
    of the rater's own words stays, one that is only the want sent is dropped."""

    def asked(match: re.Match[str]) -> str:
        try:
            return f"feedback asked for {label(match['want'])}"
        except ValueError:
            return match[0]

    unquoted = _SENT.sub(lambda m: "" if sent_want(f"wants {m['want']}") else m[0], reason)
    return _ASKED.sub(asked, unquoted)


def label(want: str, undo_to: int | None = None) -> str:
    """The words for a want (ValueError for one that does not parse): ``shorter:half`` →
    "shorter: about half", ``remove:table`` → "no table", ``example:1`` → "one example",
    ``undo`` → "back to v1" when ``undo_to`` says which version that is, ``revert:v2`` →
    "back to v2", ``language:german@summary`` → "the closing summary in German",
    ``avoid:"to be fair"`` → "avoid 'to be fair'"."""
    aspect = wants.parse(want)
    family = aspect.want or ""
    if (typed := tool_flow.of(aspect)) is not None:  # "search_documents first, before answering"
        return typed.words()
    if family == "banned":  # avoid:"…"
        return _avoid(aspect.detail or "")
    if family == "language":
        said = _language(aspect.detail or "")
        return {"remove": f"no longer {said}", "keep": f"keep: {said}"}.get(
            aspect.action or "", said
        )
    entry = _labels()[family]
    if family == "undo":
        return f"back to v{undo_to}" if undo_to else entry["label"]
    if family == "revert":  # "revert:v2", "revert:start"
        return f"back to v{wants.version_of(aspect.detail)}"
    if aspect.action == "remove":
        return entry.get("none") or f"no {entry['label']}"
    said = entry["label"] if aspect.action == "add" else f"{aspect.action}: {entry['label']}"
    amount = aspect.amount
    if amount is None:
        return said
    if amount.kind == "count" and amount.unit == wants.UNITS.get(family) and aspect.action == "add":
        return amount.says()  # "one example", "three bullets": the unit names the family
    return f"{said}: {amount.says()}"


def wish_words(aspect: FeedbackAspect) -> str:
    """The words for a wish as read, whatever its action (the say-back groups wishes by it):
    ``shorter`` with a share → "shorter: about half", ``example`` with a count → "one example",
    ``conclusion_first`` → "answer first"; and the wishes no want names, from what they are
    about: a topic ("more on phone length, less on history"), a language ("in German", "the
    closing summary in German"), a phrase to avoid ("avoid 'to be fair'"), a tool ("use the
    search tool less, for arithmetic"), a request in the rater's own words."""
    family = aspect.want or ""
    detail = aspect.detail or ""
    if (typed := tool_flow.of(aspect)) is not None:
        return typed.words()
    if family in _READ_ONLY:
        return _READ_ONLY[family](detail)
    entry = _labels().get(family)
    if entry is None:  # not a family this install knows: its name, as words
        return family.replace("_", " ")
    said = entry["label"]
    if family == "longer" and detail and aspect.amount is None:
        return f"more depth on {detail}"
    amount = aspect.amount
    if amount is None:
        return said
    if amount.kind == "count" and amount.unit == wants.UNITS.get(family):
        return amount.says()  # "one example": the unit names the family
    return f"{said}: {amount.says()}"


# a family said where a line names it without its detail ("strengthened cite sources", "v4
# checked against: …"): the families whose label lists their syntax say what they are about
_FAMILY_ALONE = {
    "language": "the language",
    "banned": "a phrase to avoid",
    "avoid": "a phrase to avoid",
    "revert": "back to an earlier version",
    "tool": "a tool's use",
    "tool_first": "a tool called first",
    "describe": "a tool's description",
    "step": "the flow",
    "focus": "a change of focus",
    "tool_use": "how a tool is used",
    "custom": "a request in your own words",
    "preserve": "the text given kept as it is",
}


def family_words(name: str) -> str:
    """A family, or a typed tool or flow want, in the chips' words, for a line that names what
    a change pursued ("strengthened cite sources", "refuted: answer first: …", "rolled back the
    polish step given the research step's output"): never a family's name."""
    typed = _typed(name)
    if typed is not None:
        return typed.words()
    if name in _FAMILY_ALONE:
        return _FAMILY_ALONE[name]
    entry = _labels().get(name)
    return entry["label"] if entry else name.replace("_", " ")


def _typed(want: str) -> tool_flow.ToolFlowWish | None:
    if ":" not in want or not tool_flow.is_typed(want):
        return None
    try:
        return tool_flow.parse(want)
    except ValueError:
        return None


def families_words(names: list[str] | tuple[str, ...] | set[str]) -> str:
    """``family_words`` of each, joined: "cite sources, the flow"."""
    return ", ".join(family_words(n) for n in names)


def standing_words(
    family: str,
    action: str | None = "add",
    detail: str | None = None,
    amount: Any = None,
) -> str:
    """A standing wish (``domain.checks.ActiveWish``'s fields) in the chips' words: "shorter",
    "no table", "avoid 'to be fair'", "the closing summary in German"."""
    aspect = FeedbackAspect(
        aspect="overall",
        sentiment="positive" if action == "keep" else "negative",
        confidence=1.0,
        want=family,
        detail=detail,
        action=action,  # type: ignore[arg-type]
        amount=amount,
    )
    try:
        want = wants.render(aspect)
        return label(want) if want else wish_words(aspect)
    except ValueError:
        return wish_words(aspect)


def _language(detail: str) -> str:
    """``German`` → "in German", ``German@summary`` → "the closing summary in German"."""
    language, part = unscoped(detail)
    if not language:
        return "in another language"
    return f"{part_words(part)} in {language}" if part else f"in {language}"


def _avoid(phrase: str) -> str:
    """``to be fair`` (a ``banned`` wish, sent as ``avoid:"to be fair"``) → "avoid 'to be fair'"."""
    return f"avoid {phrase!r}" if phrase else "a phrase to avoid"


def _focus(detail: str) -> str:
    """``on:phone length|off:history`` → "more on phone length, less on history"."""
    topics: dict[str, list[str]] = {"on": [], "off": []}
    for key, _, topic in (p.partition(":") for p in detail.split("|")):
        topic = re.sub(r"^(?:about|on)\s+", "", topic.strip())
        if key in topics and topic and topic not in topics[key]:
            topics[key].append(topic)
    every = topics["on"] + topics["off"]
    said = [
        f"{'more' if key == 'on' else 'less'} on {' and '.join(kept)}"
        for key in ("on", "off")
        # a topic read twice, once with its neighbour's words in it, is said once
        if (kept := [t for t in topics[key] if not any(o != t and o in t for o in every)])
    ]
    return ", ".join(said) or "a change of focus"


def _tool(detail: str) -> str:
    """``search|less|arithmetic+never`` → "never use the search tool, for arithmetic";
    ``search|less|call:2`` → "use the search tool less (its call 2 in the trace)", and with
    the scored cycle's trace at hand (``domain.trace.pointed``) what that place holds:
    ``read_document|less|call:4+at:2:tool`` → "use the read_document tool less (call 4 in
    cycle 2's trace is read_document)"."""
    name, direction, context = (detail + "||").split("|")[:3]
    said = context.split("+")
    where = [
        c
        for c in said
        if c and c not in ("never", "first") and not c.startswith(("call:", trace.POINTED))
    ]
    tool = f"the {name} tool" if name else "a tool"
    text = f"never use {tool}" if "never" in said else f"use {tool} {direction or 'differently'}"
    text += ", first, before answering" if "first" in said else ""
    text += f", for {', '.join(where)}" if where else ""
    call = next((c[5:] for c in said if c.startswith("call:")), None)
    at = next((c.removeprefix(trace.POINTED) for c in said if c.startswith(trace.POINTED)), None)
    if call and at:
        return f"{text} ({trace.pointing_words(call, at, name)})"
    place = trace.place_of(call) if call else None
    return text + (
        f" (its {'last call' if place == 'last' else f'call {place}'} in the trace)"
        if place
        else ""
    )


def _preserve(detail: str) -> str:
    """``last|number`` → "keep every number of the text given"."""
    what = detail.partition("|")[2]
    return f"keep every {what} of the text given" if what else "keep the text given as it is"


# The wishes the reader finds that no want names: said from what they are about
_READ_ONLY = {
    "focus": _focus,
    "language": _language,
    "banned": _avoid,
    "tool_use": _tool,
    "preserve": _preserve,
    "custom": lambda detail: "a request in your own words",
}


def glossary() -> list[tuple[str, str]]:
    """(family, its words) for every family a want may name, in the order wants lists them."""
    return [(family, family_label(family)) for family in wants.families()]


def help_line() -> str:
    """The families for a command's help: "bullets (bullet points), casual (casual tone)…"."""
    return ", ".join(
        family if family == words else f"{family} ({words})" for family, words in glossary()
    )
