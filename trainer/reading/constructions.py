"""The construction layer: each mention of a family ("a table", "the chatty voice") gets a role
from the construction it sits in, before any wish is chosen: *wanted*, *rejected* or *kept*.

- comparison: "X reads better than Y", "I prefer X to Y", "X over Y", "between X and Y, X";
- substitution: "X instead of / in place of Y", "replace / swap / switch Y with / for / into X";
- contrast: "X, not Y", "not Y but X", "Y? No. X.";
- rejection: "Y has to go", "lose Y", "Y isn't helping"; keeping: "keep Y", "Y is fine".

Swapping the two families swaps the reading: nothing here depends on which family is named.
Rival mentions whose roles no construction settles are *not understood*: said back with a chip
for each reading, never guessed. The words are data: ``cues/en/vocabulary/constructions.json``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from itertools import pairwise, zip_longest
from typing import Literal

from domain.change_families import contrary_of, opposite_of
from trainer.reading import cue_tables
from trainer.reading.cue_tables import Cue
from trainer.reading.wish_actions import unsplit

Role = Literal["wanted", "rejected", "kept"]
Roles = tuple[Role, Role]

CUES: tuple[Cue, ...] = cue_tables.english_cues()
_WORDS = cue_tables.vocabulary("constructions")
_P = _WORDS.patterns
_FORMS = frozenset(_WORDS.tables["rival_forms"])
_LOCATION = cue_tables.vocabulary("attributes").patterns["location"]
_QUOTED = cue_tables.vocabulary("grammar").patterns["quoted"]


def cue_matches(lowered: str) -> list[tuple[Cue, re.Match[str]]]:
    """Every cue's matches, overlaps resolved longest first, then by priority ("four
    paragraphs of background before" is about order). Locations ("paragraph two") name nothing."""
    claimed: list[tuple[int, int]] = []
    found: list[tuple[int, float, Cue | None, re.Match[str]]] = [
        (match.end() - match.start(), -cue.priority, cue, match)
        for cue in CUES
        for match in cue.pattern.finditer(lowered)
        if match.end() > match.start()
    ]
    found += [(m.end() - m.start(), -math.inf, None, m) for m in _LOCATION.finditer(lowered)]
    kept: list[tuple[Cue, re.Match[str]]] = []
    for _, _, cue, match in sorted(found, key=lambda f: (f[0], f[1]), reverse=True):
        start, end = match.span()
        if any(start < e and s < end for s, e in claimed):
            continue
        claimed.append((start, end))
        if cue is not None:
            kept.append((cue, match))
    return sorted(kept, key=lambda k: k[1].start())


@dataclass(frozen=True)
class Mention:
    """Words naming a family, where they sit in their sentence."""

    family: str
    aspect: str
    start: int
    end: int
    confidence: float


@dataclass(frozen=True)
class Placed:
    mention: Mention
    role: Role


@dataclass(frozen=True)
class Construction:
    """What the constructions of one sentence settle: a role for every mention, or (when
    ``unsettled``) the rival families whose roles they could not place."""

    placed: tuple[Placed, ...] = ()
    unsettled: tuple[str, ...] = ()
    # families named beside the rivals, in no construction and rival to none ("put the answer
    # at the top and give me bullets rather than paragraphs"): the reader's frames read them
    left: tuple[str, ...] = ()


def rivals(one: str, other: str) -> bool:
    """Families a comment can prefer one over the other: opposites, contraries, two forms."""
    related = contrary_of(one) | contrary_of(other) | {opposite_of(one), opposite_of(other)}
    return one != other and (other in related or {one, other} <= _FORMS)


def mentions(lowered: str, faults: bool = False) -> list[Mention]:
    """The families a sentence names by a state or quality cue; not an adjective before a
    named form ("the long paragraphs"), nor a quality said of the answer ("too brief")."""
    quoted = [q.span() for q in _QUOTED.finditer(lowered)]  # the answer's own words
    found = [
        Mention(named, cue.aspect, m.start(), m.end(), cue.confidence)
        for cue, m in cue_matches(lowered)
        # with ``faults``, a fault's words name the state its fix turns from ("hedging")
        if (named := cue.ask if cue.kind != "fault" else faults and opposite_of(cue.fault or ""))
        and _names(cue, m, lowered, quoted)
    ]
    named: list[Mention] = []
    for mention, after in zip_longest(found, found[1:]):
        attribute = (
            after is not None
            and after.aspect == "format" != mention.aspect
            and re.fullmatch(r"\s*(?:\w+\s+)?", lowered[mention.end : after.start]) is not None
        )
        gap = lowered[named[-1].end : mention.start] if named else None
        # "beginner-friendly": one compound, named by its first word; a family named twice running
        repeated = gap == "-" or (
            gap is not None and not gap.strip() and named[-1].family == mention.family
        )
        if not attribute and not repeated:
            named.append(mention)
    return named


