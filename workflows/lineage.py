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
        ApplyEvolutionInput,
        ApplyEvolutionResult,
        CarriedState,
        CreditInput,
        JudgeEvolutionInput,
        LineageInput,
        LineageResult,
        LineageState,
        LineageStatus,
        PlanInput,
        QueuedScore,
        RecordDirectiveInput,
        RecordLockInput,
        RecordRejectionInput,
        RecordScoreInput,
        RegisterLineageInput,
        RollbackInput,
        RolloutFailedInput,
        RunAgentInput,
        RunAgentResult,
        ScoreAndTrainInput,
        ScoreAndTrainResult,
        ScorePoint,
        TrainerInput,
        feedback_key,
        score_before,
    )
    from domain.spec import LineageOptions
    from domain.trainer import EvolutionOutcome, JudgedEvolution

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
COARSE_STATUS_PATCH = "status-search-attribute-coarse"  # histories before it upsert "training"
# Histories before it ran the store-only steps as (regular) activities on the task queue.
LOCAL_STORE_STEPS_PATCH = "store-steps-local-activities"
TRAINER_ACTIVITY = {
    "start_to_close_timeout": timedelta(minutes=5),
    "retry_policy": RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=30)),
}
# Runs that record it take every decision above at once, in their first workflow task, and run
# the rules engine's trainer steps as local activities too. A `patched` call made in reaction
# to a local activity's result can replay in an earlier workflow task than the one that
# recorded it, which fails the replay (TMPRL1100): none is made there any more.
RUN_START_PATCH = "decided-at-run-start-rules-trainer-local"
# Runs that record it answer every signal with an action or a rejection record: one whose
# payload cannot be read, with more than one argument, or with a name the lineage does not know.
# Runs before it dropped such signals (or wedged on a second argument); they replay as they ran.
EVERY_SIGNAL_ANSWERED_PATCH = "every-signal-answered"
# Runs that record it cancel the step in flight when `stop` arrives (see `_unless_stopped`).
STOP_CANCELS_STEPS_PATCH = "stop-cancels-steps-in-flight"
# Runs that record it judge the pending evolution in a step of its own before recording the
# score (record steps only record); runs before it had record_score judge too.
JUDGING_STEP_PATCH = "judging-a-step-of-its-own"
# Runs that record it train with the rules engine in one step (`train`); runs before it ran
# analyze_reward, assign_credit, plan_evolution and apply_evolution one after another.
ONE_STEP_RULES_TRAINING_PATCH = "rules-training-in-one-step"
# Runs that record it take every path above from this one marker (each marker also costs a
# search-attribute write), and show only the lineage's lifecycle in TrainingCampStatus:
# running (producing or awaiting a score), failed, stopped, completed. Awaiting a score and
# running again were two visibility writes a cycle; the `state` query tells them apart, and
# the inbox (`review.views.inbox`, `training-camp inbox`) lists the outputs awaiting a score.
LIFECYCLE_STATUS_PATCH = "one-marker-lifecycle-status"
LIFECYCLE_STATUS = {"training": "running", "awaiting_score": "running"}
# Runs that record it record a score and train on it with the rules engine in one step
# (record_score_and_train: one workflow activation instead of two), and take every path above
# from this one marker. Runs before it recorded the score and trained in two steps.
SCORE_AND_TRAIN_PATCH = "score-and-train-one-step"
SCORE_AND_TRAIN_ACTIVITY = {
    # the rules engine's training is milliseconds; a long trajectory's credit fans out
    "start_to_close_timeout": TRAINER_ACTIVITY["start_to_close_timeout"],
    # the step raises only what a retry can fix (the store away): retried like a store step
    "retry_policy": STORE_ACTIVITY["retry_policy"],
}


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
        self._decided_at_start: bool | None = None  # RUN_START_PATCH, once per run
        self._answers_every_signal = False  # EVERY_SIGNAL_ANSWERED_PATCH, decided with it
        self._stop_cancels_steps = False  # STOP_CANCELS_STEPS_PATCH, decided with it
        self._judges_in_a_step = False  # JUDGING_STEP_PATCH, decided with it
        self._trains_in_one_step = False  # ONE_STEP_RULES_TRAINING_PATCH, decided with it
        self._lifecycle_status = False  # LIFECYCLE_STATUS_PATCH, decided with it
        self._trains_with_score = False  # SCORE_AND_TRAIN_PATCH, decided with it
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
        self._current_code()  # first thing in the run's first workflow task
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
            recorded = None
            while recorded is None:  # a score the store refused leaves the cycle waiting
                queued = await self._await_score()
                if queued is None:
                    break  # stopped while waiting
                recorded = await self._record_score(rollout, queued)
            if queued is None or recorded is None:
                return  # stopped while waiting
            evaluation_id, judged, trained = recorded
            if trained or self._s.locked:
                continue  # trained with the score, or locked: producing, not evolving
            if judged is not None and self._refuted(judged):
                await self._rollback(rollout, queued, evaluation_id, judged)
            else:
                await self._train(rollout, queued, evaluation_id)

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

    async def _record_score(
        self, rollout: RunAgentResult, queued: QueuedScore
    ) -> tuple[str, tuple[str, EvolutionOutcome] | None, bool] | None:
        """Judge the evolution that produced this output (validation), then record the score
        with the verdict, and with the rules engine train on it in the same step unless the
        lineage is locked or the verdict calls for a rollback (the last of the three: True).
        None when judging or recording failed for good: nothing changed, the error is in
        ``state``."""
        # one score per output: its id is the output's and what was sent, never a random draw
        # (a signal arriving between a failed workflow task and its retry reorders draws)
        evaluation_id = feedback_key(rollout.artifact_id, "evaluation", 1, queued.score)
        judged_evolution = self._s.pending_evolution_id
        judged = None
        try:
            if judged_evolution is not None and self._judges_in_a_step:
                judged = await self._store_step(
                    TrainerActivities.judge_evolution,
                    JudgeEvolutionInput(
                        session_id=self._inp.session_id,
                        evolution_id=judged_evolution,
                        score=queued.score,
                    ),
                    **TRAINER_ACTIVITY,  # a bug here must not retry for ever, as store trouble may
                )
            record = RecordScoreInput(
                session_id=self._inp.session_id,
                lineage_id=self._inp.lineage_id,
                evaluation_id=evaluation_id,
                artifact_id=rollout.artifact_id,
                rollout_id=rollout.rollout_id,
                cycle=self._s.cycle,
                agent_version=self._s.agent.version,
                score=queued.score,
                pending_evolution_id=self._s.pending_evolution_id,
                judged=judged,
            )
            trained: ScoreAndTrainResult | None = None
            if self._trains_with_this_score(judged):
                self._set_status("training")
                trainer = self._trainer_input(rollout, queued, evaluation_id)
                trained = await self._store_step(
                    FeedbackActivities.record_score_and_train,
                    ScoreAndTrainInput(record=record, trainer=trainer),
                    **SCORE_AND_TRAIN_ACTIVITY,
                )
                verdict = trained.verdict
            else:
                verdict = await self._store_step(FeedbackActivities.record_score, record)
        except FailureError as err:
            self._s.last_error = f"score not recorded: {err.cause or err}"
            return None
        self._s.pending_evolution_id = None
        if trained is not None:
            if trained.applied is not None:
                self._trained(trained.applied, trainer)
            else:
                self._s.last_error = f"training failed: {trained.training_error}"
        self._s.score_history.append(
            ScorePoint(
                cycle=self._s.cycle,
                score=queued.score.score,
                agent_version=self._s.agent.version,
                evaluation_id=evaluation_id,
            )
        )
        self._s.score_history = self._s.score_history[-SCORE_HISTORY_CARRIED:]
        if verdict is None or judged_evolution is None:
            return evaluation_id, None, trained is not None
        return evaluation_id, (judged_evolution, verdict), trained is not None

    def _trains_with_this_score(self, judged: JudgedEvolution | None) -> bool:
        """Whether recording this score trains on it in the same step: with the rules engine,
        unless the lineage is locked or the verdict calls for a rollback."""
        if not self._trains_with_score or self._inp.options.trainer != "rules":
            return False
        if self._s.locked:
            return False
        return judged is None or not self._refuted((judged.evolution_id, judged.verdict))

    def _refuted(self, judged: tuple[str, EvolutionOutcome]) -> bool:
        _, verdict = judged
        return self._inp.options.rollback_refuted and (
            bool(verdict.refuted_aspects)
            or (not verdict.hypothesis_validated and verdict.score_delta < 0)
        )

    async def _rollback(
        self,
        rollout: RunAgentResult,
        queued: QueuedScore,
        evaluation_id: str,
        judged: tuple[str, EvolutionOutcome],
    ) -> None:
        """The score refuted the last change: restore the version before it, as a new version."""
        self._set_status("training")
        try:
            restored = await self._store_step(
                TrainerActivities.rollback_evolution,
                RollbackInput(
                    session_id=self._inp.session_id,
                    lineage_id=self._inp.lineage_id,
                    evolution_id=judged[0],
                    aspects=judged[1].refuted_aspects,
                    agent=self._s.agent,
                    rollout_id=rollout.rollout_id,
                    artifact_id=rollout.artifact_id,
                    evaluation_id=evaluation_id,
                    score=queued.score,
                ),
                **TRAINER_ACTIVITY,
            )
        except FailureError as err:
            self._s.last_error = f"rollback failed: {err.cause or err}"
            return
        self._s.agent = restored.agent
        self._s.last_evolution = restored.summary

    async def _train(
        self, rollout: RunAgentResult, queued: QueuedScore, evaluation_id: str
    ) -> None:
        """Reward analysis → credit assignment → evolution planning → targeted evolution."""
        self._set_status("training")
        trainer = self._trainer_input(rollout, queued, evaluation_id)
        try:
            if self._inp.options.trainer == "rules" and self._trains_in_one_step:
                applied = await self._store_step(
                    TrainerActivities.train, trainer, **TRAINER_ACTIVITY
                )
            else:
                applied = await self._train_step_by_step(trainer)
        except FailureError as err:
            # Surface, never hide: the lineage keeps its current version and goes on.
            self._s.last_error = f"training failed: {err.cause or err}"
            return
        self._trained(applied, trainer)

    def _trainer_input(
        self, rollout: RunAgentResult, queued: QueuedScore, evaluation_id: str
    ) -> TrainerInput:
        return TrainerInput(
            session_id=self._inp.session_id,
            lineage_id=self._inp.lineage_id,
            agent=self._s.agent,
            rollout_id=rollout.rollout_id,
            artifact_id=rollout.artifact_id,
            evaluation_id=evaluation_id,
            score=queued.score,
            previous_score=score_before(self._s.score_history, evaluation_id),
            sticky_directives=list(self._s.sticky_directives),
            oneshot_directives=list(self._s.oneshot_directives),
            trainer=self._inp.options.trainer,
            trainer_model=self._inp.options.trainer_model,
        )

    def _trained(self, applied: ApplyEvolutionResult, trainer: TrainerInput) -> None:
        """The lineage after a training: its new version (if any) awaits its verdict."""
        # Oneshot directives apply to this evolution only (new ones may have arrived meanwhile).
        consumed = len(trainer.oneshot_directives)
        self._s.oneshot_directives = self._s.oneshot_directives[consumed:]
        self._s.last_evolution = applied.summary
        if applied.evolution_id is not None:
            self._s.agent = applied.agent
            self._s.pending_evolution_id = applied.evolution_id

    async def _train_step_by_step(self, trainer: TrainerInput) -> ApplyEvolutionResult:
        """The four steps as steps of their own: with Claude each is a model call."""
        analysis = await self._trainer_step(TrainerActivities.analyze_reward, trainer)
        credit = await self._trainer_step(
            TrainerActivities.assign_credit, CreditInput(trainer=trainer, analysis=analysis)
        )
        plan = await self._trainer_step(
            TrainerActivities.plan_evolution,
            PlanInput(trainer=trainer, analysis=analysis, credit=credit),
        )
        return await self._store_step(
            TrainerActivities.apply_evolution,
            ApplyEvolutionInput(trainer=trainer, analysis=analysis, credit=credit, plan=plan),
            **TRAINER_ACTIVITY,
        )

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
            if self._current_code() and self._answers_every_signal:
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
        options = options or STORE_ACTIVITY
        if self._current_code() or workflow.patched(LOCAL_STORE_STEPS_PATCH):
            return await self._unless_stopped(
                workflow.start_local_activity_method(step, arg, **options)
            )
        return await workflow.execute_activity_method(step, arg, **options)

    async def _unless_stopped(self, step: workflow.ActivityHandle[ResultT]) -> ResultT:
        """The step's result; a `stop` sent meanwhile cancels it and ends the run
        (LineageStopped), so that nothing holds a stopped lineage open: not a store step
        retrying while the database is away, nor a long model call. What a step committed
        stays (each is one idempotent transaction); the rest never happens."""
        if self._stop_cancels_steps:
            await workflow.wait_condition(lambda: step.done() or self._s.stop_requested)
            if not step.done():
                step.cancel()
                raise LineageStopped
        return await step

    async def _trainer_step(self, step: Callable[[Any, ArgT], ResultT], arg: ArgT) -> ResultT:
        """Reward analysis, credit assignment, evolution planning. With Claude a step is a model
        call: an activity on the queue, which any worker may take and a slow call holds alone.
        With the rules engine it is milliseconds of deterministic work over this worker's store,
        so it runs like a store step, as a local activity."""
        if self._inp.options.trainer == "rules" and self._current_code():
            return await workflow.execute_local_activity_method(step, arg, **TRAINER_ACTIVITY)
        return await workflow.execute_activity_method(step, arg, **TRAINER_ACTIVITY)

    def _current_code(self) -> bool:
        """Whether this run takes today's paths (RUN_START_PATCH, or SCORE_AND_TRAIN_PATCH or
        LIFECYCLE_STATUS_PATCH, which stand for it and the later ones). Asked first at the top
        of ``run`` (or by a signal handler of the same first task); later calls reuse it."""
        if self._decided_at_start is not None:
            return self._decided_at_start
        newest = workflow.patched(SCORE_AND_TRAIN_PATCH)
        if newest or workflow.patched(LIFECYCLE_STATUS_PATCH):
            self._decided_at_start = self._answers_every_signal = self._stop_cancels_steps = True
            self._judges_in_a_step = self._trains_in_one_step = self._lifecycle_status = True
            self._trains_with_score = newest
            return True
        # a run recorded before it: the markers it recorded, one by one
        self._decided_at_start = workflow.patched(RUN_START_PATCH)
        self._answers_every_signal = workflow.patched(EVERY_SIGNAL_ANSWERED_PATCH)
        self._stop_cancels_steps = workflow.patched(STOP_CANCELS_STEPS_PATCH)
        self._judges_in_a_step = workflow.patched(JUDGING_STEP_PATCH)
        self._trains_in_one_step = workflow.patched(ONE_STEP_RULES_TRAINING_PATCH)
        return self._decided_at_start

    def _set_status(self, status: LineageStatus) -> None:
        if status == self._status:
            return
        self._status = status
        # The Web UI's "current details" (served by a query: nothing in the history)
        workflow.set_current_details(
            f"{status.replace('_', ' ')}: cycle {self._s.cycle}, agent v{self._s.agent.version}"
        )
        # The search attribute is a visibility write per change: it shows the lifecycle, and
        # the `state` query the phase of the cycle (runs before LIFECYCLE_STATUS_PATCH showed
        # awaiting_score too, and before COARSE_STATUS_PATCH training).
        visible = status
        if self._current_code() and self._lifecycle_status:
            visible = LIFECYCLE_STATUS.get(status, status)
        elif status == "training" and (
            self._current_code() or workflow.patched(COARSE_STATUS_PATCH)
        ):
            visible = "running"
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
