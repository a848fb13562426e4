"""Reads of the dataset view (Agent Lightning): published resource sets, queued tasks and their
samples, the Rollout reports of completed tasks, and which tasks are done."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlmodel import col, select

from domain.lightning import ResourceSet
from domain.rollout_report import RolloutReport
from store.backends.dialect import backend
from store.tables import ResourceSetRow, RolloutRow, RolloutTaskRow
from store.views.reader import ViewReader

_QUEUED_TASKS = (
    "SELECT rollout_id, server_id, iteration, sample_hash, sample_bytes, resources_workflow_id,"
    " resources_version, client_task_queue, max_attempts, batch_id FROM rollout_tasks"
)
_PAYLOADS = "SELECT hash, content FROM payload_blobs"
_REPORT_HASHES = "SELECT id, report_hash FROM rollouts"


@dataclass(frozen=True, slots=True)
class QueuedTaskRecord:
    """A queued task as stored (``rollout_tasks``), its sample by hash."""

    rollout_id: str
    server_id: str
    iteration: int
    sample_hash: str
    sample_bytes: int
    resources_workflow_id: str
    resources_version: int
    client_task_queue: str
    max_attempts: int
    batch_id: str | None


class DatasetView(ViewReader):
    """Lightning resources, tasks and their reports."""

    def resource_set(self, server_id: str, version: int | None = None) -> ResourceSet:
        """A published resource set (the latest when ``version`` is None)."""
        query = select(ResourceSetRow).where(ResourceSetRow.server_id == server_id)
        if version is not None:
            query = query.where(ResourceSetRow.version == version)
        rows = self._all(query.order_by(col(ResourceSetRow.version).desc()).limit(1))
        if not rows:
            raise KeyError(f"no resources v{version} published by {server_id}")
        return ResourceSet.model_validate(self.payload(rows[0].content_hash))

    def lightning_reports(self, rollout_ids: list[str]) -> list[RolloutReport]:
        """The Rollout reports of completed tasks, in the order asked. Read together, 500 a
        query, and not kept: each is read once (an awaited dataset's 500 reports, read one by
        one through the payload cache, took 0.4 s of CPU)."""
        hashes = {
            rollout_id: digest
            for rollout_id, digest in self._by_keys(_REPORT_HASHES, "id", rollout_ids)
            if digest is not None
        }
        documents = self.payloads(sorted(set(hashes.values())))
        missing = set(hashes.values()) - documents.keys()
        if missing:
            raise KeyError(f"payload {min(missing)} is not in the store")
        return [
            RolloutReport.model_validate(documents[hashes[r]]) for r in rollout_ids if r in hashes
        ]

    def finished_rollouts(self, rollout_ids: list[str]) -> set[str]:
        """Those of ``rollout_ids`` that are done: completed or failed for good."""
        done: set[str] = set()
        with self.engine.connect() as conn:
            for i in range(0, len(rollout_ids), 500):
                rows = conn.execute(
                    select(RolloutRow.id).where(
                        col(RolloutRow.id).in_(rollout_ids[i : i + 500]),
                        col(RolloutRow.status).in_(("completed", "failed")),
                    )
                )
                done.update(row[0] for row in rows)
        return done

    def queued_tasks(self, rollout_ids: list[str]) -> dict[str, QueuedTaskRecord]:
        """Queued tasks by rollout id (those of ``rollout_ids`` that are in the store). Read
        for every client activity and every batch step: driver SQL into plain records."""
        return {
            r[0]: QueuedTaskRecord(*r)
            for r in self._by_keys(_QUEUED_TASKS, "rollout_id", rollout_ids)
        }

    def payloads(self, digests: list[str]) -> dict[str, Any]:
        """Payloads by hash, read together (uncached: the caller keeps what it wants)."""
        return {
            digest: json.loads(content)
            for digest, content in self._by_keys(_PAYLOADS, "hash", digests)
        }

    def _by_keys(self, sql: str, column: str, keys: list[str]) -> list[tuple[Any, ...]]:
        """``sql``'s rows where ``column`` is one of ``keys`` (500 at a time)."""
        rows: list[tuple[Any, ...]] = []
        with self.engine.connect() as conn:
            dialect = backend(conn.dialect.name)
            for i in range(0, len(keys), 500):
                where, params = dialect.any_of(column, keys[i : i + 500])
                result = conn.exec_driver_sql(
                    dialect.driver_text(f"{sql} WHERE {where}"), tuple(params)
                )
                rows += [tuple(r) for r in result]
        return rows

    def undispatched_tasks(self, server_id: str) -> int:
        """A server's queued tasks no batch has taken yet."""
        table = RolloutTaskRow.__table__  # type: ignore[attr-defined]
        with self.engine.connect() as conn:
            return conn.execute(
                select(func.count())
                .select_from(table)
                .where(table.c.server_id == server_id, table.c.batch_id.is_(None))
            ).scalar_one()

    def waiting_tasks(self, server_id: str) -> int:
        """A server's tasks waiting for a client: queued and not yet completed or failed."""
        with self.engine.connect() as conn:
            return conn.execute(
                select(func.count())
                .select_from(RolloutRow)
                .where(
                    RolloutRow.session_id == server_id,
                    col(RolloutRow.status).in_(("pending", "running")),
                )
            ).scalar_one()