def _names(cue: Cue, match: re.Match[str], lowered: str, quoted: list[tuple[int, int]]) -> bool:
    """Whether a cue's words name a family a comment may prefer: not a quality said of the
    answer, a likeness ("reads like a chat"), a purpose, a change refused, or quoted words."""
    before = re.split(r"[,;:.!?]", lowered[: match.start()])[-1]
    if any(s <= match.start() and match.end() <= e for s, e in quoted):
        return False
    if _P["situation"].search(match.group(0)) or _P["comparative"].search(before):
        return False
    if cue.kind == "quality":
        # before a noun it names a thing ("this deep dive", "a short answer")
        attributive = _P["noun_after"].match(lowered[match.end() :])
        if attributive or _P["house_voice_close"].search(before):
            return True
        return not _P["described"].search(before)
    return not _P["described_state"].search(before)


def _pivot(lowered: str, left: Mention, right: Mention, head: int | None) -> Roles | None:
    """The roles a construction between two mentions gives them (``head``: where the words
    joined to ``left`` start, when they open the sentence's mentions)."""
    gap = lowered[left.end : right.start]
    if _P["clause_break"].search(gap):
        return None  # a construction never spans two clauses
    if _P["than"].search(gap):
        # "Y is harder to skim than X", "less Y than X": what follows "than" is preferred
        worse = _P["worse"].search(gap.split(" than")[0]) or _P["worse"].search(
            lowered[max(0, left.start - 12) : left.start]
        )
        return ("rejected", "wanted") if worse else ("wanted", "rejected")
    if _P["to"].search(gap) and _P["prefer_to"].search(lowered[: left.start]):
        return "wanted", "rejected"  # "I'd prefer a table to bullets"
    if head is not None and _P["swap_link"].search(gap):
        before = lowered[:head]  # "swap the chatty, breezy tone for …": what the verb swaps
        if _P["swap_in"].search(before):
            return "wanted", "rejected"  # "swap in a table for the bullets"
        if _P["swap_verb"].search(before):
            return "rejected", "wanted"  # "switch the list to a table", "go from Y to X"
    if _P["left_wins"].search(gap):
        return "wanted", "rejected"
    return None


def _own_role(lowered: str, mention: Mention, start: int, end: int) -> Role | None:
    """The role the words around one mention give it, between its neighbours' words."""
    before = re.split(r"[,;:]|\bbut\b", lowered[start : mention.start])[-1]
    after = lowered[mention.end : end]
    # the words before decide (a negation scopes over a verb of wanting: "I don't want
    # more depth"); then the words after, up to the clause's end but for a rejection
    roles: tuple[Role, ...] = ("rejected", "kept", "wanted")
    if role := next((r for r in roles if _P[f"{r}_before"].search(before)), None):
        return role
    if _P["rejected_after"].match(after):
        return "rejected"
    after = re.split(r"[,;:.!]|\bbut\b", after)[0]
    return next((r for r in roles[1:] if _P[f"{r}_after"].match(after)), None)


def place(sentence: str) -> Construction | None:
    """The roles of a sentence's mentions, or None (the reader's frames read it)."""
    lowered = unsplit(sentence.lower())
    found = mentions(lowered)
    families = list(dict.fromkeys(m.family for m in found))
    rival = any(rivals(a, b) for a in families for b in families)
    if (
        found
        and not rival
        and _P["prefers_over"].match(lowered[found[-1].end :])
        and all(_P["coordinated"].match(lowered[a.end : b.start]) for a, b in pairwise(found))
    ):
        # "plain and brief wins over the lecture": what is named is preferred to words that
        # name no family
        return Construction(tuple(Placed(m, "wanted") for m in found))
    if len(families) < 2:
        # "a short answer over the full history lesson": one mention preferred to words
        # that name no family
        preferred = (
            found
            and _P["rather_before"].search(lowered[: found[0].start])
            and _P["than_after"].match(lowered[found[0].end :])
        )
        # "swap the flat certainty for honest hedging": what it is swapped for is wanted;
        # "switch the bullets to something else": what is swapped out, rejected
        named = mentions(lowered, faults=True)
        swap = named and _P["swap_one"].search(lowered[: named[0].start])
        one = len({m.family for m in named}) == 1
        if one and swap and not _P["swap_in"].search(lowered[: named[0].start]):
            if _P["swapped_for"].search(lowered[swap.end() : named[0].start]):
                return Construction((Placed(named[0], "wanted"),))
            if _P["swapped_out"].match(lowered[named[0].end :]):
                return Construction((Placed(named[0], "rejected"),))
        return Construction((Placed(found[0], "wanted"),)) if preferred else None
    roles = _construction_roles(lowered, found)
    if not rival:
        # no rivals: only a comparison or substitution between two of them is read here
        # ("plain wording in place of the legal formality")
        if "rejected" not in roles.values() or "wanted" not in roles.values():
            return None
        return Construction(tuple(Placed(found[i], r) for i, r in sorted(roles.items())))
    for index, mention in enumerate(found):
        start = found[index - 1].end if index else 0
        end = found[index + 1].start if index + 1 < len(found) else len(lowered)
        if index not in roles and (own := _own_role(lowered, mention, start, end)):
            roles[index] = own
    _share_coordinated(lowered, found, roles)
    # a rival beside one rejected, in no construction of its own, is what comes instead
    # ("Y has to go; X."); beside one wanted it is left as it is, neither added nor removed
    # ("quit with the bullets everywhere; give me paragraphs")
    gone = [found[i].family for i, role in roles.items() if role == "rejected"]
    for index, mention in enumerate(found):
        if index not in roles and any(rivals(family, mention.family) for family in gone):
            roles[index] = "wanted"
    return _settled(found, roles, families)


