"""Alembic migrations, on SQLite and PostgreSQL: from an empty database to the current schema,
and from the previous revision with data in it."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlmodel import SQLModel, select

from domain.agent import AgentDefinition, AgentParameters
from domain.events import SpansRecorded
from store import Store
from store.backends.database import create_store_engine
from store.backends.migrate import current_revision, upgrade
from store.eventstore import event_log
from store.eventstore.payload_store import encode
from store.rlm_findings.findings import DatabaseFindingsStore
from store.tables import PayloadBlob, SessionRow, SpanRow, TrainingEvent, TrainingExampleRow
from tests.store_story import register, scored_cycle

HEAD = "0012"


@pytest.fixture
def url(backend_url):
    return backend_url


pytestmark = pytest.mark.every_backend


def test_upgrade_from_empty_matches_the_models(url):
    engine = create_store_engine(url)
    upgrade(engine)
    assert current_revision(engine) == HEAD
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert diff == []  # the migrations build exactly what the models describe
    engine.dispose()


def test_upgrade_from_0002_chains_the_events_it_finds(url):
    engine = create_store_engine(url)
    upgrade(engine, "0002")  # before the hash chain
    assert "event_chain_head" not in inspect(engine).get_table_names()
    events = [
        {
            "id": f"old-{i}",
            "timestamp": 1_700_000_000_000 + i,
            "event_type": "session.created",
            "schema_version": 1,
            "session_id": f"s{i}",
            "payload_hash": digest,
            "payload_size": len(text),
            "tags": "[]",
        }
        for i, (digest, text) in enumerate(
            encode({"sessionId": f"s{i}", "name": "S"}) for i in range(3)
        )
    ]
    with engine.begin() as conn:  # what the previous version wrote
        conn.execute(
            PayloadBlob.__table__.insert(),
            [
                {
                    "hash": e["payload_hash"],
                    "content": encode({"sessionId": e["session_id"], "name": "S"})[1],
                    "size": e["payload_size"],
                    "created_at": 0,
                }
                for e in events
            ],
        )
        conn.execute(TrainingEvent.__table__.insert(), events)
    engine.dispose()
    store = Store.open(url)  # opening migrates to head, chaining the old events
    assert current_revision(store.engine) == HEAD
    assert store.queries.event_count() == 3
    with store.engine.connect() as conn:
        assert event_log.verify(conn).ok
    store.rebuild_projections()
    assert [r.id for r in store.queries._all(select(SessionRow))] == ["s0", "s1", "s2"]
    store.recorder.register_lineage(  # and new events extend the same chain
        session_id="s0",
        session_name="S",
        lineage_id="s0-A",
        label="A",
        workflow_id="w",
        agent=AgentDefinition(
            name="a", system_prompt="Be brief.", parameters=AgentParameters(model="offline-1")
        ),
        inputs=["q"],
    )
    with store.engine.connect() as conn:
        report = event_log.verify(conn)
    assert report.ok and report.events == 3 + 3  # session, lineage, agent
    findings = DatabaseFindingsStore(store.engine, "after-upgrade")
    findings.create("note", "the new tables work", id="n1")
    assert findings.get("n1").description == "the new tables work"
    store.close()


def test_upgrade_from_the_previous_revision_moves_span_texts_inline(url):
    """0004: span rows carry their texts; a v1 span event (one span, texts behind hashes) still
    rebuilds into the same row."""
    engine = create_store_engine(url)
    upgrade(engine, "0003")
    prompt, answer = encode("Summarise the memo."), encode("Three bullet points.")
    span = {
        "spanId": "r:a1:s1",
        "sequence": 1,
        "spanType": "llm_call",
        "inputHash": prompt[0],
        "outputHash": answer[0],
        "promptTokens": 12,
    }
    span_payload = encode(span)
    with engine.begin() as conn:  # what 0003-era code wrote: blobs, a v1 event, a span row
        conn.execute(
            PayloadBlob.__table__.insert(),
            [
                {"hash": h, "content": text, "size": len(text), "created_at": 0}
                for h, text in (prompt, answer, span_payload)
            ],
        )
        conn.execute(
            TrainingEvent.__table__.insert(),
            {
                "id": "old-span",
                "timestamp": 1_700_000_000_000,
                "event_type": "attempt.span_recorded",
                "schema_version": 1,
                "attempt_id": "r:a1",
                "payload_hash": span_payload[0],
                "payload_size": len(span_payload[1]),
                "tags": "[]",
            },
        )
        conn.execute(
            text(
                "INSERT INTO execution_spans (id, attempt_id, sequence, type, input_hash,"
                " output_hash, prompt_tokens, created_at) VALUES ('r:a1:s1', 'r:a1', 1,"
                " 'llm_call', :i, :o, 12, 1700000000000)"
            ),
            {"i": prompt[0], "o": answer[0]},
        )
    engine.dispose()
    store = Store.open(url)
    assert current_revision(store.engine) == HEAD
    [record] = store.queries.span_records("r:a1")
    assert (record.input, record.output, record.prompt_tokens) == (
        "Summarise the memo.",
        "Three bullet points.",
        12,
    )
    [event] = store.queries.events(event_types=["attempt.span_recorded"])
    spans = event.data
    assert event.schema_version == 2 and isinstance(spans, SpansRecorded)
    assert spans.text_hashes == {"r:a1:s1": (prompt[0], answer[0])}
    store.rebuild_projections()  # the v1 event, upcast, resolves its texts again
    [rebuilt] = store.queries.span_records("r:a1")
    assert rebuilt == record
    store.close()


def test_0004_downgrades_and_upgrades_again(url):
    """Down to 0003 the texts go back behind content hashes; up again they come back inline."""
    from alembic import command

    from domain.execution import SpanRecord
    from store.backends.migrate import alembic_config

    store = Store.open(url)
    span = SpanRecord(span_id="a:s1", sequence=1, span_type="llm_call", input="hi", output="yo")
    store.recorder.record_spans(session_id="s", lineage_id="l", attempt_id="a", spans=[span])
    config = alembic_config(url)
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0003")
    assert current_revision(store.engine) == "0003"
    with store.engine.connect() as conn:
        hashes = conn.execute(text("SELECT input_hash, output_hash FROM execution_spans")).one()
    assert tuple(hashes) == (encode("hi")[0], encode("yo")[0])
    store.close()
    store = Store.open(url)  # opening migrates to head again
    assert current_revision(store.engine) == HEAD
    [record] = store.queries.span_records("a")
    assert (record.input, record.output) == ("hi", "yo")
    store.close()


def _event_indexes(engine) -> set[str]:
    return {ix["name"] for ix in inspect(engine).get_indexes("training_events")}


def test_0005_drops_the_session_index_and_keeps_the_log(url):
    """From 0004 with events in the log: the session index goes, every event stays readable and
    its chain intact, appends go on; down again, the index comes back."""
    from alembic import command

    from domain.execution import SpanRecord
    from store.backends.migrate import alembic_config

    engine = create_store_engine(url)
    upgrade(engine, "0004")
    engine.dispose()
    assert "ix_training_events_session_id" in _event_indexes(engine)
    config = alembic_config(url)
    store = Store.open(url)  # migrates 0004 -> head
    assert current_revision(store.engine) == HEAD
    assert "ix_training_events_session_id" not in _event_indexes(store.engine)
    assert {"ix_training_events_event_type", "ix_training_events_lineage_id"} <= _event_indexes(
        store.engine
    )
    span = SpanRecord(span_id="a:s1", sequence=1, span_type="llm_call", input="hi", output="yo")
    store.recorder.record_spans(session_id="s", lineage_id="l", attempt_id="a", spans=[span])
    with store.engine.connect() as conn:
        assert event_log.verify(conn).ok
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0004")
    assert "ix_training_events_session_id" in _event_indexes(store.engine)
    [event] = store.queries.events(event_types=["attempt.span_recorded"])
    assert event.session_id == "s" and event.payload["spans"][0]["output"] == "yo"
    store.close()


def _scored_indexes(engine) -> set[str]:
    return {ix["name"] for ix in inspect(engine).get_indexes("mv_scored_artifacts")}


def test_0006_indexes_scored_outputs_by_session_and_cycle(url):
    """Down to 0005 with a scored output materialized, and up again: the output stays in the
    materializer's index under its new key, and a score after the upgrade pairs with it."""
    from alembic import command

    from store.backends.migrate import alembic_config
    from store.exports.materializer import Materializer

    store = Store.open(url)
    ih = register(store, "s1-A")
    register(store, "s1-B")
    scored_cycle(store, "s1-A", ih[0], "- three crisp bullets", 9)
    assert Materializer(store.engine).run().examples_added == 2  # reward and SFT
    config = alembic_config(url)
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0005")
    assert {"ix_mv_scored_artifacts_session_id", "ix_mv_scored_artifacts_cycle"} <= (
        _scored_indexes(store.engine)
    )
    store.close()

    store = Store.open(url)  # migrates 0005 -> head
    assert current_revision(store.engine) == HEAD
    assert _scored_indexes(store.engine) == {"ix_mv_scored_artifacts_session_cycle"}
    scored_cycle(store, "s1-B", ih[0], "a rambling essay", 3)
    assert Materializer(store.engine).run().examples_added == 2  # B's reward, and the pair
    with store.engine.connect() as conn:
        pairs = conn.execute(
            select(TrainingExampleRow.id).where(TrainingExampleRow.example_type == "preference")
        ).all()
    assert [p.id for p in pairs] == ["preference:s1-A:c1:artifact>s1-B:c1:artifact"]
    store.close()


