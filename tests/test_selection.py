"""Selection across a session's lineages, through Temporal: a branch from any version (byte for
byte, with provenance, evolving on its own), a promoted champion (locked, its competitors'
scores recorded, its outputs preferred to theirs in the export), the champion's spec starting a
new session, and the front of the demo's session after a fixed script of scores."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from client import (
    branch_lineage,
    champion_spec,
    promote_lineage,
    start_session,
)
from domain.agent import AgentRef
from domain.events import LineageBranched, LineageLocked, LineagePromoted, LineageUnlocked
from domain.selection import VersionRecord, front
from domain.spec import load_spec, parse_spec
from store.eventstore import event_log
from store.exports.exporter import ExportFilters, export
from store.exports.materializer import Materializer
from store.tables import AgentVersionRow, PayloadBlob, TrainingExampleRow
from store.views.time_travel import history
from tests.conftest import (
    awaiting,
    eventually,
    make_spec,
    starter_cli,
    threaded_starter_cli,
    training_data_cli,
    wait_for_state,
)
from tests.test_durability import replay
from workflows.lineage import LineageWorkflow

EXAMPLES = TrainingExampleRow.__table__  # type: ignore[attr-defined]
QUESTIONS = [
    "Explain the four-day work week for small software teams.",
    "Explain code review for a team of three.",
    "Explain on-call rotations for a small team.",
]


async def score(handle: Any, cycle: int, value: float, comment: str | None = None) -> Any:
    """Score cycle ``cycle``'s output once it awaits one; the state once the next does."""
    await wait_for_state(handle, awaiting(cycle))
    payload: dict[str, Any] = {"score": value, "cycle": cycle, "rater": "ana"}
    if comment:
        payload["comment"] = comment
    await handle.execute_update(LineageWorkflow.submit_score, payload)
    return await wait_for_state(handle, awaiting(cycle + 1))


def _definition_blob(store, lineage_id: str, version: int) -> str:
    with store.engine.connect() as conn:
        digest = conn.execute(
            select(AgentVersionRow.definition_hash).where(
                AgentVersionRow.id == f"{lineage_id}@{version}"
            )
        ).scalar_one()
        return conn.execute(select(PayloadBlob.content).where(PayloadBlob.hash == digest)).one()[0]


def _lineage_events(store, lineage_id: str) -> list[event_log.StoredEvent]:
    with store.engine.connect() as conn:
        return [e for e in event_log.read(conn) if e.lineage_id == lineage_id]


async def test_a_branch_from_v3_starts_byte_identical_with_provenance_and_evolves_on_its_own(
    client, store, settings, run_worker, temporal_address
):
    spec = make_spec(labels=("A", "B"), inputs=QUESTIONS)
    a = spec.lineage_id("A")
    async with run_worker():
        handle_a, _ = await start_session(client, spec, settings.task_queue)
        await score(handle_a, 1, 3, "Way too long, wanted quick bullets")
        state_a = await score(handle_a, 2, 5, "Better, and make it warmer")
        assert state_a.agent_version == 3 and state_a.active_wishes

        # `training-camp branch` as a user runs it: the next free label, C
        cli = threaded_starter_cli(temporal_address, settings.database_url)
        c = spec.lineage_id("C")
        shown = await cli("branch", a, "--from", "v3", "--rater", "ana")
        assert f"C ({c}) started from {a} v3: workflow lineage-{c}" in shown
        handle_c = client.get_workflow_handle(f"lineage-{c}")
        state_c = await wait_for_state(handle_c, awaiting(1))

        # the same agent, byte for byte, and the same standing wishes (its outputs are checked
        # against them from its first cycle)
        assert _definition_blob(store, c, 1) == _definition_blob(store, a, 3)
        assert store.queries.agent_definition(AgentRef(agent_id=c, version=1)) == (
            store.queries.agent_definition(AgentRef(agent_id=a, version=3))
        )
        assert state_c.agent_version == 1
        assert state_c.active_wishes == state_a.active_wishes
        assert state_c.asked_for == state_a.asked_for
        assert [check.family for check in state_c.latest_checks] == [
            wish.family for wish in state_a.active_wishes
        ]
        # provenance: the branch's first event names its parent and version
        first = _lineage_events(store, c)[0]
        assert isinstance(first.data, LineageBranched)
        assert (first.data.parent_lineage_id, first.data.parent_version) == (a, 3)
        assert first.data.rater == "ana"
        # and the change log says so first
        assert history(store.engine, c)[0].summary == f"branched from {a} v3"
        # blame across the branch: each instruction from the version of A that wrote it
        blame_a = {p.segment: p for p in store.queries.prompt_provenance(a, 3)}
        blame_c = store.queries.prompt_provenance(c)
        assert blame_c and all(p.lineage_label == "A" for p in blame_c)
        assert {(p.segment, p.version, p.evolution_id) for p in blame_c} == {
            (s, p.version, p.evolution_id) for s, p in blame_a.items()
        }
        assert any(p.since == "A v2" for p in blame_c)

        # it evolves on its own: C's score makes C v2; A stays on v3
        state_c = await score(handle_c, 1, 4, "Far too formal, talk to me like a colleague")
        assert state_c.agent_version == 2
        assert (await handle_a.query(LineageWorkflow.state)).agent_version == 3
        assert [r.version for r in store.queries.agent_versions(a)] == [1, 2, 3]
        records = store.queries.evolution_records(c)
        assert [(r.from_version, r.to_version) for r in records] == [(1, 2)]

        # refused: a version A never made, a lineage of another session, a label taken
        with pytest.raises(ValueError, match="has no v9"):
            await branch_lineage(client, store, a, 9)
        with pytest.raises(ValueError, match="a branch starts from a lineage of its own session"):
            await branch_lineage(client, store, a, 2, session="another-session")
        with pytest.raises(ValueError, match="has a lineage B already"):
            await branch_lineage(client, store, a, 2, label="B")


