"""Reviewer sequences played through the real workflows: a rater scoring a lineage cycle after
cycle, as a lineage actually runs, instead of the bare cycle step ``trainer.evaluate
--sequences`` calls in-process.

    .venv/bin/python -m bench.reviewer_sequences SEQUENCES.jsonl --out ANSWERS.jsonl \\
        [--spec examples/essay-session.yaml --lineage A] [--concurrency 4] [--trainer rules]

Starts one in-memory Temporal dev server, a worker (``worker.build_worker``) on a temporary
SQLite store, and for each sequence a one-lineage session: the spec's agent for that lineage
(or the sequence's own ``agent``), on the offline model, with the lineage's trainer (or
``--trainer``'s), the spec's inputs taken in turn, one cycle a step and one more for the output
of the last version. Each step's score and comment
go in with the ``submit_score`` update, as a rater sends them; the script waits for the next
output to await its score (``await_output``), and at the end stops the lineage and reads its
first and last agent versions from the store.

The answers are the format ``trainer.evaluate --sequences`` writes (``score_sequences.py``
scores them): ``id``, ``agent_before``, ``agent_after`` and per step ``cycle``, ``score``,
``verdict`` and ``aspects`` (the verdict on the change before it, from the store's log),
``summary`` (the lineage's ``last_evolution``) and ``report`` (the notes of the step's record
in the store: the report, with the planner's own notes); and per step besides, what the lineage
said back: ``reading`` (``last_reading``), ``evolution`` (``last_evolution``) and
``agent_version``. Sequences run ``--concurrency`` at a time; prints a summary line and the
wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client

from client import await_output, start_session
from domain.agent import AgentDefinition, AgentRef
from domain.events import AgentEvolved, ArtifactScored, EvolutionJudged, EvolutionKept
from domain.lineage import LineageState
from domain.settings import Settings
from domain.spec import LineageSpec, SessionSpec, SpecError, load_spec, slugify
from store import Store
from trainer.backends import TrainerBackends, TrainerConfigError
from trainer.evaluate import CaseFileError, FeedbackSequence, agent_json, read_cases
from worker import build_worker
from workflows.lineage import LineageWorkflow

RATER = "reviewer-sequences"
DEFAULT_CONCURRENCY = 4


class SequenceFailed(RuntimeError):
    """A lineage that did not take a sequence through (the message says which and why)."""


def session_for(
    spec: SessionSpec,
    lineage: LineageSpec,
    sequence: FeedbackSequence,
    run: str,
    number: int,
    trainer: str | None = None,
) -> SessionSpec:
    """A one-lineage session for ``sequence``: its own id (a store's sessions never mix, so no
    insight or past change of one sequence reaches another), the lineage's options with no
    cycle limit (and ``trainer`` if given), and the sequence's agent if it brings one."""
    agent = sequence.agent or lineage.agent
    if not agent.is_offline:
        raise SequenceFailed(
            f"sequence {sequence.id!r}: the agent's model {agent.parameters.model!r} is not an "
            "offline model; this bench runs the offline model only"
        )
    slug = slugify(sequence.id)[:30].strip("-")
    session_id = f"seq-{run}-{number:04d}-{slug}"[:63].rstrip("-")
    return spec.model_copy(
        update={
            "id": session_id,
            "name": f"Reviewer sequence {sequence.id}"[:200],
            "lineages": [
                lineage.model_copy(
                    update={
                        "agent": agent,
                        "options": lineage.options.model_copy(
                            update={
                                "max_cycles": None,
                                "trainer": trainer or lineage.options.trainer,
                            }
                        ),
                    }
                )
            ],
        }
    )


