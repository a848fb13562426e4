"""The agent execution activity: one Temporal attempt = one recorded Attempt, failures included."""

from __future__ import annotations

import asyncio
import contextlib
import time

from temporalio import activity
from temporalio.exceptions import ApplicationError

from domain.agent import AgentDefinition, AgentSnapshot
from domain.lineage import RolloutFailedInput, RunAgentInput, RunAgentResult
from runner.executor import AgentRunError, Executor
from runner.redaction import redact
from runner.tools import ToolContext
from store import Store

PREVIEW_CHARS = 600
HEARTBEAT_EVERY_SECONDS = 5.0


class AgentExecutionActivities:
    def __init__(self, store: Store, executor: Executor) -> None:
        self.store = store
        self.executor = executor

    @activity.defn(name="run_agent")
    async def run_agent(self, inp: RunAgentInput) -> RunAgentResult:
        info = activity.info()
        attempt_id = f"{inp.rollout_id}:a{info.attempt}"
        # One hop to the thread pool for every store call before the model runs.
        agent, cycle_input, documents = await asyncio.to_thread(
            self._prepare, inp, attempt_id, info.attempt
        )
        tools = ToolContext(session_id=inp.session_id, documents=lambda: documents)
        started = time.perf_counter()
        beat = asyncio.create_task(_heartbeat_forever())
        try:
            result = await self.executor.run(agent, cycle_input, attempt_id, tools)
        except AgentRunError as exc:
            await self._record_failure(inp, attempt_id, exc, started, info.attempt)
            raise ApplicationError(
                redact(str(exc)), type=type(exc).__name__, non_retryable=not exc.retryable
            ) from None
        except Exception as exc:
            # Unexpected: record the failed attempt, then let Temporal retry it.
            wrapped = AgentRunError(f"{type(exc).__name__}: {exc}", retryable=True)
            await self._record_failure(inp, attempt_id, wrapped, started, info.attempt)
            raise
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        artifact_id = f"{inp.rollout_id}:artifact"
        await asyncio.to_thread(
            self.store.recorder.record_attempt_succeeded,
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            rollout_id=inp.rollout_id,
            cycle=inp.cycle,
            agent_version=inp.agent.version,
            attempt_id=attempt_id,
            artifact_id=artifact_id,
            output=result.output,
            spans=result.spans,
            usage=result.usage,
            duration_ms=int((time.perf_counter() - started) * 1000),
        )
        preview = result.output[:PREVIEW_CHARS]
        return RunAgentResult(
            rollout_id=inp.rollout_id,
            attempt_id=attempt_id,
            artifact_id=artifact_id,
            output_preview=preview + ("…" if len(result.output) > PREVIEW_CHARS else ""),
            output_chars=len(result.output),
            output_words=len(result.output.split()),
            total_tokens=result.usage.total_tokens,
        )

    def _prepare(
        self, inp: RunAgentInput, attempt_id: str, attempt_number: int
    ) -> tuple[AgentDefinition, str, dict[str, str]]:
        """Load the agent version and the cycle's input, and record the attempt as started."""
        q = self.store.queries
        agent = q.agent_definition(inp.agent)
        cycle_input = q.payload(inp.input_hash)
        params = agent.parameters
        self.store.recorder.record_attempt_started(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            rollout_id=inp.rollout_id,
            cycle=inp.cycle,
            attempt_id=attempt_id,
            attempt_number=attempt_number,
            snapshot=AgentSnapshot(
                agent_id=inp.agent.agent_id,
                version=inp.agent.version,
                **agent.hashes().model_dump(),
            ),
            input_hash=inp.input_hash,
            model_id=params.model,
            parameters={
                "temperature": params.temperature,
                "maxTokens": params.max_tokens,
                "topP": params.top_p,
            },
        )
        documents = q.session_documents(inp.session_id) if agent.tools else {}
        return agent, cycle_input, documents

    async def _record_failure(
        self, inp: RunAgentInput, attempt_id: str, exc: AgentRunError, started: float, attempt: int
    ) -> None:
        await asyncio.to_thread(
            self.store.recorder.record_attempt_failed,
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            attempt_id=attempt_id,
            error=redact(str(exc)),
            error_type=type(exc).__name__,
            retryable=exc.retryable,
            spans=exc.spans,
            duration_ms=int((time.perf_counter() - started) * 1000),
        )

    @activity.defn(name="mark_rollout_failed")
    def mark_rollout_failed(self, inp: RolloutFailedInput) -> None:
        self.store.recorder.record_rollout_failed(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            rollout_id=inp.rollout_id,
            error=inp.error,
        )


async def _heartbeat_forever() -> None:
    """Long model calls heartbeat so a dead worker is noticed within the heartbeat timeout.
    The first beat waits one interval: a quick run needs none (each beat is a server call)."""
    timeout = activity.info().heartbeat_timeout
    every = HEARTBEAT_EVERY_SECONDS
    if timeout:  # beat at least twice per timeout, however short the user set it
        every = min(every, timeout.total_seconds() / 2)
    while True:
        await asyncio.sleep(every)
        activity.heartbeat()
