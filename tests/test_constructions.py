"""Metamorphic tests of the construction layer (``trainer/reading/constructions.py``): for every
construction and every pair of rival families, the preferred family is asked for, its rival is
never asked for, and swapping the two families swaps the reading. The templates are this file's
own wordings (none is one of the public contrast set's), so they test the grammar, not a set."""

from __future__ import annotations

import pytest

from trainer.reading import reader

# family -> a noun phrase naming it
PHRASES = {
    "table": "a table",
    "bullets": "bullet points",
    "prose": "paragraphs",
    "numbered": "numbered steps",
    "formal": "a formal register",
    "casual": "a casual tone",
    "shorter": "a brief answer",
    "longer": "a detailed answer",
    "simpler": "plain words",
    "technical": "the technical terms",
    "direct": "a direct answer",
    "hedge": "caveats",
}
# forms, registers, lengths, audience level, directness
PAIRS = [
    ("table", "prose"),
    ("bullets", "prose"),
    ("table", "bullets"),
    ("numbered", "prose"),
    ("formal", "casual"),
    ("shorter", "longer"),
    ("simpler", "technical"),
    ("direct", "hedge"),
]
# construction -> a template preferring {a} (wanted) to {b} (its rival)
TEMPLATES = {
    "comparison: than": "{A} reads far better here than {b}.",
    "comparison: worse than": "{B} is harder to follow than {a}.",
    "comparison: prefer to": "I prefer {a} to {b}.",
    "comparison: over": "I'd pick {a} over {b} every time.",
    "comparison: between": "If it's between {a} and {b}, I'd go with {a}.",
    "substitution: replace with": "Replace {b} with {a}.",
    "substitution: swap for": "Swap {b} for {a}.",
    "substitution: in place of": "Use {a} in place of {b}.",
    "substitution: from to": "Go from {b} to {a}, please.",
    "contrast: X, not Y": "{A}, not {b}.",
    "contrast: not Y but X": "Not {b} but {a}.",
    "contrast: Y? No. X.": "{B}? Nope. {A} this time.",
    "rejection: isn't helping": "{B} isn't helping; use {a}.",
    "rejection: ditch": "Ditch {b} and give me {a}.",
    "rejection: makes it hard": "{B} makes it hard to read. {A}, please.",
}


def comment(template: str, wanted: str, rival: str) -> str:
    a, b = PHRASES[wanted], PHRASES[rival]
    return template.format(a=a, b=b, A=a[0].upper() + a[1:], B=b[0].upper() + b[1:])


def roles(text: str, families: tuple[str, str]) -> dict[str, str]:
    """What the reading does with each of the two families: add, remove, keep or nothing."""
    reading = reader.read(text)
    done = {w.family: w.action for w in reading.wishes if w.family in families}
    done |= {k.family: "keep" for k in reading.kept if k.family in families}
    return {f: done.get(f, "nothing") for f in families}


CASES = [
    pytest.param(template, wanted, rival, id=f"{name} | {wanted} over {rival}")
    for name, template in TEMPLATES.items()
    for pair in PAIRS
    for wanted, rival in (pair, pair[::-1])
]


@pytest.mark.parametrize(("template", "wanted", "rival"), CASES)
def test_the_preferred_family_is_asked_for_and_its_rival_never(
    template: str, wanted: str, rival: str
) -> None:
    text = comment(template, wanted, rival)
    read = roles(text, (wanted, rival))
    assert read[wanted] == "add", text
    assert read[rival] in ("remove", "nothing"), text


@pytest.mark.parametrize(
    ("template", "pair"),
    [
        pytest.param(template, pair, id=f"{name} | {pair[0]}/{pair[1]}")
        for name, template in TEMPLATES.items()
        for pair in PAIRS
    ],
)
def test_swapping_the_two_families_swaps_the_reading(template: str, pair: tuple[str, str]) -> None:
    one, other = pair
    forward = roles(comment(template, one, other), pair)
    backward = roles(comment(template, other, one), pair)
    assert backward == {one: forward[other], other: forward[one]}


@pytest.mark.parametrize(("wanted", "rival"), PAIRS)
def test_a_kept_family_beside_a_rejected_rival_is_kept_not_asked_for_again(
    wanted: str, rival: str
) -> None:
    text = f"Keep {PHRASES[wanted]} and drop {PHRASES[rival]}."
    assert roles(text, (wanted, rival)) == {wanted: "keep", rival: "remove"}


