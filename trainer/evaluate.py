"""Measure a trainer on feedback cases, with no Temporal server and no store.

    .venv/bin/python -m trainer.evaluate CASES.jsonl --spec examples/essay-session.yaml \\
        --lineage A --trainer rules --out ANSWERS.jsonl

Each case (one JSON object a line: ``id``, ``score``, ``comment``; optionally ``agent``, an agent
definition that replaces the lineage's) runs on its own against the lineage's initial agent,
through the whole trainer: reward analysis → credit assignment → planning → the history,
directive and constraint checks every backend's plan passes → apply. Each answer line holds the
case's ``id``, the ``aspects`` read out of the comment and the agent before and after, as JSON
with the project's camelCase keys — the format ``feedback-dev/score.py`` scores.

``--sequences``: each line is a sequence (``id``, ``steps``: score + comment, one a cycle),
played through the very cycle step a lineage takes (``trainer.cycle_step``), cycle after cycle
from the lineage's initial agent. Each answer holds the initial and final agents and, per step,
the verdict on the last change and what the step did — the format ``score_sequences.py``
scores.

``--corrections``: the cases are played in order through the reader with a memory of
corrections (``trainer.reading.memory``): each is read with the corrections made so far, and
after each miss (judged as ``score.py`` judges it: ``--scorer``, by default the ``score.py``
beside the case file) the case's gold reading — its ``change`` families as wants — is fed back
as a correction. Reports first-pass accuracy over the stream, a second pass over the same file
with every correction learnt, and with ``--then FILE`` the accuracy over another file (say,
paraphrases) with those corrections.

``--trainer claude`` runs the Claude trainer through the anthropic SDK: ``ANTHROPIC_API_KEY``
(and ``ANTHROPIC_BASE_URL`` for another Messages-API endpoint) come from the environment, the
model from ``--model`` or ``TRAINING_CAMP_TRAINER_MODEL``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, Field, ValidationError

from domain import wants as structured
from domain.agent import AgentDefinition
from domain.checks import ActiveWish
from domain.corrections import LabelledExample
from domain.feedback import MAX_COMMENT_CHARS
from domain.settings import Settings
from domain.spec import SpecError, load_spec
from domain.trainer import ScoreAnalysis
from trainer import cycle_step
from trainer.backends import TrainerBackend, TrainerBackends, TrainerConfigError
from trainer.cycle_step import LineageMemory

app = typer.Typer(add_completion=False, help=__doc__)


class FeedbackCase(BaseModel):
    """One case as the file gives it; fields beyond these (expected aspects, families) are the
    scorer's business and are ignored here."""

    id: str = Field(min_length=1, max_length=200)
    score: float = Field(ge=0, le=10)
    comment: str | None = Field(default=None, max_length=MAX_COMMENT_CHARS)
    agent: AgentDefinition | None = None

    model_config = {"extra": "ignore"}


class SequenceStep(BaseModel):
    score: float = Field(ge=0, le=10)
    comment: str | None = Field(default=None, max_length=MAX_COMMENT_CHARS)

    model_config = {"extra": "ignore"}


class FeedbackSequence(BaseModel):
    """One reviewer scoring one lineage cycle after cycle (expected families are the
    scorer's business and are ignored here)."""

    id: str = Field(min_length=1, max_length=200)
    steps: list[SequenceStep] = Field(min_length=1, max_length=100)
    agent: AgentDefinition | None = None

    model_config = {"extra": "ignore"}


ItemT = TypeVar("ItemT", FeedbackCase, FeedbackSequence)


class CaseFileError(ValueError):
    """A case file line that is not a case (the message names the line)."""


def read_cases(path: Path, model: type[ItemT] = FeedbackCase) -> list[ItemT]:  # type: ignore[assignment]
    """Every case (or sequence) in ``path``; a bad line stops the run before any is
    evaluated."""
    what = "feedback case" if model is FeedbackCase else "feedback sequence"
    cases: list[ItemT] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                case = model.model_validate_json(line)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'line'}: {e['msg']}"
                    for e in exc.errors()[:3]
                )
                raise CaseFileError(f"{path}:{number}: not a {what} ({problems})") from None
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


def _memory(
    previous_score: float | None = None, corrections: list[LabelledExample] | None = None
) -> LineageMemory:
    return LineageMemory(
        session_id="evaluation",
        lineage_id="evaluation",
        previous_score=previous_score,
        corrections=corrections or [],
    )


async def answer(
    backend: TrainerBackend,
    agent: AgentDefinition,
    case: FeedbackCase,
    corrections: list[LabelledExample] | None = None,
) -> dict:
    """The trainer's answer to one case: what it read, and the agent it would evolve to."""
    memory = _memory(corrections=corrections)
    step = await cycle_step.take(backend, agent, memory, case.score, case.comment)
    return {
        "read_as": structured.wants_of(step.analysis.aspects),
        "id": case.id,
        "aspects": aspects_of(step.analysis),
        "agent_before": agent_json(agent),
        "agent_after": agent_json(step.agent),
        "hypothesis": step.plan.hypothesis,
        "notes": step.plan.notes,
        "report": step.report,
    }


