"""What a comment does with a change family beyond asking for it, and how much it asks for:

- **take-backs** ("drop the example", "die Überschriften entfernen"): a removal word and a
  family's noun (or a pronoun pointing back) remove what it put in; "don't drop it" keeps it;
- **undo** ("undo that", "go back to how it was"): the last change, whatever its families;
- **approval and preferences in other languages** ("les puces se lisent très vite" keeps a
  family, "liever alinea's dan opsommingen" prefers one of two);
- **amounts**: a share ("about half as long"), a count ("exactly one example") or a limit.

The words are data: ``cues/actions/<code>.json`` per language, and ``cues/en/vocabulary/``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from domain.change_families import aspect_of
from domain.trainer import Amount
from trainer.reading import cue_tables
from trainer.reading.wish import Wish

_phrases = cue_tables.phrases
Noun = tuple[int, int, str]  # (start, end, family) of a family's noun in a text
# The words, each explained in ``cues/en/vocabulary/wish_actions.json``
_W = cue_tables.vocabulary("wish_actions").patterns

ACTIONS = cue_tables.ACTIONS
TAKEBACK_CONFIDENCE = 0.9
NEGATION = _W["denied_before"]


@dataclass(frozen=True)
class ActionCues:
    language: str
    # verb-final languages: an object on either side ("die Tabelle bitte streichen")
    either_side: bool
    nouns: dict[str, re.Pattern[str]]
    rivals: dict[str, re.Pattern[str] | None]  # rival families' words, adjectives too
    remove: re.Pattern[str] | None  # removal words whose object follows ("drop the table")
    remove_after: re.Pattern[str] | None  # …whose object comes first ("the table can go")
    undo: re.Pattern[str] | None
    approve: re.Pattern[str] | None
    pronoun: re.Pattern[str] | None
    # preferences between rivals: "X dan Y", "zamiast Y, X" (English: ``constructions.py``)
    than: re.Pattern[str] | None
    instead: re.Pattern[str] | None
    better: re.Pattern[str] | None  # "than" compares only after one of these


@lru_cache(maxsize=1)
def action_cues() -> tuple[ActionCues, ...]:
    """Every language's action vocabulary, English first."""
    found = []
    for path in sorted(ACTIONS.glob("*.json"), key=lambda p: (p.stem != "en", p.stem)):
        data = cue_tables.action_file(path)
        bounded = data.get("word_boundaries", True)
        nouns = {f: p for f, w in data.get("nouns", {}).items() if (p := _phrases(w, bounded))}
        rivals = {f: _phrases(w, bounded) for f, w in data.get("rivals", {}).items()}
        lists = {key: _phrases(data.get(key, []), bounded) for key in _PHRASE_LISTS}
        lists["pronoun"] = _phrases(data.get("pronouns", []), bounded)
        either_side = data.get("object_either_side", False)
        found.append(ActionCues(data["language"], either_side, nouns, rivals, **lists))
    return tuple(found)


_PHRASE_LISTS = ("remove", "remove_after", "undo", "approve", "than", "instead", "better")


def families_named(text: str) -> list[str]:
    """The families ``text`` names by their nouns ("the table", "die Beispiele"), in order."""
    lowered = text.lower()
    return [family for cues in action_cues() for _, _, family in _family_nouns(lowered, cues)]


def _family_nouns(text: str, cues: ActionCues) -> list[Noun]:
    """Every family noun in ``text``, in order."""
    return sorted(
        (m.start(), m.end(), family)
        for family, pattern in cues.nouns.items()
        for m in pattern.finditer(text)
    )


def unsplit(lowered: str) -> str:
    """ "take the table back" as "take back the table", of the same length."""
    return _W["separated"].sub(r"\1 \3 \2", lowered)