def step_records(store: Store, lineage_id: str) -> dict[int, dict[str, Any]]:
    """Per cycle, what the store's log holds of its score: the verdict on the change before it
    (``evolution.outcome``, written with the score) and the step's notes (the new version's
    record or the record of why there is none)."""
    events = store.queries.events(
        lineage_id, ["artifact.scored", "evolution.outcome", "agent.evolved", "evolution.kept"]
    )
    by_cycle: dict[int, dict[str, Any]] = {}
    cycle_of: dict[str, int] = {}  # evaluation id -> cycle
    current: int | None = None
    for event in events:
        data = event.data
        if isinstance(data, ArtifactScored):
            current = data.cycle
            cycle_of[data.evaluation_id] = current
            by_cycle[current] = {"verdict": None, "aspects": [], "report": []}
        elif isinstance(data, EvolutionJudged) and current is not None:
            # written with the score it follows, in the same transaction
            by_cycle[current]["verdict"] = data.reason
            by_cycle[current]["aspects"] = [a.model_dump(mode="json") for a in data.aspects]
        elif isinstance(data, AgentEvolved | EvolutionKept) and (
            (cycle := cycle_of.get(data.trigger.evaluation_id)) is not None
        ):
            by_cycle[cycle]["report"] = list(data.plan.notes)
    return by_cycle


def stored_agent(store: Store, lineage_id: str, version: int) -> AgentDefinition:
    return store.queries.agent_definition(AgentRef(agent_id=lineage_id, version=version))


async def play(
    client: Client, store: Store, queue: str, session: SessionSpec, sequence: FeedbackSequence
) -> dict[str, Any]:
    """One sequence through its lineage's workflow; the answer, read from the store."""
    (handle,) = await start_session(client, session, queue)
    lineage_id = session.lineage_id(session.lineages[0].label)

    def check(state: LineageState, cycle: int) -> None:
        # a step whose training failed keeps the version: measured as "kept", it would hide
        # a broken backend behind a figure
        if state.status != "awaiting_score" or state.cycle != cycle or state.last_error:
            raise SequenceFailed(
                f"sequence {sequence.id!r}: lineage {lineage_id} is {state.status} in cycle "
                f"{state.cycle}, not awaiting cycle {cycle}'s score"
                + (f" ({state.last_error})" if state.last_error else "")
            )

    check(await await_output(handle, 1), 1)
    said: list[dict[str, Any]] = []
    for cycle, step in enumerate(sequence.steps, start=1):
        payload: dict[str, Any] = {"score": step.score, "rater": RATER, "cycle": cycle}
        if step.comment is not None:
            payload["comment"] = step.comment
        await handle.execute_update(LineageWorkflow.submit_score, payload)
        state = await await_output(handle, cycle + 1)
        check(state, cycle + 1)
        said.append(
            {
                "reading": state.last_reading,
                "evolution": state.last_evolution,
                "agent_version": state.agent_version,
            }
        )
    await handle.signal("stop")
    await handle.result()

    def read() -> dict[str, Any]:
        versions = [row.version for row in store.queries.agent_versions(lineage_id)]
        last = said[-1]["agent_version"]
        if not versions or versions[-1] != last:
            raise SequenceFailed(
                f"sequence {sequence.id!r}: the lineage runs v{last} but the store's latest "
                f"version is {versions[-1] if versions else None}"
            )
        records = step_records(store, lineage_id)
        steps = []
        for cycle, (given, back) in enumerate(zip(sequence.steps, said, strict=True), start=1):
            record = records.get(cycle, {"verdict": None, "aspects": [], "report": []})
            steps.append(
                {
                    "cycle": cycle,
                    "score": given.score,
                    "verdict": record["verdict"],
                    "aspects": record["aspects"],
                    "summary": back["evolution"],
                    "report": record["report"],
                    **back,
                }
            )
        return {
            "id": sequence.id,
            "agent_before": agent_json(stored_agent(store, lineage_id, versions[0])),
            "agent_after": agent_json(stored_agent(store, lineage_id, last)),
            "steps": steps,
        }

    return await asyncio.to_thread(read)


