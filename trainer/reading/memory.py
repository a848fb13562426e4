"""Every correction teaches the reader (issue #46): a comment close to one a rater corrected is
read as the correction said, before the cue tables are consulted.

The labelled examples (``domain.corrections.LabelledExample``: comment → corrected wants) are
matched by fuzzy similarity over normalised text (rapidfuzz). The scorer and the threshold are
measured, not guessed: ``bench/reading_memory.py`` prints precision and recall per threshold over
paraphrases that should match and different comments that should not (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz, process

from domain.corrections import MAX_EXAMPLES_LOADED, LabelledExample
from domain.execution import preview_of

# token_sort_ratio: word order does not matter ("less stiff, one example" ~ "one example, less
# stiff") but every word counts, unlike token_set_ratio, which scores a comment 100 against any
# comment containing all its words ("too long" vs "too long? no, too formal").
SCORER = fuzz.token_sort_ratio
THRESHOLD = 80.0  # measured: bench/reading_memory.py, docs/benchmarks.md "Reading memory"
MAX_MATCHED_CHARS = 500  # a comment is matched on its start: bounded work per look-up
CITED_CHARS = 40  # the corrected comment as the say-back quotes it

_NOT_WORD = re.compile(r"[^\w]+")


def normalised(text: str) -> str:
    """Lower case, words only, single spaces, bounded: what two comments are compared on."""
    words = _NOT_WORD.sub(" ", text[: MAX_MATCHED_CHARS * 2].lower()).split()
    return " ".join(words)[:MAX_MATCHED_CHARS]


@dataclass(frozen=True)
class Recall:
    """The corrected example a comment was matched to, and how close it was (0 to 100)."""

    example: LabelledExample
    similarity: float

    @property
    def wants(self) -> list[str]:
        return self.example.corrected

    def cited(self) -> str:
        """Why the comment was read so, for the say-back: "as corrected on 'make it less…'"."""
        said = preview_of(" ".join(self.example.comment.split()), CITED_CHARS)
        return f"as corrected on {said!r}"


class ReadingMemory:
    """The labelled examples a reader consults, newest last; a later correction of the same
    comment replaces an earlier one. At most ``limit`` are kept (the newest)."""

    def __init__(
        self,
        examples: Sequence[LabelledExample] = (),
        threshold: float = THRESHOLD,
        limit: int = MAX_EXAMPLES_LOADED,
    ) -> None:
        self.threshold = threshold
        self.limit = limit
        self._by_text: dict[str, LabelledExample] = {}
        self._last: tuple[str, Recall | None] | None = None
        for example in examples:
            self.learn(example)

    def __len__(self) -> int:
        return len(self._by_text)

    def learn(self, example: LabelledExample) -> None:
        text = normalised(example.comment)
        if not text:
            return
        self._by_text.pop(text, None)  # re-inserted last: the newest correction of it
        self._by_text[text] = example
        while len(self._by_text) > self.limit:
            del self._by_text[next(iter(self._by_text))]
        self._last = None

    def recall(self, comment: str | None) -> Recall | None:
        """The closest corrected comment at or above the threshold, or None. Of equally close
        ones, the newest."""
        text = normalised(comment or "")
        if not text or not self._by_text:
            return None
        if self._last is not None and self._last[0] == text:
            return self._last[1]  # the cycle step asks twice (the reading, then the backend)
        texts = list(reversed(self._by_text))  # newest first: extractOne keeps the first best
        best = process.extractOne(
            text, texts, scorer=SCORER, processor=None, score_cutoff=self.threshold
        )
        found = None if best is None else Recall(self._by_text[best[0]], float(best[1]))
        self._last = (text, found)
        return found


MAX_WORKED_EXAMPLES = 8
MAX_WORKED_BYTES = 4_000  # what a prompt carries of the corrections, in UTF-8 bytes


def worked_examples(
    memory: ReadingMemory | None,
    texts: Sequence[str],
    rater: str | None = None,
    limit: int = MAX_WORKED_EXAMPLES,
    max_bytes: int = MAX_WORKED_BYTES,
) -> list[LabelledExample]:
    """The corrections most like ``texts`` (best first; this rater's before others' of equal
    relevance), as many as fit in ``max_bytes``: the worked examples a model reading those
    texts is shown."""
    if memory is None or not len(memory):
        return []
    query = normalised(" ".join(texts))
    ranked = sorted(
        memory._by_text.items(),
        key=lambda item: (SCORER(query, item[0]), rater is not None and item[1].rater == rater),
        reverse=True,
    )
    chosen: list[LabelledExample] = []
    used = 0
    for _, example in ranked[:limit]:
        size = len(example.comment.encode("utf-8")) + sum(len(w) + 4 for w in example.corrected)
        if used + size > max_bytes:
            break
        chosen.append(example)
        used += size
    return chosen
