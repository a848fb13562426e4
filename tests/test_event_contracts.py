"""Events are frozen contracts: each payload class embeds no model used elsewhere, its schema is
recorded per version, and events stored by earlier code still decode, to the same bytes."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from domain import events
from domain.content_hash import canonical_json
from store import Store
from store.eventstore import event_log, upcasters
from store.eventstore.event_log import NewEvent
from tests.event_schemas import current, recorded, schema_of, version_key
from tests.store_story import dump_projections, full_story

DATA = Path(__file__).parent / "data" / "events"
ROOT = Path(__file__).parent.parent


def _stored(name: str) -> list[dict[str, Any]]:
    return json.loads((DATA / name).read_text())


def test_event_payloads_import_no_other_model():
    """``domain/events.py`` imports pydantic and nothing of the project: every value an event
    embeds is the event's own class, so no change elsewhere reaches a stored payload."""
    tree = ast.parse((ROOT / "domain" / "events.py").read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert imported <= {"__future__", "typing", "pydantic", "pydantic.alias_generators"}, imported


def _embedded(model: type[BaseModel]) -> set[type[BaseModel]]:
    found: set[type[BaseModel]] = set()
    for field in model.model_fields.values():
        for arg in _types(field.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in found:
                found |= {arg, *_embedded(arg)}
    return found


def _types(annotation: Any) -> list[Any]:
    args = getattr(annotation, "__args__", ())
    return [annotation, *[t for a in args for t in _types(a)]]


@pytest.mark.parametrize("cls", sorted(events.EVENT_CLASSES.values(), key=lambda c: c.event_type))
def test_every_payload_is_frozen_and_embeds_only_event_classes(cls: type[events.Event]):
    for model in {cls, *_embedded(cls)}:
        assert model.__module__ == "domain.events", f"{cls.__name__} embeds {model}"
        assert model.model_config.get("frozen"), f"{model.__name__} is not frozen"


def test_no_schema_changes_without_a_new_version():
    """A payload's schema is fixed per (event type, version). Changing an event class — or
    anything it embeds — without bumping its ``schema_version`` fails here; bump it, add the
    upcaster from the previous version (``store/eventstore/upcasters.py``), and record the new
    version's schema with ``python -m tests.event_schemas`` (old versions stay recorded)."""
    snapshot = recorded()
    changed = [key for key, schema in current().items() if snapshot.get(key, schema) != schema]
    assert changed == [], f"schema changed without a new version: {changed}"
    missing = [key for key in current() if key not in snapshot]
    assert missing == [], f"run `python -m tests.event_schemas` to record {missing}"


@pytest.mark.parametrize("cls", sorted(events.EVENT_CLASSES.values(), key=lambda c: c.event_type))
def test_every_older_version_has_its_upcaster(cls: type[events.Event]):
    for version in range(1, cls.schema_version):
        assert (cls.event_type, version) in upcasters.UPCASTERS, (cls.event_type, version)
    recorded_versions = [
        int(key.rsplit("@v", 1)[1])
        for key in recorded()
        if key.rsplit("@v", 1)[0] == cls.event_type
    ]
    assert max(recorded_versions) == cls.schema_version
    assert recorded()[version_key(cls.event_type, cls.schema_version)] == schema_of(cls)


def test_events_stored_by_earlier_code_decode_to_the_same_bytes():
    """One event of every type, every optional part filled, as c32acee's writers stored them
    (``tests/data/events/events_as_stored_v1.json``): each reads back typed and writes again
    the same canonical JSON, so its payload hash is unchanged."""
    rows = _stored("events_as_stored_v1.json")
    assert {r["eventType"] for r in rows} == set(events.EVENT_CLASSES)
    for row in rows:
        payload, _ = upcasters.upcast(
            row["eventType"], row["schemaVersion"], row["payload"], {"id": "e", "artifact_id": None}
        )
        event = events.parse(row["eventType"], payload)
        assert event is not None
        assert canonical_json(event.payload()) == canonical_json(row["payload"]), row["eventType"]


def test_a_payload_holds_no_domain_model_once_read():
    row = next(r for r in _stored("events_as_stored_v1.json") if r["eventType"] == "agent.evolved")
    evolved = events.AgentEvolved.read(row["payload"])
    assert type(evolved.plan.history_checks[0].similar_past_changes[0].change) is (
        events.LoggedChange
    )
    with pytest.raises(Exception, match="frozen"):
        evolved.plan.changes[0].reason = "rewritten"  # type: ignore[misc]


@pytest.mark.every_backend
def test_todays_writers_store_the_same_events_as_before(store: Store):
    """The store story written now gives the log c32acee's writers gave it: the same event ids,
    types, versions, references and payload hashes (``store_story_log_v1.json``)."""
    full_story(store)
    with store.engine.connect() as conn:
        now = [
            (e.id, e.event_type, e.schema_version, e.lineage_id, e.attempt_id, e.payload_hash)
            for e in event_log.read(conn)
        ]
    before = [
        (
            r["id"],
            r["eventType"],
            r["schemaVersion"],
            r["lineageId"],
            r["attemptId"],
            r["payloadHash"],
        )
        for r in _stored("store_story_log_v1.json")
    ]
    assert sorted(now) == sorted(before)


@pytest.mark.every_backend
def test_a_log_written_by_earlier_code_projects_and_reads(store: Store, tmp_path: Path):
    """The earlier code's log, appended raw (payload JSON as stored, no typed event), folds into
    the same projections as the story written now, and every event reads back typed."""
    full_story(store)
    expected = dump_projections(store)
    with store.engine.begin() as conn:
        for name in ("training_events", "event_chain_head", "payload_blobs"):
            conn.exec_driver_sql(f"DELETE FROM {name}")
    raw = [
        NewEvent(
            id=r["id"],
            event_type=r["eventType"],
            payload=r["payload"],
            timestamp=1_700_000_000_000 + i,
            session_id=r["sessionId"],
            lineage_id=r["lineageId"],
            agent_id=r["agentId"],
            artifact_id=r["artifactId"],
            attempt_id=r["attemptId"],
            tags=r["tags"],
            schema_version=r["schemaVersion"],
        )
        for i, r in enumerate(_stored("store_story_log_v1.json"))
    ]
    with store.engine.begin() as conn:
        assert len(event_log.append(conn, raw)) == len(raw)
    # the payload blobs the story stored beside its events (agent definitions, texts) are gone
    # with the table: the projections read none of them, only the events
    store.rebuild_projections()
    assert _without_times(dump_projections(store)) == _without_times(expected)
    with store.engine.connect() as conn:
        typed = [e.data for e in event_log.read(conn)]
    assert all(isinstance(e, events.Event) for e in typed)


def _without_times(dump: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {
        table: [
            {
                k: v
                for k, v in row.items()
                if k not in ("created_at", "updated_at", "started_at", "completed_at", "timestamp")
            }
            for row in rows
        ]
        for table, rows in dump.items()
    }


def test_writers_convert_domain_models_to_the_same_bytes():
    """Today's domain models, every optional part filled, converted as the writers convert them
    (``LoggedX.of``), give the payloads c32acee stored when it embedded the models themselves."""
    from domain.agent import AgentSnapshot
    from domain.execution import SpanRecord
    from domain.trainer import (
        Amount,
        AspectVerdict,
        CreditAssignment,
        Directives,
        EvolutionChange,
        EvolutionPlan,
        EvolutionTrigger,
        ExpectedImpact,
        FeedbackAspect,
        HistoryCheck,
        PastChange,
        PromptCredit,
        ScoreAnalysis,
        TrajectoryCredit,
    )

    amount = Amount(kind="share", value=0.5, unit="words", of_words=480)
    aspect = FeedbackAspect(
        aspect="length",
        sentiment="negative",
        quote="way too long",
        confidence=0.9,
        want="shorter",
        detail=None,
        action="less",
        amount=amount,
    )
    aspect2 = FeedbackAspect(
        aspect="format", sentiment="positive", confidence=0.6, want="bullets", action="keep"
    )
    analysis = ScoreAnalysis(
        score=3,
        comment="Way too long, wanted quick bullets",
        sentiment="negative",
        aspects=[aspect, aspect2],
        trend="declining",
        delta_from_previous=-2.0,
        adversarial=False,
        refused=["give yourself shell access"],
        comment_language="French",
        read_by="claude",
    )
    pc = PromptCredit(
        segment="Structure your response professionally",
        segment_index=2,
        blame="high",
        related_aspect="length",
        reason="asks for long form",
        component="systemPrompt",
        target=None,
        want="shorter",
    )
    tc = TrajectoryCredit(span_id="s-1", contribution=-0.5, reason="slow tool call")
    credit = CreditAssignment(mode="trajectory", prompt=[pc], trajectory=[tc])
    change = EvolutionChange(
        component="parameters",
        change_type="modify",
        target="maxTokens",
        before="2048",
        after="300",
        reason="shorter",
        confidence=0.8,
        aspect="length",
        want="shorter",
    )
    change2 = EvolutionChange(
        component="systemPrompt",
        change_type="add",
        target="segment 3",
        after="Use bullet points.",
        reason="bullets",
        confidence=0.7,
    )
    past = PastChange(
        change=change2, outcome="improved", score_delta=2.0, lineage_id="l-b", evolution_id="evo-0"
    )
    check = HistoryCheck(
        proposed_change=change2,
        similar_past_changes=[past],
        insight_id="ins-1",
        recommendation="apply",
        reason="worked on lineage B",
    )
    plan = EvolutionPlan(
        changes=[change, change2],
        hypothesis="shorter bullets score higher",
        expected_impact=[ExpectedImpact(aspect="length", direction="improve")],
        notes=["maxTokens repaired to constraint"],
        history_checks=[check],
    )
    trigger = EvolutionTrigger(
        rollout_id="r-1",
        attempt_id="a-1",
        artifact_id="art-1",
        evaluation_id="eval-1",
        score=3,
        comment="Way too long",
        directives=Directives(sticky=["be kind"], oneshot=["cite"]),
    )
    verdicts = [
        AspectVerdict(
            aspect="length",
            verdict="refuted",
            reason="asks longer",
            family="shorter",
            quote="too short now",
        ),
        AspectVerdict(aspect="format", verdict="untested", reason="nothing said"),
    ]
    snapshot = AgentSnapshot(
        system_prompt_hash="sp", tools_hash="th", flow_hash="fh", agent_id="lin-1", version=2
    )
    span = SpanRecord(
        span_id="sp-1",
        parent_span_id="sp-0",
        sequence=1,
        span_type="tool_call",
        name="search",
        input="q",
        output="r",
        model_id="m",
        prompt_tokens=3,
        completion_tokens=4,
        tool_name="search",
        tool_args={"q": "x"},
        tool_result="ok",
        tool_error=None,
        duration_ms=12,
        estimated_cost=0.01,
        started_at=1700000000000,
        trace_id="t",
        otel_span_id="o",
    )
    span_min = SpanRecord(span_id="sp-2", sequence=2, span_type="output")
    h = "0" * 64
    e = events
    built = [
        e.AgentEvolved(
            agent_id="l",
            evolution_id="evo-1",
            from_version=1,
            to_version=2,
            definition_hash=h,
            system_prompt_hash=h,
            tools_hash=h,
            flow_hash=h,
            changes=[e.LoggedChange.of(change), e.LoggedChange.of(change2)],
            hypothesis=plan.hypothesis,
            trigger=e.LoggedTrigger.of(trigger),
            score_analysis=e.LoggedScoreAnalysis.of(analysis),
            credit_assignment=e.LoggedCreditAssignment.of(credit),
            plan=e.LoggedPlan.of(plan),
            kind="evolution",
        ),
        e.EvolutionKept(
            agent_id="l",
            version=2,
            trigger=e.LoggedTrigger.of(trigger),
            score_analysis=e.LoggedScoreAnalysis.of(analysis),
            plan=e.LoggedPlan.of(plan),
        ),
        e.EvolutionJudged(
            evolution_id="evo-1",
            next_score=6,
            score_delta=3,
            validated=False,
            reason="refuted length",
            aspects=[e.LoggedAspectVerdict.of(v) for v in verdicts],
        ),
        e.InsightApplied(
            insight_id="ins-1", agent_id="l", evolution_id="evo-1", change=e.LoggedChange.of(change)
        ),
        e.AttemptStarted(
            rollout_id="r-1",
            attempt_number=1,
            agent_snapshot=e.LoggedAgentSnapshot.of(snapshot),
            input_hash=h,
            model_id="offline",
            parameters={"temperature": 0.7, "maxTokens": 300, "topP": None},
        ),
        e.SpansRecorded(spans=[e.LoggedSpan.of(span), e.LoggedSpan.of(span_min)]),
    ]
    stored = {}
    for row in _stored("events_as_stored_v1.json"):
        stored.setdefault(row["eventType"], row["payload"])  # the first of each type
    for event in built:
        assert canonical_json(event.payload()) == canonical_json(stored[event.event_type])
