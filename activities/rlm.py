"""RLM activities: a fan-out worker's analysis and merging its commit; and for a REPL run, the
model's turn, one cell in the sandbox (its store calls answered here), an ``llm_query``, and a
worker's findings exported as its commit. Model calls and cells are recorded as spans."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from domain.execution import SpanRecord
from domain.payload_size import json_size
from domain.settings import Settings
from rlm import analyzer, scripted_model
from rlm.commit import Commit, CommitResult, parse_commit
from rlm.objects import Card, SpanRef, StoreObject
from rlm.prompts import system_prompt
from rlm.query import parse_query
from rlm.repl import (
    OFFLINE_RLM_MODEL,
    CellInput,
    CellResult,
    ExportInput,
    LlmQueryInput,
    ModelTurnInput,
    worker_store_id,
)
from rlm.sandbox import (
    MAX_ANSWERS_BYTES,
    CellDirectoryRefused,
    CellOutcome,
    SandboxUnavailable,
    cell_directory,
    run_cell,
)
from rlm.shared_store import WorkerStoreProxy
from rlm.tasks import ApplyCommitInput, RlmWorkerInput
from runner.backends import ModelBackends
from runner.model_backend import ChatMessage, ModelError, ModelRequest
from store import Store
from store.backends.database import write_transaction
from store.eventstore import payload_store
from store.rlm_findings.findings import DatabaseFindingsStore
from store.rlm_findings.shared_findings import DatabaseSharedStore

ISOLATED_METHODS = ["create", "get", "view", "card_view", "summary", "apply_commit"]
SHARED_METHODS = ["create", "get", "view", "view_others", "card_view", "invalidate", "events_since"]
MAX_REPLY_TOKENS = 4096


class RlmActivities:
    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings or Settings()
        self.models = ModelBackends(self.settings)
        # per user: another user's root under the shared /tmp is refused, never used
        default = Path(tempfile.gettempdir()) / f"training-camp-cells-{os.geteuid()}"
        self.cells_root = Path(self.settings.rlm_cells_dir or default)

    # ---- fan-out of rules-based workers ------------------------------------------------------

    @activity.defn(name="rlm_analyze")
    def rlm_analyze(self, inp: RlmWorkerInput) -> Commit:
        t = inp.task
        return analyzer.analyze(t.task_id, t.prompt, t.context, t.source_id, inp.cards)

    @activity.defn(name="rlm_apply_commit")
    def rlm_apply_commit(self, inp: ApplyCommitInput) -> CommitResult:
        """Idempotent: a retried worker or a retried merge changes nothing the second time."""
        findings = DatabaseFindingsStore(self.store.engine, inp.store_id, self.store.read_engine)
        return findings.apply_commit(inp.commit, batch_prefix=inp.batch_prefix, worker=inp.worker)

    # ---- REPL runs ---------------------------------------------------------------------------

    @activity.defn(name="rlm_store_context")
    def store_context(self, context: Any) -> str:
        """The ``context`` global into the payload store (content-addressed: stored once)."""
        return self._put(context)

    @activity.defn(name="rlm_model_turn")
    async def model_turn(self, inp: ModelTurnInput) -> str:
        started = time.time()
        context = await asyncio.to_thread(self.store.queries.payload, inp.context_hash)
        system = system_prompt(inp.depth, inp.max_depth, inp.shared, context)
        if inp.model == OFFLINE_RLM_MODEL:
            text, tokens = scripted_model.reply(system, inp.messages), (0, 0)
        else:
            reply = await self._complete(
                inp.model,
                system,
                [ChatMessage(role=m.role, content=m.content) for m in inp.messages],
            )
            text, tokens = reply.text, (reply.prompt_tokens, reply.completion_tokens)
        await asyncio.to_thread(
            self._span,
            inp.run_id,
            inp.worker,
            SpanRecord(
                span_id=f"t{inp.turn}:model",
                sequence=inp.turn * 1000,
                span_type="llm_call",
                name=f"{inp.worker} turn {inp.turn}",
                input=inp.messages[-1].content if inp.messages else "",
                output=text,
                model_id=inp.model,
                prompt_tokens=tokens[0],
                completion_tokens=tokens[1],
                duration_ms=int((time.time() - started) * 1000),
                started_at=int(started * 1000),
            ),
        )
        return text

    @activity.defn(name="rlm_llm_query")
    async def llm_query(self, inp: LlmQueryInput) -> list[str]:
        """A cell's ``llm_query`` (or a batch of them), made by the workflow on its behalf."""
        if inp.model == OFFLINE_RLM_MODEL:
            return [scripted_model.answer(p) for p in inp.prompts]
        replies = await asyncio.gather(
            *(
                self._complete(inp.model, "", [ChatMessage(role="user", content=p)])
                for p in inp.prompts
            )
        )
        texts = [r.text for r in replies]
        if (size := json_size(texts)) > MAX_ANSWERS_BYTES:  # would not fit back through Temporal
            raise ApplicationError(
                f"the replies are {size:,} bytes; a cell receives at most "
                f"{MAX_ANSWERS_BYTES:,}. Ask for shorter answers, or fewer per call",
                type="ResultTooLarge",
                non_retryable=True,
            )
        return texts

    @activity.defn(name="rlm_run_cell")
    def run_cell(self, inp: CellInput) -> CellResult:
        """One cell in the sandbox. Store calls are answered here; creates get ids fixed by
        their place in the REPL (``creates_before`` + their order in the cell), so a cell run
        again — for the next answer it waited on, or after its worker died — makes nothing
        twice."""
        started = time.time()
        handler = _StoreHandler(self.store, inp)
        context = self.store.queries.payload(inp.context_hash)
        snapshot = self.store.queries.payload(inp.snapshot_hash) if inp.snapshot_hash else None
        outcome = self._run(inp, handler, context, snapshot)
        return self._result(inp, handler, outcome, started)

    def _run(self, inp: CellInput, handler: Any, context: Any, snapshot: Any) -> CellOutcome:
        """The cell in a directory made fresh for it, gone when it ends (a failure's kept only
        when the worker is told to)."""
        keep = self.settings.rlm_keep_failed_cells
        try:
            with cell_directory(self.cells_root, inp.run_id, inp.worker, keep_failed=keep) as cell:
                outcome = self._run_in(cell.path, inp, handler, context, snapshot, keep)
                cell.failed = outcome.error is not None
                return outcome
        except SandboxUnavailable as exc:  # no retry installs bubblewrap: say so, once
            raise ApplicationError(
                str(exc), type="SandboxUnavailable", non_retryable=True
            ) from None
        except CellDirectoryRefused as exc:  # no retry fixes the root either
            raise ApplicationError(
                str(exc), type="CellDirectoryRefused", non_retryable=True
            ) from None

    def _run_in(
        self,
        workdir: Path,
        inp: CellInput,
        handler: Any,
        context: Any,
        snapshot: Any,
        keep_failed: bool,
    ) -> CellOutcome:
        return run_cell(
            inp.code,
            workdir=workdir,
            handle=handler,
            store_methods=SHARED_METHODS if inp.config.shared_store else ISOLATED_METHODS,
            context=context,
            snapshot=snapshot,
            memo=inp.memo,
            can_recurse=inp.depth < inp.config.max_depth,
            limits=inp.config.cell_limits,
            alive=activity.heartbeat,
            isolation=self.settings.rlm_isolation,
            keep_failed=keep_failed,
        )

    def _result(
        self, inp: CellInput, handler: Any, outcome: CellOutcome, started: float
    ) -> CellResult:
        suspended = outcome.suspended
        if suspended is not None and suspended["kind"] == "rlm_worker":
            suspended = {**suspended, "args": self._worker_tasks(suspended["args"])}
        output = outcome.stdout + (f"\n{outcome.error}" if outcome.error else "")
        result = CellResult(
            output=output.strip(),
            error=outcome.error,
            final=outcome.final,
            final_set=outcome.final_set,
            snapshot_hash=self._put(outcome.snapshot) if outcome.snapshot else inp.snapshot_hash,
            creates=handler.creates,
            suspended=suspended,
        )
        shown = result.output
        if result.final_set:  # the run's answer, in the store beside the cell that gave it
            shown += f"\nFINAL_VAR: {json.dumps(result.final, default=str)}"
        waiting = f"(waits on {suspended['kind']})" if suspended else shown
        self._span(
            inp.run_id,
            inp.worker,
            SpanRecord(
                span_id=f"t{inp.turn}:cell:{len(inp.memo)}",
                sequence=inp.turn * 1000 + 1 + len(inp.memo),
                span_type="code_execution",
                name=f"{inp.worker} cell {inp.turn}",
                input=inp.code,
                output=waiting,
                tool_error=outcome.error,
                duration_ms=int((time.time() - started) * 1000),
                started_at=int(started * 1000),
            ),
        )
        return result

    @activity.defn(name="rlm_export_commit")
    def export_commit(self, inp: ExportInput) -> Commit:
        """A worker's findings as one commit for its parent (empty with the shared store: its
        findings are there already)."""
        if inp.shared:
            return Commit(commit_id=inp.worker)
        findings = _isolated(self.store, inp.run_id, inp.worker, inp.cards)
        return findings.export_commit(inp.worker)

    # ---- helpers -----------------------------------------------------------------------------

    def _worker_tasks(self, args: dict[str, Any]) -> dict[str, Any]:
        """A cell's worker tasks with their contexts in the payload store (ids through Temporal)."""
        tasks = []
        for task in args["tasks"]:
            cards = task.get("store_cards") or []
            tasks.append(
                {
                    "prompt": str(task.get("prompt", ""))[:20_000],
                    "context_hash": self._put(task.get("context")),
                    "store_cards": [Card.model_validate(c).model_dump() for c in cards],
                }
            )
        return {**args, "tasks": tasks}

    async def _complete(self, model: str, system: str, messages: list[ChatMessage]) -> Any:
        beating = asyncio.create_task(_heartbeat())
        try:
            return await self.models.for_model(model).complete(
                ModelRequest(
                    model=model,
                    system=system,
                    messages=messages,
                    max_tokens=MAX_REPLY_TOKENS,
                    temperature=0.0,
                )
            )
        except ModelError as exc:
            raise ApplicationError(str(exc), non_retryable=not exc.retryable) from exc
        finally:
            beating.cancel()

    def _put(self, value: Any) -> str:
        with write_transaction(self.store.engine) as conn:
            return payload_store.put(conn, value, int(time.time() * 1000))

    def _span(self, run_id: str, worker: str, span: SpanRecord) -> None:
        span = span.model_copy(update={"span_id": f"{run_id}/{worker}:{span.span_id}"})
        self.store.recorder.record_spans(
            session_id=run_id,
            lineage_id=worker_store_id(run_id, worker),
            attempt_id=f"rlm:{run_id}/{worker}",
            spans=[span],
        )


