"""Hostile input, generated: feedback payloads through the update and the signal, and spec
files. The workflow never fails, every rejection says why, every spec error names its field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError

from client import start_session
from domain.feedback import parse_score
from domain.spec import SpecError, load_spec
from tests.conftest import awaiting, eventually, make_spec, wait_for_state
from workflows.lineage import LineageWorkflow

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=6,
)
feedback = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"score": json_values},
        optional={
            "comment": st.one_of(st.text(max_size=50), json_values),
            "rater": json_values,
            "cycle": json_values,
            "extra": json_values,
        },
    ),
    st.fixed_dictionaries({"kind": json_values, "content": json_values}),
)


def accepted(payload) -> bool:  # type: ignore[no-untyped-def]
    try:
        parse_score(payload)
        return True
    except ValueError:
        return False


@settings(max_examples=1, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(payloads=st.lists(feedback, min_size=60, max_size=60))
async def test_fuzzed_feedback_never_breaks_a_lineage(
    client, store, settings, run_worker, payloads
):
    spec = make_spec(options={"continueAsNewEvery": 1000})
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("lock", {"reason": "keep the agent fixed"})
        refused = 0
        for payload in payloads:  # the update: refused with a reason, or accepted
            try:
                await handle.execute_update(LineageWorkflow.submit_score, payload)
                assert accepted(payload)
            except WorkflowUpdateFailedError as err:
                assert not accepted(payload) and str(err.cause).strip()
                refused += 1
        for payload in payloads:  # the signal: recorded as rejected, or queued
            await handle.signal("score", payload)
        for name in ("directive", "lock", "unlock"):
            for payload in payloads[:20]:
                await handle.signal(name, payload)
        lineage = spec.lineage_id("A")
        invalid = sum(not accepted(p) for p in payloads)
        await eventually(
            lambda: (
                sum(r.kind == "score" for r in store.queries.rejected_feedback(lineage)) >= invalid
            ),
            timeout=60,
        )
        state = await handle.query(LineageWorkflow.state)
        description = await handle.describe()
    assert description.status == WorkflowExecutionStatus.RUNNING
    assert refused == invalid
    assert state.status in ("awaiting_score", "running", "training")
    rejections = store.queries.rejected_feedback(lineage)
    assert all(r.reason.strip() for r in rejections)
    assert state.cycle >= 1 + (len(payloads) - invalid)  # every accepted score moved a cycle


SPEC = {
    "name": "Fuzz",
    "inputs": ["Explain X."],
    "lineages": [
        {
            "label": "A",
            "agent": {
                "name": "a",
                "systemPrompt": "Be brief.",
                "parameters": {"model": "offline-1", "maxTokens": 300, "temperature": 0.5},
                "constraints": {"maxTokens": 1000, "forbiddenPatterns": ["x+"]},
            },
        }
    ],
}
PATHS = [
    ("name",),
    ("inputs",),
    ("lineages",),
    ("lineages", 0, "label"),
    ("lineages", 0, "agent", "systemPrompt"),
    ("lineages", 0, "agent", "parameters", "model"),
    ("lineages", 0, "agent", "parameters", "maxTokens"),
    ("lineages", 0, "agent", "parameters", "temperature"),
    ("lineages", 0, "agent", "constraints", "maxTokens"),
    ("lineages", 0, "agent", "constraints", "forbiddenPatterns"),
]


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(path=st.sampled_from(PATHS), value=json_values, drop=st.booleans())
def test_fuzzed_spec_errors_name_the_field(tmp_path_factory, path, value, drop):
    spec = json.loads(json.dumps(SPEC))
    node = spec
    for key in path[:-1]:
        node = node[key]
    if drop:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    file = Path(tmp_path_factory.mktemp("spec")) / "fuzz.json"
    file.write_text(json.dumps(spec))
    try:
        load_spec(file)
    except SpecError as exc:
        message = str(exc)
        assert str(file) in message
        named = {str(p) for p in path if isinstance(p, str)}
        assert any(name in message for name in named), message
    # else: the generated value happened to be valid, which is fine


@pytest.mark.parametrize("size", [4_001, 100_000])
def test_oversized_comments_are_bounded_with_a_clear_error(size):
    with pytest.raises(ValueError, match="comment: String should have at most 4000 characters"):
        parse_score({"score": 5, "comment": "x" * size})
