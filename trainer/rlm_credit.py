"""Trajectory credit for agents with many spans, as RLM workers: the spans are split into
chunks, each analysed on its own (a separate, bounded call with Claude), and every chunk's
credit returns as a commit of ``claim`` findings merged into a durable findings store. The
merge is idempotent, so a retried activity adds nothing; the claims stay queryable."""

from __future__ import annotations

import asyncio

from domain.agent import AgentDefinition
from domain.execution import SpanRecord
from domain.trainer import CreditAssignment, ScoreAnalysis, TrajectoryCredit
from rlm.commit import Commit, CommitCreate
from rlm.objects import SpanRef
from rlm.store import FindingsStore
from trainer.backends import TrainerBackend

RLM_SPAN_THRESHOLD = 8  # more model calls than this: fan out
CHUNK = 4


def chunks(spans: list[SpanRecord]) -> list[list[SpanRecord]]:
    """Chunks of ``CHUNK`` model calls; a lone remainder joins the previous chunk."""
    out = [spans[i : i + CHUNK] for i in range(0, len(spans), CHUNK)]
    if len(out) > 1 and len(out[-1]) < 2:
        out[-2].extend(out.pop())
    return out


async def trajectory_credit(
    backend: TrainerBackend,
    agent: AgentDefinition,
    analysis: ScoreAnalysis,
    spans: list[SpanRecord],
    findings: FindingsStore,
) -> CreditAssignment:
    llm_spans = [s for s in spans if s.span_type == "llm_call"]
    parts = chunks(llm_spans)
    credits = await asyncio.gather(*(backend.assign_credit(agent, analysis, p) for p in parts))
    for i, (part, credit) in enumerate(zip(parts, credits, strict=True)):
        by_span = {c.span_id: c for c in credit.trajectory}
        commit = Commit(
            commit_id="credit",
            creates=[
                CommitCreate(
                    type="claim",
                    id=f"s{span.sequence}",
                    description=by_span[span.span_id].reason,
                    content={
                        "span_id": span.span_id,
                        "sequence": span.sequence,
                        "contribution": by_span[span.span_id].contribution,
                    },
                    backrefs=[SpanRef(source_id=span.span_id, unit="span")],
                    tags=["trajectory_credit", f"step:{span.name}"],
                )
                for span in part
                if span.span_id in by_span
            ],
        )
        result = findings.apply_commit(commit, batch_prefix=f"chunk{i}")
        if result.errors:
            raise ValueError(f"credit chunk {i}: {'; '.join(result.errors)}")
    claims = sorted(findings.view("type=claim"), key=lambda o: o.content["sequence"])
    return CreditAssignment(
        mode="trajectory",
        trajectory=[
            TrajectoryCredit(
                span_id=o.content["span_id"],
                contribution=o.content["contribution"],
                reason=o.description,
            )
            for o in claims
        ],
    )
