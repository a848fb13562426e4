"""Reads of the evolution view: each lineage's evolution records, the judged changes of a
session and what it learned from them (insights), and where each segment of a prompt came
from."""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import Engine, bindparam
from sqlmodel import col, select

from domain import tool_flow, wants
from domain.agent import AgentDefinition, AgentRef
from domain.prompt_segments import segments
from domain.trainer import (
    ROLLBACK_REASON,
    STRENGTHEN_REASON,
    EvolutionChange,
    FeedbackAspect,
    LearningInsight,
    PastChange,
    ScoreAnalysis,
    SegmentProvenance,
)
from store.tables import EvaluationRow, EvolutionRecordRow, LearningInsightRow, LineageRow
from store.views.lineage_view import LineageView

Part = tuple[str, str, str]  # (part, name, value): a step's prompt, one sentence a part
_evolutions = EvolutionRecordRow.__table__  # type: ignore[attr-defined]
_lineages = LineageRow.__table__  # type: ignore[attr-defined]
_insights = LearningInsightRow.__table__  # type: ignore[attr-defined]
_EVOLUTION = select(_evolutions).where(_evolutions.c.id == bindparam("id"))
_INSIGHTS = select(_insights).where(_insights.c.session_id == bindparam("session_id"))
_JUDGED = (
    select(
        _evolutions.c.id,
        _evolutions.c.lineage_id,
        _evolutions.c.changes,
        _evolutions.c.score_delta,
        _evolutions.c.hypothesis_validated,
    )
    .join(_lineages, _lineages.c.id == _evolutions.c.lineage_id)
    .where(_lineages.c.session_id == bindparam("session_id"), _evolutions.c.score_delta.isnot(None))
    .order_by(_evolutions.c.created_at)
)


