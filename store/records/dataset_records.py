"""Records of Agent Lightning dataset optimization: published resources, queued tasks and the
rollouts clients report."""

from __future__ import annotations

from dataclasses import dataclass

from domain.events import ResourcesPublished, RolloutReported, TaskQueued
from domain.execution import SpanRecord, Usage
from domain.lightning import ResourceSet, RolloutTask
from domain.rollout_report import RolloutReport
from store.eventstore import payload_store
from store.eventstore.event_log import EventRefs, NewEvent
from store.eventstore.event_writer import EventWriter, now_ms
from store.records.attempt_events import completed_event, span_events


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskReport:
    """A client's Rollout report of one attempt at a queued task, with the spans it traced and
    the usage and time its metrics give."""

    server_id: str
    rollout_id: str
    attempt_id: str
    client_id: str
    report: RolloutReport
    spans: list[SpanRecord]
    usage: Usage
    duration_ms: int


class DatasetRecords(EventWriter):
    """Lightning resources, tasks and rollout reports."""

    def publish_resources(self, *, server_id: str, version: int, resource_set: ResourceSet) -> str:
        """Append a resource set version (idempotent per server and version)."""
        resources = resource_set.model_dump(mode="json")
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

    def record_tasks_queued(self, tasks: list[RolloutTask]) -> list[str]:
        """Tasks queued together, in one transaction; returns their samples' content hashes."""
        ts = now_ms()
        events, digests = [], []
        for t in tasks:
            digest = payload_store.encode(t.sample)[0]
            digests.append(digest)
            events.append(
                NewEvent.of(
                    TaskQueued(
                        rollout_id=t.rollout_id,
                        iteration=t.iteration,
                        sample_hash=digest,
                        resources_version=t.resources_version,
                    ),
                    t.rollout_id,
                    session_id=t.server_id,
                    lineage_id=t.server_id,
                    timestamp=ts,
                )
            )
        self._write(events, [t.sample for t in tasks])
        return digests

    def record_task_reports(self, reports: list[TaskReport]) -> None:
        """Clients' Rollout reports: spans, the attempt's completion, the rollout done; many in
        one transaction."""
        ts = now_ms()
        events: list[NewEvent] = []
        documents = []
        for r in reports:
            refs: EventRefs = {
                "session_id": r.server_id,
                "lineage_id": r.server_id,
                "attempt_id": r.attempt_id,
                "timestamp": ts,
            }
            document = r.report.model_dump(mode="json")
            documents.append(document)
            report_hash = payload_store.encode(document)[0]
            events += span_events(r.spans, refs)
            events.append(
                completed_event(r.attempt_id, report_hash, r.usage, r.duration_ms, r.spans, refs)
            )
            events.append(
                NewEvent.of(
                    RolloutReported(
                        rollout_id=r.rollout_id,
                        final_reward=r.report.final_reward,
                        report_hash=report_hash,
                        client_id=r.client_id,
                    ),
                    r.rollout_id,
                    **refs,
                )
            )
        self._write(events, documents)
