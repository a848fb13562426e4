"""One trace from workflow to model call; OTLP export when configured; the API key never leaks
into the database, the logs, the workflow history or the spans."""

from __future__ import annotations

import base64
import logging
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr
from temporalio.client import Client

from client import start_session
from domain.settings import Settings
from runner.telemetry import tracer_provider, tracing_interceptor
from tests.conftest import awaiting, lineage_history, make_spec, wait_for_state
from tests.fake_messages_api import FakeMessagesAPI, text_message, tool_use_message

MODEL = "claude-sonnet-5"


async def history_bytes(client, handle) -> bytes:
    """Every event of every run of the lineage, as stored: payloads raw, not base64."""
    return b"".join([e.SerializeToString() async for e in lineage_history(client, handle)])


SECRET = "sk-ant-api03-DO-NOT-LEAK-7f3a9c"


async def test_api_key_never_leaves_the_request(client, store, settings, run_worker, caplog):
    exporter = InMemorySpanExporter()
    tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))
    caplog.set_level(logging.DEBUG)
    spec = make_spec(model=MODEL, agent_extra={"tools": [{"name": "calculator"}]})
    with FakeMessagesAPI() as api:
        api.script = [
            (200, tool_use_message(MODEL, "calculator", {"expression": "2+2"}, "toolu_s")),
            (200, text_message("four", MODEL)),
            (200, text_message("still four", MODEL)),
        ]
        claude = settings.model_copy(
            update={"anthropic_api_key": SecretStr(SECRET), "anthropic_base_url": api.base_url}
        )
        async with run_worker(claude):
            (handle,) = await start_session(client, spec, settings.task_queue)
            await wait_for_state(handle, awaiting(1))
            await handle.signal("score", {"score": 4, "comment": "too long"})
            await wait_for_state(handle, awaiting(2))
        assert SECRET in str(api.headers[0])  # it did travel where it must

    history = await history_bytes(client, handle)
    assert len(history) > 1000 and SECRET.encode() not in history
    assert SECRET not in caplog.text and "api03" not in caplog.text
    assert SECRET not in repr(settings.model_copy(update={"anthropic_api_key": SecretStr(SECRET)}))
    db = Path(str(store.engine.url.database))
    store.engine.dispose()
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        if path.exists():
            assert SECRET.encode() not in path.read_bytes(), path
    spans = exporter.get_finished_spans()
    assert spans
    assert all(SECRET not in str(dict(s.attributes or {})) for s in spans)


async def test_workflow_activity_and_agent_spans_form_one_trace(
    client, store, settings, run_worker
):
    exporter = InMemorySpanExporter()
    tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))
    spec = make_spec()
    # as the starter's clients do (worker.connect): the start is the root of the trace
    traced = Client(**{**client.config(), "interceptors": [tracing_interceptor()]})
    async with run_worker(settings.model_copy(update={"temporal_tracing": True})):
        (handle,) = await start_session(traced, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
    spans = exporter.get_finished_spans()
    chat = next(
        s
        for s in spans
        if s.name.startswith("chat ")
        and s.attributes.get("training_camp.attempt_id", "").startswith(spec.lineage_id("A"))
    )
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "offline-analyst-1"
    assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    by_id = {s.context.span_id: s for s in spans}
    ancestors, node = [], chat
    while node.parent is not None and node.parent.span_id in by_id:
        node = by_id[node.parent.span_id]
        ancestors.append(node.name)
    assert "RunActivity:run_agent" in ancestors
    assert ancestors[-1] == "StartWorkflow:LineageWorkflow"
    same_trace = {s.name for s in spans if s.context.trace_id == chat.context.trace_id}
    assert "RunWorkflow:LineageWorkflow" in same_trace
    stored = store.queries.spans(
        store.queries.attempts(store.queries.rollouts(spec.lineage_id("A"))[0].id)[0].id
    )
    assert {s.trace_id for s in stored} == {format(chat.context.trace_id, "032x")}


async def test_without_temporal_tracing_only_the_agent_spans_are_made(
    client, store, settings, run_worker
):
    """The default (no OTLP endpoint): no span per activity or header per command, and the
    attempt's stored spans still share one trace, the agent's."""
    exporter = InMemorySpanExporter()
    tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))
    spec = make_spec()
    assert settings.temporal_tracing is False
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
    ours = [
        s
        for s in exporter.get_finished_spans()
        if str(s.attributes.get("training_camp.attempt_id", "")).startswith(spec.lineage_id("A"))
    ]
    assert any(s.name.startswith("chat ") for s in ours)
    temporal = ("RunActivity:", "StartActivity:", "RunWorkflow:", "StartWorkflow:")
    assert not [s.name for s in exporter.get_finished_spans() if s.name.startswith(temporal)]
    stored = store.queries.spans(
        store.queries.attempts(store.queries.rollouts(spec.lineage_id("A"))[0].id)[0].id
    )
    assert len({s.trace_id for s in stored}) == 1
    assert {s.trace_id for s in stored} <= {format(s.context.trace_id, "032x") for s in ours}


