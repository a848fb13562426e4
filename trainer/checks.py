"""Wishes as checks: every wish family with a measurable form, checked on an output.

Each check is a pure function of an output (parsed once, as Markdown) and an active wish with
its amount (``domain.checks.ActiveWish``); it answers pass or fail with what it measured
(``domain.checks.CheckResult``). ``check`` checks one wish, ``check_all`` a lineage's wishes.

What is measured, and how:

- **length** (``shorter``, ``longer``): words of the text a reader reads, Markdown markup
  ignored (table pipes and rules, bullets, numbers of a list, heading marks, emphasis, fences):
  markdown-it parses the output and only its text and code count; a token is a word when it has
  a letter or a digit. An amount said approximately ("about 90 words") passes within ±15 %; a
  plain number ("under 150 words", "150 words max") is a hard limit; a share ("about half") is
  made absolute against the output it was asked on, ±15 %; a count of sentences or paragraphs
  is a most; with no amount, ``shorter`` passes when the output is shorter than the output the
  wish was made on (``longer``: longer).
- **form** (``table``, ``bullets``, ``numbered``, ``headings``, ``code_block``): present, or
  absent for a wish that removes it; a count of bullets is the number of items. ``prose``:
  neither lists nor tables.
- **language**: the language detector the reader already uses (lingua, over the same
  languages), on the output's text.
- **summary at the end** (heuristic): the last block of text opens with a summary cue
  ("Summary", "In short", "Overall", "To sum up"…), or sits under a heading that names one.
- **recommendation first** (heuristic): the first sentence of the first block of text (headings
  skipped) holds a recommending cue ("recommend", "should", "go with", "Recommendation:"…).
- **examples**: how many example cues ("for example", "for instance", "e.g."…) the text has,
  against the count asked for (at least one when none is said; none for a removal).
- **no hedging** (``direct``): no hedge phrase ("the evidence is mixed", "perhaps"…).
- **banned phrases** (``banned``): a phrase the reviewer quoted to ban ("no 'worth noting'")
  does not occur, case and spacing aside.

The cue words are data (``trainer/check_cues.json``). Families with no measurable form (tone,
audience, sources, accuracy, focus, tools…) have no measure: a wish of one is listed on every
output as "not checked" with why (``UNCHECKABLE``), never a pass or a fail.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from lingua import Language, LanguageDetectorBuilder
from textstat.textstat import textstatistics

from domain import want_labels
from domain.answer_parts import part_words, unscoped
from domain.change_families import aspect_of
from domain.checks import MAX_CHECK_TEXT_CHARS, ActiveWish, CheckResult
from domain.trainer import FeedbackAspect
from domain.words import count_words, inline_text, markdown
from trainer.reading import comment_languages

CUES_FILE = Path(__file__).parent / "check_cues.json"
TIMES = "\u00d7"
TOLERANCE = 0.15  # an approximate amount passes within ±15 %
LANGUAGE_SAMPLE_CHARS = 1_000  # the detector reads this much of the text: enough, and fast
FIRST_SENTENCE_CHARS = 2_000  # the recommendation is looked for in this much of the first block
FORMS = {
    "table": ("a table", "no table"),
    "bullets": ("bullets", "no bullets"),
    "numbered": ("numbered steps", "no numbered list"),
    "headings": ("headings", "no headings"),
    "code_block": ("a code block", "no code block"),
}
# Why a family has no check: what it asks for is a judgement no count settles. A wish of one
# stays active and is said on every output as "not checked: <the wish> (<why>)"
UNCHECKABLE = {
    "casual": "tone has no measurable form",
    "formal": "tone has no measurable form",
    "warmer": "tone has no measurable form",
    "hedge": "saying where it is unsure is a judgement, not a count",
    "cite_sources": "whether claims carry sources needs the sources",
    "no_fabrication": "whether a claim is invented needs the facts",
    "proofread": "spelling and grammar need a proofreader",
    "technical": "how expert the register is is a judgement",
    "steadier": "staying on topic is a judgement",
    "creative": "freshness is a judgement",
    "check_step": "a checking pass happens before the output, not in it",
    "focus": "the topic is a judgement",
    "preserve": "what later steps keep needs the earlier steps",
    "key_points": "which points are key is a judgement",
    "tool_use": "tool use is in the trace, not the output",
    "custom": "a free-form request has no fixed measure",
}
_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


# ---- the output, parsed once ------------------------------------------------------------------


@dataclass
class Block:
    kind: str  # heading, paragraph, item (of a list), cell (of a table), code
    text: str
    under: str = ""  # the text of the heading it sits under
    lines: int = 1  # the lines it is written on (its line breaks, plus one)


@dataclass
class Document:
    """What the checks measure of an output: its text without markup, block by block."""

    text: str
    blocks: list[Block] = field(default_factory=list)
    words: int = 0
    tables: int = 0
    bullet_items: int = 0
    numbered_items: int = 0
    headings: int = 0
    code_blocks: int = 0

    @classmethod
    def of(cls, output: str) -> Document:
        doc = cls(text=output)
        kinds: list[str] = []  # the enclosing blocks, innermost last
        heading, opener = "", ""
        for token in markdown().parse(output):
            kind = token.type
            if kind == "table_open":
                doc.tables += 1
            elif kind in ("bullet_list_open", "ordered_list_open"):
                kinds.append(kind)
            elif kind in ("bullet_list_close", "ordered_list_close"):
                kinds.pop()
            elif kind == "list_item_open":
                if kinds and kinds[-1] == "ordered_list_open":
                    doc.numbered_items += 1
                else:
                    doc.bullet_items += 1
            elif kind == "heading_open":
                doc.headings += 1
            elif kind in ("fence", "code_block"):
                doc.code_blocks += 1
                doc.blocks.append(Block("code", token.content, heading))
            elif kind == "inline":
                text = inline_text(token)
                block = _OPENED.get(opener) or ("item" if kinds else "paragraph")
                if block == "heading":
                    heading = text
                breaks = sum(c.type in ("softbreak", "hardbreak") for c in token.children or [])
                doc.blocks.append(Block(block, text, heading, lines=breaks + 1))
            opener = kind
        doc.words = sum(count_words(b.text) for b in doc.blocks)
        return doc

    @property
    def prose(self) -> list[Block]:
        """Blocks of running text (paragraphs and list items), in order."""
        return [b for b in self.blocks if b.kind in ("paragraph", "item", "cell") and b.text]

    def plain(self) -> str:
        return "\n".join(b.text for b in self.blocks)

    @cached_property
    def lowered(self) -> str:
        """The text lowercased, as the cue patterns read it."""
        return self.plain().lower()


# where an inline token sits, from the token that opens it (markdown-it's tokens are flat)
_OPENED = {"heading_open": "heading", "th_open": "cell", "td_open": "cell"}

# ---- cues (data) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cues:
    approximate: re.Pattern[str]
    recommendation: re.Pattern[str]
    summary: re.Pattern[str]
    example: re.Pattern[str]
    hedges: re.Pattern[str]
    ban: re.Pattern[str]
    # a one-line example of the wanted form, by family (trainer/check_levers.py)
    form_examples: dict[str, str]


@lru_cache(maxsize=1)
def cues() -> Cues:
    data = json.loads(CUES_FILE.read_text(encoding="utf-8"))
    missing = {"approximate", "recommendation", "summary", "example", "hedges", "ban_frames"} - set(
        data
    )
    if missing:
        raise ValueError(f"{CUES_FILE}: missing {sorted(missing)}")
    opening, closing = "[\"'\u201c\u2018]", "[\"'\u201d\u2019]"
    return Cues(
        approximate=_phrases(data["approximate"]),
        recommendation=_phrases(data["recommendation"]),
        summary=_phrases(data["summary"]),
        example=_phrases(data["example"]),
        hedges=_phrases(data["hedges"]),
        ban=re.compile(
            rf"(?<![\w'\u2019])(?:{_alternation(data['ban_frames'])})\s+(?:more\s+)?"
            rf"(?:(?:the|that|this|any)\s+)?(?:(?:phrase|phrases|words?|expression|line|saying)"
            rf"\s+)?(?:of\s+)?{opening}(?P<phrase>[^\"'\u201d\u2019]{{2,60}}?){closing}",
            re.I,
        ),
        form_examples={
            family: line
            for family, line in data.get("form_examples", {}).items()
            if family != "comment"
        },
    )


def _alternation(phrases: list[str]) -> str:
    return "|".join(re.escape(p) for p in sorted(phrases, key=len, reverse=True))


def _phrases(phrases: list[str]) -> re.Pattern[str]:
    """A cue list as one pattern over lowercased text: literal phrases between non-word
    characters, so a start costs at most the longest phrase (linear in the text); matched
    without ``re.I``, which is five times slower over a megabyte of output."""
    return re.compile(rf"(?<![\w])(?:{_alternation([p.lower() for p in phrases])})(?![\w])")


def banned_phrases(comment: str | None) -> list[str]:
    """The phrases a comment quotes to ban ("no 'worth noting'", "stop saying "to be fair""),
    as written (a check matches them in any case), each once, in order."""
    if not comment:
        return []
    found = [" ".join(m.group("phrase").split()) for m in cues().ban.finditer(comment)]
    return list({p.lower(): p for p in reversed(found) if p}.values())[::-1]


# ---- the checks -------------------------------------------------------------------------------


def check_all(output: str, wishes: list[ActiveWish]) -> list[CheckResult]:
    """Every checkable wish checked on ``output`` (parsed once), in the wishes' order."""
    if not wishes:
        return []
    doc = Document.of(output)
    aside = _scoped_parts(wishes)
    return [r for w in wishes if (r := check(doc, w, aside)) is not None]


