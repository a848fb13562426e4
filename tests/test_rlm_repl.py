"""Recursive language-model runs on Temporal: a root model driving a REPL, workers at depth as
child workflows over two worker processes, isolated stores merged by commits or one shared
store, a worker process killed mid-run, and model-written cells that misbehave."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import uuid
from pathlib import Path
from typing import Any

import yaml
from temporalio.client import Client

from domain.settings import Settings
from examples.rlm_documents import REPORTS, document_task
from rlm import scripted_model
from rlm.repl import ReplConfig, ReplMessage, ReplRunInput, ReplRunResult
from rlm.sandbox import CellLimits
from store import Store
from store.rlm_findings.findings import DatabaseFindingsStore
from store.rlm_findings.shared_findings import DatabaseSharedStore
from tests.conftest import eventually, polled_by, spawn_worker
from tests.fake_messages_api import FakeMessagesAPI, text_message
from tests.test_faults import claude_env, claude_settings
from workflows.rlm import RlmReplWorkflow

ROOT_MODEL, WORKER_MODEL = "claude-sonnet-5", "claude-haiku-5-5"
DOCUMENTS = ("austin", "berlin", "lisbon", "osaka")


def claude_programs(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Claude's side of the REPL, as the local Messages API plays it: the same programs the
    offline model writes, chosen from the request (parallel workers ask in no fixed order)."""
    system = body.get("system") or ""
    messages = [ReplMessage(role=m["role"], content=m["content"]) for m in body["messages"]]
    if not system:  # an llm_query from a cell
        return 200, text_message(scripted_model.answer(messages[-1].content), body["model"])
    return 200, text_message(scripted_model.reply(system, messages), body["model"])


def expected_evidence(folder: Path = REPORTS) -> int:
    """What the workers should find, counted here independently: paragraphs that say one of a
    hypothesis's words, per hypothesis."""
    hypotheses = yaml.safe_load((folder / "question.yaml").read_text())["hypotheses"]
    count = 0
    for path in folder.glob("*.md"):
        for paragraph in [p.strip().lower() for p in path.read_text().split("\n\n") if p.strip()]:
            for h in hypotheses:
                sides = ("supports", "contradicts")
                count += any(any(w in paragraph for w in h[side]) for side in sides)
    return count


async def lifetimes(client: Client, root_id: str, names: list[str]) -> list[tuple[float, float]]:
    spans = []
    for name in names:
        described = await client.get_workflow_handle(f"{root_id}/{name}").describe()
        assert described.close_time is not None
        spans.append((described.start_time.timestamp(), described.close_time.timestamp()))
    return spans


