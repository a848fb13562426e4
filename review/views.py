"""What the review pages show, gathered from Temporal (which lineages await a score, each
lineage's state) and the store (outputs, versions and the front, evolutions, scores, blame)."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup
from temporalio.client import Client
from temporalio.service import RPCError

from client import session_versions
from domain import search_attributes
from domain.agent import AgentRef
from domain.checks import OutputChecks
from domain.events import RaterScored
from domain.execution import CUT_OFF, preview_of
from domain.lineage import LineageState
from domain.selection import FrontRow
from domain.trace import Trace
from domain.trainer import EvolutionChange, SegmentProvenance, describe_change, verdict_word
from review.render import ChartPoint, markdown, part_diffs, prompt_diff, score_chart
from store import Store
from workflows.lineage import LineageWorkflow

SESSION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
# Lineages producing or awaiting a score (lineages started before the status showed only the
# lifecycle still say awaiting_score while they wait).
LIVE_LINEAGES = (
    f'ExecutionStatus="Running" AND '
    f'{search_attributes.STATUS.name} IN ("running", "awaiting_score")'
)


@dataclass
class InboxItem:
    lineage_id: str
    label: str
    session_id: str
    cycle: int
    waiting_since: datetime
    preview: str
    question: str  # the cycle's input: what the output answers (it changes every cycle)
    output_id: str = ""  # its rollout's id: a score naming it lands on this output or none
    checks: OutputChecks | None = None  # against the reviewer's active wishes
    # several raters: "2 of 3 scored (cy still to score)" (empty for a lineage with one)
    scores_progress: str = ""


@dataclass
class Inbox:
    items: list[InboxItem]
    counts: dict[str, int]  # waiting outputs per session, every session
    session: str | None

    @property
    def signature(self) -> str:
        return json.dumps([(i.lineage_id, i.cycle) for i in self.items])


async def inbox(client: Client, store: Store, session: str | None = None) -> Inbox:
    """Every output awaiting a score, oldest first; ``session`` narrows it to one session.
    Temporal says which lineages are live, the store which of their latest outputs no score
    has reached yet."""
    live = []
    async for execution in client.list_workflows(LIVE_LINEAGES):
        lineage = execution.typed_search_attributes.get(search_attributes.LINEAGE)
        if lineage:
            live.append(lineage)
    rows = await asyncio.to_thread(store.queries.latest_outputs, live, unscored=True)
    counts = Counter(lineage.session_id for lineage, _ in rows)
    items = []
    for lineage, artifact in rows:
        if session is not None and lineage.session_id != session:
            continue
        checks = await asyncio.to_thread(store.queries.output_checks_of, lineage.id, artifact.id)
        text = await asyncio.to_thread(store.queries.payload, artifact.content_hash)
        question = await asyncio.to_thread(store.queries.rollout_input, artifact.rollout_id)
        # several raters: how far the output's scoring is (the lineage's `state` says); only a
        # lineage the store holds raters' scores of is asked, so the inbox needs no worker
        rated = await asyncio.to_thread(store.queries.lineage_events, lineage.id, RaterScored)
        state = await _state(client, f"lineage-{lineage.id}") if rated else None
        progress = ""
        if state is not None and state.cycle == artifact.cycle:
            progress = state.scores_progress or ""
        items.append(
            InboxItem(
                lineage_id=lineage.id,
                label=lineage.label,
                session_id=lineage.session_id,
                cycle=artifact.cycle,
                waiting_since=datetime.fromtimestamp(artifact.created_at / 1000, UTC),
                preview=preview_of(str(text), 280),
                question=question or "",
                output_id=artifact.rollout_id,
                checks=checks,
                scores_progress=progress,
            )
        )
    return Inbox(items=items, counts=dict(sorted(counts.items())), session=session)


@dataclass
class EvolutionView:
    from_version: int
    to_version: int
    kind: str
    hypothesis: str
    changes: list[str]
    trigger_score: float
    trigger_comment: str | None
    verdict: str | None  # validated / refuted…, once the next score judged it
    judged_at: int | None  # the cycle whose score gave the verdict
    diff: Markup


@dataclass
class VersionLine:
    """One version in a card's version history: how it came about, its record over its
    scored cycles and whether it is on the session's front (a branch starts from any)."""

    row: FrontRow
    made_by: str  # "initial", "from A v3", "after “…” (3)"


