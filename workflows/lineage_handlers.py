"""What people send a lineage — the signals score, directive, lock, unlock, stop and retry, the
submit_score and await_output updates, the state query — and the store steps that record them.
``LineageWorkflow`` (workflows/lineage.py) tells the story of a cycle on top of these.

Every signal is answered: acted on, or recorded as rejected with the reason. A step a handler
runs is a local activity; a failure the store will not get past is surfaced in ``state`` and
changes nothing.
"""

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy

# A failed local activity surfaces as its own error (an ApplicationError), a failed queued one
# as an ActivityError: both are FailureErrors, and every handler below catches that.
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities.feedback import FeedbackActivities
    from domain.agent import AgentRef
    from domain.feedback import (
        ScoreAccepted,
        excerpt,
        parse_directive,
        parse_lock,
        parse_score,
        preview,
    )
    from domain.lineage import (
        DIRECTIVES_SHOWN,
        MAX_QUEUED_SCORES,
        CarriedState,
        LineageInput,
        LineageState,
        LineageStatus,
        QueuedScore,
        RecordDirectiveInput,
        RecordLockInput,
        RecordRejectionInput,
        feedback_key,
        note,
    )

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
# await_output: how far ahead a caller may wait, and how many may wait at once (Temporal admits
# ten updates in flight per workflow; submit_score must always find a slot)
MAX_CYCLES_AHEAD = 100
MAX_OUTPUT_WAITERS = 5


class LineageStopped(Exception):
    """`stop` arrived while a step was in flight; the step was cancelled."""