def _scoped_parts(wishes: list[ActiveWish]) -> frozenset[str]:
    """The parts a language of their own is asked of: the whole answer's language is measured
    without them ("in Norwegian, with a German summary")."""
    return frozenset(
        part
        for w in wishes
        if w.family == "language" and w.action != "remove" and (part := unscoped(w.detail)[1])
    )


@dataclass(frozen=True)
class Measured:
    """What an output measured: its words (Markdown markup not counted) and its checks."""

    words: int
    checks: list[CheckResult]


def measure(output: str, wishes: list[ActiveWish]) -> Measured:
    """``output`` parsed once, its words counted and every checkable wish checked. Linear in
    the output; run within a time budget, off the event loop (``trainer/measure_budget.py``)."""
    doc = Document.of(output)
    aside = _scoped_parts(wishes)
    return Measured(doc.words, [r for w in wishes if (r := check(doc, w, aside)) is not None])


def warm() -> None:
    """Load what the checks read (the parser, the cues, the language detector) once."""
    markdown()
    cues()
    _detector()
    for language in READABILITY:
        _readability(language)


def check(
    output: str | Document, wish: ActiveWish, aside: frozenset[str] = frozenset()
) -> CheckResult | None:
    """One wish checked on one output; None for a wish with no measurable form (``UNCHECKABLE``
    says why) or an amount the check cannot measure. ``aside``: the parts another wish asks a
    language of, which the whole answer's language is measured without."""
    doc = output if isinstance(output, Document) else Document.of(output)
    family = wish.family
    if wish.action == "less":
        return None  # softened: no longer a firm wish with a measure
    if family in ("shorter", "longer"):
        return _length(doc, wish) if wish.action != "remove" else None
    if family in FORMS:
        return _form(doc, wish)
    if family == "prose":
        return _prose(doc, wish)
    if family == "language":
        return _language(doc, wish, aside)
    if family == "summary_at_end":
        return _summary(doc, wish)
    if family == "conclusion_first":
        return _recommendation(doc, wish)
    if family == "example":
        return _examples(doc, wish)
    if family == "direct":
        return _hedging(doc, wish)
    if family == "banned":
        return _banned(doc, wish)
    if family == "simpler":
        return _plain(doc, wish)
    if family in UNCHECKABLE and wish.action != "remove":
        return unmeasured(wish)
    return None


