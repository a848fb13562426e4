"""Comments written in other languages: which language a comment is in (lingua, whose models
ship in its wheel), and the common change families it asks for, from one phrase file per
language (``cues/<code>.json``). A comment's own language is never by itself a wish about the
answer's; a language without a phrase file is named, so the trainer can say it did not read the
comment instead of silently changing nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from lingua import Language, LanguageDetectorBuilder

from domain.change_families import aspect_of
from trainer.reading import cue_tables
from trainer.reading.wish import Wish

CUES = cue_tables.CUE_DIR
# Languages told apart from each other (a few more than have cue files, so that a comment in
# one of those is named rather than mistaken for a covered one)
_NAMES = """ENGLISH GERMAN FRENCH SPANISH ITALIAN DUTCH PORTUGUESE POLISH JAPANESE DANISH SWEDISH
BOKMAL FINNISH RUSSIAN CHINESE KOREAN TURKISH CZECH HINDI ARABIC"""
DETECTED = [getattr(Language, name) for name in _NAMES.split()]
MIN_CONFIDENCE = 0.5  # English at least this likely: the English reader's verdict stands
MIN_GUESS = 0.3  # a language named as the comment's without any cue of it matching
NEGATION_WINDOW = 14  # characters before a cue in which a negation denies it


@dataclass(frozen=True)
class CueSet:
    language: str  # its English name
    families: dict[str, re.Pattern[str]]
    negation: re.Pattern[str] | None


@lru_cache(maxsize=1)
def cue_sets() -> dict[str, CueSet]:
    """English language name → its cues, from every file in ``trainer/reading/cues``."""
    sets = {}
    for path in sorted(CUES.glob("*.json")):
        data = cue_tables.language_file(path)
        bounded = data.get("word_boundaries", True)
        plural = data.get("plural_suffixes")
        phrases = {f: cue_tables.phrases(w, bounded, plural) for f, w in data["families"].items()}
        families = {family: pattern for family, pattern in phrases.items() if pattern}
        negation = cue_tables.phrases(data.get("negations") or [], bounded)
        sets[data["language"]] = CueSet(data["language"], families, negation)
    return sets


@lru_cache(maxsize=1)
def _detector():  # type: ignore[no-untyped-def]
    return LanguageDetectorBuilder.from_languages(*DETECTED).build()


def _ranking(text: str) -> list[tuple[str, float]]:
    """(English name, confidence) of each detected language, the likeliest first."""
    return [
        (v.language.name.capitalize().replace("Bokmal", "Norwegian"), v.value)
        for v in _detector().compute_language_confidence_values(text)
    ]


@dataclass(frozen=True)
class ForeignReading:
    language: str | None  # None: English, or no telling
    wishes: list[Wish]
    detected: bool  # the detector itself put this language first (not only its cues)


def read(text: str) -> ForeignReading:
    """The language a comment is written in when it is not English, and what it asks for.
    Short comments are ambiguous to any detector, so the cue files vote too: a language whose
    cues match is preferred, the likelier one first."""
    ranking = _ranking(text)
    if not ranking or (ranking[0][0] == "English" and ranking[0][1] >= MIN_CONFIDENCE):
        return ForeignReading(None, [], False)
    top, confidence = ranking[0]
    matched = {language: found for language in cue_sets() if (found := wishes(text, language))}
    if matched:
        order = [name for name, _ in ranking]
        best = min(matched, key=lambda name: order.index(name) if name in order else len(order))
        return ForeignReading(best, matched[best], best == top)
    if top == "English" or confidence < MIN_GUESS:
        return ForeignReading(None, [], False)
    return ForeignReading(top, [], True)


def any_cue(text: str) -> bool:
    """Whether any language's cue file matches ``text`` (cheap: no detector)."""
    return any(p.search(text) for cues in cue_sets().values() for p in cues.families.values())


def covered() -> list[str]:
    return sorted(cue_sets())


def wishes(text: str, language: str) -> list[Wish]:
    """What a comment in ``language`` asks for, by family (none for a language without cues)."""
    cues = cue_sets().get(language)
    if cues is None:
        return []
    found: dict[str, Wish] = {}
    for family, pattern in cues.families.items():
        for match in pattern.finditer(text):
            before = text[max(0, match.start() - NEGATION_WINDOW) : match.start()]
            if cues.negation and cues.negation.search(before):
                continue  # "nicht zu lang": denied, asks for nothing
            found.setdefault(family, Wish(family, aspect_of(family), match.group(0), 0.8))
    return list(found.values())