@pytest.mark.parametrize(
    "text",
    [
        "A table or bullet points, whatever suits.",
        "Paragraphs and a table would both work.",
    ],
)
def test_rivals_it_cannot_place_are_said_back_with_a_chip_for_each_reading(text: str) -> None:
    reading = reader.read(text)
    assert reading.wishes == []
    (unsure,) = reading.unsure
    families = {"table", "bullets", "prose"} & set(unsure.proposed)
    assert len(families) == 2
    assert {f"remove:{f}" for f in families} <= set(unsure.proposed)


# Another language's preference between two rivals: (language, template with {a} wanted over
# {b}, family -> the word naming it). Its own wordings, none from any set.
FOREIGN = [
    ("nl", "Ik heb liever {a} dan {b}, dat leest rustiger.", ("een tabel", "alinea's")),
    ("de", "Bitte {a} statt {b}, das liest sich besser.", ("eine Tabelle", "Aufzählungen")),
    ("fr", "Je préfère {a} plutôt que {b} ici.", ("une réponse courte", "une réponse longue")),
    ("es", "Mejor {a} en vez de {b}, por favor.", ("un tono cercano", "un tono formal")),
    ("pl", "Zamiast {b} poproszę {a}.", ("tabelę", "punktory")),
]
FOREIGN_FAMILIES = {
    "nl": ("table", "prose"),
    "de": ("table", "bullets"),
    "fr": ("shorter", "longer"),
    "es": ("casual", "formal"),
    "pl": ("table", "bullets"),
}


@pytest.mark.parametrize(("language", "template", "words"), FOREIGN, ids=[f[0] for f in FOREIGN])
def test_a_preference_in_another_language_is_read_both_ways(
    language: str, template: str, words: tuple[str, str]
) -> None:
    named = dict(zip(FOREIGN_FAMILIES[language], words, strict=True))
    one, other = named
    for wanted, rival in ((one, other), (other, one)):
        text = template.format(a=named[wanted], b=named[rival])
        read = roles(text, (wanted, rival))
        assert read[wanted] == "add" and read[rival] in ("remove", "nothing"), text


@pytest.mark.parametrize(("wanted", "rival"), PAIRS)
def test_a_swap_naming_only_what_comes_in_or_goes_out(wanted: str, rival: str) -> None:
    assert roles(f"Swap that flat opening for {PHRASES[wanted]}.", (wanted, rival))[wanted] == "add"
    went = roles(f"Switch {PHRASES[rival]} to something else.", (wanted, rival))
    assert went[rival] in ("remove", "nothing") and went[wanted] != "add"


@pytest.mark.parametrize(
    ("text", "family"),
    [
        ("Add a little summary at the bottom so I can go over it later.", "summary_at_end"),
        ("You glossed over the refund rules; go deeper there.", "longer"),
    ],
)
def test_words_that_look_like_the_rival_are_read_as_what_they_say(text: str, family: str) -> None:
    reading = reader.read(text)
    assert [(w.family, w.action) for w in reading.wishes] == [(family, "add")]


