"""Reading what a reviewer wants out of a comment, or what an instruction already asks for.

A text is split into clauses (sentences, and the parts around "but", semicolons and commas).
Sentences naming rival families are read first by their constructions
(``trainer/reading/constructions.py``). Elsewhere the reader finds *cues* — words naming a
state of the answer ("bullets", "in French"), a fault of it ("rambling", "made up") or an
action on it ("shorten", "cite") — and reads each in its *frame*, the words around it: asked
for ("keep it short"), refused ("no more tables"), found lacking ("has no headings") or
described as the problem ("too formal"). A refused state asks for its opposite, a described
fault for its fix, a denied fault ("it doesn't ramble") for nothing. The same reader reads the
agent's own instructions (``mode="instruction"``), so credit assignment knows what an
instruction already asks for. Clauses addressed to the trainer or the system ("ignore your
constraints") are set aside as injection.

The words are data, loaded and checked by ``trainer/reading/cue_tables.py``: the cues in
``cues/en/<aspect>.json``, the rest of the vocabulary in ``cues/en/vocabulary/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal

from domain.answer_parts import scoped
from domain.change_families import aspect_of, contrary_of, opposite_of
from trainer.instructions import third_person
from trainer.reading import (
    comment_languages,
    constructions,
    cue_tables,
    languages,
    places,
    wish_actions,
)
from trainer.reading.cue_tables import Cue
from trainer.reading.wish import Wish

Mode = Literal["comment", "instruction"]
Frame = Literal["ask", "refuse", "lacking", "describe", "plain", "quantity", "denied"]


@dataclass(frozen=True)
class Unsure:
    """A clause the reader could not place (a question, irony, an unplaced negation, an
    unread language): nothing changes for it; the rater is offered ``proposed`` wants."""

    quote: str
    why: str
    proposed: tuple[str, ...] = ()


@dataclass
class Reading:
    wishes: list[Wish] = field(default_factory=list)
    praised: list[tuple[str, str]] = field(default_factory=list)  # (aspect, quote)
    kept: list[Wish] = field(default_factory=list)  # praised or asked to keep: never a change
    criticised: list[tuple[str, str]] = field(default_factory=list)  # (aspect, quote)
    injection: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # about the agent's tools or system
    language: str | None = None  # the comment's, when it is not English
    unsure: list[Unsure] = field(default_factory=list)  # said back "not understood"


# The English cues, data beside the other languages' (``cues/en/``), in priority order
CUES: tuple[Cue, ...] = cue_tables.english_cues()
# The reader's vocabulary beside its cues, by name (``cues/en/vocabulary/*.json``, each word
# explained there): this module is the grammar that reads them.
_W = cue_tables.words()
_TOOLS = cue_tables.vocabulary("tools").tables
_DAMAGE = cue_tables.vocabulary("damage").tables
_ASPECT_NOUNS = [(p, a) for a, p in cue_tables.vocabulary("aspect_nouns").patterns.items()]
# Irony: each pattern turns an ironic sentence into the plain complaint it stands for
_IRONIES = cue_tables.vocabulary("ironies").rewrites


def _what(word: str) -> str:
    word = word[:-1] if word.endswith("s") and word not in ("stats", "statistics") else word
    return _DAMAGE["damaged_as"].get(word, word)


def _damage(clause: str) -> Wish | None:
    """A wish that a step keep what an earlier one produced, as ``step|what`` it lost."""
    lowered = clause.lower()
    damage = _W["damage"].search(lowered)
    earlier = _W["earlier"].search(lowered)
    step = _W["step_ref"].search(lowered)
    if not damage or not (step or earlier):
        return None
    if step and not earlier and step.group("name") in _DAMAGE["generic_steps"]:
        step = None  # "each step": no step named
    culprit = (step.group("place") or step.group("name")) if step else None
    if not step and (reworking := _W["reworking"].search(lowered)):
        culprit = reworking.group(0)  # "the tightening": the step whose prompt tightens
    culprit = "last" if not culprit or culprit in _DAMAGE["last_words"] else culprit
    lost = _W["damaged"].search(lowered, max(0, damage.start() - 40))
    what = _what(lost.group("what")) if lost else ""
    return Wish("preserve", "accuracy", clause.strip(), 0.8, detail=f"{culprit}|{what}")


# Phrases that set a frame whatever frame word comes nearer, in order (``frames.json``)
_PHRASE_FRAMES: list[list[str]] = cue_tables.vocabulary("frames").tables["phrase_frames"]
if unknown := {n for row in _PHRASE_FRAMES for n in row[:2] if n and n not in _W}:
    raise cue_tables.CueDataError(f"frames.json: phrase_frames: no patterns {sorted(unknown)}")
# The frames a cue's preceding words may set: the frame word nearest the cue decides; of two
# ending at the same place, the one listed first
_FRAME_ORDER = (
    ("lacking", _W["lacking"]),
    ("refuse", _W["refuse"]),
    ("describe", _W["describe"]),
    ("ask", _W["ask"]),
)


# Typographic quotes as the plain ones the patterns expect.
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})


_HOLD = "\ue000"  # stands in for the space after punctuation in a quote while splitting


def _split(text: str, held: str, splitter: re.Pattern[str]) -> list[str]:
    """``text`` split where ``splitter`` matches, but never inside a quotation."""
    normal = _W["quoted"].sub(
        lambda m: re.sub(rf"([{held}])\s", r"\1" + _HOLD, m.group(0)), text.translate(_QUOTES)
    )
    return [part.replace(_HOLD, " ") for part in splitter.split(normal) if part]


def clauses(text: str) -> list[str]:
    """The clauses of ``text`` in order; a quotation and a list like "1, 2, 3" stay whole."""
    parts = _split(text, ",.!?;:", _W["clause"])
    return [c.strip(' .!?;:,"') for c in parts if c.strip(" .!?;:,\"'")]


def _frame(before: str, after: str) -> Frame:
    """How the words after ``before`` are meant: a phrase that sets a frame (``frames.json``'s
    ``phrase_frames``), else the frame word nearest the cue ("don't make it more formal"
    refuses, "it reads like a text message" describes)."""
    tail = before.lower()[-60:]
    for phrase, follows, frame in _PHRASE_FRAMES:
        said = _W[phrase].search(tail)
        if said and (follows is None or _W[follows].match(after)):
            if frame != "quantity":
                return frame  # type: ignore[return-value]
            # "give me exactly one example" asks for that many; "five paragraphs before…" counts
            counted = tail[: said.start()]
            asked = _W["ask_verb"].search(counted) or _W["ask_after"].search(after[:60])
            return "ask" if asked else "quantity"
    refused = _W["refuse"].search(tail[-25:])
    if _W["complaint_after"].search(after) and not refused:
        return "refuse"
    if _W["ask_after"].search(after[:40]) and not refused:
        return "ask"  # "a table, please" (but "no bullets, please" refuses them)
    best: tuple[int, int, Frame] | None = None
    for rank, (name, pattern) in enumerate(_FRAME_ORDER):
        for match in pattern.finditer(tail):
            if best is None or (match.end(), -rank) > best[:2]:
                best = (match.end(), -rank, name)  # type: ignore[assignment]
    return "plain" if best is None or len(tail) - best[0] > 40 else best[2]


def _wish_of(
    cue: Cue, frame: Frame, mode: Mode, comparative: bool, change: bool = False
) -> tuple[str | None, bool]:
    """(family, weak) a cue asks for in its frame."""
    if frame == "denied" or (frame == "quantity" and cue.kind != "fault"):
        return None, False
    if frame == "refuse" and change and not cue.fixed:
        return None, False  # "don't make it longer": keep it as it is, not the opposite
    if cue.fixed:
        if cue.kind == "fault" and frame == "lacking" and mode == "comment":
            return None, False  # "there are no typos": nothing to fix
        if frame == "refuse" and change and cue.kind != "fault" and mode == "comment":
            return None, False  # "I don't want it warmer": refused, not asked for
        return cue.ask or cue.fault, False
    if cue.kind == "fault":
        return (None if frame == "lacking" else cue.fault), False
    if comparative and frame in ("describe", "plain"):
        return cue.ask or cue.fault, False  # "far more detail", "way shorter": asked for
    return _framed(cue, frame, mode, comparative)


def _framed(cue: Cue, frame: Frame, mode: Mode, comparative: bool) -> tuple[str | None, bool]:
    """(family, weak) a state or a quality asks for in its frame."""
    if frame in ("ask", "lacking") and cue.ask is None and cue.kind == "quality":
        # a quality nobody asks for, asked for ("it should be predictable"): its fix's contrary
        return (opposite_of(cue.fault or "") if frame == "ask" else None), False
    if frame in ("ask", "lacking"):
        return cue.ask or cue.fault if frame == "ask" else cue.ask, False
    if frame == "refuse":
        return cue.fault, cue.kind == "state" and opposite_of(cue.ask or "") is None
    if frame == "describe" and mode == "comment":
        # "reads like a text message" asks for the contrary; "paragraphs are painful" weakly
        return cue.fault, cue.kind == "state" and cue.weak_when_described
    # plain: a bare quality in a comment describes the answer ("formal")
    plain_quality = frame == "plain" and cue.kind == "quality" and not comparative
    return (cue.fault if plain_quality and mode == "comment" else cue.ask), False


def _group(match: re.Match[str], name: str) -> str | None:
    """The first of a pattern's groups ``name``, ``name2``, … that matched."""
    return next((v for k, v in sorted(match.groupdict().items()) if k.startswith(name) and v), None)


