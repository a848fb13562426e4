"""Wishes as checks (trainer/checks.py): each check on hand-written Markdown and on real outputs
of the offline model answering as the example session's agents, after the instructions the
trainer writes; and the fold of a lineage's active wishes (trainer/active_wishes.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domain.change_families import FAMILIES
from domain.checks import MAX_ACTIVE_WISHES, ActiveWish, OutputChecks, checklist, failed, passes
from domain.spec import load_spec
from domain.trainer import Amount, FeedbackAspect
from domain.words import words_of
from runner.model_backend import ChatMessage, ModelRequest
from runner.offline_model import OfflineModel
from trainer import checks, wish_guard
from trainer.active_wishes import bounded, fold, measured
from trainer.checks import Document, banned_phrases, check, check_all, quoted_sentences
from trainer.reading.wish import Wish

ROOT = Path(__file__).parent.parent
SPEC = load_spec(ROOT / "examples" / "essay-session.yaml")
AGENTS = {lineage.label: lineage.agent for lineage in SPEC.lineages}  # A: analyst, B: coach


def answer(label: str, instructions: str = "", question: int = 0) -> str:
    """What the offline model answers as the example session's agent ``label`` after the
    trainer added ``instructions`` to its prompt."""
    agent = AGENTS[label]
    request = ModelRequest(
        model=agent.parameters.model,
        system=f"{agent.system_prompt} {instructions}".strip(),
        max_tokens=agent.parameters.max_tokens,
        temperature=agent.parameters.temperature,
        messages=[ChatMessage(role="user", content=SPEC.inputs[question])],
    )
    return OfflineModel().reply(request).text


def wish(family: str, action: str = "add", **rest: object) -> ActiveWish:
    return ActiveWish.model_validate({"family": family, "action": action, **rest})


def about(words: int) -> ActiveWish:
    return wish(
        "shorter", amount=Amount(kind="limit", value=words), quote=f"about {words} words please"
    )


TABLE = """\
| Option | Cost | Risk |
|:-------|-----:|------|
| Four-day week | low | **some** |
| Status quo | none | none |
"""
LISTS = """\
# Plan

* first point, with `code`
* second point
  - a nested point

