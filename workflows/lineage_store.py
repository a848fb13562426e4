"""The lineage's store steps: each a short, idempotent transaction run as a local activity, and
the bookkeeping around them (a `stop` cancels the step in flight; a failure the store will not
get past is surfaced in ``state``; what a human sent is numbered and, if refused, recorded as a
rejection). ``LineageWorkflow`` owns one and shares its carried state with it.
"""

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy

# A failed local activity surfaces as its own error (an ApplicationError), a failed queued one
# as an ActivityError: both are FailureErrors.
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from activities.feedback import FeedbackActivities
    from domain.feedback import preview, redacted
    from domain.lineage import (
        CarriedState,
        LineageInput,
        RecordRejectionInput,
        feedback_key,
        note,
    )
    from domain.refusals import bounded

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")
RECENT_REJECTIONS = 10
STORE_ACTIVITY = {
    "start_to_close_timeout": timedelta(seconds=60),
    # The store may be briefly unreachable; keep trying rather than lose the record.
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
    ),
}


class LineageStopped(Exception):
    """`stop` arrived while a step was in flight; the step was cancelled."""


class LineageStoreSteps:
    """The store steps of one lineage run, over the state the workflow carries (the same
    object: what a step notes there, ``state`` shows)."""

    def __init__(self, inp: LineageInput, carried: CarriedState) -> None:
        self._inp = inp
        self._s = carried

    async def step(self, step: Callable[[Any, ArgT], ResultT], arg: ArgT) -> ResultT:
        """A step that only writes (and reads) the store: a short, idempotent database
        transaction, run as a local activity on this worker. It is retried and recorded in the
        history (as a marker) like any activity, without a task-queue round trip and a
        workflow task of its own. Steps that call a model stay activities on the queue."""
        return await self.unless_stopped(
            workflow.start_local_activity_method(step, arg, **STORE_ACTIVITY)
        )

    async def unless_stopped(self, step: workflow.ActivityHandle[ResultT]) -> ResultT:
        """The step's result; a `stop` sent meanwhile cancels it and ends the run
        (LineageStopped), so that nothing holds a stopped lineage open: not a store step
        retrying while the database is away, nor a long model call. What a step committed
        stays (each is one idempotent transaction); the rest never happens."""
        await workflow.wait_condition(lambda: step.done() or self._s.stop_requested)
        if not step.done():
            step.cancel()
            raise LineageStopped
        return await step

    async def recorded(self, what: str, step: Callable[[Any, ArgT], Any], arg: ArgT) -> bool:
        """A store step run from a signal handler: a failure the store will not get past (a
        permanent error, or retries exhausted) is surfaced in ``state`` instead of failing the
        lineage; the signal changes nothing."""
        try:
            await self.step(step, arg)
        except FailureError as err:
            self._s.last_error = note(f"{what} not recorded: {err.cause or err}")
            return False
        except LineageStopped:
            return False  # the lineage is stopping; the signal changes nothing
        return True

    async def reject(self, kind: str, payload: Any, reason: str) -> None:
        """What a human sent, refused: counted, shown in ``state`` and recorded with why. The
        quotation and the reason are redacted: a key pasted into a refused payload is no more
        kept than one in an accepted one."""
        reason = bounded(redacted(reason))
        self._s.rejected_count += 1
        # "score: Input should be …", not "score: score: Input should be …"
        shown = bounded(reason if reason.startswith(f"{kind}:") else f"{kind}: {reason}")
        self._s.last_rejection = shown
        self._s.recent_rejections = [*self._s.recent_rejections, shown][-RECENT_REJECTIONS:]
        await self.recorded(
            "rejection",
            FeedbackActivities.record_rejection,
            RecordRejectionInput(
                session_id=self._inp.session_id,
                lineage_id=self._inp.lineage_id,
                rejection_id=self.feedback_id("rejected", payload),
                cycle=self._s.cycle,
                kind=kind,
                payload_preview=redacted(preview(payload)),
                reason=reason,
            ),
        )

    def feedback_id(self, kind: str, sent: Any) -> str:
        """The next directive, lock or rejection's id: its place in the lineage and what was
        sent (handlers run in history order, so a replay numbers them the same)."""
        self._s.feedback_seq += 1
        return feedback_key(self._inp.lineage_id, kind, self._s.feedback_seq, sent)