def _topic(match: re.Match[str]) -> str | None:
    value = _group(match, "topic")
    words = _W["topic_end"].split(value or "")[0]
    return words.strip(" -'") or None


def asks(text: str) -> bool:
    """Whether ``text`` holds a request, not only a description or a conceded fault."""
    lowered = text.lower().translate(_QUOTES)
    if _W["request_form"].search(" ".join(c for c in _sentences(lowered) if not _concedes(c))):
        return True
    if any(not _conceded(lowered, turn.end()) for turn in _W["contrast_word"].finditer(lowered)):
        return True
    return any(_W["imperative"].search(c.lower()) for s in _sentences(text) for c in clauses(s))


def _conceded(lowered: str, after: int) -> bool:
    """Whether what follows a contrast concedes the fault before it ("but it earns it")."""
    rest = re.split(r"[.!?;]", lowered[after:], maxsplit=1)[0]
    praised = _W["praise"].search(rest) and not _W["criticism"].search(rest)
    return bool(_W["conceded"].search(rest) or praised)


def _concedes(sentence: str) -> bool:
    """A sentence of a fault and a contrast that concedes it, with no request of its own."""
    contrast = _W["contrast_word"].search(sentence)
    if contrast is None or _W["polite"].search(sentence) or _W["imperative"].search(sentence):
        return False
    return _conceded(sentence, contrast.end())


def _outright(clause: str) -> bool:
    """A clause that asks by its form: an imperative, "please", "could you", "I want"."""
    lowered = clause.lower()
    return any(_W[name].search(lowered) for name in ("imperative", "polite", "outright"))


def requests_outright(sentence: str) -> bool:
    """Whether a sentence asks by its form ("should", "next time"), not only describes."""
    if _W["asks_outright"].search(sentence.lower().translate(_QUOTES)):
        return True  # "still a bit long": a wish said before and not yet met
    return any(_outright(c) for c in clauses(sentence) if not _W["keep_whole"].search(c.strip()))


def contrast_at(lowered: str) -> int | None:
    """Where a sentence turns ("but", "though", "yet"…), if it does."""
    turn = _W["contrast_word"].search(lowered)
    return turn.start() if turn else None


def keeps_whole(text: str) -> bool:
    """Whether ``text`` asks to leave the answer as it is and outright for nothing else."""
    parts = [c for s in _sentences(text) for c in clauses(s)]
    keeping = [c for c in parts if _W["keep_whole"].search(c.strip())]
    return bool(keeping) and not any(_outright(c) for c in parts if c not in keeping)


