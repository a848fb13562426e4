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
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from client import connect, lineage_output, next_cycle, prompt_blame, start_session, workflow_id
from demo.session import run_demo
from domain.execution import preview_of
from domain.settings import Settings
from domain.spec import SessionSpec, SpecError, load_spec
from review import views
from review.serve import serve
from services import command_line
from services.instructions import print_instructions, temporal_cli
from services.terminal import console as make_console
from services.terminal import json_text, printable, shown
from store import Store
from workflows.lineage import LineageWorkflow

console = make_console()
SpecPath = Annotated[Path, typer.Argument(help="Session spec (YAML or JSON).")]
app = typer.Typer(
    add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_show_locals=False
)


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
        f"Score one: {temporal_cli()} workflow update execute --workflow-id "
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
        lineage, found = lineage_output(store, lineage_id, cycle)
    except KeyError as exc:
        console.print(f"[red]{shown(exc.args[0])}[/red]")
        raise typer.Exit(1) from None
    finally:
        store.close()
    if found is None:
        which = f"for cycle {cycle}" if cycle is not None else "yet"
        console.print(f"[red]{shown(lineage)} has no output {which}[/red]")
        raise typer.Exit(1)
    # the question changes every cycle: the output is read against the one it answers
    if found.question is not None:
        console.print(f"[bold]Question[/bold] (cycle {found.cycle}):", highlight=False)
        print(printable(found.question))
        print()
    console.print(
        f"[bold]{shown(lineage)}[/bold], cycle {found.cycle} ({len(found.text.split())} words"
        + (", cut off at the token limit" if found.cut_off else "")
        + "):",
        highlight=False,
    )
    print(printable(found.text))


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
        rows = prompt_blame(store, lineage_id, version)
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
    code = run_demo(spec, data_dir, port=port, ui_port=ui_port, review_port=review_port)
    if code:
        raise typer.Exit(code)


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
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(Settings.from_env(), host, port, token, allowed_host))


def main() -> None:
    command_line.run(app)


if __name__ == "__main__":
    main()
