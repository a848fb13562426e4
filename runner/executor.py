"""Executor: runs an AgentDefinition (single call or multi-step flow) on one cycle input.

Every step becomes spans (llm_call, then output); constraints are enforced here so a violating
output fails the attempt with a typed, non-retryable error.
"""

from __future__ import annotations

import re
import string
import time
from collections.abc import Callable

from pydantic import BaseModel

from domain.agent import AgentDefinition
from runner.model_backend import ChatMessage, ModelBackend, ModelError, ModelRequest
from runner.pricing import estimate_cost
from store.recorder import SpanRecord, Usage


class AgentRunError(Exception):
    """The agent could not produce an output. Partial spans travel with it for the record."""

    def __init__(self, message: str, *, retryable: bool, spans: list[SpanRecord]) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.spans = spans


class ConstraintViolation(AgentRunError):
    """The output broke an immutable constraint (e.g. a forbidden pattern)."""


class FlowTemplateError(AgentRunError):
    """A flow step's prompt names a placeholder that does not exist."""


class ExecutionResult(BaseModel):
    output: str
    spans: list[SpanRecord]
    usage: Usage


def _render(template: str, values: dict[str, str], step: str) -> str:
    names = {field for _, field, _, _ in string.Formatter().parse(template) if field}
    unknown = sorted(names - values.keys())
    if unknown:
        raise KeyError(
            f"flow step {step!r} uses unknown placeholder(s) {unknown}; available: {sorted(values)}"
        )
    return template.format_map(values)


class Executor:
    def __init__(self, backend_for: Callable[[str], ModelBackend]) -> None:
        self._backend_for = backend_for

    async def run(
        self,
        agent: AgentDefinition,
        cycle_input: str,
        span_prefix: str,
    ) -> ExecutionResult:
        spans: list[SpanRecord] = []
        usage = Usage(estimated_cost=0.0)
        max_tokens = agent.parameters.max_tokens
        if agent.constraints.max_tokens is not None:
            max_tokens = min(max_tokens, agent.constraints.max_tokens)
        steps = agent.flow or []
        # (step name, template); a single-call agent is a one-step flow over the input
        prompts = [(s.name, s.prompt) for s in steps] if steps else [("answer", "{input}")]
        values = {"input": cycle_input, "previous": cycle_input}
        try:
            backend = self._backend_for(agent.parameters.model)
        except ModelError as exc:
            raise AgentRunError(str(exc), retryable=exc.retryable, spans=spans) from None
        output = ""
        for name, template in prompts:
            try:
                user = _render(template, values, name)
            except KeyError as exc:
                raise FlowTemplateError(str(exc.args[0]), retryable=False, spans=spans) from None
            request = ModelRequest(
                model=agent.parameters.model,
                system=agent.system_prompt,
                messages=[ChatMessage(role="user", content=user)],
                max_tokens=max_tokens,
                temperature=agent.parameters.temperature,
                top_p=agent.parameters.top_p,
            )
            started = time.perf_counter()
            try:
                reply = await backend.complete(request)
            except ModelError as exc:
                spans.append(
                    SpanRecord(
                        span_id=f"{span_prefix}:s{len(spans) + 1}",
                        sequence=len(spans) + 1,
                        span_type="llm_call",
                        name=name,
                        input=user,
                        model_id=agent.parameters.model,
                        tool_error=str(exc),
                        duration_ms=int((time.perf_counter() - started) * 1000),
                    )
                )
                raise AgentRunError(str(exc), retryable=exc.retryable, spans=spans) from exc
            cost = estimate_cost(reply.model, reply.prompt_tokens, reply.completion_tokens)
            spans.append(
                SpanRecord(
                    span_id=f"{span_prefix}:s{len(spans) + 1}",
                    sequence=len(spans) + 1,
                    span_type="llm_call",
                    name=name,
                    input=user,
                    output=reply.text,
                    model_id=reply.model,
                    prompt_tokens=reply.prompt_tokens,
                    completion_tokens=reply.completion_tokens,
                    duration_ms=int((time.perf_counter() - started) * 1000),
                    estimated_cost=cost,
                )
            )
            usage.prompt_tokens += reply.prompt_tokens
            usage.completion_tokens += reply.completion_tokens
            if cost is None:
                usage.estimated_cost = None
            elif usage.estimated_cost is not None:
                usage.estimated_cost = round(usage.estimated_cost + cost, 8)
            output = reply.text
            values[name] = output
            values["previous"] = output
        llm_span_ids = [s.span_id for s in spans]
        spans.append(
            SpanRecord(
                span_id=f"{span_prefix}:s{len(spans) + 1}",
                parent_span_id=llm_span_ids[-1] if llm_span_ids else None,
                sequence=len(spans) + 1,
                span_type="output",
                name="output",
                output=output,
            )
        )
        for pattern in agent.constraints.forbidden_patterns:
            if re.search(pattern, output, flags=re.IGNORECASE):
                raise ConstraintViolation(
                    f"output matches forbidden pattern {pattern!r}", retryable=False, spans=spans
                )
        return ExecutionResult(output=output, spans=spans, usage=usage)