def checkable(wish: ActiveWish) -> bool:
    """Whether the wish has a measure (a wish of an ``UNCHECKABLE`` family is listed only)."""
    return wish.family in CHECKED and wish.action != "less"


def unmeasured(wish: ActiveWish) -> CheckResult:
    """A wish no count settles, as every output lists it: "not checked: warmer (tone has no
    measurable form)", in the chips' words, never a pass or a fail."""
    said = want_labels.wish_words(
        FeedbackAspect(
            aspect=aspect_of(wish.family),
            sentiment="negative",
            confidence=1.0,
            want=wish.family,
            detail=wish.detail,
            amount=wish.amount,
        )
    )
    return _result(wish, said, False, UNCHECKABLE.get(wish.family, ""), checked=False)


CHECKED = frozenset(
    {"shorter", "longer", *FORMS, "prose", "language", "summary_at_end", "conclusion_first"}
    | {"example", "direct", "banned", "simpler"}
)


def _result(
    wish: ActiveWish,
    said: str,
    passed: bool,
    measure: str = "",
    shortfall: str | None = None,
    **rest: object,
) -> CheckResult:
    """A check's result, every text cut to its bound (it crosses Temporal)."""
    return CheckResult(
        family=wish.family,
        wish=_cut(said),
        passed=passed,
        measure=_cut(measure),
        shortfall=_cut(shortfall) if shortfall else None,
        cycle=wish.cycle,
        **rest,  # type: ignore[arg-type]
    )


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CHECK_TEXT_CHARS else text[: MAX_CHECK_TEXT_CHARS - 1] + "…"


