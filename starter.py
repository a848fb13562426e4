"""Start a Training Camp session (all its lineages) from a spec file, watch it, or run the demo.

python starter.py start examples/essay-session.yaml   # against $TEMPORAL_ADDRESS
python starter.py status examples/essay-session.yaml
python starter.py inbox                                # outputs awaiting a score
python starter.py demo examples/essay-session.yaml    # dev server + UI + worker + session
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.table import Table
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

from client import connect, next_cycle, start_session, workflow_id
from domain.execution import CUT_OFF, preview_of
from domain.lineage import LineageState
from domain.settings import Settings
from domain.spec import SessionSpec, SpecError, load_spec
from review import views
from review.app import create_app
from review.guard import LOOPBACK_HOSTS
from review.server import ReviewServer
from services import command_line
from services.dev_server import DevServer
from services.terminal import console as make_console
from services.terminal import json_text, printable, shown
from store import Store
from worker import build_worker, tune_garbage_collector
from workflows.lineage import LineageWorkflow

console = make_console()
SpecPath = Annotated[Path, typer.Argument(help="Session spec (YAML or JSON).")]
app = typer.Typer(
    add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_show_locals=False
)


def _command(name: str) -> str:
    """How to call a console script installed next to this Python (relative when shorter)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        with contextlib.suppress(ValueError):
            return str(beside.relative_to(Path.cwd()))
        return str(beside)
    return name


def _cli() -> str:
    return _command("temporal")


def print_instructions(
    spec: SessionSpec, settings: Settings, ui_url: str | None, next_cycle: int = 2
) -> None:
    """How to score, wait and look, for this session; ``next_cycle``: the first lineage's next
    cycle (after a restart, not always 2)."""
    name, session = shown(repr(spec.name)), shown(spec.session_id)
    console.print(f"\n[bold]Session[/bold] {name} (id [cyan]{session}[/cyan])")
    if ui_url:
        query = quote(f'TrainingCampSession="{spec.session_id}"')
        # the address on a line of its own, never wrapped: copied, it must work
        console.print("Temporal Web UI (this session's lineages):")
        console.print(
            f"{ui_url}/namespaces/{settings.temporal_namespace}/workflows?query={query}",
            soft_wrap=True,
            highlight=False,
        )
    for lineage in spec.lineages:
        console.print(
            f"  lineage {shown(lineage.label)}: workflow id [cyan]"
            f"{shown(workflow_id(spec.lineage_id(lineage.label)))}[/cyan]"
        )
    first = workflow_id(spec.lineage_id(spec.lineages[0].label))
    default = settings.temporal_address in ("localhost:7233", "127.0.0.1:7233")
    address = "" if default else (f" --address {settings.temporal_address}")
    score = json.dumps(
        {"score": 3, "comment": "Way too long, wanted quick bullets", "rater": "you"}
    )
    console.print("\nScore the latest output (signal; a bad payload is recorded as rejected):")
    console.print(
        f"  {_cli()} workflow signal{address} --workflow-id {first} --name score "
        f"--input {shlex.quote(score)}",
        soft_wrap=True,
        highlight=False,
    )
    console.print("Or with validation (update; a bad payload is refused, exit code 1):")
    console.print(
        f"  {_cli()} workflow update execute{address} --workflow-id {first} "
        f"--name submit_score --input '{{\"score\": 8}}'",
        soft_wrap=True,
        highlight=False,
    )
    console.print(
        f"Wait for cycle {next_cycle}'s output (update; returns once it awaits its score):"
    )
    console.print(
        f"  {_cli()} workflow update execute{address} --workflow-id {first} "
        f"--name await_output --input {next_cycle}",
        soft_wrap=True,
        highlight=False,
    )
    console.print("Every output awaiting a score, across sessions:")
    console.print(f"  {_command('training-camp')} inbox", soft_wrap=True, highlight=False)
    console.print("Read the whole output you are scoring, and where each instruction came from:")
    lineage = spec.lineage_id(spec.lineages[0].label)
    console.print(
        f"  {_command('training-camp')} output {lineage}\n"
        f"  {_command('training-camp')} blame {lineage}",
        soft_wrap=True,
        highlight=False,
    )
    console.print("Look at a lineage:")
    console.print(
        f"  {_cli()} workflow query{address} --workflow-id {first} --type state",
        soft_wrap=True,
        highlight=False,
    )
    console.print(
        f"  {_cli()} workflow list{address} --query "
        f"{shlex.quote(f'TrainingCampSession={chr(34)}{spec.session_id}{chr(34)}')}\n",
        soft_wrap=True,
        highlight=False,
    )


