"""Right, abstained and wrong: how the trainer's answers to feedback cases split, beside the
feedback-dev scorer's verdicts.

    .venv/bin/python -m bench.trainer_outcomes CASES.jsonl ANSWERS.jsonl

An answer whose agent is unchanged where the case asked for a change is *abstained* (the
reader said it could not read it, or read nothing); one that changed the agent and is not right
is a *wrong change*. The scorer (``../shared/feedback-dev/score.py``) decides right and harmful;
this splits the rest and prints the share of wrong changes among the changes made.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SCORER = Path(__file__).resolve().parents[2] / "shared" / "feedback-dev" / "score.py"


def outcomes(cases: Path, answers: Path) -> dict[str, list[str]]:
    verdicts = subprocess.run(
        [sys.executable, str(SCORER), str(cases), str(answers)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    by_id = {
        line.split()[1].rstrip(":"): line.split()[0]
        for line in verdicts
        if line[:5] in ("RIGHT", "WRONG", "HARM ")
    }
    given = {json.loads(line)["id"]: json.loads(line) for line in answers.read_text().splitlines()}
    split: dict[str, list[str]] = {"right": [], "abstained": [], "wrong": [], "harmful": []}
    for case_id, verdict in by_id.items():
        answer = given[case_id]
        unchanged = answer["agent_before"] == answer["agent_after"]
        if verdict == "RIGHT":
            split["right"].append(case_id)
        elif verdict == "HARM":
            split["harmful"].append(case_id)
        elif unchanged:
            split["abstained"].append(case_id)
        else:
            split["wrong"].append(case_id)
    return split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=Path)
    parser.add_argument("answers", type=Path)
    args = parser.parse_args()
    split = outcomes(args.cases, args.answers)
    given = {
        json.loads(line)["id"]: json.loads(line) for line in args.answers.read_text().splitlines()
    }
    changed = sum(a["agent_before"] != a["agent_after"] for a in given.values())
    for name, ids in split.items():
        print(f"{name}: {len(ids)}" + (f" ({', '.join(ids)})" if ids and name != "right" else ""))
    bad = len(split["wrong"]) + len(split["harmful"])
    share = bad / changed if changed else 0.0
    print(f"changes made: {changed}; wrong or harmful among them: {bad} ({share:.0%})")


if __name__ == "__main__":
    main()
