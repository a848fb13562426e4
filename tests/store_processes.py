"""Store writers in processes of their own, as on separate machines, writing at the same moment.

Each process is forked from one that imported the store once per test run (multiprocessing's
forkserver, which preloads this module) instead of being a new interpreter that imports it
again (about two seconds of CPU each). It opens its own Store after the fork (its own engine
and connections), then waits at a barrier with the others, so their writes overlap: started
one after the other, each process's writes were over before the next one's import was."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

from domain.agent import AgentDefinition, AgentParameters
from store import Store
from store.rlm_findings.shared_findings import DatabaseSharedStore

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload([__name__])


def run_together(target: Callable[..., None], url: str, names: list[str], *args: Any) -> None:
    """``target(store, name, *args)`` in a process per name, all on the store at ``url``,
    released together once each has opened it; each must end with exit code 0."""
    barrier = _CONTEXT.Barrier(len(names))
    processes = [
        _CONTEXT.Process(target=_run, args=(target, url, name, barrier, *args)) for name in names
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=180)
    assert [p.exitcode for p in processes] == [0] * len(names)


def _run(target: Callable[..., None], url: str, name: str, barrier: Any, *args: Any) -> None:
    store = Store.open(url)
    barrier.wait(timeout=60)
    try:
        target(store, name, *args)
    finally:
        store.close()


def register_lineages(store: Store, name: str, count: int = 25) -> None:
    """``count`` lineages of one shared session, each with its agent."""
    agent = AgentDefinition(
        name="a", system_prompt="Be brief.", parameters=AgentParameters(model="offline-1")
    )
    for i in range(count):
        lineage = f"p{name}-{i}"
        store.recorder.register_lineage(
            session_id="shared",
            session_name="S",
            lineage_id=lineage,
            label=str(i),
            workflow_id=lineage,
            agent=agent,
            inputs=["the same input for everyone"],
        )


def create_findings(store: Store, worker: str, count: int = 25) -> None:
    """``count`` evidence objects by ``worker`` in the shared findings store "team"."""
    shared = DatabaseSharedStore(store.engine, "team", store.read_engine)
    for i in range(count):
        shared.create(worker, "evidence", f"finding {i} of {worker}")