def test_0007_keys_spans_by_attempt(url):
    """From 0006 with spans recorded: up to 0007 they are keyed by (attempt, span id), the
    attempt index is gone, every span is still read by its attempt, and another attempt may
    reuse a span id; down again, the old key and index come back with the rows."""
    from alembic import command

    from domain.execution import SpanRecord
    from store.backends.migrate import alembic_config

    def span(sid: str, text: str) -> SpanRecord:
        return SpanRecord(span_id=sid, sequence=1, span_type="llm_call", output=text)

    engine = create_store_engine(url)
    upgrade(engine, "0006")
    old = Store(engine)  # today's recorder on the 0006 schema: the columns are the same
    old.recorder.record_spans(
        session_id="s", lineage_id="l", attempt_id="a1", spans=[span("s1", "one"), span("s2", "2")]
    )
    old.close()

    store = Store.open(url)  # migrates 0006 -> head
    assert current_revision(store.engine) == HEAD
    tables = inspect(store.engine)
    assert tables.get_pk_constraint("execution_spans")["constrained_columns"] == [
        "attempt_id",
        "id",
    ]
    assert not tables.get_indexes("execution_spans")
    assert [(s.span_id, s.output) for s in store.queries.span_records("a1")] == [
        ("s1", "one"),
        ("s2", "2"),
    ]
    store.recorder.record_spans(
        session_id="s", lineage_id="l", attempt_id="a2", spans=[span("s1", "again")]
    )
    assert [s.output for s in store.queries.span_records("a2")] == ["again"]
    with store.engine.connect() as conn:
        assert event_log.verify(conn).ok

    store.recorder.record_spans(  # a retried write of the same spans inserts nothing
        session_id="s", lineage_id="l", attempt_id="a2", spans=[span("s1", "again")]
    )
    assert store.queries.count(SpanRow) == 3
    with store.engine.begin() as conn:  # down needs span ids unique again
        conn.execute(text("DELETE FROM execution_spans WHERE attempt_id = 'a2'"))
    config = alembic_config(url)
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0006")
    tables = inspect(store.engine)
    assert tables.get_pk_constraint("execution_spans")["constrained_columns"] == ["id"]
    assert [ix["name"] for ix in tables.get_indexes("execution_spans")] == [
        "ix_execution_spans_attempt_id"
    ]
    assert [s.output for s in store.queries.span_records("a1")] == ["one", "2"]
    store.close()


