"""The confirmed reading is a contract: the step makes exactly the changes previewed and
confirmed, and nothing else.

Every comment of the public development and contrast sets (``feedback-dev/cases.jsonl``, the
steps of ``sequences.jsonl``, and the 120 cases ``contrast.py gen`` writes) is sent as a rater
sends it: its reading and plan previewed, every chip and every change of the plan confirmed,
the score sent with the plan's wants and change keys. Then the store is read, not the planner:
each score's stored plan (``plan.confirmed``) holds the keys the preview showed; each version
is its parent's definition with exactly the recorded changes applied (applied by
``bench/version_contract.py``'s own reading of them, not the trainer's code), and those changes
are the confirmed ones, key for key; a score whose plan was empty made no version.

Two paths, so the whole takes seconds, not minutes (a cycle of a lineage on the dev server
costs several times what its activities do, on two cores):

- **Every case through the activities**: the activity code the workflow runs, called directly
  (``register_lineage``, ``run_agent``, the preview's reading and ``planned``,
  ``take_cycle_step``, ``record_cycle_step``): each single comment on a fresh lineage's first
  output, each sequence on a lineage of its own, its steps carrying what the workflow carries
  from one to the next (the version, the change awaiting its verdict, the wishes).
- **A representative subset through Temporal**: eight sequences (words addressed to the
  trainer, a take-back, an undo, a revert to the start and to an earlier version, a push for
  another third, a restored case study) each in a lineage of its own on the suite's dev
  server, read by the lineage's worker as ``training-camp score`` asks
  (``ReadingPreviewWorkflow``) and sent with ``submit_score``; and every 24th single comment
  in one more lineage, previewed as the review page previews (``preview_reading`` over the
  lineage's ``state`` and ``step_input`` queries).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.agent_execution import AgentExecutionActivities
from activities.cycle_records import CycleRecordActivities, RecordCycleStepInput
from activities.lineage_registry import LineageRegistryActivities
from activities.reading_preview import planned, preview_reading
from activities.trainer import TrainerActivities
from bench import version_contract
from client import await_output, preview_on_worker, start_session
from domain.agent import AgentRef
from domain.checks import MAX_ACTIVE_WISHES
from domain.cycle import Cycle
from domain.events import AgentEvolved, PlanConfirmed
from domain.feedback import ScoreInput
from domain.lineage import CycleStepInput, RegisterLineageInput, RunAgentInput
from domain.reading_preview import change_words
from domain.settings import Settings
from domain.spec import SessionSpec
from domain.trainer import EvolutionChange, change_key
from runner.backends import ModelBackends
from runner.executor import Executor
from runner.telemetry import collector, runner_tracer
from runner.tools import default_registry
from store import Store
from tests.conftest import make_spec
from trainer import preview
from trainer.backends import RulesTrainer, TrainerBackends
from trainer.cycle_step import LineageMemory, summary, take
from workflows.lineage import LineageWorkflow

SHARED = Path(__file__).resolve().parents[2] / "shared" / "feedback-dev"
PROMPT = (
    "You are an expert analyst. Provide comprehensive, detailed analysis. "
    "Structure your response professionally."
)
QUESTIONS = [
    "Explain the four-day work week for small software teams.",
    "Explain remote onboarding for new engineers.",
]
SAMPLE_EVERY = 24  # every 24th single comment also goes through a lineage on the dev server
# the sequences also played through Temporal (see the module's doc)
THROUGH_TEMPORAL = ("s06", "s13", "s14", "s18", "s19", "s21", "s23", "s24")
AT_ONCE = 8  # lineages scored side by side

needs_the_sets = pytest.mark.skipif(not SHARED.is_dir(), reason="no feedback-dev sets here")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _singles(tmp_path: Path) -> list[dict[str, Any]]:
    """The development cases and the contrast cases, as ``contrast.py gen`` writes them."""
    out = tmp_path / "contrast.jsonl"
    subprocess.run(
        [sys.executable, str(SHARED / "contrast.py"), "gen", str(out)],
        check=True,
        capture_output=True,
    )
    return [*_jsonl(SHARED / "cases.jsonl"), *_jsonl(out)]


def _session(cycles: int) -> SessionSpec:
    """A one-lineage session (of its own: no lineage's step changes what another's preview
    planned on) that completes after ``cycles`` scores."""
    spec = make_spec(prompt=PROMPT, inputs=QUESTIONS)
    (lineage,) = spec.lineages
    options = lineage.options.model_copy(update={"max_cycles": cycles})
    return spec.model_copy(update={"lineages": [lineage.model_copy(update={"options": options})]})


def _confirmed(seen: Any, score: float, comment: str | None) -> dict[str, Any]:
    """The score as a rater sends it who confirms everything the preview shows."""
    assert seen.planned, (comment, seen)
    payload: dict[str, Any] = {"score": float(score), "comment": comment}
    payload["changes"] = seen.change_keys
    if seen.plan_wants is not None:
        payload["wants"] = seen.plan_wants
    return payload


def _checked(store: Store, sent: list[dict[str, Any]]) -> None:
    """What the store holds of the scores ``sent``: each one's stored plan is the preview's,
    its version (if any) made of exactly those changes, and every version of the store its
    parent with those changes applied (``bench/version_contract.py``)."""
    events = store.queries.events(None, ["plan.confirmed", "agent.evolved"])
    plans = {e.data.evaluation_id: e.data for e in events if isinstance(e.data, PlanConfirmed)}
    versions = {
        e.data.trigger.evaluation_id: e.data for e in events if isinstance(e.data, AgentEvolved)
    }
    changed = 0
    for score in sent:
        plan = plans[score["evaluation_id"]]
        assert (plan.changes, plan.wants) == (score["keys"], score["wants"]), score
        version = versions.get(score["evaluation_id"])
        if not score["keys"]:
            assert version is None, score  # an empty plan makes no version
            continue
        assert version is not None, score
        changed += 1
        made = [change_key(EvolutionChange.model_validate(c.model_dump())) for c in version.changes]
        assert made == score["keys"], score
    report = version_contract.check(store, strict=True)
    assert report.violations == []
    assert (report.versions, report.confirmed, report.kept) == (
        changed,
        changed,
        len(sent) - changed,
    )
    # most comments change something; praise and words addressed to the trainer do not
    assert changed > 0.6 * len(sent)


# ---- through Temporal ------------------------------------------------------------------------


async def _through_cli(client, handle, lineage: str, steps: list[dict], sent: list[dict]) -> None:
    """Each step as ``training-camp score`` sends it: read by the lineage's worker."""
    for cycle, step in enumerate(steps, start=1):
        await await_output(handle, cycle)
        previewed = await preview_on_worker(client, lineage, step["score"], step["comment"])
        payload = _confirmed(previewed.reading, step["score"], step["comment"])
        payload["output_id"] = previewed.output_id
        accepted = await handle.execute_update(LineageWorkflow.submit_score, payload)
        sent.append(_sent(accepted.evaluation_id, payload))
    await handle.result()  # max_cycles: the last score recorded, the lineage completed


