"""The store's behaviour, run against every backend (SQLite and PostgreSQL): idempotent writes,
content-addressed payloads, and projections that rebuild identically from the event log."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select
from sqlmodel import SQLModel

from domain.agent import AgentDefinition, AgentParameters, AgentSnapshot
from domain.content_hash import canonical_json, content_hash
from domain.execution import SpanRecord, Usage
from domain.trainer import (
    CreditAssignment,
    EvolutionChange,
    EvolutionOutcome,
    EvolutionPlan,
    EvolutionTrigger,
    ScoreAnalysis,
)
from store import Store, event_log
from store.database import create_store_engine
from store.tables import (
    PROJECTION_TABLES,
    AttemptRow,
    PayloadBlob,
    SpanRow,
    TrainingEvent,
    TrainingExampleRow,
)

pytestmark = pytest.mark.every_backend


AGENT = AgentDefinition(
    name="Analyst",
    system_prompt="You are an expert analyst. Provide comprehensive, detailed analysis.",
    parameters=AgentParameters(model="offline-1", max_tokens=2048),
)
INPUTS = ["Explain the four-day week.", "Explain remote onboarding."]


def _register(store: Store, lineage: str, session: str = "s1") -> list[str]:
    return store.recorder.register_lineage(
        session_id=session,
        session_name="Session",
        lineage_id=lineage,
        label=lineage[-1],
        workflow_id=f"lineage-{lineage}",
        agent=AGENT,
        inputs=INPUTS,
    )


def _attempt(store: Store, lineage: str, rollout: str, attempt: str, number: int, ih: str) -> None:
    store.recorder.record_attempt_started(
        session_id="s1",
        lineage_id=lineage,
        rollout_id=rollout,
        cycle=1,
        attempt_id=attempt,
        attempt_number=number,
        snapshot=AgentSnapshot(agent_id=lineage, version=1, **AGENT.hashes().model_dump()),
        input_hash=ih,
        model_id="offline-1",
        parameters={"temperature": 0.7, "maxTokens": 2048, "topP": None},
    )


def _spans(attempt: str) -> list[SpanRecord]:
    return [
        SpanRecord(
            span_id=f"{attempt}:s1",
            sequence=1,
            span_type="llm_call",
            input="q",
            output="a long essay",
            model_id="offline-1",
            prompt_tokens=5,
            completion_tokens=9,
            duration_ms=3,
        ),
        SpanRecord(
            span_id=f"{attempt}:s2",
            parent_span_id=f"{attempt}:s1",
            sequence=2,
            span_type="output",
            output="a long essay",
        ),
    ]


def _full_story(store: Store) -> None:
    """One lineage through a failed attempt, a success, a score, an evolution and its outcome."""
    hashes = _register(store, "s1-A")
    _register(store, "s1-B")
    rec = store.recorder
    _attempt(store, "s1-A", "s1-A:c1", "s1-A:c1:a1", 1, hashes[0])
    rec.record_attempt_failed(
        session_id="s1",
        lineage_id="s1-A",
        attempt_id="s1-A:c1:a1",
        error="overloaded",
        error_type="AgentRunError",
        retryable=True,
        spans=[],
        duration_ms=4,
    )
    _attempt(store, "s1-A", "s1-A:c1", "s1-A:c1:a2", 2, hashes[0])
    rec.record_attempt_succeeded(
        session_id="s1",
        lineage_id="s1-A",
        rollout_id="s1-A:c1",
        cycle=1,
        agent_version=1,
        attempt_id="s1-A:c1:a2",
        artifact_id="s1-A:c1:artifact",
        output="a long essay",
        spans=_spans("s1-A:c1:a2"),
        usage=Usage(prompt_tokens=5, completion_tokens=9),
        duration_ms=7,
    )
    rec.record_score(
        session_id="s1",
        lineage_id="s1-A",
        evaluation_id="e1",
        artifact_id="s1-A:c1:artifact",
        rollout_id="s1-A:c1",
        cycle=1,
        agent_version=1,
        score=3,
        comment="too long",
        rater="ana",
        outcome=None,
    )
    change = EvolutionChange(
        component="parameters",
        change_type="modify",
        target="maxTokens",
        before="2048",
        after="300",
        reason="length",
        confidence=0.8,
    )
    evolved = AGENT.model_copy(
        update={"parameters": AGENT.parameters.model_copy(update={"max_tokens": 300})}
    )
    rec.record_evolution(
        session_id="s1",
        lineage_id="s1-A",
        evolution_id="s1-A:evolution:v1",
        from_version=1,
        new_agent=evolved,
        trigger=EvolutionTrigger(
            rollout_id="s1-A:c1",
            attempt_id="s1-A:c1:a2",
            artifact_id="s1-A:c1:artifact",
            evaluation_id="e1",
            score=3,
        ),
        analysis=ScoreAnalysis(score=3, sentiment="negative", trend="stable"),
        credit=CreditAssignment(mode="prompt"),
        plan=EvolutionPlan(changes=[change], hypothesis="shorter"),
        changes=[change],
    )
    rec.record_score(
        session_id="s1",
        lineage_id="s1-A",
        evaluation_id="e2",
        artifact_id="s1-A:c2:artifact",
        rollout_id="s1-A:c2",
        cycle=2,
        agent_version=2,
        score=8,
        comment=None,
        rater=None,
        outcome=(
            "s1-A:evolution:v1",
            EvolutionOutcome(next_score=8, score_delta=5, hypothesis_validated=True, reason="ok"),
        ),
    )
    rec.record_directive(
        session_id="s1",
        lineage_id="s1-A",
        directive_id="d1",
        cycle=2,
        kind="sticky",
        content="Be brief.",
    )
    rec.record_rejection(
        session_id="s1",
        lineage_id="s1-A",
        rejection_id="r1",
        cycle=2,
        kind="score",
        payload_preview="{'score': 11}",
        reason="too high",
    )
    rec.record_lock(
        session_id="s1",
        lineage_id="s1-A",
        event_key="l1",
        cycle=2,
        locked=True,
        reason="winner",
        competitor_scores={"s1-B": None},
    )
    rec.record_rollout_failed(
        session_id="s1", lineage_id="s1-B", rollout_id="s1-B:c1", error="boom"
    )


def _dump(store: Store) -> dict[str, list[dict[str, Any]]]:
    out = {}
    with store.engine.connect() as conn:
        for name in PROJECTION_TABLES:
            table = SQLModel.metadata.tables[name]
            rows = conn.execute(select(table)).mappings().all()
            out[name] = sorted((dict(r) for r in rows), key=lambda r: str(r["id"]))
    return out


_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)


@given(_texts, _texts)
def test_event_ids_are_the_uuid5_of_type_and_key(event_type: str, key: str):
    """The id of an event is what it always was: a retried write after an upgrade must find
    the event it wrote before, not append it again."""
    expected = uuid.uuid5(event_log._NAMESPACE, f"{event_type}|{key}")
    assert event_log.event_id(event_type, key) == str(expected)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
    max_leaves=12,
)


@given(_json_values)
def test_content_addresses_are_the_sha256_of_the_canonical_json_text(value: Any):
    """Payloads already stored are found by these hashes: the text they hash must stay
    ``json.dumps(sort_keys, compact, unescaped)`` byte for byte, however it is produced."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == text
    assert content_hash(value) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_projections_rebuild_identically_from_the_log(store: Store):
    _full_story(store)
    before = _dump(store)
    assert len(before["attempts"]) == 2 and len(before["evolution_records"]) == 1
    assert before["evolution_records"][0]["hypothesis_validated"] is True
    replayed = store.rebuild_projections()
    assert replayed == store.queries.event_count()
    assert _dump(store) == before


