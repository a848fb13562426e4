"""The span benches compare like with like: raw ``sqlite3`` writes the same rows into the same
tables as the store does for the same spans, in each of the ways the benches write them (one by
one, grouped, through the group commit), and the instruction-counting bench's children run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench import span_ingest, span_instructions
from store import Store

TABLES = ("training_events", "payload_blobs", "execution_spans")


def counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}


def new_store_file(tmp_path: Path, name: str) -> Path:
    db = tmp_path / f"{name}.db"
    Store.open(f"sqlite:///{db}").close()
    return db


def written_by_ours(db: Path, write, synchronous: str = "normal") -> dict[str, int]:  # type: ignore[no-untyped-def]
    store = Store.open(f"sqlite:///{db}?synchronous={synchronous}")
    try:
        write(store)
    finally:
        store.close()
    return counts(db)


@pytest.mark.parametrize("synchronous", ["normal", "full"])
def test_raw_sqlite3_writes_what_the_store_writes_one_event_per_span(tmp_path, synchronous):
    before = counts(new_store_file(tmp_path, "empty"))
    ours = written_by_ours(
        new_store_file(tmp_path, "ours"),
        lambda st: span_ingest.ours_concurrent(st, "c", 40),
        synchronous,
    )
    raw_through_group = new_store_file(tmp_path, "raw8")
    span_ingest.raw_concurrent(raw_through_group, 40, synchronous)
    raw_grouped = new_store_file(tmp_path, "rawg")
    span_ingest.raw_grouped(raw_grouped, 40, synchronous)

    # 40 spans, each its own event: one event row, one payload blob and one span row apiece
    expected = {t: before[t] + 40 for t in TABLES}
    assert ours == expected
    assert counts(raw_through_group) == expected
    assert counts(raw_grouped) == expected


def test_raw_sqlite3_writes_what_the_store_writes_batched(tmp_path):
    before = counts(new_store_file(tmp_path, "empty"))
    ours = written_by_ours(
        new_store_file(tmp_path, "ours"), lambda st: span_ingest.ours_batched(st, "a", 30, size=10)
    )
    raw = new_store_file(tmp_path, "raw")
    span_ingest.raw_sqlite3(raw, "a", 30, 10, "normal")

    # three calls of ten spans: three events and blobs, thirty span rows
    expected = {"training_events": 3, "payload_blobs": 3, "execution_spans": 30}
    assert ours == {t: before[t] + expected[t] for t in TABLES}
    assert counts(raw) == {t: before[t] + expected[t] for t in TABLES}


@pytest.mark.parametrize("side", ["ours", "raw"])
def test_the_instruction_counting_children_write_their_spans(tmp_path, side):
    db = new_store_file(tmp_path, side)
    before = counts(db)
    span_instructions.child(side, 5, db)
    assert counts(db)["execution_spans"] == before["execution_spans"] + 5