def _length(doc: Document, wish: ActiveWish) -> CheckResult | None:
    words = doc.words
    amount = wish.amount
    if amount is not None and amount.kind == "count" and amount.unit in ("sentences", "paragraphs"):
        counted = _sentences(doc) if amount.unit == "sentences" else len(doc.prose)
        limit = int(amount.value)
        return _result(
            wish,
            f"at most {amount.says()}",
            counted <= limit,
            str(counted),
            value=counted,
            target=limit,
            shortfall=None if counted <= limit else f"{counted - limit} {amount.unit} too many",
        )
    target = amount.target_words() if amount is not None else None
    if target is not None and amount is not None:
        approximate = amount.kind == "share" or _approximate(wish.quote, target)
        if approximate:
            # whole words: 90 ± 15 % is 77 to 103
            low = math.ceil(round(target * (1 - TOLERANCE), 6))
            high = math.floor(round(target * (1 + TOLERANCE), 6))
            passed = low <= words <= high
            off = words - target
            return _result(
                wish,
                f"about {target} words",
                passed,
                str(words),
                value=words,
                target=target,
                shortfall=None
                if passed
                else f"{abs(off)} words {'over' if off > 0 else 'under'} (±15 % is "
                f"{low} to {high} words)",
            )
        return _result(
            wish,
            f"at most {target} words",
            words <= target,
            str(words),
            value=words,
            target=target,
            shortfall=None if words <= target else f"{words - target} words over the limit",
        )
    if wish.made_on_words:
        before = wish.made_on_words
        if wish.family == "shorter":
            passed = words < before
            return _result(
                wish,
                f"shorter than {before} words",
                passed,
                str(words),
                value=words,
                target=before,
                shortfall=None if passed else f"{words - before + 1} words too long",
            )
        passed = words > before
        return _result(
            wish,
            f"longer than {before} words",
            passed,
            str(words),
            value=words,
            target=before,
            shortfall=None if passed else f"{before - words + 1} words too short",
        )
    return None


def _approximate(quote: str, target: int) -> bool:
    """The amount was said approximately: an approximating word near its number in the quote
    ("about 90 words", "90-ish words"); a bare number is a limit. (The phrasebook words the
    instruction alike: trainer/instructions.py.)"""
    del target
    return bool(cues().approximate.search(quote.lower()))


