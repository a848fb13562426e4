"""The baseline for the orchestration-overhead bench: a workflow that, per cycle, runs as many
trivial activities as a lineage cycle does and waits for a signal — and nothing else."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

ACTIVITIES_PER_CYCLE = 6  # run_agent, record_score, analyze, credit, plan, apply


@activity.defn(name="bench_noop")
async def noop(step: int) -> int:
    return step


@workflow.defn(name="BareCycleWorkflow")
class BareCycleWorkflow:
    def __init__(self) -> None:
        self._scores = 0
        self._cycle = 0
        self._waiting = False

    @workflow.run
    async def run(self, cycles: int) -> int:
        for cycle in range(1, cycles + 1):
            self._cycle, self._waiting = cycle, False
            for step in range(ACTIVITIES_PER_CYCLE):
                await workflow.execute_activity(
                    noop, step, start_to_close_timeout=timedelta(seconds=30)
                )
            self._waiting = True
            await workflow.wait_condition(lambda c=cycle: self._scores >= c)
        return self._cycle

    @workflow.signal
    def score(self, payload: dict) -> None:
        self._scores += 1

    @workflow.query
    def awaiting(self) -> int:
        return self._cycle if self._waiting else 0

    @workflow.update
    async def await_output(self, cycle: int) -> int:
        """The lineage's `await_output`, minus the state it returns."""
        await workflow.wait_condition(lambda: self._waiting and self._cycle >= cycle)
        return self._cycle
