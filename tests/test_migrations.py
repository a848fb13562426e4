"""Alembic migrations, on SQLite and PostgreSQL: from an empty database to the current schema,
and from the previous revision with data in it."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

from domain.agent import AgentDefinition, AgentParameters
from rlm.store import DatabaseFindingsStore
from store import Store
from store.database import create_store_engine
from store.migrate import current_revision, upgrade
from tests.store_backends import database_url


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    with database_url(request.param, tmp_path) as found:
        yield found


def test_upgrade_from_empty_matches_the_models(url):
    engine = create_store_engine(url)
    upgrade(engine)
    assert current_revision(engine) == "0002"
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert diff == []  # the migrations build exactly what the models describe
    engine.dispose()


def test_upgrade_from_the_previous_revision_keeps_the_data(url):
    engine = create_store_engine(url)
    upgrade(engine, "0001")
    assert "rlm_objects" not in inspect(engine).get_table_names()
    old = Store(engine)  # the foundation schema: record a lineage on it
    old.recorder.register_lineage(
        session_id="s",
        session_name="S",
        lineage_id="s-A",
        label="A",
        workflow_id="w",
        agent=AgentDefinition(
            name="a", system_prompt="Be brief.", parameters=AgentParameters(model="offline-1")
        ),
        inputs=["q"],
    )
    events = old.queries.event_count()
    engine.dispose()
    store = Store.open(url)  # opening migrates to head
    assert current_revision(store.engine) == "0002"
    assert store.queries.event_count() == events
    assert store.queries.agent_versions("s-A")[0].version == 1
    findings = DatabaseFindingsStore(store.engine, "after-upgrade")
    findings.create("note", "the new tables work", id="n1")
    assert findings.get("n1").description == "the new tables work"
    store.close()
