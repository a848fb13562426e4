"""Claude through the real ``anthropic`` SDK (any Messages-compatible endpoint)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from domain.redaction import redact
from runner.model_backend import ContentBlock, ModelError, ModelReply, ModelRequest

if TYPE_CHECKING:
    import anthropic


def make_client(api_key: str, base_url: str | None, max_retries: int) -> anthropic.AsyncAnthropic:
    # The SDK retries 429/529/5xx inside one attempt; Temporal retries across attempts.
    # Imported here: the SDK takes over a second to import, and most processes (the CLI, the
    # offline model) never call Claude. A worker loads it before it polls (worker.py).
    import anthropic

    return anthropic.AsyncAnthropic(
        api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=600
    )


async def create_message(client: anthropic.AsyncAnthropic, **kwargs: Any) -> Any:
    """``messages.create`` with the SDK's failures mapped to retryable / final ModelErrors,
    their texts redacted (an endpoint may echo the key back)."""
    try:
        return await _create(client, **kwargs)
    except ModelError as exc:
        raise ModelError(redact(str(exc), [client.api_key]), retryable=exc.retryable) from None


async def _create(client: anthropic.AsyncAnthropic, **kwargs: Any) -> Any:
    import anthropic

    try:
        return await client.messages.create(**kwargs)
    except (anthropic.RateLimitError, anthropic.InternalServerError) as exc:
        raise ModelError(
            f"Claude unavailable ({exc.status_code}): {exc.message}", retryable=True
        ) from None
    except anthropic.APIConnectionError as exc:
        raise ModelError(f"cannot reach the Messages API: {exc}", retryable=True) from None
    except anthropic.APIStatusError as exc:
        retryable = exc.status_code >= 500 or exc.status_code in (408, 409, 429)
        raise ModelError(
            f"Claude rejected the request ({exc.status_code}): {exc.message}",
            retryable=retryable,
        ) from None
    except (anthropic.APIResponseValidationError, ValueError) as exc:
        # includes a body that is not JSON at all (json.JSONDecodeError is a ValueError)
        raise ModelError(f"malformed reply from the Messages API: {exc}", retryable=True) from None


class ClaudeBackend:
    name = "claude"

    def __init__(self, api_key: str, base_url: str | None = None, max_retries: int = 2) -> None:
        self._client = make_client(api_key, base_url, max_retries)

    async def complete(self, request: ModelRequest) -> ModelReply:
        # SDK 1.x+ dropped sampling keywords from its signature; the API still takes them in the
        # body. Claude accepts only one of temperature / top_p: an explicit topP wins, since
        # temperature always has a value.
        sampling: dict[str, Any] = (
            {"top_p": request.top_p}
            if request.top_p is not None
            else {"temperature": request.temperature}
        )
        extra: dict[str, Any] = {}
        if request.tools:
            extra["tools"] = [t.model_dump() for t in request.tools]
        message = await create_message(
            self._client,
            model=request.model,
            system=request.system,
            messages=[m.to_api() for m in request.messages],
            max_tokens=request.max_tokens,
            extra_body=sampling,
            **extra,
        )
        blocks: list[ContentBlock] = []
        for block in message.content:
            if block.type == "text":
                blocks.append(ContentBlock(type="text", text=block.text))
            elif block.type == "tool_use":
                blocks.append(
                    ContentBlock(
                        type="tool_use", id=block.id, name=block.name, input=dict(block.input)
                    )
                )
            elif block.type == "thinking":
                blocks.append(ContentBlock(type="thinking", text=block.thinking))
        return ModelReply(
            content=blocks,
            model=message.model,
            prompt_tokens=message.usage.input_tokens,
            completion_tokens=message.usage.output_tokens,
            stop_reason=message.stop_reason,
        )
