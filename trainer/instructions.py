"""The rules engine's phrasebook: the instruction a wish becomes. A family's fixed instruction,
firmer instruction and hypothesis are its record in ``domain.change_families``; what is composed
here is the instruction of a wish with a detail (a word limit, a topic, a language, a tool).

Instructions are written in the trainer's own words, never the reviewer's: a wish that names a
topic or a tool is rewritten in the third person ("what we should do" → "what the reader should
do"), so a comment's sentence is never pasted into a prompt.
"""

from __future__ import annotations

import re

from domain.answer_parts import PARTS, part_words, unscoped
from domain.change_families import FAMILIES
from domain.trainer import Amount
from trainer.checks import cues
from trainer.reading.wish import Wish

_PERSON = [
    (r"\b(?:I am|I'm)\b", "the reader is"),
    (r"\b(?:we are|we're)\b", "the team is"),
    (r"\b(?:I|me)\b", "the reader"),
    (r"\bmy\b", "the reader's"),
    (r"\b(?:we|us)\b", "the team"),
    (r"\bour\b", "the team's"),
    (r"\byou\b", "the agent"),
    (r"\byour\b", "its"),
]


def third_person(phrase: str) -> str:
    """A reviewer's phrase, rewritten about the reader instead of the reviewer."""
    out = phrase.strip(" .,;:!?")
    for pattern, repl in _PERSON:
        out = re.sub(pattern, repl, out, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", out)


def instruction(wish: Wish, tools: list[str] | None = None) -> str | None:
    """The sentence the rules engine adds to the system prompt for ``wish``."""
    f, d = wish.family, wish.detail
    amount = wish.amount
    if f == "shorter" and d:
        return _word_limit(wish, d)
    if amount is not None:
        counted = _counted(f, amount)
        if counted:
            return counted
    if f == "longer" and d:
        return f"Cover {third_person(d)} in more depth, with specific detail."
    if f == "focus":
        parts = dict(p.split(":", 1) for p in (d or "").split("|") if ":" in p)
        on, off = parts.get("on"), parts.get("off")
        if on and off:
            return f"Focus on {third_person(on)}; leave out {third_person(off)}."
        if on:
            return f"Focus on {third_person(on)}."
        if off:
            return f"Focus on what the question asks; leave out {third_person(off)}."
        return "Focus on what the question asks."
    if f == "language":
        language, part = unscoped(d)
        if part:  # one part: the rest keeps whatever language it is asked in
            return f"Write {part_words(part)} in {language}, whatever the language of the rest."
        return f"Write the whole answer in {language}."
    if f == "key_points":
        return f"Give only the {d or 'few'} key points, nothing beyond them."
    if f == "tool_use":
        return _tool_instruction(wish, tools or [])
    if f == "preserve":
        return f"Keep {preserved(wish)} of the text you are given, unchanged."
    if f == "custom":
        return d  # a request no family covers, already rewritten by the reader
    record = FAMILIES.get(f)
    return record.instruction if record else None


def _word_limit(wish: Wish, words: str) -> str:
    """The amount as the reviewer said it: "under 60" stays "under 60", "about 90" "about"."""
    if approximate(wish.quote):
        return f"Keep every answer short: about {words} words."
    return f"Keep every answer under {words} words."


def _counted(family: str, amount: Amount) -> str | None:
    """The instruction of a wish that says how much: "about 250 words", "exactly one example"."""
    if family == "shorter" and amount.kind == "share":
        words = amount.target_words()
        if words:
            return f"Keep answers short: about {words} words."
        return f"Keep answers short: {amount.says()} the length they have been."
    if amount.kind != "count":
        return None
    number = int(amount.value)
    spelled = amount.says().split()[0]
    if family == "example":
        if number == 1:
            return "Include exactly one concrete example, not one for every point."
        return f"Include {spelled} concrete examples in all, not one for every point."
    if family == "summary_at_end" and amount.unit in ("lines", "sentences"):
        size = "one-line" if amount.unit == "lines" else "one-sentence"
        if number == 1:
            return f"End with a {size} summary of the key point."
        return f"End with a summary of the key points in {amount.says()}."
    if family == "bullets" and amount.unit in ("bullets", "points"):
        return f"Use bullet points: at most {spelled} of them."
    if family == "conclusion_first" and amount.unit in ("lines", "sentences"):
        first = f"first {amount.unit[:-1]}" if number == 1 else f"first {amount.says()}"
        return f"State the recommendation or answer in the {first}, then give the reasoning."
    if family == "key_points":
        return f"Give only the {spelled} key points, nothing beyond them."
    if family == "numbered":  # "numbered:5" from a chip: five items, not five lines of prose
        return f"Present the answer as a numbered list: at most {spelled} items."
    return None


def language_part(instruction_text: str) -> str | None:
    """The part of the answer a language instruction is about (None: the whole answer), as
    this phrasebook words it ("Write the closing summary in German, …")."""
    lowered = instruction_text.lower()
    if "whole answer" in lowered:
        return None
    return next((part for part in PARTS if re.search(rf"\b{part}\b", lowered)), None)


def approximate(quote: str) -> bool:
    """Whether a length was said approximately ("about 90 words"); a plain number ("under
    60 words", "60 words max") is a hard limit."""
    lowered = quote.lower()
    # a hard limit said anywhere beside it wins ("cuts off after about 60 words, so no more
    # than 60"): what is cut off is no approximation
    return bool(cues().approximate.search(lowered)) and not _HARD_LIMIT.search(lowered)


_HARD_LIMIT = re.compile(
    r"\b(?:under|below|at most|no more than|no longer than|max(?:imum)?|less than|fewer than|"
    r"tops|cuts? (?:\w+ )?off|cut off|off after|hard limit|character limit|word limit)\b"
)


def preserved(wish: Wish) -> str:
    """What a ``preserve`` wish asks a later step to keep: "every number", "the caveats"."""
    what = (wish.detail or "").partition("|")[2]
    if not what:
        return "every fact, number and caveat"
    return (
        f"every {what}"
        if what in ("number", "fact", "date", "name", "figure")
        else (f"all the {what}s")
    )


def firmer(wish: Wish) -> str | None:
    """The firmer instruction for a wish asked for again (None: nothing firmer to say)."""
    record = FAMILIES.get(wish.family)
    if record and record.firmer and wish.amount is None:
        return record.firmer
    plain = instruction(wish)
    if not plain or plain.startswith("Above all"):
        return None
    return f"Above all, {plain[0].lower()}{plain[1:]}"


def hypothesis(family: str) -> str | None:
    """What the next output will show when a change of ``family`` works."""
    record = FAMILIES.get(family)
    return record.hypothesis if record else None


# The flow step a multi-step agent gets for ``check_step`` (``tool_flow.added_step``)
CHECK_STEP_NAME = "check"


_CALCULATES = re.compile(r"calc|math|arith")


def tool_wish(wish: Wish) -> tuple[str, str, str]:
    """(tool word, "less" | "more", context) of a tool-use wish."""
    name, direction, context = ((wish.detail or "") + "||").split("|")[:3]
    return name, direction or "more", context


def _tool_instruction(wish: Wish, tools: list[str]) -> str:
    name, direction, context = tool_wish(wish)
    tool = _match_tool(name, tools) or name or "tool"
    label = f"the {tool} tool" if not tool.endswith("tool") else f"the {tool}"
    if direction == "less":
        if "arithmetic" in context:
            return f"Do simple arithmetic yourself; do not call {label} for it."
        return f"Call {label} only when the answer needs information you do not have."
    if _CALCULATES.search(tool):
        return f"Use {label} for every calculation, however simple; never do sums in your head."
    return f"Check facts with {label} instead of answering from memory."


def _match_tool(name: str, tools: list[str]) -> str | None:
    """The agent's tool a reviewer's word refers to ("search" → "search_documents")."""
    if not name:
        return None
    name = name.replace(" ", "_")  # "web search" is the tool web_search
    for tool in tools:
        if tool == name or name in tool.split("_") or tool.startswith(name):
            return tool
    return None


def tool_for(wish: Wish, tools: list[str]) -> str | None:
    return _match_tool(tool_wish(wish)[0], tools)


def tool_guidance(wish: Wish, tool: str = "") -> str:
    """The sentence appended to a tool's description to change when it is used."""
    _, direction, context = tool_wish(wish)
    if direction == "less":
        if "arithmetic" in context and _CALCULATES.search(tool):
            return "Only for long or exact calculations; do simple arithmetic directly."
        if "arithmetic" in context:
            return "Not for arithmetic: compute sums and products directly."
        return "Use only when the answer needs information not already at hand."
    if _CALCULATES.search(tool):
        return "Use it for every calculation, however simple, instead of mental arithmetic."
    return "Use it to check facts before answering instead of relying on memory."


OVERRIDING = "Above all,"  # at most one instruction of a prompt says it overrides the rest
_AMOUNT = re.compile(r"\b\d+\b|\b(?:one|two|three|four|five|half|a third|a quarter)\b")


def firmer_than(segment: str, wish: Wish) -> str | None:
    """What the family's own instruction ``segment`` becomes when its wish is asked for again
    without a new amount: its firmer wording, or, when it states an amount, the same words
    said to override the rest (the amount stays). None: nothing firmer to say."""
    if _AMOUNT.search(segment):
        if segment.startswith(OVERRIDING):
            return None
        return f"{OVERRIDING} {segment[0].lower()}{segment[1:]}"
    text = firmer(wish)
    return None if not text or text == segment else text