async def play_all(
    client: Client,
    store: Store,
    settings: Settings,
    spec: SessionSpec,
    label: str,
    sequences: list[FeedbackSequence],
    concurrency: int = DEFAULT_CONCURRENCY,
    trainer: str | None = None,
) -> list[dict[str, Any]]:
    """Every sequence through a worker of its own on ``settings``' queue, ``concurrency`` at a
    time; answers in the file's order."""
    lineage = next(lin for lin in spec.lineages if lin.label == label)
    run = uuid.uuid4().hex[:8]
    sessions = [session_for(spec, lineage, s, run, n, trainer) for n, s in enumerate(sequences)]
    gate = asyncio.Semaphore(concurrency)

    async def one(session: SessionSpec, sequence: FeedbackSequence) -> dict[str, Any]:
        async with gate:
            return await play(client, store, settings.task_queue, session, sequence)

    try:
        async with build_worker(client, store, settings), asyncio.TaskGroup() as group:
            pairs = zip(sessions, sequences, strict=True)
            tasks = [group.create_task(one(*pair)) for pair in pairs]
    except ExceptionGroup as failed:
        # a sequence that fails cancels the others: the run stops with the first one's reason
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


async def main(
    sequences: list[FeedbackSequence],
    spec: SessionSpec,
    label: str,
    out: Path,
    concurrency: int,
    trainer: str | None,
) -> None:
    from services.dev_server import start_in_memory

    started = time.perf_counter()
    env = await start_in_memory()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = Store.open(f"sqlite:///{tmp}/sequences.db")
            # the environment's settings (a Claude trainer's key) on a queue and store of its own
            settings = Settings.from_env().model_copy(
                update={
                    "task_queue": f"sequences-{uuid.uuid4().hex[:8]}",
                    "database_url": str(store.engine.url),
                }
            )
            try:
                answers = await play_all(
                    env.client, store, settings, spec, label, sequences, concurrency, trainer
                )
            finally:
                store.close()
    finally:
        await env.shutdown()
    wall = time.perf_counter() - started
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for row in answers:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    changed = sum(row["agent_before"] != row["agent_after"] for row in answers)
    steps = sum(len(row["steps"]) for row in answers)
    print(
        f"{len(answers)} sequence(s), {steps} scores, through the workflows of lineage {label} "
        f"of {spec.name} ({concurrency} at a time): {changed} changed the agent, "
        f"{len(answers) - changed} kept it -> {out}"
    )
    print(
        f"wall time {wall:.1f} s (dev server start included), {wall / max(steps, 1):.2f} s a score"
    )


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sequences", type=Path, metavar="SEQUENCES.jsonl")
    parser.add_argument("--out", type=Path, required=True, help="Where to write the answers.")
    parser.add_argument("--spec", type=Path, default=Path("examples/essay-session.yaml"))
    parser.add_argument("--lineage", default="A", help="The lineage's label in the spec.")
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    parser.add_argument(
        "--trainer",
        choices=["rules", "claude", "rules+claude"],
        help="The lineage's trainer (default: the spec's; Claude needs ANTHROPIC_API_KEY).",
    )
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        parser.error(f"--concurrency must be at least 1, not {args.concurrency}")
    try:
        spec = load_spec(args.spec)
        sequences = read_cases(args.sequences, FeedbackSequence)
    except (SpecError, CaseFileError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not any(lin.label == args.lineage for lin in spec.lineages):
        labels = ", ".join(lin.label for lin in spec.lineages)
        print(
            f"error: {args.spec} has no lineage {args.lineage!r} (it has {labels})", file=sys.stderr
        )
        return 2
    lineage = next(lin for lin in spec.lineages if lin.label == args.lineage)
    try:
        TrainerBackends(Settings.from_env()).get(
            args.trainer or lineage.options.trainer, lineage.options.trainer_model
        )
    except TrainerConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        for n, sequence in enumerate(sequences):
            session_for(spec, lineage, sequence, "check", n)  # every agent offline, before starting
    except SequenceFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(main(sequences, spec, args.lineage, args.out, args.concurrency, args.trainer))
    except SequenceFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli())
