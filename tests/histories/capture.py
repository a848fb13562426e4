"""Record a LineageWorkflow history (or, for a name starting ``rlm-``, an RlmReplWorkflow
root's) for the replay test.

    .venv/bin/python -m tests.histories.capture [name]

Runs one lineage through two scored cycles (with rejected signals, among them one whose
payload cannot be read and one of a name the lineage does not know, a directive, a correction
of a reading that runs cycle 2 again, a lock and an unlock) on a throwaway dev server and
writes tests/histories/<name>.json (default lineage-two-cycles); under any other name it also
writes what the lineage wrote to the store, tests/data/<name>.store.json (a baseline:
lineage-single-rater-3273986 was recorded at that commit for tests/test_raters.py). Before
the first release nothing runs in production: when the workflow changes on purpose, record the
histories again (docs/architecture.md has the policy from the first release on).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowHistory
from temporalio.common import RawValue

from client import start_session
from domain.settings import Settings
from examples.rlm_documents import REPORTS, document_task
from rlm.repl import ReplConfig, ReplRunInput
from services.dev_server import start_in_memory
from store import Store
from store.eventstore import event_log
from tests.conftest import awaiting, eventually, make_spec, wait_for_state
from worker import build_worker
from workflows.lineage import LineageWorkflow
from workflows.rlm import RlmReplWorkflow

HERE = Path(__file__).parent


def save(name: str, history: WorkflowHistory) -> None:
    out = HERE / f"{name}.json"
    out.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
    print(f"wrote {out} ({len(history.events)} events)")


def store_story(store: Store) -> dict[str, list[dict[str, object]]]:
    """What the lineage wrote to the store: its training events (type, schema version,
    payload) in log order and its agent versions (content hashes), for comparing one run of
    the capture's scenario with another recorded from an older commit."""
    with store.engine.connect() as conn:
        events = conn.exec_driver_sql(
            "SELECT e.event_type, e.schema_version, b.content FROM training_events e"
            " JOIN payload_blobs b ON b.hash = e.payload_hash ORDER BY e.position"
        ).all()
        versions = conn.exec_driver_sql(
            "SELECT version, system_prompt_hash, tools_hash, flow_hash FROM agent_versions"
            " ORDER BY version"
        ).all()
    return {
        "events": [
            {"type": t, "schema_version": v, "payload": json.loads(c)} for t, v, c in events
        ],
        "versions": [
            {"version": v, "system_prompt": p, "tools": t, "flow": f} for v, p, t, f in versions
        ],
    }


def _logged(store: Store, event_type: str, count: int = 1) -> bool:
    with store.engine.connect() as conn:
        return len(list(event_log.read(conn, event_types=[event_type]))) >= count


async def lineage_scenario(client: Client, store: Store, task_queue: str) -> WorkflowHistory:
    """Two scored cycles of one single-rater lineage, with rejections, a directive, a
    correction that runs cycle 2 again, a lock and an unlock (the saved history's story)."""
    spec = make_spec()
    (handle,) = await start_session(client, spec, task_queue)
    await wait_for_state(handle, awaiting(1))
    await handle.signal("score", {"score": 99})
    unreadable = Payload(metadata={"encoding": b"json/plain"}, data=b"[" * 300 + b"]" * 300)
    await handle.signal("score", RawValue(unreadable))
    await handle.signal("bogus", {"score": 9})
    # the rejections are written by activities that may run side by side with the directive's:
    # the story (and the baseline) has them land first
    await eventually(lambda: _logged(store, "feedback.rejected", 3))
    await handle.signal("directive", {"kind": "sticky", "content": "Be kind."})
    await handle.signal("score", {"score": 3, "comment": "way too long", "rater": "ana"})
    await wait_for_state(handle, awaiting(2))
    await handle.execute_update(
        LineageWorkflow.correct_reading,
        {"wants": ["shorter:half", "bullets"], "rater": "ana", "cycle": 1},
    )
    rerun = await wait_for_state(handle, lambda s: awaiting(2)(s) and s.agent_version == 3)
    await handle.signal("lock", {"reason": "good enough"})
    await handle.execute_update(
        LineageWorkflow.submit_score, {"score": 8, "output_id": rerun.output_id}
    )
    await wait_for_state(handle, awaiting(3))
    await handle.signal("unlock", {})
    await eventually(lambda: _logged(store, "lineage.unlocked"))  # recorded before the stop
    await handle.signal("stop")
    await handle.result()
    return await handle.fetch_history()


async def rlm(name: str) -> None:
    """The pilot-reports example, offline, isolated stores, workers one level down."""
    with tempfile.TemporaryDirectory() as tmp:
        env = await start_in_memory()
        store = Store.open(f"sqlite:///{tmp}/store.db")
        settings = Settings(task_queue="capture", database_url=str(store.engine.url))
        prompt, context = document_task(REPORTS, max_parallel=2)
        config = ReplConfig(max_depth=1, max_parallel=2)
        async with build_worker(env.client, store, settings):
            handle = await env.client.start_workflow(
                RlmReplWorkflow.run,
                ReplRunInput(run_id="capture", prompt=prompt, context=context, config=config),
                id=name,  # the replay test replays under the file name
                task_queue=settings.task_queue,
            )
            await handle.result()
            history = await handle.fetch_history()
        await env.shutdown()
        save(name, history)


async def main(name: str) -> None:
    if name.startswith("rlm-"):
        return await rlm(name)
    with tempfile.TemporaryDirectory() as tmp:
        env = await start_in_memory()
        store = Store.open(f"sqlite:///{tmp}/store.db")
        settings = Settings(task_queue="capture", database_url=str(store.engine.url))
        async with build_worker(env.client, store, settings):
            history = await lineage_scenario(env.client, store, settings.task_queue)
        await env.shutdown()
        save(name, history)
        if name != "lineage-two-cycles":  # a baseline: what it wrote to the store too
            out = HERE.parent / "data" / f"{name}.store.json"
            out.write_text(json.dumps(store_story(store), indent=1, sort_keys=True) + "\n")
            print(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "lineage-two-cycles"))