async def watch(handles: list[WorkflowHandle[LineageWorkflow, object]]) -> None:
    """Print what changes in each lineage, once: status, a new output (once per cycle), an
    evolution, accepted directives, locks and unlocks, and every rejection."""
    seen: dict[str, LineageState] = {}
    while True:
        for handle in handles:
            try:
                state: LineageState = await handle.query(LineageWorkflow.state)
            except RPCError:
                continue
            if state.status == "starting":
                continue
            for line in changes(seen.get(handle.id), state):
                console.print(line, highlight=False)
            seen[handle.id] = state
        await asyncio.sleep(0.5)


def changes(before: LineageState | None, now: LineageState) -> list[str]:
    """The lines that tell what happened to a lineage between two looks at its state."""
    lines = []
    label = f"[bold]{shown(now.label)}[/bold]"
    moved = before is None or (before.cycle, before.status, before.agent_version) != (
        now.cycle,
        now.status,
        now.agent_version,
    )
    if moved or (before and len(before.score_history) != len(now.score_history)):
        last = now.score_history[-1] if now.score_history else None
        scored = f" · last score {last.score:g} (cycle {last.cycle})" if last else ""
        lines.append(
            f"{label} cycle {now.cycle} · agent v{now.agent_version} · "
            f"[magenta]{now.status}[/magenta]{scored}"
        )
    if before and now.last_reading and now.score_history != before.score_history:
        lines.append(f"  [cyan]{shown(now.last_reading)}[/cyan]")
    if before and now.agent_version > before.agent_version and now.last_evolution:
        lines.append(f"  [green]{shown(now.last_evolution)}[/green]")
    shown_before = (
        before is not None and before.cycle == now.cycle and (before.status == "awaiting_score")
    )
    if now.status == "awaiting_score" and now.latest_output_preview and not shown_before:
        cut = ", cut off at the token limit" if now.latest_output_cut_off else ""
        lines.append(f"  [dim]output ({now.latest_output_words} words{cut}):[/dim]")
        lines += [
            f"  [dim]│[/dim] {shown(line)}" for line in now.latest_output_preview.splitlines()[:8]
        ]
    if before is not None:
        for kind in ("sticky", "oneshot"):
            old = getattr(before, f"{kind}_directives")
            new = getattr(now, f"{kind}_directives")
            lines += [
                f"  [cyan]{kind} directive accepted:[/cyan] {shown(d)}" for d in new if d not in old
            ]
        if now.locked != before.locked:
            lines.append(f"  [cyan]{'locked' if now.locked else 'unlocked'}[/cyan]")
    new_rejections = now.rejected_feedback - (before.rejected_feedback if before else 0)
    if new_rejections > 0:
        recent = now.recent_rejections[-new_rejections:]
        missed = new_rejections - len(recent)
        if missed > 0:
            lines.append(f"  [yellow]{missed} more rejected (see the store)[/yellow]")
        lines += [f"  [yellow]rejected: {shown(reason)}[/yellow]" for reason in recent]
    return lines


def _load(spec_path: Path) -> SessionSpec:
    try:
        return load_spec(spec_path)
    except SpecError as exc:
        console.print(f"[red]{shown(exc)}[/red]", highlight=False)
        raise typer.Exit(2) from None


