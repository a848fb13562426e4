"""Several raters per lineage (issue #63): the default single rater unchanged against a
baseline recorded at commit 3273986, and named raters with a quorum and a score window."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.histories.capture import lineage_scenario, store_story

DATA = Path(__file__).parent / "data"
BASELINE = DATA / "lineage-single-rater-3273986.store.json"
# Event types added after the baseline by other work (the input set as a lineage registers,
# the wishes a new version stands on): appended alongside, never in place of, the old ones
ADDED_SINCE_BASELINE = {"lineage.inputs_set", "lineage.wishes_standing"}
# Values that differ from run to run: clocks, trace ids, and ids hashed from a random session
VOLATILE = {"startedAt", "durationMs", "traceId", "otelSpanId", "timestamp"}
HASHED_IDS = {"evaluationId", "evaluation_id", "correctionId"}


def _normal(value: Any, session: str) -> Any:
    if isinstance(value, dict):
        return {
            k: ("<hash>" if k in HASHED_IDS else _normal(v, session))
            for k, v in value.items()
            if k not in VOLATILE
        }
    if isinstance(value, list):
        return [_normal(v, session) for v in value]
    if isinstance(value, str):
        return value.replace(session, "<session>")
    return value


def _without_new_optional_fields(old: Any, new: Any) -> Any:
    """``new`` less the fields the baseline has not and that hold no value (new optional
    fields, left at their defaults by a single-rater lineage)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {
            k: _without_new_optional_fields(old.get(k), v)
            for k, v in new.items()
            if k in old or v not in (None, [], {}, "", False)
        }
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [_without_new_optional_fields(o, n) for o, n in zip(old, new, strict=True)]
    return new


def _session(story: dict[str, Any]) -> str:
    created = (e for e in story["events"] if e["type"] == "session.created")
    return next(created)["payload"]["sessionId"]


async def test_a_single_rater_lineage_writes_what_it_wrote_at_3273986(
    client, store, settings, run_worker
):
    """The capture's story (rejections, a directive, a correction that runs cycle 2 again, a
    lock, a score through the update) on today's code: the same training events in the same
    order, the same payloads (ids and clocks aside, new optional fields aside) and the same
    agent versions, content hash for content hash, as recorded at commit 3273986."""
    baseline = json.loads(BASELINE.read_text())
    async with run_worker():
        await lineage_scenario(client, store, settings.task_queue)
    now = store_story(store)
    old_session, new_session = _session(baseline), _session(now)
    old = [_normal(e, old_session) for e in baseline["events"]]
    new = [_normal(e, new_session) for e in now["events"] if e["type"] not in ADDED_SINCE_BASELINE]
    assert [e["type"] for e in new] == [e["type"] for e in old]
    for before, after in zip(old, new, strict=True):
        assert _without_new_optional_fields(before, after) == before, before["type"]
    assert now["versions"] == baseline["versions"]
    assert re.fullmatch(r"s-[0-9a-f]{10}", new_session)
