"""The reader's precision on comments written as people write them (this file's own wording):
praise that names qualities asks for nothing, a denied fault is praise, a situation or a genre
implies a wish, a tool used for arithmetic is a tool wish."""

from __future__ import annotations

import pytest

from trainer import feedback_reader


def wishes(comment: str) -> set[str]:
    return {w.family for w in feedback_reader.read(comment).wishes}


@pytest.mark.parametrize(
    "comment",
    [
        "Lovely flow, nicely brief, and the register is just right.",
        "The formal tone suits the board perfectly.",
        "It doesn't drag at all, and it never lectures.",
        "Not wordy in the least.",
    ],
)
def test_praise_that_names_qualities_asks_for_nothing(comment: str):
    assert wishes(comment) == set()


@pytest.mark.parametrize(
    ("comment", "family"),
    [
        ("I'm going through these on my phone between calls.", "shorter"),
        ("It goes to a primary-school class but sounds like a board report.", "casual"),
        ("It goes to a primary-school class, and half the words are jargon to them.", "simpler"),
        ("It ran a web search to add 12 and 30, which is silly.", "tool_use"),
    ],
)
def test_a_situation_a_genre_or_a_misused_tool_implies_a_wish(comment: str, family: str):
    assert family in wishes(comment)


def test_an_implied_wish_yields_to_an_explicit_one():
    # the situation suggests brevity; the reviewer explicitly wants depth
    assert wishes("I read these on my phone, but I want more detail, please.") == {"longer"}