def _sentences(doc: Document) -> int:
    return sum(len(_split_sentences(b.text)) for b in doc.prose)


_SENTENCE_END = re.compile('(?<=[.!?])["\u201d\u2019)]*\\s+(?=["\u201c(]*[A-Z0-9])')


def _split_sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def _form(doc: Document, wish: ActiveWish) -> CheckResult:
    present, absent = FORMS[wish.family]
    found = {
        "table": doc.tables,
        "bullets": doc.bullet_items,
        "numbered": doc.numbered_items,
        "headings": doc.headings,
        "code_block": doc.code_blocks,
    }[wish.family]
    if wish.action == "remove":
        return _result(wish, absent, found == 0, _found(found) if found else "", value=found)
    amount = wish.amount
    if wish.family == "bullets" and amount is not None and amount.kind == "count":
        wanted = int(amount.value)
        return _result(
            wish,
            amount.says(),
            found == wanted,
            str(found),
            value=found,
            target=wanted,
            shortfall=None if found == wanted else f"{found} bullets for {wanted}",
        )
    return _result(
        wish,
        present,
        found > 0,
        "" if found else "none found",
        value=found,
        shortfall=None if found else f"{present}: none found",
    )


def _found(count: int) -> str:
    return f"{_NUMBER_WORDS.get(count, str(count))} found"


def _prose(doc: Document, wish: ActiveWish) -> CheckResult:
    lists = doc.bullet_items + doc.numbered_items
    what = [f"{lists} list items"] if lists else []
    what += [f"{_plural(doc.tables, 'table')}"] if doc.tables else []
    if wish.action == "remove":  # prose taken back: nothing to check
        return _result(wish, "lists or tables allowed", True)
    return _result(
        wish,
        "prose, no lists",
        not what,
        ", ".join(what),
        value=lists + doc.tables,
        shortfall=None if not what else f"found {' and '.join(what)}",
    )


def _plural(count: int, noun: str) -> str:
    return f"{_NUMBER_WORDS.get(count, str(count))} {noun}{'' if count == 1 else 's'}"


@lru_cache(maxsize=1)
def _detector():  # type: ignore[no-untyped-def]
    # the reader's languages, so a comment and an output are told apart alike
    return LanguageDetectorBuilder.from_languages(*comment_languages.DETECTED).build()


def language_of(text: str) -> str | None:
    """The language ``text`` is written in, by its English name, or None when no telling."""
    sample = text[:LANGUAGE_SAMPLE_CHARS]
    found: Language | None = _detector().detect_language_of(sample) if sample.strip() else None
    if found is None:
        return None
    return found.name.capitalize().replace("Bokmal", "Norwegian")


def _language(doc: Document, wish: ActiveWish, aside: frozenset[str]) -> CheckResult | None:
    wanted, part = unscoped(wish.detail)
    if not wanted or wish.action == "remove":
        return None
    said = f"in {wanted}" if part is None else f"{part_words(part)} in {wanted}"
    if part is None:
        left_out = [id(b) for p in aside for b in _part(doc, p)]
        blocks = [b for b in doc.blocks if id(b) not in left_out] or doc.blocks
    else:
        blocks = _part(doc, part)
    if not blocks:
        return _result(
            wish, said, False, "no summary found", shortfall=f"{part_words(part)}: none found"
        )
    found = language_of("\n".join(b.text for b in blocks)) or "no language told"
    passed = found.lower() == wanted.lower()
    return _result(
        wish,
        said,
        passed,
        "" if passed else found,
        shortfall=None if passed else f"{part_words(part)} is written in {found}",
    )