def read(text: str, mode: Mode = "comment") -> Reading:
    """Every wish, praise and criticism in ``text``."""
    text, reading = text or "", Reading()
    sentences = _sentences(text)
    if mode == "instruction":
        for sentence in sentences:
            _read_sentence(sentence, mode, reading)
        _read_languages(text, reading, mode)
        _settle(reading, mode)
        return reading
    before, joined = "", set[int]()
    for index, sentence in enumerate(sentences):
        first = len(reading.wishes)
        if index in joined:
            continue  # read with the sentence before ("No thanks." after its question)
        # "The bulleted list? No thanks. A table.", "Not the bullets. A table.": one unit
        unit = sentences[index : index + 1 + constructions.joins(sentences[index:])]
        if _read_construction(" ".join(unit), reading):
            if len(unit) > 1:
                # what the rejection's sentence also asks, of no rival ("less of the memo
                # voice and the acronyms. It's a Slack message."): the acronyms' fix stands
                placed = {w.family for w in reading.wishes[first:]}
                beside = Reading()
                _read_sentence(sentence, mode, beside)
                reading.wishes += [w for w in beside.wishes if _apart(w.family, placed)]
            _amounts(" ".join(unit), reading, first)
            joined |= set(range(index + 1, index + len(unit)))
            before = sentence
            continue
        following = sentences[index + 1] if index + 1 < len(sentences) else ""
        if _read_answered(sentence, following, reading):
            joined.add(index + 1)
            continue
        _read_sentence(sentence, mode, reading)
        if {"creative", "no_fabrication"} <= {w.family for w in reading.wishes[first:]}:
            # "generic lines that are not from the handbook": unsourced, not dull
            reading.wishes = [w for w in reading.wishes if w.family != "creative"]
        _read_actions(sentence, before, reading, first)
        # "skip the beginner-friendly version": a family named to go, never one asked for
        gone = constructions.removed(sentence)
        reading.wishes[first:] = [
            replace(w, action="remove", asked=False)
            if w.family in gone and w.action == "add"
            else w
            for w in reading.wishes[first:]
        ]
        before = sentence
    _read_whole(text, reading)
    _read_tools(text, reading)
    _read_steps(text, reading)
    _read_languages(text, reading, mode)
    if not (reading.kept or reading.injection):
        _read_other_language(text, reading)
    if reading.language:
        reading.kept += [
            k for s in sentences for c in clauses(s) for k in wish_actions.approvals(c)
        ]
    _settle(reading, mode)
    if keeps_whole(text):
        # "I'm not asking for any changes": what the rest describes is no wish
        reading.wishes = [w for w in reading.wishes if w.action != "add"]
    _unsure(text, reading)
    # rivals left unplaced in one sentence that another sentence places are settled
    placed = {w.family for w in reading.wishes}
    reading.unsure = [
        u for u in reading.unsure if u.why != _UNSETTLED or not placed & set(u.proposed)
    ]
    return reading


def _apart(family: str, placed: set[str]) -> bool:
    return family not in placed and not any(constructions.rivals(family, f) for f in placed)


_QUESTION = "a question: what it asks of the answer is not said"
_UNREAD = "asked for, but in words the rules engine cannot place: pick what you meant"
_UNSETTLED = "names rival forms or registers, but which one is wanted is not clear"


def _read_construction(sentence: str, reading: Reading) -> bool:
    """A sentence naming rival families, read by its constructions' roles; a role it
    cannot settle is said back with a chip for each reading."""
    built = constructions.place(sentence)
    if built is None:
        return False
    if built.unsettled:
        chips = [f"{action}{f}" for action in ("", "remove:") for f in built.unsettled[:2]]
        reading.unsure.append(Unsure(sentence.strip(), _UNSETTLED, tuple(chips)))
        return True
    for placed in built.placed:
        m, rejected = placed.mention, placed.role == "rejected"
        quote = _around(sentence, m.start, m.end)
        wish = Wish(m.family, m.aspect, quote, m.confidence, asked=not rejected)
        # a keep said outright ("keep the table, drop the paragraphs") stays a keep
        (reading.kept if placed.role == "kept" else reading.wishes).append(
            replace(wish, action="remove") if rejected else wish
        )
    if built.left:
        beside = Reading()
        _read_sentence(sentence, "comment", beside)
        reading.wishes += [w for w in beside.wishes if w.family in built.left]
        reading.kept += [k for k in beside.kept if k.family in built.left]
    return True


def _read_answered(question: str, answer: str, reading: Reading) -> bool:
    """ "The bulleted list? No thanks.": what the question names is taken back."""
    rejected = constructions.rejects_by_answer(question, answer)
    quote = f"{question.strip()} {answer.strip()}"
    reading.wishes += [
        Wish(m.family, m.aspect, quote, m.confidence, action="remove") for m in rejected
    ]
    return bool(rejected)


def _amounts(sentence: str, reading: Reading, first: int) -> None:
    """The amounts a sentence gives the wishes just read from it ("half as long")."""
    for index in range(first, len(reading.wishes)):
        wish = reading.wishes[index]
        if wish.amount is None and wish.action != "remove":
            amount = wish_actions.amount_of(sentence, wish.family, wish.detail)
            if amount is not None:
                reading.wishes[index] = replace(wish, amount=amount)


def _unsure(text: str, reading: Reading) -> None:
    """What could not be placed, said back: an unread language, or the questions and requests
    of a comment nothing was read in ("Is this meant for engineers?")."""
    if reading.language and reading.language not in comment_languages.covered():
        # only the language it asks for can be read: offered as a chip, nothing changed
        asked = tuple(f"language:{w.detail.lower()}" for w in reading.wishes if w.detail)
        covered = ", ".join(comment_languages.covered())
        why = f"written in {reading.language}, which the rules engine does not read (it reads "
        why += f"English, {covered}); rephrase, or let the Claude trainer read it"
        reading.wishes = []
        reading.unsure.append(Unsure(text.strip(), why, asked))
        return
    if reading.wishes or reading.kept or reading.injection or reading.refused:
        return  # a question beside what was read is its reason ("Who reads all this? Cut it.")
    for sentence in _sentences(text):
        question = sentence.strip()
        said = asks(question) and not _W["keep_whole"].search(question) and not reading.unsure
        asked = question.endswith("?") and not _W["polite"].search(question.lower())
        if not (asked or said):
            continue
        if any(u.quote.rstrip("?") == question.rstrip("?") for u in reading.unsure):
            continue  # said back already, with what it could not place
        reading.unsure.append(Unsure(question, _QUESTION if asked else _UNREAD))