@app.command()
def start(spec_path: SpecPath) -> None:
    """Start (or resume) every lineage of a session on $TEMPORAL_ADDRESS."""
    spec = _load(spec_path)
    settings = Settings.from_env()

    async def go() -> None:
        client = await connect(settings)
        handles = await start_session(client, spec, settings.task_queue)
        print_instructions(spec, settings, None, await next_cycle(handles[0]))

    asyncio.run(go())


@app.command()
def status(spec_path: SpecPath) -> None:
    """Print each lineage's state (the `state` query)."""
    spec = _load(spec_path)
    settings = Settings.from_env()

    async def go() -> None:
        client = await connect(settings)
        for lineage in spec.lineages:
            handle = client.get_workflow_handle(workflow_id(spec.lineage_id(lineage.label)))
            state = await handle.query(LineageWorkflow.state)
            console.print(json_text(state.model_dump_json()))

    asyncio.run(go())


@app.command()
def inbox(
    session: Annotated[str | None, typer.Option(help="Only this session (its id).")] = None,
    database_url: Annotated[
        str | None, typer.Option(help="Default: $TRAINING_CAMP_DATABASE_URL or the demo's store.")
    ] = None,
) -> None:
    """Outputs awaiting a score, oldest first, across sessions (the review inbox)."""
    settings = Settings.from_env()

    async def go() -> views.Inbox:
        store = Store.open(database_url or settings.database_url)
        try:
            return await views.inbox(await connect(settings), store, session)
        finally:
            store.close()

    found = asyncio.run(go())
    if not found.items:
        console.print("No output awaits a score.")
        return
    table = Table("workflow id", "cycle", "waiting since (UTC)", "question", "output")
    for item in found.items:
        table.add_row(
            shown(workflow_id(item.lineage_id)),
            str(item.cycle),
            f"{item.waiting_since:%Y-%m-%d %H:%M:%S}",
            shown(preview_of(" ".join(item.question.split()), 60)),
            shown(preview_of(" ".join(item.preview.split()), 80)),
        )
    console.print(table)
    first = found.items[0]
    example = json.dumps({"score": 8, "cycle": first.cycle})
    console.print(
        f"Score one: {_cli()} workflow update execute --workflow-id "
        f"{workflow_id(first.lineage_id)} --name submit_score --input {shlex.quote(example)}",
        soft_wrap=True,
        highlight=False,
    )


@app.command()
def output(
    lineage_id: Annotated[
        str, typer.Argument(help="e.g. essay-demo-A, or its workflow id lineage-essay-demo-A")
    ],
    cycle: Annotated[int | None, typer.Option(help="Default: the latest output.")] = None,
    database_url: Annotated[
        str | None, typer.Option(help="Default: $TRAINING_CAMP_DATABASE_URL or the demo's store.")
    ] = None,
) -> None:
    """Print a lineage's whole output — the one awaiting your score, or cycle N's — from the
    store (the `state` query carries a preview only)."""
    store = Store.open(database_url or Settings.from_env().database_url)
    try:
        lineage = store.queries.resolve_lineage(lineage_id)
        outputs = store.queries.artifacts(lineage)
        chosen = [a for a in outputs if cycle is None or a.cycle == cycle]
        if not chosen:
            which = f"for cycle {cycle}" if cycle is not None else "yet"
            console.print(f"[red]{shown(lineage)} has no output {which}[/red]")
            raise typer.Exit(1)
        artifact = chosen[-1]
        text = store.queries.artifact_text(artifact.id)
        question = store.queries.rollout_input(artifact.rollout_id)
        cut_off = any(
            a.id == artifact.attempt_id and a.stop_reason == CUT_OFF
            for a in store.queries.attempts(artifact.rollout_id)
        )
    except KeyError as exc:
        console.print(f"[red]{shown(exc.args[0])}[/red]")
        raise typer.Exit(1) from None
    finally:
        store.close()
    # the question changes every cycle: the output is read against the one it answers
    if question is not None:
        console.print(f"[bold]Question[/bold] (cycle {artifact.cycle}):", highlight=False)
        print(printable(question))
        print()
    console.print(
        f"[bold]{shown(lineage)}[/bold], cycle {artifact.cycle} ({len(text.split())} words"
        + (", cut off at the token limit" if cut_off else "")
        + "):",
        highlight=False,
    )
    print(printable(text))