class LineageHandlers:
    """The handlers of ``LineageWorkflow`` and the state they share with its story."""

    def __init__(self, inp: LineageInput) -> None:
        carried = inp.carried or CarriedState(
            agent=AgentRef(agent_id=inp.lineage_id, version=0), input_hashes=[]
        )
        self._inp = inp
        self._s = carried
        self._status: LineageStatus = "starting"
        self._run_cycles = 0
        self._retry_requested = False
        self._continuing = False  # about to continue as new: `await_output` callers return
        self._output_waiters = 0  # await_output handlers in flight
        # Directives being recorded: a cycle step reads the store's directives once none is
        # (so that each one is either in the step's reading or left for the next)
        self._directives_in_flight = 0
        self._signals: dict[str, Callable[[Any], Awaitable[None]]] = {
            "score": self._score,
            "directive": self._directive,
            "lock": self._lock,
            "unlock": self._unlock,
            "stop": self._stop,
            "retry": self._retry,
        }

    @workflow.signal(dynamic=True)
    async def on_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Every signal: score, directive, lock, unlock, stop, retry (see the README).

        One handler takes them all, payloads unread: given a typed handler, the SDK drops a
        signal whose payload its converter cannot read (JSON nested too deep, a lone
        surrogate) and fails every workflow task on a second argument, wedging the lineage.
        Read here, each is acted on or leaves a rejection record."""
        handler = self._signals.get(name)
        try:
            payload = self._read_signal(name, handler, args)
        except ValueError as exc:
            quoted = args[0].payload.data.decode("utf-8", "replace") if args else None
            await self._reject(name if handler else "signal", quoted, str(exc))
            return
        assert handler is not None
        await handler(payload)

    def _read_signal(
        self, name: str, handler: Callable[[Any], Awaitable[None]] | None, args: Sequence[RawValue]
    ) -> Any:
        if handler is None:
            raise ValueError(
                f"no signal named {excerpt(name)}; a lineage takes {', '.join(self._signals)}"
            )
        if len(args) > 1:
            raise ValueError(f"takes one argument (a JSON object), got {len(args)}")
        if not args:
            return None
        try:
            return workflow.payload_converter().from_payload(args[0].payload, Any)
        except Exception as exc:  # the converters' errors share no type
            raise ValueError(f"payload cannot be read: {_converter_reason(exc)}") from None

    async def _score(self, payload: Any) -> None:
        try:
            parsed = parse_score(payload)
        except ValueError as exc:
            await self._reject("score", payload, str(exc))
            return
        if self._status in ("stopped", "completed"):
            await self._reject("score", payload, f"lineage is {self._status}")
            return
        if (full := self._queue_full()) is not None:
            await self._reject("score", payload, full)
            return
        self._s.queued_scores.append(QueuedScore(score=parsed, received_via="signal"))

    def _queue_full(self) -> str | None:
        """Why one more score cannot queue (the queue is carried across continue-as-new)."""
        if len(self._s.queued_scores) < MAX_QUEUED_SCORES:
            return None
        return (
            f"{MAX_QUEUED_SCORES} scores already wait for this lineage's outputs; score the "
            "current output once they are taken (query `state`: queued_scores)"
        )

    @workflow.update(name="submit_score")
    def submit_score(self, payload: Any = None) -> ScoreAccepted:
        parsed = parse_score(payload)
        if (full := self._queue_full()) is not None:  # the validator saw room; keep the bound
            raise ApplicationError(full, type="ScoreQueueFull", non_retryable=True)
        self._s.queued_scores.append(QueuedScore(score=parsed, received_via="update"))
        return ScoreAccepted(
            cycle=self._s.cycle if self._status == "awaiting_score" else None,
            score=parsed.score,
            comment=parsed.comment,
            rater=parsed.rater,
            queued_position=len(self._s.queued_scores),
            wants=parsed.wants,
        )

    @submit_score.validator
    def _validate_submit_score(self, payload: Any = None) -> None:
        """Refused scores fail the update as InvalidScore, not retryable: sending the same
        payload again cannot succeed (the message names the field and the problem)."""
        try:
            parsed = parse_score(payload)
        except ValueError as exc:
            raise ApplicationError(str(exc), type="InvalidScore", non_retryable=True) from None
        if self._status in ("stopped", "completed"):
            raise ApplicationError(
                f"lineage is {self._status}; it accepts no more scores",
                type="InvalidScore",
                non_retryable=True,
            )
        if (full := self._queue_full()) is not None:
            raise ApplicationError(full, type="ScoreQueueFull", non_retryable=True)
        if (
            parsed.cycle is not None
            and self._status == "awaiting_score"
            and parsed.cycle != self._s.cycle
        ):
            raise ApplicationError(
                f"cycle: score is for cycle {parsed.cycle}, but cycle {self._s.cycle} "
                "is awaiting its score",
                type="InvalidScore",
                non_retryable=True,
            )

    async def _directive(self, payload: Any) -> None:
        try:
            parsed = parse_directive(payload)
        except ValueError as exc:
            await self._reject("directive", payload, str(exc))
            return
        self._directives_in_flight += 1
        try:
            recorded = await self._recorded(
                "directive",
                FeedbackActivities.record_directive,
                RecordDirectiveInput(
                    session_id=self._inp.session_id,
                    lineage_id=self._inp.lineage_id,
                    directive_id=self._feedback_id("directive", parsed),
                    cycle=self._s.cycle,
                    kind=parsed.kind,
                    content=parsed.content,
                ),
            )
        finally:
            self._directives_in_flight -= 1
        if not recorded:
            return  # a directive the store refused does not steer the trainer either
        # The trainer reads every directive from the store; the lineage keeps the latest few
        if parsed.kind == "sticky":
            self._s.sticky_count += 1
            shown = [*self._s.sticky_directives, parsed.content]
            self._s.sticky_directives = shown[-DIRECTIVES_SHOWN:]
        else:
            self._s.oneshot_count += 1
            shown = [*self._s.oneshot_directives, parsed.content]
            self._s.oneshot_directives = shown[-DIRECTIVES_SHOWN:]

    async def _lock(self, payload: Any) -> None:
        await self._set_lock(True, payload)

    async def _unlock(self, payload: Any) -> None:
        await self._set_lock(False, payload)

    async def _set_lock(self, locked: bool, payload: Any) -> None:
        kind = "lock" if locked else "unlock"
        try:
            parsed = parse_lock(payload)
        except ValueError as exc:
            await self._reject(kind, payload, str(exc))
            return
        if self._s.locked == locked:
            await self._reject(kind, payload, f"lineage is already {kind}ed")
            return
        self._s.locked = locked
        recorded = await self._recorded(
            kind,
            FeedbackActivities.record_lock,
            RecordLockInput(
                session_id=self._inp.session_id,
                lineage_id=self._inp.lineage_id,
                event_key=self._feedback_id(kind, parsed),
                cycle=self._s.cycle,
                locked=locked,
                reason=parsed.reason,
            ),
        )
        if not recorded:
            self._s.locked = not locked

    async def _stop(self, payload: Any) -> None:
        self._s.stop_requested = True

    async def _retry(self, payload: Any) -> None:
        """Run a failed rollout again (e.g. after fixing the model endpoint)."""
        self._retry_requested = True

    @workflow.update(name="await_output")
    async def await_output(self, cycle: int) -> LineageState:
        """Wait until cycle ``cycle``'s output awaits its score (or the lineage stops or a
        rollout fails) and return the state: scripts and UIs need not poll ``state``.
        A run about to continue as new releases its waiters (handlers must finish first): a
        state whose cycle is below ``cycle`` means "call again" (``client.await_output``)."""
        self._output_waiters += 1
        try:
            await workflow.wait_condition(
                lambda: (
                    (self._status == "awaiting_score" and self._s.cycle >= cycle)
                    or self._status in ("failed", "stopped", "completed")
                    or self._continuing
                )
            )
        finally:
            self._output_waiters -= 1
        return self.state()

    @await_output.validator
    def _validate_await_output(self, cycle: int) -> None:
        if isinstance(cycle, bool) or not isinstance(cycle, int) or cycle < 1:
            raise ValueError(f"cycle: expected a cycle number >= 1, got {excerpt(cycle)}")
        # Temporal admits ten updates in flight per workflow: waiters must never take the slots
        # a submit_score needs, so they are few and for outputs the lineage can reach
        if cycle > self._s.cycle + MAX_CYCLES_AHEAD:
            raise ValueError(
                f"cycle: {cycle} is more than {MAX_CYCLES_AHEAD} cycles ahead of this lineage "
                f"(at cycle {self._s.cycle}); wait for a nearer output"
            )
        if self._output_waiters >= MAX_OUTPUT_WAITERS:
            raise ValueError(
                f"{MAX_OUTPUT_WAITERS} callers already wait for an output of this lineage; "
                "query `state` instead, or try again when one returns"
            )

    @workflow.query(name="state")
    def state(self) -> LineageState:
        return LineageState(
            session_id=self._inp.session_id,
            lineage_id=self._inp.lineage_id,
            label=self._inp.label,
            cycle=self._s.cycle,
            status=self._status,
            agent_version=self._s.agent.version,
            locked=self._s.locked,
            latest_output_preview=self._s.latest_output_preview,
            latest_output_words=self._s.latest_output_words,
            latest_output_cut_off=self._s.latest_output_cut_off,
            last_evolution=self._s.last_evolution,
            last_verdict=self._s.last_verdict,
            last_reading=self._s.last_reading,
            asked_for=self._s.asked_for,
            score_history=self._s.score_history,
            queued_scores=len(self._s.queued_scores),
            sticky_directives=self._s.sticky_directives,
            oneshot_directives=self._s.oneshot_directives,
            rejected_feedback=self._s.rejected_count,
            last_rejection=self._s.last_rejection,
            recent_rejections=self._s.recent_rejections,
            last_error=self._s.last_error,
            run_cycles=self._run_cycles,
            sticky_count=self._s.sticky_count,
            oneshot_count=self._s.oneshot_count,
        )

    async def _reject(self, kind: str, payload: Any, reason: str) -> None:
        self._s.rejected_count += 1
        # "score: Input should be …", not "score: score: Input should be …"
        shown = note(reason if reason.startswith(f"{kind}:") else f"{kind}: {reason}")
        self._s.last_rejection = shown
        self._s.recent_rejections = [*self._s.recent_rejections, shown][-RECENT_REJECTIONS:]
        await self._recorded(
            "rejection",
            FeedbackActivities.record_rejection,
            RecordRejectionInput(
                session_id=self._inp.session_id,
                lineage_id=self._inp.lineage_id,
                rejection_id=self._feedback_id("rejected", payload),
                cycle=self._s.cycle,
                kind=kind,
                payload_preview=preview(payload),
                reason=reason,
            ),
        )

    async def _recorded(self, what: str, step: Callable[[Any, ArgT], Any], arg: ArgT) -> bool:
        """A store step run from a signal handler: a failure the store will not get past (a
        permanent error, or retries exhausted) is surfaced in ``state`` instead of failing the
        lineage; the signal changes nothing."""
        try:
            await self._store_step(step, arg)
        except FailureError as err:
            self._s.last_error = note(f"{what} not recorded: {err.cause or err}")
            return False
        except LineageStopped:
            return False  # the lineage is stopping; the signal changes nothing
        return True

    def _feedback_id(self, kind: str, sent: Any) -> str:
        """The next directive, lock or rejection's id: its place in the lineage and what was
        sent (handlers run in history order, so a replay numbers them the same)."""
        self._s.feedback_seq += 1
        return feedback_key(self._inp.lineage_id, kind, self._s.feedback_seq, sent)

    async def _store_step(
        self, step: Callable[[Any, ArgT], ResultT], arg: ArgT, **options: Any
    ) -> ResultT:
        """A step that only writes (and reads) the store: a short, idempotent database
        transaction, run as a local activity on this worker. It is retried and recorded in the
        history (as a marker) like any activity, without a task-queue round trip and a
        workflow task of its own. Steps that call a model stay activities on the queue."""
        return await self._unless_stopped(
            workflow.start_local_activity_method(step, arg, **(options or STORE_ACTIVITY))
        )

    async def _unless_stopped(self, step: workflow.ActivityHandle[ResultT]) -> ResultT:
        """The step's result; a `stop` sent meanwhile cancels it and ends the run
        (LineageStopped), so that nothing holds a stopped lineage open: not a store step
        retrying while the database is away, nor a long model call. What a step committed
        stays (each is one idempotent transaction); the rest never happens."""
        await workflow.wait_condition(lambda: step.done() or self._s.stop_requested)
        if not step.done():
            step.cancel()
            raise LineageStopped
        return await step


def _converter_reason(error: BaseException) -> str:
    """What the converter said, briefly (pydantic's first line only counts its errors)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    reason = lines[1] if len(lines) > 1 and "validation error" in lines[0] else lines[0]
    return reason.split(" [type=")[0][:200]
