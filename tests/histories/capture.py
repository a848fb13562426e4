"""Record a LineageWorkflow history for the replay test.

    .venv/bin/python -m tests.histories.capture

Runs one lineage through two scored cycles (with a rejected signal, a directive, a lock and an
unlock) on a throwaway dev server and writes tests/histories/lineage-two-cycles.json. Re-run it
when the workflow changes on purpose (and guard the change with workflow.patched).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from dev_server import temporal_binary
from domain import search_attributes
from settings import Settings
from starter import start_session
from store import Store
from tests.conftest import awaiting, make_spec, wait_for_state
from worker import build_worker
from workflows.lineage import LineageWorkflow

OUT = Path(__file__).parent / "lineage-two-cycles.json"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=temporal_binary(),
            data_converter=pydantic_data_converter,
            search_attributes=search_attributes.ALL,
        )
        store = Store.open(f"sqlite:///{tmp}/store.db")
        settings = Settings(task_queue="capture", database_url=str(store.engine.url))
        spec = make_spec()
        async with build_worker(env.client, store, settings):
            (handle,) = await start_session(env.client, spec, settings.task_queue)
            await wait_for_state(handle, awaiting(1))
            await handle.signal(LineageWorkflow.score, {"score": 99})
            await handle.signal(
                LineageWorkflow.directive, {"kind": "sticky", "content": "Be kind."}
            )
            await handle.signal(LineageWorkflow.score, {"score": 3, "comment": "way too long"})
            await wait_for_state(handle, awaiting(2))
            await handle.signal(LineageWorkflow.lock, {"reason": "good enough"})
            await handle.execute_update(LineageWorkflow.submit_score, {"score": 8})
            await wait_for_state(handle, awaiting(3))
            await handle.signal(LineageWorkflow.unlock, {})
            await handle.signal(LineageWorkflow.stop)
            await handle.result()
            history = await handle.fetch_history()
        await env.shutdown()
        OUT.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
        print(f"wrote {OUT} ({len(history.events)} events)")


if __name__ == "__main__":
    asyncio.run(main())