def test_every_write_is_idempotent(store: Store):
    _full_story(store)
    counts = {t: store.queries.count(t) for t in (TrainingEvent, PayloadBlob, AttemptRow, SpanRow)}
    snapshot = _dump(store)
    _full_story(store)  # a retried activity writes the same events again
    assert {t: store.queries.count(t) for t in counts} == counts
    assert _dump(store) == snapshot


def test_attempt_projection_follows_its_events(store: Store):
    _full_story(store)
    attempts = store.queries.attempts("s1-A:c1")
    assert [(a.attempt_number, a.status, a.error) for a in attempts] == [
        (1, "failed", "overloaded"),
        (2, "succeeded", None),
    ]
    assert attempts[1].total_tokens == 14
    assert store.queries.payload(attempts[1].output_hash) == "a long essay"
    spans = store.queries.spans("s1-A:c1:a2")
    assert [(s.sequence, s.type, s.parent_span_id) for s in spans] == [
        (1, "llm_call", None),
        (2, "output", "s1-A:c1:a2:s1"),
    ]
    rollouts = {r.id: r for r in store.queries.rollouts("s1-A")}
    assert rollouts["s1-A:c1"].status == "completed"
    assert rollouts["s1-A:c1"].final_attempt_id == "s1-A:c1:a2"
    assert store.queries.lineage("s1-A").locked is True