1. step one
2. step two
"""


# ---- length ---------------------------------------------------------------------------------


def test_table_words_are_counted_without_pipes_rules_or_emphasis():
    doc = Document.of(TABLE)
    # the cells' words only: Option Cost Risk Four-day week low some Status quo none none
    assert doc.words == 11
    assert len(TABLE.split()) == 24  # what a plain split counts: pipes and rules as words
    assert doc.tables == 1


def test_list_and_heading_words_are_counted_without_markers():
    doc = Document.of(LISTS)
    # Plan | first point, with code | second point | a nested point | step one | step two
    assert doc.words == 1 + 4 + 2 + 3 + 2 + 2
    assert (doc.bullet_items, doc.numbered_items, doc.headings) == (3, 2, 1)


def test_about_an_amount_passes_within_fifteen_percent():
    words = " ".join(["word"] * 88)
    result = check(words, about(90))
    assert result is not None and result.passed and result.line() == "✓ about 90 words (88)"
    too_long = check(" ".join(["word"] * 131), about(90))
    assert too_long is not None and not too_long.passed
    assert too_long.line() == "✗ about 90 words (131)"
    assert too_long.shortfall == "41 words over (±15 % is 77 to 103 words)"
    assert not check(" ".join(["word"] * 70), about(90)).passed  # type: ignore[union-attr]


def test_a_plain_number_is_a_hard_limit():
    limit = wish("shorter", amount=Amount(kind="limit", value=150), quote="under 150 words")
    assert check(" ".join(["w"] * 20), limit).passed  # type: ignore[union-attr]
    over = check(" ".join(["w"] * 151), limit)
    assert over is not None and not over.passed and over.wish == "at most 150 words"


def test_a_share_is_measured_against_the_output_it_was_asked_on():
    half = wish("shorter", amount=Amount(kind="share", value=0.5, of_words=240), quote="half")
    assert check(" ".join(["w"] * 118), half).passed  # type: ignore[union-attr]
    result = check(" ".join(["w"] * 200), half)
    assert result is not None and not result.passed and result.wish == "about 120 words"


def test_shorter_without_an_amount_means_shorter_than_before():
    shorter = wish("shorter", made_on_words=130, quote="shorter")
    assert check(" ".join(["w"] * 104), shorter).passed  # type: ignore[union-attr]
    same = check(" ".join(["w"] * 131), shorter)
    assert same is not None and not same.passed and same.line() == "✗ shorter than 130 words (131)"
    longer = wish("longer", made_on_words=50)
    assert not check(" ".join(["w"] * 50), longer).passed  # type: ignore[union-attr]


def test_a_count_of_sentences_is_a_most():
    two = wish("shorter", amount=Amount(kind="count", value=2, unit="sentences"))
    assert check("One thing. Another thing.", two).passed  # type: ignore[union-attr]
    assert not check("One. Two. Three.", two).passed  # type: ignore[union-attr]


# ---- forms ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "present", "absent"),
    [
        ("table", TABLE, LISTS),
        ("bullets", LISTS, TABLE),
        ("numbered", LISTS, TABLE),
        ("headings", LISTS, TABLE),
        ("code_block", "Run:\n\n```sh\nmake test\n```\n", "Run `make test` (inline code only)."),
    ],
)
def test_each_form_present_or_absent(family: str, present: str, absent: str):
    assert check(present, wish(family)).passed  # type: ignore[union-attr]
    missing = check(absent, wish(family))
    assert missing is not None and not missing.passed and missing.measure == "none found"
    assert check(absent, wish(family, "remove")).passed  # type: ignore[union-attr]
    found = check(present, wish(family, "remove"))
    assert found is not None and not found.passed and found.measure.endswith("found")


def test_indented_code_counts_as_a_code_block_and_a_pipe_in_prose_is_no_table():
    assert Document.of("Intro.\n\n    make test\n").code_blocks == 1
    assert Document.of("Choose A | B, whichever is cheaper.").tables == 0


def test_a_count_of_bullets_is_the_number_of_items():
    three = wish("bullets", amount=Amount(kind="count", value=3, unit="bullets"))
    result = check(LISTS, three)
    assert result is not None and result.passed and result.wish == "three bullets"
    assert not check("- one\n- two\n", three).passed  # type: ignore[union-attr]


def test_prose_means_neither_lists_nor_tables():
    assert check("Two paragraphs.\n\nOf prose.", wish("prose")).passed  # type: ignore[union-attr]
    result = check(LISTS, wish("prose"))
    assert result is not None and not result.passed and result.measure == "5 list items"
    assert check(TABLE, wish("prose")).measure == "one table"  # type: ignore[union-attr]


# ---- language, summary, recommendation, examples, hedging, banned phrases ---------------------


def test_language_is_told_by_the_readers_detector():
    german = "Die Viertagewoche lohnt sich für kleine Teams, wenn man sie sorgfältig misst."
    assert check(german, wish("language", detail="German")).passed  # type: ignore[union-attr]
    english = check(answer("A"), wish("language", detail="German"))
    assert english is not None and english.line() == "✗ in German (English)"


def test_summary_at_the_end():
    ends = "The detail comes first.\n\nIn short: try it for a quarter."
    assert check(ends, wish("summary_at_end")).passed  # type: ignore[union-attr]
    under = "Body text.\n\n## Summary\n\nTry it for a quarter and measure."
    assert check(under, wish("summary_at_end")).passed  # type: ignore[union-attr]
    assert not check("Summary: first.\n\nThen detail.", wish("summary_at_end")).passed  # type: ignore[union-attr]


def test_recommendation_in_the_first_sentence():
    first = "## Answer\n\nI recommend a four-day trial. The reasons follow."
    assert check(first, wish("conclusion_first")).passed  # type: ignore[union-attr]
    late = "There are many factors. In the end I recommend it."
    result = check(late, wish("conclusion_first"))
    assert result is not None and not result.passed
    assert result.measure == "not in the first sentence"


def test_number_of_examples():
    two = wish("example", amount=Amount(kind="count", value=2, unit="examples"))
    text = "For example, a team of five. For instance, a team of ten."
    result = check(text, two)
    assert result is not None and result.passed and result.line() == "✓ two examples (2)"
    assert not check("For example, one.", two).passed  # type: ignore[union-attr]
    assert check("For example, one.", wish("example")).passed  # type: ignore[union-attr]
    assert not check("For example, one.", wish("example", "remove")).passed  # type: ignore[union-attr]


def test_hedging_is_found_and_counted():
    text = "The evidence is mixed. Perhaps try it; the evidence is mixed, after all."
    result = check(text, wish("direct"))
    assert result is not None and not result.passed
    assert result.measure == "'the evidence is mixed' \u00d72, 'perhaps'"
    assert check("Do it. It pays off within a quarter.", wish("direct")).passed  # type: ignore[union-attr]


def test_quoted_phrases_are_banned():
    assert banned_phrases("Fine, but no 'worth noting' and stop saying “to be fair”.") == [
        "worth noting",
        "to be fair",
    ]
    assert banned_phrases("I liked the 'quick win' part.") == []
    banned = wish("banned", "remove", detail="worth noting")
    result = check("It is worth  noting that Worth noting is banned.", banned)
    assert result is not None and not result.passed and result.measure == "found \u00d72"
    # split by markup, still there: across a table's cells, around bold
    table = "| The | findings of the research step |\n|---|---|\n| a | b |"
    leaked = wish("banned", "remove", detail="the findings of the research step")
    assert not check(table, leaked).passed  # type: ignore[union-attr]
    assert not check("**Worth** noting: it is.", banned).passed  # type: ignore[union-attr]


NORWEGIAN_WITH_GERMAN_SUMMARY = """\
Vi anbefaler en fire dagers arbeidsuke for små team. Det gir mer fokus og færre møter.