async def evaluate(
    cases: list[FeedbackCase], agent: AgentDefinition, backend: TrainerBackend
) -> list[dict]:
    return [await answer(backend, case.agent or agent, case) for case in cases]


async def play(backend: TrainerBackend, agent: AgentDefinition, sequence: FeedbackSequence) -> dict:
    """A reviewer's whole sequence through the cycle step, cycle after cycle, as a lineage
    takes it: each score judges the last change, rolls back what it refuted, and trains."""
    start = sequence.agent or agent
    current, memory, version = start, _memory(), 1
    versions = {1: start}  # what the lineage's store would give a reviewer going back
    stood: dict[int, tuple[list[ActiveWish], list[str]]] = {1: ([], [])}  # and its wishes
    steps = []
    for number, given in enumerate(sequence.steps, start=1):
        memory = memory.model_copy(update={"cycle": number})
        step = await cycle_step.take(
            backend,
            current,
            memory,
            given.score,
            given.comment,
            versions=versions.get,
            standing=stood.get,
        )
        judged = step.judged.verdict if step.judged else None
        steps.append(
            {
                "cycle": number,
                "score": given.score,
                "verdict": judged.reason if judged else None,
                "aspects": [v.model_dump() for v in judged.aspects] if judged else [],
                "summary": cycle_step.summary(step, version),
                "report": step.report,
            }
        )
        evolution_id = f"evaluation:evolution:v{version}"
        pending = cycle_step.pending_after(step, evolution_id)
        if step.changed:
            current, version = step.agent, version + 1
            versions[version] = current
        stood[version] = (step.wishes, step.asked_for)
        memory = memory.model_copy(
            update={
                "pending": pending if step.changed else memory.pending,
                "asked_for": step.asked_for,
                "wishes": step.wishes,  # checked wishes: no later change may break them
                "previous_score": given.score,
                "oneshot_directives": [],
            }
        )
    return {
        "id": sequence.id,
        "agent_before": agent_json(start),
        "agent_after": agent_json(current),
        "steps": steps,
    }


async def play_all(
    sequences: list[FeedbackSequence], agent: AgentDefinition, backend: TrainerBackend
) -> list[dict]:
    return [await play(backend, agent, sequence) for sequence in sequences]


# ---- corrections: every miss teaches the reader ---------------------------------------------

# A case's gold change families (the scorer's names) as wants. Families no want can name (a
# language, a tool, a focus, temperature) cannot be taught by a correction: such a case's
# correction holds only the rest. "none"-like cases are corrected to asking for nothing.
GOLD_WANTS = {
    "longer_or_more_detail": "longer",
    "less_formal": "casual",
    "numbered_steps": "numbered",
    "more_technical": "technical",
    "add_example": "example",
    "hedge_uncertainty": "hedge",
    "more_direct": "direct",
}
ASKS_NOTHING = {"none", "minimal_or_none", "constraints_unchanged"}

Judge = Callable[[dict, dict], bool]  # (the case as its file gives it, the answer) → right


def gold_wants(change: list[str], read_as: list[str]) -> list[str] | None:
    """The case's gold reading as wants, or None when no correction can say it. An amount the
    reader got (``shorter:100``) is kept where its family is gold."""
    if any(family in ASKS_NOTHING for family in change):
        return []
    read = {structured.parse(w).want: w for w in read_as}
    out = []
    for family in change:
        want = GOLD_WANTS.get(family, family)
        if want in structured.families():
            out.append(read.get(want, want))
    return list(dict.fromkeys(out)) or None


