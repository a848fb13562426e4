"""LineageWorkflow: one agent's evolutionary line, as a loop of cycles.

Each cycle: run the agent (each retry a recorded attempt) → wait, durably, for a human score →
unless locked, the Master Trainer turns the score into a targeted new version → next cycle.
"""

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities.agent_execution import AgentExecutionActivities
    from activities.cycle_records import (
        CycleRecordActivities,
        RecordCorrectionInput,
        RecordCycleStepInput,
    )
    from activities.feedback import FeedbackActivities
    from activities.insight_sharing import InsightSharingActivities, ShareOutcomeInput
    from activities.lineage_registry import LineageRegistryActivities
    from activities.trainer import TrainerActivities
    from domain import panel as raters
    from domain import search_attributes
    from domain.agent import AgentRef
    from domain.checks import MAX_ACTIVE_WISHES, checklist
    from domain.cycle import Cycle
    from domain.cycle_decision import CycleDecision
    from domain.feedback import (
        MAX_COMMENT_CHARS,
        CorrectionAccepted,
        CorrectionTaken,
        Promoted,
        ScoreAccepted,
        ScoreInput,
    )
    from domain.lineage import (
        CORRECTIONS_REMEMBERED,
        MAX_SUMMARY_CHARS,
        CarriedState,
        CycleStepInput,
        CycleStepResult,
        LineageInput,
        LineageResult,
        LineageState,
        LineageStatus,
        QueuedCorrection,
        QueuedScore,
        RecordRaterScoreInput,
        RegisterLineageInput,
        RolloutFailedInput,
        RunAgentInput,
        RunAgentResult,
        ScorePoint,
        cut,
        feedback_key,
        note,
        score_before,
    )
    from domain.panel import Panel, RaterScore
    from domain.spec import LineageOptions
    from domain.trainer import verdict_line
    from workflows.lineage_inbox import (
        LineageInbox,
        check_await_output,
        wrong_cycle,
        wrong_output,
    )
    from workflows.lineage_store import STORE_ACTIVITY, LineageStopped, LineageStoreSteps


# Agent errors that no retry can fix: fail the rollout at once.
NON_RETRYABLE_AGENT_ERRORS = ["ConstraintViolation", "FlowTemplateError"]
SCORE_HISTORY_CARRIED = 200
DISPUTES_SHOWN = 10  # in `state`; every one is in the store (raters.agreed)

# The trainer's step: with the rules engine milliseconds of work over the store (a local
# activity, retried like a store step); with Claude model calls (an activity on the queue).
# Store trouble is retried without limit; a model that keeps failing ends the training, not the
# lineage.
CYCLE_STEP_ACTIVITY = {
    "start_to_close_timeout": timedelta(minutes=5),
    "retry_policy": STORE_ACTIVITY["retry_policy"],
}
# The search attribute shows the lineage's lifecycle; the `state` query the phase of its cycle
# (the inbox, `training-camp inbox`, lists the outputs awaiting a score).
LIFECYCLE_STATUS = {"training": "running", "awaiting_score": "running"}


