"""The trace of a cycle's output as a reviewer reads it: each flow step with its model calls and
tool calls — what was asked, what came back, how long it took — built from the execution spans
of the rollout's attempts (a retry, a revision each an attempt of its own).

Arguments and results are bounded here; they are text from outside (a document, a model's
reply), so whoever prints them escapes them (``services/terminal.py``, the page's autoescape).
"""

from __future__ import annotations

import json
import re
import string
from typing import Literal

from pydantic import BaseModel

from domain.agent import FlowStep
from domain.execution import SpanRecord

ARGUMENT_CHARS = 200  # of a tool's arguments (JSON)
RESULT_CHARS = 300  # of what a call gave back
_REVISION = re.compile(r":r(\d+)$")
_ATTEMPT = re.compile(r":a(\d+)$")


def bounded(text: str, limit: int) -> str:
    """``text`` on one line (runs of whitespace as one space), cut at a word before ``limit``
    characters and saying how much was left out."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return f"{cut.rstrip()} … (+{len(flat) - len(cut.rstrip())} characters)"


class TracedCall(BaseModel):
    """One model call or tool call of a step."""

    number: int  # its place among the attempt's calls, from 1 ("the second search")
    kind: Literal["model", "tool"]
    name: str  # the model, or the tool
    arguments: str | None = None  # a tool's, as JSON, bounded
    result: str  # the model's reply, the tool's result or its error, bounded
    error: bool = False
    duration_ms: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def tokens(self) -> str | None:
        """``"40+12 tokens"`` for a model call that reported them."""
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return f"{self.prompt_tokens or 0}+{self.completion_tokens or 0} tokens"


class TracedStep(BaseModel):
    name: str
    calls: list[TracedCall]
    # what the step's prompt was given, from the flow of the version that ran: "the question",
    # an earlier step's name (its output); empty when not known (a revision's single step)
    given: list[str] = []


class TracedAttempt(BaseModel):
    """One run of the agent at the cycle: a try, a retry, or a revision of a try's output."""

    attempt_id: str
    status: str  # running / succeeded / failed
    error: str | None = None
    shown: bool = False  # it produced the output shown for scoring
    steps: list[TracedStep]

    @property
    def label(self) -> str:
        revision = _REVISION.search(self.attempt_id)
        if revision:
            return f"revision {revision.group(1)}"
        attempt = _ATTEMPT.search(self.attempt_id)
        return f"attempt {attempt.group(1)}" if attempt else self.attempt_id

    @property
    def calls(self) -> list[TracedCall]:
        return [call for step in self.steps for call in step.calls]


class Trace(BaseModel):
    """Every attempt of one rollout, in the order they ran."""

    rollout_id: str
    attempts: list[TracedAttempt]

    def summary(self) -> str:
        """``"3 steps · 4 model calls · 2 tool calls"`` of the attempt shown (else the last)."""
        shown = [a for a in self.attempts if a.shown] or self.attempts[-1:]
        if not shown:
            return "no calls recorded"
        calls = shown[0].calls
        models = sum(c.kind == "model" for c in calls)
        tools = sum(c.kind == "tool" for c in calls)
        return (
            f"{_count(len(shown[0].steps), 'step')} · {_count(models, 'model call')} · "
            f"{_count(tools, 'tool call')}"
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


QUESTION = "the question"


def step_inputs(flow: list[FlowStep]) -> dict[str, list[str]]:
    """What each step of ``flow`` is given: the question (``{input}``), or an earlier step's
    output (by its name; ``{previous}`` is the step before), in the order its prompt names them."""
    given: dict[str, list[str]] = {}
    earlier = QUESTION
    for step in flow:
        fields = [f for _, f, _, _ in string.Formatter().parse(step.prompt) if f is not None]
        named = [
            QUESTION if f == "input" else earlier if f == "previous" else f
            for f in dict.fromkeys(fields)
        ]
        given[step.name] = list(dict.fromkeys(named))
        earlier = step.name
    return given


def traced_steps(
    spans: list[SpanRecord], given: dict[str, list[str]] | None = None
) -> list[TracedStep]:
    """An attempt's spans as its flow steps, in order, each with its model and tool calls (the
    tool-result, reasoning and output spans repeat what the calls already show) and what it
    was given (``given``: ``step_inputs`` of the flow that ran)."""
    steps: list[TracedStep] = []
    number = 0
    for span in sorted(spans, key=lambda s: s.sequence):
        call = _call(span, number + 1)
        if call is None:
            continue
        number += 1
        step = span.name or "answer"
        if not steps or steps[-1].name != step:
            steps.append(TracedStep(name=step, calls=[], given=(given or {}).get(step, [])))
        steps[-1].calls.append(call)
    return steps


def _call(span: SpanRecord, number: int) -> TracedCall | None:
    if span.span_type == "llm_call":
        return TracedCall(
            number=number,
            kind="model",
            name=span.model_id or "model",
            result=bounded(span.output or span.tool_error or "", RESULT_CHARS),
            error=span.output is None and span.tool_error is not None,
            duration_ms=span.duration_ms,
            prompt_tokens=span.prompt_tokens,
            completion_tokens=span.completion_tokens,
        )
    if span.span_type == "tool_call":
        arguments = json.dumps(span.tool_args or {}, ensure_ascii=False, sort_keys=True)
        failed = span.tool_error is not None
        return TracedCall(
            number=number,
            kind="tool",
            name=span.tool_name or "tool",
            arguments=bounded(arguments, ARGUMENT_CHARS),
            result=bounded((span.tool_error if failed else span.tool_result) or "", RESULT_CHARS),
            error=failed,
            duration_ms=span.duration_ms,
        )
    return None
