"""Reading memory: which rapidfuzz scorer and threshold recall a corrected comment.

    .venv/bin/python -m bench.reading_memory

Over ``bench/data/reading_memory_pairs.jsonl`` (paraphrases that should be matched, and
different comments that should not — opposite wishes in the same words, other topics), prints
precision and recall per scorer and threshold, then the look-up time per comment against a
memory of 1k and 10k labelled examples (``trainer.reading.memory.ReadingMemory.recall``).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from rapidfuzz import fuzz

from domain.corrections import LabelledExample
from trainer.reading.memory import SCORER, ReadingMemory, normalised

PAIRS = Path(__file__).parent / "data" / "reading_memory_pairs.jsonl"
SCORERS = {
    "ratio": fuzz.ratio,
    "token_sort_ratio": fuzz.token_sort_ratio,
    "token_set_ratio": fuzz.token_set_ratio,
    "WRatio": fuzz.WRatio,
}
THRESHOLDS = (60, 65, 70, 75, 80, 85, 90, 95)
WORDS = [
    "make",
    "it",
    "shorter",
    "longer",
    "warmer",
    "colder",
    "less",
    "more",
    "formal",
    "casual",
    "stiff",
    "table",
    "bullets",
    "example",
    "cite",
    "sources",
    "numbers",
    "intro",
    "summary",
    "recap",
    "code",
    "snippet",
    "jargon",
    "engineers",
    "customers",
    "board",
    "report",
    "please",
    "too",
    "way",
    "bit",
    "the",
    "a",
    "and",
    "but",
    "for",
    "our",
    "this",
    "that",
    "with",
    "add",
    "drop",
    "keep",
    "lose",
]


def precision_recall() -> None:
    pairs = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    positives = sum(p["match"] for p in pairs)
    print(f"{len(pairs)} pairs ({positives} paraphrases, {len(pairs) - positives} different)")
    print(f"{'scorer':<18}" + "".join(f"{t:>12}" for t in THRESHOLDS) + "   (precision/recall)")
    for name, scorer in SCORERS.items():
        scores = [(scorer(normalised(p["a"]), normalised(p["b"])), p["match"]) for p in pairs]
        cells = []
        for t in THRESHOLDS:
            hit = sum(s >= t and m for s, m in scores)
            said = sum(s >= t for s, _ in scores)
            precision = hit / said if said else 1.0
            cells.append(f"{precision:.2f}/{hit / positives:.2f}")
        print(f"{name:<18}" + "".join(f"{c:>12}" for c in cells))


def lookup_time() -> None:
    rng = random.Random(46)
    queries = [" ".join(rng.choices(WORDS, k=rng.randint(3, 14))) for _ in range(200)]
    for size in (1_000, 10_000):
        examples = [
            LabelledExample(
                correction_id=f"c{i}",
                session_id="s",
                lineage_id="l",
                evaluation_id=f"e{i}",
                comment=" ".join(rng.choices(WORDS, k=rng.randint(3, 14))),
                corrected=["shorter"],
            )
            for i in range(size)
        ]
        started = time.perf_counter()
        memory = ReadingMemory(examples, limit=size)
        built = time.perf_counter() - started
        started = time.perf_counter()
        for query in queries:
            memory.learn(examples[0])  # a fresh look-up each time (no cached last answer)
            memory.recall(query)
        per = (time.perf_counter() - started) / len(queries)
        print(
            f"{size:>6,} examples ({SCORER.__name__}): built in {built * 1000:.1f} ms, "
            f"{per * 1000:.2f} ms per look-up"
        )


if __name__ == "__main__":
    precision_recall()
    lookup_time()
