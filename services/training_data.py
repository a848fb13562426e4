"""Training data from the event log: materialize, export, rebuild, time travel, report.

training-camp-data export trl-sft --out exports/ --min-score 8
training-camp-data verify             # the log's chain, and the projections against it
training-camp-data rebuild            # drop projections, replay the log, verify
training-camp-data as-of essay-demo-A --position 120
training-camp-data history essay-demo-A
training-camp-data report essay-demo --out report/
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from client import session_versions
from domain.selection import MIN_SCORED_CYCLES, FrontRow
from domain.settings import Settings
from services import command_line
from services.rater_agreement import RaterAgreement, session_agreement
from services.terminal import console as make_console
from services.terminal import json_text, shown
from store import Store
from store.backends.database import write_transaction
from store.backends.migrate import current_revision
from store.eventstore import event_log
from store.eventstore.chain_keys import ChainKeyError, ChainKeys, key_id
from store.exports.exporter import CORRECTIONS, FORMATS, ExportFilters, FormatError, export
from store.exports.materializer import SFT_MIN_SCORE, Materializer
from store.views.time_travel import as_of, check_projections, history, rebuild_and_verify

console = make_console()
app = typer.Typer(
    add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_show_locals=False
)
DatabaseUrl = Annotated[
    str | None, typer.Option(help="Default: $TRAINING_CAMP_DATABASE_URL or the demo's store.")
]


def _store(url: str | None) -> Store:
    try:
        return Store.open(url or Settings.from_env().database_url)
    except ChainKeyError as exc:
        console.print(f"[red]{shown(exc)}[/red]")
        raise typer.Exit(2) from None


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _ms(value: str | None, option: str) -> int | None:
    """Milliseconds since the epoch of an ISO 8601 date or time given as ``option`` (UTC unless
    it says otherwise); anything else is one line and exit code 1."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        why = "" if "Invalid isoformat" in str(exc) else f" ({exc})"
        make_console(stderr=True).print(
            f"[red]error:[/red] {option} {shown(repr(value))} is not a date{shown(why)}; give an "
            "ISO 8601 date or time, e.g. 2026-11-01, 2026-11-01T14:30 or "
            "2026-11-01T14:30+01:00 (UTC unless an offset is given)",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@app.command()
def migrate(database_url: DatabaseUrl = None) -> None:
    """Bring the database schema to the current revision (run before new workers)."""
    store = _store(database_url)  # opening the store migrates it
    console.print(f"schema at revision {current_revision(store.engine)}")


@app.command()
def verify(
    database_url: DatabaseUrl = None,
    expect_at_least: Annotated[
        int,
        typer.Option(
            help="The head position recorded from an earlier verify: a log that ends before it "
            "was cut back or wiped (with its head) outside the store."
        ),
    ] = 0,
) -> None:
    """Check the event log's hash chain (signed with TRAINING_CAMP_CHAIN_KEY when set), every
    stored payload against its hash, and the projections against a replay of the log: finds
    edited, removed or inserted events, edited outputs, and edited rows (writers wait while the
    log replays; the projections are left untouched)."""
    store = _store(database_url)
    with store.engine.connect() as conn, console.status("verifying the event log…"):
        report = event_log.verify(conn, store.keys)
    problems = list(report.problems)
    if report.head_position < expect_at_least:
        problems.append(
            f"the log ends at event {report.head_position}, before the {expect_at_least} "
            "recorded earlier: it was cut back or wiped outside the store"
        )
    for problem in problems:
        console.print(f"[red]{shown(problem)}[/red]")
    signed = "signed, " if store.keys.keyed else ""
    if not problems:
        console.print(f"[green]event log intact[/green] ({signed}{report.events:,} events)")
        console.print(
            f"head: event {report.head_position}, seal {report.head_seal or '(none)'} — record "
            "it elsewhere; `verify --expect-at-least` with it catches a later rollback or wipe"
        )
    try:
        with console.status("replaying the event log against the projections…"):
            replay = check_projections(store.engine)
    except (KeyError, TypeError, ValueError) as error:
        # an edited row may not replay at all (a payload that is not its type's): said, not
        # a traceback
        said = shown(f"{type(error).__name__}: {error}")
        console.print(f"[red]projections not checked: the log does not replay ({said})[/red]")
        raise typer.Exit(1) from None
    edited = [name for name, (_, same) in replay.tables.items() if not same]
    for name in edited:
        console.print(f"[red]{name}: its rows differ from a replay of the event log[/red]")
    if not edited:
        console.print(f"[green]projections match the log[/green] ({len(replay.tables)} tables)")
    if problems or edited:
        raise typer.Exit(1)


@app.command()
def rekey(database_url: DatabaseUrl = None) -> None:
    """Sign the whole event log with the current chain key (TRAINING_CAMP_CHAIN_KEY): once after
    setting a key on an existing store, and after a rotation so the old key can go. The log
    must verify first, with the keys it was signed with (TRAINING_CAMP_CHAIN_OLD_KEYS)."""
    store = _store(database_url)
    if not store.keys.keyed:
        console.print("[red]no chain key: set TRAINING_CAMP_CHAIN_KEY (or _FILE)[/red]")
        raise typer.Exit(2)
    # every key given, none required: events not signed yet pass too
    lenient = ChainKeys(old=(store.keys.current, *store.keys.old))
    with write_transaction(store.engine) as conn:
        report = event_log.verify(conn, lenient)
        if not report.ok:
            for problem in report.problems:
                console.print(f"[red]{shown(problem)}[/red]")
            console.print("[red]not re-signed: the log does not verify as it stands[/red]")
            raise typer.Exit(1)
        count = event_log.resign(conn, store.keys)
    console.print(f"[green]signed[/green] {count:,} events with key {key_id(store.keys.current)}")


@app.command()
def materialize(
    full: Annotated[bool, typer.Option(help="Rebuild from the first event.")] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Turn new events into SFT examples, preference pairs and reward rows."""
    store = _store(database_url)
    with _progress() as bar:
        task = bar.add_task("materializing events", total=None)
        result = Materializer(store.engine).run(
            full=full, progress=lambda done, total: bar.update(task, completed=done, total=total)
        )
    console.print(
        f"events {result.from_position:,}→{result.to_position:,}: "
        f"{result.events_processed:,} relevant, {result.examples_added:,} examples added"
    )


def _why_empty(kind: str, counts: dict[str, int], eval_fraction: float) -> list[str]:
    """Why an export wrote no rows, and what to do, in the user's terms."""
    if not any(counts.values()):
        return [
            {
                "sft": f"no SFT examples yet: they come from outputs scored {SFT_MIN_SCORE:g} or "
                "more (score a few that high; --min-score can only raise the bar)",
                "preference": "no preference pairs yet: a pair needs two scored outputs of the "
                "same input (a later cycle, or another lineage) with different scores, or a lock",
                "reward": "no reward rows yet: every scored output is one; score some outputs",
                CORRECTIONS: "no corrections yet: they come from `training-camp correct`",
            }.get(kind, "no rows: nothing in the store matches the filters given")
        ]
    if "eval" in counts and counts["eval"] == 0 and eval_fraction > 0:
        return [
            f"eval: no rows. The split holds out about {eval_fraction:.0%} of inputs by their "
            "hash, so with few inputs none may fall in it: raise --eval-fraction, or add inputs"
        ]
    return []


@app.command("export")
def export_command(
    format_name: Annotated[
        str, typer.Argument(metavar="FORMAT", help=", ".join([*FORMATS, CORRECTIONS]))
    ],
    out: Annotated[Path, typer.Option(help="Directory for the files.")] = Path("exports"),
    min_score: Annotated[float | None, typer.Option()] = None,
    min_score_delta: Annotated[float | None, typer.Option()] = None,
    session: Annotated[str | None, typer.Option()] = None,
    lineage: Annotated[str | None, typer.Option()] = None,
    since: Annotated[str | None, typer.Option(help="ISO time, e.g. 2026-11-01")] = None,
    until: Annotated[str | None, typer.Option(help="ISO time")] = None,
    eval_fraction: Annotated[float, typer.Option(help="Share of inputs held out.")] = 0.1,
    skip_invalid: Annotated[bool, typer.Option(help="Skip rows that break the format.")] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Write a train/eval split in FORMAT; every export is recorded in the store."""
    if format_name not in FORMATS and format_name != CORRECTIONS:
        console.print(
            f"[red]unknown format {shown(repr(format_name))}; choose from "
            f"{', '.join([*FORMATS, CORRECTIONS])}"
        )
        raise typer.Exit(2)
    filters = ExportFilters(
        min_score=min_score,
        min_score_delta=min_score_delta,
        session_id=session,
        lineage_id=lineage,
        since_ms=_ms(since, "--since"),
        until_ms=_ms(until, "--until"),
        eval_fraction=eval_fraction,
    )
    store = _store(database_url)
    with _progress() as bar:
        task = bar.add_task(f"exporting {format_name}", total=None)
        try:
            result = export(
                store.engine,
                format_name,
                out,
                filters,
                strict=not skip_invalid,
                progress=lambda n: bar.update(task, completed=n),
            )
        except FormatError as exc:
            console.print(f"[red]{shown(exc)}[/red] (use --skip-invalid to leave such rows out)")
            raise typer.Exit(1) from None
    for split, path in result.files.items():
        console.print(f"{split}: {result.counts[split]:,} rows → {shown(path)}")
    kind = CORRECTIONS if format_name == CORRECTIONS else FORMATS[format_name].example_type
    for line in _why_empty(kind, result.counts, eval_fraction):
        console.print(f"[yellow]{line}[/yellow]")
    if result.skipped_invalid:
        console.print(f"[yellow]{result.skipped_invalid} invalid rows skipped[/yellow]")
    console.print(f"export {result.export_id} (events up to {result.event_range[1]:,})")


@app.command()
def rebuild(
    database_url: DatabaseUrl = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Keep the rebuilt projections even where they differ from before."
        ),
    ] = False,
) -> None:
    """Drop every projection and replay the event log into new ones. Where they differ from the
    stored ones, nothing is kept (exit 1) unless --force: the stored rows were edited, or the
    replay is not what wrote them; `verify` says which. A log that fails its own checks is not
    replayed."""
    store = _store(database_url)
    with store.engine.connect() as conn, console.status("verifying the event log…"):
        checked = event_log.verify(conn, store.keys)
    if not checked.ok:
        for problem in checked.problems:
            console.print(f"[red]{shown(problem)}[/red]")
        console.print("[red]the event log fails its checks: nothing was rebuilt[/red]")
        raise typer.Exit(1)
    with console.status("replaying the event log…"):
        report = rebuild_and_verify(store.engine, keep_if_different=force)
    table = Table("projection", "rows", "identical")
    for name, (rows, same) in report.tables.items():
        table.add_row(name, f"{rows:,}", "yes" if same else "[red]NO[/red]")
    console.print(table)
    console.print(f"{report.events_replayed:,} events replayed")
    if not report.identical and not force:
        console.print(
            "[red]the replay differs from the stored projections: nothing was kept[/red] "
            "(rebuild --force keeps the replay)"
        )
        raise typer.Exit(1)


LineageName = Annotated[
    str, typer.Argument(help="e.g. essay-demo-A, or its workflow id lineage-essay-demo-A")
]


def _lineage(store: Store, name: str) -> str:
    try:
        return store.queries.resolve_lineage(name)
    except KeyError as exc:
        console.print(f"[red]{shown(exc.args[0])}[/red]")
        raise typer.Exit(1) from None


@app.command("as-of")
def as_of_command(
    lineage_id: LineageName,
    position: Annotated[int | None, typer.Option(help="Event position.")] = None,
    at: Annotated[str | None, typer.Option(help="ISO time.")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """The lineage's agent definition and scores as they stood at an event or a moment."""
    at_ms = _ms(at, "--at")
    store = _store(database_url)
    lineage_id = _lineage(store, lineage_id)
    state = as_of(store.engine, lineage_id, position=position, at_ms=at_ms)
    if state.version is None:
        console.print(f"[red]lineage {shown(lineage_id)} had no agent by then[/red]")
        raise typer.Exit(1)
    console.print(
        f"[bold]{shown(lineage_id)}[/bold] as of event {state.position:,}: v{state.version}"
    )
    console.print(  # never wrapped: a line break inside a string is not JSON
        json_text(state.definition.model_dump_json(by_alias=True) if state.definition else "{}"),
        soft_wrap=True,
    )
    for s in state.scores:
        console.print(f"  cycle {s.cycle}: {s.score:g} {shown(s.comment or '')}", highlight=False)


@app.command("history")
def history_command(lineage_id: LineageName, database_url: DatabaseUrl = None) -> None:
    """The lineage's events in order (use a position with as-of)."""
    store = _store(database_url)
    table = Table("position", "time", "event", "summary")
    for entry in history(store.engine, _lineage(store, lineage_id)):
        when = datetime.fromtimestamp(entry.timestamp / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(str(entry.position), when, shown(entry.event_type), shown(entry.summary))
    console.print(table)


@app.command()
def report(
    session_id: str,
    out: Annotated[Path, typer.Option(help="Directory for scores.png and index.html.")] = Path(
        "report"
    ),
    database_url: DatabaseUrl = None,
) -> None:
    """Score curves per lineage over cycles, and the front: every version's mean score over
    its scored cycles against the share of standing checks it passed (a PNG each and a small
    HTML page; the versions table is printed too). With several raters, their agreement:
    Krippendorff's alpha on the scores, and the wishes in dispute with who said what."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    store = _store(database_url)
    lineages = store.queries.session_lineages(session_id)
    if not lineages:
        console.print(f"[red]no session {shown(repr(session_id))} in the store[/red]")
        raise typer.Exit(1)
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    rows = []
    for lineage in lineages:
        evaluations = store.queries.evaluations(lineage.id)
        cycles = [e.cycle for e in evaluations]
        scores = [e.score for e in evaluations]
        ax.plot(
            cycles,
            scores,
            marker="o",
            label=f"{lineage.label}{' (locked)' if lineage.locked else ''}",
        )
        rows += [
            (lineage.label, e.cycle, e.agent_version, e.score, e.comment or "") for e in evaluations
        ]
    ax.set(xlabel="cycle", ylabel="score", ylim=(0, 10.5), title=f"Session {session_id}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # cycles are whole: no 1.5
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "scores.png")
    plt.close(fig)
    checks = "\n".join(_check_report(store, lineage, out, plt) for lineage in lineages)
    versions = session_versions(store, session_id)
    _front_chart(versions, out / "front.png", session_id, plt)
    _print_front(versions)
    agreement = session_agreement(store, session_id)
    for line in agreement.lines():
        console.print(shown(line))
    cells = "\n".join(
        f"<tr><td>{html.escape(label)}</td><td>{cycle}</td><td>v{version}</td>"
        f"<td>{score:g}</td><td>{html.escape(comment)}</td></tr>"
        for label, cycle, version, score, comment in rows
    )
    (out / "index.html").write_text(
        f"""<!doctype html><html><head><meta charset="utf-8">
<title>Training Camp — {html.escape(session_id)}</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:4px 10px;text-align:left}}</style>
</head><body><h1>Session {html.escape(session_id)}</h1>
<p>Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC from the training-signal store.</p>
<img src="scores.png" alt="score per cycle, one line per lineage">
{_front_html(versions)}
{_agreement_html(agreement)}
<table><tr><th>lineage</th><th>cycle</th><th>agent</th><th>score</th><th>comment</th></tr>
{cells}</table>
{checks}</body></html>
""",
        encoding="utf-8",
    )
    console.print(
        f"wrote {shown(out / 'scores.png')}, {shown(out / 'front.png')} and "
        f"{shown(out / 'index.html')}"
    )


def _agreement_html(agreement: RaterAgreement) -> str:
    head, *rest = agreement.lines()
    items = "".join(f"<li>{html.escape(d.line())}</li>" for d in agreement.disputes)
    disputes = f"<ul>{items}</ul>" if items else f"<p>{html.escape(rest[0])}</p>"
    return (
        f'<h2>Raters</h2><p class="agreement">{html.escape(head)}</p>'
        f'<h3>Wishes in dispute</h3><div class="disputes">{disputes}</div>'
    )


FRONT_NOTE = (
    f"Each version over the cycles its outputs were scored on: a version scored on fewer than "
    f"{MIN_SCORED_CYCLES} is untested and stays off the front. One version dominates another "
    "when it is at least as good on both measures and better on one; the front is the tested "
    "versions none dominates. A version checked against no wish failed none (100 %)."
)


def _cells(row: FrontRow) -> tuple[str, str, str, str, str]:
    """A version's name (and origin), mean score, checks passed, cycles scored, and mark."""
    r = row.record
    name = r.name + (f" (from {r.branched_from})" if r.branched_from else "")
    name += " ★ champion" if r.champion else ""
    mean = f"{r.mean_score:.2f}" if r.mean_score is not None else "—"
    share = f"{r.checks_share:.0%} ({r.checks_passed}/{r.checks})" if r.checks else "100% (none)"
    if not r.tested:
        mark = "untested"
    elif row.on_front:
        mark = "front"
    else:
        mark = "dominated by " + ", ".join(row.dominated_by)
    return name, mean, share, str(r.cycles), mark


def _print_front(versions: list[FrontRow]) -> None:
    table = Table("version", "mean score", "checks passed", "cycles scored", "", title="Versions")
    for row in versions:
        name, mean, share, cycles, mark = _cells(row)
        style = "bold green" if row.on_front else "dim" if not row.record.tested else None
        table.add_row(name, mean, share, cycles, mark, style=style)
    console.print(table)
    front = [row.record.name for row in versions if row.on_front]
    console.print(f"front: {', '.join(front) or 'none yet (no version scored twice)'}")


def _front_html(versions: list[FrontRow]) -> str:
    rows = []
    for row in versions:
        name, mean, share, cycles, mark = _cells(row)
        kind = "on-front" if row.on_front else "untested" if not row.record.tested else "dominated"
        rows.append(
            f'<tr class="version {kind}" data-version="{html.escape(row.record.name)}">'
            + "".join(f"<td>{html.escape(c)}</td>" for c in (name, mean, share, cycles, mark))
            + "</tr>"
        )
    return (
        '<h2>Versions and the front</h2><img src="front.png" alt="mean score against checks '
        'passed, one point per tested version, the front joined">'
        f"<p>{html.escape(FRONT_NOTE)}</p>"
        '<table class="front"><tr><th>version</th><th>mean score</th><th>checks passed</th>'
        "<th>cycles scored</th><th></th></tr>" + "\n".join(rows) + "</table>"
    )


def _front_chart(versions: list[FrontRow], path: Path, session_id: str, plt: Any) -> None:
    """The tested versions as points (mean score, share of checks passed), the front joined
    and labelled; untested versions are left out."""
    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=100)
    tested = [row for row in versions if row.record.tested]
    for on_front in (False, True):
        points = [row.record for row in tested if row.on_front == on_front]
        ax.scatter(
            [r.mean_score for r in points],
            [r.checks_share for r in points],
            s=60 if on_front else 30,
            color="tab:green" if on_front else "tab:gray",
            label="front" if on_front else "dominated",
            zorder=3,
        )
        for r in points:
            ax.annotate(
                r.name,
                (r.mean_score or 0, r.checks_share),
                xytext=(4, 4),
                fontsize=8,
                textcoords="offset points",
            )
    front = sorted((r.record for r in tested if r.on_front), key=lambda r: r.mean_score or 0)
    if len(front) > 1:
        ax.plot([r.mean_score for r in front], [r.checks_share for r in front], color="tab:green")
    ax.set(
        xlabel="mean score over scored cycles",
        ylabel="standing checks passed",
        xlim=(0, 10.5),
        ylim=(-0.05, 1.05),
        title=f"Session {session_id}: the front",
    )
    ax.grid(alpha=0.3)
    if tested:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def check_rates(store: Store, lineage_id: str) -> dict[int, dict[str, tuple[str, int, int]]]:
    """Per agent version, per wish family checked: (the wish as last said, outputs that passed,
    outputs checked), over the outputs shown for scoring."""
    found = store.queries.output_checks(lineage_id)
    rates: dict[int, dict[str, tuple[str, int, int]]] = {}
    for artifact in store.queries.artifacts(lineage_id):
        for check in found[artifact.id].checks if artifact.id in found else []:
            if not check.measured:  # an output too large to measure in time
                continue
            version = rates.setdefault(artifact.agent_version, {})
            _, passed, total = version.get(check.family, ("", 0, 0))
            version[check.family] = (check.wish, passed + check.passed, total + 1)
    return rates


def _check_report(store: Store, lineage: Any, out: Path, plt: Any) -> str:
    """One lineage's checks: pass rate per wish and version, as a small chart
    (``checks-<label>.png``) and a table; empty when no output was checked."""
    rates = check_rates(store, lineage.id)
    if not rates:
        return ""
    versions = sorted(rates)
    families = list(dict.fromkeys(f for v in versions for f in rates[v]))
    fig, ax = plt.subplots(figsize=(6, 2.8), dpi=100)
    for family in families:
        points = [(v, rates[v][family]) for v in versions if family in rates[v]]
        ax.plot(
            [v for v, _ in points],
            [passed / total for v, (_, passed, total) in points],
            marker="o",
            label=points[-1][1][0],
        )
    ax.set(xlabel="agent version", ylabel="passed", ylim=(-0.05, 1.05))
    ax.set_title(f"{lineage.label}: checks of what the reviewer asked for", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    chart = f"checks-{lineage.label}.png"
    fig.savefig(out / chart)
    plt.close(fig)
    cells = "\n".join(
        f'<tr class="check"><td>{html.escape(lineage.label)}</td><td>v{v}</td>'
        f"<td>{html.escape(wish)}</td><td>{passed}/{total}</td></tr>"
        for v in versions
        for wish, passed, total in rates[v].values()
    )
    return (
        f"<h2>{html.escape(lineage.label)}: checks</h2>"
        f'<img src="{html.escape(chart)}" alt="pass rate of each check per version">'
        f"<table><tr><th>lineage</th><th>agent</th><th>check</th><th>passed</th></tr>"
        f"{cells}</table>"
    )


def main() -> None:
    command_line.run(app)


if __name__ == "__main__":
    main()