def takebacks(sentence: str, before: str = "") -> list[Wish]:
    """The families ``sentence`` takes back (or, with the removal denied, keeps), in any
    language with an actions file. A removal of a pronoun ("take it out") with no family named
    in the sentence points at the last one named in the sentence ``before``."""
    lowered = unsplit(sentence.lower())
    wishes: dict[str, Wish] = {}
    for cues in action_cues():
        if cues.remove is None:
            continue
        quote = sentence.strip()
        nouns = _family_nouns(lowered, cues)
        earlier = _family_nouns(before.lower(), cues) if before and not nouns else []
        if not nouns and not earlier:
            continue
        verbs = [(v, False) for v in cues.remove.finditer(lowered)]
        if cues.remove_after is not None:
            verbs += [(v, True) for v in cues.remove_after.finditer(lowered)]
        for verb, postposed in verbs:
            head, rest = lowered[: verb.start()], lowered[verb.end() :]
            if (
                _W["limit_after"].match(rest)
                or (postposed and _W["verb_goes_on"].match(rest))
                or _W["person_after"].match(rest)
            ):
                continue  # "no more than 80 words", "so I can go over it", "would it kill you"
            if verb.group(0).startswith("without") and _W["better_before"].search(head):
                continue  # "better without the numbering": the removal approved, asked again
            also: list[str] = []
            if nouns:
                family = _object_of(lowered, verb, nouns, cues, postposed or cues.either_side)
                also = _coordinated(lowered, family, nouns)
            else:
                family = earlier[-1][2] if _points_back(lowered, verb, cues) else None
                if family:
                    quote = f"{before.strip()} {sentence.strip()}"
            if family and family not in wishes:
                action = "keep" if NEGATION.search(head) else "remove"  # "don't drop the table"
                wishes[family] = Wish(
                    family, aspect_of(family), quote, TAKEBACK_CONFIDENCE, action=action
                )
                for other in also:  # "scrap the table and the examples"
                    wishes.setdefault(
                        other, replace(wishes[family], family=other, aspect=aspect_of(other))
                    )
    return list(wishes.values())


def _coordinated(text: str, family: str | None, nouns: list[Noun]) -> list[str]:
    """The families named right after the object of a removal, joined to it by "and" or a
    comma: "drop the table and the examples" takes back both."""
    chain = [n for n in nouns if n[2] == family][:1]  # none for no family
    for noun in nouns:
        if chain and noun[0] > chain[-1][1] and _W["and"].match(text[chain[-1][1] : noun[0]]):
            chain.append(noun)
    return [other for *_, other in chain[1:] if other != family]


OBJECT_SPAN = 40  # characters after a removal word in which its object is looked for
ARTICLE_SPAN = 8  # a noun this close after it is its object, whatever word stands between
RIVAL_SPAN = 16  # a rival this close after "instead of" is what it replaces ("un tono cercano")


def _object_of(
    text: str, verb: re.Match[str], nouns: list[Noun], cues: ActionCues, object_first: bool
) -> str | None:
    """The family a removal word acts on: the first family noun after it and before another
    verb ("drop the example", not "drop the quotes and use bullets"); for a pronoun ("drop it")
    or after its object ("the headings can go", "die Überschriften entfernen"), the nearest one
    before it; else none ("what to take away" after "a brief summary" takes nothing away)."""
    ends = _W["object_ends"].search(text, verb.end()) if cues.language == "English" else None
    stop = min(verb.end() + OBJECT_SPAN, ends.start() if ends else len(text))
    after = [n for n in nouns if verb.end() <= n[0] <= stop]
    # a noun right after is the object even after a word that can be a pronoun or an
    # article ("enlevez les exemples")
    near = bool(after) and after[0][0] - verb.end() <= ARTICLE_SPAN
    pointing = _points_back(text, verb, cues) and not near
    if after and not pointing and not (object_first and not cues.either_side):
        return after[0][2]
    before = [n for n in nouns if n[1] <= verb.start()]
    if before and (pointing or object_first):
        return before[-1][2]
    return after[0][2] if after and cues.either_side else None


def _points_back(text: str, verb: re.Match[str], cues: ActionCues) -> bool:
    """Whether the removal acts on a pronoun: in its words ("take it out") or after ("drop it")."""
    if cues.pronoun is None:
        return False
    following = text[verb.end() : verb.end() + 12].strip()
    return bool(cues.pronoun.match(following) or cues.pronoun.search(verb.group(0)))


