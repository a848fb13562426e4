"""What people send a lineage — the signals score, directive, lock, unlock, stop and retry, the
submit_score, correct_reading, promote and await_output updates — read, checked and acted on.
``LineageWorkflow`` declares the handlers (Temporal finds them on the workflow class) and
delegates each to its inbox here.

Every signal is answered: acted on, or recorded as rejected with the reason. A step a handler
runs is a local activity; a failure the store will not get past is surfaced in ``state`` and
changes nothing. Each rule on what a lineage accepts is written once, below, and serves the
signal, the update's validator and the cycle that takes the score alike.
"""

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities.feedback import FeedbackActivities
    from domain.corrections import correction_key
    from domain.feedback import (
        CorrectionAccepted,
        CorrectionTaken,
        CorrectReadingInput,
        Promoted,
        PromoteInput,
        ScoreAccepted,
        ScoreInput,
        escaped,
        excerpt,
        parse_correction,
        parse_directive,
        parse_lock,
        parse_promotion,
        parse_score,
    )
    from domain.lineage import (
        DIRECTIVES_SHOWN,
        MAX_QUEUED_CORRECTIONS,
        MAX_QUEUED_SCORES,
        CarriedState,
        CycleStepInput,
        LineageInput,
        LineageStatus,
        QueuedCorrection,
        QueuedScore,
        RecordDirectiveInput,
        RecordLockInput,
        RecordPromotionInput,
        note,
    )
    from domain.panel import Panel, expected_rater
    from domain.refusals import bounded
    from workflows.lineage_store import LineageStopped, LineageStoreSteps

# await_output: how far ahead a caller may wait, and how many may wait at once (Temporal admits
# ten updates in flight per workflow; submit_score must always find a slot)
MAX_CYCLES_AHEAD = 100
MAX_OUTPUT_WAITERS = 5


# ---- the rules -------------------------------------------------------------------------------


def closed(status: LineageStatus) -> str | None:
    """Why a lineage takes no more scores: it has ended."""
    return f"lineage is {status}" if status in ("stopped", "completed") else None


def queue_full(carried: CarriedState) -> str | None:
    """Why one more score cannot queue (the queue is carried across continue-as-new)."""
    if len(carried.queued_scores) < MAX_QUEUED_SCORES:
        return None
    return (
        f"{MAX_QUEUED_SCORES} scores already wait for this lineage's outputs; score the "
        "current output once they are taken (query `state`: queued_scores)"
    )


def wrong_cycle(score: ScoreInput, awaiting: int) -> str | None:
    """Why a score that names its cycle does not fit the output awaiting one."""
    if score.cycle is None or score.cycle == awaiting:
        return None
    return f"cycle: score is for cycle {score.cycle}, but cycle {awaiting} is awaiting its score"


def not_its_turn(score: ScoreInput, at_cycle: int, awaiting: bool, next_cycle: int) -> str | None:
    """Why a score cannot be taken for the output it is for: the cycle it names, or the output
    awaiting a score as it is sent (named by ``output_id`` or not). Scores are taken one per
    output, in the order they arrive, and ``next_cycle`` is the cycle the next one queued is
    taken for (``at_cycle``, the cycle now produced or awaiting a score, past the scores that
    already wait). A lineage has one rater: a score for an output that already has one, waiting
    or being read (a double click, a second rater), is refused at once, never answered
    "accepted" and dropped later; so is one for a cycle the queue would never give it."""
    if score.cycle is not None:
        target = score.cycle
    elif awaiting or score.output_id is not None:
        target = at_cycle
    else:
        return None  # for whichever output comes next: `state` says how it was read then
    if target == next_cycle:
        return None
    if at_cycle <= target < next_cycle:
        return (
            f"cycle {target}'s output already has a score, waiting or being read; a lineage "
            "takes one score per output: score the next output once it shows, or correct that "
            "score's reading (correct_reading) once it is read"
        )
    if awaiting and next_cycle == at_cycle:
        return wrong_cycle(score, at_cycle)
    return (
        f"cycle: score is for cycle {target}, but the next score this lineage takes is for "
        f"cycle {next_cycle}'s output"
    )


