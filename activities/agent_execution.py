"""The agent execution activity: one Temporal attempt = one recorded Attempt, failures included."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential

from activities.error_classification import is_transient
from activities.heartbeat import Heartbeat
from domain.agent import AgentDefinition, AgentSnapshot
from domain.checks import CheckResult, failed, passes
from domain.content_hash import content_hash
from domain.cycle import artifact_of, attempt_of
from domain.execution import preview_of
from domain.lineage import RolloutFailedInput, RunAgentInput, RunAgentResult
from domain.redaction import redact
from runner.executor import AgentRunError, ExecutionResult, Executor
from runner.revision import REVISION_PROMPT, reviser, revision_of
from runner.tools import ToolContext
from store import Store
from store.records.attempt_records import AttemptStart, CheckedTry
from trainer.measure_budget import MEASURE_BUDGET_SECONDS, measured

ResultT = TypeVar("ResultT")

HEARTBEAT_EVERY_SECONDS = 5.0
CARRY_AFTER_SECONDS = 1.0  # a measure slower than this carries the answer in the heartbeats
# A finished run rides on the attempt's heartbeats while the store is away, so the next try
# records it instead of calling the model again; a larger one waits for the store only as long
# as this try may run (heartbeat details travel through Temporal, which caps payloads).
CARRIED_RESULT_MAX_BYTES = 256 * 1024
STORE_WAIT_MAX_SECONDS = 30.0


class FinishedRun(BaseModel):
    """A model call that finished, waiting for the store to take it."""

    attempt_id: str
    result: ExecutionResult
    duration_ms: int


@dataclass(frozen=True)
class Tried:
    """A try at the cycle's output (the first, or a revision) and its checks."""

    run: FinishedRun
    checks: list[CheckResult]
    words: int  # its length in words, Markdown markup not counted


