"""The tool registry: name → implementation with a pydantic input model (its JSON Schema is what
the model sees when the AgentDefinition does not declare one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the model."""


@dataclass
class ToolContext:
    """What a tool may read: the session's documents (read-only)."""

    session_id: str
    documents: Callable[[], dict[str, str]] = field(default=lambda: {})


class Tool(Protocol):
    name: str
    description: str
    Input: type[BaseModel]

    async def run(self, args: BaseModel, ctx: ToolContext) -> str: ...


class ToolRegistry:
    def __init__(self, tools: list[Tool]) -> None:
        self._tools = {t.name: t for t in tools}

    def names(self) -> list[str]:
        return sorted(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def schema(self, name: str) -> dict[str, Any]:
        return self._tools[name].Input.model_json_schema()

    async def call(self, name: str, raw_args: dict[str, Any], ctx: ToolContext) -> str:
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(f"no tool named {name!r}; available: {', '.join(self.names())}")
        try:
            args = tool.Input.model_validate(raw_args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid input for {name}: {problems}") from None
        return await tool.run(args, ctx)