def late_or_unexpected(
    panel: Panel, score: ScoreInput, status: LineageStatus, cycle: int
) -> str | None:
    """Why a score cannot count on a lineage with several raters: no rater's name or not one
    of the raters, or late (its cycle has gone on with the scores it had). Any number of
    scores may arrive for the output awaiting them: a rater's later one supersedes theirs."""
    if (unexpected := expected_rater(panel, score.rater)) is not None:
        return unexpected
    # the last cycle that has gone on, and the one a score sent now counts for
    gone_on = cycle if status == "training" else cycle - 1
    named = score.cycle
    if named is None and status == "training":
        named = cycle
    if named is not None and named <= gone_on:
        return (
            f"cycle {named} has gone on with its raters' scores; a late score is refused "
            f"(score cycle {gone_on + 1}'s output once it shows)"
        )
    if named is not None and named > gone_on + 1:
        return (
            f"cycle: score is for cycle {named}, but the next output to score is cycle "
            f"{gone_on + 1}'s"
        )
    return None


def wrong_output(score: ScoreInput, awaiting: str | None, cycle: int) -> str | None:
    """Why a score that names its output does not fit: that output is no longer the one
    awaiting a score (a correction's re-run replaced it, or it has been scored)."""
    if score.output_id is None or score.output_id == awaiting:
        return None
    now = (
        f"output {awaiting} (cycle {cycle}) is awaiting its score"
        if awaiting is not None
        else f"cycle {cycle}'s output is being produced or scored; score it once it shows"
    )
    return (
        f"output_id: score is for output {excerpt(score.output_id)}, which is no longer "
        f"awaiting a score (replaced by a re-run, or scored); {now}"
    )


def not_correctable(
    named: CorrectReadingInput,
    latest: CycleStepInput | None,
    later_score: bool,
    corrections_by: str,
) -> str | None:
    """Why a correction may not replace the reading of the score it names: its evaluation_id
    and cycle name different scores, that score is not the lineage's latest, a later one has
    arrived, or the rater is not its scorer (unless the lineage lets any rater correct)."""
    if latest is None:
        return "nothing to correct: no score on this lineage has been read yet"
    both = named.evaluation_id is not None and named.cycle is not None
    if both and (named.evaluation_id == latest.evaluation_id) != (named.cycle == latest.cycle):
        return (
            f"evaluation_id {excerpt(named.evaluation_id)} and cycle {named.cycle} name "
            f"different scores (cycle {latest.cycle}'s is {latest.evaluation_id}); name the "
            "score once, or both of the same score"
        )
    if named.evaluation_id is not None:
        names = f"score {excerpt(named.evaluation_id)}"
        latest_named = named.evaluation_id == latest.evaluation_id
    else:
        names = f"cycle {named.cycle}'s score"
        latest_named = named.cycle == latest.cycle
    if not latest_named:
        return (
            f"{names} is not this lineage's latest score (cycle {latest.cycle}'s is, "
            f"{latest.evaluation_id}): only the latest score's reading can be corrected"
        )
    if later_score:
        return (
            f"a later score than {names} has arrived and waits to be read: only the latest "
            "score's reading can be corrected"
        )
    if latest.panel:
        # several raters: each corrects only their own reading, whatever correctionsBy says
        raters = [r.rater for r in latest.panel]
        if named.rater.casefold() not in {r.casefold() for r in raters}:
            return (
                f"{names} was given by {', '.join(escaped(r) for r in raters)}; each rater "
                f"corrects only their own reading, and {escaped(named.rater)} gave none"
            )
        return None
    scorer = latest.score.rater
    if corrections_by == "scorer" and (
        scorer is None or scorer.casefold() != named.rater.casefold()
    ):
        given = f"by {escaped(scorer)}" if scorer else "without a rater's name"
        return (
            f"{names} was given {given}; only its scorer may correct its reading "
            "(options.correctionsBy: any lets every rater)"
        )
    return None