def peak(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = best = 0
    for _, step in edges:
        running += step
        best = max(best, running)
    return best


async def activity_workers(client: Client, workflow_ids: list[str]) -> set[str]:
    """The identities of the worker processes that ran these workflows' activities."""
    seen = set()
    for workflow_id in workflow_ids:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        for event in history.events:
            if event.HasField("activity_task_started_event_attributes"):
                seen.add(event.activity_task_started_event_attributes.identity)
    return seen


async def test_a_root_model_fans_out_workers_at_depth_two_over_two_processes(
    client: Client,
    store: Store,
    settings: Settings,
    run_worker,
    backend_url: str,
    temporal_address: str,
    task_queue: str,
):
    """Claude (through the local Messages API) drives the root at depth 0 and the workers below
    it; rlm_worker_batched runs 4 workers, 2 at a time, across two worker processes (one of its
    own, and the test's); each hands half its document to a worker of its own at depth 2 and
    merges its commit."""
    run_id = f"pilot-{uuid.uuid4().hex[:8]}"
    prompt, context = document_task(REPORTS, max_parallel=2)
    config = ReplConfig(
        root_model=ROOT_MODEL,
        worker_model=WORKER_MODEL,
        max_depth=2,
        max_parallel=8,
        heartbeat_seconds=5,
    )
    with FakeMessagesAPI() as api:
        api.respond = claude_programs
        other = await spawn_worker(temporal_address, backend_url, task_queue, **claude_env(api))
        try:
            async with run_worker(claude_settings(settings, api)):
                await polled_by(client, task_queue, 2)  # else this one takes all before it polls
                result: ReplRunResult = await client.execute_workflow(
                    RlmReplWorkflow.run,
                    ReplRunInput(run_id=run_id, prompt=prompt, context=context, config=config),
                    id=f"rlm-{run_id}",
                    task_queue=task_queue,
                )
        finally:
            other.send_signal(signal.SIGTERM)
            await other.wait()

    assert result.finished and result.final["winner"] == "H_SUCCESS"
    # The models: the root's turns on one, the workers' (and the cells' llm_query) on the other
    depths = {(r["model"], m.group(1)) for r in api.requests if (m := _depth(r))}
    assert depths == {(ROOT_MODEL, "0"), (WORKER_MODEL, "1"), (WORKER_MODEL, "2")}
    assert any(not r.get("system") and r["model"] == WORKER_MODEL for r in api.requests)

    root = DatabaseFindingsStore(store.engine, run_id)
    objects = {o.id: o for o in root.objects()}
    evidence = [o for o in objects.values() if o.type == "evidence"]
    links = [o for o in objects.values() if o.type == "link"]
    assert len(evidence) == expected_evidence() == len(links) == result.final["links"]
    # namespaced batch_prefix/commit_id/local_id; a depth-2 worker's under its parent's
    namespaced = re.compile(rf"^({'|'.join(DOCUMENTS)})/w\d/(part2/w\d\.\d/)?")
    assert all(namespaced.match(o.id) for o in evidence), sorted(objects)
    assert {o.id.split("/")[0] for o in evidence} == set(DOCUMENTS)
    assert any("/part2/" in o.id for o in evidence)  # found at depth 2
    for link in links:
        assert link.content["dst"] in ("H_SUCCESS", "H_FAILURE")
        assert objects[link.content["src"]].type == "evidence"
    pending = root.proposals("pending")
    assert len(pending) == result.final["pending_proposals"] > 0
    assert {p.target_id for p in pending} == {"H_SUCCESS", "H_FAILURE"}
    [final_cell] = [s for s in _cells(store, run_id, "root") if "FINAL_VAR:" in (s.output or "")]
    assert json.loads(final_cell.output.split("FINAL_VAR: ", 1)[1]) == result.final

    names = [f"w{i}" for i in range(1, 5)]
    assert peak(await lifetimes(client, f"rlm-{run_id}", names)) == 2
    # each workflow of the run (the root, 4 workers, 4 below them) stays on the worker its
    # first task reached: were each a coin toss, all nine on one would be 1 in 256
    children = [f"rlm-{run_id}/{n}" for n in names]
    below = [f"rlm-{run_id}/{n}/{n}.1" for n in names]
    run = [f"rlm-{run_id}", *children, *below]
    assert len(await activity_workers(client, run)) == 2


async def test_shared_store_workers_see_each_others_evidence_while_they_run(
    client: Client, store: Store, run_worker, task_queue: str, tmp_path: Path
):
    """Each worker waits, in its second cell, until another worker's evidence shows in
    view_others: both finishing, each having seen the other, is only possible if each saw the
    other's findings while both ran."""
    for name in ("austin", "berlin"):
        shutil.copy(REPORTS / f"{name}.md", tmp_path)
    shutil.copy(REPORTS / "question.yaml", tmp_path)
    run_id = f"shared-{uuid.uuid4().hex[:8]}"
    prompt, context = document_task(tmp_path, max_parallel=2)
    config = ReplConfig(max_depth=1, max_parallel=2, shared_store=True)
    async with run_worker():
        result: ReplRunResult = await client.execute_workflow(
            RlmReplWorkflow.run,
            ReplRunInput(run_id=run_id, prompt=prompt, context=context, config=config),
            id=f"rlm-{run_id}",
            task_queue=task_queue,
        )
        finals = {}
        for name in ("w1", "w2"):
            done = await client.get_workflow_handle(f"rlm-{run_id}/{name}").result()
            finals[name] = ReplRunResult.model_validate(done).final
    assert finals["w1"]["saw_workers"] == ["w2"] and finals["w2"]["saw_workers"] == ["w1"]
    shared = DatabaseSharedStore(store.engine, run_id)
    evidence = shared.query("type=evidence")
    assert (
        len(evidence) == expected_evidence(tmp_path) == sum(f["evidence"] for f in finals.values())
    )
    assert {o.worker for o in evidence} == {"w1", "w2"}
    assert all(re.fullmatch(rf"{o.worker}_\d{{6}}", o.id) for o in evidence)
    assert result.final["links"] == len(evidence)


async def test_a_worker_process_killed_mid_run_loses_nothing_and_doubles_nothing(
    client: Client,
    store: Store,
    run_worker,
    backend_url: str,
    temporal_address: str,
    task_queue: str,
):
    run_id = f"kill-{uuid.uuid4().hex[:8]}"
    prompt, context = document_task(REPORTS, max_parallel=2)
    config = ReplConfig(max_depth=2, max_parallel=2, heartbeat_seconds=2)
    # the one to be killed caches no workflows: its workflows' next tasks go to the task queue
    # at once, not to its sticky queue to wait out Temporal's 10 s sticky timeout
    doomed = await spawn_worker(
        temporal_address, backend_url, task_queue, TRAINING_CAMP_MAX_CACHED_WORKFLOWS="0"
    )
    try:
        async with run_worker():  # the one that lives: this process's
            await polled_by(client, task_queue, 2)
            handle = await client.start_workflow(
                RlmReplWorkflow.run,
                ReplRunInput(run_id=run_id, prompt=prompt, context=context, config=config),
                id=f"rlm-{run_id}",
                task_queue=task_queue,
            )
            # mid-run: the first workers have run cells, the root has merged nothing yet
            await eventually(lambda: bool(_cells(store, run_id, "w1")), timeout=60)
            doomed.send_signal(signal.SIGKILL)
            await doomed.wait()
            result = ReplRunResult.model_validate(await asyncio.wait_for(handle.result(), 180))
    finally:
        if doomed.returncode is None:
            doomed.send_signal(signal.SIGTERM)
            await doomed.wait()
    assert result.finished and result.final["winner"] == "H_SUCCESS"
    objects = DatabaseFindingsStore(store.engine, run_id).objects()
    evidence = [o for o in objects if o.type == "evidence"]
    assert len(evidence) == expected_evidence()  # each exactly once
    quotes = [
        (o.backrefs[0].source_id, o.content["quote"], o.content["hypothesis"]) for o in evidence
    ]
    assert len(set(quotes)) == len(quotes)
    assert sum(o.type == "summary" for o in objects) == 8  # 4 workers, 4 at depth 2
    assert sum(o.type == "link" for o in objects) == len(evidence)


async def test_cells_that_misbehave_are_stopped_or_refused_and_the_run_goes_on(
    client: Client, store: Store, settings, run_worker, task_queue: str, tmp_path: Path
):
    outside = tmp_path / "written-by-a-cell.txt"
    cells = [
        "while True:\n    pass",
        "hog = bytearray(4 * 1024**3)",
        "import socket\nsocket.create_connection(('127.0.0.1', 7233), timeout=2)",
        f"open({str(outside)!r}, 'w').write('escaped')",
        "print('still here')\nFINAL_VAR('survived')",
    ]
    with FakeMessagesAPI() as api:
        api.script = [(200, text_message(f"```repl\n{c}\n```", ROOT_MODEL)) for c in cells]
        config = ReplConfig(
            root_model=ROOT_MODEL,
            max_depth=0,
            cell_limits=CellLimits(timeout_seconds=1, memory_mb=256),
        )
        async with run_worker(claude_settings(settings, api)):
            result: ReplRunResult = await client.execute_workflow(
                RlmReplWorkflow.run,
                ReplRunInput(
                    run_id=f"bad-{uuid.uuid4().hex[:8]}", prompt="Go.", context={}, config=config
                ),
                id=f"rlm-bad-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
    assert result.final == "survived" and result.turns == len(cells)
    seen = [r["messages"][-1]["content"] for r in api.requests[1:]]
    assert "TimeoutError" in seen[0]
    assert "MemoryError" in seen[1]
    assert "refuses network access" in seen[2]
    assert "refuses writing outside the cell's directory" in seen[3]
    assert not outside.exists()


def _depth(request: dict[str, Any]) -> re.Match[str] | None:
    return re.search(r"at depth (\d+)", request.get("system") or "")


def _cells(store: Store, run_id: str, worker: str) -> list[Any]:
    return [s for s in store.queries.spans(f"rlm:{run_id}/{worker}") if s.type == "code_execution"]