@pytest.mark.parametrize(
    "text",
    [
        "Exactly right. The one error was in my own prompt: I typed the wrong year, that's on me.",
        "My client asks what 'keep it friendlier' means in practice.",
    ],
)
def test_a_fault_the_rater_owns_or_quotes_changes_nothing(text: str) -> None:
    assert reader.read(text).wishes == []


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("I'd sooner read the fuller account than this outline.", {("longer", "add")}),
        ("Keep it to half a page.", {("shorter", "add")}),
        ("Add one drill the team could run at the kitchen table.", {("example", "add")}),
        ("Rispondi in italiano, per favore: è per le famiglie.", {("language", "add")}),
        ("Stop guessing at clauses you haven't read.", {("no_fabrication", "add")}),
        # one mention, preferred by a comparison verb a word or two after it
        ("Plain and brief wins over the lecture.", {("simpler", "add"), ("shorter", "add")}),
        ("Two short lines would have been plenty.", {("shorter", "add")}),
        # a reader who will ask where the figures came from wants them sourced
        ("The auditors will want to know where these totals came from.", {("cite_sources", "add")}),
        ("Our volunteers have never heard of amortisation.", {("simpler", "add")}),
        # a removal word aimed at a person removes nothing
        ("Would it kill you to add a table of the fees?", {("table", "add")}),
        # a take-back in other words
        ("I'm withdrawing my request for headings.", {("headings", "remove")}),
        ("We'd like the numbered list gone.", {("numbered", "remove")}),
        # a plural the cue file lists in the singular
        ("Los párrafos son demasiado largos para el móvil.", {("shorter", "add")}),
        # a swap of words joined by a comma or "and": the verb takes all of them
        (
            "Trade the stiff, lawyerly voice for a relaxed one.",
            {("casual", "add"), ("formal", "remove")},
        ),
        (
            "Swap the breezy and jokey tone for a formal one.",
            {("formal", "add"), ("casual", "remove")},
        ),
        # inventing named by what is invented
        ("Please stop making up statistics.", {("no_fabrication", "add")}),
        # the size that would have done, or the size it took, as a complaint of length
        ("Four lines would have sufficed here.", {("shorter", "add")}),
        ("Two thousand words to tell us the office is shut on Monday.", {("shorter", "add")}),
        # the rater's own words counted: no complaint
        ("I drafted 500 words to explain the change to my team.", set()),
        # a part said to go somewhere: where the answer goes, not a form asked for
        ("This paragraph gets copied into a grant form.", set()),
        # an everyday word that is also a language's name, lower case: no language
        ("I added a line to the polish step last time and it helped.", set()),
        # bland lines said to come from nowhere: a sourcing complaint, not a wish for flair
        (
            "Generic filler again, and none of it is from the documents.",
            {("no_fabrication", "add"), ("shorter", "add")},
        ),
        # what the answer opens with, quoted: no wish to put the answer first
        ("The reply opens with 'Summary of findings:' and it reads oddly.", set()),
        # "cut" a part is a take-back; "cut it down" a size
        ("Cut the glossary table, it's noise.", {("table", "remove")}),
        ("Make it bullets and cut it down.", {("bullets", "add"), ("shorter", "add")}),
        # a tool's order praised
        ("Nice: it looked up the handbook first, then did the sum. That order is right.", set()),
    ],
)
def test_everyday_wordings_of_one_wish(text: str, wanted: set[tuple[str, str]]) -> None:
    assert {(w.family, w.action) for w in reader.read(text).wishes} == wanted


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("Close with a short recap in French; the rest stays in English.", "French@summary"),
        ("The closing summary is still in English, not German.", "German@summary"),
        ("Answer in Dutch from now on.", "Dutch"),
    ],
)
def test_a_language_asked_of_one_part_is_scoped_to_it(text: str, detail: str) -> None:
    (wish,) = [w for w in reader.read(text).wishes if w.family == "language"]
    assert wish.detail == detail


def test_praise_that_asks_to_leave_it_alone_asks_for_nothing() -> None:
    assert reader.read("Brief, clean, the table works. Leave this one alone.").wishes == []
    said = "no changes from me, only that the recipes read well. don't shorten them or cut steps"
    assert reader.read(said).wishes == []


def test_a_form_praised_or_accepted_is_kept_not_asked_for() -> None:
    for said in ("Numbered steps now, a real improvement.", "The bullets are fine by me."):
        reading = reader.read(said)
        assert reading.wishes == [] and {k.family for k in reading.kept} <= {"numbered", "bullets"}
        assert reading.kept


def test_a_keep_beside_an_outright_request_leaves_the_request() -> None:
    wishes = reader.read("Leave it alone, but add a table.").wishes
    assert [(w.family, w.action) for w in wishes] == [("table", "add")]


def test_a_refusal_covers_the_verb_joined_to_it_by_or() -> None:
    assert reader.read("Please don't make it longer or add more detail.").wishes == []
    # the same words asked for outright are a wish
    assert [w.family for w in reader.read("Please add more detail.").wishes] == ["longer"]


def test_a_rival_that_would_have_been_plenty_is_wanted() -> None:
    wishes = reader.read("Numbered steps would have been plenty; the table is overkill.").wishes
    assert {(w.family, w.action) for w in wishes} == {("numbered", "add"), ("table", "remove")}