async def _through_page(client, store, handle, lineage: str, steps: list[dict], sent: list[dict]):
    """Each step as the review page sends it: read in the page's process, over the
    lineage's queries, planned by the step's own function."""
    backends = TrainerBackends(Settings())
    planner = TrainerActivities(store, backends).planned
    for cycle, step in enumerate(steps, start=1):
        await await_output(handle, cycle)
        state, seen = await preview_reading(
            client, store, backends, lineage, step["score"], step["comment"], planner=planner
        )
        payload = _confirmed(seen, step["score"], step["comment"])
        payload["output_id"] = state.output_id
        accepted = await handle.execute_update(LineageWorkflow.submit_score, payload)
        sent.append(_sent(accepted.evaluation_id, payload))
    await handle.result()


def _sent(evaluation_id: str | None, payload: dict[str, Any]) -> dict[str, Any]:
    assert evaluation_id is not None
    return {
        "evaluation_id": evaluation_id,
        "keys": payload["changes"],
        "wants": payload.get("wants"),
        "comment": payload["comment"],
    }


@needs_the_sets
async def test_through_temporal_each_version_is_exactly_the_previewed_plan(
    client, store, settings, run_worker, tmp_path
):
    sequences = [
        s["steps"] for s in _jsonl(SHARED / "sequences.jsonl") if s["id"] in THROUGH_TEMPORAL
    ]
    sample = _singles(tmp_path)[::SAMPLE_EVERY]
    sent: list[dict[str, Any]] = []
    async with run_worker():
        gate = asyncio.Semaphore(AT_ONCE)

        async def play(steps: list[dict], page: bool = False) -> None:
            spec = _session(len(steps))
            async with gate:
                (handle,) = await start_session(client, spec, settings.task_queue)
                lineage = spec.lineage_id("A")
                if page:
                    await _through_page(client, store, handle, lineage, steps, sent)
                else:
                    await _through_cli(client, handle, lineage, steps, sent)

        await asyncio.gather(play(sample, page=True), *(play(steps) for steps in sequences))
    assert len(sent) == sum(map(len, sequences)) + len(sample) == 21 + 8
    _checked(store, sent)


