"""A megabyte of model output checked on a worker, and another lineage's `state` meanwhile.

    .venv/bin/python -m bench.long_output_checks

A Temporal dev server, a SQLite store and one worker. Lineage B (the offline model) waits for
its first score; lineage A (Claude, through a local Messages API) is scored "Under 150 words."
and answers its second cycle with 1 MB of output: punctuation, then mixed text. While A's
output is measured (its words and checks, in a measuring thread: trainer/measure_budget.py),
B's `state` is queried every 20 ms. Printed per output: the time the measure took, the
checklist it gave, and the `state` latency while it ran (median and max). Aim: checked within
2 s, `state` within 200 ms (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
import uuid

from pydantic import SecretStr

from client import start_session
from domain.settings import Settings
from services.dev_server import start_in_memory
from store import Store
from tests.conftest import awaiting, make_spec, wait_for_state
from tests.fake_messages_api import FakeMessagesAPI, text_message
from trainer import checks
from worker import build_worker
from workflows.lineage import LineageWorkflow

MODEL = "claude-sonnet-5"
MEGABYTE = 1_000_000
SENTENCE = "The four-day week, perhaps, suits *small* teams: for example, 4 x 10 hours. "
OUTPUTS = {
    "punctuation": "".join(
        random.Random(61).choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") for _ in range(MEGABYTE)
    ),
    "mixed": (SENTENCE * (MEGABYTE // len(SENTENCE) + 1))[:MEGABYTE],
}


async def one(name: str, output: str, client, store: Store, queue: str) -> None:  # type: ignore[no-untyped-def]
    window: list[float] = []  # when the measure of the megabyte started and ended
    measure = checks.measure

    def timed(text: str, wishes):  # type: ignore[no-untyped-def]
        if len(text) < MEGABYTE:
            return measure(text, wishes)
        window.append(time.perf_counter())
        try:
            return measure(text, wishes)
        finally:
            window.append(time.perf_counter())

    checks.measure = timed  # type: ignore[assignment]
    latencies: list[tuple[float, float]] = []  # (sent, answered)
    with FakeMessagesAPI() as api:
        api.script = [(200, text_message("A short first answer.", MODEL))]
        api.script.append((200, text_message(output, MODEL)))
        settings = Settings(
            task_queue=queue,
            database_url=str(store.engine.url),
            anthropic_api_key=SecretStr("sk-bench"),
            anthropic_base_url=api.base_url,
        )
        async with build_worker(client, store, settings):
            (b,) = await start_session(client, make_spec(), queue)
            await wait_for_state(b, awaiting(1), timeout=60)
            huge = make_spec(model=MODEL, options={"revisionAttempts": 0})
            (a,) = await start_session(client, huge, queue)
            await wait_for_state(a, awaiting(1), timeout=60)
            await a.execute_update("submit_score", {"score": 4, "comment": "Under 150 words."})
            while len(window) < 2:
                sent = time.perf_counter()
                await b.query(LineageWorkflow.state)
                latencies.append((sent, time.perf_counter()))
                await asyncio.sleep(0.02)
            second = await wait_for_state(a, awaiting(2), timeout=120)
    checks.measure = measure  # type: ignore[assignment]
    start, end = window
    during = [done - sent for sent, done in latencies if sent < end and done > start]
    said = (
        "no query fell in the window"
        if not during
        else (
            f"median {statistics.median(during) * 1000:.0f} ms, max {max(during) * 1000:.0f} ms "
            f"({len(during)} queries)"
        )
    )
    print(f"{name}: checked in {end - start:.2f} s: {second.latest_checklist}")
    print(f"  `state` of another lineage while it ran: {said}")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = await start_in_memory()
        store = Store.open(f"sqlite:///{tmp}/bench.db")
        try:
            for name, output in OUTPUTS.items():
                await one(name, output, env.client, store, f"bench-{uuid.uuid4().hex[:8]}")
        finally:
            store.close()
            await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
