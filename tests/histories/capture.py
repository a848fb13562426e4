"""Record a LineageWorkflow history for the replay test.

    .venv/bin/python -m tests.histories.capture [name]

Runs one lineage through two scored cycles (with rejected signals, among them one whose
payload cannot be read and one of a name the lineage does not know, a directive, a lock and an
unlock) on a throwaway dev server and writes tests/histories/<name>.json (default
lineage-two-cycles). When the workflow changes on purpose, guard the change with
workflow.patched, keep the old histories (they replay the unpatched path) and record a new one.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue

from domain.settings import Settings
from services.dev_server import start_in_memory
from starter import start_session
from store import Store
from tests.conftest import awaiting, make_spec, wait_for_state
from worker import build_worker
from workflows.lineage import LineageWorkflow

HERE = Path(__file__).parent


async def main(name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = await start_in_memory()
        store = Store.open(f"sqlite:///{tmp}/store.db")
        settings = Settings(task_queue="capture", database_url=str(store.engine.url))
        spec = make_spec()
        async with build_worker(env.client, store, settings):
            (handle,) = await start_session(env.client, spec, settings.task_queue)
            await wait_for_state(handle, awaiting(1))
            await handle.signal("score", {"score": 99})
            unreadable = Payload(metadata={"encoding": b"json/plain"}, data=b"[" * 300 + b"]" * 300)
            await handle.signal("score", RawValue(unreadable))
            await handle.signal("bogus", {"score": 9})
            await handle.signal("directive", {"kind": "sticky", "content": "Be kind."})
            await handle.signal("score", {"score": 3, "comment": "way too long"})
            await wait_for_state(handle, awaiting(2))
            await handle.signal("lock", {"reason": "good enough"})
            await handle.execute_update(LineageWorkflow.submit_score, {"score": 8})
            await wait_for_state(handle, awaiting(3))
            await handle.signal("unlock", {})
            await handle.signal("stop")
            await handle.result()
            history = await handle.fetch_history()
        await env.shutdown()
        out = HERE / f"{name}.json"
        out.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
        print(f"wrote {out} ({len(history.events)} events)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "lineage-two-cycles"))
