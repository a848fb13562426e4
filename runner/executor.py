"""Executor: runs an AgentDefinition (one call, or a multi-step flow with tools) on one input.

Each flow step is a prompt template over the cycle input and earlier steps' outputs, answered
in its own conversation; when the model asks for tools, they run (if allowed) and their results
go back to the model until it answers. Every model call, tool call, tool result, piece of
reasoning and the output is an OpenTelemetry span; the collector turns them into execution
spans. Constraints are enforced here: a forbidden pattern fails the attempt with a typed,
non-retryable error; a disallowed tool is refused and the refusal is fed back and recorded.
"""

from __future__ import annotations

import asyncio
import json
import re
import string
from collections.abc import Callable

from opentelemetry import trace
from pydantic import BaseModel

from domain.agent import AgentDefinition, FlowStep
from domain.execution import CUT_OFF, SpanRecord, Usage
from runner import tracer as attr
from runner.model_backend import (
    ChatMessage,
    ContentBlock,
    ModelBackend,
    ModelError,
    ModelRequest,
    ToolSpec,
)
from runner.pricing import estimate_cost
from runner.tools import ToolContext, ToolError, ToolRegistry
from runner.tracer import AgentTracer, ExecutionSpanCollector, set_if

MAX_TOOL_TURNS = 8
TOOL_TIMEOUT_SECONDS = 30.0
SINGLE_STEP = FlowStep(name="answer", prompt="{input}")


