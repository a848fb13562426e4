"""The event log is tamper-evident: `verify` finds an edited row, a deleted row, a removed tail
and an edited payload — on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import delete, update

from domain.agent import AgentDefinition, AgentParameters
from store import Store, event_log
from store.tables import EventChainHeadRow, PayloadBlob, TrainingEvent
from tests.store_backends import database_url

ROOT = Path(__file__).parent.parent
EVENTS = TrainingEvent.__table__


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    with database_url(request.param, tmp_path) as url:
        s = Store.open(url)
        agent = AgentDefinition(
            name="a", system_prompt="Be brief.", parameters=AgentParameters(model="offline-1")
        )
        for i in range(3):
            s.recorder.register_lineage(
                session_id="s",
                session_name="S",
                lineage_id=f"s-{i}",
                label=str(i),
                workflow_id=f"w{i}",
                agent=agent,
                inputs=["q"],
            )
        yield s
        s.close()


def check(store: Store) -> event_log.VerifyReport:
    with store.engine.connect() as conn:
        return event_log.verify(conn)


def positions(store: Store) -> list[int]:
    return [e.position for e in store.queries.events()]


def test_an_intact_log_verifies(store):
    report = check(store)
    assert report.ok and report.events == 1 + 3 * 2


def test_an_edited_row_is_found(store):
    target = positions(store)[3]
    with store.engine.begin() as conn:
        conn.execute(
            update(EVENTS).where(EVENTS.c.position == target).values(lineage_id="someone-else")
        )
    (problem,) = check(store).problems
    assert problem.startswith(f"event {target} ") and "chain broken" in problem


def test_a_deleted_row_is_found(store):
    target = positions(store)[2]
    with store.engine.begin() as conn:
        conn.execute(delete(EVENTS).where(EVENTS.c.position == target))
    problems = check(store).problems
    assert "chain broken" in problems[0]
    assert f"event {positions(store)[2]} " in problems[0]  # the one after the gap


def test_a_removed_tail_and_an_edited_payload_are_found(store):
    last = positions(store)[-1]
    first = store.queries.events()[0]
    with store.engine.begin() as conn:
        conn.execute(delete(EVENTS).where(EVENTS.c.position == last))
        conn.execute(
            update(PayloadBlob.__table__)
            .where(PayloadBlob.__table__.c.hash == first.payload_hash)
            .values(content='{"name":"forged","sessionId":"s"}')
        )
    problems = check(store).problems
    assert any("payload content was edited" in p for p in problems)
    assert any("the chain head says the log ends at event" in p for p in problems)


def test_the_verify_command(store):
    url = store.engine.url.render_as_string(hide_password=False)
    ok = subprocess.run(
        [sys.executable, "training_data.py", "verify", "--database-url", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0 and "event log intact" in ok.stdout
    target = positions(store)[1]  # read before the write transaction takes the lock
    with store.engine.begin() as conn:
        conn.execute(
            update(EVENTS).where(EVENTS.c.position == target).values(event_type="artifact.scored")
        )
    bad = subprocess.run(
        [sys.executable, "training_data.py", "verify", "--database-url", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and "chain broken" in bad.stdout
    assert EventChainHeadRow  # the head row is what makes a removed tail visible
