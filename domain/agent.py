"""AgentDefinition: the versioned resource a lineage evolves (seed: agent-evolution-system)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from domain.content_hash import content_hash

# Offline model names start with this prefix; anything else is sent to Claude.
OFFLINE_MODEL_PREFIX = "offline"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class CamelModel(BaseModel):
    """Accepts the seeds' camelCase names and snake_case alike; dumps snake_case."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", alias_generator=_camel)


class AgentParameters(CamelModel):
    model: str = Field(min_length=1, max_length=200)
    temperature: float = Field(default=0.7, ge=0.0, le=1.0)
    max_tokens: int = Field(default=1024, ge=1, le=200_000)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)


class AgentConstraints(CamelModel):
    """Immutable for the life of a session: set at creation, never evolved."""

    max_tokens: int | None = Field(default=None, ge=1)
    allowed_tools: list[str] | None = None
    forbidden_patterns: list[str] = Field(default_factory=list)
    # Prompt text no evolution may remove or alter (checked on every proposed change)
    protected_segments: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _patterns_compile(self) -> AgentConstraints:
        import re

        for pattern in self.forbidden_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"forbidden pattern {pattern!r} is not a valid regex: {exc}"
                ) from None
        return self


class AgentTool(CamelModel):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class FlowStep(CamelModel):
    """One step of a multi-step flow: a prompt template over the input and earlier outputs."""

    name: str = Field(min_length=1, max_length=64)
    prompt: str = Field(min_length=1)
    tools: list[str] | None = None


MAX_SYSTEM_PROMPT_CHARS = 100_000


class AgentDefinition(CamelModel):
    """An agent as the user wrote it; mutable parts evolve, constraints never do."""

    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    system_prompt: str = Field(min_length=1, max_length=MAX_SYSTEM_PROMPT_CHARS)
    tools: list[AgentTool] = Field(default_factory=list)
    flow: list[FlowStep] = Field(default_factory=list)
    parameters: AgentParameters
    constraints: AgentConstraints = Field(default_factory=AgentConstraints)

    @model_validator(mode="after")
    def _flow_is_well_formed(self) -> AgentDefinition:
        import string

        declared = {t.name for t in self.tools}
        if len(declared) != len(self.tools):
            raise ValueError("tool names must be unique")
        known = {"input", "previous"}
        for i, step in enumerate(self.flow):
            if step.name in known:
                raise ValueError(f"flow[{i}]: step name {step.name!r} is taken or reserved")
            fields = {f for _, f, _, _ in string.Formatter().parse(step.prompt) if f is not None}
            unknown = sorted(fields - known)
            if unknown:
                raise ValueError(
                    f"flow[{i}] ({step.name}): prompt uses unknown placeholder(s) {unknown}; "
                    f"use {{input}}, {{previous}} or an earlier step's name"
                )
            for tool_name in step.tools or []:
                if tool_name not in declared:
                    raise ValueError(
                        f"flow[{i}] ({step.name}): tool {tool_name!r} is not declared in tools"
                    )
            known.add(step.name)
        return self

    @model_validator(mode="after")
    def _respects_constraints(self) -> AgentDefinition:
        problems = constraint_violations(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def is_offline(self) -> bool:
        return self.parameters.model.startswith(OFFLINE_MODEL_PREFIX)

    def hashed_components(self) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
        """The content behind the three hashes (system prompt, tools, flow), as JSON values."""
        return (
            self.system_prompt,
            [t.model_dump(mode="json") for t in self.tools],
            [s.model_dump(mode="json") for s in self.flow],
        )

    def hashes(self) -> AgentHashes:
        prompt, tools, flow = self.hashed_components()
        return AgentHashes(
            system_prompt_hash=content_hash(prompt),
            tools_hash=content_hash(tools),
            flow_hash=content_hash(flow),
        )


class AgentHashes(BaseModel):
    system_prompt_hash: str
    tools_hash: str
    flow_hash: str


class AgentRef(BaseModel):
    """What crosses Temporal instead of the definition itself."""

    agent_id: str
    version: int


class AgentSnapshot(AgentHashes):
    """Reproducibility record of the exact agent an attempt ran (seed: Attempt.agentSnapshot)."""

    agent_id: str
    version: int


def constraint_violations(agent: AgentDefinition) -> list[str]:
    """Every way the mutable parts break the immutable constraints (empty when compliant)."""
    import re

    c = agent.constraints
    problems: list[str] = []
    if c.max_tokens is not None and agent.parameters.max_tokens > c.max_tokens:
        problems.append(
            f"parameters.maxTokens {agent.parameters.max_tokens} exceeds "
            f"constraints.maxTokens {c.max_tokens}"
        )
    if c.allowed_tools is not None:
        for tool in agent.tools:
            if tool.name not in c.allowed_tools:
                problems.append(f"tool {tool.name!r} is not in constraints.allowedTools")
        for step in agent.flow:
            for tool_name in step.tools or []:
                if tool_name not in c.allowed_tools:
                    problems.append(
                        f"flow step {step.name!r} uses tool {tool_name!r}, "
                        "which is not in constraints.allowedTools"
                    )
    for pattern in c.forbidden_patterns:
        if re.search(pattern, agent.system_prompt, flags=re.IGNORECASE):
            problems.append(f"systemPrompt matches forbidden pattern {pattern!r}")
        for step in agent.flow:
            if re.search(pattern, step.prompt, flags=re.IGNORECASE):
                problems.append(f"flow step {step.name!r} matches forbidden pattern {pattern!r}")
    for segment in c.protected_segments:
        if segment not in agent.system_prompt:
            problems.append(f"systemPrompt lost the protected segment {segment!r}")
    return problems
