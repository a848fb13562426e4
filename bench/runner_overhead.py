"""The runner's own overhead per flow step, against a local Messages API.

    .venv/bin/python -m bench.runner_overhead [--steps 20] [--runs 50]

Runs a 20-step flow through the real Executor and anthropic SDK against a local HTTP server that
speaks the Messages API, then persists the attempt (spans included) to a SQLite store, as the
agent activity does. Overhead per step = (wall time - time inside the model calls) / steps: the
tracing, span collection, template rendering and the durable store write. Target: p50 ≤ 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from domain.agent import AgentDefinition, AgentParameters, AgentSnapshot, FlowStep
from runner.claude import ClaudeBackend
from runner.executor import Executor
from runner.model_backend import ModelReply, ModelRequest
from runner.telemetry import collector, runner_tracer
from runner.tools import ToolContext, default_registry
from store import Store
from store.records.attempt_records import AttemptStart
from tests.fake_messages_api import FakeMessagesAPI, text_message

MODEL = "claude-sonnet-5"


class TimedBackend:
    """Wraps a backend and accumulates the time spent inside model calls."""

    name = "claude"

    def __init__(self, inner: ClaudeBackend) -> None:
        self.inner = inner
        self.seconds = 0.0

    async def complete(self, request: ModelRequest) -> ModelReply:
        started = time.perf_counter()
        try:
            return await self.inner.complete(request)
        finally:
            self.seconds += time.perf_counter() - started


async def main(steps: int, runs: int) -> None:
    agent = AgentDefinition(
        name="bench",
        system_prompt="You are a careful writer.",
        flow=[
            FlowStep(name=f"s{i}", prompt=f"Step {i}: improve {{previous}}") for i in range(steps)
        ],
        parameters=AgentParameters(model=MODEL, max_tokens=512),
    )
    snapshot = AgentSnapshot(agent_id="bench", version=1, **agent.hashes().model_dump())
    with FakeMessagesAPI() as api, tempfile.TemporaryDirectory() as tmp:
        api.script = [(200, text_message("A short paragraph of text.", MODEL))] * (
            steps * (runs + 5)
        )
        backend = TimedBackend(ClaudeBackend(api_key="bench", base_url=api.base_url))
        executor = Executor(lambda _m: backend, default_registry(), runner_tracer(), collector())
        store = Store.open(f"sqlite:///{tmp}/bench.db")
        rec = store.recorder
        per_step_ms, model_ms, spans_written = [], [], 0
        for run in range(runs + 5):  # the first 5 warm up
            attempt_id = f"bench:c{run}:a1"
            backend.seconds = 0.0
            started = time.perf_counter()
            rec.record_attempt_started(
                AttemptStart(
                    session_id="bench",
                    lineage_id="bench",
                    rollout_id=f"bench:c{run}",
                    cycle=run,
                    attempt_id=attempt_id,
                    attempt_number=1,
                    snapshot=snapshot,
                    input_hash="x",
                    model_id=MODEL,
                    parameters={"temperature": 0.7, "maxTokens": 512},
                )
            )
            result = await executor.run(agent, "Remote work.", attempt_id, ToolContext("bench"))
            rec.record_attempt_succeeded(
                session_id="bench",
                lineage_id="bench",
                rollout_id=f"bench:c{run}",
                cycle=run,
                agent_version=1,
                attempt_id=attempt_id,
                artifact_id=f"bench:c{run}:artifact",
                output=result.output,
                spans=result.spans,
                usage=result.usage,
                duration_ms=1,
            )
            wall = time.perf_counter() - started
            if run >= 5:
                per_step_ms.append((wall - backend.seconds) / steps * 1000)
                model_ms.append(backend.seconds / steps * 1000)
                spans_written += len(result.spans)
        store.close()
    q = statistics.quantiles(per_step_ms, n=20)
    print(f"runner overhead per step, {steps}-step flow, {runs} attempts, spans persisted:")
    print(
        f"  p50 {statistics.median(per_step_ms):.2f} ms   p95 {q[18]:.2f} ms   "
        f"max {max(per_step_ms):.2f} ms   (target p50 <= 5 ms)"
    )
    print(f"  model call (local server + SDK) per step: p50 {statistics.median(model_ms):.2f} ms")
    print(f"  spans persisted: {spans_written} ({spans_written // runs} per attempt)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.steps, args.runs))