def test_0008_indexes_evaluations_by_session_and_cycle(url):
    """Down to 0007 with a scored cycle, and up again: one index on session and cycle replaces
    the session index, the scores stay, and the next score completes the cycle's comparison."""
    from alembic import command

    from store.backends.migrate import alembic_config

    store = Store.open(url)
    ih = register(store, "s1-A")
    register(store, "s1-B")
    scored_cycle(store, "s1-A", ih[0], "- three crisp bullets", 9)
    config = alembic_config(url)
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0007")
    assert _evaluation_indexes(store.engine) >= {"ix_evaluations_session_id"}
    assert "ix_evaluations_session_cycle" not in _evaluation_indexes(store.engine)
    store.close()

    store = Store.open(url)  # migrates 0007 -> head
    assert current_revision(store.engine) == HEAD
    indexes = _evaluation_indexes(store.engine)
    assert "ix_evaluations_session_cycle" in indexes
    assert "ix_evaluations_session_id" not in indexes
    scored_cycle(store, "s1-B", ih[0], "a rambling essay", 3)
    (compared,) = store.queries.events(None, ["artifact.compared"])
    assert compared.payload["ranking"] == ["s1-A:c1:artifact", "s1-B:c1:artifact"]
    store.close()


def test_0012_adds_the_task_queue_and_keeps_what_was_queued_before(url):
    """Down to 0011 with a lineage's rollout in the store, and up again: the task queue and the
    waiting-count index come back, the rollout stays, and a task queues and is claimed."""
    from alembic import command

    from domain.lightning import ClaimInput
    from store.backends.migrate import alembic_config
    from tests.test_rollout_task_queue import task

    store = Store.open(url)
    ih = register(store, "s1-A")
    scored_cycle(store, "s1-A", ih[0], "- three crisp bullets", 9)
    config = alembic_config(url)
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0011")
    assert "rollout_tasks" not in inspect(store.engine).get_table_names()
    store.close()

    store = Store.open(url)  # migrates 0011 -> head
    assert current_revision(store.engine) == HEAD
    indexes = {ix["name"] for ix in inspect(store.engine).get_indexes("rollouts")}
    assert "ix_rollouts_session_status" in indexes
    assert len(store.queries.rollouts("s1-A")) == 1
    store.recorder.queue_tasks([task(1)], max_waiting=5)
    claimed = store.recorder.claim_tasks(ClaimInput(server_id="srv", batch_id="b"))
    assert [t.rollout_id for t in claimed.tasks] == ["srv:t1"]
    store.close()


def _evaluation_indexes(engine) -> set[str]:
    return {ix["name"] for ix in inspect(engine).get_indexes("evaluations")}
