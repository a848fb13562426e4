"""RLM workers fanned out on Temporal: namespaced findings in the parent's store, and a worker
that is retried does not duplicate its commit."""

from __future__ import annotations

from collections import Counter
from typing import Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from rlm.analyzer import analyze
from rlm.objects import Card
from rlm.tasks import ApplyCommitInput, FanOutInput, RlmTask
from store.rlm_findings.findings import DatabaseFindingsStore
from worker import build_worker
from workflows.rlm import RlmFanOutWorkflow

DOCS = {
    f"doc{i}": (
        f"Team {i} moved to remote work in 2021. Remote work saves office rent every month. "
        f"Onboarding did not improve for team {i}. Rent fell by a third. "
        f"For the Berlin office, remote work did not save rent: the lease ran on."
    )
    for i in range(8)
}
HYPOTHESIS = Card(id="h-remote", type="hypothesis", description="Remote work saves rent")


class CrashFirstTry(Interceptor):
    """A worker dies in the middle of one analysis: its first attempt fails."""

    def __init__(self, task_id: str) -> None:
        self.task_id, self.crashes = task_id, 0

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        outer = self

        class Crash(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                info = activity.info()
                if (
                    info.activity_type == "rlm_analyze"
                    and info.attempt == 1
                    and input.args[0].task.task_id == outer.task_id
                ):
                    outer.crashes += 1
                    raise RuntimeError("worker lost mid-analysis")
                return await super().execute_activity(input)

        return Crash(next)


def tasks() -> list[RlmTask]:
    return [
        RlmTask(
            task_id=doc,
            prompt="Does remote work save rent?",
            context=text,
            source_id=doc,
            subtasks=[
                RlmTask(
                    task_id=f"{doc}.onboarding",
                    prompt="How did onboarding change?",
                    context=text,
                    source_id=doc,
                ),
                RlmTask(
                    task_id=f"{doc}.rent",
                    prompt="What happened to rent?",
                    context=text,
                    source_id=doc,
                ),
            ],
        )
        for doc, text in DOCS.items()
    ]


async def test_eight_workers_depth_two_merge_namespaced_findings(client, store, settings):
    findings = DatabaseFindingsStore(store.engine, "fanout-1")
    findings.create("hypothesis", HYPOTHESIS.description, id=HYPOTHESIS.id)
    crash = CrashFirstTry("doc3.rent")
    async with build_worker_with(client, store, settings, crash):
        result = await client.execute_workflow(
            RlmFanOutWorkflow.run,
            FanOutInput(store_id="fanout-1", tasks=tasks(), cards=[HYPOTHESIS], max_depth=2),
            id=f"rlm-{settings.task_queue}",
            task_queue=settings.task_queue,
        )
    assert crash.crashes == 1  # the retried worker ran twice…
    assert all(r.applied and not r.errors for r in result.results)
    objects = findings.view()
    ids = [o.id for o in objects]
    assert len(ids) == len(set(ids))  # …and its findings are there once
    per_doc = Counter(i.split("/")[0] for i in ids if "/" in i)
    top = analyze("doc0", "Does remote work save rent?", DOCS["doc0"], "doc0", [HYPOTHESIS])
    subs = [
        analyze(f"doc0.{s}", p, DOCS["doc0"], "doc0", [HYPOTHESIS])
        for s, p in (
            ("onboarding", "How did onboarding change?"),
            ("rent", "What happened to rent?"),
        )
    ]
    expected = len(top.creates) + len(top.links) + sum(len(c.creates) + len(c.links) for c in subs)
    assert set(per_doc.values()) == {expected}  # every worker, every depth, exactly once
    assert len(per_doc) == 8
    sub_evidence = findings.view("type=evidence source=doc3")
    assert "doc3/w-doc3/sub-doc3.rent/w-doc3.rent/e1" in [o.id for o in sub_evidence]
    nested_summary = findings.get("doc3/w-doc3/sub-doc3.rent/w-doc3.rent/summary")
    assert "doc3/w-doc3/sub-doc3.rent/w-doc3.rent/e1" in nested_summary.parents
    links = findings.view("type=link")
    kinds = Counter(link.content["type"] for link in links)
    assert kinds["supports"] > 0 and kinds["contradicts"] > 0
    assert all(link.content["dst"] == HYPOTHESIS.id for link in links)
    assert findings.summary()["links"] == dict(kinds)

    # merging the same commit again (a retried merge) changes nothing
    from activities.rlm import RlmActivities

    again = RlmActivities(store).rlm_apply_commit(
        ApplyCommitInput(store_id="fanout-1", commit=top.model_copy(), batch_prefix="doc0x")
    )
    assert again.applied
    twice = RlmActivities(store).rlm_apply_commit(
        ApplyCommitInput(store_id="fanout-1", commit=top.model_copy(), batch_prefix="doc0x")
    )
    assert twice.already_applied
    assert len(findings.objects()) == len(ids) + len(top.creates) + len(top.links)


def build_worker_with(client, store, settings, interceptor):
    return build_worker(client, store, settings, interceptors=[interceptor])


async def test_trajectory_credit_for_a_ten_step_agent_goes_through_rlm_findings(
    client, store, settings, run_worker
):
    import json

    from client import start_session
    from domain.trainer import ScoreAnalysis
    from tests.conftest import awaiting, make_spec, wait_for_state
    from trainer import rlm_credit
    from trainer.backends import TrainerBackends

    flow = [{"name": f"step{i}", "prompt": "Improve: {previous}"} for i in range(10)]
    spec = make_spec(agent_extra={"flow": flow})
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 2, "comment": "way too long"})
        state = await wait_for_state(handle, awaiting(2))
    lineage = spec.lineage_id("A")
    (record,) = store.queries.evolution_records(lineage)
    credit = json.loads(record.credit_assignment)
    assert credit["mode"] == "trajectory" and len(credit["trajectory"]) == 10
    attempt = store.queries.attempts(store.queries.rollouts(lineage)[0].id)[0]
    findings = DatabaseFindingsStore(store.engine, f"credit:{attempt.id}")
    claims = findings.view("type=claim")
    assert len(claims) == 10
    assert {c.id.split("/")[0] for c in claims} == {"chunk0", "chunk1", "chunk2"}  # 4+4+2
    assert [c.backrefs[0].source_id for c in claims] == [t["span_id"] for t in credit["trajectory"]]
    # a retried cycle step's credit merges nothing twice
    attempt_id = store.queries.attempts(store.queries.rollouts(lineage)[0].id)[0].id
    again = await rlm_credit.trajectory_credit(
        TrainerBackends(settings).rules,
        store.queries.agent_definition(_ref(lineage, 1)),
        ScoreAnalysis.model_validate(json.loads(record.score_analysis)),
        store.queries.span_records(attempt_id),
        findings,
    )
    assert len(again.trajectory) == 10 and len(findings.objects()) == 10
    assert state.agent_version == 2


def _ref(agent_id: str, version: int):
    from domain.agent import AgentRef

    return AgentRef(agent_id=agent_id, version=version)
