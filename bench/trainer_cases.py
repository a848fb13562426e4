"""How well a trainer learns from what reviewers write: every case set against every example
agent, through ``trainer.evaluate``, scored by the feedback-dev scorer.

    .venv/bin/python -m bench.trainer_cases [--trainer rules] [--scorer PATH] [CASES.jsonl ...]

Without case files it runs the development cases (``../shared/feedback-dev/cases.jsonl``, when
present) and the paraphrase sets in this repository, then the reviewer sequences (development
sequences and ``bench/data/sequences_*.jsonl``), each played cycle after cycle through the cycle
step (``--sequences``). The scorers are ``feedback-dev/score.py`` (``--scorer``) and
``score_sequences.py`` beside it; their last lines are collected here into one table. Exits
non-zero if any run was harmful.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "feedback-dev"
SETS = [
    SHARED / "cases.jsonl",
    ROOT / "tests" / "data" / "feedback_paraphrases.jsonl",
    ROOT / "bench" / "data" / "feedback_holdout.jsonl",
    ROOT / "bench" / "data" / "feedback_blind.jsonl",
    ROOT / "bench" / "data" / "feedback_final.jsonl",
    ROOT / "bench" / "data" / "feedback_unseen.jsonl",
    ROOT / "bench" / "data" / "feedback_sixth.jsonl",
    ROOT / "bench" / "data" / "feedback_seventh.jsonl",
    ROOT / "bench" / "data" / "feedback_eighth.jsonl",
    ROOT / "bench" / "data" / "feedback_languages.jsonl",
    ROOT / "bench" / "data" / "feedback_ironies.jsonl",
    ROOT / "bench" / "data" / "feedback_wishes.jsonl",
]
SEQUENCE_SETS = [
    SHARED / "sequences.jsonl",
    ROOT / "bench" / "data" / "sequences_first.jsonl",
    ROOT / "bench" / "data" / "sequences_wishes.jsonl",
]
AGENTS = [
    ("examples/essay-session.yaml", "A"),
    ("examples/essay-session.yaml", "B"),
    ("examples/research-session.yaml", "A"),
]


def score(scorer: Path, cases: Path, answers: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(scorer), str(cases), str(answers)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cases", nargs="*", type=Path)
    parser.add_argument("--trainer", default="rules")
    parser.add_argument("--scorer", type=Path, default=SHARED / "score.py")
    args = parser.parse_args()
    if not args.scorer.exists():
        print(f"no scorer at {args.scorer} (pass --scorer feedback-dev/score.py)")
        return 2
    sets = args.cases or [s for s in SETS if s.exists()]
    if not args.cases:
        sets += [s for s in SEQUENCE_SETS if s.exists()]
    harmful = 0
    print(f"{'cases':<28} {'agent':<34} {'result':<44} seconds")
    with tempfile.TemporaryDirectory() as tmp:
        for cases in sets:
            for spec, lineage in AGENTS:
                answers = Path(tmp) / f"{cases.stem}-{Path(spec).stem}-{lineage}.jsonl"
                sequences = cases in SEQUENCE_SETS
                started = time.perf_counter()
                done = subprocess.run(
                    [
                        sys.executable, "-m", "trainer.evaluate", str(cases), "--spec", spec,
                        "--lineage", lineage, "--trainer", args.trainer, "--out", str(answers),
                        *(["--sequences"] if sequences else []),
                    ],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                )  # fmt: skip
                if done.returncode != 0:
                    print(f"{cases.name}: trainer.evaluate failed:\n{done.stderr[-2000:]}")
                    return 2
                elapsed = time.perf_counter() - started
                scorer = args.scorer.with_name("score_sequences.py") if sequences else args.scorer
                line = score(scorer, cases, answers)
                harmful += int(line.split("harmful:")[1].split(",")[0])
                agent = f"{Path(spec).stem} {lineage}"
                print(f"{cases.name:<28} {agent:<34} {line:<44} {elapsed:.1f}")
    return 1 if harmful else 0


if __name__ == "__main__":
    sys.exit(main())
