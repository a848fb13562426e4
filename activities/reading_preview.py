"""A comment's reading previewed on a lineage's worker, for ``training-camp score`` and
``read``: the worker has the reader loaded, the store the step reads and the trainer backends
the step uses, so the command prints the reading in a fraction of a second instead of loading
the reader itself. The same function reads it as for the review page (``client.preview_reading``,
``trainer/preview.py``); it writes nothing.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from client import preview_reading
from domain.reading_preview import LineagePreview, PreviewAsked
from store import Store
from trainer.backends import TrainerBackends


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