def praising_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that praise and ask for nothing ("Oh wonderful, very bold.")."""
    return [s for s in _sentences(text) if _W["praise"].search(s.lower()) and not asks(s)]


def _read_actions(sentence: str, before: str, reading: Reading, first: int) -> None:
    """What a sentence does beyond asking: amounts, take-backs ("scrap the example"; "take
    it out" may point at ``before``), a revert or an undo. A situation beside an outright
    request is its reason, not a wish."""
    if any(not w.weak for w in reading.wishes[first:]):
        reading.wishes[first:] = [w for w in reading.wishes[first:] if not w.weak]
    _amounts(sentence, reading, first)
    for taken in wish_actions.takebacks(sentence, before):
        reading.wishes[first:] = [w for w in reading.wishes[first:] if w.family != taken.family]
        reading.kept = [k for k in reading.kept if k.family != taken.family]
        (reading.kept if taken.action == "keep" else reading.wishes).append(taken)
    reverted = _W["revert"].search(sentence)
    if reverted is not None:
        # back to a version, all of it: what else the sentence says is its reason
        version = _group(reverted, "version") or "start"
        reading.wishes[first:] = [w for w in reading.wishes[first:] if w.action != "add"]
        reading.wishes.append(
            Wish("revert", "overall", sentence.strip(), 0.9, detail=version, action="remove")
        )
        return
    if _restores(sentence, reading, first):
        return  # "that example you cut, bring it back": the family, not the whole last change
    if any(w.family in _PARTS and w.action == "add" for w in reading.wishes[first:]):
        _drop_sized(reading, first)  # "add one example, kept brief": the part's size
    undone = wish_actions.undo(sentence)
    if undone is not None:
        reading.wishes[first:] = [w for w in reading.wishes[first:] if w.action != "add"]
        named = _about_family(sentence)
        if named is not None:
            # "forget what I said about the table": that family taken back, at any age
            reading.wishes.append(
                Wish(named, aspect_of(named), undone.quote, undone.confidence, action="remove")
            )
        else:
            reading.wishes.append(replace(undone, aspect=_undone_aspect(sentence, reading)))


def _restores(sentence: str, reading: Reading, first: int) -> bool:
    """Whether the sentence brings back a family it names ("the example you cut, bring it
    back"), asked for again once."""
    named = [w for w in reading.wishes[first:] if w.aspect != "length" and w.action == "add"]
    if not _W["restore"].search(sentence.lower()) or not named:
        return False
    if _drop_sized(reading, first):
        one = wish_actions.amount_of("one example", "example")
        reading.wishes = [
            replace(w, amount=one, asked=True)
            if w in named and w.family == "example" and w.amount is None
            else w
            for w in reading.wishes
        ]
    return True


_PARTS = ("example", "summary_at_end", "key_points")


def _drop_sized(reading: Reading, first: int) -> bool:
    """Drops the lengths just read that size a part ("kept brief"); whether there were any."""
    sized = [
        w for w in reading.wishes[first:]
        if w.aspect == "length" and w.action == "add" and _W["its_size"].search(w.quote.lower())
    ]  # fmt: skip
    reading.wishes = [w for w in reading.wishes if w not in sized]
    return bool(sized)


def _about_family(sentence: str) -> str | None:
    """The one family a "what I said about …" phrase names by its noun ("the table"), if any."""
    if (about := _W["about"].search(sentence.lower())) is None:
        return None
    families = set(wish_actions.families_named(about.group("what")))
    return families.pop() if len(families) == 1 else None


def _undone_aspect(sentence: str, reading: Reading) -> str:
    """What an undo takes back: the one aspect the sentence names beside what it keeps,
    or the whole last change ("overall")."""
    lowered = sentence.lower()
    if about := _W["about"].search(lowered):
        # "forget what I said about the list, but keep …": what it is about decides
        return _one_aspect(about.group("what"))
    return _one_aspect(lowered, {k.aspect for k in reading.kept if k.quote.lower() in lowered})


def _one_aspect(text: str, but: set[str] | None = None) -> str:
    """The one aspect ``text`` names by a cue or a noun (``but`` aside), else "overall"."""
    named = {cue.aspect for cue, _ in _matches(text)}
    named |= {aspect for pattern, aspect in _ASPECT_NOUNS if pattern.search(text)}
    named -= (but or set()) | {"overall"}
    return named.pop() if len(named) == 1 else "overall"


def _read_whole(text: str, reading: Reading) -> None:
    """What only the whole comment settles: a take-back anywhere wins, and an amount in a
    sentence of its own ("Cut it roughly in half.") measures the wish it follows."""
    removals = [w for w in reading.wishes if w.action == "remove"]
    gone = {w.family for w in removals}
    reading.wishes = [w for w in reading.wishes if w.action == "remove" or w.family not in gone]
    # what the words a take-back covers complain of is its reason, answered by the removal
    # ("the headings make it feel like a manual. Get rid of them."); an outright ask stays
    covered = [w.quote.lower() for w in removals if w.family != "undo"]
    reading.wishes = [
        w
        for w in reading.wishes
        if w.action == "remove" or w.asked or not any(w.quote.lower() in c for c in covered)
    ]
    reading.kept = [k for k in reading.kept if k.family not in gone]
    _amounts(text, reading, 0)
    if not any(w.aspect == "length" for w in reading.wishes):
        # a share of the length said alone ("a third of this would do") asks for a shorter one
        share = wish_actions.share_alone(text)
        if share is not None:
            reading.wishes.append(Wish("shorter", "length", share[0], 0.8, amount=share[1]))


def _read_sentence(sentence: str, mode: Mode, reading: Reading) -> None:
    """The wishes, praise and criticism of one sentence."""
    comment, lowered = mode == "comment", sentence.lower()
    literal = _literal(sentence) if comment else None
    if literal == "":
        reading.praised.append(("overall", sentence.strip()))
        return
    if literal:
        # read as the plain complaint, quoted in the reviewer's own words
        plain = read(literal)
        reading.wishes += [replace(w, quote=sentence.strip()) for w in plain.wishes]
        reading.criticised += [(aspect, sentence.strip()) for aspect, _ in plain.criticised]
        if plain.wishes:
            return
    if (
        comment
        and _W["self_blame"].search(lowered)
        and not any(_W["imperative"].search(c) or _W["polite"].search(c) for c in clauses(lowered))
    ):
        return  # "the only thing wrong was my own question": the rater's fault, not its
    if comment and (trade := _trade(sentence)):
        reading.wishes.append(trade)
    praising, polite = comment and _is_praise(sentence), bool(_W["polite"].search(lowered))
    # "Not too long, not too stiff, no made-up numbers.": a list of faults denied
    denying = comment and bool(_W["denial"].search(lowered))
    parts = clauses(sentence)
    damaged: Wish | None = None
    for index, clause in enumerate(parts):
        said = clause.lower()
        if comment and _W["injection"].search(clause):
            reading.injection.append(clause)
            continue
        if comment and off_limits(clause):
            reading.refused.append(clause)  # what the agent may do is not the reviewer's
            continue
        admiring = comment and (
            _spared(parts, index)
            or _admires(parts, index)
            or bool(_W["keep_doing"].match(said) or _W["keep_part"].match(said))
        )
        if damage := _damage(clause) if comment and not admiring else None:
            reading.wishes.append(damage)  # recorded as criticised when settled
            damaged = damage
            continue
        if damaged and _W["damage"].search(said):
            # "ruined by the last step: it cut the caveats": what the step lost, said after
            lost = _W["damaged"].search(said)
            if lost and damaged.detail and damaged.detail.endswith("|"):
                what = _what(lost.group("what"))
                reading.wishes[reading.wishes.index(damaged)] = replace(
                    damaged, detail=damaged.detail + what, quote=f"{damaged.quote} {clause}"
                )
            continue
        _read_clause(_Clause(clause, mode, reading, praising, polite, denying, admiring))


def _literal(sentence: str) -> str | None:
    """The plain complaint an ironic sentence stands for, or None."""
    lowered = sentence.lower().strip()
    for pattern, plain in _IRONIES:
        if match := pattern.search(lowered):
            return plain.format(x=match.groupdict().get("x") or match.groupdict().get("y") or "")
    return None


def _read_other_language(text: str, reading: Reading) -> None:
    """A comment in another language: read by its cue file, or its language named."""
    if not text.strip() or (reading.wishes and not comment_languages.any_cue(text)):
        return  # read in English, and no other language's cue in it: no detector needed
    foreign = comment_languages.read(text)
    if foreign.language is None or (reading.wishes and not foreign.detected):
        return  # English, or English words read while the language is in doubt
    if not foreign.detected and _matches(text.lower()):
        return  # English cue words, refused or denied ("don't make it warmer"): still English
    reading.language = foreign.language
    if foreign.wishes or foreign.detected:
        # English cue words in another language's sentence mislead ("formal demais" is "too
        # formal"): its own cues decide; a language asked for by name still counts
        named = [w for w in reading.wishes if w.family == "language"]
        preferred = [
            w for s in _sentences(text) for w in wish_actions.preferences(s, constructions.rivals)
        ]
        settled = {w.family for w in preferred}
        reading.wishes = named + [w for w in foreign.wishes if w.family not in settled] + preferred


def _attributive(before: str, after: str) -> bool:
    """An adjective before a noun ("generic advice") names a thing, not a fault."""
    return not _W["intensifier_or_copula"].search(before) and not _W["not_a_noun"].match(after)


_matches = constructions.cue_matches


@dataclass(frozen=True)
class _Clause:
    """A clause being read, with what its sentence says about it."""

    text: str
    mode: Mode
    reading: Reading  # what it is read into
    praising: bool = False  # its sentence only praises
    polite: bool = False  # a request by its form ("please")
    denying: bool = False  # its sentence denies a list of faults
    admiring: bool = False  # it approves of what it names

    @cached_property
    def lowered(self) -> str:
        return self.text.lower()

    @cached_property
    def quoted(self) -> list[tuple[int, int]]:  # the spans quoting the answer
        return [q.span() for q in _W["quoted"].finditer(self.lowered)]


def _within(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(s < start and end < e for s, e in spans)


def _read_clause(read: _Clause) -> None:
    clause, lowered, mode, reading = read.text, read.lowered, read.mode, read.reading
    found = False
    previous: tuple[int, Frame] | None = None
    for cue, match in _matches(lowered):
        start, end = match.span()
        word, before = match.group(0), lowered[:start]
        more = bool(
            _W["more_or_less_before"].search(before)
            or (re.fullmatch(r"\w+er", word) and cue.kind != "state")  # not "disclaimer"
            or word.startswith("more ")
        )
        # "even wordier than before": how it is, a complaint; "what 'sound warmer' means":
        # words quoted, not a wish
        grown = _W["grown"].search(before) or _W["than_state"].match(lowered[end:])
        more = more and not (grown or _within(read.quoted, start, end))
        frame = _cue_frame(read, cue, start, end)
        # coordinated words share the first one's frame: "keep it short and simple",
        # "our voice is casual and chatty", "too long and too formal"
        gap = lowered[previous[0] : start] if previous else ""
        if previous and _W["coordinated_gap"].fullmatch(gap):
            frame = previous[1]
        elif previous and previous[1] == "refuse" and _W["or_gap"].fullmatch(gap):
            frame = "refuse"  # "don't make it longer or add more detail": one refusal
        previous = (end, frame)
        less = bool(_W["less_before"].search(before))
        if mode == "comment" and _passed_over(read, cue, match, frame, more or less):
            continue
        purpose = _W["purpose"].search(before) or word.startswith("for ")
        if mode == "comment" and found and cue.kind == "state" and purpose:
            # "a touch stiff for an internal Slack post": the reason for the complaint before it
            continue
        found = _read_cue(read, cue, match, frame, more) or found
    if focus := _focus(clause):
        reading.wishes.append(focus)
        found = True
    if mode == "comment" and not found and not read.praising and (request := _request(clause)):
        if _leans_outside(clause):
            reading.unsure.append(Unsure(clause.strip(), _LEANING))
        else:
            reading.wishes.append(Wish("custom", "content", clause, 0.6, detail=request))
        return
    if mode == "comment" and not found:
        _read_sentiment(clause, reading)


def _cue_frame(read: _Clause, cue: Cue, start: int, end: int) -> Frame:
    """The frame of a cue's words, as the clause around them settles it."""
    lowered = read.lowered
    before = lowered[:start]
    if cue.kind == "state":  # "put a little summary at the end": its size, no description
        before = _W["small_one"].sub(" a ", before)
    frame = _frame(before, lowered[end:])
    if cue.kind == "state" and _W["lack_words"].match(lowered[start:end]) and frame != "denied":
        frame = "lacking"  # the cue's own words say it is missing: "(still) no recap"
    if read.denying and frame == "refuse" and re.fullmatch(r"\s*no\s+", lowered[:start]):
        frame = "denied"
    if _within(read.quoted, start, end):  # the answer's words quoted: what it did, no request
        frame = "denied" if cue.fixed and cue.kind != "fault" else "describe"
    elif read.polite and frame in ("plain", "quantity"):
        frame = "ask"  # "A professional register, please.", "just one example, please"
    elif (
        frame == "plain"
        and cue.kind == "state"
        and not read.admiring
        and _W["described_part"].search(lowered[:start])
        and _W["said_of_it"].match(lowered[end:])
    ):
        frame = "describe"  # "the examples are all American": the part there, described
    return frame


def _passed_over(read: _Clause, cue: Cue, match: re.Match[str], frame: Frame, more: bool) -> bool:
    """Whether a cue names no wish: a part's size, an attribute, a denied fault (praise)."""
    start, end = match.span()
    before, after, praised = read.lowered[:start], read.lowered[end:], read.reading.praised
    if cue.sizes_parts and _W["part"].match(after):
        return True  # "a short closing line": the size of a part asked for, not of the answer
    if cue.kind == "state" and _W["goes_to"].match(after):
        return True  # "this paragraph gets pasted into a form": where it goes, not its form
    if cue.aspect == "length" and _W["of_words"].search(before):
        return True  # "words longer than two syllables": the words' length, not the answer's
    if cue.kind == "quality" and not more:
        # "generic taglines" is still a complaint (nobody asks for generic), "a short
        # summary" is not
        attributive = (
            cue.ask is not None
            and not read.polite
            and frame in ("plain", "describe", "ask")
            and not _W["ask_verb"].search(before)
            and _attributive(before, after)
        )
        if attributive or (read.praising and frame in ("plain", "describe")):
            if read.praising:
                praised.append((cue.aspect, read.text[start:end]))
            return True
    denied = (_W["described_not"].search(before) and not _W["enough_after"].match(after)) or (
        _W["at_all"].match(after) and re.search(r"\b(?:not|n't|never)\b", before)
    )
    if cue.kind in ("fault", "quality") and not more and denied:
        # "it doesn't ramble", "not long-winded at all": a fault denied is praise
        praised.append((cue.aspect, read.text))
        return True
    return False


def _read_cue(read: _Clause, cue: Cue, match: re.Match[str], frame: Frame, more: bool) -> bool:
    """The wish (or the kept family) a cue's words carry in their frame; whether there is one.
    ``more``: a comparative ("warmer", "more formal")."""
    start, end = match.span()
    before, comment, reading = read.lowered[:start], read.mode == "comment", read.reading
    quote = _around(read.text, start, end)
    if _W["less_before"].search(before):
        # "less hedging": the cue's fault, or the opposite of what the cue asks for; "less
        # warmth", with neither, softens what asks for it (a take-back in the cycle step)
        family, weak = cue.fault or opposite_of(cue.ask or ""), False
        if family is None and cue.ask and comment:
            less_of = Wish(cue.ask, cue.aspect, quote, cue.confidence, action="less", asked=True)
            reading.wishes.append(less_of)
            return True
    else:
        change = more or bool(_W["change_verb"].match(match.group(0)))
        family, weak = _wish_of(cue, frame, read.mode, more, change)
    if family is None:
        if frame == "lacking" and cue.kind == "fault":
            reading.praised.append((cue.aspect, read.text[start:end]))
        return False
    detail = _group(match, "limit") or _topic(match)
    if detail and family == "longer" and _W["format_word"].match(detail):
        return True  # "more on the table": a form named, no topic to go deeper on
    if cue.kind == "state" and cue.ask and _W["makes_it"].match(read.lowered[end:]):
        # "the numbered list makes it read like a form": the part is the problem, take it out
        reading.wishes.append(Wish(cue.ask, cue.aspect, quote, cue.confidence, action="remove"))
        return True
    if comment and _said_of_another_aspect(cue, before):
        # "the tone is wrong": a general fault word said of an aspect it does not name
        reading.unsure.append(Unsure(read.text.strip(), _OTHER_ASPECT))
        return True
    one_part = _W["one_part"].search(before) and not match.group(0).endswith("s")
    if comment and frame in ("refuse", "describe") and cue.kind == "state" and one_part:
        # "I don't need the 'what is a firewall' paragraph": one part of it, not the form
        reading.criticised.append((cue.aspect, read.text))
        return True
    if comment and cue.kind != "fault" and _negation_unplaced(before, frame):
        reading.unsure.append(Unsure(read.text.strip(), _NEGATION_UNPLACED))
        return True
    praised = read.praising and cue.kind == "state" and frame in ("plain", "describe")
    ironic = read.admiring and cue.fixed and cue.kind == "fault"  # "love how it invented …"
    admired = read.admiring and not ironic and not _W["better_after"].match(read.lowered[end:])
    if admired or (praised and not _outright(read.text)):
        # "Shorter, good", "bullets are great", "skimmable now, a clear improvement": the
        # change worked; keep it (but "casual is better" asks for a kind)
        kept = cue.ask if cue.ask and family == cue.fault and cue.kind != "fault" else family
        reading.kept.append(Wish(kept, cue.aspect, read.text, cue.confidence))
        return True
    described = (cue.kind == "quality" and frame in ("describe", "plain") and not more) or (
        cue.kind == "state" and frame == "quantity"
    )
    asked = frame == "ask" and not _W["caused"].search(before)
    instead = cue.kind == "state" and frame == "refuse"
    wish = Wish(family, cue.aspect, quote, cue.confidence, detail, weak or cue.weak, asked=asked)
    reading.wishes.append(replace(wish, instead=instead, described=described))
    return True


_OTHER_ASPECT = "a fault said of another part of the answer: which change it asks for is not said"


def _said_of_another_aspect(cue: Cue, before: str) -> bool:
    """Whether a fault cue is said of another aspect's noun ("the tone is wrong")."""
    if cue.kind != "fault" or cue.aspect != "accuracy" or re.search(r"\ban?\s+$", before):
        return False  # "the numbering was a mistake" judges a change, not a fact
    if (said_of := _W["general_fault_of"].search(before)) is None:
        return False
    noun = said_of.group("noun")
    named = {aspect for pattern, aspect in _ASPECT_NOUNS if pattern.fullmatch(noun)}
    return bool(named) and cue.aspect not in named


_NEGATION_UNPLACED = "a negation it cannot place: what is refused is not clear"


def _negation_unplaced(before: str, frame: Frame) -> bool:
    """A negation before a cue that did not set its frame ("don't pad it out with
    caveats"): which way the wish goes is not certain."""
    if _W["never_met"].search(before):
        return True  # "they have never used a spreadsheet": what they know, not what they want
    if frame not in ("ask", "plain"):
        return False  # "shouldn't read like a contract" complains as "reads like a contract" does
    before = re.split(r"\b(?:and|or|but)\b|,", before)[-1]  # a negation of the cue's own phrase
    before = re.sub(r"\bwhy not\b|\bnot (?:only|just)\b|\b(?:is|are|was|were)n't in\b", "", before)
    return bool(_W["negation"].search(before) or (frame == "ask" and _W["nobody"].search(before)))


def _sentences(text: str) -> list[str]:
    """The sentences of ``text``; a quotation stays whole."""
    return [s for s in _split(text, ".!?", _W["sentence"]) if s.strip()]


sentences = _sentences


def _is_praise(sentence: str) -> bool:
    """A sentence that only praises: the qualities it names are liked, not faults."""
    lowered = sentence.lower()
    faulted = _W["contrast"].search(lowered) or _W["criticism"].search(lowered)
    return bool(_W["praise"].search(lowered)) and not faulted


def _spared(parts: list[str], index: int) -> bool:
    """Whether clause ``index`` spares a part from the cut before it ("not the caveats")."""
    return (
        index > 0
        and bool(_W["not_that"].match(parts[index].lower()))
        and bool(_W["cutting"].match(parts[index - 1].lower()))
    )


MAX_ADMIRED_WORDS = 3


def _admires(parts: list[str], index: int) -> bool:
    """Whether clause ``index`` approves of what it names ("Bullets are great", "Shorter,
    good"); never with a request, complaint or negation in it."""
    clause = parts[index].lower()
    if _W["not_admiring"].search(clause) or _W["criticism"].search(clause):
        return False
    if _W["admire"].search(clause):
        return True
    if len(clause.split()) > MAX_ADMIRED_WORDS:
        return False
    neighbours = [parts[i].lower() for i in (index - 1, index + 1) if 0 <= i < len(parts)]
    return any(
        _W["admire"].search(n)
        and len(n.split()) <= MAX_ADMIRED_WORDS
        and not _W["not_admiring"].search(n)
        for n in neighbours
    )


QUOTE_MARGIN = 12


def _around(clause: str, start: int, end: int) -> str:
    """The cue's words with a little of the clause either side, cut at word boundaries."""
    left = max(0, start - QUOTE_MARGIN)
    while left > 0 and clause[left - 1].isalnum():
        left -= 1
    right = min(len(clause), end + QUOTE_MARGIN)
    while right < len(clause) and clause[right].isalnum():
        right += 1
    return clause[left:right].strip()


def _trade(sentence: str) -> Wish | None:
    """Less of one thing for more of another: a change of focus, not a longer answer."""
    if not (trade := _W["trade"].search(sentence.lower())):
        return None
    on, off = (
        re.sub(r"\s+please$", "", (trade.group(a) or trade.group(b) or "").strip(" .,;!"))
        for a, b in (("on", "on2"), ("off", "off2"))
    )
    if not on or not off or any(_W["format_word"].match(t) for t in (on, off)):
        return None
    return Wish("focus", "focus", sentence.strip(), 0.85, detail=f"on:{on}|off:{off}")


def _focus(clause: str) -> Wish | None:
    lowered = clause.lower()
    want, avoid = _W["focus"].search(lowered), _W["avoid"].search(lowered)
    topic = _topic(want) if want else None
    if topic and _W["amount_topic"].match(topic):
        topic, want = None, None  # "keep it to half a page": a length, read as one
    avoided = _topic(avoid) if avoid else None
    if not want and not avoid:
        return None
    detail = "|".join(f"{k}:{v}" for k, v in (("on", topic), ("off", avoided)) if v)
    return Wish("focus", "focus", clause, 0.85, detail=detail or None)


MAX_REQUEST_WORDS = 20


def off_limits(text: str) -> bool:
    """Whether a request is about the agent's tools, permissions or system: never applied."""
    return bool(_W["off_limits"].search(text))


def _request(clause: str) -> str | None:
    """A short clear request no family covers, as an instruction: "Could you mention the
    deadline?" → "Mention the deadline." """
    text = clause.strip().rstrip(".!?")
    words = text.split()
    if not words or len(words) > MAX_REQUEST_WORDS or _W["praise"].search(text.lower()):
        return None
    never = bool(re.match(r"never (?!mind\b)", text.lower()))  # not "never mind"
    if never and len(words) >= 3:
        return "Never " + third_person(" ".join(words[1:])) + "."
    match = _W["request"].match(text)
    if match:
        verb = match.group("verb").lower()
        if verb == "keep" and _W["keep_as_is"].match(match.group("rest")):
            return None  # "Keep this.": approval, not an instruction
        rest = third_person(match.group("rest")).strip()
        body = f"{verb} {rest}".strip() if rest else None
        if not body or len(body.split()) < 2:
            return None
        return ("Never " if never else "") + body[0].upper() + body[1:] + "."
    wish = _W["wish_for"].match(text)
    if wish:
        thing = third_person(wish.group("rest") or wish.group("rest2"))
        return f"Include {thing[0].lower()}{thing[1:]}."
    return None


_LEANING = "a request that leans on words outside it: what it asks for is not said"


def _leans_outside(request: str) -> bool:
    lowered = request.lower()
    unbalanced = lowered.count("(") != lowered.count(")") or lowered.count('"') % 2
    return bool(unbalanced or _W["leans"].search(lowered))


def _read_sentiment(clause: str, reading: Reading) -> None:
    lowered = clause.lower()
    aspect = next((a for p, a in _ASPECT_NOUNS if p.search(lowered)), "overall")
    criticism = _W["criticism"].search(lowered) or _W["negated_praise"].search(lowered)
    if criticism and not _W["not_bad"].search(lowered):
        reading.criticised.append((aspect, clause))
    elif _W["praise"].search(lowered):
        reading.praised.append((aspect, clause))


def _first_after(lowered: str, mention: re.Match[str]) -> bool:
    """ "search the handbook first": a tool asked for before answering, right after its name."""
    first = _W["first"].search(lowered, mention.end(), mention.end() + 25)
    return bool(first) and not re.search(r"[,.;:]", lowered[mention.end() : first.start()])


def _read_tools(text: str, reading: Reading) -> None:
    """More or less use of a tool ("it looked things up five times", "use the calculator")."""
    lowered = text.lower()
    mention = _W["repeated"].search(lowered) or _W["tool"].search(lowered)
    over, under = _W["overuse"].search(lowered), _W["underuse"].search(lowered)
    praised = any(mention and mention[0] in p.lower() for p in praising_sentences(text))
    if not mention or praised or not (over or under or _first_after(lowered, mention)):
        return  # ("it searched the handbook first, good": praise of the order)
    # of the two at one place, the refusal: "never call it" (but "it never called it")
    direction = "less" if over and (not under or over.start() <= under.start()) else "more"
    name = _W["tool_suffix"].sub("", mention.group("tool"))
    if _W["searching"].match(name) or name in _TOOLS["documents"]:
        name = "search"
    # sums said of its use, not the tool's own name ("the calculator")
    unnamed = lowered[: mention.start()] + lowered[mention.end() :]
    context = ["arithmetic"] if _W["arithmetic"].search(unnamed) else []
    if direction == "less" and not context and _W["never_call"].search(lowered):
        context.append("never")  # not only when: whether the step may call it at all
    if direction == "more" and (_first_after(lowered, mention) or _W["first"].search(lowered)):
        context.append("first")  # called before the answer is written
    if nth := _W["called_nth"].search(lowered):
        context.append(f"call:{_TOOLS['ordinals'].get(nth['nth'], nth['nth'])}")  # "call:2"
    detail = f"{name}|{direction}|{'+'.join(context)}"
    quote = text[mention.start() : mention.end()]
    reading.wishes.append(Wish("tool_use", "tool_use", quote, 0.85, detail=detail))


def _read_steps(text: str, reading: Reading) -> None:
    """A flow step the comment names: taken out ("drop the polish step"), to be given an
    earlier step's output, or the step its wishes are aimed at ("in the research step, …");
    checked in ``trainer/tool_flow.py``."""
    lowered = text.lower()
    fed, aimed = _W["step_fed"].search(lowered), _W["step_aimed"].search(lowered)
    gone = _W["step_removed"].search(lowered)  # "drop the polish step": out of the flow
    if gone and not _W["generic_step"].match(step := _group(gone, "step") or ""):
        want, match = f"step:remove:{step}", gone
    elif fed and not _W["generic_step"].match(fed.group("step")):
        source = "input" if fed.group("question") else fed.group("source")
        want = f"step:input:{fed.group('step')}+={source}"
        # the step is there already: not a wish for a new checking step
        reading.wishes = [w for w in reading.wishes if w.family != "check_step"]
        match = fed
    elif aimed and not _W["generic_step"].match(step := _group(aimed, "step") or ""):
        want, match = f"step:prompt:{step}", aimed
    else:
        return
    quote = _around(text, match.start(), match.end())
    reading.wishes.append(Wish("step", "flow", quote, 0.85, detail=want))


def _read_languages(text: str, reading: Reading, mode: Mode) -> None:
    wanted = languages.wanted_language(text)
    if wanted and mode == "comment" and 2 * len(re.findall("[A-Za-z]", text)) < len(text):
        reading.language = wanted  # "回答は日本語で…": a comment in a script of its own
    if wanted:
        # "end with a wrap-up in Spanish": asked of the closing summary only
        said = [
            c if len(c.split()) > 3 else s  # "…still in English, not Spanish": the sentence
            for s in _sentences(text)
            for c in clauses(s)
            if wanted.lower() in c.lower()
        ]
        summary = mode == "comment" and said and _W["summary_part"].search(said[-1].lower())
        part = "summary" if summary else None  # (an instruction says its part in its words)
        reading.wishes.append(
            Wish("language", "language", wanted, 0.9, detail=scoped(wanted, part))
        )
        return
    cannot = languages.unreadable_language(text)
    if cannot is None:
        return
    # readers who cannot read the answer's language, and where it goes: that place's language
    quote = next((s.strip() for s in _sentences(text) if cannot.lower() in s.lower()), text)
    place = places.destination(text)
    others = [lang for lang in (place.languages if place else ()) if lang != cannot]
    if place and len(others) == 1:
        reading.wishes.append(Wish("language", "language", quote, 0.85, detail=others[0]))
        return
    why = f"its readers do not read {cannot}, but which language they read is not said"
    if place and others:
        spoken = " or ".join(others)
        why = f"its readers do not read {cannot}; {place.name} reads {spoken}: which is not said"
    reading.unsure.append(Unsure(quote, why))


def _settle(reading: Reading, mode: Mode) -> None:
    """One wish a family: a weak wish yields to an explicit one, of two opposites the last
    stands or both are said back, and a focus's topic is no wish for length."""
    # a request no family covers is a fallback: only when nothing else was read, and never in
    # feedback that spoke to the trainer
    if reading.injection or any(w.family != "custom" for w in reading.wishes):
        reading.wishes = [w for w in reading.wishes if w.family != "custom"]
        # and so is one that could not stand alone: what else was read is what it pointed at
        reading.unsure = [u for u in reading.unsure if u.why != _LEANING]
    focus = "|".join(w.detail or "" for w in reading.wishes if w.family == "focus")
    focused = tuple(re.findall(r"(?:^|\|)on:([^|]*)", focus))
    reading.wishes = [
        w
        for w in reading.wishes
        if not (w.family == "longer" and w.detail and w.detail.startswith(focused))
    ]
    # a take-back is said outright: it stands apart from the wishes it might contradict
    removed = {w.family: w for w in reading.wishes if w.action == "remove"}
    reading.wishes = [w for w in reading.wishes if w.family not in removed]
    reading.criticised += [(w.aspect, w.quote) for w in removed.values()]
    # a form refused asks for its opposite only when no other form is asked for beside it
    # ("use a table, don't write paragraphs" wants the table, not bullets)
    named = {w.aspect for w in reading.wishes if not w.instead}
    reading.wishes = [w for w in reading.wishes if not (w.instead and w.aspect in named)]
    strong = {(w.aspect, w.family) for w in reading.wishes if not w.weak}
    kept: dict[str, Wish] = {}
    for wish in reading.wishes:
        if wish.weak and any(wish.aspect == a or wish.family == f for a, f in strong):
            continue
        reading.criticised.append((wish.aspect, wish.quote))
        # every family this one contradicts yields to it ("the table is cramped; prose again");
        # but a wish and its very opposite in one comment ("shorter, but cover the risks in
        # more depth", "more confident, and say where you're unsure") leave which is meant
        # unclear: neither stands
        against = [
            kept[c]
            for c in contrary_of(wish.family) | {opposite_of(wish.family) or ""}
            if c in kept
        ]
        if mode == "comment" and any(
            (o.weak, o.described) < (wish.weak, wish.described) for o in against
        ):
            # a situation's hint, or a quality merely named ("Concise, zero padding"), yields
            # to what is said outright, in any order
            continue
        torn = [
            o
            for o in against
            if mode == "comment" and o.family == opposite_of(wish.family)
            and o.aspect != "format" and (o.weak, o.described) == (wish.weak, wish.described)
        ]  # fmt: skip
        for other in against:
            kept.pop(other.family)
        if torn:
            families = tuple(dict.fromkeys([*(o.family for o in torn), wish.family]))
            quote = " … ".join(dict.fromkeys([*(o.quote for o in torn), wish.quote]))
            why = f"asks for both {' and '.join(families)}: which one is meant is not clear"
            reading.unsure.append(Unsure(quote, why, families))
            continue
        old = kept.get(wish.family)
        if old is not None and wish.family == "focus" and old.detail and wish.detail:
            wish = Wish(
                "focus", "focus", old.quote, old.confidence, detail=f"{old.detail}|{wish.detail}"
            )
        elif old is not None and (old.detail or not wish.detail):
            continue
        kept[wish.family] = wish
    reading.wishes = list(kept.values()) + list(removed.values())
    reading.kept = [k for k in reading.kept if k.family not in removed]
    # what is asked for overrides what a concession approved ("Great for experts; our readers
    # are not experts" keeps nothing of the expert pitch)
    against = {c for w in reading.wishes for c in contrary_of(w.family) | {opposite_of(w.family)}}
    said = [k for k in reading.kept if _W["keep_said"].search(k.quote.lower())]
    reading.kept = [k for k in reading.kept if k.family not in against or k in said]
