"""The Master Trainer over the dev server: lessons shared across lineages, insights, automatic
rollback, provenance, directives over several evolutions, and a reviewer it learns to please."""

from __future__ import annotations

import json

import starter
from client import start_session
from examples.scripted_reviewer import review
from tests.conftest import (
    app_in_process,
    awaiting,
    lineage_history,
    local_activity_type,
    make_spec,
    wait_for_state,
)

NEUTRAL = "You are a helpful assistant."


async def score(handle, cycle: int, value: float, comment: str) -> None:
    await wait_for_state(handle, awaiting(cycle))
    await handle.signal("score", {"score": value, "comment": comment})


async def test_a_lesson_from_lineage_a_informs_but_never_vetoes_a_request_in_b(
    client, store, settings, run_worker
):
    spec = make_spec(
        labels=("A", "B"), prompt=NEUTRAL, max_tokens=300, options={"rollbackRefuted": False}
    )
    async with run_worker():
        a, b = await start_session(client, spec, settings.task_queue)
        await score(a, 1, 5, "too long")
        await score(a, 2, 3, "Now it is far too short to be any use.")  # the change overshot
        await wait_for_state(a, awaiting(3))
        await score(b, 1, 5, "too long")  # the same request in another lineage
        state = await wait_for_state(b, awaiting(2))
    lineage_a, lineage_b = spec.lineage_id("A"), spec.lineage_id("B")
    evolved = store.queries.evolution_records(lineage_a)[0]
    assert (evolved.score_delta, evolved.hypothesis_validated) == (-2, False)
    assert evolved.outcome_reason.startswith("refuted: shorter")
    # B's reviewer asked for it: applied, with A's experience noted and confidence lowered
    assert state.agent_version == 2 and "brief" in state.last_evolution
    (b_record,) = store.queries.evolution_records(lineage_b)
    checks = json.loads(b_record.plan)["history_checks"]
    assert {c["recommendation"] for c in checks} == {"modify"}
    assert all(lineage_a in c["reason"] and "asks for it now" in c["reason"] for c in checks)
    insights = store.queries.insights(spec.session_id)
    insight = insights["systemPrompt add: keep answers brief and to the point"]
    assert (insight.success_count, insight.failure_count, insight.avg_score_impact) == (0, 1, -2)
    assert insight.contexts == ["length:shorter"]
    # the outcome is a finding B sees among the others' in the session's shared store
    from rlm.shared_store import WorkerStoreProxy
    from store.rlm_findings.shared_findings import DatabaseSharedStore

    shared = DatabaseSharedStore(store.engine, f"session:{spec.session_id}")
    findings = WorkerStoreProxy(shared, lineage_b).view_others("type=claim tag=insight")
    assert [f.worker for f in findings] == [lineage_a]  # one change: the instruction
    assert all(f.description.endswith("failed (-2)") for f in findings)
    assert WorkerStoreProxy(shared, lineage_a).view_others("tag=insight") == []


async def test_the_result_does_not_depend_on_which_lineage_trains_first(
    client, store, settings, run_worker
):
    """The same reviewer sequence on two lineages, interleaved in opposite orders, ends in the
    same agent: another lineage's lessons never decide whether a request is honoured."""
    spec = make_spec(labels=("A", "B"), prompt=NEUTRAL, max_tokens=600)
    first = (5, "Please use bullet points.")
    second = (3, "The bullets chop it up; paragraphs again, please.")
    async with run_worker():
        a, b = await start_session(client, spec, settings.task_queue)
        await score(a, 1, *first)
        await score(a, 2, *second)
        await wait_for_state(a, awaiting(3))
        await score(b, 1, *first)  # B asks for bullets after A's reviewer refuted them
        await score(b, 2, *second)
        state_a = await wait_for_state(a, awaiting(3))
        state_b = await wait_for_state(b, awaiting(3))
    q = store.queries
    final_a = q.agent_definition(_ref(spec.lineage_id("A"), state_a.agent_version))
    final_b = q.agent_definition(_ref(spec.lineage_id("B"), state_b.agent_version))
    assert final_a.system_prompt == final_b.system_prompt
    assert final_a.parameters == final_b.parameters
    v2_b = q.agent_definition(_ref(spec.lineage_id("B"), 2))
    assert "bullet points, not paragraphs" in v2_b.system_prompt.lower()  # honoured in B too
    assert "paragraphs" in final_b.system_prompt
    assert "Use bullet points" not in final_b.system_prompt


