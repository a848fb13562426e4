"""Every correction teaches the reader (issue #46): a comment close to a corrected one is read as
the correction said, citing it; an unrelated one is read by the cues; structured wants win."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domain import wants
from domain.agent import AgentRef
from domain.corrections import Correction, LabelledExample, correction_key
from domain.feedback import ScoreInput
from domain.lineage import CycleStepInput
from domain.settings import Settings
from store import Store
from tests.store_story import AGENT, full_story, register
from trainer import cycle_step, evaluate
from trainer.backends import RulesTrainer, TrainerBackends
from trainer.cycle_step import LineageMemory
from trainer.reading.memory import ReadingMemory
from trainer.reward_analyzer import analyze

# Comments the cue tables cannot read, so that only a correction can teach them
ODD = "the flibber is all zorp and the grommets are gone"


def example(comment: str, corrected: list[str], n: int = 0) -> LabelledExample:
    return LabelledExample(
        correction_id=f"c{n}",
        session_id="s1",
        lineage_id="s1-A",
        evaluation_id=f"e{n}",
        comment=comment,
        corrected=corrected,
        created_at=n,
    )


def test_a_close_paraphrase_is_read_as_corrected_and_cites_the_correction():
    memory = ReadingMemory([example(ODD, ["bullets", "example:1"])])
    read = analyze(5, "The flibber's all zorp, and the grommets are gone!", [], memory=memory)
    assert [(a.want, a.action) for a in read.aspects] == [("bullets", "add"), ("example", "add")]
    assert read.aspects[1].amount is not None and read.aspects[1].amount.value == 1
    assert all(a.quote and a.quote.startswith("as corrected on 'the flibber") for a in read.aspects)
    unread = analyze(5, ODD, [])  # without the memory the cues find nothing in it
    assert not any(a.want for a in unread.aspects)


def test_an_unrelated_comment_is_read_by_the_cues():
    memory = ReadingMemory([example(ODD, ["bullets"])])
    assert memory.recall("Way too long, wanted quick bullets about the budget") is None
    read = analyze(3, "Way too long.", [], memory=memory)
    assert [a.want for a in read.aspects] == ["shorter"]
    assert "corrected" not in (read.aspects[0].quote or "")


def test_structured_wants_win_over_memory_and_the_newest_correction_over_older():
    memory = ReadingMemory([example(ODD, ["bullets"], 1), example(ODD, ["table"], 2)])
    assert [a.want for a in analyze(5, ODD, [], memory=memory).aspects] == ["table"]
    given = analyze(5, ODD, [], wanted=["warmer"], memory=memory)
    assert [(a.want, a.quote) for a in given.aspects] == [("warmer", "wants warmer")]
    nothing = ReadingMemory([example(ODD, [], 3)])  # corrected to: asks for nothing
    assert analyze(5, ODD, [], memory=nothing).aspects == []


def test_memory_is_bounded_and_keeps_the_newest():
    memory = ReadingMemory(
        [example(f"comment number {i} zorp", ["bullets"], i) for i in range(5)], limit=3
    )
    assert len(memory) == 3
    assert memory.recall("comment number 0 zorp") is None or (
        memory.recall("comment number 0 zorp").example.created_at >= 2  # type: ignore[union-attr]
    )


@pytest.mark.parametrize(
    "want", ["warmer", "remove:example", "shorter:half", "example:1", "undo", "keep:bullets"]
)
def test_a_reading_renders_back_to_the_wants_it_parses_from(want: str):
    assert wants.render(wants.parse(want)) == want
    assert wants.wants_of([wants.parse(want), wants.parse(want)]) == [want]


async def test_the_cycle_step_acts_on_the_corrected_reading_and_says_why():
    memory = LineageMemory(
        session_id="s1", lineage_id="s1-A", corrections=[example(ODD, ["bullets"])]
    )
    step = await cycle_step.take(RulesTrainer(), AGENT, memory, 4, ODD.upper())
    assert "bullet" in step.agent.system_prompt.lower()
    assert "as corrected on 'the flibber" in cycle_step.said_back(step)
    plain = await cycle_step.take(
        RulesTrainer(), AGENT, LineageMemory(session_id="s1", lineage_id="s1-A"), 4, ODD
    )
    assert plain.agent.system_prompt == AGENT.system_prompt


def _correct(store: Store, session: str, lineage: str, comment: str, corrected: list[str]) -> None:
    store.recorder.record_correction(
        Correction(
            correction_id=correction_key(lineage, "e1", corrected),
            session_id=session,
            lineage_id=lineage,
            evaluation_id="e1",
            comment=comment,
            corrected=corrected,
        )
    )


@pytest.mark.parametrize("shared", [False, True])
async def test_take_cycle_step_loads_the_sessions_corrections_or_every_sessions(
    store: Store, shared: bool
):
    from activities.trainer import TrainerActivities

    full_story(store)
    register(store, "s2-A", session="s2")
    _correct(store, "s2", "s2-A", ODD, ["table"])  # another session's
    activities = TrainerActivities(store, TrainerBackends(Settings()), shared_corrections=shared)
    inp = CycleStepInput(
        session_id="s1",
        lineage_id="s1-A",
        evaluation_id="e3",
        artifact_id="s1-A:c1:artifact",
        rollout_id="s1-A:c1",
        cycle=3,
        agent=AgentRef(agent_id="s1-A", version=1),
        score=ScoreInput(score=4, comment=ODD),
    )
    decision = await activities.take_cycle_step(inp)
    assert decision.reading is not None
    assert ("as corrected on" in decision.reading) is shared
    _correct(store, "s1", "s1-A", ODD, ["bullets"])  # the session's own, now in the store
    decision = await activities.take_cycle_step(inp)
    assert decision.reading is not None and decision.reading.startswith("Read as: bullet points")
    assert [x.corrected for x in store.queries.labelled_examples("s1")] == [["bullets"]]


async def test_evaluate_corrections_learns_from_each_miss(tmp_path: Path):
    """A stream of cases read in order: the first miss is corrected and the second pass, and a
    paraphrase first met afterwards, are read right."""
    cases = [
        {"id": "a", "score": 4, "comment": ODD, "change": ["bullets"]},
        {"id": "b", "score": 3, "comment": "Way too long.", "change": ["shorter"]},
    ]
    then = [
        {
            "id": "p",
            "score": 4,
            "comment": "Flibber is all zorp; the grommets are gone",
            "change": ["bullets"],
        }
    ]
    files = {}
    for name, rows in (("cases", cases), ("then", then)):
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(r) + "\n" for r in rows))

    def judge(case: dict, answered: dict) -> bool:  # read as the gold families
        read = {wants.parse(w).want for w in answered["read_as"]}
        return set(case["change"]) <= read

    def stream(path: Path) -> list[tuple[evaluate.FeedbackCase, dict]]:
        return list(zip(evaluate.read_cases(path), evaluate.read_raw(path), strict=True))

    report, answers = await evaluate.play_corrections(
        RulesTrainer(), AGENT, stream(files["cases"]), judge, stream(files["then"])
    )
    assert report == {
        "cases": 2,
        "first_pass": 1,
        "corrections": 1,
        "second_pass": 2,
        "then_cases": 1,
        "then": 1,
    }
    assert [a["right"] for a in answers] == [False, True]
    assert "bullet" not in answers[0]["agent_after"]["systemPrompt"].lower()
    assert answers[0]["read_as"] == []
    assert evaluate.gold_wants(["shorter", "maxTokens_down"], ["shorter:100"]) == ["shorter:100"]
    assert evaluate.gold_wants(["none"], ["warmer"]) == []
    assert evaluate.gold_wants(["language:french"], []) is None


def test_worked_examples_are_the_most_relevant_corrections_bounded_in_bytes():
    from trainer.reading.memory import worked_examples

    memory = ReadingMemory(
        [
            example("The tone is icy, like a parking ticket.", ["warmer"], 1),
            example("Far too many bullet points everywhere.", ["prose"], 2),
            *(
                example(f"Unrelated remark number {i} " + "x" * 300, ["table"], 10 + i)
                for i in range(30)
            ),
        ]
    )
    chosen = worked_examples(memory, ["So icy it reads like a parking fine."])
    assert chosen[0].corrected == ["warmer"]
    assert sum(len(e.comment.encode()) for e in chosen) <= 4_000 and len(chosen) <= 8
    assert worked_examples(None, ["anything"]) == []
