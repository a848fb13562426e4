"""Materialize and export 1,000,000 training events; events/s, examples/s, peak memory.

    .venv/bin/python -m bench.export_million [--events 1000000] [--db /tmp/tc-bench.db]
    .venv/bin/python -m bench.export_million --events 100000 \
        --database-url postgresql://postgres@127.0.0.1:5432/tc_bench   # an existing database

Builds (once, through the recorder, in batches) a store with sessions of two lineages scoring
cycle after cycle: per lineage and cycle a rollout, an attempt with two spans (one event), an
artifact and a score (about 6.5 events), plus the comparisons. Then, in a fresh process, runs a full
materialization and exports TRL SFT, TRL DPO and reward rows, and reports throughput and the
measuring process's peak RSS. Targets: >= 50,000 events/s end to end, peak memory <= 256 MB.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from domain.agent import AgentDefinition, AgentParameters, AgentSnapshot
from domain.execution import SpanRecord, Usage
from store import Store
from store.records.attempt_records import AttemptStart

EVENTS_PER_LINEAGE_CYCLE = 6.5


def generate(url: str, target: int) -> int:
    store = Store.open(url)
    rec, rng = store.recorder, random.Random(7)
    cycles = 60
    sessions = max(1, round(target / (2 * cycles * EVENTS_PER_LINEAGE_CYCLE)))
    inputs = [f"Question {i}: explain topic {i} to a new engineer." for i in range(cycles)]
    started = time.perf_counter()
    for s in range(sessions):
        with rec.batch():
            snapshots = {}
            for label in "AB":
                lineage = f"b{s}-{label}"
                agent = AgentDefinition(
                    name=label,
                    system_prompt=f"You are assistant {label}. Answer question set {s % 50}.",
                    parameters=AgentParameters(model="offline-bench", max_tokens=400),
                )
                registered = rec.register_lineage(
                    session_id=f"b{s}",
                    session_name=f"bench {s}",
                    lineage_id=lineage,
                    label=label,
                    workflow_id=f"lineage-{lineage}",
                    agent=agent,
                    inputs=inputs,
                )
                snapshots[label] = (
                    AgentSnapshot(agent_id=lineage, version=1, **agent.hashes().model_dump()),
                    registered.input_hashes,
                )
            for c in range(1, cycles + 1):
                for label in "AB":
                    lineage, (snapshot, hashes) = f"b{s}-{label}", snapshots[label]
                    rollout, attempt = f"{lineage}:c{c}", f"{lineage}:c{c}:a1"
                    output = (
                        f"- {label} answer {s}/{c}: " + "point " * rng.randint(20, 60)
                    ).strip()
                    rec.record_attempt_started(
                        AttemptStart(
                            session_id=f"b{s}",
                            lineage_id=lineage,
                            rollout_id=rollout,
                            cycle=c,
                            attempt_id=attempt,
                            attempt_number=1,
                            snapshot=snapshot,
                            input_hash=hashes[c - 1],
                            model_id="offline-bench",
                            parameters={"temperature": 0.7, "maxTokens": 400, "topP": None},
                        )
                    )
                    spans = [
                        SpanRecord(
                            span_id=f"{attempt}:s1",
                            sequence=1,
                            span_type="llm_call",
                            input=inputs[c - 1],
                            output=output,
                            prompt_tokens=30,
                            completion_tokens=60,
                            duration_ms=3,
                        ),
                        SpanRecord(
                            span_id=f"{attempt}:s2",
                            parent_span_id=f"{attempt}:s1",
                            sequence=2,
                            span_type="output",
                            output=output,
                        ),
                    ]
                    rec.record_attempt_succeeded(
                        session_id=f"b{s}",
                        lineage_id=lineage,
                        rollout_id=rollout,
                        cycle=c,
                        agent_version=1,
                        attempt_id=attempt,
                        artifact_id=f"{rollout}:artifact",
                        output=output,
                        spans=spans,
                        usage=Usage(prompt_tokens=30, completion_tokens=60),
                        duration_ms=3,
                    )
                    rec.record_score(
                        session_id=f"b{s}",
                        lineage_id=lineage,
                        evaluation_id=f"{rollout}:e",
                        artifact_id=f"{rollout}:artifact",
                        rollout_id=rollout,
                        cycle=c,
                        agent_version=1,
                        score=float(rng.randint(0, 10)),
                        comment="ok",
                        rater="bench",
                        outcome=None,
                    )
        if s % 50 == 0:
            done = store.queries.event_count()
            rate = done / (time.perf_counter() - started)
            print(f"\r  generating: {done:,} events ({rate:,.0f}/s)", end="", flush=True)
    total = store.queries.event_count()
    print(f"\r  generated {total:,} events in {time.perf_counter() - started:.0f}s" + " " * 20)
    store.close()
    return total


def measure(url: str, out: Path) -> None:
    """Runs in a fresh process so its peak RSS is the pipeline's alone."""
    from store.exports.exporter import export
    from store.exports.materializer import Materializer

    store = Store.open(url)
    events = store.queries.event_count()
    t0 = time.perf_counter()
    result = Materializer(store.engine).run(full=True)
    t1 = time.perf_counter()
    rows = 0
    for fmt in ("trl-sft", "trl-dpo", "reward"):
        exported = export(store.engine, fmt, out)
        rows += exported.counts["train"] + exported.counts["eval"]
    t2 = time.perf_counter()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "events": events,
                "examples": result.examples_added,
                "rows_exported": rows,
                "materialize_s": round(t1 - t0, 2),
                "export_s": round(t2 - t1, 2),
                "events_per_s": round(events / (t2 - t0)),
                "examples_per_s": round((result.examples_added + rows) / (t2 - t0)),
                "peak_rss_mb": round(peak_mb, 1),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path, default=Path(tempfile.gettempdir()) / "tc-bench.db")
    parser.add_argument(
        "--database-url",
        help="measure on this store instead of the SQLite file --db (generated if it is empty)",
    )
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    url = args.database_url or f"sqlite:///{args.db}"
    out = args.db.with_suffix(".exports")
    if args.measure_only:
        measure(url, out)
        return
    store = Store.open(url)
    empty = store.queries.event_count() == 0
    store.close()
    if empty:
        generate(url, args.events)
    report = subprocess.run(
        [sys.executable, "-m", "bench.export_million", "--database-url", url, "--measure-only"],
        capture_output=True,
        text=True,
        check=True,
    )
    figures = json.loads(report.stdout.strip().splitlines()[-1])
    print(
        f"materialize + export of {figures['events']:,} events "
        f"(targets: >= 50,000 events/s, <= 256 MB):"
    )
    print(
        f"  materialize {figures['materialize_s']} s ({figures['examples']:,} examples), "
        f"export {figures['export_s']} s ({figures['rows_exported']:,} rows: SFT, DPO, reward)"
    )
    print(
        f"  {figures['events_per_s']:,} events/s end to end, "
        f"{figures['examples_per_s']:,} examples/s, peak RSS {figures['peak_rss_mb']} MB"
    )


if __name__ == "__main__":
    main()
