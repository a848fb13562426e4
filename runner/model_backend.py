"""The model boundary: one request/reply shape for the offline model and Claude.

Messages carry Messages-API content blocks (text, tool_use, tool_result, thinking), so a
tool-use loop looks the same whichever backend answers.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field


class ContentBlock(BaseModel):
    type: Literal["text", "tool_use", "tool_result", "thinking"]
    text: str | None = None  # text; thinking
    id: str | None = None  # tool_use
    name: str | None = None  # tool_use
    input: dict[str, Any] | None = None  # tool_use
    tool_use_id: str | None = None  # tool_result
    content: str | None = None  # tool_result
    is_error: bool = False  # tool_result

    def to_api(self) -> dict[str, Any]:
        if self.type == "text":
            return {"type": "text", "text": self.text or ""}
        if self.type == "tool_use":
            return {"type": "tool_use", "id": self.id, "name": self.name, "input": self.input or {}}
        if self.type == "tool_result":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": self.tool_use_id,
                "content": self.content or "",
            }
            if self.is_error:
                block["is_error"] = True
            return block
        return {"type": "thinking", "thinking": self.text or ""}


class ChatMessage(BaseModel):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]

    def to_api(self) -> dict[str, Any]:
        if isinstance(self.content, str):
            return {"role": self.role, "content": self.content}
        return {"role": self.role, "content": [b.to_api() for b in self.content]}


class ToolSpec(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]


class ModelRequest(BaseModel):
    model: str
    system: str
    messages: list[ChatMessage]
    max_tokens: int
    temperature: float
    top_p: float | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    # What the step's prompt was filled in with, by what it stands for ("input": the cycle's
    # question; an earlier step's name: its output), in the prompt's order. Claude reads the
    # prompt itself and is never sent this; the offline model, which cannot tell a label or an
    # instruction from material by reading, takes the rest of the prompt as instructions.
    given: dict[str, str] = Field(default_factory=dict)


class ModelReply(BaseModel):
    content: list[ContentBlock]
    model: str
    prompt_tokens: int
    completion_tokens: int
    stop_reason: str | None = None

    @property
    def text(self) -> str:
        return "".join(b.text or "" for b in self.content if b.type == "text")

    @property
    def tool_uses(self) -> list[ContentBlock]:
        return [b for b in self.content if b.type == "tool_use"]


class ModelError(Exception):
    """A failed model call. ``retryable`` decides whether Temporal tries another attempt."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class ModelBackend(Protocol):
    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...
