"""The demo (`training-camp demo SPEC`, `make run`): a Temporal dev server with its Web UI, a
worker, the review inbox and the session, in one process, watched until Ctrl-C or SIGTERM, or
until the dev server it started dies; then it stops what it started, within STOP_SECONDS."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.worker import Worker

from client import connect, next_cycle, start_session
from demo.watch import watch
from domain.settings import Settings
from domain.spec import SessionSpec
from review.app import create_app
from review.server import ReviewServer
from services.dev_server import DevServer
from services.instructions import print_instructions
from services.terminal import console as make_console
from services.terminal import shown
from store import Store
from worker import build_worker, tune_garbage_collector

console = make_console()

# How long the demo's own stop may take (the review inbox, then the worker: its running
# activities are cancelled); past it the demo leaves anyway
STOP_SECONDS = 10.0
SERVER_CHECK_SECONDS = 0.5  # how often the demo looks whether the dev server it started runs
STOPPING = "Stopping… lineages keep waiting in Temporal; run again to resume."


@dataclass
class _Started:
    """What the demo's session has started, to stop in the end."""

    inbox: ReviewServer | None = None
    worker: Worker | None = None


def _interrupted(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run_demo(spec: SessionSpec, data_dir: Path, port: int, ui_port: int, review_port: int) -> int:
    """Run the demo to its end; the exit code: 1 when the dev server it started stopped under
    it, else 0."""
    server = DevServer(data_dir, port=port, ui_port=ui_port)
    settings = Settings.from_env().model_copy(update={"temporal_address": server.address})
    if "TRAINING_CAMP_DATABASE_URL" not in os.environ:
        settings.database_url = f"sqlite:///{data_dir / 'training-camp.db'}"
    # Our own SIGINT and SIGTERM handling, whatever was inherited: a shell starts a background
    # job (`make run &`, a CI step) with SIGINT ignored, and Ctrl-C or kill must still stop it.
    # Until the event loop runs, a signal interrupts the server's start.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupted)
    code = 0
    try:
        console.print(f"Starting the Temporal dev server (data in {shown(data_dir)}/)…")
        server.start()
        if not server.started_here:
            console.print(
                f"[yellow]A server already listens on {server.address}; using it.[/yellow]"
            )

        async def session(started: _Started) -> None:
            await _demo_session(spec, settings, server, review_port, started)

        code = _run_until_stopped(session, server)
    except KeyboardInterrupt:
        console.print(f"\n{STOPPING}")
    finally:
        # bounded (terminate, then kill after a wait): a second Ctrl-C must not cut it short
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        server.stop()
    return code


async def _demo_session(
    spec: SessionSpec,
    settings: Settings,
    server: DevServer,
    review_port: int,
    started: _Started,
) -> None:
    """The worker, the session and the review inbox, watched until cancelled; ``started``
    holds each part as it starts."""
    store = Store.open(settings.database_url)
    client = await connect(settings)
    worker = build_worker(client, store, settings)
    working = asyncio.create_task(worker.run())
    started.worker = worker
    tune_garbage_collector()  # this process is the demo's worker
    handles = await start_session(client, spec, settings.task_queue)
    # The embedded default: on this machine only, no token (use `review` elsewhere)
    inbox = ReviewServer(create_app(client, store, settings=settings), "127.0.0.1", review_port)
    await inbox.start()
    started.inbox = inbox
    print_instructions(spec, settings, server.ui_url, await next_cycle(handles[0]))
    console.print(f"Review inbox: {inbox.url}/sessions/{shown(spec.session_id)}")
    console.print(f"Store: {settings.database_url}. Watching (Ctrl-C to stop)…\n")
    watching = asyncio.create_task(watch(handles))
    try:
        done, _ = await asyncio.wait({working, watching}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # a worker that failed: its error
    finally:
        watching.cancel()


def _run_until_stopped(
    session: Callable[[_Started], Coroutine[Any, Any, None]], server: DevServer
) -> int:
    """Run ``session`` until SIGINT or SIGTERM, or the end of the dev server this process
    started, then stop what it started in at most STOP_SECONDS. Returns the exit code: 1 when
    the server stopped under it, else 0; an error of the session is raised."""
    loop = asyncio.new_event_loop()
    # Not closed after: closing waits for every task to end, and a worker's task waiting on a
    # server that is gone may never end. The process exits next (command_line.run).
    return loop.run_until_complete(_until_stopped(session, server))


async def _until_stopped(
    session: Callable[[_Started], Coroutine[Any, Any, None]], server: DevServer
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # The loop's own handlers: the stop below runs in order, where a KeyboardInterrupt raised
    # wherever the loop happened to be left tasks that never ended
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    async def server_gone() -> None:
        if not server.started_here:
            await asyncio.Event().wait()  # a server we did not start is not ours to watch
        while server.running:
            await asyncio.sleep(SERVER_CHECK_SECONDS)

    started = _Started()
    main = asyncio.create_task(session(started))
    stopped = asyncio.create_task(stop.wait())
    gone = asyncio.create_task(server_gone())
    await asyncio.wait({main, stopped, gone}, return_when=asyncio.FIRST_COMPLETED)
    if gone.done() and not stop.is_set():
        # Ctrl-C reaches the whole job, the server too: a signal on its way says why it ended
        await asyncio.wait({stopped}, timeout=SERVER_CHECK_SECONDS)
    interrupted, server_ended = stop.is_set(), gone.done()
    for task in (main, stopped, gone):
        task.cancel()
    code = 0
    if interrupted:
        console.print(f"\n{STOPPING}")
    elif server_ended:
        console.print(
            f"[red]The Temporal dev server stopped (exit code {server.exit_code}); stopping "
            "the worker and the review inbox. Run again to resume.[/red]"
        )
        code = 1

    async def stop_all() -> None:
        if started.inbox is not None:
            with contextlib.suppress(Exception):
                await started.inbox.stop()
        # A worker's shutdown waits for its calls to the server: with the server it started
        # gone they would only be retried. Its activities end with the process, as in a crash,
        # and Temporal runs them again once the server is back.
        server_gone = server.started_here and not server.running
        if started.worker is not None and not server_gone:
            with contextlib.suppress(Exception):
                await started.worker.shutdown()

    _, late = await asyncio.wait({asyncio.create_task(stop_all())}, timeout=STOP_SECONDS)
    if late:
        console.print(f"[yellow]Not stopped in {STOP_SECONDS:g} s; leaving anyway.[/yellow]")
    error = main.exception() if main.done() and not main.cancelled() else None
    if error is not None:
        raise error
    return code
