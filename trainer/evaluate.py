"""Measure a trainer on feedback cases, with no Temporal server and no store.

    .venv/bin/python -m trainer.evaluate CASES.jsonl --spec examples/essay-session.yaml \\
        --lineage A --trainer rules --out ANSWERS.jsonl

Each case (one JSON object a line: ``id``, ``score``, ``comment``; optionally ``agent``, an agent
definition that replaces the lineage's) runs on its own against the lineage's initial agent,
through the whole trainer: reward analysis → credit assignment → planning → the history,
directive and constraint checks every backend's plan passes → apply. Each answer line holds the
case's ``id``, the ``aspects`` read out of the comment and the agent before and after, as JSON
with the project's camelCase keys — the format ``feedback-dev/score.py`` scores.

``--trainer claude`` runs the Claude trainer through the anthropic SDK: ``ANTHROPIC_API_KEY``
(and ``ANTHROPIC_BASE_URL`` for another Messages-API endpoint) come from the environment, the
model from ``--model`` or ``TRAINING_CAMP_TRAINER_MODEL``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, Field, ValidationError

from domain.agent import AgentDefinition
from domain.feedback import MAX_COMMENT_CHARS
from domain.settings import Settings
from domain.spec import SpecError, load_spec
from domain.trainer import ScoreAnalysis
from trainer import evolution, evolution_planner
from trainer.backends import TrainerBackend, TrainerBackends, TrainerConfigError

app = typer.Typer(add_completion=False, help=__doc__)


class FeedbackCase(BaseModel):
    """One case as the file gives it; fields beyond these (expected aspects, families) are the
    scorer's business and are ignored here."""

    id: str = Field(min_length=1, max_length=200)
    score: float = Field(ge=0, le=10)
    comment: str | None = Field(default=None, max_length=MAX_COMMENT_CHARS)
    agent: AgentDefinition | None = None

    model_config = {"extra": "ignore"}


class CaseFileError(ValueError):
    """A case file line that is not a case (the message names the line)."""


def read_cases(path: Path) -> list[FeedbackCase]:
    """Every case in ``path``; a bad line stops the run before any case is evaluated."""
    cases: list[FeedbackCase] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                case = FeedbackCase.model_validate_json(line)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'line'}: {e['msg']}"
                    for e in exc.errors()[:3]
                )
                raise CaseFileError(f"{path}:{number}: not a feedback case ({problems})") from None
            if case.id in seen:
                raise CaseFileError(f"{path}:{number}: case id {case.id!r} appears twice")
            seen.add(case.id)
            cases.append(case)
    return cases


def agent_json(agent: AgentDefinition) -> dict[str, Any]:
    """The agent as the project writes it (camelCase), as the answer format expects."""
    return agent.model_dump(mode="json", by_alias=True)


def aspects_of(analysis: ScoreAnalysis) -> dict[str, str]:
    """One sentiment per aspect; criticism wins over praise of the same aspect."""
    out: dict[str, str] = {}
    for a in analysis.aspects:
        if out.get(a.aspect) != "negative":
            out[a.aspect] = a.sentiment
    return out


async def answer(backend: TrainerBackend, agent: AgentDefinition, case: FeedbackCase) -> dict:
    """The trainer's answer to one case: what it read, and the agent it would evolve to."""
    analysis = await backend.analyze(case.score, case.comment, [])
    credit = await backend.assign_credit(agent, analysis, [])
    proposal = await backend.propose(agent, analysis, credit, [])
    plan = evolution_planner.finalize(agent, proposal, [], [], [], {})
    after = evolution.apply_changes(agent, plan.changes) if plan.changes else agent
    return {
        "id": case.id,
        "aspects": aspects_of(analysis),
        "agent_before": agent_json(agent),
        "agent_after": agent_json(after),
        "hypothesis": plan.hypothesis,
        "notes": plan.notes,
    }


async def evaluate(
    cases: list[FeedbackCase], agent: AgentDefinition, backend: TrainerBackend
) -> list[dict]:
    return [await answer(backend, case.agent or agent, case) for case in cases]


@app.command()
def main(
    cases_path: Annotated[Path, typer.Argument(metavar="CASES.jsonl", help="Feedback cases.")],
    spec: Annotated[Path, typer.Option(help="Session spec whose lineage's agent is trained.")],
    out: Annotated[Path, typer.Option(help="Where to write the answers (JSON lines).")],
    lineage: Annotated[str, typer.Option(help="The lineage's label in the spec.")] = "A",
    trainer: Annotated[str, typer.Option(help="rules, or claude (needs ANTHROPIC_API_KEY).")] = (
        "rules"
    ),
    model: Annotated[str | None, typer.Option(help="Claude model for --trainer claude.")] = None,
) -> None:
    """Run a trainer over feedback cases and write its answers."""
    try:
        session = load_spec(spec)
    except SpecError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    chosen = next((lin for lin in session.lineages if lin.label == lineage), None)
    if chosen is None:
        labels = ", ".join(lin.label for lin in session.lineages)
        typer.echo(f"error: {spec} has no lineage {lineage!r} (it has {labels})", err=True)
        raise typer.Exit(2)
    if trainer not in ("rules", "claude"):
        typer.echo(f"error: --trainer must be rules or claude, not {trainer!r}", err=True)
        raise typer.Exit(2)
    try:
        cases = read_cases(cases_path)
    except (OSError, CaseFileError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    settings = Settings.from_env()
    chosen_model = (
        model or os.environ.get("TRAINING_CAMP_TRAINER_MODEL") or chosen.options.trainer_model
    )
    try:
        backend = TrainerBackends(settings).get(trainer, chosen_model)
    except TrainerConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    answers = asyncio.run(evaluate(cases, chosen.agent, backend))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for row in answers:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    changed = sum(row["agent_before"] != row["agent_after"] for row in answers)
    typer.echo(
        f"{len(answers)} case(s) through the {trainer} trainer on lineage {lineage} of "
        f"{session.name}: {changed} changed the agent, {len(answers) - changed} kept it → {out}"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    app()