def score_py_judge(scorer: Path) -> Judge:
    """A case is right as ``score.py`` says: it is run on the one case and its answer."""

    def judge(case: dict, answered: dict) -> bool:
        with tempfile.TemporaryDirectory() as tmp:
            cases, answers = Path(tmp) / "case.jsonl", Path(tmp) / "answer.jsonl"
            cases.write_text(json.dumps(case) + "\n", encoding="utf-8")
            answers.write_text(json.dumps(answered) + "\n", encoding="utf-8")
            done = subprocess.run(
                [sys.executable, str(scorer), str(cases), str(answers)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        found = re.search(r"right: (\d+)/(\d+)", done.stdout)
        if found is None:
            raise RuntimeError(f"{scorer} printed no 'right: R/N' line: {done.stderr[-300:]}")
        return found.group(1) == found.group(2) == "1"

    return judge


def read_raw(path: Path) -> list[dict]:
    """The case file's lines as given (the gold fields the scorer reads)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


async def _pass(
    backend: TrainerBackend,
    agent: AgentDefinition,
    cases: list[tuple[FeedbackCase, dict]],
    judge: Judge,
    learnt: list[LabelledExample],
    learn: bool,
) -> tuple[int, list[dict]]:
    right, answers = 0, []
    for case, raw in cases:
        answered = await answer(backend, case.agent or agent, case, list(learnt))
        ok = judge(raw, answered)
        right += ok
        answers.append({**answered, "right": ok})
        corrected = None if ok else gold_wants(raw.get("change", []), answered["read_as"])
        if learn and corrected is not None and case.comment:
            learnt.append(
                LabelledExample(
                    correction_id=f"evaluation:{case.id}",
                    session_id="evaluation",
                    lineage_id="evaluation",
                    evaluation_id=case.id,
                    comment=case.comment,
                    read_as=answered["read_as"],
                    corrected=corrected,
                )
            )
    return right, answers


async def play_corrections(
    backend: TrainerBackend,
    agent: AgentDefinition,
    cases: list[tuple[FeedbackCase, dict]],
    judge: Judge,
    then: list[tuple[FeedbackCase, dict]] | None = None,
) -> tuple[dict, list[dict]]:
    """First pass over the stream, learning from each miss; a second pass with every
    correction learnt; and ``then``'s cases with them (learning nothing more)."""
    learnt: list[LabelledExample] = []
    first, answers = await _pass(backend, agent, cases, judge, learnt, learn=True)
    second, _ = await _pass(backend, agent, cases, judge, learnt, learn=False)
    report = {
        "cases": len(cases),
        "first_pass": first,
        "corrections": len(learnt),
        "second_pass": second,
    }
    if then is not None:
        report["then_cases"] = len(then)
        report["then"], _ = await _pass(backend, agent, then, judge, learnt, learn=False)
    return report, answers


@app.command()
def main(
    cases_path: Annotated[Path, typer.Argument(metavar="CASES.jsonl", help="Feedback cases.")],
    spec: Annotated[Path, typer.Option(help="Session spec whose lineage's agent is trained.")],
    out: Annotated[Path, typer.Option(help="Where to write the answers (JSON lines).")],
    lineage: Annotated[str, typer.Option(help="The lineage's label in the spec.")] = "A",
    trainer: Annotated[
        str,
        typer.Option(
            help="rules; claude; or rules+claude, which hands Claude only the comments the rules "
            "engine cannot read (both with Claude need ANTHROPIC_API_KEY)."
        ),
    ] = "rules",
    model: Annotated[str | None, typer.Option(help="Claude model for --trainer claude.")] = None,
    sequences: Annotated[
        bool,
        typer.Option(
            "--sequences",
            help="The file holds sequences (one reviewer over several cycles), each played "
            "through the cycle step from the lineage's initial agent.",
        ),
    ] = False,
    corrections: Annotated[
        bool,
        typer.Option(
            "--corrections",
            help="Play the cases in order with a memory of corrections: each miss's gold "
            "reading is fed back; reports first pass, second pass and --then accuracy.",
        ),
    ] = False,
    then: Annotated[
        Path | None, typer.Option(help="With --corrections: cases read with what was learnt.")
    ] = None,
    scorer: Annotated[
        Path | None,
        typer.Option(help="With --corrections: score.py judging each case (default: beside it)."),
    ] = None,
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
    if trainer not in ("rules", "claude", "rules+claude"):
        typer.echo(
            f"error: --trainer must be rules, claude or rules+claude, not {trainer!r}", err=True
        )
        raise typer.Exit(2)
    try:
        cases = read_cases(cases_path, FeedbackSequence if sequences else FeedbackCase)
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
    if corrections:
        _corrections(cases, cases_path, then, scorer or cases_path.parent / "score.py", backend,
                     chosen.agent, out)  # fmt: skip
        return
    if sequences:
        answers = asyncio.run(play_all(cases, chosen.agent, backend))  # type: ignore[arg-type]
    else:
        answers = asyncio.run(evaluate(cases, chosen.agent, backend))  # type: ignore[arg-type]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for row in answers:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    changed = sum(row["agent_before"] != row["agent_after"] for row in answers)
    what = "sequence(s)" if sequences else "case(s)"
    typer.echo(
        f"{len(answers)} {what} through the {trainer} trainer on lineage {lineage} of "
        f"{session.name}: {changed} changed the agent, {len(answers) - changed} kept it → {out}"
    )
    sys.stdout.flush()


def _corrections(
    cases: list[FeedbackCase],
    cases_path: Path,
    then: Path | None,
    scorer: Path,
    backend: TrainerBackend,
    agent: AgentDefinition,
    out: Path,
) -> None:
    if not scorer.is_file():
        typer.echo(f"error: no scorer at {scorer} (--scorer)", err=True)
        raise typer.Exit(2)
    try:
        then_cases = None
        if then is not None:
            then_cases = list(zip(read_cases(then), read_raw(then), strict=True))
    except (OSError, CaseFileError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    stream = list(zip(cases, read_raw(cases_path), strict=True))
    report, answers = asyncio.run(
        play_corrections(backend, agent, stream, score_py_judge(scorer), then_cases)
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for row in answers:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    typer.echo(json.dumps(report))
    n = report["cases"]
    typer.echo(
        f"first pass {report['first_pass']}/{n}, {report['corrections']} corrections learnt; "
        f"second pass {report['second_pass']}/{n}"
        + (f"; {then}: {report['then']}/{report['then_cases']}" if then else "")
    )


if __name__ == "__main__":
    app()
