"""Load: 200 lineages x 5 cycles scored by a scripted reviewer; then Temporal and the store are
reconciled, count by count.

    .venv/bin/python -m bench.load_reconcile [--lineages 200] [--cycles 5]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter

from client import start_session
from domain.events import ArtifactCreated, ArtifactScored, AttemptCompleted, RolloutStarted
from domain.settings import Settings
from examples.scripted_reviewer import review
from services.dev_server import start_in_memory
from store import Store
from store.eventstore import event_log
from tests.conftest import make_spec
from worker import build_worker
from workflows.lineage import LineageWorkflow


async def main(lineages: int, cycles: int) -> None:
    env = await start_in_memory()
    client = env.client
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{tmp}/load.db")
        settings = Settings(
            task_queue="load", database_url=str(store.engine.url), max_concurrent_activities=100
        )
        started = time.perf_counter()
        async with build_worker(client, store, settings):
            handles = []
            for first in range(0, lineages, 25):
                labels = tuple(f"L{i}" for i in range(first, min(first + 25, lineages)))
                handles += await start_session(client, make_spec(labels=labels), "load")

            async def reviewer(handle) -> None:  # type: ignore[no-untyped-def]
                for cycle in range(1, cycles + 1):
                    while True:
                        state = await handle.query(LineageWorkflow.state)
                        if state.status == "awaiting_score" and state.cycle == cycle:
                            break
                        await asyncio.sleep(0.2)
                    if cycle < cycles:
                        text = await asyncio.to_thread(
                            store.queries.artifact_text, f"{state.lineage_id}:c{cycle}:artifact"
                        )
                        verdict = review(text, len(text.split()))
                        await handle.signal("score", verdict.model_dump())

            await asyncio.gather(*(reviewer(h) for h in handles))
            states = await asyncio.gather(*(h.query(LineageWorkflow.state) for h in handles))
        elapsed = time.perf_counter() - started
        scored = cycles - 1
        temporal = {
            "lineages": len(states),
            "scores": sum(len(s.score_history) for s in states),
            "versions": sum(s.agent_version for s in states),
        }
        events = Counter(e.event_type for e in store.queries.events())
        evaluations = sum(len(store.queries.evaluations(s.lineage_id)) for s in states)
        rollouts = sum(len(store.queries.rollouts(s.lineage_id)) for s in states)
        versions = sum(len(store.queries.agent_versions(s.lineage_id)) for s in states)
        with store.engine.connect() as conn:
            chain = event_log.verify(conn)
        checks = {
            "scores in Temporal = evaluations in the store": temporal["scores"]
            == evaluations
            == events[ArtifactScored.event_type]
            == lineages * scored,
            "rollouts = cycles run": rollouts
            == events[RolloutStarted.event_type]
            == lineages * cycles,
            "agent versions agree": temporal["versions"] == versions,
            "attempts completed = artifacts": events[AttemptCompleted.event_type]
            == events[ArtifactCreated.event_type]
            == rollouts,
            "event log intact": chain.ok,
        }
        print(
            f"{lineages} lineages x {cycles} cycles ({lineages * scored:,} scores) in "
            f"{elapsed:.0f} s; {sum(events.values()):,} events"
        )
        for name, ok in checks.items():
            print(f"  {'ok ' if ok else 'MISMATCH'} {name}")
        store.close()
    await env.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lineages", type=int, default=200)
    parser.add_argument("--cycles", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.lineages, args.cycles))
