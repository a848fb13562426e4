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

from trainer.reading import cue_tables

# The words, each explained in ``cues/en/vocabulary/languages.json``
_L = cue_tables.vocabulary("languages").patterns
_TABLES = cue_tables.vocabulary("languages").tables


@lru_cache(maxsize=2)
def _names(native: bool) -> dict[str, str]:
    """Lower-cased name → English name, for languages with locale data: their English names,
    and with ``native`` their own names too ("Deutsch", "日本語"). The native names load every
    locale (about two seconds), so they are read only for a text that may need them."""
    english = Locale("en")
    codes = sorted({identifier.split("_")[0] for identifier in locale_identifiers()})
    names: dict[str, str] = {}
    for code in codes:
        if not (name := english.languages.get(code)):
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
    for alias, code in _TABLES["aliases"].items():
        names.setdefault(alias, english.languages[code])
    return names


@lru_cache(maxsize=2)
def _pattern(native: bool) -> re.Pattern[str]:
    # Longest names first, so "Swiss German" wins over "German"; a name in a script without
    # Latin letters is found inside words too ("日本語で", "بالعربية")
    names = sorted(_names(native), key=len, reverse=True)
    spaced = "|".join(re.escape(n) for n in names if re.search("[a-zà-ÿ]", n))
    joined = "|".join(re.escape(n) for n in names if not re.search("[a-zà-ÿ]", n))
    return re.compile(rf"(?<![\w])({spaced})(?![\w])" + (f"|({joined})" if joined else ""), re.I)


def _may_name_natively(text: str) -> bool:
    """True when a capitalised or non-ASCII word after such a frame is no English name."""
    english = _names(False)
    return any(
        (word[0].isupper() or not word.isascii()) and word.lower() not in english
        for word in _L["after_frame"].findall(text)
    )


def wanted_language(text: str) -> str | None:
    """The English name of the language ``text`` asks the answer to be in, if any."""
    normal = text.replace("\u2019", "'")
    lowered = normal.lower()
    wanted, described, described_now = list[str](), list[str](), False
    native = _may_name_natively(normal) or not normal.isascii()  # "rispondi in italiano, più…"
    names = _names(native)
    for match in _pattern(native).finditer(normal):
        written = match.group(0)
        name = names[written.lower()]
        # short names and everyday words that are language names ("ga", "the polish step")
        word = written.lower() in _TABLES["everyday_words"] or (
            len(written) < 4 and written.isascii()
        )
        if word and not written[0].isupper():
            continue
        before, after = lowered[: match.start()], lowered[match.end() :]
        sentence_start = re.split(r"[.!?]\s", before)[-1]
        polite = _L["polite_request"].search(sentence_start)
        if _L["described_in"].search(before[-40:]):
            described_now = True  # "the wrap-up is still in English": what it is now
            continue
        if described_now and _L["not_instead"].search(before[-20:]):
            wanted.append(name)  # "…still in English, not Spanish": Spanish is wanted
            continue
        questioned = _L["questioned_after"].match(after) and not polite
        refused = _L["refused_before"].search(before[-40:]) or _L["cannot_before"].search(
            before[-60:]
        )
        if refused or questioned or _L["plain_before"].search(before):
            continue  # ("plain English" asks for simple words, not for a language)
        asking = _L["asking_before"].search(before[-40:])
        describing = _L["describing"].search(asking.group(0)) if asking else None
        describing = describing or _L["fluent"].search(before[-40:])
        if asking and describing and not polite:
            # what the readers read is a reason, not a request: never for English, the
            # answer's own language, nor when it names more than one ("read English and French")
            if name != "English":
                described.append(name)
            continue
        if asking or _L["asking_after"].match(after):
            wanted.append(name)
    if len(set(described)) == 1:
        wanted.append(described[0])
    # English is what an answer defaults to: another language named beside it is the wish
    others = [name for name in wanted if name != "English"]
    return (others or wanted)[-1] if wanted else None


def unreadable_language(text: str) -> str | None:
    """The English name of a language ``text`` says its readers cannot read, if any."""
    normal = text.replace("\u2019", "'")
    for match in _pattern(False).finditer(normal):
        before = normal[: match.start()].lower()[-60:]
        if len(match.group(0)) >= 4 and _L["cannot_before"].search(before):
            return _names(False)[match.group(0).lower()]
    return None
