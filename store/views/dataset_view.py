"""Reads of the dataset view (Agent Lightning): published resource sets, queued tasks and their
samples, the Rollout reports of completed tasks, and which tasks are done."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func
from sqlmodel import col, select

from domain.lightning import ResourceSet
from domain.rollout_report import RolloutReport
from store.tables import PayloadBlob, ResourceSetRow, RolloutRow, RolloutTaskRow
from store.views.reader import ViewReader


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
        """The Rollout reports of completed tasks, in the order asked."""
        reports = {}
        for i in range(0, len(rollout_ids), 500):
            rows = self._all(
                select(RolloutRow).where(
                    col(RolloutRow.id).in_(rollout_ids[i : i + 500]),
                    col(RolloutRow.report_hash).is_not(None),
                )
            )
            for row in rows:
                reports[row.id] = RolloutReport.model_validate(self.payload(row.report_hash))
        return [reports[r] for r in rollout_ids if r in reports]

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

    def queued_tasks(self, rollout_ids: list[str]) -> dict[str, RolloutTaskRow]:
        """Queued tasks by rollout id (those of ``rollout_ids`` that are in the store)."""
        found: dict[str, RolloutTaskRow] = {}
        table = RolloutTaskRow.__table__  # type: ignore[attr-defined]
        with self.engine.connect() as conn:
            for i in range(0, len(rollout_ids), 500):
                rows = conn.execute(
                    table.select().where(col(table.c.rollout_id).in_(rollout_ids[i : i + 500]))
                ).mappings()
                found.update({r["rollout_id"]: RolloutTaskRow.model_construct(**r) for r in rows})
        return found

    def payloads(self, digests: list[str]) -> dict[str, Any]:
        """Payloads by hash, read together (uncached: the caller keeps what it wants)."""
        found: dict[str, Any] = {}
        blobs = PayloadBlob.__table__  # type: ignore[attr-defined]
        with self.engine.connect() as conn:
            for i in range(0, len(digests), 500):
                rows = conn.execute(
                    select(blobs.c.hash, blobs.c.content).where(
                        col(blobs.c.hash).in_(digests[i : i + 500])
                    )
                )
                found.update({digest: json.loads(content) for digest, content in rows})
        return found

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