def _part(doc: Document, part: str) -> list[Block]:
    """The blocks of a part of the output: for the closing summary, the blocks under the last
    heading that names a summary, else the last block of text (a summary's place)."""
    del part  # the closing summary is the one part a wish names (domain/answer_parts.py)
    text = [b for b in doc.blocks if b.kind != "code" and b.text]
    headed = [
        i
        for i, b in enumerate(text)
        if b.kind == "heading" and cues().summary.search(b.text.lower()[:FIRST_SENTENCE_CHARS])
    ]
    if headed:
        after = text[headed[-1] + 1 :]
        ends = next((i for i, b in enumerate(after) if b.kind == "heading"), len(after))
        return after[:ends]
    return text[-1:] if text and text[-1].kind != "heading" else []


def _lines(blocks: list[Block]) -> int:
    """The lines a part takes: each block's line breaks, or its sentences when it runs more
    sentences than lines (a "two-line summary" written as two sentences on one line)."""
    return sum(max(b.lines, len(_split_sentences(b.text))) for b in blocks)


def _summary(doc: Document, wish: ActiveWish) -> CheckResult:
    blocks = [b for b in doc.blocks if b.kind != "code" and b.text]
    last = blocks[-1] if blocks else None
    found = last is not None and (
        bool(cues().summary.match(last.text.lstrip("*_ ")[:FIRST_SENTENCE_CHARS].lower()))
        or (last.kind != "heading" and bool(cues().summary.search(last.under.lower())))
    )
    if wish.action == "remove":
        return _result(wish, "no closing summary", not found, "one found" if found else "")
    amount = wish.amount
    if found and amount is not None and amount.kind == "count":
        # the size of the part: a "two-line summary" is two lines, not one
        size = _lines(_part(doc, "summary"))
        wanted = int(amount.value)
        unit = amount.unit if amount.unit in ("lines", "sentences") else "lines"
        if unit == "sentences":
            size = sum(len(_split_sentences(b.text)) for b in _part(doc, "summary"))
        return _result(
            wish,
            f"a {_NUMBER_WORDS.get(wanted, str(wanted))}-{unit[:-1]} summary at the end",
            size == wanted,
            _plural(size, unit[:-1]),
            value=size,
            target=wanted,
            shortfall=None if size == wanted else f"the summary has {_plural(size, unit[:-1])}",
        )
    return _result(
        wish,
        "summary at the end",
        found,
        "" if found else "not found",
        shortfall=None if found else "the last paragraph is not a summary",
    )


def _recommendation(doc: Document, wish: ActiveWish) -> CheckResult:
    first = next((b for b in doc.blocks if b.kind not in ("heading", "code") and b.text), None)
    # the first sentence, from the block's opening only: a sentence is far shorter than this
    sentence = _split_sentences(first.text[:FIRST_SENTENCE_CHARS])[0] if first else ""
    found = bool(cues().recommendation.search(sentence.lower()))
    return _result(
        wish,
        "recommendation first",
        found,
        "" if found else "not in the first sentence",
        shortfall=None if found else f"the first sentence recommends nothing: {sentence[:80]!r}",
    )


def _examples(doc: Document, wish: ActiveWish) -> CheckResult:
    found = len(cues().example.findall(doc.lowered))
    if wish.action == "remove":
        return _result(wish, "no example", found == 0, _found(found) if found else "", value=found)
    amount = wish.amount
    wanted = int(amount.value) if amount is not None and amount.kind == "count" else 1
    said = amount.says() if amount is not None and amount.kind == "count" else "an example"
    exact = amount is not None and amount.kind == "count"
    passed = found == wanted if exact else found >= wanted
    return _result(
        wish,
        said,
        passed,
        str(found),
        value=found,
        target=wanted,
        shortfall=None if passed else f"{found} examples for {wanted}",
    )


def _hedging(doc: Document, wish: ActiveWish) -> CheckResult | None:
    if wish.action == "remove":
        return None
    hits = cues().hedges.findall(doc.lowered)
    return _result(
        wish,
        "no hedging",
        not hits,
        _tally(hits),
        value=len(hits),
        shortfall=None if not hits else f"hedges to remove: {_tally(hits)}",
    )


