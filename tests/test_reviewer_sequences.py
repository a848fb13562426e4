"""The reviewer-sequences bench plays each sequence through a real lineage workflow (the suite's
dev server, the project's worker) and writes the answers ``trainer.evaluate --sequences``
writes: the agents in them are the ones the store holds, and each step says back what the
lineage read and did."""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session, select

from bench import reviewer_sequences
from domain.agent import AgentRef
from domain.spec import slugify
from store.tables import LineageRow
from tests.conftest import make_spec
from trainer.backends import TrainerBackends
from trainer.evaluate import FeedbackSequence, agent_json, play

# The test's own wording, not the development sequences'
SEQUENCES = [
    {
        "id": "own/trim then headings",
        "steps": [
            {"score": 3, "comment": "Far too long for a quick read; trim it down."},
            {"score": 7, "comment": "Better length. Please add section headings."},
        ],
    },
    {"id": "own-happy", "steps": [{"score": 9, "comment": "Lovely, leave it exactly as it is."}]},
]


@pytest.mark.every_backend
async def test_sequences_through_the_workflows_answer_with_the_stores_agents(
    client, store, settings
):
    spec = make_spec(inputs=["Explain pair programming to a new team lead."])
    sequences = [FeedbackSequence.model_validate(s) for s in SEQUENCES]

    answers = await reviewer_sequences.play_all(
        client, store, settings, spec, "A", sequences, concurrency=2
    )

    assert [a["id"] for a in answers] == ["own/trim then headings", "own-happy"]
    lineages = {row.session_id: row.id for row in _lineages(store)}
    assert len(lineages) == 2  # a session of its own per sequence
    for answer in answers:
        lineage_id = next(lid for sid, lid in lineages.items() if _slug(answer["id"]) in sid)
        versions = [row.version for row in store.queries.agent_versions(lineage_id)]
        first = store.queries.agent_definition(AgentRef(agent_id=lineage_id, version=versions[0]))
        last = store.queries.agent_definition(AgentRef(agent_id=lineage_id, version=versions[-1]))
        assert answer["agent_before"] == agent_json(first) == agent_json(spec.lineages[0].agent)
        assert answer["agent_after"] == agent_json(last)
        assert answer["steps"][-1]["agent_version"] == versions[-1]
        # every score is in the store, with the comment as the rater sent it
        scored = [(e.score, e.comment) for e in store.queries.evaluations(lineage_id)]
        given = next(s for s in SEQUENCES if s["id"] == answer["id"])["steps"]
        assert scored == [(s["score"], s["comment"]) for s in given]

    trimmed, happy = answers
    assert trimmed["agent_after"] != trimmed["agent_before"]
    assert happy["agent_after"] == happy["agent_before"]
    assert [s["agent_version"] for s in trimmed["steps"]] == [2, 3]
    # the second score judged the first change, as the store's log has it
    assert trimmed["steps"][0]["verdict"] is None
    assert trimmed["steps"][1]["verdict"] and trimmed["steps"][1]["aspects"]
    for step in trimmed["steps"] + happy["steps"]:
        assert step["reading"].startswith("Read as:")
        assert step["summary"] == step["evolution"]

    # the format of trainer.evaluate --sequences, and on plain sequences the same agents
    backend = TrainerBackends(settings).get("rules", "unused")
    for sequence, answer in zip(sequences, answers, strict=True):
        expected = await play(backend, spec.lineages[0].agent, sequence)
        assert set(expected) == set(answer)
        for theirs, ours in zip(expected["steps"], answer["steps"], strict=True):
            assert set(theirs) | {"reading", "evolution", "agent_version"} == set(ours)
            # a lineage's verdict also cites what its output measured (the evaluation has no
            # output): the reviewer's part is the same
            assert ours["verdict"] == theirs["verdict"] or ours["verdict"].startswith(
                f"{theirs['verdict']}; "
            )
        assert json.dumps(answer["agent_after"]) == json.dumps(expected["agent_after"])


def test_a_bad_sequence_file_is_refused_before_anything_starts(tmp_path, capsys):
    bad = tmp_path / "sequences.jsonl"
    bad.write_text(
        json.dumps(SEQUENCES[1]) + "\n" + json.dumps({"id": "x", "steps": []}) + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "answers.jsonl"
    assert reviewer_sequences.cli([str(bad), "--out", str(out)]) == 2
    assert f"{bad}:2: not a feedback sequence (steps:" in capsys.readouterr().err
    assert not out.exists()


def test_an_agent_on_a_claude_model_is_refused(tmp_path, capsys):
    spec = make_spec()
    agent = spec.lineages[0].agent.model_dump(by_alias=True)
    agent["parameters"]["model"] = "claude-sonnet-5"
    path = tmp_path / "sequences.jsonl"
    path.write_text(json.dumps({**SEQUENCES[1], "agent": agent}) + "\n", encoding="utf-8")
    assert reviewer_sequences.cli([str(path), "--out", str(tmp_path / "a.jsonl")]) == 2
    assert "'claude-sonnet-5' is not an offline model" in capsys.readouterr().err


def test_a_claude_trainer_without_a_key_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    path = tmp_path / "sequences.jsonl"
    path.write_text(json.dumps(SEQUENCES[1]) + "\n", encoding="utf-8")
    out = tmp_path / "answers.jsonl"
    assert reviewer_sequences.cli([str(path), "--out", str(out), "--trainer", "claude"]) == 2
    assert "ANTHROPIC_API_KEY is not set" in capsys.readouterr().err
    assert not out.exists()


def _lineages(store):
    with Session(store.engine) as session:
        return list(session.exec(select(LineageRow)))


def _slug(sequence_id: str) -> str:
    return slugify(sequence_id)[:30].strip("-")
