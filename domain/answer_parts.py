"""The parts of an answer a wish may name, and a language wish with its part.

A language is asked of the whole answer ("in Norwegian") or of one part ("a German summary"):
several languages for several readers stand side by side, one per part. The wish's detail
carries both, as ``German`` or ``German@summary``, so that it crosses every layer (a want, a
reading, a wish, an active wish) as the one string those already carry.
"""

from __future__ import annotations

# the languages a wish may name: those the output checks tell apart (lingua over the reader's
# languages, trainer/reading/comment_languages.py; a test keeps the two lists one)
LANGUAGES = (
    "English", "German", "French", "Spanish", "Italian", "Dutch", "Portuguese", "Polish",
    "Japanese", "Danish", "Swedish", "Norwegian", "Finnish", "Russian", "Chinese", "Korean",
    "Turkish", "Czech", "Hindi", "Arabic",
)  # fmt: skip
# the parts a wish may name, as a want says them (``@summary``) and in words
PARTS = {"summary": "the closing summary"}
SCOPE_MARK = "@"


def scoped(language: str, part: str | None) -> str:
    """A language wish's detail: ``German`` (the whole answer) or ``German@summary``."""
    return f"{language}{SCOPE_MARK}{part}" if part else language


def unscoped(detail: str | None) -> tuple[str, str | None]:
    """(language, part or None for the whole answer) of a language wish's detail."""
    language, _, part = (detail or "").partition(SCOPE_MARK)
    return language.strip(), (part.strip().lower() or None)


def part_words(part: str | None) -> str:
    """The part in words: "the whole answer", "the closing summary"."""
    return PARTS.get(part or "", "the whole answer")