# Outside the workflow sandbox, which Temporal's Python SDK would otherwise wrap around every
# activation (and every payload it visits) and re-import this module into for every run: for a
# lineage that was a third of its worker's CPU per cycle. What the sandbox enforces holds here
# by construction and is checked in the suite: this module keeps no mutable module state, reads
# no clock, environment or file (domain/settings.py passes configuration in as input), and every
# saved and freshly recorded history is replayed inside the sandbox too (tests/test_durability.py),
# which refuses such calls. `TRAINING_CAMP_WORKFLOW_SANDBOX=1` runs it sandboxed on a worker.
@workflow.defn(name="LineageWorkflow", sandboxed=False)
class LineageWorkflow:
    """The story of a lineage (``run``), and the handlers Temporal finds on this class: each
    delegates to the run's inbox (``workflows/lineage_inbox.py``), which reads, checks and
    records what people send through the run's store steps (``workflows/lineage_store.py``).
    All three share one carried state, ``self._s``."""

    @workflow.init
    def __init__(self, inp: LineageInput) -> None:
        self._inp = inp
        self._s = inp.carried or CarriedState(
            agent=AgentRef(agent_id=inp.lineage_id, version=0), input_hashes=[]
        )
        self._status: LineageStatus = "starting"
        self._run_cycles = 0
        self._continuing = False  # about to continue as new: `await_output` callers return
        self._output_waiters = 0  # await_output handlers in flight
        self._scores_done = 0  # scores this run took or turned away, for submit_score's wait
        self._score_taken = False  # the last of them was taken (its reading is the last one)
        self._score_refused: str | None = None  # or why it was turned away
        self._store = LineageStoreSteps(inp, self._s)
        self._shown: RunAgentResult | None = None  # the output shown, awaiting its score
        self._inbox = LineageInbox(inp, self._s, self._store, lambda: self._status)
        # The TrainingCampStatus search attribute as the run starts: set by the starter (a new
        # lineage starts "running") or carried over by continue-as-new, so that a first cycle
        # writes nothing to visibility.
        self._visible_status = workflow.info().typed_search_attributes.get(search_attributes.STATUS)
        # Started without it (a server with no custom search attributes, such as the
        # time-skipping test server), the lineage writes none
        self._visible = self._visible_status is not None

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
        panel = options.panel()  # several raters, or None: one, as before
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
            taken = False
            while not taken:  # a score the store refused leaves the cycle waiting
                if rollout is None:
                    return  # stopped while the rollout had failed
                self._show(rollout)
                sent = await (self._await_panel(panel) if panel else self._await_score())
                if sent is None:
                    return  # stopped while waiting
                if isinstance(sent, QueuedCorrection):
                    # the last score's reading corrected: its change made again, and this
                    # cycle run again if the version that produced its output is superseded
                    rollout = await self._correct(rollout, sent)
                    continue
                try:
                    taken = await self._take_score(rollout, sent)
                finally:
                    self._inbox.scoring = False
                self._score_done(taken)

    async def _register(self) -> None:
        inp = self._inp
        # a branch's agent and inputs are its parent version's, read from the store
        assert inp.branch is not None or (inp.initial_agent is not None and inp.inputs is not None)
        result = await self._store.step(
            LineageRegistryActivities.register_lineage,
            RegisterLineageInput(
                session_id=inp.session_id,
                session_name=inp.session_name,
                lineage_id=inp.lineage_id,
                label=inp.label,
                agent=inp.initial_agent,
                inputs=inp.inputs or [],
                documents=inp.documents or [],
                branched_from=inp.branch,
            ),
        )
        self._s.agent = result.agent
        self._s.input_hashes = result.input_hashes
        self._s.cycle = result.last_cycle
        # what its outputs are checked against: a branch's parent version's wishes, a lineage
        # started again its own as its last step left them
        self._s.active_wishes = result.wishes[-MAX_ACTIVE_WISHES:]
        self._s.asked_for = result.asked_for

    async def _rollout(self, rerun_by: int | None = None) -> RunAgentResult | None:
        """Run the agent on this cycle's input; a failed rollout waits for `retry` or `stop`.
        ``rerun_by``: the cycle runs again, by the version a corrected reading made."""
        tries = 0
        while True:
            rollout_id = Cycle(self._inp.lineage_id, self._s.cycle).rollout_id(
                retry=tries, rerun_by=rerun_by
            )
            self._set_status("running")
            try:
                return await self._store.unless_stopped(
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
                            wishes=list(self._s.active_wishes),
                            revision_attempts=self._inp.options.revision_attempts,
                        ),
                        **self._agent_activity_options(),
                    )
                )
            except FailureError as err:
                self._s.last_error = note(str(err.cause or err))
                await self._store.step(
                    AgentExecutionActivities.mark_rollout_failed,
                    RolloutFailedInput(
                        session_id=self._inp.session_id,
                        lineage_id=self._inp.lineage_id,
                        rollout_id=rollout_id,
                        error=self._s.last_error,
                    ),
                )
            self._set_status("failed")
            await workflow.wait_condition(
                lambda: self._inbox.retry_requested or self._s.stop_requested
            )
            if self._s.stop_requested:
                return None
            self._inbox.retry_requested = False
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

    def _score_done(self, taken: bool, refused: str | None = None) -> None:
        self._scores_done += 1
        self._score_taken = taken
        self._score_refused = refused

    def _show(self, rollout: RunAgentResult) -> None:
        self._shown = rollout
        self._s.latest_output_preview = rollout.output_preview
        self._s.latest_output_words = rollout.output_words
        self._s.latest_output_cut_off = rollout.cut_off
        self._s.output_id = rollout.rollout_id
        self._s.latest_checks = rollout.checks[:MAX_ACTIVE_WISHES]
        self._s.latest_revised = rollout.revised

    async def _await_score(self) -> QueuedScore | QueuedCorrection | None:
        """The next score for this cycle's output, or a correction of the last one's reading
        (taken first: the rater has seen the output go the wrong way)."""
        while True:
            self._set_status("awaiting_score")
            await workflow.wait_condition(
                lambda: (
                    bool(self._s.queued_scores or self._s.queued_corrections)
                    or self._s.stop_requested
                )
            )
            if self._s.stop_requested:
                return None
            if self._s.queued_corrections:
                return self._s.queued_corrections.pop(0)
            queued = self._s.queued_scores.pop(0)
            wrong = wrong_cycle(queued.score, self._s.cycle) or wrong_output(
                queued.score, self._s.output_id, self._s.cycle
            )
            if wrong is not None:
                await self._store.reject("score", queued.score.model_dump(), wrong)
                self._score_done(False, wrong)
                continue
            self._inbox.scoring = True  # a correction of an earlier score is refused now
            self._s.output_id = None  # being scored: a second score for it is refused
            return queued

    async def _await_panel(self, panel: Panel) -> QueuedScore | QueuedCorrection | None:
        """Several raters: each score on the output awaiting them recorded as it comes (a
        rater's later one superseding theirs) until every rater has scored, or the score
        window has ended with the quorum met; short of it the cycle keeps waiting and says so.
        Returns the cycle's score (their median; the step acts on what they agree on)."""
        s = self._s
        deadline = None
        if panel.window_seconds is not None:
            deadline = workflow.now() + timedelta(seconds=panel.window_seconds)
        ended = False
        while True:
            s.scores_progress = raters.progress(panel, s.rater_scores, ended)
            if raters.everyone_scored(panel, s.rater_scores) or (
                ended and raters.quorum_met(panel, s.rater_scores)
            ):
                return self._panel_score()
            self._set_status("awaiting_score")
            timeout = None
            if deadline is not None and not ended:
                timeout = deadline - workflow.now()
                if timeout <= timedelta(0):
                    ended = True
                    continue
            try:
                await workflow.wait_condition(
                    lambda: bool(s.queued_scores or s.queued_corrections) or s.stop_requested,
                    timeout=timeout,
                )
            except TimeoutError:
                ended = True  # the window has ended: on with the quorum, or wait for it
                continue
            if s.stop_requested:
                return None
            if s.queued_corrections:
                return s.queued_corrections.pop(0)
            queued = s.queued_scores.pop(0)
            wrong = (
                raters.expected_rater(panel, queued.score.rater)
                or wrong_cycle(queued.score, s.cycle)
                or wrong_output(queued.score, s.output_id, s.cycle)
            )
            if wrong is not None:
                await self._store.reject("score", queued.score.model_dump(), wrong)
                self._score_done(False, wrong)
                continue
            await self._rater_scored(queued.score)

    async def _rater_scored(self, score: ScoreInput) -> None:
        """One rater's score recorded (a failure the store will not get past leaves it out,
        and says so in ``state``); their earlier one on this output is superseded."""
        s = self._s
        assert self._shown is not None and score.rater is not None
        rater = score.rater
        earlier = next((r for r in s.rater_scores if r.rater.casefold() == rater.casefold()), None)
        supersedes = earlier.evaluation_id if earlier else None
        sent = {"score": score.model_dump(mode="json"), "supersedes": supersedes}
        scored = RaterScore(
            rater=rater,
            score=score.score,
            comment=score.comment,
            wants=score.wants,
            changes=score.changes,
            evaluation_id=feedback_key(self._shown.artifact_id, "rater", 1, sent),
            supersedes=supersedes,
        )
        recorded = await self._store.recorded(
            "score",
            FeedbackActivities.record_rater_score,
            RecordRaterScoreInput(
                session_id=self._inp.session_id,
                lineage_id=self._inp.lineage_id,
                artifact_id=self._shown.artifact_id,
                rollout_id=self._shown.rollout_id,
                cycle=s.cycle,
                agent_version=s.agent.version,
                score=scored,
            ),
        )
        if recorded:
            s.rater_scores = raters.latest([*s.rater_scores, scored])
        self._score_done(recorded, None if recorded else s.last_error)

    def _panel_score(self) -> QueuedScore:
        """The cycle's score from its raters' latest: their median, their comments."""
        s = self._s
        said = raters.latest(s.rater_scores)
        comments = [f"{r.rater}: {r.comment}" for r in said if r.comment]
        self._inbox.scoring = True
        s.output_id = None  # gone on: a late score is refused
        return QueuedScore(
            score=ScoreInput(
                score=raters.median(said),
                comment=cut("\n".join(comments), MAX_COMMENT_CHARS) if comments else None,
            ),
            received_via="signal",
        )

    async def _take_score(self, rollout: RunAgentResult, queued: QueuedScore) -> bool:
        """The cycle step: the trainer judges the change that produced this output from what
        the reviewer says of it, rolls back what the comment refuted and trains on the comment
        (unless locked); the score and what the trainer made of it are recorded, and the verdict
        shared with the session's other lineages. False when the store refused the score for
        good: nothing changed, the error is in ``state``, and the cycle waits for another."""
        # one score per output: its id is the output's and what was sent, never a random draw
        # (a signal arriving between a failed workflow task and its retry reorders draws)
        evaluation_id = feedback_key(rollout.artifact_id, "evaluation", 1, queued.score)
        # every directive sent so far is in the store or refused: the step reads them there
        await workflow.wait_condition(
            lambda: self._inbox.directives_in_flight == 0 or self._s.stop_requested
        )
        oneshots = self._s.oneshot_count
        step = self._step_input(rollout, queued.score, evaluation_id)
        if self._s.rater_scores:
            step = step.model_copy(update={"panel": list(self._s.rater_scores)})
        if not self._s.locked:
            self._set_status("training")
        try:
            decision = await self._cycle_step(step)
            taken = await self._store.step(
                CycleRecordActivities.record_cycle_step,
                RecordCycleStepInput(step=step, decision=decision),
            )
        except FailureError as err:
            self._s.last_error = note(f"score not recorded: {err.cause or err}")
            return False
        if decision.judged is not None and decision.judged.insights:
            await self._store.recorded(
                "insights",
                InsightSharingActivities.share_outcome,
                ShareOutcomeInput(
                    session_id=step.session_id, lineage_id=step.lineage_id, judged=decision.judged
                ),
            )
        self._s.score_history.append(
            ScorePoint(
                cycle=self._s.cycle,
                score=queued.score.score,
                agent_version=self._s.agent.version,
                evaluation_id=evaluation_id,
            )
        )
        self._s.score_history = self._s.score_history[-SCORE_HISTORY_CARRIED:]
        if step.panel:  # said back to every rater: what they disagreed on changed nothing
            self._agreed(decision)
            self._s.rater_scores = []
            self._s.scores_progress = None
        self._took(step, taken, oneshots)
        self._s.last_step = step
        return True

    def _step_input(
        self, rollout: RunAgentResult, score: ScoreInput, evaluation_id: str
    ) -> CycleStepInput:
        """The cycle step ``score`` starts on ``rollout``'s output, as the lineage stands now:
        the step itself, and the preview of its plan (``step_input``), are given the same."""
        options = self._inp.options
        return CycleStepInput(
            session_id=self._inp.session_id,
            lineage_id=self._inp.lineage_id,
            evaluation_id=evaluation_id,
            artifact_id=rollout.artifact_id,
            rollout_id=rollout.rollout_id,
            cycle=self._s.cycle,
            agent=self._s.agent,
            score=score,
            pending_evolution_id=self._s.pending_evolution_id,
            asked_for=list(self._s.asked_for),
            wishes=list(self._s.active_wishes),
            previous_score=score_before(self._s.score_history, None),
            directives_through=self._s.feedback_seq,
            oneshot_after=self._s.oneshot_after,
            trainer=options.trainer,
            trainer_model=options.trainer_model,
            train=not self._s.locked,
            rollback_refuted=options.rollback_refuted,
        )

    async def _correct(
        self, rollout: RunAgentResult, correction: QueuedCorrection
    ) -> RunAgentResult | None:
        """A correction of the last score's reading: the trainer takes that score's step again
        on the wishes the rater meant (from the version before it), the correction and the
        version it makes are recorded, and when that version supersedes the one that produced
        the output awaiting a score, the cycle runs again on it. Returns the output now
        awaiting a score (None: stopped)."""
        step = self._s.last_step
        if step is None or step.evaluation_id != correction.evaluation_id:
            self._corrected(correction, step, error="a later score has been read since")
            return rollout
        read_as, comment = self._s.last_wants, None
        if step.panel:
            # several raters: the correction replaces its rater's reading only, and the step
            # acts again on what the raters now agree on
            rater = correction.rater.casefold()
            mine = next((r for r in step.panel if r.rater.casefold() == rater), None)
            if mine is None:
                self._corrected(correction, step, error=f"{correction.rater} gave no score here")
                return rollout
            panel = [
                r.model_copy(update={"wants": correction.wants, "changes": None})
                if r is mine
                else r
                for r in step.panel
            ]
            again = step.model_copy(update={"panel": panel, "corrects": self._s.agent.version})
            read = next((r for r in self._s.rater_readings if r.rater.casefold() == rater), None)
            read_as = read.wants if read else list(mine.wants or [])
            comment = mine.comment or ""
        else:
            again = step.model_copy(
                update={
                    # re-planned on the wishes meant: the plan confirmed with the score no
                    # longer names its changes
                    "score": step.score.model_copy(
                        update={"wants": correction.wants, "changes": None}
                    ),
                    "corrects": self._s.agent.version,
                }
            )
        self._set_status("training")
        try:
            decision = await self._cycle_step(again)
            taken = await self._store.step(
                CycleRecordActivities.record_correction,
                RecordCorrectionInput(
                    step=again,
                    decision=decision,
                    correction=correction,
                    read_as=read_as,
                    current=self._s.agent,
                    comment=comment,
                ),
            )
        except FailureError as err:
            self._corrected(correction, step, error=f"correction not recorded: {err.cause or err}")
            return rollout
        if again.panel:
            self._agreed(decision)
        superseded = self._s.agent.version
        self._s.last_step = again  # corrected again, it is re-planned from the same version
        self._s.last_reading = taken.reading
        self._s.last_wants = taken.wants
        self._s.last_verdict = self._verdict_line(taken)
        if again.train and taken.training_error is None:
            self._s.asked_for = taken.asked_for
            self._s.active_wishes = taken.wishes[-MAX_ACTIVE_WISHES:]
            self._s.last_evolution = cut(taken.summary, MAX_SUMMARY_CHARS)
            if taken.agent.version != superseded:
                self._s.agent = taken.agent
                self._s.pending_evolution_id = taken.evolution_id
        rerun = self._s.agent.version != superseded
        self._corrected(correction, again, rerun=rerun)
        if not rerun:
            return rollout
        self._s.output_id = None  # replaced: a score naming it is refused from now on
        return await self._rollout(rerun_by=self._s.agent.version)

    def _agreed(self, decision: CycleDecision) -> None:
        """What the raters of the last step agreed on, said back to each (the disputes) and
        kept for a correction of one rater's reading."""
        agreement = decision.agreement
        lines = agreement.lines() if agreement else []
        self._s.disputes = [note(line) for line in lines[:DISPUTES_SHOWN]]
        self._s.rater_readings = list(agreement.readings) if agreement else []

    def _corrected(
        self,
        correction: QueuedCorrection,
        step: CycleStepInput | None,
        rerun: bool = False,
        error: str | None = None,
    ) -> None:
        """What a correction did, for the update waiting on it (and one sent again)."""
        done = CorrectionTaken(
            correction_id=correction.correction_id,
            cycle=step.cycle if step else self._s.cycle,
            reading=self._s.last_reading or "",
            agent_version=self._s.agent.version,
            rerun_cycle=self._s.cycle if rerun else None,
            error=error,
            rater=correction.rater,
        )
        self._s.corrections_done = [*self._s.corrections_done, done][-CORRECTIONS_REMEMBERED:]

    async def _cycle_step(self, step: CycleStepInput) -> CycleDecision:
        """The trainer on the score: with the rules engine a local activity, with Claude an
        activity on the queue (model calls, which any worker may take)."""
        if step.trainer == "rules":
            handle = workflow.start_local_activity_method(
                TrainerActivities.take_cycle_step, step, **CYCLE_STEP_ACTIVITY
            )
        else:
            handle = workflow.start_activity_method(
                TrainerActivities.take_cycle_step, step, **CYCLE_STEP_ACTIVITY
            )
        return await self._store.unless_stopped(handle)

    def _took(self, step: CycleStepInput, taken: CycleStepResult, oneshots: int) -> None:
        """The lineage after a cycle step: its new version (if any) awaits its verdict."""
        self._s.last_verdict = self._verdict_line(taken)
        self._s.last_reading = taken.reading
        self._s.last_wants = taken.wants
        if taken.verdict is not None:
            self._s.pending_evolution_id = None
        if not step.train:
            return
        if taken.training_error is not None:
            self._s.last_error = note(f"training failed: {taken.training_error}")
            return
        if (self._s.last_error or "").startswith("training failed:"):
            self._s.last_error = None  # a step that trained has put the failure behind it
        # Oneshot directives apply to this evolution only (new ones may have arrived meanwhile:
        # they are the latest, and stay)
        self._s.oneshot_count -= oneshots
        shown = self._s.oneshot_directives
        self._s.oneshot_directives = shown[len(shown) - min(len(shown), self._s.oneshot_count) :]
        self._s.oneshot_after = step.directives_through
        self._s.asked_for = taken.asked_for
        self._s.active_wishes = taken.wishes[-MAX_ACTIVE_WISHES:]
        self._s.last_evolution = cut(taken.summary, MAX_SUMMARY_CHARS)
        self._s.agent = taken.agent
        self._s.pending_evolution_id = taken.evolution_id

    @staticmethod
    def _verdict_line(taken: CycleStepResult) -> str | None:
        """The verdict of this score only, worded as `history` words it: a score that judged
        nothing shows none, not an older one."""
        if taken.verdict is None:
            return None
        line = verdict_line(taken.verdict.hypothesis_validated, taken.verdict.reason)
        return cut(line, MAX_SUMMARY_CHARS)

    # ---- what people send: declared here, handled by the inbox ------------------------------

    @workflow.signal(dynamic=True)
    async def on_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Every signal: score, directive, lock, unlock, stop, retry (see the README).

        One handler takes them all, payloads unread: given a typed handler, the SDK drops a
        signal whose payload its converter cannot read (JSON nested too deep, a lone
        surrogate) and fails every workflow task on a second argument, wedging the lineage.
        The inbox reads each: it is acted on or leaves a rejection record."""
        await self._inbox.signal(name, args)

    @workflow.update(name="submit_score")
    async def submit_score(self, payload: Any = None) -> ScoreAccepted:
        """Queue a score; when it is the one the awaiting output waits for, return once it is
        taken, with how its comment was read (the rater sees a misreading at once)."""
        accepted = self._inbox.queue_score(payload)
        if self._status != "awaiting_score" or accepted.cycle != self._s.cycle:
            return accepted  # for an output to come: `state` says how it was read then
        if self._inp.options.raters is not None:  # several raters: recorded, awaiting others
            # read before the wait: the cycle may go on with this score and forget the earlier
            earlier = next(
                (
                    r.score
                    for r in self._s.rater_scores
                    if accepted.rater and r.rater.casefold() == accepted.rater.casefold()
                ),
                None,
            )
            ticket = self._scores_done + 1
            await workflow.wait_condition(
                lambda: self._scores_done >= ticket or self._s.stop_requested
            )
            if self._score_refused is not None and self._scores_done >= ticket:
                raise ApplicationError(self._score_refused, type="InvalidScore", non_retryable=True)
            return accepted.model_copy(
                update={"scores_progress": self._s.scores_progress, "replaces": earlier}
            )
        # for the output awaiting one, which had none (the inbox refuses a second): next taken
        ticket = self._scores_done + 1
        await workflow.wait_condition(lambda: self._scores_done >= ticket or self._s.stop_requested)
        if self._scores_done < ticket:
            return accepted
        if self._score_refused is not None:  # its output was replaced before its turn came
            raise ApplicationError(self._score_refused, type="InvalidScore", non_retryable=True)
        if not self._score_taken or self._s.last_step is None:
            return accepted
        return accepted.model_copy(
            update={
                "reading": self._s.last_reading,
                "read_as": self._s.last_wants,
                "evaluation_id": self._s.last_step.evaluation_id,
            }
        )

    @submit_score.validator
    def _validate_submit_score(self, payload: Any = None) -> None:
        self._inbox.check_score(payload)

    @workflow.update(name="correct_reading")
    async def correct_reading(self, payload: Any = None) -> CorrectionAccepted:
        """Replace how the latest score's comment was read with the wishes its rater meant
        (``{"wants": ["warmer", "remove:example"], "rater": "ana", "cycle": 1}``, the score
        named by ``cycle`` or ``evaluation_id``): the lineage re-plans that score's change
        from the version before it and, when the output awaiting a score came from the
        misread version, runs the cycle again. Answers as soon as the correction is queued
        (or refused): what it did is in ``state.corrections`` once the output awaits its score
        again (``await_output``; ``client.correct_reading`` waits for it)."""
        return self._inbox.queue_correction(payload)

    @correct_reading.validator
    def _validate_correct_reading(self, payload: Any = None) -> None:
        self._inbox.check_correction(payload)

    @workflow.update(name="promote")
    async def promote(self, payload: Any = None) -> Promoted:
        """Make this lineage, at a version (``{"version": 3}``; default: the one it runs), the
        session's champion: recorded with the competitors' latest scores, its outputs
        preferred to theirs on the same inputs, and the lineage locked (it keeps producing
        and being scored, and stops evolving). ``unlock`` lets it evolve again."""
        return await self._inbox.promote(payload)

    @promote.validator
    def _validate_promote(self, payload: Any = None) -> None:
        self._inbox.check_promotion(payload)

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
                    (
                        self._status == "awaiting_score"
                        and self._s.cycle >= cycle
                        and not self._s.queued_corrections  # the output may be replaced
                    )
                    or self._status in ("failed", "stopped", "completed")
                    or self._continuing
                )
            )
        finally:
            self._output_waiters -= 1
        return self.state()

    @await_output.validator
    def _validate_await_output(self, cycle: int) -> None:
        check_await_output(cycle, self._s.cycle, self._output_waiters)

    @workflow.query(name="state")
    def state(self) -> LineageState:
        s = self._s
        return LineageState(
            session_id=self._inp.session_id,
            lineage_id=self._inp.lineage_id,
            label=self._inp.label,
            cycle=s.cycle,
            status=self._status,
            agent_version=s.agent.version,
            locked=s.locked,
            champion_version=s.champion_version,
            latest_output_preview=s.latest_output_preview,
            latest_output_words=s.latest_output_words,
            latest_output_cut_off=s.latest_output_cut_off,
            output_id=s.output_id,
            latest_checklist=checklist(s.latest_checks) or None,
            latest_checks=s.latest_checks,
            latest_revised=s.latest_revised,
            last_evolution=s.last_evolution,
            last_verdict=s.last_verdict,
            last_reading=s.last_reading,
            last_wants=s.last_wants,
            asked_for=s.asked_for,
            active_wishes=s.active_wishes,
            score_history=s.score_history,
            queued_scores=len(s.queued_scores),
            corrections_waiting=len(s.queued_corrections),
            corrections=s.corrections_done,
            sticky_directives=s.sticky_directives,
            oneshot_directives=s.oneshot_directives,
            rejected_feedback=s.rejected_count,
            last_rejection=s.last_rejection,
            recent_rejections=s.recent_rejections,
            last_error=s.last_error,
            run_cycles=self._run_cycles,
            sticky_count=s.sticky_count,
            oneshot_count=s.oneshot_count,
            trainer=self._inp.options.trainer,
            trainer_model=self._inp.options.trainer_model,
            options=self._inp.options,
            scored_by=[r.rater for r in s.rater_scores],
            still_to_score=self._still_to_score(),
            scores_progress=s.scores_progress,
            rater_scores=s.rater_scores,
            disputes=s.disputes,
            rater_readings=s.rater_readings,
        )

    def _still_to_score(self) -> list[str]:
        panel = self._inp.options.panel()
        return raters.still_to_score(panel, self._s.rater_scores) if panel else []

    @workflow.query(name="step_input")
    def step_input(self) -> CycleStepInput | None:
        """The cycle step a score of the output awaiting one would start now (its score a
        placeholder): the preview of a reading plans on it what the step would make, with the
        step's own code (``activities/trainer.py``). None while no output awaits a score."""
        if self._status != "awaiting_score" or self._shown is None or self._s.output_id is None:
            return None
        return self._step_input(self._shown, ScoreInput(score=0.0), "")

    # ---- details ---------------------------------------------------------------------------

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
        if self._visible and visible != self._visible_status:
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