def removed(sentence: str) -> set[str]:
    """The families a removal verb names ("skip the beginner-friendly version"), unless
    refused ("don't drop the table")."""
    lowered = unsplit(sentence.lower())
    found = mentions(lowered)
    starts = [0, *(m.end for m in found)]  # each mention's words begin after the one before
    return {
        m.family
        for start, m in zip(starts, found, strict=False)
        if (verb := _P["removed_before"].search(lowered[start : m.start]))
        and not _P["rejected_before"].search(lowered[: start + verb.start()])
    }


def _construction_roles(lowered: str, found: list[Mention]) -> dict[int, Role]:
    """The roles a choice, a leading rejection or a pivot between two mentions gives."""
    roles: dict[int, Role] = {}
    if _P["between"].search(lowered) and "," in lowered:
        # "between X and Y, Y wins": the family named again after the choice is chosen
        comma = lowered.index(",")
        chosen = {m.family for m in found if m.start > comma}
        if len(chosen) == 1:
            return {i: "wanted" if m.family in chosen else "rejected" for i, m in enumerate(found)}
    if _P["lead_rejects"].search(lowered[: found[0].start]):
        # "Rather than Y, X": the first mention is what goes (a rival after it, what comes)
        return {0: "rejected"}
    head: int | None = found[0].start  # where the words joined to the first mention start
    for index, (left, right) in enumerate(pairwise(found)):
        gap = lowered[found[index - 1].end : left.start] if index else ""
        head = head if not gap or _P["coordinated"].match(gap) else None
        if (pivot := _pivot(lowered, left, right, head)) is not None:
            roles.setdefault(index, pivot[0])
            roles.setdefault(index + 1, pivot[1])
    return roles


def _settled(found: list[Mention], roles: dict[int, Role], families: list[str]) -> Construction:
    """The placed mentions, or the families left unsettled (a family with two roles, two
    rivals wanted, or none wanted or rejected)."""
    by_family: dict[str, set[Role]] = {}
    for index, role in sorted(roles.items()):
        by_family.setdefault(found[index].family, set()).add(role)
    wanted = [f for f, r in by_family.items() if r == {"wanted"}]
    torn = [f for f, r in by_family.items() if len(r) > 1]
    torn += [f for f in wanted if any(rivals(f, o) for o in wanted)]
    if torn or (not wanted and not any("rejected" in r for r in by_family.values())):
        return Construction(unsettled=tuple(dict.fromkeys([*torn, *families])))
    left = {
        m.family
        for i, m in enumerate(found)
        if i not in roles and not any(rivals(m.family, f) for f in families)
    }
    return Construction(
        tuple(Placed(m, roles[i]) for i, m in enumerate(found) if i in roles),
        left=tuple(sorted(left - set(by_family))),
    )


def _share_coordinated(lowered: str, found: list[Mention], roles: dict[int, Role]) -> None:
    """Mentions joined by "and", "or" or a comma share a role: "a friendly, informal tone"."""
    for _ in range(2):
        for index in range(len(found) - 1):
            if not _P["coordinated"].match(lowered[found[index].end : found[index + 1].start]):
                continue
            left, right = roles.get(index), roles.get(index + 1)
            if left is not None and right is None:
                roles[index + 1] = left
            elif right is not None and left is None:
                roles[index] = right


MAX_REJECTION_WORDS = 6


def joins(sentences: list[str]) -> int:
    """How many sentences after the first belong to its construction ("Y? No thanks. X.",
    "Not the bullets. A table.")."""
    if len(sentences) >= 3 and rejects_by_answer(sentences[0], sentences[1]):
        return 2
    if len(sentences) < 2:
        return 0
    first = sentences[0].lower()
    named = mentions(first)
    if not named:
        return 0
    if len(first.split()) <= MAX_REJECTION_WORDS and _P["lead_rejects"].search(first):
        return 1
    # "The beginner-level hand-holding has to go. Talk to us as engineers: proper terms."
    rejected = all(
        _own_role(first, m, named[i - 1].end if i else 0, len(first)) == "rejected"
        for i, m in enumerate(named)
    )
    after = {m.family for m in mentions(sentences[1].lower())}
    return int(rejected and any(rivals(m.family, f) for m in named for f in after))


def rejects_by_answer(question: str, answer: str) -> list[Mention]:
    """What a question answered "no" names ("The bulleted list? No thanks.")."""
    if not question.rstrip().endswith("?") or not _P["negative_answer"].match(answer.lower()):
        return []
    return mentions(question.lower())
