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


@lru_cache(maxsize=2)
def _names(native: bool) -> dict[str, str]:
    """Lower-cased name → English name, for languages with locale data: their English names,
    and with ``native`` their own names too ("Deutsch", "日本語"). The native names load every
    locale (about two seconds), so they are read only for a text that may need them."""
    english = Locale("en")
    codes = sorted({identifier.split("_")[0] for identifier in locale_identifiers()})
    names: dict[str, str] = {}
    for code in codes:
        name = english.languages.get(code)
        if not name:
            continue
        names.setdefault(name.lower(), name)
        if not native:
            continue
        try:
            own = Locale(code).get_display_name(code)
        except (ValueError, TypeError):
            own = None
        if own and len(own) > 1:
            names.setdefault(own.lower(), name)
    for alias, code in (("mandarin", "zh"), ("farsi", "fa"), ("flemish", "nl")):
        names.setdefault(alias, english.languages[code])
    return names


@lru_cache(maxsize=2)
def _pattern(native: bool) -> re.Pattern[str]:
    # Longest names first, so "Swiss German" wins over "German".
    names = sorted(_names(native), key=len, reverse=True)
    return re.compile(r"(?<![\w])(" + "|".join(re.escape(n) for n in names) + r")(?![\w])", re.I)


# A language named in its own tongue follows words like these: "auf Deutsch", "en français"
_AFTER_FRAME = re.compile(r"\b(?:in|into|auf|en|em|op|på|na|po|w)\s+(\w+)")


def _may_name_natively(text: str) -> bool:
    """True when a capitalised or non-ASCII word after such a frame is no English name."""
    english = _names(False)
    return any(
        (word[0].isupper() or not word.isascii()) and word.lower() not in english
        for word in _AFTER_FRAME.findall(text)
    )


_ASKING_BEFORE = re.compile(
    r"(?:\b(?:in|into|to|reads?|speaks?|speak|understands?|knows?|prefers?|wants?|use|needs?|"
    r"asked for|asks for|requested|switch to|answer in|reply in|respond in|write in|only|auf|en|"
    r"em|op|na|po|w)\s+(?:\w+\s+)?$)"
)
_DESCRIBING = re.compile(
    r"^(?:reads?|speaks?|speak|understands?|knows?|prefers?)\b|\bonly (?:reads?|speaks?)\b"
)
_FLUENT = re.compile(r"\b(?:fluent|comfortable|at home|confident|proficient|good) in\s+$")
_ASKING_AFTER = re.compile(r"^\s*,?\s*(?:please|only|speakers?|readers?|version|translation)\b")
_REFUSED_BEFORE = re.compile(
    r"(?:\bwhy\s+(?:\w+\s+){0,2}$|\b(?:nobody|no one|noone|few|hardly anyone|hardly any|"
    r"almost none|not everyone)\s+"
    r"(?:\w+\s+){0,3}$|\b(?:not|no|never|instead of|rather than|than)\s+(?:in\s+)?$"
    r"|(?:n't|\bnot|\bnever|\bno longer)\s+(?:\w+\s+){1,3}$)"
)
_QUESTIONED_AFTER = re.compile(r"^\s*\?")


def wanted_language(text: str) -> str | None:
    """The English name of the language ``text`` asks the answer to be in, if any."""
    normal = text.replace("\u2019", "'")
    lowered = normal.lower()
    wanted: list[str] = []
    described: list[str] = []
    native = _may_name_natively(normal)
    names = _names(native)
    for match in _pattern(native).finditer(normal):
        written = match.group(0)
        name = names[written.lower()]
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
        if (
            _REFUSED_BEFORE.search(before[-40:])
            or _CANNOT_BEFORE.search(before[-60:])
            or (_QUESTIONED_AFTER.match(after) and not polite)
        ):
            continue
        if re.search(r"\b(?:plain|simple|proper|good|clear|everyday)\s+$", before):
            continue  # "plain English" asks for simple words, not for a language
        asking = _ASKING_BEFORE.search(before[-40:])
        describing = _DESCRIBING.search(asking.group(0)) if asking else None
        describing = describing or _FLUENT.search(before[-40:])
        if asking and describing and not polite:
            # what the readers read is a reason, not a request: never for English, the
            # answer's own language, nor when it names more than one ("read English and French")
            if name != "English":
                described.append(name)
            continue
        if asking or _ASKING_AFTER.match(after):
            wanted.append(name)
    if len(set(described)) == 1:
        wanted.append(described[0])
    # English is what an answer defaults to: another language named beside it is the wish
    others = [name for name in wanted if name != "English"]
    return (others or wanted)[-1] if wanted else None


# readers who cannot read a language: "nobody there reads English", "few of them speak German",
# "they don't read English well"
_CANNOT_BEFORE = re.compile(
    r"\b(?:nobody|no one|noone|none of (?:them|us|the \w+)|few(?: of them| people)?|hardly "
    r"(?:anyone|any(?: of (?:them|us))?)|almost none(?: of them)?|not everyone|not all of them|"
    r"(?:do|does|can|could)(?:n't| not)|cannot|barely|scarcely|rarely|seldom|hardly)\s+"
    r"(?:\w+\s+){0,2}(?:reads?|speaks?|understands?|knows?|follows?|(?:is|are) (?:fluent|"
    r"comfortable|at home|confident) (?:in|with))\s+$"
    # "they struggle with English", "few are really at home in German"
    r"|\bstruggl\w* (?:with|to (?:read|follow|understand))\s+$"
    r"|\b(?:is|are|was|were)(?:n't| not)\s+(?:very\s+|really\s+|at all\s+)?(?:fluent|comfortable|"
    r"at home|confident) (?:in|with)\s+$"
)


def unreadable_language(text: str) -> str | None:
    """The English name of a language ``text`` says its readers cannot read, if any."""
    normal = text.replace("\u2019", "'")
    for match in _pattern(False).finditer(normal):
        if len(match.group(0)) >= 4 and _CANNOT_BEFORE.search(
            normal[: match.start()].lower()[-60:]
        ):
            return _names(False)[match.group(0).lower()]
    return None