def test_identical_payloads_are_stored_once(store: Store):
    a = _register(store, "s1-A")
    b = _register(store, "s1-B")
    assert a == b  # same inputs, same content addresses
    with store.engine.connect() as conn:
        stored = conn.execute(select(PayloadBlob.hash)).scalars().all()
    assert len(stored) == len(set(stored))
    assert store.queries.payload(a[0]) == INPUTS[0]
    v1_a, v1_b = store.queries.agent_versions("s1-A")[0], store.queries.agent_versions("s1-B")[0]
    assert v1_a.definition_hash == v1_b.definition_hash


def test_log_reads_in_order_and_views_ignore_unknown_events(store: Store):
    _register(store, "s1-A")
    with store.engine.begin() as conn:
        event_log.append(
            conn,
            [
                event_log.NewEvent(
                    id=event_log.event_id("custom.future_event", "k1"),
                    event_type="custom.future_event",
                    payload={"anything": [1, 2]},
                    timestamp=1,
                    lineage_id="s1-A",
                )
            ],
        )
    events = store.queries.events("s1-A")
    positions = [e.position for e in events]
    assert positions == sorted(positions)
    assert events[-1].event_type == "custom.future_event"
    assert events[-1].payload == {"anything": [1, 2]}
    assert store.rebuild_projections() == len(store.queries.events())
    assert store.queries.lineage("s1-A") is not None


WRITER = """
import sys
from domain.agent import AgentDefinition, AgentParameters
from store import Store
store = Store.open(sys.argv[1])
agent = AgentDefinition(name="a", system_prompt="Be brief.",
                        parameters=AgentParameters(model="offline-1"))
for i in range(25):
    lineage = f"p{sys.argv[2]}-{i}"
    store.recorder.register_lineage(session_id="shared", session_name="S", lineage_id=lineage,
                                    label=str(i), workflow_id=lineage, agent=agent,
                                    inputs=["the same input for everyone"])
"""


def test_several_processes_write_concurrently(store: Store):
    import subprocess
    import sys

    root = Path(__file__).parent.parent
    url = store.engine.url.render_as_string(hide_password=False)
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, url, str(n)], cwd=root) for n in range(4)
    ]
    assert [p.wait(timeout=180) for p in procs] == [0] * 4
    events = store.queries.events()
    assert len(events) == 1 + 4 * 25 * 2  # one session.created, then lineage + agent per lineage
    assert len({e.position for e in events}) == len(events)
    assert len(store.queries.session_lineages("shared")) == 100
    before = _dump(store)
    store.rebuild_projections()
    assert _dump(store) == before


def test_a_cycle_is_compared_once_every_lineage_has_scored_it(store: Store):
    """artifact.compared ranks a cycle's outputs when the session's last lineage scores it:
    not before, and once."""
    for lineage in ("s1-A", "s1-B", "s1-C"):
        ih = _register(store, lineage)[0]

    def compared() -> list[dict[str, Any]]:
        return [e.payload for e in store.queries.events(None, ["artifact.compared"])]

    _scored_cycle(store, "s1-A", ih, "a", 6)
    _scored_cycle(store, "s1-B", ih, "b", 9)
    assert compared() == []
    _scored_cycle(store, "s1-C", ih, "c", 7)
    assert compared() == [
        {
            "cycle": 1,
            "artifacts": [
                {"id": f"{lineage}:c1:artifact", "lineageId": lineage, "score": score}
                for lineage, score in (("s1-A", 6.0), ("s1-B", 9.0), ("s1-C", 7.0))
            ],
            "ranking": ["s1-B:c1:artifact", "s1-C:c1:artifact", "s1-A:c1:artifact"],
        }
    ]


