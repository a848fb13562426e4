"""The event log, on every backend: ids from the writer's identity, content-addressed payloads,
idempotent writes, projections folded from it and rebuilt identically."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from domain.content_hash import canonical_json, content_hash
from store import Store
from store.eventstore import event_log
from store.tables import (
    AttemptRow,
    PayloadBlob,
    SpanRow,
    TrainingEvent,
)
from tests.store_story import (
    INPUTS,
    correction_story,
    dump_projections,
    full_story,
    register,
)

pytestmark = pytest.mark.every_backend

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
    full_story(store)
    before = dump_projections(store)
    assert len(before["attempts"]) == 2 and len(before["evolution_records"]) == 1
    assert before["evolution_records"][0]["hypothesis_validated"] is True
    replayed = store.rebuild_projections()
    assert replayed == store.queries.event_count()
    assert dump_projections(store) == before


def test_every_write_is_idempotent(store: Store):
    full_story(store)
    counts = {t: store.queries.count(t) for t in (TrainingEvent, PayloadBlob, AttemptRow, SpanRow)}
    snapshot = dump_projections(store)
    full_story(store)  # a retried activity writes the same events again
    assert {t: store.queries.count(t) for t in counts} == counts
    assert dump_projections(store) == snapshot


def test_attempt_projection_follows_its_events(store: Store):
    full_story(store)
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
    a = register(store, "s1-A")
    b = register(store, "s1-B")
    assert a == b  # same inputs, same content addresses
    with store.engine.connect() as conn:
        stored = conn.execute(select(PayloadBlob.hash)).scalars().all()
    assert len(stored) == len(set(stored))
    assert store.queries.payload(a[0]) == INPUTS[0]
    v1_a, v1_b = store.queries.agent_versions("s1-A")[0], store.queries.agent_versions("s1-B")[0]
    assert v1_a.definition_hash == v1_b.definition_hash


def test_log_reads_in_order_and_views_ignore_unknown_events(store: Store):
    register(store, "s1-A")
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


def test_a_correction_is_a_labelled_example_written_once(store: Store):
    """A corrected reading (issue #46): one event and one labelled example per correction id,
    however often it is sent; read by session or across sessions, oldest first, bounded."""
    from domain.corrections import Correction, correction_key
    from store.tables import ReadingCorrectionRow

    full_story(store)
    first, second = correction_story(store)
    events_before = store.queries.count(TrainingEvent)
    again = Correction(
        correction_id=correction_key("s1-A", "e1", ["BULLETS", "shorter:half"]),  # same wants
        session_id="s1",
        lineage_id="s1-A",
        evaluation_id="e1",
        comment="too long",
        corrected=["bullets", "shorter:half"],
    )
    assert again.correction_id == first
    assert store.recorder.record_correction(again) is False
    correction_story(store)  # a retried update writes nothing either
    assert store.queries.count(TrainingEvent) == events_before
    assert store.queries.count(ReadingCorrectionRow) == 2
    with store.engine.connect() as conn:
        stored = [e for e in event_log.read(conn) if e.event_type == "reading.corrected"]
        row = conn.execute(
            select(ReadingCorrectionRow).where(ReadingCorrectionRow.id == first)
        ).one()
    assert [e.payload["correctionId"] for e in stored] == [first, second]
    assert stored[0].payload["readAs"] == ["shorter"]
    assert (row.session_id, row.lineage_id, row.evaluation_id, row.rater) == (
        "s1",
        "s1-A",
        "e1",
        "ana",
    )
    assert json.loads(row.corrected) == ["shorter:half", "bullets"]
    s1 = store.queries.labelled_examples("s1")
    assert [(x.comment, x.corrected, x.read_as) for x in s1] == [
        ("too long", ["shorter:half", "bullets"], ["shorter"])
    ]
    assert [x.correction_id for x in store.queries.labelled_examples()] == [first, second]
    assert [x.correction_id for x in store.queries.labelled_examples(limit=1)] == [second]
    snapshot = dump_projections(store)
    store.rebuild_projections()
    assert dump_projections(store) == snapshot


def test_a_correction_is_refused_at_the_door_when_its_wants_do_not_parse(store: Store):
    from domain.corrections import Correction

    with pytest.raises(ValueError, match="unknown family"):
        Correction(
            correction_id="c",
            session_id="s1",
            lineage_id="s1-A",
            evaluation_id="e1",
            comment="x",
            corrected=["sparkle"],
        )
    with pytest.raises(ValueError):
        Correction(
            correction_id="c",
            session_id="s1",
            lineage_id="s1-A",
            evaluation_id="e1",
            comment="x" * 5_000,
            corrected=["warmer"],
        )