@dataclass
class LineageCard:
    lineage_id: str
    label: str
    workflow_id: str
    state: LineageState | None
    cycle: int | None = None  # of the output shown
    output_id: str | None = None  # its rollout's id, which the score form sends
    question: str | None = None  # the cycle's input: what the output answers
    output: Markup | None = None
    cut_off: bool = False  # the model stopped at the token limit: the output is unfinished
    checks: OutputChecks | None = None  # against the reviewer's active wishes
    trace: Trace | None = None  # how the output was made: each step's model and tool calls
    evolution: EvolutionView | None = None
    previous_score: tuple[float, str | None] | None = None
    # several raters: each one's comment on that output, (rater, comment), each on its own line
    previous_comments: list[tuple[str, str]] = field(default_factory=list)
    chart: Markup = field(default_factory=Markup)
    blame: list[SegmentProvenance] = field(default_factory=list)
    undo_to: int | None = None  # the version the current one was made from: where undo goes
    versions: list[VersionLine] = field(default_factory=list)  # the version history


@dataclass
class SessionFront:
    """The session's front over every version of every lineage, and its champion."""

    front: list[str]  # "B v2", the versions no other dominates
    champion: str | None  # "B v2", the version promoted
    untested: int  # versions scored on fewer than two cycles


async def session_cards(client: Client, store: Store, session_id: str) -> list[LineageCard]:
    """Every lineage of a session, side by side: state, latest output, what changed and why."""
    lineages = await asyncio.to_thread(store.queries.session_lineages, session_id)
    states = await asyncio.gather(*(_state(client, row.workflow_id) for row in lineages))
    versions = await asyncio.to_thread(session_versions, store, session_id)
    cards = await asyncio.gather(
        *(
            asyncio.to_thread(_card, store, row.id, row.label, row.workflow_id, state, versions)
            for row, state in zip(lineages, states, strict=True)
        )
    )
    return list(cards)


def session_front(versions: list[FrontRow]) -> SessionFront:
    champion = next((r.record.name for r in versions if r.record.champion), None)
    return SessionFront(
        front=[r.record.name for r in versions if r.on_front],
        champion=champion,
        untested=sum(not r.record.tested for r in versions),
    )


async def lineage_card(client: Client, store: Store, lineage_id: str) -> LineageCard | None:
    row = await asyncio.to_thread(store.queries.lineage, lineage_id)
    if row is None:
        return None
    state = await _state(client, row.workflow_id)
    versions = await asyncio.to_thread(session_versions, store, row.session_id)
    return await asyncio.to_thread(
        _card, store, row.id, row.label, row.workflow_id, state, versions
    )


async def signatures(client: Client, store: Store, session_id: str) -> str:
    """What changes when anything a rater sees on the session's page changes."""
    lineages = await asyncio.to_thread(store.queries.session_lineages, session_id)
    states = await asyncio.gather(*(_state(client, row.workflow_id) for row in lineages))
    return json.dumps(
        [
            [
                row.id,
                s.cycle,
                s.status,
                s.agent_version,
                len(s.score_history),
                s.rejected_feedback,
                s.locked,
                s.sticky_count + s.oneshot_count,
                len(s.corrections),
                s.corrections_waiting,
                s.output_id,
                # a correction that makes nothing new changes only what the card says
                s.last_reading,
                s.last_evolution,
                s.scores_progress,  # several raters: one more has scored
                # or one has scored again (the count stays): the others' wishes changed
                [r.evaluation_id for r in s.rater_scores],
                s.disputes,
            ]
            if s
            else [row.id]
            for row, s in zip(lineages, states, strict=True)
        ]
    )


async def _state(client: Client, workflow_id: str) -> LineageState | None:
    try:
        return await client.get_workflow_handle(workflow_id).query(LineageWorkflow.state)
    except RPCError:
        return None


def _raters_comments(store: Store, lineage_id: str, cycle: int) -> list[tuple[str, str]]:
    """Each rater's latest comment on the cycle's output (none for a single rater): the cycle's
    own comment runs them together, and one quote would hide who said what."""
    latest: dict[str, RaterScored] = {}
    for scored in store.queries.lineage_events(lineage_id, RaterScored):
        if scored.cycle == cycle:
            latest[scored.rater.casefold()] = scored  # a later score replaces, as it counts
    return [(s.rater, s.comment) for s in latest.values() if s.comment]