def test_writers_in_one_process_take_turns_instead_of_busy_waiting(tmp_path: Path):
    """Threads of one process writing one SQLite file queue on the process's writer lock, not
    in SQLite's busy handler (which sleeps up to 100 ms between tries), and readers never take
    the write lock. With the busy timeout at zero, any of them meeting SQLite's write lock
    taken would fail with "database is locked": eight threads, writing through the recorder's
    transactions, its streamed spans and a session's shared findings (as the score activity
    opens them) and reading those findings back, all succeed.
    """
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy import event

    from store.shared_findings import DatabaseSharedStore

    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    shared = DatabaseSharedStore(store.engine, "session:shared", store.read_engine)

    @event.listens_for(store.engine, "connect")
    def _no_busy_wait(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.execute("PRAGMA busy_timeout=0")

    store.engine.dispose()  # connections from now on do not wait
    agent = AgentDefinition(
        name="a", system_prompt="Be brief.", parameters=AgentParameters(model="offline-1")
    )

    def write(thread: int) -> None:
        for i in range(15):
            lineage = f"t{thread}-{i}"
            store.recorder.register_lineage(
                session_id="shared",
                session_name="S",
                lineage_id=lineage,
                label=lineage,
                workflow_id=lineage,
                agent=agent,
                inputs=["the same input for everyone"],
            )
            store.recorder.record_spans(
                session_id="shared",
                lineage_id=lineage,
                attempt_id=f"{lineage}:a1",
                spans=_spans(f"{lineage}:a1")[:1],
            )
            shared.create(lineage, "claim", "shorter worked", tags=[f"evolution:{lineage}"])
            assert len(shared.query(f"tag=evolution:{lineage}")) == 1

    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(write, range(8)))  # re-raises the first failed write
        events = store.queries.events()
        # one session.created; per lineage: lineage.created, agent.version_created, its span
        assert len(events) == 1 + 8 * 15 * 3
        assert len(shared.query("type=claim")) == 8 * 15
        with store.engine.connect() as conn:
            assert event_log.verify(conn).ok
    finally:
        store.close()


def _scored_cycle(store: Store, lineage: str, ih: str, output: str, score: float) -> None:
    rollout, attempt = f"{lineage}:c1", f"{lineage}:c1:a1"
    _attempt(store, lineage, rollout, attempt, 1, ih)
    store.recorder.record_attempt_succeeded(
        session_id="s1",
        lineage_id=lineage,
        rollout_id=rollout,
        cycle=1,
        agent_version=1,
        attempt_id=attempt,
        artifact_id=f"{rollout}:artifact",
        output=output,
        spans=_spans(attempt),
        usage=Usage(prompt_tokens=5, completion_tokens=9),
        duration_ms=7,
    )
    store.recorder.record_score(
        session_id="s1",
        lineage_id=lineage,
        evaluation_id=f"{rollout}:e",
        artifact_id=f"{rollout}:artifact",
        rollout_id=rollout,
        cycle=1,
        agent_version=1,
        score=score,
        comment=None,
        rater="ana",
        outcome=None,
    )


def _index_names(store: Store, table: str) -> set[str]:
    from sqlalchemy import inspect

    return {ix["name"] for ix in inspect(store.engine).get_indexes(table)}


