"""The baseline for the orchestration-overhead bench: a workflow that runs as many trivial
activities as a lineage does, of the same kinds (local or on the task queue), at the same
points of its cycle, and waits for a signal — and nothing else.

A lineage registers once (a local activity), then per cycle runs the agent (an activity on the
queue), waits for the score, trains on it and records it (two local activities with the rules
engine: take_cycle_step, the verdict on the last change, reward analysis, credit, planning and
evolution; record_cycle_step, the score and the new version; a third, share_outcome, when a
judged change taught something). The baseline runs the first two, so that when cycle N awaits
its score both sides have run 1 + N + 2(N - 1) activities, the same ones local.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

LOCAL_AT_START = 1  # register_lineage
QUEUED_BEFORE_SCORE = 1  # run_agent
LOCAL_AFTER_SCORE = 2  # take_cycle_step, record_cycle_step


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
        await self._steps(LOCAL_AT_START, local=True)
        for cycle in range(1, cycles + 1):
            self._cycle, self._waiting = cycle, False
            await self._steps(QUEUED_BEFORE_SCORE, local=False)
            self._waiting = True
            await workflow.wait_condition(lambda c=cycle: self._scores >= c)
            self._waiting = False
            await self._steps(LOCAL_AFTER_SCORE, local=True)
        return self._cycle

    async def _steps(self, count: int, local: bool) -> None:
        for step in range(count):
            if local:
                await workflow.execute_local_activity(
                    noop, step, start_to_close_timeout=timedelta(seconds=30)
                )
            else:
                await workflow.execute_activity(
                    noop, step, start_to_close_timeout=timedelta(seconds=30)
                )

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
