"""Records of Agent Lightning dataset optimization: published resources, queued tasks and the
rollouts clients report."""

from __future__ import annotations

from typing import Any

from domain.events import ResourcesPublished, RolloutReported, TaskQueued
from domain.execution import SpanRecord, Usage
from store.eventstore import payload_store
from store.eventstore.event_log import NewEvent
from store.eventstore.event_writer import EventWriter, now_ms
from store.records.attempt_events import completed_event, span_events


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

    def record_task_queued(self, **task: Any) -> str:
        return self.record_tasks_queued([task])[0]

    def record_tasks_queued(self, tasks: list[dict[str, Any]]) -> list[str]:
        """Tasks queued together (server_id, rollout_id, iteration, sample, resources_version
        each), in one transaction; returns their samples' content hashes."""
        ts = now_ms()
        events, digests = [], []
        for t in tasks:
            digest = payload_store.encode(t["sample"])[0]
            digests.append(digest)
            events.append(
                NewEvent.of(
                    TaskQueued(
                        rollout_id=t["rollout_id"],
                        iteration=t["iteration"],
                        sample_hash=digest,
                        resources_version=t["resources_version"],
                    ),
                    t["rollout_id"],
                    session_id=t["server_id"],
                    lineage_id=t["server_id"],
                    timestamp=ts,
                )
            )
        self._write(events, [t["sample"] for t in tasks])
        return digests

    def record_task_report(self, **report: Any) -> None:
        self.record_task_reports([report])

    def record_task_reports(self, reports: list[dict[str, Any]]) -> None:
        """Clients' Rollout reports (server_id, rollout_id, attempt_id, client_id, report,
        final_reward, spans, usage, duration_ms each): spans, the attempt's completion, the
        rollout done; many in one transaction."""
        ts = now_ms()
        events: list[NewEvent] = []
        for r in reports:
            refs = {
                "session_id": r["server_id"],
                "lineage_id": r["server_id"],
                "attempt_id": r["attempt_id"],
                "timestamp": ts,
            }
            spans: list[SpanRecord] = r["spans"]
            usage: Usage = r["usage"]
            report_hash = payload_store.encode(r["report"])[0]
            events += span_events(spans, refs)
            events.append(
                completed_event(r["attempt_id"], report_hash, usage, r["duration_ms"], spans, refs)
            )
            events.append(
                NewEvent.of(
                    RolloutReported(
                        rollout_id=r["rollout_id"],
                        final_reward=r["final_reward"],
                        report_hash=report_hash,
                        client_id=r["client_id"],
                    ),
                    r["rollout_id"],
                    **refs,
                )
            )
        self._write(events, [r["report"] for r in reports])
