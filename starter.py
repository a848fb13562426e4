"""The `training-camp` command: start a session from a spec file, watch it, score and correct
from the command line, branch a lineage and promote a champion, or run the demo
(`training-camp --help` lists every command)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import lazy_loader as lazy
import typer
from temporalio.service import RPCError, RPCStatusCode

from client import (
    agent_blame,
    branch_lineage,
    champion_spec,
    connect,
    correct_reading,
    last_reading,
    lineage_output,
    lineage_trace,
    next_cycle,
    preview_on_worker,
    promote_lineage,
    start_session,
    submit_score,
    workflow_id,
)
from domain import want_labels
from domain import wants as structured
from domain.reading_preview import LineagePreview
from domain.settings import Settings
from services import command_line
from services.reading_prompt import (
    confirm,
    payload_wants,
    print_plan,
    print_reading,
    taken_as_read,
)
from services.terminal import console as make_console
from services.terminal import json_text, printable, shown

# What other commands need loads on first use: `score` and `read` print a reading without
# loading the lineage workflow, the store, the review app or the demo (seconds, together)
spec_files = lazy.load("domain.spec", suppress_warning=True)
instructions = lazy.load("services.instructions", suppress_warning=True)
views = lazy.load("review.views", suppress_warning=True)
inbox_table = lazy.load("review.inbox_table", suppress_warning=True)
review_app = lazy.load("review.serve", suppress_warning=True)
demo_session = lazy.load("demo.session", suppress_warning=True)
stores = lazy.load("store", suppress_warning=True)
words = lazy.load("domain.words", suppress_warning=True)
lineage_workflow = lazy.load("workflows.lineage", suppress_warning=True)

if TYPE_CHECKING:
    from domain.spec import SessionSpec
    from domain.trace import TracedAttempt

console = make_console()
BLAME_TABLE_COLUMNS = 120  # narrower, `blame` prints a block a part instead of its table
SpecPath = Annotated[Path, typer.Argument(help="Session spec (YAML or JSON).")]
LineageArg = Annotated[
    str, typer.Argument(help="e.g. essay-demo-A, or its workflow id lineage-essay-demo-A")
]
DatabaseUrl = Annotated[
    str | None, typer.Option(help="Default: $TRAINING_CAMP_DATABASE_URL or the demo's store.")
]
app = typer.Typer(
    add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_show_locals=False
)


def _load(spec_path: Path) -> SessionSpec:

    try:
        return spec_files.load_spec(spec_path)
    except spec_files.SpecError as exc:
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
        instructions.print_instructions(spec, settings, None, await next_cycle(handles[0]))

    asyncio.run(go())


@app.command()
def status(
    target: Annotated[
        str,
        typer.Argument(
            help="A session spec (YAML or JSON): each of its lineages; or a lineage, e.g. "
            "essay-demo-A or lineage-essay-demo-A."
        ),
    ],
) -> None:
    """Print a lineage's state, or each lineage's of a session spec (the `state` query)."""

    if Path(target).is_file():
        spec = _load(Path(target))
        lineages = [spec.lineage_id(lineage.label) for lineage in spec.lineages]
    else:
        lineages = [target.removeprefix("lineage-")]
    settings = Settings.from_env()

    async def go() -> None:
        client = await connect(settings)
        for lineage in lineages:
            handle = client.get_workflow_handle(workflow_id(lineage))
            try:
                state = await handle.query(lineage_workflow.LineageWorkflow.state)
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                console.print(
                    f"[red]no lineage {shown(lineage)} on this Temporal server: give its id "
                    "(training-camp inbox lists them) or the session's spec file[/red]",
                    highlight=False,
                )
                raise typer.Exit(1) from None
            # never wrapped at the terminal's width: a line break inside a string is not JSON
            console.print(json_text(state.model_dump_json()), soft_wrap=True)

    asyncio.run(go())


@app.command()
def inbox(
    session: Annotated[str | None, typer.Option(help="Only this session (its id).")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Outputs awaiting a score, oldest first, across sessions (the review inbox)."""

    settings = Settings.from_env()

    async def go() -> views.Inbox:
        store = stores.Store.open(database_url or settings.database_url)
        try:
            return await views.inbox(await connect(settings), store, session)
        finally:
            store.close()

    inbox_table.print_inbox(asyncio.run(go()))


