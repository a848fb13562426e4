"""What a comment does with a change family, and how much it asks for: take-backs in several
languages, undo, amounts made absolute, praise that asks for nothing, and the instructions and
token budget that follow. Comments here are written for these tests, in no case set."""

from __future__ import annotations

import pytest

from domain.agent import AgentDefinition, AgentParameters
from trainer import cycle_step, reward_analyzer
from trainer.backends import RulesTrainer
from trainer.reading import reader as feedback_reader


def read(text: str) -> dict[str, tuple[str, str | None]]:
    """family → (action, amount in words) of every wish and kept family."""
    reading = feedback_reader.read(text)
    found = {w.family: (w.action, w.amount.says() if w.amount else None) for w in reading.wishes}
    found.update({k.family: ("keep", None) for k in reading.kept})
    return found


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("Honestly, ditch the bullet points.", "bullets"),
        ("The recap at the bottom adds nothing; strip it out.", "summary_at_end"),
        ("Those citations clutter the page. Please remove them.", "cite_sources"),
        ("Die Tabelle bitte streichen.", "table"),
        ("Enlevez les exemples, s'il vous plaît.", "example"),
        ("Quita los títulos, por favor.", "headings"),
    ],
)
def test_a_take_back_removes_what_the_family_put_there(comment: str, family: str) -> None:
    assert read(comment)[family] == ("remove", None)


@pytest.mark.parametrize(
    ("comment", "wanted", "removed"),
    [
        ("Strip the quotations out and use a table instead.", "table", "quotations"),
        ("Lose the stats, then stick to short paragraphs.", "prose", "stats"),
        ("Get rid of the jargon and give me headings.", "headings", "jargon"),
        ("Drop the table and write paragraphs.", "prose", "table"),
    ],
)
def test_a_removal_ends_at_its_own_object_and_the_next_verb_asks(
    comment: str, wanted: str, removed: str
) -> None:
    """A removal acts on its own object; a family named after another verb ("and use …") is
    asked for, never taken out, whether or not the removal's object is a family."""
    found = read(comment)
    assert found[wanted] == ("add", None)
    assert found.get(removed, ("remove", None)) == ("remove", None)
    assert [f for f, (action, _) in found.items() if action == "remove"] in ([], [removed])


def test_an_adjective_sizing_an_example_leaves_the_answer_s_length_alone() -> None:
    assert read("Add a brief real example from a clinic.") == {"example": ("add", None)}


def test_a_share_the_rater_took_off_their_own_text_asks_for_nothing() -> None:
    assert read("I cut my own notes by half before the meeting; yours can stay.") == {}


def test_a_removal_denied_keeps_the_family() -> None:
    assert read("Whatever you change, don't drop the comparison table.")["table"][0] == "keep"


def test_undo_names_the_last_change_whatever_it_was() -> None:
    for comment in ("Please revert that.", "Put it back the way it was before."):
        assert read(comment)["undo"] == ("remove", None)


@pytest.mark.parametrize(
    ("comment", "family", "amount"),
    [
        ("This could be half as long.", "shorter", "about half"),
        ("Trim it by a third.", "shorter", "about two thirds"),
        # the share taken off, not the share left
        ("Could the next one be a quarter shorter?", "shorter", "about three quarters"),
        ("Could you cut this by a third?", "shorter", "about two thirds"),
        ("Include exactly two examples from retail.", "example", "two examples"),
        ("Close with a one-sentence wrap-up.", "summary_at_end", "one sentence"),
    ],
)
def test_an_amount_travels_with_its_wish(comment: str, family: str, amount: str) -> None:
    assert read(comment)[family] == ("add", amount)


@pytest.mark.parametrize(
    "comment",
    [
        "Concise, accurate, zero padding. Lovely work.",
        "I thought it would be dense and it reads easily. Well done.",
        "Plenty of detail, but every bit of it was needed.",
    ],
)
def test_praise_that_names_qualities_changes_nothing(comment: str) -> None:
    analysis = reward_analyzer.analyze(9, comment, [])
    assert not [a for a in analysis.aspects if a.sentiment == "negative"]


def test_a_request_inside_praise_still_counts() -> None:
    analysis = reward_analyzer.analyze(9, "Superb. One nit: sign off a little warmer.", [])
    assert [a.want for a in analysis.aspects if a.sentiment == "negative"] == ["warmer"]


