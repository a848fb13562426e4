"""The rules engine's phrasebook: for each change family, the instruction it writes, the
hypothesis it states and the words it may swap in an instruction that pushes the other way.

Instructions are written in the trainer's own words, never the reviewer's: a wish that names a
topic or a tool is rewritten in the third person ("what we should do" → "what the reader should
do"), so a comment's sentence is never pasted into a prompt.
"""

from __future__ import annotations

import re

from trainer.wish import Wish

# Families that contradict each other: an instruction asking for one is in the way of the other.
CONTRARY: dict[str, set[str]] = {
    "shorter": {"longer"},
    "longer": {"shorter"},
    "bullets": {"prose"},
    "numbered": {"prose"},
    "table": {"prose"},
    "headings": set(),
    "prose": {"bullets", "numbered", "table"},
    "formal": {"casual"},
    "casual": {"formal"},
    "direct": {"hedge"},
    "hedge": {"direct"},
    "simpler": {"technical"},
    "technical": {"simpler"},
    "creative": {"steadier"},
    "steadier": {"creative"},
}

# Word swaps that turn an instruction pushing the other way into one that supports the wish
# (a targeted modify keeps the rest of the sentence, so its other intents survive).
SWAPS: dict[str, dict[str, str]] = {
    "shorter": {
        "comprehensive": "brief",
        "detailed": "scannable",
        "thorough": "focused",
        "in-depth": "concise",
        "extensive": "short",
        "exhaustive": "short",
        "elaborate": "concise",
        "lengthy": "short",
        "long-form": "short-form",
    },
    "longer": {
        "brief": "thorough",
        "concise": "detailed",
        "short": "in-depth",
        "succinct": "complete",
        "scannable": "detailed",
        "terse": "full",
        "tighten": "develop",
    },
    "casual": {
        "formal": "friendly",
        "formally": "in a friendly way",
        "professional": "conversational",
        "professionally": "conversationally",
        "academic": "plain-spoken",
    },
    "formal": {"casual": "formal", "conversational": "formal", "chatty": "measured"},
    "simpler": {"technical": "plain", "expert-level": "plain", "sophisticated": "simple"},
}

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
    if f == "shorter":
        return (
            f"Keep every answer under {d} words." if d else "Keep answers brief and to the point."
        )
    if f == "longer":
        if d:
            return f"Cover {third_person(d)} in more depth, with specific detail."
        return "Go into more depth: explain each point with supporting detail."
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
        return f"Write the whole answer in {d}."
    if f == "key_points":
        return f"Give only the {d or 'few'} key points, nothing beyond them."
    if f == "tool_use":
        return _tool_instruction(wish, tools or [])
    if f == "custom":
        return d  # a request no family covers, already rewritten by the reader
    return FIXED.get(f)


FIXED: dict[str, str] = {
    "bullets": "Use bullet points, not paragraphs.",
    "numbered": "Present any steps as a numbered list.",
    "table": "Present comparisons as a table, with one row per option and one column per "
    "attribute.",
    "headings": "Organise the answer under clear section headings.",
    "prose": "Write in flowing paragraphs, without bullet points or tables.",
    "code_block": "Put all code in fenced code blocks and comment what it does.",
    "formal": "Use a formal, professional register.",
    "casual": "Use a relaxed, conversational tone.",
    "warmer": "Write warmly, with empathy for the reader's situation.",
    "direct": "State the answer directly and confidently, without hedging.",
    "hedge": "When you are not sure of something, say so plainly.",
    "cite_sources": "Cite a source for every figure and factual claim.",
    "no_fabrication": "Use only facts and figures from the information provided; never invent "
    "quotes, numbers or details.",
    "proofread": "Proofread for spelling, grammar and punctuation before answering.",
    "conclusion_first": "Lead with the recommendation or answer, then give the reasoning.",
    "summary_at_end": "End with a summary of the key points and next steps.",
    "simpler": "Explain in plain, everyday language and avoid jargon.",
    "technical": "Write for an expert reader: skip the basics and use precise technical terms.",
    "example": "Illustrate each main point with a concrete example.",
    "steadier": "Answer the question asked and stay on it, without tangents.",
    "check_step": "Before answering, check every number and fact against the information "
    "provided, and correct any that do not match.",
    "creative": "Offer fresh, unexpected ideas rather than the obvious ones.",
}

# The firmer instruction a wish gets when the reviewer asks for it again ("still too wordy",
# "still no bullets"): the direction was right and did not go far enough.
FIRMER: dict[str, str] = {
    "shorter": "Be brief above all: a few sentences or a handful of points, nothing more.",
    "longer": "Always go into depth: develop every point with explanation and detail.",
    "bullets": "Format the whole answer as a bullet list of its key points; no paragraphs.",
    "numbered": "Always give the steps as a numbered list, one action per step.",
    "table": "Always present comparisons as a table, with one row per option and one column "
    "per attribute.",
    "prose": "Write only in flowing paragraphs, without bullet points or tables.",
    "warmer": "Sound warm and encouraging throughout: speak to the reader kindly, as a "
    "supportive colleague would.",
    "casual": "Sound relaxed and conversational throughout, as if talking to a colleague.",
    "formal": "Keep a strictly formal, professional register throughout.",
}


def firmer(wish: Wish) -> str | None:
    """The firmer instruction for a wish asked for again (None: nothing firmer to say)."""
    if wish.family in FIRMER:
        return FIRMER[wish.family]
    plain = instruction(wish)
    if not plain or plain.startswith("Above all"):
        return None
    return f"Above all, {plain[0].lower()}{plain[1:]}"


# The flow step a multi-step agent gets for ``check_step``: it reads the last step's output
CHECK_STEP_NAME = "check"
CHECK_STEP_PROMPT = (
    "Check every number and fact in this answer against the findings, correct any that do not "
    "match, and return the corrected answer only: {{{previous}}}"
)

HYPOTHESES: dict[str, str] = {
    "shorter": "the output will be markedly shorter",
    "longer": "the output will be longer and more detailed",
    "bullets": "the output will be a bullet list",
    "numbered": "the output will be a numbered list",
    "table": "the output will present comparisons as a table",
    "headings": "the output will be organised under headings",
    "prose": "the output will be written as paragraphs",
    "code_block": "code will appear in fenced code blocks",
    "formal": "the tone will be more formal",
    "casual": "the tone will be more relaxed and conversational",
    "warmer": "the tone will be warmer",
    "direct": "the output will state its answer without hedging",
    "hedge": "the output will say where it is unsure",
    "cite_sources": "claims will carry their sources",
    "no_fabrication": "the output will make no unsupported claims",
    "proofread": "the output will have no spelling or grammar slips",
    "conclusion_first": "the recommendation will come first",
    "summary_at_end": "the output will end with a summary",
    "focus": "the output will stay on the topic the reviewer wants",
    "key_points": "the output will give only the key points asked for",
    "check_step": "numbers and facts will be checked before the answer goes out",
    "simpler": "a non-specialist will follow the output",
    "technical": "the output will skip the basics",
    "example": "the output will include a concrete example",
    "steadier": "the output will stay on topic and be consistent",
    "creative": "the output will be less predictable",
    "language": "the output will be in the language asked for",
    "tool_use": "tools will be used only where they help",
    "custom": "the output will do what the reviewer asked",
}


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
        if "arithmetic" in context and re.search(r"calc|math|arith", tool):
            return "Only for long or exact calculations; do simple arithmetic directly."
        if "arithmetic" in context:
            return "Not for arithmetic: compute sums and products directly."
        return "Use only when the answer needs information not already at hand."
    return "Use it to check facts before answering instead of relying on memory."