def undo(sentence: str) -> Wish | None:
    """A wish to undo the last change ("undo that", "go back to how it was")."""
    lowered = sentence.lower()
    for cues in action_cues():
        match = cues.undo.search(lowered) if cues.undo else None
        if match and not NEGATION.search(lowered[: match.start()]):
            return Wish("undo", "overall", sentence.strip(), TAKEBACK_CONFIDENCE, action="remove")
    return None


def approvals(clause: str) -> list[Wish]:
    """Families a clause in another language approves of ("les puces se lisent très vite")."""
    lowered = clause.lower()
    kept = []
    for cues in action_cues():
        if cues.approve is None or cues.language == "English":
            continue
        word = cues.approve.search(lowered)
        if word is None or NEGATION.search(lowered[: word.start()]):
            continue
        for _, _, family in _family_nouns(lowered, cues):
            kept.append(Wish(family, aspect_of(family), clause.strip(), 0.8, action="keep"))
    return kept


def preferences(sentence: str, rivals: Callable[[str, str], bool]) -> list[Wish]:
    """One of two rivals preferred in another language: "liever alinea's dan opsommingen",
    "zamiast wypunktowania wolałbym tabelę". The one after "than" or "instead of" is taken
    back, its rival is asked for; anything less clear reads nothing."""
    lowered = sentence.lower()
    for cues in action_cues():
        if cues.than is None or cues.instead is None:
            continue
        named = _family_nouns(lowered, replace(cues, nouns={**cues.nouns, **cues.rivals}))
        if len({f for *_, f in named}) != 2 or not rivals(named[0][2], named[-1][2]):
            continue
        first, last = named[0], named[-1]
        instead = [m.end() for m in cues.instead.finditer(lowered)]
        if any(0 <= first[0] - end <= RIVAL_SPAN for end in instead):
            wanted, rejected = last, first  # "zamiast wypunktowania … tabelę"
        elif any(0 <= last[0] - end <= RIVAL_SPAN for end in instead) or (
            cues.than.search(lowered[first[1] : last[0]])
            and cues.better is not None
            and cues.better.search(lowered[: last[0]])
        ):
            wanted, rejected = first, last  # "alinea's dan al die opsommingstekens"
        else:
            continue
        quote = sentence.strip()
        return [
            Wish(wanted[2], aspect_of(wanted[2]), quote, 0.8, asked=True),
            Wish(rejected[2], aspect_of(rejected[2]), quote, 0.8, action="remove"),
        ]
    return []


# --- amounts

# The words, each explained in ``cues/en/vocabulary/amounts.json``
_AMOUNTS = cue_tables.vocabulary("amounts")
_SHARE = [(re.compile(s["regex"]), s["share"]) for s in _AMOUNTS.tables["shares"]]
_NUMBER: dict[str, int] = _AMOUNTS.tables["numbers"]
_UNITS: dict[str, str] = _AMOUNTS.tables["units"]
_COUNT = _AMOUNTS.patterns["count"]
# the families a counted unit belongs to, and the family a count is an amount of
_COUNTED: dict[str, list[str]] = _AMOUNTS.tables["counted"]


def share_alone(text: str) -> tuple[str, Amount] | None:
    """(quote, amount) of a share of the length asked for on its own, with no other word about
    the length ("Roughly a third of this length would do.")."""
    match = _W["share_alone"].search(text.lower())
    if match is None:
        return None
    amount = amount_of(match.group(0), "shorter")
    if amount is None or amount.kind != "share":
        return None
    return text[match.start() : match.end()], amount


def amount_of(clause: str, family: str, detail: str | None = None) -> Amount | None:
    """How much of ``family`` the clause asks for, if it says."""
    lowered = clause.lower()
    if family == "shorter":
        if detail and detail.isdigit():
            return Amount(kind="limit", value=int(detail), unit="words")
        for pattern, share in _SHARE:
            if pattern.search(lowered):
                return Amount(kind="share", value=round(share, 2))
    for match in _COUNT.finditer(lowered):
        unit = _UNITS.get(match.group("unit1") or match.group("unit2") or "", "")
        if family not in _COUNTED.get(unit, ()):
            continue
        word = match.group("n").lower()
        number = int(word) if word.isdigit() else _NUMBER.get(word)
        if number:
            return Amount(kind="count", value=number, unit=unit)
    return None