# ---- through the activities ------------------------------------------------------------------


class _Activities:
    """The worker's activities, called directly (``ActivityEnvironment``) on the test's store."""

    def __init__(self, store: Store) -> None:
        settings = Settings()
        executor = Executor(
            ModelBackends(settings).for_model, default_registry(), runner_tracer(), collector()
        )
        self.env = ActivityEnvironment()
        self.registry = LineageRegistryActivities(store)
        self.agent = AgentExecutionActivities(store, executor)
        self.backends = TrainerBackends(settings)
        self.trainer = TrainerActivities(store, self.backends)
        self.records = CycleRecordActivities(store)

    async def play(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A fresh lineage scored step by step: each output run, its comment previewed, sent
        confirmed, stepped and recorded, as the workflow runs them; what the workflow carries
        from one step to the next (``LineageWorkflow._took``) carried here."""
        spec = _session(len(steps))
        (lineage,) = spec.lineages
        lineage_id = spec.lineage_id("A")
        registered = self.env.run(
            self.registry.register_lineage,
            RegisterLineageInput(
                session_id=spec.id,
                session_name=spec.name,
                lineage_id=lineage_id,
                label="A",
                agent=lineage.agent,
                inputs=spec.inputs,
            ),
        )
        carried = CycleStepInput(
            session_id=spec.id,
            lineage_id=lineage_id,
            evaluation_id="",
            artifact_id="",
            rollout_id="",
            cycle=0,
            agent=registered.agent,
            score=ScoreInput(score=0.0),
        )
        sent = []
        for cycle, step in enumerate(steps, start=1):
            output = await self.env.run(
                self.agent.run_agent,
                RunAgentInput(
                    session_id=spec.id,
                    lineage_id=lineage_id,
                    rollout_id=Cycle(lineage_id, cycle).rollout_id(),
                    cycle=cycle,
                    agent=carried.agent,
                    input_hash=registered.input_hashes[(cycle - 1) % len(spec.inputs)],
                    max_attempts=1,
                    wishes=carried.wishes,
                    revision_attempts=lineage.options.revision_attempts,
                ),
            )
            # the step the workflow's `step_input` query gives for this output
            basis = carried.model_copy(
                update={
                    "artifact_id": output.artifact_id,
                    "rollout_id": output.rollout_id,
                    "cycle": cycle,
                }
            )
            memory = LineageMemory(
                session_id=spec.id,
                lineage_id=lineage_id,
                previous_score=carried.previous_score,
                wishes=carried.wishes,
                cycle=cycle,
            )
            score, comment = step["score"], step["comment"]
            seen = await preview.preview(self.backends.rules, memory, score, comment)
            seen = await planned(self.trainer.planned, basis, seen, score, comment, None)
            payload = _confirmed(seen, score, comment)
            inp = basis.model_copy(
                update={
                    "evaluation_id": f"{output.artifact_id}:evaluation:1",
                    "score": ScoreInput.model_validate(payload),
                }
            )
            decision = await self.env.run(self.trainer.take_cycle_step, inp)
            taken = self.env.run(
                self.records.record_cycle_step, RecordCycleStepInput(step=inp, decision=decision)
            )
            assert taken.training_error is None, (comment, taken.training_error)
            sent.append(_sent(inp.evaluation_id, payload))
            carried = carried.model_copy(
                update={
                    "agent": taken.agent,
                    "pending_evolution_id": taken.evolution_id,
                    "asked_for": taken.asked_for,
                    "wishes": taken.wishes[-MAX_ACTIVE_WISHES:],
                    "previous_score": float(score),
                }
            )
        return sent


@needs_the_sets
async def test_through_the_activities_every_case_makes_exactly_its_previewed_plan(store, tmp_path):
    singles = _singles(tmp_path)
    sequences = [s["steps"] for s in _jsonl(SHARED / "sequences.jsonl")]
    activities = _Activities(store)
    sent = []
    for steps in [[case] for case in singles] + sequences:
        sent += await activities.play(steps)
    assert len(sent) == 70 + 120 + 59
    _checked(store, sent)


# ---- the binding itself ----------------------------------------------------------------------

BRIEF = "You are an expert analyst. Provide brief, scannable analysis."


def _step(confirmed: list[str] | None, wanted: list[str]):
    agent = make_spec(prompt=BRIEF).lineages[0].agent
    memory = LineageMemory(session_id="s", lineage_id="L", wants=wanted, confirmed=confirmed)
    return agent, asyncio.run(take(RulesTrainer(), agent, memory, 3, "too long; a table"))


def test_the_step_makes_only_the_changes_confirmed_and_says_what_it_left_out():
    wanted = ["shorter:60", "table"]
    agent, whole = _step(None, wanted)
    keys = [change_key(c) for c in whole.plan.changes]
    assert len(keys) >= 2
    # confirmed whole: the step as planned
    _, same = _step(keys, wanted)
    assert same.agent == whole.agent and same.report == whole.report
    # one left out: not made, and said
    _, less = _step(keys[1:], wanted)
    assert [change_key(c) for c in less.plan.changes] == keys[1:]
    left_out = change_words(whole.plan.changes[0])
    assert f"not made: {left_out}: not in the plan you confirmed" in less.report
    assert less.agent == _step(keys[1:], wanted)[1].agent != whole.agent
    # one confirmed that the step does not plan: nothing unplanned is made, and it is said
    _, stale = _step([*keys, "0123456789ab"], wanted)
    assert stale.agent == whole.agent
    assert stale.report[-1].startswith("not made: 1 change(s) you confirmed that the step no")
    # nothing confirmed: nothing changes, and the summary says why
    _, none = _step([], wanted)
    assert not none.changed and none.agent == agent
    assert summary(none, 1).startswith("kept v1: not made:")


def test_a_standing_wish_in_the_way_is_said_with_the_change_it_would_block():
    """Bullets asked for in cycle 1 stand: a later wish for paragraphs would take out the
    instruction that carries them. The step's note names that change (the preview lists the
    step's notes before sending: ``plan_notes``)."""
    agent = make_spec(prompt=BRIEF).lineages[0].agent
    memory = LineageMemory(session_id="s", lineage_id="L")
    for cycle, wanted in enumerate((["bullets"], ["warmer"]), start=1):
        memory = memory.model_copy(update={"wants": wanted, "cycle": cycle})
        step = asyncio.run(take(RulesTrainer(), agent, memory, 4, None))
        agent = step.agent
        memory = memory.model_copy(update={"asked_for": step.asked_for, "wishes": step.wishes})
    memory = memory.model_copy(update={"wants": ["prose"], "cycle": 3})
    blocked = asyncio.run(take(RulesTrainer(), agent, memory, 4, None))
    named = [r for r in blocked.report if "take out 'Use bullet points" in r]
    assert named and named[0].startswith("kept 'bullet points': asked for in cycle 1")


def test_a_locked_lineage_s_preview_plans_no_change():
    """A locked lineage's score judges the last change and evolves nothing: the preview says
    so, and its plan (empty) binds the step to nothing."""

    async def never(inp: CycleStepInput):
        raise AssertionError("a locked lineage's step plans nothing")

    basis = CycleStepInput(
        session_id="s",
        lineage_id="L",
        evaluation_id="",
        artifact_id="a",
        rollout_id="r",
        cycle=2,
        agent=AgentRef(agent_id="L", version=2),
        score=ScoreInput(score=0.0),
        train=False,
    )
    memory = LineageMemory(session_id="s", lineage_id="L")
    seen = asyncio.run(preview.preview(RulesTrainer(), memory, 3, "Shorter, please."))
    seen = asyncio.run(planned(never, basis, seen, 3, "Shorter, please.", None))
    assert (seen.planned, seen.changes, seen.plan_wants) == (True, [], ["shorter"])
    assert seen.plan_notes == [
        "the lineage is locked: the score judges the last change, nothing changes"
    ]
