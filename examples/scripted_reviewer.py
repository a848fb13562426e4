"""A scripted reviewer with fixed preferences, to watch a lineage learn without a human.

    .venv/bin/python -m examples.scripted_reviewer lineage-essay-demo-A [--cycles 6]

It prefers short (at most 120 words), bulleted, plain-spoken answers, and says so in its own
words, differently each cycle ("I gave up halfway, this could lose two thirds of its words"),
never in the trainer's vocabulary. It reads each output from the lineage's `state` query and
sends its score with the `score` signal.
"""

from __future__ import annotations

import argparse
import asyncio
import re

from pydantic import BaseModel

FORMAL_MARKERS = ("In conclusion", "This analysis", "The following discussion", "Overall, the")

# How this reviewer says what it wants: its own words, never the trainer's, and a different
# wording each cycle, so a lineage that learns is reading a person, not echoing itself.
SAYS = {
    "far too long": (
        "I gave up halfway, this could lose two thirds of its words",
        "Far more than anyone has time for on a Monday morning",
        "It drags on and on",
    ),
    "a bit too long": (
        "Still a little more than I can take in at a glance",
        "Nearly there, but trim another sentence or two",
        "Tighten it a touch more",
    ),
    "not a list": (
        "I can't skim a dense block like this, give me one point per line with a dash",
        "Break it up into points I can scan",
        "Dense block of text, list the points instead",
    ),
    "stiff": (
        "It sounds like a legal memo, talk to me like a colleague",
        "So starchy, relax the register",
        "Reads like a press release",
    ),
}


class Review(BaseModel):
    score: float
    comment: str


def review(text: str, words: int, cycle: int = 1) -> Review:
    score, problems = 10.0, []
    if words > 150:
        score, problems = score - 4, [*problems, "far too long"]
    elif words > 120:
        score, problems = score - 2, [*problems, "a bit too long"]
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or sum(bool(re.match(r"^\s*[-*•]\s", line)) for line in lines) < len(lines) / 2:
        score, problems = score - 3, [*problems, "not a list"]
    if any(marker in text for marker in FORMAL_MARKERS):
        score, problems = score - 1, [*problems, "stiff"]
    said = [SAYS[p][(cycle - 1) % len(SAYS[p])] for p in problems]
    return Review(score=score, comment=". ".join(said) + "." if said else "Spot on, thank you.")


async def drive(workflow_id: str, cycles: int) -> list[float]:
    from client import connect
    from domain.settings import Settings
    from workflows.lineage import LineageWorkflow

    client = await connect(Settings.from_env())
    handle = client.get_workflow_handle(workflow_id)
    scores: list[float] = []
    for _ in range(cycles):
        while True:
            state = await handle.query(LineageWorkflow.state)
            if state.status == "awaiting_score" and len(state.score_history) == len(scores):
                break
            await asyncio.sleep(0.5)
        verdict = review(state.latest_output_preview or "", state.latest_output_words, state.cycle)
        print(
            f"cycle {state.cycle} (v{state.agent_version}): {verdict.score:g} — {verdict.comment}"
        )
        await handle.signal("score", {**verdict.model_dump(), "rater": "script"})
        scores.append(verdict.score)
        if verdict.score >= 8:
            break
    return scores


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workflow_id")
    parser.add_argument("--cycles", type=int, default=6)
    args = parser.parse_args()
    asyncio.run(drive(args.workflow_id, args.cycles))
