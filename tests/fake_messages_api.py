"""A local HTTP server that speaks the Anthropic Messages API, so the real SDK runs in tests.

Each POST /v1/messages takes the next scripted reply, or, with ``respond`` set, what it returns
for the request (for callers whose requests arrive in no fixed order, such as parallel
workers); requests are kept for assertions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def text_message(text: str, model: str, input_tokens: int = 12, output_tokens: int = 34) -> dict:
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def tool_use_message(
    model: str, name: str, tool_input: dict, call_id: str, text: str | None = None
) -> dict:
    content = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": call_id, "name": name, "input": tool_input})
    reply = text_message("", model)
    reply.update(content=content, stop_reason="tool_use")
    return reply


OVERLOADED = (
    529,
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
)
# The SDK honours retry-after-ms, so its own retries stay fast in tests.
OVERLOADED_RETRY_SOON = (*OVERLOADED, {"retry-after-ms": "10"})


class FakeMessagesAPI:
    def __init__(self) -> None:
        self.script: list[tuple[Any, ...]] = []  # (status, body[, headers[, delay seconds]])
        self.respond: Callable[[dict[str, Any]], tuple[Any, ...]] | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with api._lock:
                    api.requests.append(body)
                    api.headers.append({k.lower(): v for k, v in self.headers.items()})
                    status, reply, *extra = (
                        api.respond(body)
                        if api.respond is not None
                        else api.script.pop(0)
                        if api.script
                        else (
                            500,
                            {
                                "type": "error",
                                "error": {"type": "api_error", "message": "no script"},
                            },
                        )
                    )
                if len(extra) > 1:
                    time.sleep(extra[1])  # a slow model call
                data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                self.send_response(status)
                for key, value in (extra[0] if extra else {}).items():
                    self.send_header(key, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeMessagesAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def brevity_round(
    model: str,
    *,
    segment: str,
    after: str,
    hypothesis: str,
    quote: str | None = None,
    blame: str = "high",
    confidence: float = 0.8,
) -> list[tuple[int, dict[str, Any]]]:
    """The Claude trainer's three answers to "too long": the analysis (length, wants shorter),
    the credit (blaming ``segment``, the prompt's segment 1) and the plan (``segment`` →
    ``after``), as the local Messages API replies them."""

    def reply(tool: str, data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, tool_use_message(model, tool, data, f"toolu_{tool}")

    aspect = {"aspect": "length", "sentiment": "negative", "confidence": 0.9, "want": "shorter"}
    if quote is not None:
        aspect["quote"] = quote
    return [
        reply("record_score_analysis", {"sentiment": "negative", "aspects": [aspect]}),
        reply(
            "record_prompt_credit",
            {
                "credits": [
                    {
                        "segment": segment,
                        "segment_index": 1,
                        "blame": blame,
                        "related_aspect": "length",
                        "reason": "asks for length",
                    }
                ]
            },
        ),
        reply(
            "record_evolution_plan",
            {
                "changes": [
                    {
                        "component": "systemPrompt",
                        "change_type": "modify",
                        "target": "segment 1",
                        "before": segment,
                        "after": after,
                        "reason": "length",
                        "confidence": confidence,
                    }
                ],
                "hypothesis": hypothesis,
                "expected_impact": [{"aspect": "length", "direction": "improve"}],
            },
        ),
    ]