class EvolutionView(LineageView):
    """Evolution records, judged changes, insights, prompt provenance (over the lineage
    view's agent versions)."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._past: dict[str, list[PastChange]] = {}

    def evolution_records(self, lineage_id: str) -> list[EvolutionRecordRow]:
        return self._all(
            select(EvolutionRecordRow)
            .where(EvolutionRecordRow.lineage_id == lineage_id)
            .order_by(col(EvolutionRecordRow.from_version))
        )

    def evolution_record(self, evolution_id: str) -> EvolutionRecordRow | None:
        rows = self._rows(EvolutionRecordRow, _EVOLUTION, {"id": evolution_id})
        return rows[0] if rows else None

    def session_evolution_records(self, session_id: str) -> list[EvolutionRecordRow]:
        return self._all(
            select(EvolutionRecordRow)
            .join(LineageRow, col(LineageRow.id) == col(EvolutionRecordRow.lineage_id))
            .where(LineageRow.session_id == session_id)
            .order_by(col(EvolutionRecordRow.created_at))
        )

    def past_changes(self, session_id: str) -> list[PastChange]:
        """Every change of the session whose outcome is known, with that outcome (read on every
        plan: the few columns it needs, and each judged record parsed once per worker, since a
        judged record no longer changes)."""
        with self.engine.connect() as conn:
            judged = conn.execute(_JUDGED, {"session_id": session_id}).all()
        out = []
        for evolution_id, lineage_id, changes, delta, validated in judged:
            with self._lock:
                parsed = self._past.get(evolution_id)
            if parsed is None:
                if validated and delta > 0:
                    verdict = "improved"
                elif delta < 0:
                    verdict = "worsened"
                else:
                    verdict = "neutral"
                parsed = [
                    PastChange(
                        change=EvolutionChange.model_validate(change),
                        outcome=verdict,  # type: ignore[arg-type]
                        score_delta=delta,
                        lineage_id=lineage_id,
                        evolution_id=evolution_id,
                    )
                    for change in json.loads(changes)
                ]
                with self._lock:
                    self._past[evolution_id] = parsed
            out += [p.model_copy() for p in parsed]
        return out

    def insights(self, session_id: str) -> dict[str, LearningInsight]:
        """pattern → what the session has learned about it."""
        with self.engine.connect() as conn:
            rows = conn.execute(_INSIGHTS, {"session_id": session_id}).mappings().all()
        return {
            row["pattern"]: LearningInsight(
                id=row["id"],
                session_id=row["session_id"],
                pattern=row["pattern"],
                pattern_type=row["pattern_type"],
                contexts=json.loads(row["contexts"]),
                success_count=row["success_count"],
                failure_count=row["failure_count"],
                avg_score_impact=round(row["avg_score_impact"], 4),
                confidence=round(row["confidence"], 4),
            )
            for row in rows
        }

    def prompt_provenance(
        self, lineage_id: str, version: int | None = None
    ) -> list[SegmentProvenance]:
        """For each segment of the prompt (of ``version``, default the latest): the version and
        evolution that introduced it, and the feedback behind that evolution."""

        versions = self.agent_versions(lineage_id)
        if not versions:
            raise KeyError(f"lineage {lineage_id} is not in the store")
        records = {r.to_version: r for r in self.evolution_records(lineage_id)}
        # a branch starts from its parent version's provenance: each segment keeps the version
        # and lineage that introduced it, across the branch
        known = self._inherited(lineage_id)
        ever = dict(known)  # where each segment first appeared
        for row in versions:
            if version is not None and row.version > version:
                break
            prompt = self.agent_definition(AgentRef(agent_id=row.agent_id, version=row.version))
            record = records.get(row.version)
            changes = json.loads(record.changes) if record else []
            current: dict[str, SegmentProvenance] = {}
            for segment in segments(prompt.system_prompt):
                if segment in known:
                    current[segment] = known[segment]
                    continue
                made = next((c for c in changes if c.get("after") and segment in c["after"]), None)
                if segment in ever and (made is None or made["reason"].startswith(ROLLBACK_REASON)):
                    # restored by a rollback: credit the evolution that first wrote it
                    current[segment] = ever[segment]
                    continue
                current[segment] = SegmentProvenance(
                    segment=segment,
                    version=row.version,
                    evolution_id=record.id if record else None,
                    trigger_score=record.trigger_score if record else None,
                    trigger_comment=record.trigger_comment if record else None,
                    reason=_provenance_reason(made, record is not None),
                    wish=_wish(made, record),
                    rebuilt_from=self._rebuilt_from(record),
                )
                ever.setdefault(segment, current[segment])
            known = current
        return list(known.values())

    def agent_provenance(
        self, lineage_id: str, version: int | None = None
    ) -> list[SegmentProvenance]:
        """Where every part of the agent (of ``version``, default the latest) came from: each
        segment of its prompt (``prompt_provenance``), then each parameter, tool description,
        flow step's prompt (sentence by sentence, as the system prompt: a step's instruction
        and a line added later come from different changes) and tools, and edge of the flow
        (a step given an earlier step's output): the version that made it as it is, the
        evolution, the feedback and the wish behind it; last, each step taken out of the flow
        since (and not put back), with the version, feedback and wish that took it out."""
        rows = self.prompt_provenance(lineage_id, version)
        records = {r.to_version: r for r in self.evolution_records(lineage_id)}
        known: dict[Part, SegmentProvenance] = {}
        ever: dict[Part, SegmentProvenance] = {}  # where a value first was
        # the steps taken out of the flow (and not put back): where their absence came from
        removed: dict[str, SegmentProvenance] = {}
        prompts: dict[str, str] = {}  # each step's prompt on the version before
        for row in self.agent_versions(lineage_id):
            if version is not None and row.version > version:
                break
            agent = self.agent_definition(AgentRef(agent_id=row.agent_id, version=row.version))
            record = records.get(row.version)
            changes = json.loads(record.changes) if record else []
            made_in = _Made(row.version, record, self._rebuilt_from(record))
            current: dict[Part, SegmentProvenance] = {}
            for key, change_of in _parts(agent, changes):
                before = known.get(key)
                if before is not None:
                    current[key] = before
                    continue
                made = change_of()
                restored = ever.get(key)
                if restored and (made is None or made["reason"].startswith(ROLLBACK_REASON)):
                    current[key] = restored  # a rollback brought it back
                    continue
                current[key] = made_in.row(key, made)
                ever.setdefault(key, current[key])
            steps = {s.name: s.prompt for s in agent.flow}
            for name, prompt in prompts.items():
                if name not in steps:
                    gone = _removal_of(changes, name)
                    removed[name] = made_in.row(("removed step", name, prompt), gone, "step")
            for name in steps:
                removed.pop(name, None)  # back in the flow
            prompts, known = steps, current
        return rows + list(known.values()) + list(removed.values())

    def _inherited(self, lineage_id: str) -> dict[str, SegmentProvenance]:
        """A branch's parent version's provenance, each segment naming the lineage it came
        from; empty for a lineage that is no branch."""
        origin = self.branch_origin(lineage_id)
        if origin is None:
            return {}
        parent = self.lineage(origin.parent_lineage_id)
        label = parent.label if parent else origin.parent_lineage_id
        return {
            p.segment: p if p.lineage_label else p.model_copy(update={"lineage_label": label})
            for p in self.prompt_provenance(origin.parent_lineage_id, origin.parent_version)
        }

    def _rebuilt_from(self, record: EvolutionRecordRow | None) -> int | None:
        """The version a correction was rebuilt from: the one whose output the corrected
        score scored (None for any other evolution)."""
        if record is None or record.kind != "correction":
            return None
        scored = self._all(
            select(EvaluationRow.agent_version).where(EvaluationRow.id == record.evaluation_id)
        )
        return scored[0] if scored else None


def _provenance_reason(change: dict[str, Any] | None, evolved: bool) -> str:
    """Why a segment is in the prompt, read forwards: what it was written for."""
    if change is None:
        return "changed by this evolution" if evolved else "initial definition"
    want = change.get("want")
    if change.get("change_type") == "modify" and change.get("before"):
        done = f"rewritten from {change['before']!r}"
        return f"{done} for {want}" if want else done
    if change.get("reason", "").startswith(STRENGTHEN_REASON):
        return f"written firmer: {change['reason'].removeprefix(STRENGTHEN_REASON)}"
    return str(change.get("reason", ""))


NO_WISH = "no wish asked for it"
_PARAMETERS = {"model": "model", "temperature": "temperature", "maxTokens": "max_tokens",
               "topP": "top_p"}  # fmt: skip


@dataclass(frozen=True)
class _Made:
    """A version of the lineage, as the blame rows of what it made name it."""

    version: int
    record: EvolutionRecordRow | None
    rebuilt_from: int | None

    def row(
        self, key: Part, change: dict[str, Any] | None, why_part: str | None = None
    ) -> SegmentProvenance:
        part, name, value = key
        record = self.record
        return SegmentProvenance(
            segment=value,
            part=part,  # type: ignore[arg-type]
            name=name,
            version=self.version,
            evolution_id=record.id if record else None,
            trigger_score=record.trigger_score if record else None,
            trigger_comment=record.trigger_comment if record else None,
            reason=_part_reason(change, record is not None, why_part or part),
            wish=_wish(change, record),
            rebuilt_from=self.rebuilt_from,
        )


def _parts(
    agent: AgentDefinition, changes: list[dict[str, Any]]
) -> list[tuple[Part, Callable[[], dict[str, Any] | None]]]:
    """Every part blame follows besides the prompt's segments, each with how to find the
    change of ``changes`` that made it as it is: parameters, tool descriptions, each sentence
    of each step's prompt, each step's tools, each edge."""
    parts: list[tuple[Part, Callable[[], dict[str, Any] | None]]] = []

    def add(part: str, name: str, value: str, found: Callable[[], Any] | None = None) -> None:
        parts.append(((part, name, value), found or (lambda: _change_for(changes, part, name))))

    for name, field in _PARAMETERS.items():
        value = getattr(agent.parameters, field)
        if value is not None:
            add("parameter", name, f"{value:g}" if isinstance(value, float) else str(value))
    for tool in agent.tools:
        add("tool", tool.name, tool.description or "(its built-in description)")
    earlier = "input"
    for step in agent.flow:
        for sentence in segments(step.prompt):
            found = partial(_sentence_change, changes, step.name, sentence)
            add("step", step.name, sentence, found)
        tools = "every tool" if step.tools is None else ", ".join(step.tools) or "no tools"
        add("step tools", step.name, tools)
        for source in _inputs(step.prompt):
            given = earlier if source == "previous" else source
            what = "the question" if given == "input" else f"{given}'s output"
            add("edge", f"{given} → {step.name}", f"{step.name} is given {what}")
        earlier = step.name
    return parts


def _sentence_change(
    changes: list[dict[str, Any]], step: str, sentence: str
) -> dict[str, Any] | None:
    """The last change of a version's to ``step`` whose prompt after it holds ``sentence``
    (a step added whole, its prompt changed)."""
    found = [
        c
        for c in changes
        if c["component"] == "flow"
        and c["target"] == step
        and sentence in _prompt_after(c.get("after"))
    ]
    return found[-1] if found else _change_for(changes, "step", step)


def _prompt_after(after: str | None) -> str:
    """The prompt a flow change leaves its step with ("" when it does not set one)."""
    try:
        value = json.loads(after or "")
    except json.JSONDecodeError:
        return after or ""
    return str(value.get("prompt", "")) if isinstance(value, dict) else ""


def _inputs(prompt: str) -> list[str]:
    fields = (f for _, f, _, _ in string.Formatter().parse(prompt) if f is not None)
    return list(dict.fromkeys(fields))


def _change_for(changes: list[dict[str, Any]], part: str, name: str) -> dict[str, Any] | None:
    """The last change of a version's that made ``part`` ``name`` what it is."""
    if part == "parameter":
        found = [c for c in changes if c["component"] == "parameters" and c["target"] == name]
    elif part == "tool":
        found = [c for c in changes if c["component"] == "tools" and c["target"] == name]
    else:
        step = name.rsplit(" → ", 1)[-1]
        found = [c for c in changes if c["component"] == "flow" and c["target"] == step]
        # a step's tools by a change of its tools, its prompt and edges by one of its prompt
        key = '"tools"' if part == "step tools" else '"prompt"'
        found = [c for c in found if c["change_type"] == "add" or key in (c.get("after") or "")
                 or not (c.get("after") or "").lstrip().startswith("{")] or found  # fmt: skip
    return found[-1] if found else None


def _removal_of(changes: list[dict[str, Any]], step: str) -> dict[str, Any] | None:
    """The change of a version's that took ``step`` out of the flow."""
    found = [
        c
        for c in changes
        if c["component"] == "flow" and c["change_type"] == "remove" and c["target"] == step
    ]
    return found[-1] if found else None


def _part_reason(change: dict[str, Any] | None, evolved: bool, part: str) -> str:
    """Why a parameter, tool, step or edge is as it is."""
    if change is None:
        return "changed by this evolution" if evolved else "initial definition"
    reason = str(change.get("reason", ""))
    if part == "parameter" and not change.get("want") and not reason.startswith(ROLLBACK_REASON):
        return f"{reason} ({NO_WISH})"
    return reason


def _wish(change: dict[str, Any] | None, record: EvolutionRecordRow | None) -> str | None:
    """The wish a change carried out, as a want, with the rater's words where the comment
    said it: "tool_first:search_documents", "shorter ('way too long')"."""
    if change is None or record is None or not change.get("want"):
        return None
    family = change["want"]
    aspects = [
        a
        for a in ScoreAnalysis.model_validate_json(record.score_analysis).aspects
        if a.want == family
    ]
    if family in tool_flow.families():  # of several wishes of a family, the one it names
        aspects = [a for a in aspects if a.detail and a.detail in change.get("reason", "")]
    if not aspects:
        return family
    return _said(aspects[0])


def _said(aspect: FeedbackAspect) -> str:
    want = wants.render(aspect) or aspect.want or ""
    quote = aspect.quote or ""
    if not quote or quote.startswith("wants "):
        return want
    return f"{want} ({quote[:80]!r})"