def check_await_output(cycle: int, at_cycle: int, waiters: int) -> None:
    """Why a caller may not wait for ``cycle``'s output (ValueError), if it may not."""
    if isinstance(cycle, bool) or not isinstance(cycle, int) or cycle < 1:
        raise ValueError(f"cycle: expected a cycle number >= 1, got {excerpt(cycle)}")
    # Temporal admits ten updates in flight per workflow: waiters must never take the slots
    # a submit_score needs, so they are few and for outputs the lineage can reach
    if cycle > at_cycle + MAX_CYCLES_AHEAD:
        raise ValueError(
            f"cycle: {cycle} is more than {MAX_CYCLES_AHEAD} cycles ahead of this lineage "
            f"(at cycle {at_cycle}); wait for a nearer output"
        )
    if waiters >= MAX_OUTPUT_WAITERS:
        raise ValueError(
            f"{MAX_OUTPUT_WAITERS} callers already wait for an output of this lineage; "
            "query `state` instead, or try again when one returns"
        )


def _invalid(reason: str, kind: str = "InvalidScore") -> ApplicationError:
    """An update refused: not retryable, sending the same payload again cannot succeed."""
    return ApplicationError(bounded(reason), type=kind, non_retryable=True)


# ---- the inbox -------------------------------------------------------------------------------