def _card(
    store: Store,
    lineage_id: str,
    label: str,
    workflow_id: str,
    state: LineageState | None,
    versions: Sequence[FrontRow] = (),
) -> LineageCard:
    q = store.queries
    card = LineageCard(lineage_id=lineage_id, label=label, workflow_id=workflow_id, state=state)
    outputs = q.latest_outputs([lineage_id])
    # the version that produced the output shown, the one being scored
    version = state.agent_version if state else None
    if outputs:
        _, artifact = outputs[0]
        card.cycle = artifact.cycle
        card.output_id = artifact.rollout_id
        card.question = q.rollout_input(artifact.rollout_id)
        card.output = markdown(str(q.payload(artifact.content_hash)))
        card.cut_off = any(
            a.id == artifact.attempt_id and a.stop_reason == CUT_OFF
            for a in q.attempts(artifact.rollout_id)
        )
        version = artifact.agent_version
        card.checks = q.output_checks_of(lineage_id, artifact.id)
        card.trace = q.rollout_trace(artifact.rollout_id)
    records = q.evolution_records(lineage_id)
    evaluations = q.evaluations(lineage_id)
    current = [r for r in records if state and r.to_version == state.agent_version]
    card.undo_to = current[-1].from_version if current else None
    if evaluations:
        card.previous_score = (evaluations[-1].score, evaluations[-1].comment)
        card.previous_comments = _raters_comments(store, lineage_id, evaluations[-1].cycle)
    # The change that made that version stays on the card while its outputs are scored, a
    # score that kept the version included: it is what the rater is judging
    produced = [r for r in records if r.to_version == version]
    if produced:
        r = produced[-1]
        before = q.agent_definition(AgentRef(agent_id=lineage_id, version=r.from_version))
        after = q.agent_definition(AgentRef(agent_id=lineage_id, version=r.to_version))
        verdict = verdict_of(r)
        card.evolution = EvolutionView(
            from_version=r.from_version,
            to_version=r.to_version,
            kind=r.kind,
            hypothesis=r.hypothesis,
            changes=[
                describe_change(EvolutionChange.model_validate(c)) for c in json.loads(r.changes)
            ],
            trigger_score=r.trigger_score,
            trigger_comment=r.trigger_comment,
            verdict=verdict,
            # the first score on the new version's output judged it
            judged_at=next(
                (e.cycle for e in evaluations if e.agent_version == r.to_version and verdict),
                None,
            ),
            diff=prompt_diff(before.system_prompt, after.system_prompt)
            + _parameter_diff(
                before.parameters.model_dump(by_alias=True),
                after.parameters.model_dump(by_alias=True),
            )
            + part_diffs(before, after),
        )
    verdicts = {r.to_version: verdict_of(r) for r in records if r.hypothesis_validated is not None}
    points, judged = [], set()
    for e in evaluations:
        verdict = verdicts.get(e.agent_version) if e.agent_version not in judged else None
        judged.add(e.agent_version)
        points.append(
            ChartPoint(cycle=e.cycle, score=e.score, version=e.agent_version or 1, verdict=verdict)
        )
    card.chart = score_chart(points)
    try:
        card.blame = q.agent_provenance(lineage_id)
    except KeyError:
        card.blame = []
    made = {r.to_version: r for r in records}
    for row in versions:
        if row.record.lineage_id != lineage_id:
            continue
        r = made.get(row.record.version)
        if row.record.branched_from:
            said = f"from {row.record.branched_from}"
        elif r is None:
            said = "initial"
        else:
            kind = "" if r.kind == "evolution" else f"{r.kind}, "
            after = (
                f"“{r.trigger_comment}” ({r.trigger_score:g})"
                if r.trigger_comment
                else f"a score of {r.trigger_score:g}"
            )
            said = f"{kind}after {after}"
        card.versions.append(VersionLine(row=row, made_by=said))
    return card


def verdict_of(record: Any) -> str | None:
    """The verdict the next score gave an evolution, in the words `state` and the history use
    (None: not judged yet)."""
    if record.hypothesis_validated is None:
        return None
    return verdict_word(record.hypothesis_validated, record.outcome_reason)


def _parameter_diff(before: dict[str, Any], after: dict[str, Any]) -> Markup:
    changed = [
        f"{key} {before.get(key)} → {after.get(key)}"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]
    if not changed:
        return Markup("")
    items = "".join(f"<li>{Markup.escape(c)}</li>" for c in changed)
    return Markup(f'<ul class="parameters">{items}</ul>')  # items escaped above