class AgentExecutionActivities:
    def __init__(
        self, store: Store, executor: Executor, measure_budget: float = MEASURE_BUDGET_SECONDS
    ) -> None:
        self.store = store
        self.executor = executor
        # how long an output's checks may take, measured in a thread: the worker's event loop
        # answers `state` queries and heartbeats meanwhile
        self.measure_budget = measure_budget

    @activity.defn(name="run_agent")
    async def run_agent(self, inp: RunAgentInput) -> RunAgentResult:
        async with _Heartbeat() as beat:
            finished = _finished_earlier() or await self._run(inp)
            measuring = asyncio.ensure_future(
                measured(finished.result.output, inp.wishes, self.measure_budget)
            )
            if not (await asyncio.wait({measuring}, timeout=CARRY_AFTER_SECONDS))[0]:
                # a slow measure (a fresh worker loads its tables) must not lose the model's
                # answer to a worker that dies meanwhile: the answer rides the heartbeats
                beat.carry(finished)
            found = await measuring
            checks = found.checks
            revise = bool(failed(checks)) and inp.revision_attempts > 0
            # Only when its write has to wait does the finished run ride the heartbeats: a
            # write that goes through at once costs Temporal nothing.
            await _stored(
                self.store.recorder.record_attempt_succeeded,
                on_wait=lambda: beat.carry(finished),
                artifact=not revise,  # with a revision to come, the output shown is chosen then
                checks=checks,
                **self._succeeded(inp, finished),
            )
            shown = Tried(finished, checks, found.words)
            runs: list[FinishedRun] = []
            if revise:
                shown, revisions = await self._revise(inp, shown)
                runs = [t.run for t in revisions]
        output = shown.run.result.output
        return RunAgentResult(
            rollout_id=inp.rollout_id,
            attempt_id=shown.run.attempt_id,
            artifact_id=artifact_of(inp.rollout_id),
            output_preview=preview_of(output),
            output_chars=len(output),
            output_words=shown.words,
            total_tokens=sum(r.result.usage.total_tokens for r in [finished, *runs]),
            cut_off=shown.run.result.cut_off,
            checks=shown.checks,
            revised=shown.run is not finished,
        )

    @staticmethod
    def _succeeded(inp: RunAgentInput, run: FinishedRun) -> dict[str, Any]:
        return {
            "session_id": inp.session_id,
            "lineage_id": inp.lineage_id,
            "rollout_id": inp.rollout_id,
            "cycle": inp.cycle,
            "agent_version": inp.agent.version,
            "attempt_id": run.attempt_id,
            "artifact_id": artifact_of(inp.rollout_id),
            "output": run.result.output,
            "spans": run.result.spans,
            "usage": run.result.usage,
            "duration_ms": run.duration_ms,
            "stop_reason": run.result.stop_reason,
        }

    async def _revise(self, inp: RunAgentInput, first: Tried) -> tuple[Tried, list[Tried]]:
        """Up to ``revision_attempts`` revisions of an output that failed a check, each told
        which checks failed and by how much and recorded as an attempt with its spans; then the
        artifact: the try that passes the most checks (the earliest of equals). A revision
        that fails is recorded as a failed attempt, and the output before it stands."""
        tried = [first]
        for number in range(1, inp.revision_attempts + 1):
            run = await self._revision(inp, tried[-1], revision_of(first.run.attempt_id, number))
            if run is None:
                break
            found = await measured(run.result.output, inp.wishes, self.measure_budget)
            await _stored(
                self.store.recorder.record_attempt_succeeded,
                artifact=False,
                **self._succeeded(inp, run),
            )
            tried.append(Tried(run, found.checks, found.words))
            if not failed(found.checks):
                break
        chosen = max(range(len(tried)), key=lambda i: (passes(tried[i].checks), -i))
        await _stored(
            self.store.recorder.record_output_chosen,
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            rollout_id=inp.rollout_id,
            cycle=inp.cycle,
            agent_version=inp.agent.version,
            artifact_id=artifact_of(inp.rollout_id),
            tried=[
                CheckedTry(
                    attempt_id=t.run.attempt_id,
                    content_hash=content_hash(t.run.result.output),
                    checks=t.checks,
                )
                for t in tried
            ],
            chosen=chosen,
        )
        return tried[chosen], tried[1:]

    async def _revision(
        self, inp: RunAgentInput, last: Tried, attempt_id: str
    ) -> FinishedRun | None:
        """One revision of ``last``'s output, recorded as attempt ``attempt_id``."""
        number = activity.info().attempt
        agent, _, documents = await _stored(self._prepare, inp, attempt_id, number)
        tools = ToolContext(session_id=inp.session_id, documents=lambda: documents)
        started = time.perf_counter()
        try:
            result = await self.executor.run(
                reviser(agent, failed(last.checks)),
                REVISION_PROMPT.format(input=last.run.result.output),
                attempt_id,
                tools,
            )
        except asyncio.CancelledError:
            ended = AgentRunError(
                "cancelled: the lineage stopped or the try timed out", retryable=True
            )
            await asyncio.shield(self._record_failure(inp, attempt_id, ended, started))
            raise
        except Exception as exc:
            # the output before it stands: a revision is a second chance, not a requirement
            error = (
                exc
                if isinstance(exc, AgentRunError)
                else AgentRunError(f"{type(exc).__name__}: {exc}", retryable=True)
            )
            await self._record_failure(inp, attempt_id, error, started)
            return None
        return FinishedRun(
            attempt_id=attempt_id,
            result=result,
            duration_ms=int((time.perf_counter() - started) * 1000),
        )

    async def _run(self, inp: RunAgentInput) -> FinishedRun:
        """One try of the agent: recorded as started, then as failed or (by the caller) done."""
        number = activity.info().attempt
        attempt_id = attempt_of(inp.rollout_id, number)
        agent, cycle_input, documents = await _stored(self._prepare, inp, attempt_id, number)
        tools = ToolContext(session_id=inp.session_id, documents=lambda: documents)
        started = time.perf_counter()
        try:
            result = await self.executor.run(agent, cycle_input, attempt_id, tools)
        except AgentRunError as exc:
            await self._record_failure(inp, attempt_id, exc, started)
            raise ApplicationError(
                redact(str(exc)), type=type(exc).__name__, non_retryable=not exc.retryable
            ) from None
        except Exception as exc:
            # Unexpected: record the failed attempt, then let Temporal retry it.
            wrapped = AgentRunError(f"{type(exc).__name__}: {exc}", retryable=True)
            await self._record_failure(inp, attempt_id, wrapped, started)
            raise
        except asyncio.CancelledError:
            # The lineage was stopped, or the try ran out of time: it ends here, recorded.
            ended = AgentRunError(
                "cancelled: the lineage stopped or the try timed out", retryable=True
            )
            await asyncio.shield(self._record_failure(inp, attempt_id, ended, started))
            raise
        return FinishedRun(
            attempt_id=attempt_id,
            result=result,
            duration_ms=int((time.perf_counter() - started) * 1000),
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
            AttemptStart(
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
        )
        documents = q.session_documents(inp.session_id) if agent.tools else {}
        return agent, cycle_input, documents

    async def _record_failure(
        self, inp: RunAgentInput, attempt_id: str, exc: AgentRunError, started: float
    ) -> None:
        await _stored(
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


def _finished_earlier() -> FinishedRun | None:
    """The run an earlier try finished but could not store, from its last heartbeat."""
    details = activity.info().heartbeat_details
    if not details:
        return None
    try:
        return FinishedRun.model_validate(details[0])
    except ValidationError:
        return None


async def _stored(
    call: Callable[..., ResultT],
    /,
    *args: Any,
    on_wait: Callable[[], None] | None = None,
    **kwargs: Any,
) -> ResultT:
    """A store call, retried here for as long as this try may run while the store is
    unreachable: store trouble is not the agent's failure, so it must neither use up the
    rollout's attempts nor repeat a finished model call. Errors no retry can fix go at once.
    ``on_wait`` runs before each wait."""

    def before_sleep(state: RetryCallState) -> None:
        _log_store_wait(state)
        if on_wait is not None:
            on_wait()

    retrying = AsyncRetrying(
        retry=retry_if_exception(is_transient),
        wait=wait_exponential(multiplier=0.5, max=STORE_WAIT_MAX_SECONDS),
        before_sleep=before_sleep,
        reraise=True,
    )
    async for try_ in retrying:
        with try_:
            return await asyncio.to_thread(call, *args, **kwargs)
    raise AssertionError("unreachable: tenacity retries until it returns or raises")


def _log_store_wait(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    activity.logger.warning(
        "store unreachable (%s); retrying in %.1f s",
        redact(f"{type(error).__name__}: {error}"),
        state.upcoming_sleep,
    )


class _Heartbeat(Heartbeat):
    """Beats while the try runs or waits on the store, so a dead worker is noticed within the
    heartbeat timeout (at least twice per timeout); once the finished run's write has had to
    wait, each beat carries the run."""

    def __init__(self) -> None:
        super().__init__(HEARTBEAT_EVERY_SECONDS, per_timeout=2)

    def carry(self, finished: FinishedRun) -> None:
        """Beat with the finished run from now on (once; a run too large for Temporal's
        payload limit is not carried, and waits for the store only as long as this try runs)."""
        if self.details or len(finished.model_dump_json()) > CARRIED_RESULT_MAX_BYTES:
            return
        self.details = (finished,)
        activity.heartbeat(finished)