async def test_insight_counts_update_and_directives_hold_across_evolutions(
    client, store, settings, run_worker
):
    spec = make_spec(labels=("A", "B"))
    async with run_worker():
        a, b = await start_session(client, spec, settings.task_queue)
        await wait_for_state(a, awaiting(1))
        await a.signal("directive", {"kind": "sticky", "content": "Cite a source."})
        await a.signal("directive", {"kind": "oneshot", "content": "Mention cost."})
        await score(a, 1, 3, "way too long")
        await score(a, 2, 8, "better")
        await score(a, 3, 6, "too formal")
        await score(b, 1, 3, "way too long")
        await score(b, 2, 9, "good")
        await wait_for_state(a, awaiting(4))
        await wait_for_state(b, awaiting(3))
    records = store.queries.evolution_records(spec.lineage_id("A"))
    assert len(records) == 2
    directives = [json.loads(r.directives) for r in records]
    assert [d["sticky"] for d in directives] == [["Cite a source."], ["Cite a source."]]
    assert [d["oneshot"] for d in directives] == [["Mention cost."], []]
    assert (records[0].next_score, records[0].score_delta, records[0].hypothesis_validated) == (
        8,
        5,
        True,
    )
    insights = store.queries.insights(spec.session_id)
    (shorter,) = [i for name, i in insights.items() if "brief" in name]
    assert (shorter.success_count, shorter.failure_count) == (2, 0)  # A and B both improved
    assert shorter.avg_score_impact == 5.5 and shorter.confidence == round(2 / 3, 4)
    b_record = store.queries.evolution_records(spec.lineage_id("B"))[0]
    applied = store.queries.events(spec.lineage_id("B"), ["insight.applied"])
    # B evolved after A's outcome was known: the insight was consulted and applied
    assert {e.payload["evolutionId"] for e in applied} == {b_record.id}


async def test_a_refuted_change_is_rolled_back_and_the_comment_trained_on(
    client, store, settings, run_worker
):
    spec = make_spec(prompt=NEUTRAL, max_tokens=300, options={"rollbackRefuted": True})
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await score(handle, 1, 5, "too long")
        await score(handle, 2, 2, "Now it is far too short, I need more depth.")
        state = await wait_for_state(handle, awaiting(3))
    assert state.agent_version == 3 and "rolled back shorter" in state.last_evolution
    assert "asks for longer" in state.last_verdict and "far too short" in state.last_verdict
    lineage = spec.lineage_id("A")
    v2, v3 = (store.queries.agent_definition(_ref(lineage, v)) for v in (2, 3))
    assert "brief" in v2.system_prompt and "brief" not in v3.system_prompt
    assert "depth" in v3.system_prompt  # the comment's own wish, in the same step
    assert v3.parameters.max_tokens > v2.parameters.max_tokens
    kinds = [
        (r.kind, r.from_version, r.to_version) for r in store.queries.evolution_records(lineage)
    ]
    assert kinds == [("evolution", 1, 2), ("evolution", 2, 3)]


async def test_a_low_score_about_something_else_rolls_nothing_back(
    client, store, settings, run_worker
):
    spec = make_spec(prompt=NEUTRAL, max_tokens=600)
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await score(handle, 1, 5, "too long")
        await score(handle, 2, 2, "The salary figures are invented; never make numbers up.")
        state = await wait_for_state(handle, awaiting(3))
    lineage = spec.lineage_id("A")
    v3 = store.queries.agent_definition(_ref(lineage, 3))
    assert "brief" in v3.system_prompt and v3.parameters.max_tokens == 600  # kept
    assert "never invent" in v3.system_prompt.lower()
    assert "untested" in state.last_verdict and "rolled back" not in state.last_evolution