class AgentRunError(Exception):
    """The agent could not produce an output. Spans recorded so far travel with it."""

    def __init__(self, message: str, *, retryable: bool, spans: list[SpanRecord] | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.spans = spans or []


class ConstraintViolation(AgentRunError):
    """The output broke an immutable constraint (a forbidden pattern)."""


class FlowTemplateError(AgentRunError):
    """A flow step's prompt names a placeholder that does not exist."""


class ExecutionResult(BaseModel):
    output: str
    spans: list[SpanRecord]
    usage: Usage
    # why the model stopped: "max_tokens" when any step's answer was cut off at the token limit
    stop_reason: str | None = None

    @property
    def cut_off(self) -> bool:
        return self.stop_reason == CUT_OFF


def render(template: str, values: dict[str, str], step: str) -> str:
    names = {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
    unknown = sorted(names - values.keys())
    if unknown:
        raise FlowTemplateError(
            f"flow step {step!r} uses unknown placeholder(s) {unknown}; "
            f"available: {sorted(values)}",
            retryable=False,
        )
    return template.format_map(values)


def _given(template: str, values: dict[str, str], before: str) -> dict[str, str]:
    """What a step's prompt is filled in with, in the prompt's order, by what each stands for:
    ``{previous}`` is the step before's output (the question's, for the first step)."""
    given: dict[str, str] = {}
    for _, name, _, _ in string.Formatter().parse(template):
        if name is not None:
            given.setdefault(before if name == "previous" else name, values[name])
    return given


class Executor:
    def __init__(
        self,
        backend_for: Callable[[str], ModelBackend],
        registry: ToolRegistry,
        tracer: trace.Tracer,
        collector: ExecutionSpanCollector,
    ) -> None:
        self._backend_for = backend_for
        self._registry = registry
        self._tracer = tracer
        self._collector = collector

    async def run(
        self, agent: AgentDefinition, cycle_input: str, attempt_id: str, tools: ToolContext
    ) -> ExecutionResult:
        try:
            output, usage, stop_reason = await self._run(agent, cycle_input, attempt_id, tools)
        except AgentRunError as exc:
            exc.spans = self._collector.drain(attempt_id)
            raise
        except BaseException:
            self._collector.drain(attempt_id)
            raise
        return ExecutionResult(
            output=output,
            spans=self._collector.drain(attempt_id),
            usage=usage,
            stop_reason=stop_reason,
        )

    def offered_tools(self, agent: AgentDefinition, step: FlowStep) -> list[ToolSpec]:
        """The tools this step may use: declared ∩ the step's subset ∩ constraints.allowedTools."""
        allowed = agent.constraints.allowed_tools
        specs = []
        for tool in agent.tools:
            if step.tools is not None and tool.name not in step.tools:
                continue
            if allowed is not None and tool.name not in allowed:
                continue
            implementation = self._registry.get(tool.name)
            declared_schema = tool.input_schema != {"type": "object"}
            specs.append(
                ToolSpec(
                    name=tool.name,
                    description=tool.description
                    or (implementation.description if implementation else ""),
                    input_schema=tool.input_schema
                    if declared_schema or implementation is None
                    else self._registry.schema(tool.name),
                )
            )
        return specs

    async def _run(
        self, agent: AgentDefinition, cycle_input: str, attempt_id: str, ctx: ToolContext
    ) -> tuple[str, Usage, str | None]:
        """(output, usage, stop reason): the reason is the last answer's, or ``CUT_OFF`` when
        any step's answer was cut at the token limit (a later step read a truncated text)."""
        try:
            backend = self._backend_for(agent.parameters.model)
        except ModelError as exc:
            raise AgentRunError(str(exc), retryable=exc.retryable) from None
        t = AgentTracer(
            self._tracer, attempt_id, "anthropic" if backend.name == "claude" else backend.name
        )
        params = agent.parameters
        max_tokens = min(params.max_tokens, agent.constraints.max_tokens or params.max_tokens)
        usage = Usage(estimated_cost=0.0)
        values = {"input": cycle_input, "previous": cycle_input}
        last_llm: trace.Span | None = None
        output = ""
        stop_reason: str | None = None
        before = "input"  # what {previous} stands for: the question, then the last step
        for step in agent.flow or [SINGLE_STEP]:
            prompt = render(step.prompt, values, step.name)
            given = _given(step.prompt, values, before)
            before = step.name
            offered = self.offered_tools(agent, step)
            messages = [ChatMessage(role="user", content=prompt)]
            feed: trace.Span | None = last_llm  # the span whose output this call consumes
            call_input = prompt
            for _turn in range(MAX_TOOL_TURNS + 1):
                request = ModelRequest(
                    model=params.model,
                    system=agent.system_prompt,
                    messages=messages,
                    max_tokens=max_tokens,
                    temperature=params.temperature,
                    top_p=params.top_p,
                    tools=offered,
                    given=given,
                )
                with t.span(
                    "llm_call",
                    f"chat {params.model}",
                    parent=feed,
                    **{
                        attr.OPERATION: "chat",
                        attr.STEP: step.name,
                        attr.REQUEST_MODEL: params.model,
                        attr.REQUEST_MAX_TOKENS: max_tokens,
                        attr.REQUEST_TEMPERATURE: params.temperature,
                        attr.REQUEST_TOP_P: params.top_p,
                        attr.INPUT: call_input,
                    },
                ) as llm:
                    try:
                        reply = await backend.complete(request)
                    except ModelError as exc:
                        llm.set_attribute(attr.TOOL_ERROR, str(exc))
                        raise AgentRunError(str(exc), retryable=exc.retryable) from exc
                    cost = estimate_cost(reply.model, reply.prompt_tokens, reply.completion_tokens)
                    set_if(
                        llm,
                        **{
                            attr.RESPONSE_MODEL: reply.model,
                            attr.FINISH_REASONS: [reply.stop_reason] if reply.stop_reason else None,
                            attr.INPUT_TOKENS: reply.prompt_tokens,
                            attr.OUTPUT_TOKENS: reply.completion_tokens,
                            attr.COST: cost,
                            attr.OUTPUT: reply.text
                            or json.dumps([b.to_api() for b in reply.tool_uses]),
                        },
                    )
                usage.prompt_tokens += reply.prompt_tokens
                usage.completion_tokens += reply.completion_tokens
                usage.estimated_cost = (
                    None
                    if cost is None or usage.estimated_cost is None
                    else round(usage.estimated_cost + cost, 8)
                )
                last_llm = llm
                if not reply.tool_uses:
                    if stop_reason != CUT_OFF:
                        stop_reason = reply.stop_reason
                    output = reply.text
                    self._check_output(agent, output, step.name)
                    values[step.name] = output
                    values["previous"] = output
                    break
                for block in reply.content:
                    if block.type == "thinking" or (block.type == "text" and block.text):
                        with t.span(
                            "reasoning",
                            "reasoning",
                            parent=llm,
                            **{attr.STEP: step.name, attr.OUTPUT: block.text},
                        ):
                            pass
                messages.append(ChatMessage(role="assistant", content=reply.content))
                results: list[ContentBlock] = []
                for use in reply.tool_uses:
                    result, feed = await self._tool(t, llm, use, offered, step, ctx)
                    results.append(result)
                messages.append(ChatMessage(role="user", content=results))
                call_input = "\n".join(f"[{r.tool_use_id}] {r.content}" for r in results)
            else:
                raise AgentRunError(
                    f"flow step {step.name!r} still asked for tools after {MAX_TOOL_TURNS} turns",
                    retryable=False,
                )
        with t.span("output", "output", parent=last_llm, **{attr.OUTPUT: output}):
            pass
        return output, usage, stop_reason

    async def _tool(
        self,
        t: AgentTracer,
        llm: trace.Span,
        use: ContentBlock,
        offered: list[ToolSpec],
        step: FlowStep,
        ctx: ToolContext,
    ) -> tuple[ContentBlock, trace.Span]:
        name = use.name or ""
        with t.span(
            "tool_call",
            f"execute_tool {name}",
            parent=llm,
            **{
                attr.OPERATION: "execute_tool",
                attr.STEP: step.name,
                attr.TOOL_NAME: name,
                attr.TOOL_CALL_ID: use.id,
                attr.TOOL_TYPE: "function",
                attr.TOOL_ARGS: json.dumps(use.input or {}, sort_keys=True),
                attr.INPUT: json.dumps(use.input or {}, sort_keys=True),
            },
        ) as call:
            error: str | None = None
            content = ""
            if name not in {s.name for s in offered}:
                error = (
                    f"refused: tool {name!r} is not allowed in step {step.name!r} "
                    f"(allowed: {', '.join(s.name for s in offered) or 'none'})"
                )
            else:
                try:
                    content = await asyncio.wait_for(
                        self._registry.call(name, use.input or {}, ctx), TOOL_TIMEOUT_SECONDS
                    )
                except ToolError as exc:
                    error = str(exc)
                except TimeoutError:
                    error = f"{name} timed out after {TOOL_TIMEOUT_SECONDS:g}s"
                except Exception as exc:  # a tool bug is the model's problem to route around
                    error = f"{name} failed: {type(exc).__name__}: {exc}"
            if error:
                call.set_attribute(attr.TOOL_ERROR, error)
            else:
                call.set_attribute(attr.TOOL_RESULT, content)
        with t.span(
            "tool_result",
            f"tool_result {name}",
            parent=call,
            **{
                attr.STEP: step.name,
                attr.TOOL_NAME: name,
                attr.TOOL_CALL_ID: use.id,
                attr.OUTPUT: error or content,
                attr.TOOL_RESULT: None if error else content,
                attr.TOOL_ERROR: error,
            },
        ) as result:
            pass
        block = ContentBlock(
            type="tool_result", tool_use_id=use.id, content=error or content, is_error=bool(error)
        )
        return block, result

    @staticmethod
    def _check_output(agent: AgentDefinition, text: str, step: str) -> None:
        for pattern in agent.constraints.forbidden_patterns:
            if re.search(pattern, text, flags=re.IGNORECASE):
                raise ConstraintViolation(
                    f"output of step {step!r} matches forbidden pattern {pattern!r}",
                    retryable=False,
                )