@app.command()
def output(
    lineage_id: LineageArg,
    cycle: Annotated[int | None, typer.Option(help="Default: the latest output.")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Print a lineage's whole output — the one awaiting your score, or cycle N's — from the
    store (the `state` query carries a preview only)."""

    lineage, found = _found(lineage_output, lineage_id, cycle, database_url, "has no output")
    _question(found.question, found.cycle)
    console.print(
        f"[bold]{shown(lineage)}[/bold], cycle {found.cycle} ({words.words_of(found.text)} words"
        + (", cut off at the token limit" if found.cut_off else "")
        + "):",
        highlight=False,
    )
    print(printable(found.text))
    if found.checks is not None:  # what the reviewer asked for, honoured or not
        console.print(f"\n[bold]Checks[/bold]: {shown(found.checks.line())}", highlight=False)
    # what a score names to land on this output (and on no re-run of its cycle)
    console.print(f"\noutput id: {shown(found.output_id)}", highlight=False)
    reading = None if cycle else asyncio.run(last_reading(Settings.from_env(), lineage))
    if reading:  # said back; a misreading is corrected before the next score
        console.print(f"\n{shown(reading)} (misread? `training-camp correct {shown(lineage)}`)")


def _found(
    lookup: Any, lineage_id: str, cycle: int | None, database_url: str | None, none: str
) -> tuple[str, Any]:
    """(lineage, what ``lookup`` found in the store for it), or exit 1 saying what is missing
    ("essay-demo-A has no output in cycle 3")."""
    store = stores.Store.open(database_url or Settings.from_env().database_url)
    try:
        lineage, found = lookup(store, lineage_id, cycle)
    except KeyError as exc:
        console.print(f"[red]{shown(exc.args[0])}[/red]")
        raise typer.Exit(1) from None
    finally:
        store.close()
    if found is None:
        which = f"in cycle {cycle}" if cycle is not None else "yet"
        console.print(f"[red]{shown(lineage)} {none} {which}[/red]")
        raise typer.Exit(1)
    return lineage, found


def _question(question: str | None, cycle: int) -> None:
    """The question a cycle answered (it changes every cycle: an output is read against it)."""
    if question is not None:
        console.print(f"[bold]Question[/bold] (cycle {cycle}):", highlight=False)
        print(printable(question))
        print()


@app.command()
def trace(
    lineage_id: LineageArg,
    cycle: Annotated[int | None, typer.Option(help="Default: the latest output's run.")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Print how an output was made: each flow step with its model calls and tool calls — the
    tool, its arguments, what came back (cut short) and how long it took — from the store."""
    lineage, found = _found(lineage_trace, lineage_id, cycle, database_url, "has run nothing")
    _question(found.question, found.cycle)
    console.print(
        f"[bold]{shown(lineage)}[/bold], cycle {found.cycle}: {found.trace.summary()} "
        f"(output id: {shown(found.trace.rollout_id)})",
        highlight=False,
    )
    several = len(found.trace.attempts) > 1
    for attempt in found.trace.attempts:
        _print_attempt(attempt, several)


def _print_attempt(attempt: TracedAttempt, labelled: bool) -> None:
    """One attempt's steps and calls; labelled when the cycle ran more than one."""
    if labelled or attempt.status != "succeeded":
        said = "the output shown" if attempt.shown else attempt.status
        if attempt.error:
            said += f": {attempt.error}"
        console.print(f"\n[bold]{attempt.label}[/bold] ({shown(said)})", highlight=False)
    if not attempt.steps:
        console.print("  no calls recorded", highlight=False)
    for step in attempt.steps:
        console.print(f"\n[bold]step {shown(step.name)}[/bold]", highlight=False)
        if step.given:  # the flow's edges into the step: what its prompt was given
            console.print(f"  given: {shown(', '.join(step.given))}", highlight=False)
        for call in step.calls:
            took = [f"{call.duration_ms} ms"] + ([call.tokens] if call.tokens else [])
            asked = f" {shown(call.arguments)}" if call.arguments is not None else ""
            console.print(
                f"  {call.number}. {call.kind} [bold]{shown(call.name)}[/bold]{asked} "
                f"({', '.join(took)})",
                highlight=False,
            )
            mark = "[red]✗ error:[/red]" if call.error else "→"
            console.print(f"     {mark} {shown(call.result)}", highlight=False, soft_wrap=True)


# The families a wish names, in the words the review page uses: in `score`, `read` and
# `correct`'s help (\b keeps Click from re-wrapping the list)
FAMILIES_HELP = (
    "A wish is [ACTION:]FAMILY[:AMOUNT]: the action add (the default), more, less, remove or "
    "keep; the amount half, third, quarter, two-thirds or a number (a word limit for "
    "shorter, a count otherwise).\n\n\b\nFamilies:\n"
    + "\n".join(f"  {family:17} {words}" for family, words in want_labels.glossary())
)
ScoreValue = Annotated[float, typer.Argument(metavar="SCORE", help="From 0 to 10.")]
Rater = Annotated[str | None, typer.Option(help="Your name: the score is recorded under it.")]
Chooser = Annotated[str | None, typer.Option("--rater", help="Your name: recorded with it.")]


def _read_output(previewed: LineagePreview, cycle: int | None) -> dict[str, object]:
    """What pins a score to the output its rater read: the cycle they name, or the output the
    reading was shown against (refused, not misapplied, once another awaits a score)."""
    if previewed.status == "awaiting_score" and cycle in (None, previewed.cycle):
        named = {"cycle": previewed.cycle}
        return named | ({"output_id": previewed.output_id} if previewed.output_id else {})
    return {} if cycle is None else {"cycle": cycle}


def _scoring(previewed: LineagePreview) -> str:
    """Which output a score lands on, said before anything is asked or sent."""
    if previewed.status == "awaiting_score":
        return f"Scoring cycle {previewed.cycle}'s output ({shown(previewed.output_id or '')})"
    return (
        f"No output awaits a score now ({previewed.status}): this score is for the next "
        "output, once it shows"
    )


@app.command(
    help="Score the output awaiting a score: your comment's reading and every change the "
    "lineage's step would make are shown first; on a terminal you take them, edit them (drop "
    "wishes, add them as `correct` does, drop a change: 'drop c2') or cancel; with --yes, or "
    "no terminal, they are taken as shown. The step then makes exactly the changes taken."
    "\n\n" + FAMILIES_HELP
)
def score(
    lineage_id: LineageArg,
    value: ScoreValue,
    comment: Annotated[str | None, typer.Argument(help="What to keep, what to change.")] = None,
    rater: Rater = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Take the reading as read.")] = False,
    cycle: Annotated[
        int | None,
        typer.Option(
            help="The cycle whose output you read (`training-camp output` shows it): the "
            "score is refused, not moved on, when another output awaits one by then."
        ),
    ] = None,
) -> None:

    settings = Settings.from_env()
    if not 0 <= value <= 10:
        console.print(f"[red]score: {value:g} is not from 0 to 10[/red]", highlight=False)
        raise typer.Exit(2)
    ask = None if yes or not sys.stdin.isatty() else _ask

    async def go() -> int:
        client = await connect(settings)
        # read by the lineage's worker, as its step would read it
        previewed = await preview_on_worker(client, lineage_id, value, comment, rater=rater)
        read = previewed  # the output the rater read: the score is pinned to it, not moved on
        seen = previewed.reading
        console.print(_scoring(previewed), highlight=False)
        print_reading(console, seen)
        taken = taken_as_read(seen)
        while ask is not None:
            chosen = confirm(console, seen, ask, seen.undo_to)
            if chosen is None:
                console.print("Cancelled: nothing sent.")
                return 1
            if not chosen.replan:
                taken = chosen
                break
            # the wishes edited: the step's plan for them, shown and asked about again
            previewed = await preview_on_worker(
                client, lineage_id, value, comment, chosen.wants, rater
            )
            seen = previewed.reading
            if (previewed.cycle, previewed.output_id) != (read.cycle, read.output_id):
                console.print(
                    f"[yellow]The output you read (cycle {read.cycle}) is no longer the one "
                    "awaiting scores: a score for it will be refused[/yellow]",
                    highlight=False,
                )
            print_plan(console, seen)
        payload: dict[str, object] = {"score": value}
        if comment:
            payload["comment"] = comment
        if rater:
            payload["rater"] = rater
        payload |= _read_output(read, cycle)
        sent_wants = payload_wants(seen, taken, comment)
        if sent_wants is not None:
            payload["wants"] = sent_wants
        if taken.changes is not None:
            # the plan confirmed: the step makes these changes and no other
            payload["changes"] = taken.changes
        try:
            accepted = await submit_score(client, previewed.lineage_id, payload)
        except ValueError as exc:
            console.print(f"[red]refused: {shown(exc)}[/red]", highlight=False)
            return 1
        said = f". {accepted.reading}" if accepted.reading else ""
        console.print(f"{accepted.said()}{shown(said)}", highlight=False)
        return 0

    try:
        code = asyncio.run(go())
    except (KeyError, TimeoutError) as exc:
        console.print(f"[red]{shown(exc.args[0])}[/red]")
        raise typer.Exit(1) from None
    if code:
        raise typer.Exit(code)


@app.command(
    help="How a comment would be read for a lineage now, as its step would act on it, without "
    "sending anything (from 8, a comment that asks for nothing is praise).\n\n" + FAMILIES_HELP
)
def read(
    comment: Annotated[str, typer.Argument(help="The comment to read.")],
    lineage: Annotated[str, typer.Option(help="The lineage whose reading to preview.")],
    score: Annotated[float, typer.Option(help="The score it comes with.", min=0, max=10)] = 5,
) -> None:

    async def go() -> None:
        client = await connect(Settings.from_env())
        print_reading(console, (await preview_on_worker(client, lineage, score, comment)).reading)

    try:
        asyncio.run(go())
    except (KeyError, TimeoutError) as exc:
        console.print(f"[red]{shown(exc.args[0])}[/red]")
        raise typer.Exit(1) from None


def _ask(question: str) -> str:
    try:
        return console.input(shown(question))
    except EOFError:
        return "c"


@app.command(
    help="Correct how your last comment on a lineage was read (each option repeats; none: it "
    "asked for nothing). The change is made again from the version before it, and a misread "
    "version's output awaiting your score is produced again.\n\n" + FAMILIES_HELP
)
def correct(
    lineage_id: LineageArg,
    rater: Annotated[str, typer.Option(help="Your name: the correction is recorded under it.")],
    want: Annotated[list[str], typer.Option(help="A wish you meant: warmer, less:formal.")] = [],  # noqa: B006
    remove: Annotated[list[str], typer.Option(help="A family to take out: example.")] = [],  # noqa: B006
    amount: Annotated[list[str], typer.Option(help="FAMILY=AMOUNT: length=half.")] = [],  # noqa: B006
    evaluation_id: Annotated[
        str | None,
        typer.Option(help="The score corrected (state: score_history). Default: the latest."),
    ] = None,
) -> None:

    try:
        wants = structured.from_options(want, remove, amount)
        done = asyncio.run(
            correct_reading(Settings.from_env(), lineage_id, wants, rater, evaluation_id)
        )
    except ValueError as exc:
        console.print(f"[red]{shown(exc)}[/red]", highlight=False)
        raise typer.Exit(1) from None
    console.print(shown(done.reading), highlight=False)
    console.print(shown(done.outcome()), highlight=False)


@app.command()
def blame(
    lineage_id: LineageArg,
    version: Annotated[int | None, typer.Option(help="Default: the latest version.")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Where each part of a lineage's agent came from: each instruction of its prompt, each
    parameter, tool description, flow step and edge (a step given an earlier step's output),
    with the version, evolution, feedback and wish that made it."""

    store = stores.Store.open(database_url or Settings.from_env().database_url)
    try:
        rows = agent_blame(store, lineage_id, version)
    except KeyError as exc:
        console.print(f"[red]{shown(exc.args[0])}[/red]")
        raise typer.Exit(1) from None
    finally:
        store.close()
    from rich.padding import Padding  # this command's alone: the others start without it
    from rich.table import Table

    said = []
    for row in rows:
        feedback = (
            f"{row.trigger_score:g}: {row.trigger_comment or ''}"
            if row.trigger_score is not None
            else ""
        )
        since = row.since + (f", rebuilt from v{b}" if (b := row.rebuilt_from) else "")
        part = row.part if row.name is None else f"{row.part} {row.name}"
        said.append((part, row.segment, since, row.evolution_id or "initial", feedback, row))
    if console.width < BLAME_TABLE_COLUMNS:
        # seven columns at this width would wrap a word a line: one block a part instead
        for part, segment, since, evolution, feedback, row in said:
            console.print(f"[bold]{shown(part)}[/bold] · {shown(since)} · {shown(evolution)}")
            lines = [shown(segment)]
            lines += [f"feedback: {shown(feedback)}"] if feedback else []
            lines += [f"wish: {shown(row.wish)}"] if row.wish else []
            lines.append(f"reason: {shown(want_labels.reason_words(row.reason))}")
            for line in lines:
                console.print(Padding(line, (0, 0, 0, 2), expand=False), highlight=False)
            console.print()
        return
    table = Table("part", "segment", "since", "evolution", "feedback", "wish", "reason")
    table.show_lines = True
    for part, segment, since, evolution, feedback, row in said:
        table.add_row(
            shown(part),
            shown(segment),
            since,
            shown(evolution),
            shown(feedback),
            shown(row.wish or ""),
            shown(want_labels.reason_words(row.reason)),
        )
    console.print(table)


@app.command()
def branch(
    lineage_id: LineageArg,
    from_version: Annotated[
        str, typer.Option("--from", metavar="vN", help="The version to start from: v3 (or 3).")
    ],
    label: Annotated[
        str | None, typer.Option(help="The new lineage's label. Default: the next free letter.")
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="Refuse unless the lineage is of this session.")
    ] = None,
    rater: Chooser = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Start a new lineage in the same session from a version of a lineage: its prompt,
    parameters, tools, flow, constraints and standing wishes. It evolves on its own."""

    version = _version(from_version, "--from")
    settings = Settings.from_env()

    async def go() -> None:
        store = stores.Store.open(database_url or settings.database_url)
        try:
            made = await branch_lineage(
                await connect(settings), store, lineage_id, version, label, session, rater
            )
        finally:
            store.close()
        console.print(
            f"[bold]{shown(made.label)}[/bold] ({shown(made.lineage_id)}) started from "
            f"{shown(made.parent_lineage_id)} v{made.parent_version}: workflow "
            f"{shown(made.handle.id)}",
            highlight=False,
        )
        console.print(
            f'Score its first output: training-camp score {shown(made.lineage_id)} SCORE "COMMENT"',
            highlight=False,
        )

    _run_or_exit(go())


@app.command()
def promote(
    lineage_id: LineageArg,
    version: Annotated[
        str | None,
        typer.Option(metavar="vN", help="The champion version (default: the one it runs)."),
    ] = None,
    stop_others: Annotated[
        bool, typer.Option("--stop-others", help="Stop the session's other lineages.")
    ] = False,
    reason: Annotated[str | None, typer.Option(help="Why it wins.")] = None,
    rater: Chooser = None,
) -> None:
    """Mark the session's champion: the lineage at a version, locked (it stops evolving), its
    competitors' latest scores recorded and its outputs preferred to theirs on the same
    inputs (preference pairs in the export). `unlock` lets it evolve again."""

    chosen = _version(version, "--version") if version is not None else None

    async def go() -> None:
        promoted, stopped = await promote_lineage(
            await connect(Settings.from_env()), lineage_id, chosen, reason, rater, stop_others
        )
        locked = "locked" if promoted.newly_locked else "locked already"
        console.print(
            f"[bold]{shown(promoted.lineage_id)} v{promoted.version}[/bold] is the session's "
            f"champion ({locked})",
            highlight=False,
        )
        for rival, score in sorted(promoted.competitor_scores.items()):
            said = f"latest score {score:g}" if score is not None else "not scored yet"
            ended = ", stopped" if rival in stopped else ""
            console.print(f"  over {shown(rival)}: {said}{ended}", highlight=False)

    _run_or_exit(go())


@app.command()
def champion(
    session_id: Annotated[str, typer.Argument(help="The session (its id).")],
    new_id: Annotated[
        str | None,
        typer.Option("--id", help="The new session's id. Default: SESSION-champion."),
    ] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Print a session spec of the champion: the session's inputs, with the champion's version
    as its one lineage (`training-camp start` takes it)."""

    store = stores.Store.open(database_url or Settings.from_env().database_url)
    try:
        text = champion_spec(store, session_id, new_id)
    except KeyError as exc:
        console.print(f"[red]{shown(exc.args[0])}[/red]", highlight=False)
        raise typer.Exit(1) from None
    except spec_files.SpecError as exc:
        console.print(f"[red]{shown(exc)}[/red]", highlight=False)
        raise typer.Exit(1) from None
    finally:
        store.close()
    print(text, end="")


def _version(given: str, option: str) -> int:
    """``v3`` or ``3`` as a version number; anything else is one line and exit code 2."""
    digits = given.strip().lower().removeprefix("v")
    if not digits.isdigit() or int(digits) < 1:
        console.print(
            f"[red]{option}: {shown(repr(given))} is not a version (v1, v2, …)[/red]",
            highlight=False,
        )
        raise typer.Exit(2)
    return int(digits)


def _run_or_exit(work: Any) -> None:
    """Run a command's coroutine; a refusal (ValueError) or an unknown lineage (KeyError) is
    one red line and exit code 1."""
    try:
        asyncio.run(work)
    except ValueError as exc:
        console.print(f"[red]refused: {shown(exc)}[/red]", highlight=False)
        raise typer.Exit(1) from None
    except KeyError as exc:
        console.print(f"[red]{shown(exc.args[0])}[/red]", highlight=False)
        raise typer.Exit(1) from None


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
    code = demo_session.run_demo(
        spec, data_dir, port=port, ui_port=ui_port, review_port=review_port
    )
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

    try:
        token = review_app.review_token()
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(review_app.serve(Settings.from_env(), host, port, token, allowed_host))


def main() -> None:
    command_line.run(app)


if __name__ == "__main__":
    main()
