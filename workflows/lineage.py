"""LineageWorkflow: one agent's evolutionary line, as a loop of cycles.

Each cycle: run the agent (each retry a recorded attempt) → wait, durably, for a human score →
unless locked, the Master Trainer turns the score into a targeted new version → next cycle.
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
    from activities.agent_execution import AgentExecutionActivities
    from activities.feedback import FeedbackActivities
    from activities.lineage_registry import LineageRegistryActivities
    from activities.trainer import TrainerActivities
    from domain import search_attributes
    from domain.agent import AgentRef
    from domain.cycle import Cycle
    from domain.feedback import (
        ScoreAccepted,
        excerpt,
        parse_directive,
        parse_lock,
        parse_score,
        preview,
    )
    from domain.lineage import (
        CarriedState,
        CycleStepInput,
        CycleStepResult,
        LineageInput,
        LineageResult,
        LineageState,
        LineageStatus,
        QueuedScore,
        RecordDirectiveInput,
        RecordLockInput,
        RecordRejectionInput,
        RegisterLineageInput,
        RolloutFailedInput,
        RunAgentInput,
        RunAgentResult,
        ScorePoint,
        feedback_key,
        score_before,
    )
    from domain.spec import LineageOptions

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")

# Agent errors that no retry can fix: fail the rollout at once.
NON_RETRYABLE_AGENT_ERRORS = ["ConstraintViolation", "FlowTemplateError"]
SCORE_HISTORY_CARRIED = 200
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
# The cycle step: with the rules engine milliseconds of work over the store (a local activity,
# retried like a store step); with Claude model calls (an activity on the queue). Store trouble
# is retried without limit; a model that keeps failing ends the training, not the lineage.
CYCLE_STEP_ACTIVITY = {
    "start_to_close_timeout": timedelta(minutes=5),
    "retry_policy": STORE_ACTIVITY["retry_policy"],
}
# The search attribute shows the lineage's lifecycle; the `state` query the phase of its cycle
# (the inbox, `training-camp inbox`, lists the outputs awaiting a score).
LIFECYCLE_STATUS = {"training": "running", "awaiting_score": "running"}


class LineageStopped(Exception):
    """`stop` arrived while a step was in flight; the step was cancelled."""


# Outside the workflow sandbox, which Temporal's Python SDK would otherwise wrap around every
# activation (and every payload it visits) and re-import this module into for every run: for a
# lineage that was a third of its worker's CPU per cycle. What the sandbox enforces holds here
# by construction and is checked in the suite: this module keeps no mutable module state, reads
# no clock, environment or file (domain/settings.py passes configuration in as input), and every
# saved and freshly recorded history is replayed inside the sandbox too (tests/test_durability.py),
# which refuses such calls. `TRAINING_CAMP_WORKFLOW_SANDBOX=1` runs it sandboxed on a worker.
@workflow.defn(name="LineageWorkflow", sandboxed=False)
class LineageWorkflow:
    @workflow.init
    def __init__(self, inp: LineageInput) -> None:
        carried = inp.carried or CarriedState(
            agent=AgentRef(agent_id=inp.lineage_id, version=0), input_hashes=[]
        )
        self._inp = inp
        self._s = carried
        self._status: LineageStatus = "starting"
        self._visible_status: str | None = None  # the TrainingCampStatus search attribute
        self._run_cycles = 0
        self._retry_requested = False
        self._continuing = False  # about to continue as new: `await_output` callers return
        self._output_waiters = 0  # await_output handlers in flight
        self._signals: dict[str, Callable[[Any], Awaitable[None]]] = {
            "score": self._score,
            "directive": self._directive,
            "lock": self._lock,
            "unlock": self._unlock,
            "stop": self._stop,
            "retry": self._retry,
        }

    # ---- the story of a lineage ----------------------------------------------------------

    @workflow.run
    async def run(self, inp: LineageInput) -> LineageResult:
        try:
            if inp.carried is None:
                await self._register()
            await self._cycles(inp.options)
        except LineageStopped:
            pass  # `stop` cancelled the step in flight
        if self._status != "completed":
            self._set_status("stopped")
            await workflow.wait_condition(workflow.all_handlers_finished)
        return self._result()

    async def _cycles(self, options: LineageOptions) -> None:
        """Cycle after cycle until stopped or done; continues as new when history grows."""
        while not self._s.stop_requested:
            if options.max_cycles is not None and self._s.cycle >= options.max_cycles:
                self._set_status("completed")
                return
            if self._should_continue_as_new():
                self._continuing = True
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._next_run_input())
            self._s.cycle += 1
            self._run_cycles += 1
            rollout = await self._rollout()
            if rollout is None:
                return  # stopped while the rollout had failed
            self._s.latest_output_preview = rollout.output_preview
            self._s.latest_output_words = rollout.output_words
            taken = False
            while not taken:  # a score the store refused leaves the cycle waiting
                queued = await self._await_score()
                if queued is None:
                    return  # stopped while waiting
                taken = await self._take_score(rollout, queued)

    async def _register(self) -> None:
        inp = self._inp
        assert inp.initial_agent is not None and inp.inputs is not None
        result = await self._store_step(
            LineageRegistryActivities.register_lineage,
            RegisterLineageInput(
                session_id=inp.session_id,
                session_name=inp.session_name,
                lineage_id=inp.lineage_id,
                label=inp.label,
                agent=inp.initial_agent,
                inputs=inp.inputs,
                documents=inp.documents or [],
            ),
        )
        self._s.agent = result.agent
        self._s.input_hashes = result.input_hashes
        self._s.cycle = result.last_cycle

    async def _rollout(self) -> RunAgentResult | None:
        """Run the agent on this cycle's input; a failed rollout waits for `retry` or `stop`."""
        tries = 0
        while True:
            rollout_id = Cycle(self._inp.lineage_id, self._s.cycle).rollout_id(retry=tries)
            self._set_status("running")
            try:
                return await self._unless_stopped(
                    workflow.start_activity_method(
                        AgentExecutionActivities.run_agent,
                        RunAgentInput(
                            session_id=self._inp.session_id,
                            lineage_id=self._inp.lineage_id,
                            rollout_id=rollout_id,
                            cycle=self._s.cycle,
                            agent=self._s.agent,
                            input_hash=self._cycle_input_hash(),
                            max_attempts=self._inp.options.max_attempts,
                        ),
                        **self._agent_activity_options(),
                    )
                )
            except FailureError as err:
                self._s.last_error = str(err.cause or err)
                await self._store_step(
                    AgentExecutionActivities.mark_rollout_failed,
                    RolloutFailedInput(
                        session_id=self._inp.session_id,
                        lineage_id=self._inp.lineage_id,
                        rollout_id=rollout_id,
                        error=self._s.last_error,
                    ),
                )
            self._set_status("failed")
            await workflow.wait_condition(lambda: self._retry_requested or self._s.stop_requested)
            if self._s.stop_requested:
                return None
            self._retry_requested = False
            tries += 1

    def _agent_activity_options(self) -> dict[str, Any]:
        """Timeouts and retries of the agent's run: each retry is a recorded attempt."""
        options = self._inp.options
        return {
            "start_to_close_timeout": timedelta(minutes=10),
            "heartbeat_timeout": timedelta(seconds=options.heartbeat_timeout_seconds),
            "retry_policy": RetryPolicy(
                initial_interval=timedelta(seconds=options.retry_initial_interval_seconds),
                maximum_interval=timedelta(seconds=60),
                maximum_attempts=options.max_attempts,
                non_retryable_error_types=NON_RETRYABLE_AGENT_ERRORS,
            ),
        }

    async def _await_score(self) -> QueuedScore | None:
        while True:
            self._set_status("awaiting_score")
            await workflow.wait_condition(
                lambda: bool(self._s.queued_scores) or self._s.stop_requested
            )
            if not self._s.queued_scores:
                return None
            queued = self._s.queued_scores.pop(0)
            wanted = queued.score.cycle
            if wanted is not None and wanted != self._s.cycle:
                await self._reject(
                    "score",
                    queued.score.model_dump(),
                    f"cycle: score is for cycle {wanted}, but cycle {self._s.cycle} "
                    "is awaiting its score",
                )
                continue
            return queued

    async def _take_score(self, rollout: RunAgentResult, queued: QueuedScore) -> bool:
        """The cycle step: judge the change that produced this output from what the reviewer
        says of it, roll back what the comment refuted, train on the comment (unless locked),
        and record it all. False when the store refused the score for good: nothing changed,
        the error is in ``state``, and the cycle waits for another score."""
        # one score per output: its id is the output's and what was sent, never a random draw
        # (a signal arriving between a failed workflow task and its retry reorders draws)
        evaluation_id = feedback_key(rollout.artifact_id, "evaluation", 1, queued.score)
        options = self._inp.options
        step = CycleStepInput(
            session_id=self._inp.session_id,
            lineage_id=self._inp.lineage_id,
            evaluation_id=evaluation_id,
            artifact_id=rollout.artifact_id,
            rollout_id=rollout.rollout_id,
            cycle=self._s.cycle,
            agent=self._s.agent,
            score=queued.score,
            pending_evolution_id=self._s.pending_evolution_id,
            asked_for=list(self._s.asked_for),
            previous_score=score_before(self._s.score_history, None),
            sticky_directives=list(self._s.sticky_directives),
            oneshot_directives=list(self._s.oneshot_directives),
            trainer=options.trainer,
            trainer_model=options.trainer_model,
            train=not self._s.locked,
            rollback_refuted=options.rollback_refuted,
        )
        if not self._s.locked:
            self._set_status("training")
        try:
            if options.trainer == "rules":
                taken = await self._unless_stopped(
                    workflow.start_local_activity_method(
                        TrainerActivities.take_cycle_step, step, **CYCLE_STEP_ACTIVITY
                    )
                )
            else:
                taken = await self._unless_stopped(
                    workflow.start_activity_method(
                        TrainerActivities.take_cycle_step, step, **CYCLE_STEP_ACTIVITY
                    )
                )
        except FailureError as err:
            self._s.last_error = f"score not recorded: {err.cause or err}"
            return False
        self._s.score_history.append(
            ScorePoint(
                cycle=self._s.cycle,
                score=queued.score.score,
                agent_version=self._s.agent.version,
                evaluation_id=evaluation_id,
            )
        )
        self._s.score_history = self._s.score_history[-SCORE_HISTORY_CARRIED:]
        self._took(step, taken)
        return True

    def _took(self, step: CycleStepInput, taken: CycleStepResult) -> None:
        """The lineage after a cycle step: its new version (if any) awaits its verdict."""
        if taken.verdict is not None:
            self._s.pending_evolution_id = None
            self._s.last_verdict = taken.verdict.reason
        if not step.train:
            return
        if taken.training_error is not None:
            self._s.last_error = f"training failed: {taken.training_error}"
            return
        # Oneshot directives apply to this evolution only (new ones may have arrived meanwhile)
        self._s.oneshot_directives = self._s.oneshot_directives[len(step.oneshot_directives) :]
        self._s.asked_for = taken.asked_for
        self._s.last_evolution = taken.summary
        self._s.agent = taken.agent
        self._s.pending_evolution_id = taken.evolution_id

    # ---- human input -----------------------------------------------------------------------

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
        self._s.queued_scores.append(QueuedScore(score=parsed, received_via="signal"))

    @workflow.update(name="submit_score")
    def submit_score(self, payload: Any = None) -> ScoreAccepted:
        parsed = parse_score(payload)
        self._s.queued_scores.append(QueuedScore(score=parsed, received_via="update"))
        return ScoreAccepted(
            cycle=self._s.cycle if self._status == "awaiting_score" else None,
            score=parsed.score,
            comment=parsed.comment,
            rater=parsed.rater,
            queued_position=len(self._s.queued_scores),
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
        if not recorded:
            return  # a directive the store refused does not steer the trainer either
        if parsed.kind == "sticky":
            self._s.sticky_directives.append(parsed.content)
        else:
            self._s.oneshot_directives.append(parsed.content)

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
        state whose cycle is below ``cycle`` means "call again" (``starter.await_output``)."""
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
            last_evolution=self._s.last_evolution,
            last_verdict=self._s.last_verdict,
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
        )

    # ---- details ---------------------------------------------------------------------------

    async def _reject(self, kind: str, payload: Any, reason: str) -> None:
        self._s.rejected_count += 1
        # "score: Input should be …", not "score: score: Input should be …"
        shown = reason if reason.startswith(f"{kind}:") else f"{kind}: {reason}"
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
            self._s.last_error = f"{what} not recorded: {err.cause or err}"
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

    def _set_status(self, status: LineageStatus) -> None:
        if status == self._status:
            return
        self._status = status
        # The Web UI's "current details" (served by a query: nothing in the history)
        workflow.set_current_details(
            f"{status.replace('_', ' ')}: cycle {self._s.cycle}, agent v{self._s.agent.version}"
        )
        # The search attribute is a visibility write per change: it shows the lifecycle, and
        # the `state` query the phase of the cycle.
        visible = LIFECYCLE_STATUS.get(status, status)
        if visible != self._visible_status:
            self._visible_status = visible
            workflow.upsert_search_attributes([search_attributes.STATUS.value_set(visible)])

    def _cycle_input_hash(self) -> str:
        hashes = self._s.input_hashes
        return hashes[(self._s.cycle - 1) % len(hashes)]

    def _should_continue_as_new(self) -> bool:
        return (
            self._run_cycles >= self._inp.options.continue_as_new_every
            or workflow.info().is_continue_as_new_suggested()
        )

    def _next_run_input(self) -> LineageInput:
        return self._inp.model_copy(
            update={"initial_agent": None, "inputs": None, "documents": None, "carried": self._s}
        )

    def _result(self) -> LineageResult:
        return LineageResult(
            lineage_id=self._inp.lineage_id,
            cycles=self._s.cycle,
            agent_version=self._s.agent.version,
            status=self._status,
            score_history=self._s.score_history,
        )


def _converter_reason(error: BaseException) -> str:
    """What the converter said, briefly (pydantic's first line only counts its errors)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    reason = lines[1] if len(lines) > 1 and "validation error" in lines[0] else lines[0]
    return reason.split(" [type=")[0][:200]
