"""How a score's comment would be read by a lineage's cycle step, before anything changes: the
review page reads it in its own process (``preview_reading``), and ``training-camp score`` and
``read`` ask a worker of the lineage to (the ``preview_reading`` activity, which
``workflows/reading_preview.py`` runs): the worker has the reader loaded, the store the step
reads and the trainer backends the step uses, so the command prints the reading in a fraction
of a second instead of loading the reader itself. Both read through ``trainer/preview.py``;
nothing is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError

from domain import panel
from domain.corrections import LabelledExample
from domain.cycle_decision import CycleStep
from domain.feedback import ScoreInput
from domain.lineage import CycleStepInput, LineageState, score_before
from domain.reading_preview import LineagePreview, PreviewAsked, ReadingPreview, planned_change
from domain.trace import TracedCall
from store import Store
from trainer import preview
from trainer.backends import TrainerBackends
from trainer.cycle_step import ROLLED_BACK, LineageMemory
from trainer.measure_budget import OverBudget, within_budget

PLAN_BUDGET_SECONDS = 10.0  # the rules engine plans in milliseconds; a long comment's reading
# The cycle step's own planning (``TrainerActivities.planned``), handed in by whoever composes
# the preview (the worker, the review app): activity modules do not import one another
Planner = Callable[[CycleStepInput], Awaitable[CycleStep]]


async def preview_reading(
    client: Client,
    store: Store,
    backends: TrainerBackends,
    lineage: str,
    score: float,
    comment: str | None,
    shared_corrections: bool = False,
    wants: list[str] | None = None,
    planner: Planner | None = None,
    rater: str | None = None,
) -> tuple[LineageState, ReadingPreview]:
    """The lineage's `state`, and how its cycle step would read ``score`` and ``comment`` now
    (or act on ``wants``, the wishes as the rater edited them): the same reader, the
    corrections it would consult (the session's, or every session's with
    ``shared_corrections``, as the worker's setting says) and the lineage's trainer; and,
    for the output awaiting a score, every change the step would make, as ``planner`` (the
    step's own planning) makes it; with several raters, what the raters other than ``rater``
    have asked so far on that output. Writes nothing. KeyError when no such lineage is
    known."""
    lineage_id = await asyncio.to_thread(store.queries.resolve_lineage, lineage)
    # the lineage workflow's queries, by name: activities sit below the workflows
    handle = client.get_workflow_handle(f"lineage-{lineage_id}")
    state, basis = await asyncio.gather(
        handle.query("state", result_type=LineageState), _step_input(handle)
    )
    corrections, undo_to, calls = await asyncio.to_thread(
        _reading_context, store, state, shared_corrections
    )
    memory = LineageMemory(
        session_id=state.session_id,
        lineage_id=lineage_id,
        previous_score=score_before(state.score_history, None),
        corrections=corrections,
        # the standing wishes: a wish they would keep the step from acting on is said now
        wishes=state.active_wishes,
        cycle=state.cycle,
        calls=calls,  # "the fourth call" is the one at that place in this output's trace
    )
    backend = preview.backend_for(backends, state.trainer, state.trainer_model)
    seen = await preview.preview(backend, memory, score, comment, undo_to, wants)
    if state.rater_scores:
        seen = seen.model_copy(update={"others": panel.others_said(state.rater_scores, rater)})
    if basis is None or planner is None:
        return state, seen
    return state, await planned(planner, basis, seen, score, comment, wants)


async def _step_input(handle: WorkflowHandle[Any, Any]) -> CycleStepInput | None:
    """The step a score would start now (``LineageWorkflow.step_input``); None when no output
    awaits a score, or the lineage's worker predates the query."""
    try:
        return await handle.query("step_input", result_type=CycleStepInput | None)
    except WorkflowQueryFailedError:
        return None


async def planned(
    planner: Planner,
    basis: CycleStepInput,
    seen: ReadingPreview,
    score: float,
    comment: str | None,
    wants: list[str] | None,
) -> ReadingPreview:
    """``seen`` with the step's plan: the changes the cycle step would make, planned by the
    step's own function (``TrainerActivities.planned``) on the step the lineage would start
    (``basis``) and the wants the score will carry (``plan_wants``). Unplanned (said back
    after the step) when the step plans with Claude, or the comment could not be read here."""
    plan_wants = wants if wants is not None else seen.wants if seen.exact and comment else None
    if seen.incomplete or not _rules_plan(basis.trainer, plan_wants):
        return seen
    if not basis.train:  # locked: the score judges the last change, and nothing evolves
        locked = "the lineage is locked: the score judges the last change, nothing changes"
        return seen.model_copy(
            update={"planned": True, "plan_wants": plan_wants, "plan_notes": [locked]}
        )
    try:
        sent = ScoreInput(score=float(score), comment=comment, wants=plan_wants)
    except ValidationError:
        return seen  # the lineage refuses the score itself, and says why
    inp = basis.model_copy(update={"score": sent})
    try:
        step = await within_budget(PLAN_BUDGET_SECONDS, _plan_now, planner, inp)
    except (OverBudget, ApplicationError):
        return seen
    return seen.model_copy(
        update={
            "changes": [planned_change(c) for c in step.plan.changes],
            "planned": True,
            "plan_wants": plan_wants,
            # what the reading already says (a clause not understood, a standing wish in
            # the way) is not said twice, nor what the changes above do (a rollback, a
            # revert): what is left is what the step would not do, and why
            "plan_notes": [
                r
                for r in step.report
                if not r.startswith(("not understood", ROLLED_BACK, "back to v"))
                and r not in {u.why for u in seen.unsure}
            ],
        }
    )


def _rules_plan(trainer: str, plan_wants: list[str] | None) -> bool:
    """Whether the step's plan is the rules engine's, made alike here and in the step: with
    the rules trainer; with rules+claude when the wishes are sent (Claude reads nothing)."""
    return trainer == "rules" or (trainer == "rules+claude" and plan_wants is not None)


def _plan_now(planner: Planner, inp: CycleStepInput) -> CycleStep:
    """The plan, in a measuring thread: the rules engine's work holds no event loop."""
    return asyncio.run(planner(inp))


def _reading_context(
    store: Store, state: LineageState, shared_corrections: bool
) -> tuple[list[LabelledExample], int | None, list[TracedCall]]:
    """The corrections the step's reader consults, the version an undo goes back to (the
    one the current version was made from), and the calls of the run whose output awaits the
    score (none when none does)."""
    q = store.queries
    made = [r for r in q.evolution_records(state.lineage_id) if r.to_version == state.agent_version]
    corrections = q.labelled_examples(None if shared_corrections else state.session_id)
    calls = q.run_calls(state.output_id) if state.output_id else []
    return corrections, made[-1].from_version if made else None, calls


class ReadingPreviewActivities:
    def __init__(
        self,
        store: Store,
        backends: TrainerBackends,
        shared_corrections: bool = False,
        planner: Planner | None = None,
    ) -> None:
        self.store = store
        self.backends = backends
        self.shared_corrections = shared_corrections  # as the step's reader consults them
        self.planner = planner  # the step's planning: the preview lists its changes

    @activity.defn(name="preview_reading")
    async def preview_reading(self, asked: PreviewAsked) -> LineagePreview:
        """How the lineage's step would read ``asked``'s score and comment now."""
        try:
            state, seen = await preview_reading(
                activity.client(),
                self.store,
                self.backends,
                asked.lineage,
                asked.score,
                asked.comment,
                self.shared_corrections,
                asked.wants,
                self.planner,
                asked.rater,
            )
        except KeyError as exc:  # no such lineage: said, not retried
            raise ApplicationError(
                str(exc.args[0]), type="UnknownLineage", non_retryable=True
            ) from None
        return LineagePreview(
            lineage_id=state.lineage_id,
            status=state.status,
            cycle=state.cycle,
            output_id=state.output_id,
            reading=seen,
        )
