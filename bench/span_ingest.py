"""Durable span ingest into the store: one span per transaction, and batched, against raw
``sqlite3.executemany`` into the same tables in the same run.

    .venv/bin/python -m bench.span_ingest [--spans 20000]

Every path commits with SQLite in WAL mode and synchronous=NORMAL (``--synchronous full``:
FULL). Ours writes what spans cost
in Training Camp: per call, one ``attempt.span_recorded`` event (its content-addressed payload,
its hash-chained log row) and one projection row per span, in one transaction.
Also: 8 threads each writing one span per call (group commit), beside raw ``sqlite3`` doing the
same writes (one event per call) through the same group commit, and raw ``sqlite3`` committing
them 8 to a transaction from one thread (no thread hand-offs at all): the ceilings this
machine and CPython's sqlite3 set. Targets: batched >= 57,000 spans/s and >= 50% of raw; one at
a time >= 7,000; 8 writers >= 30,000.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from domain.execution import SpanRecord
from store import Store
from store.eventstore.group_commit import GroupCommit

SPAN_TEXT = "A model call's answer, a few dozen words long, as spans usually carry. " * 3


def spans(prefix: str, n: int) -> list[SpanRecord]:
    return [
        SpanRecord(
            span_id=f"{prefix}:s{i}",
            sequence=i,
            span_type="llm_call",
            name="step",
            input=f"prompt {i}",
            output=f"{SPAN_TEXT} {i}",
            model_id="offline",
            prompt_tokens=30,
            completion_tokens=60,
            duration_ms=3,
        )
        for i in range(n)
    ]


def ours_one_at_a_time(store: Store, prefix: str, n: int) -> float:
    batch = spans(prefix, n)
    started = time.perf_counter()
    for span in batch:
        store.recorder.record_spans(session_id="b", lineage_id="b", attempt_id=prefix, spans=[span])
    return n / (time.perf_counter() - started)


def ours_concurrent(store: Store, prefix: str, n: int, writers: int = 8) -> float:
    """``writers`` threads, each writing its share one span per call (group commit)."""
    shares = [spans(f"{prefix}{w}", n // writers) for w in range(writers)]

    def write(batch: list[SpanRecord], attempt: str) -> None:
        for span in batch:
            store.recorder.record_spans(
                session_id="b", lineage_id="b", attempt_id=attempt, spans=[span]
            )

    threads = [
        threading.Thread(target=write, args=(share, f"{prefix}{w}"))
        for w, share in enumerate(shares)
    ]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return writers * (n // writers) / (time.perf_counter() - started)


def ours_batched(store: Store, prefix: str, n: int, size: int = 1000) -> float:
    batch = spans(prefix, n)
    started = time.perf_counter()
    for i in range(0, n, size):
        store.recorder.record_spans(
            session_id="b", lineage_id="b", attempt_id=prefix, spans=batch[i : i + size]
        )
    return n / (time.perf_counter() - started)


_FIELDS = {
    "spanId": "span_id",
    "parentSpanId": "parent_span_id",
    "sequence": "sequence",
    "spanType": "span_type",
    "name": "name",
    "input": "input",
    "output": "output",
    "modelId": "model_id",
    "promptTokens": "prompt_tokens",
    "completionTokens": "completion_tokens",
    "durationMs": "duration_ms",
}


_INSERT_EVENT = (  # {}: "" or " OR IGNORE"
    "INSERT{} INTO training_events (id, timestamp, event_type, schema_version, session_id,"
    " lineage_id, agent_id, artifact_id, attempt_id, payload_hash, payload_size, tags,"
    " chain_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_INSERT_BLOBS = "INSERT OR IGNORE INTO payload_blobs VALUES (?,?,?,?)"
_MOVE_CHAIN_HEAD = (
    "UPDATE event_chain_head SET chain_hash = ?,"
    " position = (SELECT MAX(position) FROM training_events) WHERE id = 1"
)
_INSERT_SPAN_ROWS = (
    "INSERT OR IGNORE INTO execution_spans (id, attempt_id, parent_span_id, sequence,"
    " type, name, input, output, model_id, prompt_tokens, completion_tokens,"
    " tool_name, tool_args, tool_result, tool_error, duration_ms, estimated_cost,"
    " started_at, trace_id, otel_span_id, created_at)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def _payload(chunk: list[SpanRecord]) -> str:
    """A span event's payload as the log keeps it: canonical JSON, camelCase, no nulls."""
    items = []
    for s in chunk:
        item = {key: getattr(s, attr) for key, attr in _FIELDS.items()}
        items.append({k: v for k, v in item.items() if v is not None})
    return json.dumps({"spans": items}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _span_row(s: SpanRecord, attempt: str) -> tuple:
    return (
        *(s.span_id, attempt, None, s.sequence, s.span_type, s.name, s.input, s.output),
        *(s.model_id, s.prompt_tokens, s.completion_tokens, None, None, None, None),
        *(s.duration_ms, None, None, None, None, 0),
    )


def _event_params(digest: str, attempt: str, text: str) -> tuple:
    return (
        *(digest, 0, "attempt.span_recorded", 2, "b", "b", "b", None, attempt, digest),
        *(len(text), "[]", hashlib.sha256(digest.encode()).hexdigest()),
    )


def _finish(conn: sqlite3.Connection, head: str, rows: list[tuple]) -> None:
    """The chain head moved, the span rows, the commit."""
    conn.execute(_MOVE_CHAIN_HEAD, (head,))
    conn.executemany(_INSERT_SPAN_ROWS, rows)
    conn.execute("COMMIT")


def raw_write(conn: sqlite3.Connection, chunk: list[SpanRecord]) -> None:
    """What ours writes for a batch, by hand: the batch's payload blob, its event row, the
    chain head, one row per span; one transaction."""
    text = _payload(chunk)
    digest = hashlib.sha256(text.encode()).hexdigest()
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(_INSERT_BLOBS, (digest, text, len(text), 0))
    conn.execute(_INSERT_EVENT.format(""), _event_params(digest, "raw", text))
    _finish(conn, digest, [_span_row(s, "raw") for s in chunk])


@dataclass
class RawSpanEvent:
    """One span as its own event, for raw ``sqlite3``: what ours writes per call."""

    id: str  # the payload's hash
    text: str
    attempt: str
    row: tuple


def raw_event(span: SpanRecord, attempt: str) -> RawSpanEvent:
    text = _payload([span])
    digest = hashlib.sha256(text.encode()).hexdigest()
    return RawSpanEvent(digest, text, attempt, _span_row(span, attempt))


def raw_write_events(conn: sqlite3.Connection, events: list[RawSpanEvent]) -> set[str]:
    """Each span its own payload blob, event row and span row; the chain head; one
    transaction. Returns the ids inserted."""
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(_INSERT_BLOBS, [(e.id, e.text, len(e.text), 0) for e in events])
    fresh = set()
    insert = _INSERT_EVENT.format(" OR IGNORE")
    for e in events:
        cur = conn.execute(insert, _event_params(e.id, e.attempt, e.text))
        if cur.rowcount == 1:
            fresh.add(e.id)
    _finish(conn, events[-1].id, [e.row for e in events])
    return fresh


def raw_connection(db: Path, synchronous: str) -> sqlite3.Connection:
    """Raw ``sqlite3`` with the store's connection settings."""
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
    conn.execute("PRAGMA wal_autocheckpoint=10000")
    return conn


def raw_concurrent(db: Path, n: int, synchronous: str, writers: int = 8) -> float:
    """Raw ``sqlite3``, ``writers`` threads each writing one span per call, through the same
    group commit as ours."""
    conn = raw_connection(db, synchronous)
    lock = threading.Lock()

    def commit(events: list[RawSpanEvent]) -> set[str]:
        with lock:
            return raw_write_events(conn, events)

    group: GroupCommit[RawSpanEvent] = GroupCommit(commit)
    shares = [spans(f"r{w}", n // writers) for w in range(writers)]

    def write(batch: list[SpanRecord], attempt: str) -> None:
        for span in batch:
            group.write(lambda span=span: [raw_event(span, attempt)])

    threads = [
        threading.Thread(target=write, args=(share, f"r{w}")) for w, share in enumerate(shares)
    ]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rate = writers * (n // writers) / (time.perf_counter() - started)
    conn.close()
    return rate


def raw_grouped(db: Path, n: int, synchronous: str, writers: int = 8) -> float:
    """Raw ``sqlite3`` from one thread, ``writers`` spans (each its own event) per
    transaction: group commit with no thread hand-offs."""
    conn = raw_connection(db, synchronous)
    batch = spans("g", n)
    started = time.perf_counter()
    for i in range(0, n, writers):
        raw_write_events(
            conn, [raw_event(s, f"g{j}") for j, s in enumerate(batch[i : i + writers])]
        )
    rate = n / (time.perf_counter() - started)
    conn.close()
    return rate


def raw_sqlite3(db: Path, prefix: str, n: int, size: int, synchronous: str) -> float:
    """The floor: raw ``sqlite3`` with the store's connection settings, executemany per batch."""
    conn = raw_connection(db, synchronous)
    batch = spans(prefix, n)
    started = time.perf_counter()
    for i in range(0, n, size):
        raw_write(conn, batch[i : i + size])
    rate = n / (time.perf_counter() - started)
    conn.close()
    return rate


def main(n: int, rounds: int, synchronous: str) -> None:
    """Each measurement writes into a new database with the store's schema; ours and raw
    alternate ``rounds`` times and the medians are printed (two shared cores make single runs
    noisy)."""
    one_n = max(1000, n // 10)
    figures: dict[str, list[float]] = {
        "one": [],
        "raw_one": [],
        "batched": [],
        "raw": [],
        "concurrent": [],
        "raw_concurrent": [],
        "raw_grouped": [],
    }
    query = f"?synchronous={synchronous}"
    with tempfile.TemporaryDirectory() as tmp:

        def fresh(name: str) -> Path:
            db = Path(tmp) / f"{name}.db"
            Store.open(f"sqlite:///{db}").close()  # the schema, by the store's migrations
            return db

        def ours(name: str, run) -> float:  # type: ignore[no-untyped-def]
            store = Store.open(f"sqlite:///{fresh(name)}{query}")
            try:
                return run(store)
            finally:
                store.close()

        for r in range(rounds):
            figures["one"].append(ours(f"one{r}", lambda st: ours_one_at_a_time(st, "a", one_n)))
            figures["raw_one"].append(raw_sqlite3(fresh(f"raw-one{r}"), "a", one_n, 1, synchronous))
            figures["batched"].append(ours(f"many{r}", lambda st: ours_batched(st, "a", n)))
            figures["raw"].append(raw_sqlite3(fresh(f"raw{r}"), "a", n, 1000, synchronous))
            figures["concurrent"].append(
                ours(f"eight{r}", lambda st: ours_concurrent(st, "c", n // 2))
            )
            figures["raw_concurrent"].append(
                raw_concurrent(fresh(f"raw8-{r}"), n // 2, synchronous)
            )
            figures["raw_grouped"].append(raw_grouped(fresh(f"rawg-{r}"), n // 2, synchronous))
    one, raw_one, batched, raw, concurrent, raw_concurrent_rate, raw_grouped_rate = (
        statistics.median(v) for v in figures.values()
    )
    print(
        f"durable span ingest, SQLite WAL synchronous={synchronous.upper()}, median of {rounds} "
        "rounds "
        f"({one_n:,} spans one by one, {n:,} batched by 1,000; a new database each):"
    )
    print(
        f"  one span per transaction: {one:,.0f} spans/s (target >= 7,000); raw sqlite3 "
        f"doing the same: {raw_one:,.0f} spans/s ({one / raw_one:.0%})"
    )
    print(f"  batched:                  {batched:,.0f} spans/s (target >= 57,000)")
    print(
        f"  8 writers, one span per call: {concurrent:,.0f} spans/s (group commit; "
        f"target >= 30,000); raw sqlite3 doing the same writes through the same group commit: "
        f"{raw_concurrent_rate:,.0f} spans/s ({concurrent / raw_concurrent_rate:.0%}); raw "
        f"sqlite3 committing them 8 to a transaction from one thread: {raw_grouped_rate:,.0f}"
    )
    print(
        f"  raw sqlite3 executemany:  {raw:,.0f} spans/s -> ours batched is "
        f"{batched / raw:.0%} of raw (target >= 50%)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--synchronous", choices=["normal", "full"], default="normal")
    args = parser.parse_args()
    main(args.spans, args.rounds, args.synchronous)
