"""A reviewer over five cycles, through Temporal and the store: wishes accumulate, one is
reversed, one is repeated, and every verdict on the way is one a person would agree with."""

from __future__ import annotations

import json

from client import start_session
from domain.agent import AgentRef
from tests.conftest import awaiting, make_spec, wait_for_state
from trainer.credit_assignment import families_of
from trainer.prompt_segments import segments

# The reviewer's own words (not a development case's): cycle by cycle
REVIEWS = [
    (3, "Far too much text, and it reads like a legal memo. Keep it casual."),
    (6, "Much shorter now, nice. Could you lay it out as a bulleted list?"),
    (4, "The list chops the argument into fragments; go back to paragraphs."),
    (5, "Paragraphs read better. It is still too long though."),
    (8, "Good length now. Please end with a one-line takeaway."),
]


def families(prompt: str) -> set[str]:
    return {f for segment in segments(prompt) for f in families_of(segment)}


async def test_a_five_cycle_reviewer_is_listened_to(client, store, settings, run_worker):
    spec = make_spec()
    verdicts = []
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        for cycle, (value, comment) in enumerate(REVIEWS, start=1):
            await wait_for_state(handle, awaiting(cycle))
            await handle.signal("score", {"score": value, "comment": comment})
            state = await wait_for_state(handle, awaiting(cycle + 1))
            verdicts.append(state.last_verdict if cycle > 1 else None)
    lineage = spec.lineage_id("A")
    q = store.queries
    agent = {v: q.agent_definition(AgentRef(agent_id=lineage, version=v)) for v in range(1, 7)}

    # cycle 1: shorter and casual
    assert {"shorter", "casual"} <= families(agent[2].system_prompt)
    assert agent[2].parameters.max_tokens == agent[1].parameters.max_tokens  # a ceiling
    # cycle 2: the shortening is approved in the reviewer's words; bullets added, tone kept
    assert "the reviewer approves" in verdicts[1] and "Much shorter now" in verdicts[1]
    assert "Use bullet points, not paragraphs." in agent[3].system_prompt
    assert {"casual", "shorter"} <= families(agent[3].system_prompt)
    # cycle 3: the bullets are refuted by the request for paragraphs: rolled back, and the
    # paragraphs asked for in the same step; nothing else the reviewer asked for goes
    # in the chips' words, never the family's name
    assert verdicts[2].startswith("refuted: bullet points: the reviewer now asks for paragraphs")
    assert "bullet points, not" not in agent[4].system_prompt
    assert {"prose", "casual", "shorter"} <= families(agent[4].system_prompt)
    # cycle 4: paragraphs approved; "still too long" strengthens the shortening, never undoes it
    assert "paragraphs, no lists: the reviewer approves" in verdicts[3]
    # more words for brevity, never fewer tokens: the budget is a ceiling
    assert "Keep answers brief" in agent[5].system_prompt
    assert "Keep answers brief" not in agent[4].system_prompt
    assert agent[5].parameters.max_tokens == agent[4].parameters.max_tokens
    # cycle 5: validated, and the closing line is added
    assert verdicts[4].startswith("validated")
    final = agent[6]
    assert {"prose", "casual", "shorter", "summary_at_end"} <= families(final.system_prompt)
    assert "bullet points, not" not in final.system_prompt
    assert final.constraints == agent[1].constraints
    # no sentence of a comment was pasted into the prompt
    for _, comment in REVIEWS:
        for sentence in comment.split(". "):
            assert sentence.strip(". ").lower() not in final.system_prompt.lower()

    # the store holds every verdict with the words it rests on
    outcomes = q.events(lineage, ["evolution.outcome"])
    by_cycle = [{a["family"]: a for a in e.payload["aspects"]} for e in outcomes]
    assert by_cycle[0]["shorter"]["verdict"] == "validated"
    assert by_cycle[0]["shorter"]["quote"] == "Much shorter now"
    assert by_cycle[1]["bullets"]["verdict"] == "refuted"
    assert "paragraphs" in by_cycle[1]["bullets"]["quote"]
    assert by_cycle[2]["prose"]["verdict"] == "validated"
    rollback = q.evolution_records(lineage)[2]
    changes = json.loads(rollback.changes)
    assert any(c["reason"].startswith("rollback:") for c in changes)
    assert "rolled back bullet points" in " ".join(json.loads(rollback.plan)["notes"])
