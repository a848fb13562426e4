"""Which language a reviewer asks for, from the language names Babel (CLDR) maintains.

Only languages with CLDR locale data count (a few hundred, in English and in their own names:
"German", "Deutsch", "日本語"), and a name only counts in a frame that asks for a language
("in French", "into Portuguese", "only reads German", "Japanese please"). A language that is
questioned or refused ("Why English?", "not in English") is never the one asked for.
"""

from __future__ import annotations

import re
from functools import lru_cache

from babel import Locale
from babel.localedata import locale_identifiers


@lru_cache(maxsize=1)
def _names() -> dict[str, str]:
    """Lower-cased name (English or native) → English name, for languages with locale data."""
    english = Locale("en")
    codes = {identifier.split("_")[0] for identifier in locale_identifiers()}
    names: dict[str, str] = {}
    for code in sorted(codes):
        name = english.languages.get(code)
        if not name:
            continue
        names.setdefault(name.lower(), name)
        try:
            native = Locale(code).get_display_name(code)
        except (ValueError, TypeError):
            native = None
        if native and len(native) > 1:
            names.setdefault(native.lower(), name)
    for alias, code in (("mandarin", "zh"), ("farsi", "fa"), ("flemish", "nl")):
        names.setdefault(alias, english.languages[code])
    return names


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern[str]:
    # Longest names first, so "Swiss German" wins over "German".
    names = sorted(_names(), key=len, reverse=True)
    return re.compile(r"(?<![\w])(" + "|".join(re.escape(n) for n in names) + r")(?![\w])", re.I)


_ASKING_BEFORE = re.compile(
    r"(?:\b(?:in|into|to|reads?|speaks?|speak|understands?|knows?|prefers?|wants?|use|needs?|"
    r"asked for|asks for|requested|switch to|answer in|reply in|respond in|write in|only|auf|en|"
    r"em|op|na|po|w)\s+(?:\w+\s+)?$)"
)
_ASKING_AFTER = re.compile(r"^\s*,?\s*(?:please|only|speakers?|readers?|version|translation)\b")
_REFUSED_BEFORE = re.compile(
    r"(?:\bwhy\s+(?:\w+\s+){0,2}$|\b(?:not|no|never|instead of|rather than|than)\s+(?:in\s+)?$"
    r"|\b(?:n't|not|never|no longer)\s+(?:\w+\s+){1,3}$)"
)
_QUESTIONED_AFTER = re.compile(r"^\s*\?")


def wanted_language(text: str) -> str | None:
    """The English name of the language ``text`` asks the answer to be in, if any."""
    normal = text.replace("\u2019", "'")
    lowered = normal.lower()
    wanted: list[str] = []
    for match in _pattern().finditer(normal):
        written = match.group(0)
        name = _names()[written.lower()]
        # short or lower-case words that happen to be language names ("ga", "ewe") need a
        # capital letter to count
        if len(written) < 4 and not written[0].isupper():
            continue
        before, after = lowered[: match.start()], lowered[match.end() :]
        sentence_start = re.split(r"[.!?]\s", before)[-1]
        polite = re.search(
            r"^\s*(?:could|can|would|will)\b|\b(?:could|can|would|will) you\b"
            r"|\bplease\b",
            sentence_start,
        )
        if _REFUSED_BEFORE.search(before[-40:]) or (_QUESTIONED_AFTER.match(after) and not polite):
            continue
        if re.search(r"\b(?:plain|simple|proper|good|clear|everyday)\s+$", before):
            continue  # "plain English" asks for simple words, not for a language
        if _ASKING_BEFORE.search(before[-40:]) or _ASKING_AFTER.match(after):
            wanted.append(name)
    # English is what an answer defaults to: another language named beside it is the wish
    others = [name for name in wanted if name != "English"]
    return (others or wanted)[-1] if wanted else None