AGENT = AgentDefinition(
    name="a",
    system_prompt="You are a careful writer. Illustrate each main point with a concrete example.",
    parameters=AgentParameters(model="offline-analyst-1", max_tokens=2000),
)


async def test_an_amount_rewrites_the_instruction_it_refines_and_the_budget_stays() -> None:
    step = await cycle_step.take(
        RulesTrainer(),
        AGENT,
        cycle_step.LineageMemory(session_id="s", lineage_id="l"),
        5,
        "Just one example in total, please, and make the whole thing half as long.",
    )
    prompt = step.agent.system_prompt
    assert "Include exactly one concrete example" in prompt
    assert "each main point" not in prompt  # refined, not repeated
    assert "half the length" in prompt
    assert step.agent.parameters.max_tokens == 2000  # a ceiling, never the length control


async def test_a_hard_word_limit_lowers_the_ceiling_with_room_to_spare() -> None:
    step = await cycle_step.take(
        RulesTrainer(),
        AGENT,
        cycle_step.LineageMemory(session_id="s", lineage_id="l"),
        5,
        "It must stay under 200 words, it's for a print column.",
    )
    assert "under 200 words" in step.agent.system_prompt
    # 200 words need about 400 tokens; the ceiling leaves half again as much
    assert step.agent.parameters.max_tokens == 600


async def test_a_take_back_at_any_age_and_its_verdict() -> None:
    memory = cycle_step.LineageMemory(session_id="s", lineage_id="l")
    first = await cycle_step.take(RulesTrainer(), AGENT, memory, 5, "Use a table for the costs.")
    pending = cycle_step.pending_after(first, "e1")
    second = await cycle_step.take(
        RulesTrainer(),
        first.agent,
        cycle_step.LineageMemory(
            session_id="s", lineage_id="l", pending=pending, asked_for=first.asked_for
        ),
        6,
        "Scrap the table and the examples; plain paragraphs read better.",
    )
    prompt = second.agent.system_prompt
    assert "as a table" not in prompt and "example" not in prompt.lower()
    assert "flowing paragraphs, without bullet points or tables" in prompt
    verdicts = {v.family: v.verdict for v in second.judged.verdict.aspects}
    assert verdicts == {"table": "refuted"}
    assert "takes it back" in second.judged.verdict.aspects[0].reason
    assert "table" not in second.asked_for and "example" in second.taken_back


@pytest.mark.parametrize(
    ("comment", "target"),
    [
        ("It kept calling the search tool just to add two numbers.", "tool:search"),
        ("The tidy-up step threw away the caveats the draft had.", "flow:tidy-up"),
        ("A friendlier register would help.", "prompt"),
    ],
)
def test_a_wish_names_what_it_changes(comment: str, target: str) -> None:
    (wish,) = feedback_reader.read(comment).wishes
    assert wish.target == target


@pytest.mark.parametrize(
    ("comment", "wanted"),
    [
        ("More on the table, please.", {}),
        ("That example you cut, bring it back, but keep it short.", {"example": ("add", "one")}),
        ("The example you removed, put it back, keep it brief.", {"example": ("add", "one")}),
    ],
)
def test_a_form_named_or_a_part_restored_is_read_as_such(
    comment: str, wanted: dict[str, tuple[str, str | None]]
) -> None:
    """A form named after "more on" is no topic to deepen; a part brought back is asked for
    again, one of it, and its size is the part's (the answer's length is not asked)."""
    found = {f: (a, n.split()[0] if n else None) for f, (a, n) in read(comment).items()}
    assert found == wanted


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        # a numbered version described after it: the whole version, not a swap of its parts
        ("Switch back to v3, the numbered version with headings, please.", {"revert": "remove"}),
        # "is a joke" finds fault with what it names; it asks for no jokes-free register
        ("Honestly the bullet list is a joke.", {"prose": "add"}),
        ("What I'm missing now is a worked example.", {"example": "add"}),
        ("I'd like the recap back.", {"summary_at_end": "add"}),
        ("A final summary would help.", {"summary_at_end": "add"}),
    ],
)
def test_a_revert_a_fault_and_a_part_missed_are_read_as_such(
    comment: str, expected: dict[str, str]
) -> None:
    assert {family: action for family, (action, _) in read(comment).items()} == expected
