"""The one word count: the words of the text a reader reads, Markdown markup not counted.

The output header (``training-camp output``), the checklist and the card all count an output's
words here, so that they never disagree (a plain split counts a table's pipes and rules, a
bullet's dash, a heading's hashes as words). markdown-it parses the output; only its text and
code count, and a token is a word when it holds a letter or a digit.
"""

from __future__ import annotations

import re
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token


@lru_cache(maxsize=1)
def markdown() -> MarkdownIt:
    """CommonMark and GitHub tables, raw HTML off: the parser the review page renders with."""
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def inline_text(token: Token) -> str:
    """The text of an inline token: its text and inline code, line breaks as spaces."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts).strip()


# A word: a run of non-space holding a letter or a digit, found from its first letter or digit
# to the run's end. The pattern opens on one letter or digit, so a failed start costs one
# character and a match is never retried: linear, however long a run of punctuation (the
# earlier ``\S*[^\W_]\S*`` retried every start of such a run, quadratic: 9 s for 20 KB).
_WORD = re.compile(r"[^\W_]\S*+")


def count_words(text: str) -> int:
    """The words of ``text`` (runs of non-space holding a letter or a digit), in linear time."""
    return len(_WORD.findall(text))


def words_of(output: str) -> int:
    """The words of a Markdown ``output`` as a reader reads it: its text and code blocks."""
    total = 0
    for token in markdown().parse(output):
        if token.type == "inline":
            total += count_words(inline_text(token))
        elif token.type in ("fence", "code_block"):
            total += count_words(token.content)
    return total