def _banned(doc: Document, wish: ActiveWish) -> CheckResult | None:
    said = " ".join((wish.detail or "").split())
    phrase = said.lower()
    if not phrase:
        return None
    # as written, and as read: a phrase split by markup ("| The | findings of …" across a
    # table's cells, "**the** findings") is still there
    count = max(" ".join(text.split()).lower().count(phrase) for text in (doc.text, doc.plain()))
    return _result(
        wish,
        f"no {said!r}",
        count == 0,
        "" if count == 0 else f"found {TIMES}{count}",
        value=count,
        shortfall=None if count == 0 else f"{phrase!r} appears {count} times",
    )


def _tally(hits: list[str]) -> str:
    counts: dict[str, int] = {}
    for hit in hits:
        counts[hit] = counts.get(hit, 0) + 1
    return ", ".join(f"{h!r}" + (f" {TIMES}{n}" if n > 1 else "") for h, n in counts.items())


# ---- plain language ----------------------------------------------------------------------------

# Flesch reading ease (in the language's own version: Amstad's for German, Kandel and Moles'
# for French, Douma's for Dutch…) at or above this reads as plain: 60 to 70 is "plain English"
PLAIN_READING_EASE = 60
# the languages textstat has a reading-ease formula for, with the hyphenation dictionary
# (pyphen's, shipped in its wheel) that counts their syllables; plain language in any other
# is "not checked", never a pass
READABILITY = {
    "English": "en_US",
    "German": "de_DE",
    "French": "fr_FR",
    "Dutch": "nl_NL",
    "Spanish": "es_ES",
    "Italian": "it_IT",
    "Russian": "ru_RU",
}
READABILITY_SAMPLE_CHARS = 20_000  # enough to measure, and linear in what it reads


@lru_cache(maxsize=len(READABILITY))
def _readability(language: str) -> textstatistics:
    # one instance per language: textstat's language is state of the instance, and a check
    # runs in threads
    measure = textstatistics()
    measure.set_lang(READABILITY[language])
    return measure


def reading_ease(text: str, language: str) -> float | None:
    """The Flesch reading ease of ``text`` in ``language``'s own formula (higher is plainer),
    or None for a language with no formula here."""
    if language not in READABILITY or not text.strip():
        return None
    return float(_readability(language).flesch_reading_ease(text[:READABILITY_SAMPLE_CHARS]))


def quoted_sentences(comment: str | None) -> list[str]:
    """The sentences a comment quotes, each at least a few words ("'Leverage cross-functional
    synergies to optimise throughput' is jargon"), in order: what the rater shows as the
    problem, which must not come back."""
    if not comment:
        return []
    found = [" ".join(m.group(1).split()) for m in _QUOTED.finditer(comment)]
    return list(dict.fromkeys(q.rstrip(".!?,;: ") for q in found if count_words(q) >= 4))


_QUOTED = re.compile('["\u201c\u201e]([^"\u201c\u201d\u201e]{12,400})["\u201d\u201c]')


def _plain(doc: Document, wish: ActiveWish) -> CheckResult | None:
    if wish.action == "remove":
        return None
    quoted = " ".join((wish.detail or "").split()).lower()
    if quoted and quoted in " ".join(doc.text.split()).lower():
        return _result(
            wish,
            "plain language",
            False,
            f"{quoted[:60]!r} is back",
            shortfall=f"the sentence quoted as the problem is still there: {quoted[:80]!r}",
        )
    prose = "\n".join(t if t[-1] in ".!?" else f"{t}." for b in doc.prose if (t := b.text))
    language = language_of(prose) if prose else None
    ease = reading_ease(prose, language) if language else None
    if ease is None:
        why = f"no readability measure for {language}" if language else "no text to measure"
        return _result(wish, "plain language", False, why, checked=False)
    passed = ease >= PLAIN_READING_EASE
    return _result(
        wish,
        "plain language",
        passed,
        f"reading ease {ease:.0f}",
        value=round(ease, 1),
        target=PLAIN_READING_EASE,
        shortfall=None
        if passed
        else f"reading ease {ease:.0f}, under {PLAIN_READING_EASE}: shorter sentences, "
        "everyday words",
    )