class LineageInbox:
    """Reads and acts on what people send one lineage run, over the state the workflow carries
    (the same object) and its store steps. ``status`` reads the workflow's phase when a rule
    needs it."""

    def __init__(
        self,
        inp: LineageInput,
        carried: CarriedState,
        store: LineageStoreSteps,
        status: Callable[[], LineageStatus],
    ) -> None:
        self._inp = inp
        self._s = carried
        self._store = store
        self._status = status
        self.retry_requested = False
        # A score taken from the queue and being read: a correction of an earlier one waits
        # for nothing and is refused (a later score exists)
        self.scoring = False
        # Directives being recorded: a cycle step reads the store's directives once none is
        # (so that each one is either in the step's reading or left for the next)
        self.directives_in_flight = 0
        self._signals: dict[str, Callable[[Any], Awaitable[None]]] = {
            "score": self._score,
            "directive": self._directive,
            "lock": self._lock,
            "unlock": self._unlock,
            "stop": self._stop,
            "retry": self._retry,
        }

    # ---- signals ---------------------------------------------------------------------------

    async def signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal, its payload read here: acted on, or recorded as rejected."""
        handler = self._signals.get(name)
        try:
            payload = self._read_signal(name, handler, args)
        except ValueError as exc:
            quoted = args[0].payload.data.decode("utf-8", "replace") if args else None
            await self._store.reject(name if handler else "signal", quoted, str(exc))
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
            await self._store.reject("score", payload, str(exc))
            return
        refused = (
            closed(self._status())
            or queue_full(self._s)
            or self._panel_refusal(parsed)
            or wrong_output(parsed, self._s.output_id, self._s.cycle)
        )
        if refused is not None:
            await self._store.reject("score", payload, refused)
            return
        self._s.queued_scores.append(QueuedScore(score=parsed, received_via="signal"))

    async def _directive(self, payload: Any) -> None:
        try:
            parsed = parse_directive(payload)
        except ValueError as exc:
            await self._store.reject("directive", payload, str(exc))
            return
        self.directives_in_flight += 1
        try:
            recorded = await self._store.recorded(
                "directive",
                FeedbackActivities.record_directive,
                RecordDirectiveInput(
                    session_id=self._inp.session_id,
                    lineage_id=self._inp.lineage_id,
                    directive_id=self._store.feedback_id("directive", parsed),
                    cycle=self._s.cycle,
                    kind=parsed.kind,
                    content=parsed.content,
                ),
            )
        finally:
            self.directives_in_flight -= 1
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
            await self._store.reject(kind, payload, str(exc))
            return
        if self._s.locked == locked:
            await self._store.reject(kind, payload, f"lineage is already {kind}ed")
            return
        self._s.locked = locked
        recorded = await self._store.recorded(
            kind,
            FeedbackActivities.record_lock,
            RecordLockInput(
                session_id=self._inp.session_id,
                lineage_id=self._inp.lineage_id,
                event_key=self._store.feedback_id(kind, parsed),
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
        self.retry_requested = True

    # ---- the promote update ----------------------------------------------------------------

    def check_promotion(self, payload: Any) -> PromoteInput:
        """promote's validator: a version this lineage has made (default: the one it runs), on
        a lineage that has not ended; refused as InvalidPromotion, nothing changed."""
        try:
            parsed = parse_promotion(payload)
        except ValueError as exc:
            raise _invalid(str(exc), "InvalidPromotion") from None
        if (ended := closed(self._status())) is not None:
            raise _invalid(f"{ended}; it cannot be promoted", "InvalidPromotion")
        latest = self._s.agent.version
        if parsed.version is not None and parsed.version > latest:
            raise _invalid(
                f"version: this lineage has made v1 to v{latest}, not v{parsed.version}",
                "InvalidPromotion",
            )
        return parsed

    async def promote(self, payload: Any) -> Promoted:
        """The session's champion is this lineage at a version: recorded with the
        competitors' latest scores (their outputs on the same inputs lose to its own, as
        preference pairs), and the lineage locked unless it was (it stops evolving)."""
        parsed = self.check_promotion(payload)
        version = parsed.version or self._s.agent.version
        lock = not self._s.locked
        self._s.locked = True
        try:
            scores = await self._store.step(
                FeedbackActivities.record_promotion,
                RecordPromotionInput(
                    session_id=self._inp.session_id,
                    lineage_id=self._inp.lineage_id,
                    event_key=self._store.feedback_id("promote", parsed),
                    cycle=self._s.cycle,
                    version=version,
                    lock=lock,
                    reason=parsed.reason,
                    rater=parsed.rater,
                ),
            )
        except (FailureError, LineageStopped) as err:
            self._s.locked = not lock
            why = "the lineage stopped" if isinstance(err, LineageStopped) else err.cause or err
            self._s.last_error = note(f"promotion not recorded: {why}")
            raise _invalid(f"promotion not recorded: {why}", "PromotionFailed") from None
        self._s.champion_version = version
        return Promoted(
            lineage_id=self._inp.lineage_id,
            version=version,
            newly_locked=lock,
            competitor_scores=scores,
        )

    # ---- the submit_score update -----------------------------------------------------------

    def check_score(self, payload: Any) -> None:
        """submit_score's validator: refused scores fail the update as InvalidScore (the
        message names the field and the problem), a full queue as ScoreQueueFull."""
        try:
            parsed = parse_score(payload)
        except ValueError as exc:
            raise _invalid(str(exc)) from None
        status = self._status()
        if (ended := closed(status)) is not None:
            raise _invalid(f"{ended}; it accepts no more scores")
        if (full := queue_full(self._s)) is not None:
            raise _invalid(full, "ScoreQueueFull")
        # one for an output that has a score, or for a cycle its turn would not be
        if (wrong := self._not_its_turn(parsed)) is not None:
            raise _invalid(wrong)
        # one naming its output is refused as soon as that output is not the one awaiting
        if (wrong := wrong_output(parsed, self._s.output_id, self._s.cycle)) is not None:
            raise _invalid(wrong)

    def _panel_refusal(self, score: ScoreInput) -> str | None:
        panel = self._inp.options.panel()
        if panel is None:
            return None
        return late_or_unexpected(panel, score, self._status(), self._s.cycle)

    def _not_its_turn(self, score: ScoreInput) -> str | None:
        if self._inp.options.panel() is not None:  # several scores per output
            return self._panel_refusal(score)
        status = self._status()
        # before its first cycle a run is at the cycle after the one it carries
        at_cycle = self._s.cycle + (1 if status == "starting" else 0)
        ahead = len(self._s.queued_scores) + (1 if self.scoring else 0)
        return not_its_turn(score, at_cycle, status == "awaiting_score", at_cycle + ahead)

    def _score_cycle(self, score: ScoreInput) -> int | None:
        """The cycle whose output a score just queued is taken for, when known: the one it
        names, or the output awaiting a score as it was sent (None: whichever comes next)."""
        if score.cycle is not None:
            return score.cycle
        if self._status() == "awaiting_score" or score.output_id is not None:
            return self._s.cycle
        return None

    def queue_score(self, payload: Any) -> ScoreAccepted:
        """submit_score: the score queued for the output awaiting one (or the next)."""
        parsed = parse_score(payload)
        if (full := queue_full(self._s)) is not None:  # the validator saw room; keep the bound
            raise _invalid(full, "ScoreQueueFull")
        # the validator's verdict holds for the handler too: one score per output, whatever
        # else arrived in the same workflow task
        if (wrong := self._not_its_turn(parsed)) is not None:
            raise _invalid(wrong)
        cycle = self._score_cycle(parsed)
        self._s.queued_scores.append(QueuedScore(score=parsed, received_via="update"))
        return ScoreAccepted(
            cycle=cycle,
            score=parsed.score,
            comment=parsed.comment,
            rater=parsed.rater,
            queued_position=len(self._s.queued_scores),
            wants=parsed.wants,
            output_id=parsed.output_id,
        )

    # ---- the correct_reading update --------------------------------------------------------

    def check_correction(self, payload: Any) -> None:
        """correct_reading's validator: an unknown family, action or amount, contradictory
        wants, a missing rater or score, a score not the latest or not the rater's, a lineage
        with no score read yet or ended: refused (InvalidCorrection), nothing changed."""
        self._correction(payload)

    def queue_correction(self, payload: Any) -> CorrectionAccepted:
        """correct_reading: the correction queued for the cycle to take (or, sent again, the
        one already queued or done), answered at once: no update slot is held while the
        change is re-planned and the cycle runs again."""
        queued = self._correction(payload)
        accepted = CorrectionAccepted(
            correction_id=queued.correction_id,
            evaluation_id=queued.evaluation_id,
            cycle=queued.cycle,
        )
        if (done := self.corrected(queued.correction_id)) is not None:
            return accepted.model_copy(update={"done": done})
        waiting = [q.correction_id for q in self._s.queued_corrections]
        if queued.correction_id not in waiting:
            self._s.queued_corrections.append(queued)
            waiting.append(queued.correction_id)
        return accepted.model_copy(
            update={"queued_position": waiting.index(queued.correction_id) + 1}
        )

    def corrected(self, correction_id: str) -> CorrectionTaken | None:
        """What a correction did, once the cycle has taken it."""
        return next((d for d in self._s.corrections_done if d.correction_id == correction_id), None)

    def _correction(self, payload: Any) -> QueuedCorrection:
        try:
            parsed = parse_correction(payload)
        except ValueError as exc:
            raise _invalid(str(exc), "InvalidCorrection") from None
        if (ended := closed(self._status())) is not None:
            raise _invalid(f"{ended}; its readings can no longer be corrected", "InvalidCorrection")
        step = self._s.last_step
        later_score = self.scoring or bool(self._s.queued_scores)
        refused = not_correctable(parsed, step, later_score, self._inp.options.corrections_by)
        if refused is not None or step is None:  # no step: refused ("nothing to correct")
            raise _invalid(refused or "nothing to correct", "InvalidCorrection")
        # several raters: one rater's correction is theirs alone (two may mean the same wants)
        corrected = step.evaluation_id
        if step.panel:
            corrected += f"/{parsed.rater.casefold()}"
        queued = QueuedCorrection(
            correction_id=correction_key(self._inp.lineage_id, corrected, parsed.wants),
            evaluation_id=step.evaluation_id,
            wants=parsed.wants,
            rater=parsed.rater,
            cycle=step.cycle,
        )
        if self.corrected(queued.correction_id) is not None:
            return queued  # sent again: its answer is what it did
        waiting = [q.correction_id for q in self._s.queued_corrections]
        if len(waiting) >= MAX_QUEUED_CORRECTIONS and queued.correction_id not in waiting:
            raise _invalid(
                f"{MAX_QUEUED_CORRECTIONS} corrections already wait for this lineage; send "
                "this one once they are taken",
                "InvalidCorrection",
            )
        return queued


def _converter_reason(error: BaseException) -> str:
    """What the converter said, briefly (pydantic's first line only counts its errors)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    reason = lines[1] if len(lines) > 1 and "validation error" in lines[0] else lines[0]
    return reason.split(" [type=")[0][:200]