async def _heartbeat() -> None:
    """While a model call runs: a worker that dies mid-call is noticed within the timeout."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(1.0)


def _isolated(store: Store, run_id: str, worker: str, cards: list[Card]) -> DatabaseFindingsStore:
    findings = DatabaseFindingsStore(
        store.engine, worker_store_id(run_id, worker), store.read_engine
    )
    findings.external = frozenset(c.id for c in cards)
    return findings


class _StoreHandler:
    """Answers a cell's store calls: the REPL's own isolated store (with the parent's cards,
    read-only) or its proxy to the run's shared store."""

    def __init__(self, store: Store, inp: CellInput) -> None:
        self.inp = inp
        self.creates = 0
        self.cards = inp.cards
        if inp.config.shared_store:
            shared = DatabaseSharedStore(store.engine, inp.run_id, store.read_engine)
            self.shared: WorkerStoreProxy | None = WorkerStoreProxy(shared, inp.worker)
            self.findings = None
        else:
            self.shared = None
            self.findings = _isolated(store, inp.run_id, inp.worker, inp.cards)

    def __call__(self, method: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return getattr(self, f"_{method}")(*args, **kwargs)

    def _create(
        self,
        type: str,
        description: str,
        content: dict[str, Any] | None = None,
        backrefs: list[Any] | None = None,
        parents: list[str] | None = None,
        tags: list[str] | None = None,
        id: str | None = None,
    ) -> str:
        number = self.inp.creates_before + self.creates
        self.creates += 1
        refs = [SpanRef.model_validate(b) for b in backrefs or []]
        if self.shared is not None:
            return self.shared.shared.create(
                self.inp.worker,
                str(type),
                str(description),
                content=content,
                backrefs=refs,
                parents=parents,
                tags=tags,
                number=number,
            )
        assert self.findings is not None
        object_id = id or f"obj{number + 1}"
        made = self.findings.get(object_id)
        if made is not None and (made.type, made.description) == (type, description):
            return object_id  # made by an earlier run of this cell
        return self.findings.create(
            str(type), str(description), content, refs, parents, tags, id=object_id
        )

    def _get(self, object_id: str) -> dict[str, Any] | None:
        if self.shared is not None:  # ids there are {worker}_{n:06d}: a query by id, in SQL
            found = self.shared.view(f"id={object_id}")
            return found[0].model_dump(mode="json") if found else None
        assert self.findings is not None
        made = self.findings.get(object_id)
        if made is not None:
            return made.model_dump(mode="json")
        cards = [c for c in self._read_only_cards() if c["id"] == object_id]
        return cards[0] if cards else None

    def _view(self, query: str | None = None) -> list[dict[str, Any]]:
        return self._objects(query)

    def _card_view(self, query: str | None = None) -> list[dict[str, Any]]:
        return [
            {k: o[k] for k in ("id", "type", "description", "tags", "parents", "worker")}
            for o in self._objects(query)
        ]

    def _objects(self, query: str | None) -> list[dict[str, Any]]:
        if self.shared is not None:
            return [o.model_dump(mode="json") for o in self.shared.view(query)]
        assert self.findings is not None
        q = parse_query(query)
        read_only = [c for c in self._read_only_cards() if q.matches(StoreObject(**c))]
        return read_only + [o.model_dump(mode="json") for o in self.findings.view(query)]

    def _read_only_cards(self) -> list[dict[str, Any]]:
        """The parent's cards, as objects this REPL may read but not change."""
        return [
            {
                **StoreObject(
                    id=c.id, type=c.type, description=c.description, tags=c.tags
                ).model_dump(mode="json"),
                "read_only": True,
            }
            for c in self.cards
        ]

    def _view_others(self, query: str | None = None) -> list[dict[str, Any]]:
        assert self.shared is not None
        return [o.model_dump(mode="json") for o in self.shared.view_others(query)]

    def _invalidate(self, target_id: str, reason: str) -> None:
        assert self.shared is not None
        self.shared.invalidate(target_id, str(reason))

    def _events_since(self, seq: int = 0) -> list[dict[str, Any]]:
        assert self.shared is not None
        return [e.model_dump(mode="json") for e in self.shared.events_since(int(seq))]

    def _summary(self) -> dict[str, Any]:
        assert self.findings is not None
        return self.findings.summary()

    def _apply_commit(
        self, commit: Any, batch_prefix: str = "", batch_parent: str | None = None
    ) -> dict[str, Any]:
        assert self.findings is not None
        if isinstance(commit, str):
            parsed = parse_commit(commit, commit_id=f"c{self.inp.turn}")
        else:
            parsed = Commit.model_validate(commit)
        result = self.findings.apply_commit(
            parsed, batch_prefix=str(batch_prefix), batch_parent=batch_parent, worker=None
        )
        return result.model_dump(mode="json")