async def test_provenance_names_the_evolution_and_feedback_behind_each_segment(
    client, store, settings, run_worker
):
    spec = make_spec()
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await score(handle, 1, 3, "Way too long, wanted quick bullets")
        await wait_for_state(handle, awaiting(2))
    lineage = spec.lineage_id("A")
    rows = {r.segment: r for r in store.queries.prompt_provenance(lineage)}
    assert rows["You are an expert analyst."].evolution_id is None
    assert rows["You are an expert analyst."].reason == "initial definition"
    bullets = rows["Use bullet points, not paragraphs."]
    assert (bullets.version, bullets.evolution_id) == (2, f"{lineage}:evolution:v1")
    assert bullets.trigger_comment == "Way too long, wanted quick bullets"
    assert "bullets" in bullets.reason
    assert rows["Provide brief, scannable analysis."].version == 2
    assert [r.segment for r in store.queries.prompt_provenance(lineage, version=1)] == [
        "You are an expert analyst.",
        "Provide comprehensive, detailed analysis.",
        "Structure your response professionally.",
    ]
    shown = app_in_process(  # as a process: tests/test_terminal_output.py
        starter,
        # by its workflow id, as Temporal shows it (its lineage id works the same)
        "blame",
        f"lineage-{lineage}",
        "--database-url",
        store.engine.url.render_as_string(hide_password=False),
        env={"COLUMNS": "250"},
    )
    assert shown.returncode == 0, shown.stderr
    assert "Use bullet points, not paragraphs." in shown.stdout
    assert "Way too long, wanted quick bullets" in shown.stdout


async def test_a_scripted_reviewer_is_pleased_within_a_few_cycles(
    client, store, settings, run_worker
):
    spec = make_spec()
    scores = []
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        for cycle in range(1, 7):
            await wait_for_state(handle, awaiting(cycle))
            text = store.queries.artifact_text(f"{spec.lineage_id('A')}:c{cycle}:artifact")
            verdict = review(text, len(text.split()), cycle)
            scores.append(verdict.score)
            if verdict.score >= 8:
                break
            await handle.signal("score", verdict.model_dump())
    print(f"scripted reviewer scores by cycle: {scores}")
    assert scores[0] < 5 and scores[-1] >= 8
    assert len(scores) <= 3
    # what the reviewer said was its own paraphrase, not the trainer's instruction text
    from domain.change_families import FAMILIES

    said = " ".join(
        e.payload.get("comment") or ""
        for e in store.queries.events(spec.lineage_id("A"), ["artifact.scored"])
    )
    assert said and not any(
        text.lower().rstrip(".") in said.lower()
        for text in (f.instruction for f in FAMILIES.values())
        if text
    )


async def test_only_the_refuted_aspect_is_rolled_back(client, store, settings, run_worker):
    # one evolution for two aspects; the next comment says brevity overshot and is silent on
    # tone: the length changes are undone, the tone change stays (rollback is on by default)
    spec = make_spec(prompt=NEUTRAL, max_tokens=300)
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await score(handle, 1, 4, "Rambling and stiff.")
        await score(handle, 2, 3, "Now it is far too thin, I need more depth.")
        state = await wait_for_state(handle, awaiting(3))
    lineage = spec.lineage_id("A")
    v1, v2, v3 = (store.queries.agent_definition(_ref(lineage, v)) for v in (1, 2, 3))
    assert v2.parameters.max_tokens == v1.parameters.max_tokens  # the budget is a ceiling
    assert "relaxed, conversational" in v2.system_prompt and "brief" in v2.system_prompt
    assert v3.parameters.max_tokens >= v1.parameters.max_tokens
    assert "brief" not in v3.system_prompt
    assert "relaxed, conversational" in v3.system_prompt
    assert "rolled back shorter" in state.last_evolution
    evolved, _ = store.queries.evolution_records(lineage)
    assert evolved.hypothesis_validated is False
    assert evolved.outcome_reason.startswith("refuted: shorter")
    (outcome,) = store.queries.events(lineage, ["evolution.outcome"])
    verdicts = {a["family"]: a["verdict"] for a in outcome.payload["aspects"]}
    assert verdicts["shorter"] == "refuted" and verdicts["casual"] != "refuted"


