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

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from domain.corrections import LabelledExample
from domain.lineage import LineageState, score_before
from domain.reading_preview import LineagePreview, PreviewAsked, ReadingPreview
from store import Store
from trainer import preview
from trainer.backends import TrainerBackends
from trainer.cycle_step import LineageMemory


async def preview_reading(
    client: Client,
    store: Store,
    backends: TrainerBackends,
    lineage: str,
    score: float,
    comment: str | None,
    shared_corrections: bool = False,
) -> tuple[LineageState, ReadingPreview]:
    """The lineage's `state`, and how its cycle step would read ``score`` and ``comment`` now:
    the same reader, the corrections it would consult (the session's, or every session's
    with ``shared_corrections``, as the worker's setting says) and the lineage's trainer.
    Writes nothing. KeyError when no such lineage is known."""
    lineage_id = await asyncio.to_thread(store.queries.resolve_lineage, lineage)
    # the lineage workflow's `state` query, by name: activities sit below the workflows
    state = await client.get_workflow_handle(f"lineage-{lineage_id}").query(
        "state", result_type=LineageState
    )
    corrections, undo_to = await asyncio.to_thread(
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
    )
    backend = preview.backend_for(backends, state.trainer, state.trainer_model)
    return state, await preview.preview(backend, memory, score, comment, undo_to)


def _reading_context(
    store: Store, state: LineageState, shared_corrections: bool
) -> tuple[list[LabelledExample], int | None]:
    """The corrections the step's reader consults, and the version an undo goes back to (the
    one the current version was made from)."""
    q = store.queries
    made = [r for r in q.evolution_records(state.lineage_id) if r.to_version == state.agent_version]
    corrections = q.labelled_examples(None if shared_corrections else state.session_id)
    return corrections, made[-1].from_version if made else None


class ReadingPreviewActivities:
    def __init__(
        self, store: Store, backends: TrainerBackends, shared_corrections: bool = False
    ) -> None:
        self.store = store
        self.backends = backends
        self.shared_corrections = shared_corrections  # as the step's reader consults them

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
