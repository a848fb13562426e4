"""The model boundary: one request/reply shape for the offline model and Claude."""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel


class ChatMessage(BaseModel):
    role: Literal["user", "assistant"]
    content: str


class ModelRequest(BaseModel):
    model: str
    system: str
    messages: list[ChatMessage]
    max_tokens: int
    temperature: float
    top_p: float | None = None


class ModelReply(BaseModel):
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    stop_reason: str | None = None


class ModelError(Exception):
    """A failed model call. ``retryable`` decides whether Temporal tries another attempt."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class ModelBackend(Protocol):
    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...
