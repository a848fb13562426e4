"""A comment's reading asked of a lineage's worker (``training-camp score`` and ``read``): one
short workflow on the lineage's task queue whose one local activity reads the comment there,
where the reader is loaded (``activities/reading_preview.py``). It writes nothing; its history
holds the masked comment and the reading. ``client.preview_on_worker`` starts it, by name.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.reading_preview import ReadingPreviewActivities
    from domain.reading_preview import PREVIEW_WORKFLOW, LineagePreview, PreviewAsked

# a cold reader loads in seconds, a comment is read within trainer.preview's budget; Claude's
# reading (a rules+claude or claude lineage) takes a model call
READ_TIMEOUT = timedelta(seconds=45)


# Outside the sandbox, as LineageWorkflow (see there): it holds no state and reads nothing, and
# a preview is a new run each time, which the sandbox would re-import this module for
@workflow.defn(name=PREVIEW_WORKFLOW, sandboxed=False)
class ReadingPreviewWorkflow:
    @workflow.run
    async def run(self, asked: PreviewAsked) -> LineagePreview:
        return await workflow.execute_local_activity_method(
            ReadingPreviewActivities.preview_reading,
            asked,
            start_to_close_timeout=READ_TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
