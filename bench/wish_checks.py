"""Wishes as checks: the cost of checking one output against a lineage's active wishes.

    .venv/bin/python -m bench.wish_checks [--outputs 1000]

Builds 1,000 real outputs of the offline model — the example sessions' agents on their inputs,
after combinations of the instructions the trainer writes (length, format, tone, structure),
at several temperatures — then checks each against 10 active wishes (a length amount, a table,
no bullets, no hedging, recommendation first, summary at the end, a language, two examples,
prose, a banned phrase) with ``trainer.checks.check_all`` (one Markdown parse, ten checks), and
prints the median and p99 time per output, the same without the language check (the
detector's share), and with two more: plain language (a reading-ease measure) and the closing
summary's language.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from pathlib import Path

from domain.change_families import FAMILIES
from domain.checks import ActiveWish
from domain.spec import load_spec
from domain.trainer import Amount
from runner.model_backend import ChatMessage, ModelRequest
from runner.offline_model import OfflineModel
from trainer.checks import Document, check_all

EXAMPLES = Path(__file__).parent.parent / "examples"
INSTRUCTIONS = [
    "",
    *(
        FAMILIES[f].instruction or ""
        for f in ("shorter", "longer", "bullets", "numbered", "table", "headings", "prose")
    ),
    *(
        FAMILIES[f].instruction or ""
        for f in ("formal", "casual", "warmer", "conclusion_first", "summary_at_end", "example")
    ),
    "Keep answers to about 90 words.",
    "Keep answers under 150 words.",
]
WISHES = [
    ActiveWish(
        family="shorter", amount=Amount(kind="limit", value=90), quote="about 90 words", cycle=1
    ),
    ActiveWish(family="table", cycle=1),
    ActiveWish(family="bullets", action="remove", cycle=2),
    ActiveWish(family="direct", quote="no hedging", cycle=2),
    ActiveWish(family="conclusion_first", cycle=3),
    ActiveWish(family="summary_at_end", cycle=3),
    ActiveWish(family="language", detail="English", cycle=4),
    ActiveWish(family="example", amount=Amount(kind="count", value=2, unit="examples"), cycle=4),
    ActiveWish(family="prose", cycle=5),
    ActiveWish(family="banned", action="remove", detail="worth noting", cycle=5),
]
MORE = [
    ActiveWish(family="simpler", detail="leverage synergies to optimise throughput", cycle=6),
    ActiveWish(family="language", detail="German@summary", cycle=6),
]


def outputs(count: int) -> list[str]:
    """``count`` offline-model outputs of the example agents, all different."""
    agents, inputs = [], []
    for name in ("essay-session.yaml", "research-session.yaml"):
        spec = load_spec(EXAMPLES / name)
        agents += [lineage.agent for lineage in spec.lineages]
        inputs += spec.inputs
    model = OfflineModel()
    found: dict[str, None] = {}
    combos = itertools.product(
        itertools.combinations(INSTRUCTIONS, 2), agents, inputs, (0.2, 0.5, 0.7, 0.9, 1.0)
    )
    for (first, second), agent, question, temperature in combos:
        request = ModelRequest(
            model="offline-bench",
            system=f"{agent.system_prompt} {first} {second}".strip(),
            max_tokens=agent.parameters.max_tokens,
            temperature=temperature,
            messages=[ChatMessage(role="user", content=question)],
        )
        found[model.reply(request).text] = None
        if len(found) >= count:
            break
    return list(found)


def timed(texts: list[str], wishes: list[ActiveWish]) -> list[float]:
    times = []
    for text in texts:
        started = time.perf_counter()
        check_all(text, wishes)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=int, default=1000)
    args = parser.parse_args()
    texts = outputs(args.outputs)
    words = sorted(Document.of(t).words for t in texts)
    print(
        f"{len(texts)} outputs, {words[0]} to {words[-1]} words (median "
        f"{statistics.median(words):.0f}), {len(WISHES)} wishes each"
    )
    timed(texts[:50], WISHES + MORE)  # warm: the parser, the cue patterns and the detector's models
    for label, wishes in (
        ("all 10 wishes", WISHES),
        ("without the language check", [w for w in WISHES if w.family != "language"]),
        ("12 wishes: plain language and the summary's language too", WISHES + MORE),
    ):
        times = sorted(timed(texts, wishes))
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(f"{label}: median {statistics.median(times):.2f} ms, p99 {p99:.2f} ms per output")


if __name__ == "__main__":
    main()