async def test_a_needless_tool_call_is_blamed_on_its_span_and_changes_when_the_tool_is_used(
    client, store, settings, run_worker
):
    spec = make_spec(
        prompt="You are a precise analyst.",
        inputs=["Estimate the rent saved by 12 remote engineers: compute 12 * 1200 first."],
        agent_extra={
            "tools": [{"name": "calculator", "description": "Evaluates arithmetic."}],
            "flow": [
                {
                    "name": "research",
                    "prompt": "Gather the numbers for: {input}",
                    "tools": ["calculator"],
                },
                {"name": "answer", "prompt": "Answer '{input}' from: {research}", "tools": []},
            ],
        },
        constraints={"maxTokens": 4096, "allowedTools": ["calculator"]},
    )
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await score(handle, 1, 4, "A calculator to multiply two small numbers? Just work it out.")
        state = await wait_for_state(handle, awaiting(2))
    lineage = spec.lineage_id("A")
    (record,) = store.queries.evolution_records(lineage)
    credit = json.loads(record.credit_assignment)
    assert credit["mode"] == "trajectory"
    rollout = store.queries.rollouts(lineage)[0]
    spans = store.queries.spans(store.queries.attempts(rollout.id)[0].id)
    (tool_span,) = [s for s in spans if s.type == "tool_call"]
    blamed = {c["span_id"]: c for c in credit["trajectory"]}[tool_span.id]
    assert blamed["contribution"] == -1.0 and "arithmetic" in blamed["reason"]
    v1, v2 = (store.queries.agent_definition(_ref(lineage, v)) for v in (1, 2))
    assert v2.tools[0].description.startswith("Evaluates arithmetic. Only for long or exact")
    assert v2.system_prompt == v1.system_prompt and v2.flow == v1.flow
    assert "calculator" in state.last_evolution


def _ref(agent_id: str, version: int):
    from domain.agent import AgentRef

    return AgentRef(agent_id=agent_id, version=version)


async def test_each_score_is_one_cycle_step(client, store, settings, run_worker):
    # cycle 1's score trains version 2; cycle 2's score judges that evolution, is trained on
    # and recorded with the verdict, which is then shared with the session's other lineages:
    # one trainer step and one record per score
    spec = make_spec()
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await score(handle, 1, 3, "Way too long, wanted quick bullets")
        await score(handle, 2, 8, "Much better, short and clear")
        await wait_for_state(handle, awaiting(3))
        events = [e async for e in lineage_history(client, handle)]
    steps = [t for t in map(local_activity_type, events) if t]
    assert steps == [
        "register_lineage",
        "take_cycle_step",
        "record_cycle_step",
        "take_cycle_step",
        "record_cycle_step",
        "share_outcome",
    ]
    (record,) = store.queries.evolution_records(spec.lineage_id("A"))
    assert record.next_score == 8 and record.hypothesis_validated


async def test_a_checking_step_asked_for_runs_in_the_next_cycle(
    client, store, settings, run_worker
):
    spec = make_spec(
        prompt="You are a precise analyst.",
        agent_extra={
            "flow": [
                {"name": "gather", "prompt": "Collect what matters for: {input}", "tools": []},
                {"name": "write", "prompt": "Answer '{input}' from: {gather}", "tools": []},
            ]
        },
    )
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await score(handle, 1, 4, "Numbers get through unchecked; add a final pass to verify them.")
        state = await wait_for_state(handle, awaiting(2))
    assert state.agent_version == 2 and "add step 'check'" in state.last_evolution
    lineage = spec.lineage_id("A")
    second = store.queries.rollouts(lineage)[1]
    spans = store.queries.spans(store.queries.attempts(second.id)[0].id)
    assert "check" in {s.name for s in spans}  # the new step ran, after the others