@app.command()
def blame(
    lineage_id: Annotated[
        str, typer.Argument(help="e.g. essay-demo-A, or its workflow id lineage-essay-demo-A")
    ],
    version: Annotated[int | None, typer.Option(help="Default: the latest version.")] = None,
    database_url: Annotated[
        str | None, typer.Option(help="Default: $TRAINING_CAMP_DATABASE_URL or the demo's store.")
    ] = None,
) -> None:
    """Where each segment of a lineage's prompt came from: version, evolution, feedback."""

    store = Store.open(database_url or Settings.from_env().database_url)
    try:
        rows = store.queries.prompt_provenance(store.queries.resolve_lineage(lineage_id), version)
    except KeyError as exc:
        console.print(f"[red]{shown(exc.args[0])}[/red]")
        raise typer.Exit(1) from None
    finally:
        store.close()
    table = Table("segment", "since", "evolution", "feedback", "reason", show_lines=True)
    for row in rows:
        feedback = (
            f"{row.trigger_score:g}: {row.trigger_comment or ''}"
            if row.trigger_score is not None
            else ""
        )
        table.add_row(
            shown(row.segment),
            f"v{row.version}",
            shown(row.evolution_id or "initial"),
            shown(feedback),
            shown(row.reason),
        )
    console.print(table)


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


@app.command()
def demo(
    spec_path: Annotated[Path, typer.Argument(help="Session spec.")] = Path(
        "examples/essay-session.yaml"
    ),
    data_dir: Annotated[Path, typer.Option(help="Server and store data.")] = Path(".training-camp"),
    port: Annotated[int, typer.Option(help="Temporal frontend port.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Web UI port.")] = 8233,
    review_port: Annotated[int, typer.Option(help="Review inbox port.")] = 8280,
) -> None:
    """Dev server with Web UI + a worker + the review inbox + the session; Ctrl-C (or SIGTERM)
    stops what it started, and so does the dev server stopping."""
    spec = _load(spec_path)

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
    if code:
        raise typer.Exit(code)


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
    inbox = ReviewServer(create_app(client, store), "127.0.0.1", review_port)
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


@app.command()
def review(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8280,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="A host name raters reach the inbox under (repeat for more; default: the "
            "loopback names when listening on 127.0.0.1, any name otherwise, the token "
            "guarding it)."
        ),
    ] = None,
) -> None:
    """The review inbox for raters, on $TEMPORAL_ADDRESS and $TRAINING_CAMP_DATABASE_URL. It
    requires a token (TRAINING_CAMP_REVIEW_TOKEN): raters sign in with it and their name."""
    token = os.environ.get("TRAINING_CAMP_REVIEW_TOKEN")
    if not token or len(token) < 16:
        console.print(
            "[red]set TRAINING_CAMP_REVIEW_TOKEN (16 characters or more, e.g. `openssl rand "
            "-base64 24`): raters sign in with it[/red]"
        )
        raise typer.Exit(2)
    settings = Settings.from_env()

    async def go() -> None:
        store = Store.open(settings.database_url)
        client = await connect(settings)
        hosts = tuple(allowed_host) if allowed_host else None
        if hosts is None and host in ("127.0.0.1", "localhost", "::1"):
            hosts = LOOPBACK_HOSTS
        server = ReviewServer(
            create_app(client, store, token=token, allowed_hosts=hosts), host, port
        )
        await server.start()
        console.print(f"Review inbox on {server.url} (Ctrl-C to stop)")
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()
            store.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(go())


def main() -> None:
    command_line.run(app)


if __name__ == "__main__":
    main()
