"""Writers at once, on every backend: processes and threads appending to one log keep one order
and one chain, and a session's comparison is written once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from domain.agent import AgentDefinition, AgentParameters
from store import Store
from store.eventstore import event_log
from tests.store_processes import register_lineages, run_together
from tests.store_story import (
    dump_projections,
    register,
    scored_cycle,
    spans_of,
)

pytestmark = pytest.mark.every_backend


def test_several_processes_write_concurrently(store: Store):
    url = store.engine.url.render_as_string(hide_password=False)
    run_together(register_lineages, url, [str(n) for n in range(4)])  # 25 lineages each
    events = store.queries.events()
    assert len(events) == 1 + 4 * 25 * 2  # one session.created, then lineage + agent per lineage
    assert len({e.position for e in events}) == len(events)
    assert len(store.queries.session_lineages("shared")) == 100
    before = dump_projections(store)
    store.rebuild_projections()
    assert dump_projections(store) == before


def test_a_cycle_is_compared_once_every_lineage_has_scored_it(store: Store):
    """artifact.compared ranks a cycle's outputs when the session's last lineage scores it:
    not before, and once."""
    for lineage in ("s1-A", "s1-B", "s1-C"):
        ih = register(store, lineage)[0]

    def compared() -> list[dict[str, Any]]:
        return [e.payload for e in store.queries.events(None, ["artifact.compared"])]

    scored_cycle(store, "s1-A", ih, "a", 6)
    scored_cycle(store, "s1-B", ih, "b", 9)
    assert compared() == []
    scored_cycle(store, "s1-C", ih, "c", 7)
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

    from store.rlm_findings.shared_findings import DatabaseSharedStore

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
                spans=spans_of(f"{lineage}:a1")[:1],
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


def test_concurrent_span_writers_commit_together_and_each_span_lands_once(store: Store):
    """Threads each writing one span per call: their writes are committed in shared
    transactions (group commit), every call reports its own span as new, a repeated call
    reports nothing new, and the log holds each span once, chained."""
    from concurrent.futures import ThreadPoolExecutor

    def write(thread: int) -> list[int]:
        attempt = f"t{thread}:a1"
        return [
            store.recorder.record_spans(
                session_id="s", lineage_id="s", attempt_id=attempt, spans=[span]
            )
            for span in spans_of(attempt)
        ]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(write, range(8)))
    per_attempt = len(spans_of("x"))
    assert results == [[1] * per_attempt] * 8
    again = spans_of("t0:a1")[:1]
    assert (
        store.recorder.record_spans(session_id="s", lineage_id="s", attempt_id="t0:a1", spans=again)
        == 0
    )
    for thread in range(8):
        assert len(store.queries.spans(f"t{thread}:a1")) == per_attempt
    events = store.queries.events(None, ["attempt.span_recorded"])
    assert len(events) == 8 * per_attempt
    with store.engine.connect() as conn:
        assert event_log.verify(conn).ok