def test_temporal_tracing_follows_the_otlp_endpoint_unless_told(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("TRAINING_CAMP_TEMPORAL_TRACING", raising=False)
    assert Settings.from_env().temporal_tracing is False
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert Settings.from_env().temporal_tracing is True
    monkeypatch.setenv("TRAINING_CAMP_TEMPORAL_TRACING", "off")
    assert Settings.from_env().temporal_tracing is False
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    monkeypatch.setenv("TRAINING_CAMP_TEMPORAL_TRACING", "1")
    assert Settings.from_env().temporal_tracing is True
    monkeypatch.setenv("TRAINING_CAMP_TEMPORAL_TRACING", "sometimes")
    with pytest.raises(ValueError, match=r"TRAINING_CAMP_TEMPORAL_TRACING.*'sometimes'"):
        Settings.from_env()


def test_spans_are_exported_over_otlp_when_an_endpoint_is_set(tmp_path):
    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            received.append((self.path, self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = (
        "from runner.telemetry import tracer_provider, runner_tracer\n"
        "with runner_tracer().start_as_current_span('chat offline-x'): pass\n"
        "tracer_provider().force_flush()\n"
    )
    root = Path(__file__).parent.parent
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "OTEL_SERVICE_NAME": "camp-test",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run([sys.executable, "-c", script], cwd=root, env=env, check=True, timeout=60)
    server.shutdown()
    assert received and received[0][0] == "/v1/traces"
    assert b"chat offline-x" in received[0][1] and b"camp-test" in received[0][1]


async def test_a_key_echoed_by_the_endpoint_is_redacted_everywhere(
    client, store, settings, run_worker, caplog
):
    caplog.set_level(logging.DEBUG)
    spec = make_spec(model=MODEL, options={"maxAttempts": 1})
    echo = {
        "type": "error",
        "error": {
            "type": "authentication_error",
            "message": f"invalid x-api-key: {SECRET} (Authorization: Bearer {SECRET}); "
            + "; ".join(f"as sent: {form}" for form in echoed_forms(SECRET)),
        },
    }
    with FakeMessagesAPI() as api:
        api.script = [(401, echo)]
        claude = settings.model_copy(
            update={"anthropic_api_key": SecretStr(SECRET), "anthropic_base_url": api.base_url}
        )
        async with run_worker(claude):
            (handle,) = await start_session(client, spec, settings.task_queue)
            state = await wait_for_state(handle, lambda s: s.status == "failed", timeout=60)
    assert "401" in state.last_error and "[redacted]" in state.last_error
    assert SECRET not in state.last_error
    rollout = store.queries.rollouts(spec.lineage_id("A"))[0]
    (attempt,) = store.queries.attempts(rollout.id)
    assert "authentication_error" in attempt.error and SECRET not in attempt.error
    history = await history_bytes(client, handle)
    assert SECRET.encode() not in history and b"api03" not in history
    assert SECRET not in caplog.text
    for form in echoed_forms(SECRET):
        assert form not in state.last_error and form not in attempt.error, form
        assert form.encode() not in history and form not in caplog.text, form
    db = Path(str(store.engine.url.database))
    store.engine.dispose()
    for path in (db, Path(f"{db}-wal")):
        if path.exists():
            data = path.read_bytes()
            assert SECRET.encode() not in data, path
            assert not any(form.encode() in data for form in echoed_forms(SECRET)), path


def echoed_forms(secret: str) -> list[str]:
    """The key as an endpoint may echo it encoded: base64 (alone, and inside a Basic
    credential), percent-encoded (where needed, and every character of it, in either case, and
    twice over), as HTML character references and JSON escapes, and with its characters spaced
    apart."""
    raw = secret.encode()
    every = "".join(f"%{byte:02X}" for byte in raw)
    return [
        base64.b64encode(raw).decode(),
        base64.b64encode(b"user:" + raw).decode(),
        quote(secret, safe=""),
        every,
        every.lower(),
        every.replace("%", "%25"),
        quote(base64.b64encode(raw).decode(), safe=""),
        "".join(f"&#{ord(c)};" for c in secret),
        "".join(f"&#x{ord(c):x};" for c in secret),
        "".join(f"\\u{ord(c):04x}" for c in secret),
        " ".join(secret),
    ]


def test_credential_shapes_are_redacted_whatever_the_key():
    from domain.redaction import redact

    text = redact(
        "401: Bearer abcdefgh12345678 / x-api-key: sk-ant-api03-zzzzzzzz / api_key=hunter2xyz",
        ["hunter2xyz"],
    )
    assert "abcdefgh12345678" not in text and "zzzzzzzz" not in text and "hunter2" not in text
    assert text.startswith("401: Bearer [redacted]")


def test_credential_shapes_are_found_decoded():
    from domain.redaction import redact

    said = "Authorization: Bearer abcdefgh12345678 x-api-key: sk-ant-api03-zzzzzzzz"
    percent = "".join(f"%{b:02x}" for b in said.encode())
    for text in (quote(said, safe=""), percent, percent.replace("%", "%25")):
        masked = redact(f"echoed: {text} (end)")
        assert "abcdefgh12345678" not in masked and "zzzzzzzz" not in masked, masked
        assert "6162636465666768" not in masked.replace("%", ""), masked  # nor encoded
        assert masked.startswith("echoed: ") and masked.endswith(" (end)")
    # text that only looks encoded is left as it is
    innocent = "100% sure, 50%off, %zz, &amp; caf%C3%A9 \\u00e9"
    assert redact(innocent, ["hunter2xyz"]) == innocent