async def test_promoting_b_locks_it_over_a_and_c_with_their_scores_and_exports_the_pairs(
    client, store, settings, run_worker, temporal_address, tmp_path
):
    spec = make_spec(
        labels=("A", "B"), inputs=QUESTIONS, prompts={"B": "You are a friendly coach. Be warm."}
    )
    a, b = spec.lineage_id("A"), spec.lineage_id("B")
    async with run_worker():
        handles = dict(
            zip("AB", await start_session(client, spec, settings.task_queue), strict=True)
        )
        await score(handles["A"], 1, 3, "Way too long, wanted quick bullets")
        await score(handles["B"], 1, 8)  # no comment: nothing to change, B stays on v1
        made = await branch_lineage(client, store, a, 1)
        c = made.lineage_id
        await score(made.handle, 1, 4, "Far too formal")
        await score(handles["A"], 2, 5)
        await score(handles["B"], 2, 9)

        # `training-camp promote` as a user runs it: B at v1 over A and C, with their scores
        cli = threaded_starter_cli(temporal_address, settings.database_url)
        shown = await cli("promote", b, "--version", "v1", "--reason", "warmest")
        assert f"{b} v1 is the session's champion (locked)" in shown
        assert f"over {a}: latest score 5" in shown and f"over {c}: latest score 4" in shown
        state_b = await handles["B"].query(LineageWorkflow.state)
        assert state_b.locked and state_b.champion_version == 1
        # the others go on evolving: a promotion stops none unless asked to
        assert not (await handles["A"].query(LineageWorkflow.state)).locked
        assert (await made.handle.query(LineageWorkflow.state)).status != "stopped"

        locks = [e.data for e in _lineage_events(store, b) if isinstance(e.data, LineageLocked)]
        assert [(x.competing_lineage_ids, x.competitor_scores) for x in locks] == [
            ([a, c], {a: 5.0, c: 4.0})
        ]
        (promoted,) = [
            e.data for e in _lineage_events(store, b) if isinstance(e.data, LineagePromoted)
        ]
        assert (promoted.version, promoted.competing_lineage_ids, promoted.reason) == (
            1,
            [a, c],
            "warmest",
        )
        assert promoted.competitor_scores == {a: 5.0, c: 4.0}
        assert store.queries.lineage(b).locked

        # the pairs it implies: each output of B v1 over each of A's and C's on the same input
        # (B v1 made cycles 1-3: every one of its outputs)
        Materializer(store.engine).run()
        outputs = {lineage: store.queries.artifacts(lineage) for lineage in (a, b, c)}
        # (as answers: C started as A v1, so its first output is A's first, one pair)
        expected = {
            (mine.content_hash, theirs.content_hash)
            for mine in outputs[b]
            for rival in (a, c)
            for theirs in outputs[rival]
            if theirs.cycle == mine.cycle and theirs.content_hash != mine.content_hash
        }
        assert len(expected) == 4  # cycles 1-3 of A, cycle 2 of C
        with store.engine.connect() as conn:
            rows = (
                conn.execute(select(EXAMPLES).where(EXAMPLES.c.example_type == "preference"))
                .mappings()
                .all()
            )
        # each held: by a comparison (B scored higher on that cycle), the lock (B's latest
        # scored output over theirs of its cycle) or the promotion, which adds only pairs no
        # other row holds
        held = [(r["chosen_hash"], r["rejected_hash"]) for r in rows]
        promoted_pairs = [
            (r["chosen_hash"], r["rejected_hash"]) for r in rows if r["source"] == "promotion"
        ]
        assert expected <= set(held) and promoted_pairs
        assert all(held.count(pair) == 1 and pair in expected for pair in promoted_pairs)
        exported = export(
            store.engine, "trl-dpo", tmp_path / "dpo", ExportFilters(min_score_delta=2)
        )
        lines = [
            json.loads(line)
            for path in exported.files.values()
            for line in Path(path).read_text().splitlines()
        ]
        texts = {o.content_hash: store.queries.payload(o.content_hash) for o in outputs[b]}
        texts |= {o.content_hash: store.queries.payload(o.content_hash) for o in outputs[a]}
        texts |= {o.content_hash: store.queries.payload(o.content_hash) for o in outputs[c]}
        pairs = {(r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in lines}
        assert {(texts[m], texts[t]) for m, t in expected} <= pairs

        # the branch's first run and the run B was promoted in replay on today's code (in
        # and out of the sandbox)
        first_c = client.get_workflow_handle(
            made.handle.id, run_id=made.handle.first_execution_run_id
        )
        await replay(await first_c.fetch_history())
        promoted_in = await client.get_workflow_handle(handles["B"].id).fetch_history()
        assert any(
            e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            == "promote"
            for e in promoted_in.events
            if e.HasField("workflow_execution_update_accepted_event_attributes")
        )
        await replay(promoted_in)

        # unlocking is recorded too; --stop-others stops every other lineage
        await handles["B"].signal("unlock", {"reason": "let it learn more"})
        await eventually(lambda: not store.queries.lineage(b).locked)
        unlocked = [e for e in _lineage_events(store, b) if isinstance(e.data, LineageUnlocked)]
        assert [u.data.reason for u in unlocked] == ["let it learn more"]
        again, stopped = await promote_lineage(client, b, stop_others=True)
        assert again.newly_locked and stopped == [a, c]
        for handle in (handles["A"], made.handle):
            assert (await handle.query(LineageWorkflow.state)).status == "stopped"
        with pytest.raises(ValueError, match="has made v1 to v1, not v7"):
            await promote_lineage(client, b, version=7)


async def test_the_champions_spec_starts_a_session_whose_first_agent_is_the_champion(
    client, store, settings, run_worker, temporal_address, tmp_path
):
    spec = make_spec(labels=("A", "B"), inputs=QUESTIONS)
    a = spec.lineage_id("A")
    async with run_worker():
        handle_a, _ = await start_session(client, spec, settings.task_queue)
        await score(handle_a, 1, 3, "Way too long, wanted quick bullets")
        await promote_lineage(client, a, version=2)

        printed = starter_cli(
            "champion",
            spec.session_id,
            temporal_address=temporal_address,
            database_url=settings.database_url,
        )
        (tmp_path / "champion.yaml").write_text(printed)
        champion = load_spec(tmp_path / "champion.yaml")
        assert champion.session_id == f"{spec.session_id}-champion"
        assert champion.inputs == QUESTIONS and [x.label for x in champion.lineages] == ["A"]
        (handle,) = await start_session(client, champion, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
    first = store.queries.agent_definition(AgentRef(agent_id=champion.lineage_id("A"), version=1))
    assert first == store.queries.agent_definition(AgentRef(agent_id=a, version=2))
    assert _definition_blob(store, champion.lineage_id("A"), 1) == _definition_blob(store, a, 2)
    assert champion_spec(store, spec.session_id, "other-id").startswith("name:")
    with pytest.raises(KeyError, match="has no champion"):
        champion_spec(store, "no-such-session")
    assert parse_spec(yaml.safe_load(printed)).lineages[0].agent == first


# The front on the demo: `make run`'s session (examples/essay-session.yaml: A the analyst, B the
# coach), six cycles each and six on a branch of A's v2, scored by a fixed script. Each score
# names its wishes (taken as given, not read), so the versions are the script's.
DEMO = Path(__file__).parent.parent / "examples" / "essay-session.yaml"
KEEP: list[str] = []  # asks for nothing: the version stays
SCRIPT: dict[str, list[tuple[float, list[str]]]] = {
    "A": [
        (3, ["shorter:half", "bullets"]),
        (7, KEEP),
        (8, KEEP),
        (6, ["warmer"]),
        (8, KEEP),
        (9, KEEP),
    ],
    "B": [(6, KEEP), (5, ["shorter"]), (8, KEEP), (8, KEEP), (4, ["example"]), (5, KEEP)],
    "C": [(6, ["table"]), (7, KEEP), (9, KEEP), (5, ["remove:table"]), (9, KEEP), (9, KEEP)],
}


async def play(handle: Any, script: list[tuple[float, list[str]]], cycles: range) -> None:
    for cycle in cycles:
        value, wants = script[cycle - 1]
        await wait_for_state(handle, awaiting(cycle))
        await handle.execute_update(
            LineageWorkflow.submit_score,
            {"score": value, "cycle": cycle, "wants": wants, "rater": "ana"},
        )
    await wait_for_state(handle, awaiting(cycles.stop))


def report_rows(page: str) -> list[tuple[str, ...]]:
    """The versions table of the report's page: (version, mean, checks, cycles, mark)."""
    rows = re.findall(r'<tr class="version ([a-z-]+)" data-version="[^"]*">(.*?)</tr>', page)
    return [tuple(re.findall(r"<td>(.*?)</td>", cells)) for _, cells in rows]


async def test_the_front_of_the_demo_after_a_fixed_script_of_scores(
    client, store, settings, run_worker, tmp_path
):
    spec = load_spec(DEMO).model_copy(update={"id": f"demo-{uuid.uuid4().hex[:8]}"})
    async with run_worker():
        a, b = await start_session(client, spec, settings.task_queue)
        await asyncio.gather(play(a, SCRIPT["A"], range(1, 4)), play(b, SCRIPT["B"], range(1, 4)))
        branch = await branch_lineage(client, store, spec.lineage_id("A"), 2)
        await asyncio.gather(
            play(a, SCRIPT["A"], range(4, 7)),
            play(b, SCRIPT["B"], range(4, 7)),
            play(branch.handle, SCRIPT["C"], range(1, 7)),
        )
    made = training_data_cli(
        "report", spec.session_id, "--out", str(tmp_path / "report"), url=settings.database_url
    )
    assert made.returncode == 0, made.stderr
    page = (tmp_path / "report" / "index.html").read_text()
    # every version of every lineage: mean score over its scored cycles, standing checks its
    # scored outputs passed, cycles scored; under two cycles untested, off the front
    assert report_rows(page) == [
        ("A v1", "3.00", "100% (none)", "1", "untested"),
        ("A v2", "7.00", "50% (3/6)", "3", "dominated by A v3, C v3"),
        ("A v3", "8.50", "50% (2/4)", "2", "dominated by C v3"),
        ("B v1", "5.50", "100% (none)", "2", "dominated by B v2"),
        ("B v2", "6.67", "100% (3/3)", "3", "front"),
        ("B v3", "5.00", "100% (2/2)", "1", "untested"),
        ("C v1 (from A v2)", "6.00", "50% (1/2)", "1", "untested"),
        ("C v2", "7.00", "33% (3/9)", "3", "dominated by A v2, A v3, C v3"),
        ("C v3", "9.00", "67% (4/6)", "2", "front"),
    ]
    assert "front: B v2, C v3" in made.stdout
    assert (tmp_path / "report" / "front.png").stat().st_size > 0


def test_the_front_is_the_tested_versions_none_dominates():
    def v(name: str, scores: tuple[float, ...], passed: int = 0, checks: int = 0):
        label, version = name.split(" v")
        return VersionRecord(
            lineage_id=label,
            label=label,
            version=int(version),
            scores=scores,
            checks_passed=passed,
            checks=checks,
        )

    rows = front(
        [
            v("A v1", (9, 9), 1, 2),  # best score, half its checks
            v("A v2", (7, 8), 4, 4),  # every check: on the front beside A v1
            v("B v1", (7, 8), 4, 4),  # alike on both measures: neither dominates the other
            v("B v2", (7, 7), 4, 4),  # as good on checks, worse on score: dominated
            v("C v1", (10,)),  # one scored cycle: untested, off the front, dominating none
            v("C v2", (6, 6)),  # no standing check failed: 100 %, but a lower score
        ]
    )
    assert [(r.record.name, r.on_front, r.dominated_by) for r in rows] == [
        ("A v1", True, ()),
        ("A v2", True, ()),
        ("B v1", True, ()),
        ("B v2", False, ("A v2", "B v1")),
        ("C v1", False, ()),
        ("C v2", False, ("A v2", "B v1", "B v2")),
    ]
    assert rows[4].record.mean_score == 10 and not rows[4].record.tested
