"""SQLite specifics: page size of new and old databases, read-ahead for full materializations,
the connection writes are made on."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from domain.execution import SpanRecord
from store import Store
from store.backends.database import create_store_engine, write_transaction
from tests.store_story import (
    register,
    scored_cycle,
)


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

    from store.eventstore.read_ahead import ReadAhead
    from store.exports.materializer import Materializer

    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        ih = register(store, "s1-A")
        scored_cycle(store, "s1-A", ih[0], "- three crisp bullets", 9)
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


def _chain_position(store: Store) -> int:
    with store.read_engine.connect() as conn:
        return conn.exec_driver_sql("SELECT position FROM event_chain_head").scalar_one()


def test_a_failed_write_is_rolled_back_and_the_next_write_lands(tmp_path: Path):
    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        register(store, "s-A", "s")
        before = _chain_position(store)
        with pytest.raises(RuntimeError), write_transaction(store.engine) as conn:
            conn.exec_driver_sql("UPDATE event_chain_head SET position = -1")
            raise RuntimeError("the write fails half way")
        assert _chain_position(store) == before  # nothing of it stayed
        register(store, "s-B", "s")  # the next write goes through, on a working connection
        assert _chain_position(store) > before
        assert {row.id for row in store.queries.session_lineages("s")} == {"s-A", "s-B"}
    finally:
        store.close()


def test_writes_after_the_engine_is_disposed_use_its_new_connections(tmp_path: Path):
    """Disposing an engine (as tests and tools do to change connection settings) reaches the
    connection writes are made on too."""
    from sqlalchemy import event

    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        register(store, "s-A", "s")
        opened: list[object] = []
        event.listen(store.engine, "connect", lambda dbapi, _record: opened.append(dbapi))
        store.engine.dispose()
        register(store, "s-B", "s")
        assert opened  # the write opened a connection with the engine's current settings
    finally:
        store.close()
