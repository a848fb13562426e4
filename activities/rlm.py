"""RLM activities: a worker's analysis, and merging its commit into a durable store."""

from __future__ import annotations

from temporalio import activity

from rlm import analyzer
from rlm.commit import Commit, CommitResult
from rlm.tasks import ApplyCommitInput, RlmWorkerInput
from store import Store
from store.findings import DatabaseFindingsStore


class RlmActivities:
    def __init__(self, store: Store) -> None:
        self.store = store

    @activity.defn(name="rlm_analyze")
    def rlm_analyze(self, inp: RlmWorkerInput) -> Commit:
        t = inp.task
        return analyzer.analyze(t.task_id, t.prompt, t.context, t.source_id, inp.cards)

    @activity.defn(name="rlm_apply_commit")
    def rlm_apply_commit(self, inp: ApplyCommitInput) -> CommitResult:
        """Idempotent: a retried worker or a retried merge changes nothing the second time."""
        findings = DatabaseFindingsStore(self.store.engine, inp.store_id, self.store.read_engine)
        return findings.apply_commit(inp.commit, batch_prefix=inp.batch_prefix, worker=inp.worker)