## Zusammenfassung

Kurz gesagt: Die Vier-Tage-Woche lohnt sich für kleine Teams.
Sie spart Zeit und hält die Leute frisch.
"""


def test_a_language_is_checked_on_the_part_it_is_asked_of():
    summary = check_all(
        NORWEGIAN_WITH_GERMAN_SUMMARY,
        [wish("language", detail="Norwegian"), wish("language", detail="German@summary")],
    )
    # the whole answer's language is told without the part another language is asked of
    assert [r.line() for r in summary] == ["✓ in Norwegian", "✓ the closing summary in German"]
    english = check(NORWEGIAN_WITH_GERMAN_SUMMARY, wish("language", detail="English@summary"))
    assert english is not None and english.line() == "✗ the closing summary in English (German)"
    # no heading: the closing summary is the last paragraph
    last = "Die Woche lohnt sich für kleine Teams.\n\nIn short, it pays off for small teams."
    assert check(last, wish("language", detail="English@summary")).passed  # type: ignore[union-attr]
    assert not check(last, wish("language", detail="German@summary")).passed  # type: ignore[union-attr]


def test_the_size_of_a_summary_is_its_lines():
    two = wish("summary_at_end", amount=Amount(kind="count", value=2, unit="lines"))
    one = wish("summary_at_end", amount=Amount(kind="count", value=1, unit="lines"))
    result = check(NORWEGIAN_WITH_GERMAN_SUMMARY, two)
    assert result is not None and result.line() == "✓ a two-line summary at the end (two lines)"
    short = check("Body.\n\nIn short: try it for a quarter.", two)
    assert short is not None and short.line() == "✗ a two-line summary at the end (one line)"
    assert check("Body.\n\nIn short: try it for a quarter.", one).passed  # type: ignore[union-attr]
    assert not check(NORWEGIAN_WITH_GERMAN_SUMMARY, one).passed  # type: ignore[union-attr]


def test_plain_language_is_a_reading_ease_and_the_quoted_sentence_gone():
    plain = "Try a four-day week for one quarter. Count what gets done. Then decide."
    result = check(plain, wish("simpler"))
    assert result is not None and result.passed and result.line().startswith("✓ plain language")
    dense = (
        "Organisations should operationalise cross-functional synergies, leveraging "
        "heterogeneous infrastructural capabilities to maximise organisational throughput."
    )
    hard = check(dense, wish("simpler"))
    assert hard is not None and not hard.passed and hard.value is not None and hard.value < 60
    # the sentence the rater quoted as the problem is back: ✗, however plain the rest
    quoted = quoted_sentences('Too much jargon: "Count what gets done across every team."')
    assert quoted == ["Count what gets done across every team"]
    back = check(
        "Try it for a quarter. Count what gets done across every team.",
        wish("simpler", detail=quoted[0]),
    )
    assert back is not None and not back.passed and "is back" in back.measure
    # a language with no readability measure: not checked, never a pass or a fail
    norwegian = check(NORWEGIAN_WITH_GERMAN_SUMMARY.split("##")[0], wish("simpler"))
    assert norwegian is not None and not norwegian.measured
    assert norwegian.line() == "not checked: plain language (no readability measure for Norwegian)"
    assert failed([norwegian]) == [] and passes([norwegian]) == 0
    # German has its own formula (Amstad's)
    german = "Die Woche ist kurz. Das Team ist froh. Es klappt gut."
    assert check(german, wish("simpler")).passed  # type: ignore[union-attr]


def test_a_phrase_to_avoid_is_checked_absent():
    avoid = wish("banned", "remove", detail="the evidence is mixed")
    found = check("The evidence is mixed. Try it.", avoid)
    assert found is not None and found.line() == "✗ no 'the evidence is mixed' (found \u00d71)"
    assert check("Try it for a quarter.", avoid).line() == "✓ no 'the evidence is mixed'"  # type: ignore[union-attr]


def test_the_header_the_checklist_and_the_card_count_words_alike():
    for text in (TABLE, LISTS, NORWEGIAN_WITH_GERMAN_SUMMARY, answer("A"), answer("B")):
        assert words_of(text) == Document.of(text).words


def test_families_without_a_measurable_form_are_listed_not_checked_and_say_why():
    for family in FAMILIES:
        assert (family in checks.CHECKED) != (family in checks.UNCHECKABLE), family
        if family in checks.UNCHECKABLE:
            result = check("Some text.", wish(family))
            assert result is not None and not result.measured and not result.passed, family
            # the rater's words, never the family's id, and why
            assert result.line() == f"not checked: {result.wish} ({checks.UNCHECKABLE[family]})"
            assert "_" not in result.wish, result.wish
    warmer = check("Some text.", wish("warmer"))
    assert warmer is not None and warmer.line() == (
        "not checked: warmer (tone has no measurable form)"
    )
    focus = check("Some text.", wish("focus", detail="on:phone length|off:history"))
    assert focus is not None and focus.wish == "more on phone length, less on history"
    assert check("Some text.", wish("bullets", "less")) is None  # softened: no firm measure
    # listed, never counted: neither a pass nor a failure
    results = check_all("Some text.", [wish("warmer"), wish("table")])
    assert (passes(results), [r.family for r in failed(results)]) == (0, ["table"])
    assert checklist(results) == (
        "not checked: warmer (tone has no measurable form) · ✗ a table (none found)"
    )


# ---- real outputs of the example session's agents --------------------------------------------


def test_the_analysts_long_answer_fails_a_short_length_and_shows_hedging():
    text = answer("A")
    results = check_all(text, [about(90), wish("direct"), wish("table", "remove")])
    length, hedging, no_table = results
    assert not length.passed and length.value == Document.of(text).words > 300
    assert not hedging.passed and "'it is worth noting'" in hedging.measure
    assert no_table.passed
    assert checklist(results).startswith(
        f"✗ about 90 words ({int(length.value or 0)}) · ✗ no hedging"
    )


def test_the_offline_models_table_and_bullets_are_seen_and_counted_without_markup():
    table = answer("A", FAMILIES["table"].instruction or "")
    doc = Document.of(table)
    assert doc.tables == 1 and doc.words < len(table.split())  # pipes were not words
    assert check(table, wish("table")).passed  # type: ignore[union-attr]
    bullets = answer("B", "Use bullet points, not paragraphs. Keep answers brief.")
    assert Document.of(bullets).bullet_items >= 3
    assert not check(bullets, wish("prose")).passed  # type: ignore[union-attr]


def test_the_coachs_answer_with_the_recommendation_and_summary_instructions_passes():
    text = answer(
        "B",
        "Lead with the recommendation or answer, then give the reasoning. End with a summary "
        "of the key points and next steps. Illustrate each main point with a concrete example.",
        question=1,
    )
    results = check_all(text, [wish("conclusion_first"), wish("summary_at_end"), wish("example")])
    assert [r.passed for r in results] == [True, True, True], checklist(results)


def test_an_amount_the_model_overshoots_fails_and_says_by_how_much():
    text = answer("A", "Keep answers to about 100 words.", question=2)
    result = check(text, about(100))
    assert result is not None and not result.passed
    assert result.value == Document.of(text).words > 115
    assert (
        result.shortfall == f"{Document.of(text).words - 100} words over (±15 % is 85 to 115 words)"
    )


# ---- active wishes ---------------------------------------------------------------------------


def _wished(family: str, quote: str, amount: Amount | None = None, **rest: object) -> Wish:
    return Wish(family=family, aspect="x", quote=quote, confidence=0.9, amount=amount, **rest)  # type: ignore[arg-type]


def test_a_phrase_the_comment_quotes_is_banned_only_if_the_rater_kept_the_wish():
    """The rater dropped the avoid chip read from "is not 'key points only'": the comment's
    quote bans nothing, so no later output is checked for it."""
    kept = fold(
        [],
        wished=[_wished("bullets", "five bullets", Amount(kind="count", value=5))],
        approved=[],
        taken_back=[],
        asked_for=["bullets"],
        comment="Twelve bullets is not 'key points only'. Five, no more.",
        cycle=6,
        words=300,
    )
    assert [w.family for w in kept] == ["bullets"]


def test_fold_keeps_amounts_replaces_them_and_takes_back():
    first = fold(
        [],
        wished=[
            _wished("shorter", "about 100 words", Amount(kind="limit", value=100)),
            _wished("table", "a table"),
            _wished("direct", "no hedging"),
            _wished("warmer", "warmer"),  # no measurable form: listed, not checked
            _wished("banned", "no 'worth noting'", detail="worth noting"),
        ],
        approved=[],
        taken_back=[],
        asked_for=["shorter", "table", "direct", "warmer"],
        comment="About 100 words, a table, no hedging, and no 'worth noting'.",
        cycle=1,
        words=400,
    )
    assert [(w.family, w.action, w.cycle) for w in first] == [
        ("shorter", "add", 1),
        ("table", "add", 1),
        ("direct", "add", 1),
        ("warmer", "add", 1),
        ("banned", "remove", 1),
    ]
    second = fold(
        first,
        wished=[_wished("shorter", "shorter still")],
        approved=[
            FeedbackAspect(aspect="format", sentiment="positive", confidence=1, want="table")
        ],
        taken_back=[_wished("table", "drop the table", action="remove")],
        asked_for=["shorter", "direct"],
        comment="Shorter still, and drop the table.",
        cycle=2,
        words=131,
    )
    by_family = {w.family: w for w in second}
    # "shorter still" after "about 100 words": the amount named stays (a new one replaces it)
    assert by_family["shorter"].amount == Amount(kind="limit", value=100)
    vague = fold(
        [],
        wished=[_wished("shorter", "shorter still")],
        approved=[],
        taken_back=[],
        asked_for=["shorter"],
        comment="Shorter still.",
        cycle=2,
        words=131,
    )
    assert vague[0].amount is None and vague[0].made_on_words == 131  # shorter than that
    assert by_family["table"].action == "remove"  # its absence is checked from now on
    assert by_family["banned"].detail == "worth noting"
    # a contrary wish the keep-list took on drops the form it reverses
    third = fold(
        second,
        wished=[_wished("prose", "in paragraphs")],
        approved=[],
        taken_back=[],
        asked_for=["shorter", "direct", "prose"],
        comment="Write it in paragraphs.",
        cycle=3,
        words=100,
    )
    assert {w.family for w in third} == {"shorter", "direct", "table", "banned", "prose"}


def test_fold_lists_an_unmeasured_wish_until_taken_back_and_guards_nothing_with_it():
    first = fold(
        [],
        wished=[
            _wished("warmer", "warmer please"),
            _wished("focus", "more on phone length", detail="on:phone length"),
            _wished("table", "a table"),
        ],
        approved=[],
        taken_back=[],
        asked_for=["warmer", "table"],  # a focus is on no keep-list
        comment="Warmer please, more on phone length, and a table.",
        cycle=1,
        words=200,
    )
    assert [(w.family, w.detail) for w in first] == [
        ("warmer", None),
        ("focus", "on:phone length"),
        ("table", None),
    ]
    assert measured(first) == [first[2]]
    # a wish listed, not measured, guards nothing: only the table stands in a change's way
    assert set(wish_guard.protected(first, [], cycle=5)) == {"table"}
    # a take-back removes it as any other's; a focus rolled back or undone goes with it
    second = fold(
        first,
        wished=[],
        approved=[],
        taken_back=[_wished("warmer", "not so warm", action="remove")],
        asked_for=["table"],
        comment="Not so warm.",
        cycle=2,
        words=200,
        dropped={"focus"},
    )
    assert [w.family for w in second] == ["table"]
    # praise of a tone keeps listing it, as praise of a form keeps checking it
    praised = fold(
        [],
        wished=[],
        approved=[FeedbackAspect(aspect="tone", sentiment="positive", confidence=1, want="warmer")],
        taken_back=[],
        asked_for=["warmer"],
        comment="The warm tone works.",
        cycle=3,
        words=200,
    )
    assert [w.family for w in praised] == ["warmer"]
    # past the bound the oldest unmeasured wishes go first, never a measured one
    many = (
        [wish(f, cycle=1) for f in sorted(checks.UNCHECKABLE)]
        + [wish(f, cycle=1) for f in ("table", "direct", "example", "prose")]
        + [wish("banned", "remove", detail=f"phrase {n}") for n in range(6)]
    )
    assert len(many) > MAX_ACTIVE_WISHES
    kept = bounded(many)
    assert len(kept) == MAX_ACTIVE_WISHES
    assert [w for w in many if w.family in checks.CHECKED] == measured(kept)


def test_any_output_checks_within_bounds():
    """Outputs full of what the checks count (a hundred hedges, a banned phrase everywhere,
    deep nesting, a long first sentence) give results within their bounds: they cross
    Temporal, and an unbounded one would fail the agent's activity."""
    every_hedge = json.loads(checks.CUES_FILE.read_text())["hedges"]
    hedges = " ".join(f"{h.capitalize()}, {n}." for n in range(20) for h in every_hedge)
    nested = "\n".join("  " * n + "- item" for n in range(60))
    long_first = "This sentence goes on " + "and on " * 400 + "without a recommendation."
    wishes = [
        wish("direct"),
        wish("banned", "remove", detail="it seems"),
        wish("conclusion_first"),
        wish("bullets", "remove"),
        wish("language", detail="German"),
        about(90),
    ]
    for text in (hedges, nested, long_first, "", "|||\n|-|\n" * 50):
        for result in check_all(text, wishes):
            for said in (result.wish, result.measure, result.shortfall or ""):
                assert len(said) <= 160


def test_the_checklist_says_what_became_of_a_revision():
    results = check_all("| a | b |\n|---|---|\n| c | d |\n", [wish("table"), wish("direct")])
    assert OutputChecks(checks=results).line() == "✓ a table · ✓ no hedging"
    revised = OutputChecks(checks=results, tries=2, revised=True).line()
    assert revised == "✓ a table · ✓ no hedging · revised once in the cycle"
    kept = OutputChecks(checks=results, tries=2).line()
    assert kept.endswith("a revision was tried, passed no more checks, and is not shown")


def test_every_form_example_opens_as_the_planner_recognises_it():
    """The planner tells a form example from an instruction by its opening words: an example
    that opened otherwise would be taken for a second instruction of its family."""
    from trainer.check_levers import FORM_EXAMPLE
    from trainer.checks import cues

    assert cues().form_examples
    assert all(line.startswith(FORM_EXAMPLE) for line in cues().form_examples.values())