def test_examples_are_the_same_however_the_log_is_materialized(store: Store):
    """One cycle, five lineages: two pairs of identical answers, one answer to another input, a
    second score of an output stored in the seed's schema, a score of an output not on record,
    and a lock. Materializing after every write, a rebuild one position at a time and a rebuild
    in one go give the same rows, and they are the ones the rules ask for."""
    from store.materializer import Materializer

    ih = _register(store, "s1-A")
    for lineage in ("s1-B", "s1-C", "s1-D", "s1-E"):
        _register(store, lineage)
    artifact = {label: f"s1-{label}:c1:artifact" for label in "ABCDEZ"}

    def seed_score() -> None:  # A scored again, as the seed's recorder wrote scores (v1)
        with store.engine.begin() as conn:
            event_log.append(
                conn,
                [
                    event_log.NewEvent(
                        id="seed-v1",
                        event_type="artifact.scored",
                        schema_version=1,
                        payload={"score": 10, "comment": "even better"},
                        timestamp=1_700_000_000_000,
                        session_id="s1",
                        lineage_id="s1-A",
                        artifact_id=artifact["A"],
                    )
                ],
            )

    writes = [
        lambda: _scored_cycle(store, "s1-A", ih[0], "- three crisp bullets", 9),
        lambda: _scored_cycle(store, "s1-B", ih[0], "a rambling essay", 3),
        lambda: _scored_cycle(store, "s1-C", ih[0], "- three crisp bullets", 7),  # = A's
        lambda: _scored_cycle(store, "s1-D", ih[0], "a rambling essay", 5),  # = B's
        lambda: _scored_cycle(store, "s1-E", ih[1], "an answer to another question", 1),
        seed_score,
        lambda: store.recorder.record_score(
            session_id="s1",
            lineage_id="s1-Z",
            evaluation_id="s1-Z:c1:e",
            artifact_id=artifact["Z"],  # no such output
            rollout_id="s1-Z:c1",
            cycle=1,
            agent_version=1,
            score=10,
            comment=None,
            rater="ana",
            outcome=None,
        ),
        lambda: store.recorder.record_lock(
            session_id="s1",
            lineage_id="s1-A",
            event_key="lock-1",
            cycle=1,
            locked=True,
            reason="the crisp one",
            competitor_scores={f"s1-{x}": None for x in "BCDE"},
        ),
    ]
    materializer = Materializer(store.engine)
    for write in writes:
        write()
        materializer.run()
    incremental = _example_rows(store)
    Materializer(store.engine, batch_size=1).run(full=True)
    assert _example_rows(store) == incremental
    Materializer(store.engine).run(full=True)
    assert _example_rows(store) == incremental

    by_id = {row["id"]: row for row in incremental}
    assert sorted(r["score"] for r in incremental if r["example_type"] == "reward") == [
        1,
        3,
        5,
        7,
        9,
        10,
    ]
    assert by_id[f"reward:{artifact['A']}:evaluation:seed-v1"]["score"] == 10  # upcast
    assert sorted(r["score"] for r in incremental if r["example_type"] == "sft") == [9, 10]
    pairs = {
        r["id"].removeprefix("preference:"): (r["score"], r["score_delta"])
        for r in incremental
        if r["source"] == "comparison"
    }
    # Identical answers and answers to another input make no pair; the later score of A (10)
    # finds its pairs already made by its first (9).
    assert pairs == {
        f"{artifact['A']}>{artifact['B']}": (9, 6),
        f"{artifact['C']}>{artifact['B']}": (7, 4),
        f"{artifact['A']}>{artifact['D']}": (9, 4),
        f"{artifact['C']}>{artifact['D']}": (7, 2),
    }
    locks = [r for r in incremental if r["source"] == "lock"]
    # B's and D's answer (one text), not C's (A's own) nor E's (to another input):
    assert sorted(r["id"].split(":")[3] for r in locks) == ["s1-B", "s1-D"]
    assert {r["rejected_hash"] for r in locks} == {by_id["reward:s1-B:c1:e"]["completion_hash"]}
    assert {(r["score"], r["score_delta"]) for r in locks} == {(9, None)}
    assert not any("s1-Z" in r["id"] for r in incremental)  # no output, nothing to learn


def _example_rows(store: Store) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(TrainingExampleRow.__table__)).mappings().all()
    return sorted((dict(r) for r in rows), key=lambda r: r["id"])


def test_training_data_materializes_and_exports(store: Store, tmp_path: Path):
    """Two lineages scored on the same cycle: reward rows for both, an SFT example for the high
    score, a preference pair; running again adds nothing, a full rebuild the same rows."""
    from store.exporter import export
    from store.materializer import Materializer

    ih = _register(store, "s1-A")[0]
    _register(store, "s1-B")
    _scored_cycle(store, "s1-A", ih, "- three crisp bullets", 9)
    _scored_cycle(store, "s1-B", ih, "a rambling essay", 3)
    first = Materializer(store.engine).run()
    assert first.examples_added == 4  # 2 reward rows, 1 SFT example, 1 preference pair
    assert Materializer(store.engine).run().examples_added == 0
    assert Materializer(store.engine).run(full=True).examples_added == 4
    # A rebuild drops the examples' secondary indexes while it writes and builds them again;
    # a run after an interrupted rebuild (indexes gone) puts them back.
    names = {ix.name for ix in TrainingExampleRow.__table__.indexes}
    assert names and names <= _index_names(store, "mv_training_examples")
    with store.engine.begin() as conn:
        for index in TrainingExampleRow.__table__.indexes:
            index.drop(conn)
    assert Materializer(store.engine).run().examples_added == 0
    assert names <= _index_names(store, "mv_training_examples")
    dpo = export(store.engine, "trl-dpo", tmp_path)
    assert dpo.counts["train"] + dpo.counts["eval"] == 1
    [path] = [p for p in tmp_path.glob("trl-dpo.*.jsonl") if p.stat().st_size]
    row = path.read_text()
    assert "three crisp bullets" in row and "a rambling essay" in row


