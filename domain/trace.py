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

    def flow_run(self) -> TracedAttempt | None:
        """The attempt that ran the flow for the output shown (else for the last attempt):
        that attempt, or for a revision, which rewrites one answer in one call, the try it
        revised. A call pointed at by its place ("the fourth call") is one of its calls."""
        shown = next((a for a in self.attempts if a.shown), None)
        if shown is None and not self.attempts:
            return None
        shown = shown or self.attempts[-1]
        tried = _REVISION.sub("", shown.attempt_id)
        return next((a for a in self.attempts if a.attempt_id == tried), shown)

    def summary(self) -> str:
        """What the trace shows, counted whole: ``"3 steps · 4 model calls · 2 tool calls"``,
        and for a cycle run more than once (a retry, a revision) every attempt's steps and
        calls, each attempt listed below: ``"2 attempts · 4 steps · 6 model calls · 3 tool
        calls"``."""
        if not self.attempts:
            return "no calls recorded"
        calls = [c for a in self.attempts for c in a.calls]
        steps = sum(len(a.steps) for a in self.attempts)
        models = sum(c.kind == "model" for c in calls)
        tools = sum(c.kind == "tool" for c in calls)
        said = f"{_count(steps, 'step')} · {_count(models, 'model call')} · "
        said += _count(tools, "tool call")
        several = len(self.attempts)
        return f"{_count(several, 'attempt')} · {said}" if several > 1 else said


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


# ---- a call pointed at by its place ("the fourth call", "the last search") -------------------

POINTED = "at:"  # the context of a tool wish's detail that says what its place holds


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
             "ninth", "tenth")  # fmt: skip


def place_of(place: str) -> str | None:
    """ "4", "4th", "fourth" → "4"; "last", "final" → "last"; None for no place."""
    if place in ("last", "final"):
        return "last"
    if place in _ORDINALS:
        return str(_ORDINALS.index(place) + 1)
    digits = re.match(r"\d+", place)
    return digits.group(0) if digits else None


def at_place(calls: list[TracedCall], place: str) -> TracedCall | None:
    """The call ``place`` points at: the call of that number in the trace, or for "last" the
    last tool call (a call named by its tool's work, "the last search", is a tool's)."""
    place = place_of(place) or ""
    if place == "last":
        return next((c for c in reversed(calls) if c.kind == "tool"), None)
    return next((c for c in calls if str(c.number) == place), None)


def pointed(detail: str, calls: list[TracedCall], cycle: int) -> str:
    """A tool wish's detail (``search|less|call:4``: its tool, direction and context) with
    what its place holds in cycle ``cycle``'s trace (``calls``, the run's): the tool at that
    place becomes the wish's (``read_document|less|call:4+at:2:tool``), or the detail says the
    call there is a model's (``at:2:model``) or that there is no such call (``at:2:none=9``,
    the run's calls). Unchanged without a place or a trace."""
    name, direction, context = (detail + "||").split("|")[:3]
    said = [c for c in context.split("+") if c and not c.startswith(POINTED)]
    place = next((c.removeprefix("call:") for c in said if c.startswith("call:")), None)
    if place is None or place_of(place) is None or not calls:
        return detail
    call = at_place(calls, place)
    if call is None:
        found = f"none={len(calls)}"
    elif call.kind == "model":
        found = "model"
    else:
        name, found = call.name.lower(), "tool"
    return f"{name}|{direction}|{'+'.join([*said, f'{POINTED}{cycle}:{found}'])}"


def pointing_words(place: str, at: str, name: str) -> str:
    """What a place held, in words: "call 4 in cycle 2's trace is read_document", "… is a
    model call, not a tool's", "cycle 2's trace has no call 12: it made 9 calls"."""
    cycle, _, found = at.partition(":")
    place = place_of(place) or place
    where = f"cycle {cycle}'s trace"
    which = "the last tool call" if place == "last" else f"call {place}"
    if found == "tool":
        return f"{which} in {where} is {name}"
    if found == "model":
        return f"{which} in {where} is a model call, not a tool's"
    if place == "last":
        return f"{where} has no tool call"
    made = found.removeprefix("none=")
    return f"{where} has no call {place}" + (
        f": it made {_count(int(made), 'call')}" if made.isdigit() else ""
    )
