"""Durable span ingest into the store: one span per transaction, and batched, against raw
``sqlite3.executemany`` into the same tables in the same run.

    .venv/bin/python -m bench.span_ingest [--spans 20000]

Every path commits with SQLite in WAL mode and synchronous=NORMAL. Ours writes what a span costs
in Training Camp: the event (content-addressed payload + log row) and its projection row, in
one transaction. Targets: batched >= 57,000 spans/s and >= 50% of raw; one at a time >= 7,000.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from domain.execution import SpanRecord
from store import Store

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


def ours_one_at_a_time(store: Store, n: int) -> float:
    batch = spans("one", n)
    started = time.perf_counter()
    for span in batch:
        store.recorder.record_spans(session_id="b", lineage_id="b", attempt_id="one", spans=[span])
    return n / (time.perf_counter() - started)


def ours_batched(store: Store, n: int, size: int = 1000) -> float:
    batch = spans("many", n)
    started = time.perf_counter()
    for i in range(0, n, size):
        store.recorder.record_spans(
            session_id="b", lineage_id="b", attempt_id="many", spans=batch[i : i + size]
        )
    return n / (time.perf_counter() - started)


def raw_executemany(db: Path, n: int, size: int = 1000) -> float:
    """The floor: the same three rows per span, prepared by hand, executemany per batch."""
    import hashlib

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    batch = spans("raw", n)
    started = time.perf_counter()
    for i in range(0, n, size):
        blobs, events, rows = [], [], []
        for span in batch[i : i + size]:
            text = json.dumps(span.model_dump(), sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(text.encode()).hexdigest()
            blobs.append((digest, text, len(text), 0))
            events.append(
                (
                    span.span_id,
                    0,
                    "attempt.span_recorded",
                    1,
                    "b",
                    "b",
                    None,
                    None,
                    "raw",
                    digest,
                    len(text),
                    "[]",
                )
            )
            rows.append(
                (
                    span.span_id,
                    "raw",
                    None,
                    span.sequence,
                    span.span_type,
                    span.name,
                    None,
                    None,
                    span.model_id,
                    30,
                    60,
                    None,
                    None,
                    None,
                    None,
                    3,
                    None,
                    None,
                    None,
                    None,
                    0,
                )
            )
        conn.execute("BEGIN")
        conn.executemany("INSERT OR IGNORE INTO payload_blobs VALUES (?,?,?,?)", blobs)
        conn.executemany(
            "INSERT OR IGNORE INTO training_events (id, timestamp, event_type, schema_version,"
            " session_id, lineage_id, agent_id, artifact_id, attempt_id, payload_hash,"
            " payload_size, tags) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            events,
        )
        conn.executemany(
            "INSERT OR IGNORE INTO execution_spans (id, attempt_id, parent_span_id, sequence,"
            " type, name, input_hash, output_hash, model_id, prompt_tokens, completion_tokens,"
            " tool_name, tool_args, tool_result, tool_error, duration_ms, estimated_cost,"
            " started_at, trace_id, otel_span_id, created_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        conn.execute("COMMIT")
    rate = n / (time.perf_counter() - started)
    conn.close()
    return rate


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "spans.db"
        store = Store.open(f"sqlite:///{db}")
        one = ours_one_at_a_time(store, max(1000, n // 10))
        batched = ours_batched(store, n)
        raw = raw_executemany(db, n)
        store.close()
    print(f"durable span ingest, SQLite WAL synchronous=NORMAL ({n:,} spans batched by 1,000):")
    print(f"  one span per transaction: {one:,.0f} spans/s (target >= 7,000)")
    print(f"  batched:                  {batched:,.0f} spans/s (target >= 57,000)")
    print(
        f"  raw sqlite3 executemany:  {raw:,.0f} spans/s -> ours batched is "
        f"{batched / raw:.0%} of raw (target >= 50%)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=20_000)
    main(parser.parse_args().spans)
