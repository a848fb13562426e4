"""The feedback vocabulary: which words in a comment name which aspect, and what is wanted.

Shared by the reward analyzer (reading comments), credit assignment (reading prompts) and the
planner (writing instructions), so the three agree on what "length" or "format" means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from domain.trainer import FeedbackAspect


@dataclass(frozen=True)
class Cue:
    aspect: str
    want: str
    pattern: str
    confidence: float


# Ordered: the first cue that matches an aspect wins ("too formal" before "formal").
CUES: list[Cue] = [
    Cue("length", "shorter", r"\b(way )?too (long|wordy|verbose|much)\b|\btl;?dr\b", 0.95),
    Cue("length", "longer", r"\btoo (short|brief|thin|shallow)\b|\bnot enough detail", 0.9),
    Cue(
        "length", "shorter", r"\b(verbose|wordy|long-winded|rambl\w*|shorter|more concise)\b", 0.85
    ),
    Cue("length", "shorter", r"\b(quick|brief|concise|short|succinct|terse)\b", 0.7),
    Cue("length", "longer", r"\b(more detail\w*|longer|expand|elaborate|deeper|more depth)\b", 0.8),
    Cue("format", "bullets", r"\bbullet\w*|\bbulleted\b", 0.9),
    Cue("format", "numbered", r"\bnumbered\b|\bstep[- ]by[- ]step\b", 0.85),
    Cue("format", "paragraphs", r"\b(prose|paragraphs?)\b(?! not)", 0.6),
    Cue("format", "headings", r"\b(headings?|headers|sections)\b", 0.7),
    Cue("tone", "casual", r"\btoo (formal|stiff|academic)\b|\b(stiff|robotic|stuffy)\b", 0.9),
    Cue("tone", "formal", r"\btoo (casual|informal|chatty)\b|\bunprofessional\b", 0.9),
    Cue("tone", "casual", r"\b(casual|friendlier|friendly|conversational|warmer)\b", 0.75),
    Cue("tone", "formal", r"\b(more formal|more professional|formal)\b", 0.75),
    Cue(
        "accuracy",
        "accurate",
        r"\b(wrong|incorrect|inaccurate|mistakes?|errors?|made up|"
        r"hallucinat\w*|false|not true)\b",
        0.85,
    ),
    Cue("clarity", "clearer", r"\b(confusing|unclear|hard to follow|jargon\w*|convoluted)\b", 0.85),
    Cue("examples", "examples", r"\b(examples?|concrete|specifics?)\b", 0.7),
]

PRAISE = r"\b(good|great|better|love\w*|nice|perfect|excellent|awesome|spot on|exactly)\b"
COMPLAINT = r"\b(bad|worse|poor|awful|terrible|hate|useless|meh|not|too|wanted|needs?)\b"

# Words in a prompt that push against what the reviewer wants (credit assignment).
OPPOSING: dict[str, dict[str, str]] = {
    # want → {prompt word pattern: blame}
    "shorter": {
        r"\b(comprehensive|detailed|thorough|in-depth|extensive|exhaustive|elaborate|"
        r"lengthy|long-form|every detail)\b": "high",
    },
    "longer": {r"\b(brief|concise|short|succinct|scannable|terse|minimal)\b": "high"},
    "bullets": {
        r"\b(paragraphs?|prose|essay|narrative)\b": "high",
        r"\b(structure\w*|professional\w*|formal\w*)\b": "medium",
    },
    "numbered": {r"\b(paragraphs?|prose|essay|narrative|bullet\w*)\b": "high"},
    "paragraphs": {r"\b(bullet\w*|list|numbered)\b": "high"},
    "casual": {r"\b(formal\w*|professional\w*|academic)\b": "high"},
    "formal": {r"\b(casual|friendly|conversational|playful|jokes?)\b": "high"},
    "clearer": {r"\b(technical|jargon|expert-level|sophisticated)\b": "medium"},
}

# Word swaps that turn an opposing instruction into a supporting one (targeted modify).
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
        "minimal": "thorough",
    },
    "casual": {
        "formal": "friendly",
        "formally": "in a friendly way",
        "professional": "conversational",
        "professionally": "conversationally",
        "academic": "plain-spoken",
    },
    "formal": {"casual": "formal", "friendly": "professional", "conversational": "formal"},
}

# The instruction the planner adds for each want.
INSTRUCTIONS: dict[str, str] = {
    "shorter": "Keep answers brief: at most 120 words.",
    "longer": "Develop each point fully, with supporting detail.",
    "bullets": "Use bullet points, not paragraphs.",
    "numbered": "Use a numbered list of steps.",
    "paragraphs": "Write in short paragraphs rather than lists.",
    "headings": "Organise the answer under clear headings.",
    "casual": "Use a friendly, conversational tone.",
    "formal": "Use a formal, professional tone.",
    "accurate": "Check every claim; say plainly when you are unsure.",
    "clearer": "Explain in plain language and avoid jargon.",
    "examples": "Include one concrete example.",
}

HYPOTHESES: dict[str, str] = {
    "shorter": "the output will be markedly shorter",
    "longer": "the output will be longer and more detailed",
    "bullets": "the output will be a bullet list",
    "numbered": "the output will be a numbered list",
    "paragraphs": "the output will be written as paragraphs",
    "headings": "the output will be organised under headings",
    "casual": "the tone will be friendlier and more conversational",
    "formal": "the tone will be more formal",
    "accurate": "the output will make fewer unsupported claims",
    "clearer": "the output will be easier to follow",
    "examples": "the output will include a concrete example",
}


def extract(text: str, sentiment_hint: str) -> list[FeedbackAspect]:
    """Aspects named in ``text`` (a comment or directive), one per aspect, first cue wins."""
    lowered = text.lower()
    found: dict[str, FeedbackAspect] = {}
    for cue in CUES:
        if cue.aspect in found:
            continue
        match = re.search(cue.pattern, lowered)
        if not match:
            continue
        window = lowered[max(0, match.start() - 30) : match.end() + 30]
        praised = re.search(PRAISE, window) and not re.search(COMPLAINT, window)
        sentiment = "positive" if praised or sentiment_hint == "positive" else "negative"
        found[cue.aspect] = FeedbackAspect(
            aspect=cue.aspect,
            sentiment=sentiment,
            quote=text[match.start() : match.end()],
            confidence=cue.confidence,
            want=cue.want,
        )
    return list(found.values())
