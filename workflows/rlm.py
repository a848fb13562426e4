"""RLM on Temporal.

``RlmReplWorkflow`` is a recursive language model's run: a model driving a Python REPL, each
model turn and each cell an activity; a cell that calls ``rlm_worker`` waits while the workflow
runs the workers as child workflows of the same type one level down (at most ``max_parallel``
at once), and runs the cell again with their commits. The REPL's state lives in the store (the
namespace after each cell) and in this history (the answers each cell received), so a worker
process dying mid-run costs the cell it was running, not the run.

``RlmFanOutWorkflow`` runs rules-based workers over a fixed task tree (the trainer's chunked
credit assignment): each gets read-only cards and returns a commit; parents merge commits
(children's into the worker's in-memory store, the roots' into the durable store)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, FailureError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from activities.error_classification import failure_reason, one_line
    from activities.rlm import RlmActivities
    from domain.payload_size import json_size
    from rlm.commit import Commit
    from rlm.objects import Card
    from rlm.repl import (
        MAX_TURN_OUTPUT_CHARS,
        CellInput,
        CellResult,
        ExportInput,
        LlmQueryInput,
        ModelTurnInput,
        ReplMessage,
        ReplRunInput,
        ReplRunResult,
        code_of,
    )
    from rlm.sandbox import MAX_ANSWERS_BYTES, MAX_TRANSCRIPT_BYTES
    from rlm.store import InMemoryFindingsStore
    from rlm.tasks import (
        ApplyCommitInput,
        FanOutInput,
        FanOutResult,
        RlmTask,
        RlmWorkerInput,
    )

ACTIVITY = {
    "start_to_close_timeout": timedelta(minutes=5),
    "retry_policy": RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1)),
}


async def rlm_worker_batched(
    tasks: list[RlmTask], cards: list[Card], depth: int, max_depth: int, max_parallel: int
) -> list[Commit]:
    """Run workers as child workflows, at most ``max_parallel`` at once; commits in order."""
    gate = asyncio.Semaphore(max_parallel)
    parent = workflow.info().workflow_id

    async def one(task: RlmTask) -> Commit:
        async with gate:
            return await workflow.execute_child_workflow(
                RlmWorkerWorkflow.run,
                RlmWorkerInput(
                    task=task,
                    cards=cards,
                    depth=depth,
                    max_depth=max_depth,
                    max_parallel=max_parallel,
                ),
                id=f"{parent}/{task.task_id}",
            )

    return list(await asyncio.gather(*(one(t) for t in tasks)))


@workflow.defn(name="RlmWorkerWorkflow")
class RlmWorkerWorkflow:
    @workflow.run
    async def run(self, inp: RlmWorkerInput) -> Commit:
        own = await workflow.execute_activity_method(RlmActivities.rlm_analyze, inp, **ACTIVITY)
        if not inp.task.subtasks or inp.depth >= inp.max_depth:
            return own
        commits = await rlm_worker_batched(
            inp.task.subtasks, inp.cards, inp.depth + 1, inp.max_depth, inp.max_parallel
        )
        # Merge the sub-workers' commits under this worker's own findings (pure, in memory).
        local = InMemoryFindingsStore(external={card.id for card in inp.cards})
        local.apply_commit(own.model_copy(update={"commit_id": "self"}))
        anchor = "self/summary" if local.get("self/summary") else None
        for sub, commit in zip(inp.task.subtasks, commits, strict=True):
            local.apply_commit(commit, batch_prefix=f"sub-{sub.task_id}", batch_parent=anchor)
        return local.export_commit(own.commit_id)


@workflow.defn(name="RlmFanOutWorkflow")
class RlmFanOutWorkflow:
    @workflow.run
    async def run(self, inp: FanOutInput) -> FanOutResult:
        commits = await rlm_worker_batched(inp.tasks, inp.cards, 1, inp.max_depth, inp.max_parallel)
        results = []
        for task, commit in zip(inp.tasks, commits, strict=True):
            results.append(
                await workflow.execute_activity_method(
                    RlmActivities.rlm_apply_commit,
                    ApplyCommitInput(
                        store_id=inp.store_id,
                        commit=commit,
                        batch_prefix=task.task_id,
                        worker=task.task_id,
                    ),
                    **ACTIVITY,
                )
            )
        return FanOutResult(results=results)


def _step(inp: ReplRunInput, start_to_close: timedelta = timedelta(minutes=10)) -> Any:
    """Activity options for a REPL step: retried, and noticed fast when its worker dies."""
    return {
        "start_to_close_timeout": start_to_close,
        "heartbeat_timeout": timedelta(seconds=inp.config.heartbeat_seconds),
        "retry_policy": RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1)),
    }


@workflow.defn(name="RlmReplWorkflow")
class RlmReplWorkflow:
    def __init__(self) -> None:
        self._status = "starting"
        self._turn = 0
        self._workers = 0  # workers this REPL has started: their names

    @workflow.query
    def state(self) -> dict[str, Any]:
        return {"status": self._status, "turn": self._turn, "workers": self._workers}

    @workflow.run
    async def run(self, inp: ReplRunInput) -> ReplRunResult:
        context_hash = inp.context_hash or await workflow.execute_activity_method(
            RlmActivities.store_context, inp.context, **ACTIVITY
        )
        first = f"{inp.prompt}\n\nThe REPL is ready: `context` holds your task's data."
        messages = [ReplMessage(role="user", content=first)]
        snapshot: str | None = None
        creates = 0
        final: Any = None
        finished = False
        for turn in range(inp.config.max_turns):
            self._turn, self._status = turn, "thinking"
            reply = await workflow.execute_activity_method(
                RlmActivities.model_turn,
                ModelTurnInput(
                    run_id=inp.run_id,
                    worker=inp.worker,
                    turn=turn,
                    model=inp.config.model_at(inp.depth),
                    depth=inp.depth,
                    max_depth=inp.config.max_depth,
                    shared=inp.config.shared_store,
                    context_hash=context_hash,
                    messages=_within_bounds(messages),
                ),
                **_step(inp),
            )
            messages.append(ReplMessage(role="assistant", content=reply))
            code = code_of(reply)
            if code is None:
                nudge = "No ```repl block: write the next cell, or call FINAL_VAR(value) in one."
                messages.append(ReplMessage(role="user", content=nudge))
                continue
            self._status = "running a cell"
            cell = await self._cell(inp, context_hash, turn, code, snapshot, creates)
            snapshot, creates = cell.snapshot_hash, creates + cell.creates
            shown = cell.output[:MAX_TURN_OUTPUT_CHARS] or "(nothing printed)"
            messages.append(ReplMessage(role="user", content=f"Cell output:\n{shown}"))
            if cell.final_set:
                final, finished = cell.final, True
                break
        commit = None
        if inp.depth > 0:
            commit = await workflow.execute_activity_method(
                RlmActivities.export_commit,
                ExportInput(
                    run_id=inp.run_id,
                    worker=inp.worker,
                    cards=inp.cards,
                    shared=inp.config.shared_store,
                ),
                **ACTIVITY,
            )
        self._status = "finished" if finished else "out of turns"
        return ReplRunResult(
            run_id=inp.run_id,
            worker=inp.worker,
            final=final,
            finished=finished,
            turns=self._turn + 1,
            commit=commit,
        )

    async def _cell(
        self,
        inp: ReplRunInput,
        context_hash: str,
        turn: int,
        code: str,
        snapshot: str | None,
        creates: int,
    ) -> CellResult:
        """Run the cell; each time it waits on a call, make the call and run it again."""
        memo: list[Any] = []
        limits = inp.config.cell_limits
        while True:
            result = await workflow.execute_activity_method(
                RlmActivities.run_cell,
                CellInput(
                    run_id=inp.run_id,
                    worker=inp.worker,
                    depth=inp.depth,
                    turn=turn,
                    code=code,
                    context_hash=context_hash,
                    snapshot_hash=snapshot,
                    memo=memo,
                    creates_before=creates,
                    cards=inp.cards,
                    config=inp.config,
                ),
                **_step(inp, timedelta(seconds=2 * limits.timeout_seconds + 60)),
            )
            if result.suspended is None:
                return result
            answer = await self._answer(inp, turn, len(memo), result.suspended)
            # every run of the cell receives all its answers so far: they stay within bounds
            if (size := json_size([*memo, answer])) > MAX_ANSWERS_BYTES:
                answer = {
                    "error": f"the answers to this cell's calls would be {size:,} bytes; a "
                    f"cell receives at most {MAX_ANSWERS_BYTES:,}. Ask for less per cell "
                    "(shorter answers, fewer calls), or keep what you have in the store",
                    "error_type": "ResultTooLarge",
                }
            memo.append(answer)

    async def _answer(self, inp: ReplRunInput, turn: int, n: int, call: dict[str, Any]) -> Any:
        args = call["args"]
        if call["kind"] == "llm_query":
            try:
                return await workflow.execute_activity_method(
                    RlmActivities.llm_query,
                    LlmQueryInput(
                        run_id=inp.run_id,
                        worker=inp.worker,
                        turn=turn,
                        call=n,
                        model=inp.config.model_at(inp.depth + 1),
                        prompts=args["prompts"],
                    ),
                    **_step(inp),
                )
            except FailureError as exc:
                return _failed("llm_query failed", exc)
        return await self._workers_for(inp, args["tasks"], int(args.get("max_parallel", 8)))

    async def _workers_for(
        self, inp: ReplRunInput, tasks: list[dict[str, Any]], max_parallel: int
    ) -> list[Any]:
        """Workers one level down, as child workflows, at most ``max_parallel`` at once."""
        gate = asyncio.Semaphore(max(1, min(max_parallel, inp.config.max_parallel)))
        prefix = "w" if inp.worker == "root" else f"{inp.worker}."
        names = [f"{prefix}{self._workers + i + 1}" for i in range(len(tasks))]
        self._workers += len(tasks)

        async def one(name: str, task: dict[str, Any]) -> Any:
            async with gate:
                try:
                    done: ReplRunResult = await workflow.execute_child_workflow(
                        RlmReplWorkflow.run,
                        ReplRunInput(
                            run_id=inp.run_id,
                            prompt=task["prompt"] or "Analyse `context`.",
                            context_hash=task["context_hash"],
                            config=inp.config,
                            depth=inp.depth + 1,
                            worker=name,
                            cards=[Card.model_validate(c) for c in task["store_cards"]],
                        ),
                        id=f"{workflow.info().workflow_id}/{name}",
                    )
                except FailureError as exc:
                    return _failed(f"worker {name} failed", exc)
            if inp.config.shared_store:
                return {"worker": name, "final": done.final, "finished": done.finished}
            assert done.commit is not None
            return done.commit.model_dump(mode="json")

        self._status = f"waiting on {len(tasks)} workers"
        return list(await asyncio.gather(*(one(n, t) for n, t in zip(names, tasks, strict=True))))


def _failed(what: str, error: FailureError) -> dict[str, str]:
    """A failed call as the cell sees it: what failed and why, in one line (the innermost
    cause — "ModelError: 400 prompt is too long", not "Activity task failed")."""
    cause: BaseException = error
    while isinstance(cause, FailureError) and cause.cause is not None:
        cause = cause.cause
    answer = {"error": f"{what}: {_reason(cause)}"}
    if isinstance(cause, ApplicationError) and cause.type in ("CallTooLarge", "ResultTooLarge"):
        answer["error_type"] = cause.type
    return answer


def _reason(cause: BaseException) -> str:
    if isinstance(cause, TimeoutError):
        return f"timed out ({cause.type.name.lower() if cause.type else 'timeout'})"
    if isinstance(cause, ApplicationError):
        named = cause.type and cause.type != "ApplicationError"
        return one_line(f"{cause.type}: {cause.message}" if named else cause.message)
    return failure_reason(cause)


def _within_bounds(messages: list[ReplMessage]) -> list[ReplMessage]:
    """The conversation a model turn is sent, within MAX_TRANSCRIPT_BYTES: the first message
    (the task) and the latest turns that fit; the first says how many were left out. Turns
    go in pairs (the model's reply, then what its cell printed), so roles still alternate;
    a pair is at most a reply and a bounded cell output, so the latest always fits."""
    if json_size(messages) <= MAX_TRANSCRIPT_BYTES:
        return messages
    first, rest = messages[0], messages[1:]
    budget = MAX_TRANSCRIPT_BYTES - json_size(first) - 200
    kept = len(rest)
    while kept > 1 and json_size(rest[len(rest) - kept :]) > budget:
        kept -= 2
    left_out = len(rest) - kept
    note = (
        f"\n\n({left_out} earlier messages are left out: the conversation is kept under "
        f"{MAX_TRANSCRIPT_BYTES // 1024} KB. What your cells stored is still in the store.)"
    )
    return [first.model_copy(update={"content": first.content + note}), *rest[left_out:]]
