"""Change families: the kinds of change the trainer makes to an agent, each defined once.

A family (``bullets``, ``shorter``, ``cite_sources``…) is one record: the aspect of the answer it
is about, the family a refusal of it asks for, the families an instruction for it is in the way
of, the instruction that carries it out (and the firmer one for a wish asked for again), the
hypothesis the next cycle tests, the words it may swap in an instruction pushing the other way,
the sampling parameter it moves, and how the built-in offline model honours it.

The feedback reader (its English cues and the cue files of other languages), credit assignment,
the evolution planner, the judgement of the last change and the offline model all read this
registry; ``tests/test_change_families.py`` checks that the relations agree. Adding a family is
one record here, cues for it in the reader and the cue files, and its tests (docs/trainer.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal


@dataclass(frozen=True)
class ParameterEffect:
    """A sampling parameter the family moves, and when the parameter is to blame."""

    target: Literal["maxTokens", "temperature"]
    direction: Literal["down", "up"]
    # the parameter is blamed while it is past this (above it for "down", below it for "up")
    blamed_past: float
    reason: str  # why, with {value}: "a budget of {value} tokens allows long answers"
    blame: Literal["high", "medium"] = "high"


@dataclass(frozen=True)
class OfflineEffect:
    """How the built-in offline model honours the family: the words in its instructions it
    recognises (unless negated), and the style attribute they set."""

    attribute: Literal[
        "length", "format", "tone", "headings", "conclusion_first", "summary_at_end", "example",
        "warm",
    ]  # fmt: skip
    value: str | bool
    pattern: str


@dataclass(frozen=True)
class ChangeFamily:
    name: str
    aspect: str  # the aspect of the answer a wish of this family is about
    hypothesis: str  # what the next output will show when the change works
    # the instruction that carries it out; None: composed from the wish's detail (a word limit,
    # a topic, a language, a tool) by trainer/instructions.py
    instruction: str | None = None
    firmer: str | None = None  # for a wish asked for again (None: "Above all, …")
    opposite: str | None = None  # what refusing this family asks for ("no bullets" → prose)
    contrary: frozenset[str] = frozenset()  # families whose instructions this one contradicts
    # words of an instruction pushing the other way, swapped to support this family
    swaps: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # a complaint about the answer as the reviewer read it: the last model call wrote it
    about_output: bool = False
    # a form of the answer: an instruction about its form in general stands in its way
    shapes_format: bool = False
    parameter: ParameterEffect | None = None
    offline: OfflineEffect | None = None


def _family(name: str, aspect: str, hypothesis: str, **rest: object) -> ChangeFamily:
    if "contrary" in rest:
        rest["contrary"] = frozenset(rest["contrary"])  # type: ignore[arg-type]
    if "swaps" in rest:
        rest["swaps"] = MappingProxyType(dict(rest["swaps"]))  # type: ignore[call-overload]
    return ChangeFamily(name, aspect, hypothesis, **rest)  # type: ignore[arg-type]


_RECORDS = [
    _family(
        "shorter",
        "length",
        "the output will be markedly shorter",
        instruction="Keep answers brief and to the point.",
        firmer="Be brief above all: a few sentences or a handful of points, nothing more.",
        opposite="longer",
        contrary={"longer"},
        swaps={
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
        about_output=True,
        parameter=ParameterEffect(
            "maxTokens", "down", 100, "a budget of {value} tokens allows long answers"
        ),
        offline=OfflineEffect(
            "length", "short", r"\b(brief|concise|short|succinct|scannable|quick|terse|tl;?dr)\b"
        ),
    ),
    _family(
        "longer",
        "length",
        "the output will be longer and more detailed",
        instruction="Go into more depth: explain each point with supporting detail.",
        firmer="Always go into depth: develop every point with explanation and detail.",
        opposite="shorter",
        contrary={"shorter"},
        swaps={
            "brief": "thorough",
            "concise": "detailed",
            "short": "in-depth",
            "succinct": "complete",
            "scannable": "detailed",
            "terse": "full",
            "tighten": "develop",
        },
        about_output=True,
        parameter=ParameterEffect(
            "maxTokens", "up", 1024, "a budget of {value} tokens cuts answers short"
        ),
        offline=OfflineEffect(
            "length",
            "long",
            r"\b(comprehensive|detailed|thorough|in-depth|extensive|exhaustive|elaborate)\b"
            r"|\b(?:into|more|in) depth\b",
        ),
    ),
    _family(
        "bullets",
        "format",
        "the output will be a bullet list",
        instruction="Use bullet points, not paragraphs.",
        firmer="Format the whole answer as a bullet list of its key points; no paragraphs.",
        opposite="prose",
        contrary={"prose"},
        about_output=True,
        shapes_format=True,
        offline=OfflineEffect("format", "bullets", r"\bbullet"),
    ),
    _family(
        "numbered",
        "format",
        "the output will be a numbered list",
        instruction="Present any steps as a numbered list.",
        firmer="Always give the steps as a numbered list, one action per step.",
        opposite="prose",
        contrary={"prose"},
        about_output=True,
        shapes_format=True,
        offline=OfflineEffect("format", "numbered", r"\bnumbered\b"),
    ),
    _family(
        "table",
        "format",
        "the output will present comparisons as a table",
        instruction="Present comparisons as a table, with one row per option and one column per "
        "attribute.",
        firmer="Always present comparisons as a table, with one row per option and one column "
        "per attribute.",
        opposite="prose",
        contrary={"prose"},
        about_output=True,
        shapes_format=True,
        offline=OfflineEffect("format", "table", r"\btable\b|\bcolumns?\b"),
    ),
    # Headings go with paragraphs or lists alike: nothing contradicts them, and refusing them
    # asks for no other form
    _family(
        "headings",
        "format",
        "the output will be organised under headings",
        instruction="Organise the answer under clear section headings.",
        about_output=True,
        shapes_format=True,
        offline=OfflineEffect("headings", True, r"\bheading|\bsection titles?\b"),
    ),
    _family(
        "prose",
        "format",
        "the output will be written as paragraphs",
        instruction="Write in flowing paragraphs, without bullet points or tables.",
        firmer="Write only in flowing paragraphs, without bullet points or tables.",
        opposite="bullets",
        contrary={"bullets", "numbered", "table"},
        about_output=True,
        shapes_format=True,
        offline=OfflineEffect("format", "paragraphs", r"\bparagraphs\b|\bprose\b"),
    ),
    _family(
        "code_block",
        "format",
        "code will appear in fenced code blocks",
        instruction="Put all code in fenced code blocks and comment what it does.",
        about_output=True,
    ),
    _family(
        "casual",
        "tone",
        "the tone will be more relaxed and conversational",
        instruction="Use a relaxed, conversational tone.",
        firmer="Sound relaxed and conversational throughout, as if talking to a colleague.",
        opposite="formal",
        contrary={"formal"},
        swaps={
            "formal": "friendly",
            "formally": "in a friendly way",
            "professional": "conversational",
            "professionally": "conversationally",
            "academic": "plain-spoken",
        },
        about_output=True,
        offline=OfflineEffect(
            "tone", "casual", r"\b(casual|friendly|conversational|warm|playful)\b"
        ),
    ),
    _family(
        "formal",
        "tone",
        "the tone will be more formal",
        instruction="Use a formal, professional register.",
        firmer="Keep a strictly formal, professional register throughout.",
        opposite="casual",
        contrary={"casual"},
        swaps={"casual": "formal", "conversational": "formal", "chatty": "measured"},
        about_output=True,
        offline=OfflineEffect("tone", "formal", r"\b(formal(ly)?|professional(ly)?|academic)\b"),
    ),
    _family(
        "warmer",
        "tone",
        "the tone will be warmer",
        instruction="Write warmly, with empathy for the reader's situation.",
        firmer="Sound warm and encouraging throughout: speak to the reader kindly, as a "
        "supportive colleague would.",
        about_output=True,
        offline=OfflineEffect("warm", True, r"\b(?:warm\w*|empath\w*)\b"),
    ),
    _family(
        "direct",
        "tone",
        "the output will state its answer without hedging",
        instruction="State the answer directly and confidently, without hedging.",
        opposite="hedge",
        contrary={"hedge"},
        about_output=True,
    ),
    _family(
        "hedge",
        "accuracy",
        "the output will say where it is unsure",
        instruction="Say where you are unsure, and flag what is still uncertain.",
        opposite="direct",
        contrary={"direct"},
        about_output=True,
    ),
    _family(
        "cite_sources",
        "sources",
        "claims will carry their sources",
        instruction="Cite a source for every figure and factual claim.",
    ),
    _family(
        "no_fabrication",
        "accuracy",
        "the output will make no unsupported claims",
        instruction="Use only facts and figures from the information provided; never invent "
        "quotes, numbers or details.",
        parameter=ParameterEffect(
            "temperature",
            "down",
            0.5,
            "a high temperature makes unsupported claims more likely",
            blame="medium",
        ),
    ),
    _family(
        "proofread",
        "spelling",
        "the output will have no spelling or grammar slips",
        instruction="Proofread for spelling, grammar and punctuation before answering.",
        about_output=True,
    ),
    _family(
        "conclusion_first",
        "structure",
        "the recommendation will come first",
        instruction="Lead with the recommendation or answer, then give the reasoning.",
        about_output=True,
        offline=OfflineEffect(
            "conclusion_first",
            True,
            r"\b(?:lead|start|open|begin)\w* with the (?:recommendation|answer|conclusion)"
            r"|\bstate the (?:recommendation|answer|conclusion)\b[^.]{0,25}\bfirst\b",
        ),
    ),
    _family(
        "summary_at_end",
        "structure",
        "the output will end with a summary",
        instruction="End with a summary of the key points and next steps.",
        about_output=True,
        offline=OfflineEffect(
            "summary_at_end", True, r"\b(?:end|close|finish)\w* with a (?:[\w-]+ )?summary"
        ),
    ),
    _family(
        "simpler",
        "audience",
        "a non-specialist will follow the output",
        instruction="Explain in plain, everyday language and avoid jargon.",
        opposite="technical",
        contrary={"technical"},
        swaps={"technical": "plain", "expert-level": "plain", "sophisticated": "simple"},
        about_output=True,
    ),
    _family(
        "technical",
        "audience",
        "the output will skip the basics",
        instruction="Write for an expert reader: skip the basics and use precise technical terms.",
        opposite="simpler",
        contrary={"simpler"},
        about_output=True,
    ),
    _family(
        "example",
        "detail",
        "the output will include a concrete example",
        instruction="Illustrate each main point with a concrete example.",
        about_output=True,
        offline=OfflineEffect("example", True, r"\bexamples?\b"),
    ),
    _family(
        "steadier",
        "consistency",
        "the output will stay on topic and be consistent",
        instruction="Answer the question asked and stay on it, without tangents.",
        opposite="creative",
        contrary={"creative"},
        parameter=ParameterEffect(
            "temperature", "down", 0.05, "temperature {value} lets answers wander and disagree"
        ),
    ),
    _family(
        "creative",
        "creativity",
        "the output will be less predictable",
        instruction="Offer fresh, unexpected ideas rather than the obvious ones.",
        opposite="steadier",
        contrary={"steadier"},
        parameter=ParameterEffect(
            "temperature", "up", 1.0, "temperature {value} keeps answers predictable"
        ),
    ),
    _family(
        "check_step",
        "structure",
        "numbers and facts will be checked before the answer goes out",
        instruction="Before answering, make a checking pass: verify every number and fact "
        "against the information provided, and correct any that do not match.",
    ),
    # Composed from the wish's detail: a topic, a number of points, a language, a tool, a request
    _family(
        "focus", "focus", "the output will stay on the topic the reviewer wants", about_output=True
    ),
    _family(
        "preserve",
        "accuracy",
        "the later steps will keep what the earlier ones produced",
    ),
    _family("key_points", "focus", "the output will give only the key points asked for"),
    _family(
        "language", "language", "the output will be in the language asked for", about_output=True
    ),
    _family("tool_use", "tools", "tools will be used only where they help"),
    _family("custom", "content", "the output will do what the reviewer asked"),
]

FAMILIES: Mapping[str, ChangeFamily] = MappingProxyType({f.name: f for f in _RECORDS})


def family(name: str) -> ChangeFamily | None:
    return FAMILIES.get(name)


def contrary_of(name: str) -> frozenset[str]:
    """The families an instruction for ``name`` is in the way of (and that are in its way)."""
    record = FAMILIES.get(name)
    return record.contrary if record else frozenset()


def opposite_of(name: str) -> str | None:
    record = FAMILIES.get(name)
    return record.opposite if record else None


def aspect_of(name: str) -> str:
    record = FAMILIES.get(name)
    return record.aspect if record else "overall"


def working_against(target: str, direction: Literal["down", "up"]) -> set[str]:
    """The families a move of parameter ``target`` in ``direction`` works against."""
    return {
        f.name
        for f in _RECORDS
        if f.parameter and f.parameter.target == target and f.parameter.direction != direction
    }
