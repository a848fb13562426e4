"""Process configuration, read once from the environment by workers and the starter.

Workflow code never reads this: what a workflow needs is passed in as input.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, SecretStr

DEFAULT_TASK_QUEUE = "training-camp"
DEFAULT_DATABASE_URL = "sqlite:///.training-camp/training-camp.db"


class Settings(BaseModel):
    temporal_address: str = "localhost:7233"
    temporal_namespace: str = "default"
    task_queue: str = DEFAULT_TASK_QUEUE
    database_url: str = DEFAULT_DATABASE_URL
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    anthropic_max_retries: int = 2
    max_concurrent_activities: int = 50
    # The worker's workflow cache and pollers (worker.py, deploy/README.md "Many waiting
    # lineages"): a cached lineage answers its next score without replaying its history and
    # costs the worker memory while it waits; an evicted one replays the history of its run.
    max_cached_workflows: int = 1000
    workflow_task_pollers: int = 5
    activity_task_pollers: int = 5
    # Temporal's OpenTelemetry interceptor (client, workflow and activity spans, one trace with
    # the agent's). Off unless traces leave the process: spans nobody receives cost every
    # activity a span and every command a header.
    temporal_tracing: bool = False
    # Run LineageWorkflow inside Temporal's workflow sandbox too (every other workflow always
    # runs there). Off by default: see the comment on LineageWorkflow's definition. On, the
    # sandbox refuses a non-deterministic call the moment lineage code makes it: use it while
    # changing workflows/lineage.py (the test suite replays lineage histories in it anyway).
    workflow_sandbox: bool = False
    # How RLM cells (model-written code) are isolated: a bubblewrap sandbox, or — only when the
    # operator opts in by name — the in-process audit hook alone (see rlm/sandbox.py)
    rlm_isolation: Literal["bubblewrap", "audit-hook-only"] = "bubblewrap"
    # Where each cell's fresh directory is made: a root only the worker can write (made 0700 if
    # missing, refused when it is a symlink, someone else's or open to others). None: a root of
    # this user's under the system's temporary directory
    rlm_cells_dir: str | None = None
    # Keep a failed cell's directory (for debugging) instead of removing it as every other is
    rlm_keep_failed_cells: bool = False
    # The reader learns from every session's corrections, not only the scored lineage's
    # session's (raters who share habits across sessions; off: one team's idiom stays theirs)
    shared_corrections: bool = False

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        key = env.get("ANTHROPIC_API_KEY")
        return cls(
            temporal_address=env.get("TEMPORAL_ADDRESS", "localhost:7233"),
            temporal_namespace=env.get("TEMPORAL_NAMESPACE", "default"),
            task_queue=env.get("TRAINING_CAMP_TASK_QUEUE", DEFAULT_TASK_QUEUE),
            database_url=env.get("TRAINING_CAMP_DATABASE_URL", DEFAULT_DATABASE_URL),
            anthropic_api_key=SecretStr(key) if key else None,
            anthropic_base_url=env.get("ANTHROPIC_BASE_URL") or None,
            anthropic_max_retries=int(env.get("ANTHROPIC_MAX_RETRIES", "2")),
            max_concurrent_activities=int(env.get("TRAINING_CAMP_MAX_CONCURRENT_ACTIVITIES", "50")),
            max_cached_workflows=int(env.get("TRAINING_CAMP_MAX_CACHED_WORKFLOWS", "1000")),
            workflow_task_pollers=int(env.get("TRAINING_CAMP_WORKFLOW_TASK_POLLERS", "5")),
            activity_task_pollers=int(env.get("TRAINING_CAMP_ACTIVITY_TASK_POLLERS", "5")),
            temporal_tracing=_flag(env, "TRAINING_CAMP_TEMPORAL_TRACING", otlp_configured()),
            workflow_sandbox=_flag(env, "TRAINING_CAMP_WORKFLOW_SANDBOX", False),
            rlm_isolation=_isolation(env),
            rlm_cells_dir=env.get("TRAINING_CAMP_RLM_CELLS_DIR") or None,
            rlm_keep_failed_cells=_flag(env, "TRAINING_CAMP_RLM_KEEP_FAILED_CELLS", False),
            shared_corrections=_flag(env, "TRAINING_CAMP_SHARED_CORRECTIONS", False),
        )


def _isolation(env: Mapping[str, str]) -> Literal["bubblewrap", "audit-hook-only"]:
    value = (env.get("TRAINING_CAMP_RLM_ISOLATION") or "bubblewrap").strip().lower()
    if value == "bubblewrap":
        return "bubblewrap"
    if value == "audit-hook-only":
        return "audit-hook-only"
    raise ValueError(
        "TRAINING_CAMP_RLM_ISOLATION: expected bubblewrap (the default) or audit-hook-only, "
        f"got {value!r}"
    )


def otlp_configured() -> bool:
    """Whether spans leave the process (the OpenTelemetry SDK's own variables)."""
    env = os.environ
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    lowered = (value or "").strip().lower()
    if not lowered:
        return default
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}: expected true/false (or 1/0), got {value!r}")
