"""Records of Agent Lightning dataset optimization: published resources, queued tasks and the
rollouts clients report."""

from __future__ import annotations

from typing import Any

from domain.events import ResourcesPublished, RolloutReported, TaskQueued
from domain.execution import SpanRecord, Usage
from store import payload_store
from store.attempt_events import completed_event, span_events
from store.event_log import NewEvent
from store.event_writer import EventWriter, now_ms


class DatasetRecords(EventWriter):
    """Lightning resources, tasks and rollout reports."""

    def publish_resources(self, *, server_id: str, version: int, resources: dict[str, Any]) -> str:
        """Append a resource set version (idempotent per server and version)."""
        digest = payload_store.encode(resources)[0]
        self._write(
            [
                NewEvent.of(
                    ResourcesPublished(server_id=server_id, version=version, content_hash=digest),
                    f"{server_id}@{version}",
                    session_id=server_id,
                    timestamp=now_ms(),
                )
            ],
            [resources],
        )
        return digest

    def record_task_queued(
        self,
        *,
        server_id: str,
        rollout_id: str,
        iteration: int,
        sample: dict[str, Any],
        resources_version: int,
    ) -> str:
        digest = payload_store.encode(sample)[0]
        self._write(
            [
                NewEvent.of(
                    TaskQueued(
                        rollout_id=rollout_id,
                        iteration=iteration,
                        sample_hash=digest,
                        resources_version=resources_version,
                    ),
                    rollout_id,
                    session_id=server_id,
                    lineage_id=server_id,
                    timestamp=now_ms(),
                )
            ],
            [sample],
        )
        return digest

    def record_task_report(
        self,
        *,
        server_id: str,
        rollout_id: str,
        attempt_id: str,
        client_id: str,
        report: dict[str, Any],
        final_reward: float | None,
        spans: list[SpanRecord],
        usage: Usage,
        duration_ms: int,
    ) -> None:
        """A client's Rollout report: its spans, the attempt's completion, the rollout done."""
        ts = now_ms()
        refs = {
            "session_id": server_id,
            "lineage_id": server_id,
            "attempt_id": attempt_id,
            "timestamp": ts,
        }
        span_batch = span_events(spans, refs)
        report_hash = payload_store.encode(report)[0]
        completed = completed_event(attempt_id, report_hash, usage, duration_ms, spans, refs)
        reported = NewEvent.of(
            RolloutReported(
                rollout_id=rollout_id,
                final_reward=final_reward,
                report_hash=report_hash,
                client_id=client_id,
            ),
            rollout_id,
            **refs,
        )
        self._write([*span_batch, completed, reported], [report])