def test_every_format_writes_the_rows_it_checks(store: Store, tmp_path: Path):
    """Each export file holds exactly the format's rows: JSON lines equal json.dumps of the row
    (built from the stored texts without encoding them again), Parquet rows read back equal, and
    filters and splits pick the same examples for every format. Texts carry quotes, newlines,
    backslashes and non-ASCII, which the stored JSON must carry through unchanged."""
    import json

    import pyarrow.parquet as pq

    from store.exporter import FORMATS, ExportFilters, _examples, export
    from store.materializer import Materializer

    ih = _register(store, "s1-A")[0]
    _register(store, "s1-B")
    _scored_cycle(store, "s1-A", ih, 'Bullets:\n- "crisp" \\ café ✓\n- naïve', 9)
    _scored_cycle(store, "s1-B", ih, "a rambling essay\twith a tab", 3)
    Materializer(store.engine).run()
    filters = ExportFilters(eval_fraction=0.5)
    for name, fmt in FORMATS.items():
        expected = [fmt.row(e) for e in _examples(store.engine, fmt.example_type, filters)]
        assert expected, name
        result = export(store.engine, name, tmp_path / name, filters)
        written = []
        for path in result.files.values():
            if fmt.suffix == "jsonl":
                lines = Path(path).read_text(encoding="utf-8").splitlines()
                written += lines
            else:
                written += pq.read_table(path).to_pylist()
        if fmt.suffix == "jsonl":
            assert sorted(written) == sorted(json.dumps(r, ensure_ascii=False) for r in expected)
            assert all(json.loads(line) in expected for line in written)
        else:
            key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
            assert sorted(map(key, written)) == sorted(map(key, expected))
        assert sum(result.counts.values()) == len(expected)
    [sft] = [json.loads(x) for p in (tmp_path / "trl-sft").glob("*.jsonl") for x in p.open()]
    assert sft["messages"][-1]["content"] == 'Bullets:\n- "crisp" \\ café ✓\n- naïve'


def test_new_sqlite_stores_get_small_pages_and_old_ones_keep_theirs(tmp_path: Path):
    """New SQLite databases use 2 KiB pages (cheaper commits for small writes); a database made
    with another page size opens, migrates and takes writes unchanged."""
    import sqlite3

    new = tmp_path / "new.db"
    Store.open(f"sqlite:///{new}").close()
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.execute("PRAGMA page_size=4096")
    conn.execute("CREATE TABLE made_elsewhere (x INTEGER)")
    conn.close()
    store = Store.open(f"sqlite:///{old}")
    try:
        spans = [SpanRecord(span_id="s1", sequence=0, span_type="llm_call", output="hi")]
        assert (
            store.recorder.record_spans(session_id="s", lineage_id="l", attempt_id="a", spans=spans)
            == 1
        )
        assert [s.output for s in store.queries.span_records("a")] == ["hi"]
    finally:
        store.close()

    def page_size(path: Path) -> int:
        conn = sqlite3.connect(path)
        try:
            return conn.execute("PRAGMA page_size").fetchone()[0]
        finally:
            conn.close()

    assert page_size(new) == 2048
    assert page_size(old) == 4096


def test_a_full_materialization_reads_the_sqlite_file_ahead(tmp_path: Path, monkeypatch):
    """A full run reads the whole file once, sequentially, beside its scan, and stops reading
    when the scan is done; other databases get no read-ahead."""
    import time

    from store.materializer import Materializer
    from store.read_ahead import ReadAhead

    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        ih = _register(store, "s1-A")
        _scored_cycle(store, "s1-A", ih[0], "- three crisp bullets", 9)
        size = (tmp_path / "store.db").stat().st_size
        with ReadAhead.for_engine(store.engine) as ahead:
            deadline = time.monotonic() + 10
            while ahead.bytes_read < size and time.monotonic() < deadline:
                time.sleep(0.01)
        assert ahead.bytes_read == size

        started: list[ReadAhead] = []
        real = ReadAhead.for_engine

        def recorded(engine):  # type: ignore[no-untyped-def]
            started.append(real(engine))
            return started[-1]

        monkeypatch.setattr(ReadAhead, "for_engine", recorded)
        assert Materializer(store.engine).run().examples_added == 2  # incremental: no
        assert not started
        assert Materializer(store.engine).run(full=True).examples_added == 2
        assert [a.path for a in started] == [str(tmp_path / "store.db")]
        assert not [t for t in threading.enumerate() if t.name == "read-ahead"]
    finally:
        store.close()
    assert ReadAhead.for_engine(create_store_engine("sqlite://")).path is None
    pg = create_store_engine("postgresql://nobody@127.0.0.1:1/none")  # never connected
    assert ReadAhead.for_engine(pg).path is None
